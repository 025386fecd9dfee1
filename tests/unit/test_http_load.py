"""The benchmarks' load client (benchmarks/http_load.py) against real servers on loopback: it must
frame every kind of answer right, reuse its connection, and turn every failure into an error."""

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from benchmarks import http_load


async def send(client: http_load.Client, request: http_load.Prepared) -> int:
    return await asyncio.wait_for(client.send(request), 5)     # a framing bug must fail, not hang


async def _aiohttp_server() -> TestServer:
    async def fixed(request):
        return web.Response(body=b'{"a": 1}', content_type="application/json")

    async def chunked(request):
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for part in (b'{"parts": [', b"1, 2", b"]}"):
            await response.write(part)
        await response.write_eof()
        return response

    async def echo(request):
        return web.json_response({"got": (await request.read()).decode(), "auth": request.headers["Authorization"]},
                                 status=201)

    async def missing(request):
        raise web.HTTPNotFound()

    app = web.Application()
    app.add_routes([web.get("/fixed", fixed), web.get("/chunked", chunked), web.post("/echo", echo),
                    web.get("/missing", missing)])
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def test_statuses_of_fixed_chunked_and_posted_answers_on_one_connection():
    server = await _aiohttp_server()
    client = http_load.Client()
    peers = []
    try:
        headers = {"Authorization": "Bearer t"}
        for _ in range(3):
            for path, method, body, status in (("/fixed", "GET", None, 200), ("/chunked", "GET", None, 200),
                                               ("/echo", "POST", b"hello", 201), ("/missing", "GET", None, 404)):
                request = http_load.prepare(method, URL(str(server.make_url(path))), headers, body)
                assert await send(client, request) == status
                conn = next(iter(client._connections.values()))
                peers.append(conn.transport.get_extra_info("sockname"))
                assert not conn.buf     # the whole answer was consumed, nothing of the next one
        assert len(set(peers)) == 1     # keep-alive: twelve requests, one connection
    finally:
        client.close()
        await server.close()


@pytest.mark.parametrize("answer, expected", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", 200),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: 1\r\n\r\n", 200),
    (b"HTTP/1.1 204 No Content\r\n\r\n", 204),
])
async def test_framing_of_raw_answers_and_a_reconnect_after_close(answer, expected):
    connections = []

    async def serve(reader, writer):
        connections.append(writer)
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(answer)
            if b"close" in answer:
                writer.close()
                return

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = http_load.Client()
    try:
        request = http_load.prepare("GET", URL(f"http://127.0.0.1:{port}/x"), {}, None)
        assert await send(client, request) == expected
        assert await send(client, request) == expected
        assert len(connections) == (2 if b"close" in answer else 1)
    finally:
        client.close()
        server.close()


async def test_garbage_a_dropped_connection_and_a_stall_are_errors():
    async def serve(reader, writer):
        path = (await reader.readuntil(b"\r\n\r\n")).split()[1]
        if path == b"/garbage":
            writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        elif path == b"/drop":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
            writer.close()
        else:
            await asyncio.sleep(30)     # a stall: only the watchdog ends it

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = http_load.Client()
    watchdog = asyncio.ensure_future(http_load.watchdog([client], 0.2))
    try:
        with pytest.raises(http_load.BadResponse):
            await send(client, http_load.prepare("GET", URL(f"http://127.0.0.1:{port}/garbage"), {}, None))
        with pytest.raises(ConnectionResetError):
            await send(client, http_load.prepare("GET", URL(f"http://127.0.0.1:{port}/drop"), {}, None))
        with pytest.raises(TimeoutError):
            await send(client, http_load.prepare("GET", URL(f"http://127.0.0.1:{port}/stall"), {}, None))
        with pytest.raises(ConnectionRefusedError):
            await send(client, http_load.prepare("GET", URL("http://127.0.0.1:1/"), {}, None))
    finally:
        watchdog.cancel()
        client.close()
        server.close()
