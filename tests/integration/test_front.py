"""The router's front (shardcat/router/front.py) on a real one-shard cluster: which requests take
the fast path, that both paths answer as the router app does, and HTTP/1.1 on raw sockets:
pipelining, HEAD, Expect: 100-continue, chunked and oversized bodies, malformed requests."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket

import orjson
import pytest
from yarl import URL

from shardcat.router.routing import WRITE_COST
from shardcat.web import http1
from shardcat.web.shard_client import ConnectionLost
from shardcat.web.wire import MAX_BODY_BYTES
from tests.conftest import PREFIX, new_workspace, serving


cluster = serving("front", shards=1)


@pytest.fixture
async def fws(cluster, http, tmp_path):
    ws = await new_workspace(cluster, http, tmp_path)
    status, body = await ws.call("POST", "/catalogs", json={"name": "c"})
    assert status == 200, body
    return ws


def counts(cluster) -> dict:
    return dict(cluster.front.front.stats)


async def exchange(cluster, raw: bytes, *, read_until_closed: bool = False, answers: int = 1) -> bytes:
    """Send raw bytes to the front; return what came back (`answers` complete answers, or all until closed)."""
    url = URL(cluster.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(raw)
        await writer.drain()
        if read_until_closed:
            return await asyncio.wait_for(reader.read(), 10)
        out = b""
        for _ in range(answers):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:")))
            out += head + (await reader.readexactly(length) if b"HEAD" not in raw[:4] else b"")
        return out
    finally:
        writer.close()


def request(ws, method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {PREFIX}{path} HTTP/1.1", "Host: x", f"Authorization: Bearer {ws.token}",
             *[f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]]
    if body and "Transfer_Encoding" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def bodies(raw: bytes) -> list:
    return [orjson.loads(part.split(b"\r\n\r\n", 1)[1]) for part in raw.split(b"HTTP/1.1 ")[1:]]


def load_of(cluster, fws, monkeypatch) -> callable:
    """The metastore's measured load in the router's routing table, as a function (its periodic
    halving held off meanwhile)."""
    routing = cluster.front.front.forwarder.routing
    monkeypatch.setattr(routing, "decay", lambda factor=0.5: None)
    return lambda: routing.load.get(fws.metastore_id, 0.0)


async def test_reads_take_the_fast_path_and_answer_as_the_shard_does(cluster, fws, monkeypatch):
    await fws.call("GET", "/catalogs/c")        # the caller's identity is cached after its first request
    before = counts(cluster)
    load = load_of(cluster, fws, monkeypatch)
    load_before = load()
    async with fws.session.get(fws.api + "/catalogs/c", headers=fws.headers) as r:
        assert r.status == 200 and (await r.json())["name"] == "c"
        assert len(r.headers["X-Shardcat-Request-Id"]) == 32 and int(r.headers["X-Shardcat-Version"]) >= 1
    status, resolved = await fws.call("POST", "/resolve", json={"items": [{"name": "c.s.missing"}]})
    assert status == 200 and resolved["items"][0]["error"]["error_code"] == "NOT_FOUND"
    status, missing = await fws.call("GET", "/catalogs/nope")
    assert status == 404 and missing["error_code"] == "NOT_FOUND"
    after = counts(cluster)
    assert after["fast"] - before["fast"] == 3 and after["through_app"] == before["through_app"]
    assert load() - load_before == 3.0          # a read weighs one request in the metastore's load


async def test_everything_else_goes_through_the_router_app(cluster, fws, http):
    before = counts(cluster)
    # account-level routes the router serves itself
    assert (await fws.call("GET", "/shardcat/routing"))[0] == 200
    assert (await fws.call("GET", "/user-info/me"))[0] == 200
    status, listed = await fws.call("GET", "/metastores")
    assert status == 200 and any(m["metastore_id"] == fws.metastore_id for m in listed["metastores"])
    # an unknown token, no token at all
    async with http.get(fws.api + "/catalogs/c", headers={"Authorization": "Bearer nope"}) as r:
        assert r.status == 401 and (await r.json())["error_code"] == "UNAUTHENTICATED"
    async with http.get(fws.api + "/catalogs/c") as r:
        assert r.status == 401 and "Authorization" in (await r.json())["message"]
    after = counts(cluster)
    assert after["through_app"] - before["through_app"] == 5 and after["fast"] == before["fast"]


async def test_writes_take_the_fast_path_and_one_that_loses_its_connection_is_not_sent_again(cluster, fws,
                                                                                             monkeypatch):
    await fws.call("GET", "/catalogs/c")        # the caller's identity is cached after its first request
    before = counts(cluster)
    load = load_of(cluster, fws, monkeypatch)
    load_before = load()
    status, created = await fws.call("POST", "/schemas", json={"name": "s", "catalog_name": "c"})
    assert status == 200 and created["full_name"] == "c.s"
    assert counts(cluster)["fast"] - before["fast"] == 1 and counts(cluster)["through_app"] == before["through_app"]
    assert load() - load_before == WRITE_COST       # as through the router app: a write weighs WRITE_COST
    assert (await fws.call("GET", "/schemas/c.s"))[1]["full_name"] == "c.s"   # there, read back
    # The shard applies the write, and the connection is lost before its answer arrives.
    client = cluster.front.front.forwarder.client      # the one both the front and the router app send with
    real, sent = client.request, []

    async def applied_then_lost(address, method, path, headers, body):
        sent.append((method, path))
        await real(address, method, path, headers, body)
        raise ConnectionLost("the connection closed before the answer")

    monkeypatch.setattr(client, "request", applied_then_lost)
    status, lost = await fws.call("POST", "/schemas", json={"name": "s2", "catalog_name": "c"})
    assert status == 503 and lost["error_code"] == "TEMPORARILY_UNAVAILABLE" and "unknown" in lost["message"]
    assert sent == [("POST", PREFIX + "/schemas")]      # once: neither the front nor the app sent it again
    monkeypatch.setattr(client, "request", real)
    assert (await fws.call("GET", "/schemas/c.s2"))[0] == 200    # it had been applied, once


async def test_pipelined_requests_are_answered_in_order(cluster, fws):
    await fws.call("GET", "/catalogs/c")
    raw = b"".join(request(fws, "GET", path) for path in ("/catalogs/c", "/catalogs/nope", "/metastores",
                                                            "/catalogs/c"))
    answers = bodies(await exchange(cluster, raw, answers=4))
    assert answers[0]["name"] == "c" and answers[1]["error_code"] == "NOT_FOUND"
    assert "metastores" in answers[2] and answers[3]["name"] == "c"


async def test_head_expect_continue_chunked_and_close(cluster, fws):
    head = await exchange(cluster, request(fws, "HEAD", "/catalogs/c"))
    assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")      # headers, no body
    # Expect: 100-continue gets its interim answer before the body is sent
    url = URL(cluster.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    body = orjson.dumps({"items": [{"name": "c.s.t"}]})
    writer.write(request(fws, "POST", "/resolve", Expect="100-continue", Content_Type="application/json",
                         Content_Length=str(len(body))))
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10) == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(body)
    assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).startswith(b"HTTP/1.1 200 OK")
    writer.close()
    # a chunked body, and Connection: close
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:7], body[7:])) + b"0\r\n\r\n"
    raw = await exchange(cluster, request(fws, "POST", "/resolve", chunked, Transfer_Encoding="chunked",
                                          Content_Type="application/json", Connection="close"),
                         read_until_closed=True)
    assert b"Connection: close" in raw and bodies(raw)[0]["items"][0]["name"] == "c.s.t"


async def test_too_large_and_malformed_requests(cluster, fws):
    big = b'{"name": "' + b"x" * MAX_BODY_BYTES + b'"}'
    raw = await exchange(cluster, request(fws, "POST", "/catalogs", big, Content_Type="application/json",
                                          Connection="close"), read_until_closed=True)
    assert raw.startswith(b"HTTP/1.1 413") and bodies(raw)[0]["error_code"] == "REQUEST_TOO_LARGE"
    raw = await exchange(cluster, b"NOT HTTP AT ALL\r\n\r\n", read_until_closed=True)
    assert raw.startswith(b"HTTP/1.1 400") and bodies(raw)[0]["error_code"] == "MALFORMED_REQUEST"
    # Under the Iceberg REST and UC Delta APIs, the parser's refusal is in their error model (an empty Content-Length)
    for path, kind in (("/iceberg/v1/catalogs/c/namespaces/s/tables/t/plan", "BadRequestException"),
                       ("/delta/v1/catalogs/c/schemas/s/tables/t", "BadRequestException")):
        raw = await exchange(cluster, f"POST {PREFIX}{path} HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n".encode(),
                             read_until_closed=True)
        error = bodies(raw)[0]
        assert raw.startswith(b"HTTP/1.1 400") and error["error"]["type"] == kind and error["error"]["code"] == 400, raw
    assert (await fws.call("GET", "/catalogs/c"))[0] == 200          # the front still serves


async def test_an_idle_connection_is_closed(cluster, fws, monkeypatch):
    server = cluster.front.server
    monkeypatch.setattr(server, "limits", dataclasses.replace(server.limits, keep_alive=0.3))
    url = URL(cluster.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    writer.write(request(fws, "GET", "/catalogs/c"))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200")
    started = asyncio.get_running_loop().time()
    rest = await asyncio.wait_for(reader.read(), 10)        # the body, then the end: the front closed it
    assert b'"name":"c"' in rest and asyncio.get_running_loop().time() - started < 5
    writer.close()


async def test_a_burst_of_connections_fits_the_listen_queue():
    # Nothing is accepted while this runs (the loop does not turn): every connect waits in the
    # listen queue, which must hold more than the event loops' default of 100.
    server = http1.Server(lambda request: None)
    name = f"\0shardcat-test-burst-{os.getpid()}"
    socks = []
    try:
        port = await server.listen("127.0.0.1", 0)
        await server.listen_unix(name)
        for family, address in ((socket.AF_UNIX, name), (socket.AF_INET, ("127.0.0.1", port))):
            for _ in range(300):
                s = socket.socket(family, socket.SOCK_STREAM)
                socks.append(s)
                s.settimeout(2.0)       # a full queue refuses a connect (Unix) or stalls it (TCP): fail in time
                s.connect(address)
    finally:
        for s in socks:
            s.close()
        server.close()
