"""The fronts' HTTP limits (shardcat/router/http_limits.py, enforced by router/http1.py): attackers
that stream an oversized header slowly, send a huge header fast, or never finish their headers
are refused (431, 408) and disconnected while a normal client's requests keep succeeding, through
the router's front and straight to a shard's front, and the server never holds more than a
head's limit for them. Then each limit on its own, on a bare server."""

from __future__ import annotations

import asyncio
import dataclasses

import orjson
import pytest
from yarl import URL

from shardcat.web import http1
from shardcat.web.http_limits import HttpLimits
from shardcat.web.shard_client import Answer
from tests.conftest import PREFIX, new_workspace, serving

# Short times so the test does not wait long; every size limit at its default.
TIGHT = dataclasses.replace(HttpLimits(), header_timeout=3.0, linger=2.0)

cluster = serving("http-limits", shards=1, http_limits=TIGHT)


async def connect(url: str):
    url = URL(url)
    return await asyncio.open_connection(url.host, url.port)


def parsed(raw: bytes) -> tuple[int, dict]:
    """(status, JSON body) of one raw answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), orjson.loads(body)


async def flood(url: str, first: bytes, piece: bytes, pieces: int, pause: float) -> bytes:
    """Sends `first`, then `piece` after `piece` until the server ends the connection; what it answered."""
    reader, writer = await connect(url)
    answered = asyncio.create_task(reader.read())       # everything until the server's end
    try:
        writer.write(first)
        for _ in range(pieces):
            if answered.done():
                break
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(pause)
    except ConnectionError:
        pass
    try:
        return await asyncio.wait_for(answered, 30)
    finally:
        writer.close()


async def never_finishes(url: str) -> bytes:
    reader, writer = await connect(url)
    writer.write(f"GET {PREFIX}/catalogs HTTP/1.1\r\nHost: x\r\n".encode())
    try:
        return await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()


async def attacked(listening: http1.Listening, ws, monkeypatch) -> None:
    """Three attackers at once on `listening`'s front, and a normal client's reads all the while."""
    server = listening.server
    monkeypatch.setattr(server, "limits", TIGHT)
    monkeypatch.setattr(server, "largest_buffered", 0)
    refused_before = dict(server.refused)
    status, _ = await ws.call("POST", "/catalogs", json={"name": "c"})
    assert status == 200
    header = f"GET {PREFIX}/catalogs HTTP/1.1\r\nHost: x\r\nX-Flood: ".encode()
    attackers = asyncio.gather(
        flood(ws.url, header, b"a" * 2048, 100, 0.01),           # 200 KiB, slowly
        flood(ws.url, header, b"a" * (1 << 20), 256, 0),          # up to 256 MiB, as fast as it goes
        never_finishes(ws.url))
    statuses = []
    while not attackers.done() or len(statuses) < 5:
        status, body = await ws.call("GET", "/catalogs/c")
        statuses.append(status)
        assert status == 200 and body["name"] == "c", body
    slow, fast, unfinished = await attackers
    for raw, expected in ((slow, 431), (fast, 431), (unfinished, 408)):
        status, body = parsed(raw)          # one answer, then the end of the connection (read() returned)
        assert status == expected and body["error_code"] == "REQUEST_LIMIT_EXCEEDED", raw[:300]
        assert raw.count(b"HTTP/1.1 ") == 1 and b"Connection: close" in raw
    assert server.refused[431] - refused_before.get(431, 0) == 2
    assert server.refused[408] - refused_before.get(408, 0) == 1
    # what the server held for any request not yet whole (the attackers' heads): one head's limit at most
    assert 0 < server.largest_buffered <= TIGHT.max_head
    assert all(s == 200 for s in statuses)


async def test_attackers_do_not_hold_up_others_through_the_router_front(cluster, http, tmp_path, monkeypatch):
    assert cluster.front.server.limits == TIGHT         # as `shardcat serve`'s ServeConfig gave them
    await attacked(cluster.front, await new_workspace(cluster, http, tmp_path), monkeypatch)


async def test_attackers_do_not_hold_up_others_straight_to_a_shard_front(server, http, tmp_path, monkeypatch):
    assert type(server.front.front).__name__ == "ShardFront"
    await attacked(server.front, await new_workspace(server, http, tmp_path), monkeypatch)


async def test_the_app_behind_takes_what_the_front_lets_through(cluster, http, tmp_path):
    """A 16 KiB header is within the front's limits; the app it is relayed to must take it too
    (aiohttp's own default is 8 KiB a header, and would answer a plain-text 400)."""
    ws = await new_workspace(cluster, http, tmp_path)
    status, body = await ws.call("GET", "/metastores", headers={"X-Big": "b" * (16 << 10)})
    assert status == 200 and "metastores" in body
    status, body = await ws.call("GET", "/catalogs", headers={"X-Big": "b" * (40 << 10)})
    assert status == 431 and body["error_code"] == "REQUEST_LIMIT_EXCEEDED"
    status, body = await ws.call("GET", "/catalogs?x=" + "a" * (9 << 10))
    assert status == 414 and body["error_code"] == "REQUEST_LIMIT_EXCEEDED"


# -- each limit on a bare server (no catalog behind it)

SMALL = HttpLimits(max_request_line=100, max_header_bytes=200, max_headers=5, max_body_bytes=50,
                   header_timeout=0.5, body_timeout=0.5, keep_alive=0.5, linger=0.5)


@pytest.fixture
async def bare():
    async def answer(request: http1.Request) -> Answer:
        return Answer(200, {"content-type": "text/plain"}, f"{request.method} {request.raw_path} "
                                                           f"{request.body.decode()}".encode())
    server = http1.Server(answer, SMALL)
    port = await server.listen("127.0.0.1", 0)
    yield server, f"http://127.0.0.1:{port}"
    server.close()


async def exchange(url: str, raw: bytes, *, half_close: bool = False) -> bytes:
    """Sends `raw`; everything answered until the server closes."""
    reader, writer = await connect(url)
    writer.write(raw)
    if half_close:
        writer.write_eof()
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def answers(raw: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of each answer in `raw`."""
    out = []
    while raw:
        head, _, raw = raw.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.startswith(b"Content-Length")))
        out.append((int(head.split(b" ")[1]), raw[:length]))
        raw = raw[length:]
    return out


@pytest.mark.parametrize("raw, status", [
    (b"GET /" + b"a" * 200 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 300 + b"\r\n\r\n", 431),
    (b"GET / HTTP/1.1\r\n" + b"X: a\r\n" * 6 + b"\r\n", 431),
    (b"GET / HTTP/1.1\r\nHost: x\r\n", 408),                                   # never finished
    (b"POST / HTTP/1.1\r\nContent-Length: 51\r\nExpect: 100-continue\r\n\r\n", 413),   # refused before the body
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1e\r\n" + b"a" * 30 + b"\r\n1e\r\n" + b"a" * 30
     + b"\r\n0\r\n\r\n", 413),
    (b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", 408),                 # a body that stalls
    (b"NOT HTTP\r\n\r\n", 400),
])
async def test_each_limit_is_answered_after_the_answers_due_then_the_connection_ends(bare, raw, status):
    server, url = bare
    out = answers(await exchange(url, b"GET /first HTTP/1.1\r\n\r\n" + raw))
    assert [s for s, _ in out] == [200, status] and out[0][1] == b"GET /first "
    error = orjson.loads(out[1][1])
    assert set(error) == {"error_code", "message"} and error["message"]
    assert server.refused[status] == 1 and server.largest_buffered <= SMALL.max_head


async def test_requests_within_the_limits_are_answered(bare):
    server, url = bare
    at_limits = (b"POST /" + b"a" * (100 - len(b"POST / HTTP/1.1")) + b" HTTP/1.1\r\n" + b"X: a\r\n" * 4
                 + b"Content-Length: 50\r\n\r\n" + b"b" * 50)
    chunked = b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    out = answers(await exchange(url, at_limits + chunked + b"GET /last HTTP/1.1\r\nConnection: close\r\n\r\n"))
    assert [s for s, _ in out] == [200, 200, 200] and out[1][1] == b"POST /c abc" and out[2][1] == b"GET /last "
    assert not server.refused


async def test_a_client_that_half_closes_still_gets_its_answers(bare):
    server, url = bare
    out = answers(await exchange(url, b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n", half_close=True))
    assert [body for _, body in out] == [b"GET /a ", b"GET /b "]


async def test_a_connection_that_sends_nothing_is_closed_without_an_answer(bare):
    server, url = bare
    assert await exchange(url, b"") == b""
    assert not server.refused


class Transport:
    """What a connection writes, for feeding it reads of any size by hand."""
    def __init__(self):
        self.written, self.closing = [], False

    def write(self, data): self.written.append(bytes(data))
    def writelines(self, parts): self.written.extend(bytes(p) for p in parts)
    def is_closing(self): return self.closing
    def close(self): self.closing = True
    def can_write_eof(self): return True
    def write_eof(self): self.written.append(b"<eof>")
    def pause_reading(self): pass
    def resume_reading(self): pass


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 1000])
async def test_requests_cut_anywhere_are_read_alike(bare, size):
    """Heads, Content-Length and chunked bodies (the chunked one with CRLF CRLF inside its data)
    and pipelined requests, read `size` bytes at a time."""
    server, _ = bare
    connection = http1._Connection(server)
    transport = Transport()
    connection.connection_made(transport)
    data = (b"POST /a HTTP/1.1\r\nContent-Length: 4\r\n\r\nab\r\n"
            b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n\r\n\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            b"GET /last HTTP/1.1\r\n\r\n")
    for i in range(0, len(data), size):
        connection.data_received(data[i:i + size])
    for _ in range(20):
        await asyncio.sleep(0)
    out = answers(b"".join(transport.written))
    assert [body for _, body in out] == [b"POST /a ab\r\n", b"POST /c \r\n\r\nabc", b"GET /last "]
    assert not transport.closing and not server.refused
    transport.closing = True
    connection.connection_lost(None)
