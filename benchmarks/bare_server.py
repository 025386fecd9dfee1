"""A bare aiohttp server: the ceiling a catalog server can reach on this machine.

It answers the URLs the benchmarks ask shardcat for, each with a constant JSON body of a
given size and no other work (no auth, no routing beyond aiohttp's own, no serialisation
per request; a POST body is read and ignored):

    GET  /api/2.1/unity-catalog/tables/{full_name}  -> --get-size bytes      (like getTable)
    GET  /api/2.1/unity-catalog/tables              -> --list-size bytes     (like listTables)
    POST /api/2.1/unity-catalog/resolve             -> --resolve-size bytes  (like a batch resolve)

    python -m benchmarks.bare_server --port 0 --get-size 2500 --list-size 250000 --resolve-size 125000

With `--replay DIR` it answers with recorded bodies instead: `DIR/resolve.json` for every
resolve and `DIR/tables/{full_name}.json` for getTable (404 for a name with no file), so
a benchmark can measure the same bytes a catalog sent, minus all of the catalog's work.

With `--front` the constant bodies come from the fronts' HTTP/1.1 server (shardcat/web/http1.py)
instead of aiohttp.web: the ceiling of a front that answers a request itself.

prints `bare listening on http://HOST:PORT` once it accepts connections and stops on SIGTERM/SIGINT.
It runs on uvloop, as `shardcat serve` does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path

import uvloop
from aiohttp import web

from shardcat.web import http1
from shardcat.web.shard_client import Answer
from shardcat.web.wire import PREFIX


def json_body(size: int) -> bytes:
    """A valid JSON object of exactly `size` bytes (at least 12)."""
    overhead = len(json.dumps({"pad": ""}, separators=(",", ":")))
    body = json.dumps({"pad": "x" * max(0, size - overhead)}, separators=(",", ":")).encode()
    assert len(body) == max(size, overhead), (len(body), size)
    return body


def make_app(get_size: int, list_size: int, resolve_size: int) -> web.Application:
    get_body, list_body, resolve_body = json_body(get_size), json_body(list_size), json_body(resolve_size)

    async def get_table(request: web.Request) -> web.Response:
        return web.Response(body=get_body, content_type="application/json")

    async def list_tables(request: web.Request) -> web.Response:
        return web.Response(body=list_body, content_type="application/json")

    async def resolve(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=resolve_body, content_type="application/json")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(body=b'{"status":"ok"}', content_type="application/json")

    app = web.Application()
    app.add_routes([web.get(f"{PREFIX}/tables/{{full_name}}", get_table), web.get(f"{PREFIX}/tables", list_tables),
                    web.post(f"{PREFIX}/resolve", resolve), web.get("/healthz", healthz)])
    return app


def make_front_answer(get_size: int, list_size: int, resolve_size: int):
    """The same constant answers as `make_app`'s, for the fronts' HTTP/1.1 server."""
    answers = {"get": json_body(get_size), "list": json_body(list_size), "resolve": json_body(resolve_size)}
    tables = f"{PREFIX}/tables"

    async def answer(request: http1.Request) -> Answer:
        path = request.path
        if request.method == "GET" and path.startswith(tables + "/"):
            body = answers["get"]
        elif request.method == "GET" and path == tables:
            body = answers["list"]
        elif request.method == "POST" and path == f"{PREFIX}/resolve":
            body = answers["resolve"]
        else:
            return http1.error_answer(404, "ENDPOINT_NOT_FOUND", "No such route on the bare server.")
        return Answer(200, {"Content-Type": "application/json"}, body)

    return answer


def make_replay_app(recorded: Path) -> web.Application:
    resolve_body = (recorded / "resolve.json").read_bytes()
    tables = {f.stem: f.read_bytes() for f in (recorded / "tables").glob("*.json")}

    async def get_table(request: web.Request) -> web.Response:
        body = tables.get(request.match_info["full_name"])
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="application/json")

    async def resolve(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=resolve_body, content_type="application/json")

    app = web.Application()
    app.add_routes([web.get(f"{PREFIX}/tables/{{full_name}}", get_table), web.post(f"{PREFIX}/resolve", resolve)])
    return app


async def serve(app: web.Application, host: str, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    await listening_until_signalled(host, site._server.sockets[0].getsockname()[1])
    await runner.cleanup()


async def serve_front(answer, host: str, port: int) -> None:
    server = http1.Server(answer)
    await listening_until_signalled(host, await server.listen(host, port))
    server.close()


async def listening_until_signalled(host: str, port: int) -> None:
    """Say where the server listens, then wait for SIGTERM or SIGINT."""
    print(f"bare listening on http://{host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--replay", type=Path, default=None,
                        help="answer with the bodies recorded in this directory (resolve.json, tables/NAME.json)")
    parser.add_argument("--get-size", "--size", dest="get_size", type=int, default=None,
                        help="bytes of the body for GET .../tables/{full_name}")
    parser.add_argument("--list-size", type=int, default=None,
                        help="bytes of the body for GET .../tables (default: --get-size)")
    parser.add_argument("--resolve-size", type=int, default=None,
                        help="bytes of the body for POST .../resolve (default: --get-size)")
    parser.add_argument("--front", action="store_true",
                        help="constant bodies from the fronts' HTTP/1.1 server instead of aiohttp.web")
    args = parser.parse_args(argv)
    if args.replay is None and args.get_size is None:
        parser.error("give --get-size (constant bodies) or --replay DIR (recorded ones)")
    if args.front:
        if args.replay is not None:
            parser.error("--front answers constant bodies only")
        uvloop.run(serve_front(make_front_answer(args.get_size, args.list_size or args.get_size,
                                                 args.resolve_size or args.get_size), args.host, args.port))
        return
    if args.replay is not None:
        app = make_replay_app(args.replay)
    else:
        app = make_app(args.get_size, args.list_size or args.get_size, args.resolve_size or args.get_size)
    uvloop.run(serve(app, args.host, args.port))


if __name__ == "__main__":
    main()
