"""The same constant answers as benchmarks/bare_server.py from HTTP/1.1 servers that could stand in
for the fronts' own (shardcat/web/http1.py): the candidates bench_http_servers measures side by side.

    python -m benchmarks.http_servers SERVER --get-size 2400 --list-size 236000

SERVER is one of `SERVERS`: `http1` (the fronts' server, with its limits), `aiohttp-server`
(aiohttp's low-level server, web_server.Server, on its C parser: no routing, no middlewares, no
app), `uvicorn-httptools` and `uvicorn-h11` (uvicorn's two HTTP/1.1 protocols around a bare ASGI
callable). Each answers getTable URLs, listTables and POST resolve as the bare server does, with
no other work. Prints `bare listening on http://HOST:PORT` and stops on SIGTERM/SIGINT, on uvloop.
"""

from __future__ import annotations

import argparse
import asyncio
import socket

import uvloop

from .bare_server import PREFIX, json_body, listening_until_signalled, make_front_answer, serve_front

SERVERS = ("http1", "aiohttp-server", "uvicorn-httptools", "uvicorn-h11")
BACKLOG = 1024


def bodies(get_size: int, list_size: int, resolve_size: int):
    """method, path -> the constant body (None: 404), as make_front_answer routes."""
    get, listing, resolve = json_body(get_size), json_body(list_size), json_body(resolve_size)
    tables = f"{PREFIX}/tables"

    def body_for(method: str, path: str) -> bytes | None:
        if method == "GET" and path.startswith(tables + "/"):
            return get
        if method == "GET" and path == tables:
            return listing
        if method == "POST" and path == f"{PREFIX}/resolve":
            return resolve
        return None

    return body_for


async def serve_aiohttp_server(body_for, host: str, port: int) -> None:
    from aiohttp import web, web_server

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        body = body_for(request.method, request.path)
        if request.method == "POST":
            await request.read()
        if body is None:
            return web.Response(status=404, body=b'{"error_code":"ENDPOINT_NOT_FOUND"}',
                                content_type="application/json")
        return web.Response(body=body, content_type="application/json")

    server = web_server.Server(handler, access_log=None)
    listening = await asyncio.get_running_loop().create_server(server, host, port, backlog=BACKLOG)
    await listening_until_signalled(host, listening.sockets[0].getsockname()[1])
    listening.close()
    await server.shutdown(1.0)


async def serve_uvicorn(body_for, host: str, port: int, protocol: str) -> None:
    import uvicorn

    async def app(scope, receive, send) -> None:
        body = body_for(scope["method"], scope["path"])
        more = True
        while more and scope["method"] == "POST":
            more = (await receive()).get("more_body", False)
        status = 200 if body is not None else 404
        body = body if body is not None else b'{"error_code":"ENDPOINT_NOT_FOUND"}'
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(app, http=protocol, lifespan="off", access_log=False, log_level="warning",
                            backlog=BACKLOG, server_header=False, date_header=True)
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None       # ours below stop it
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.05)
    await listening_until_signalled(host, sock.getsockname()[1])
    server.should_exit = True
    await serving


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http_servers", description=__doc__.splitlines()[0])
    parser.add_argument("server", choices=SERVERS)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--get-size", type=int, required=True)
    parser.add_argument("--list-size", type=int, required=True)
    parser.add_argument("--resolve-size", type=int, default=None, help="default: --get-size")
    args = parser.parse_args(argv)
    sizes = (args.get_size, args.list_size, args.resolve_size or args.get_size)
    if args.server == "http1":
        uvloop.run(serve_front(make_front_answer(*sizes), args.host, args.port))
    elif args.server == "aiohttp-server":
        uvloop.run(serve_aiohttp_server(bodies(*sizes), args.host, args.port))
    else:
        uvloop.run(serve_uvicorn(bodies(*sizes), args.host, args.port, args.server.removeprefix("uvicorn-")))


if __name__ == "__main__":
    main()
