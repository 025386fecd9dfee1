"""The router's HTTP client for its shards (router/shard_client.py), against real aiohttp servers:
answers and headers, keep-alive reuse, and the difference between a request that never left
(safe to send again) and one whose outcome is unknown."""

from __future__ import annotations

import asyncio
import os
import socket
import sys

import pytest
from aiohttp import web

from shardcat.web import shard_client
from shardcat.web.shard_client import Address, ConnectionLost, ShardClient, ShardUnreachable


async def _serve(routes) -> tuple[web.AppRunner, int, list]:
    peers: list = []

    @web.middleware
    async def note_peer(request, handler):
        peers.append(request.transport.get_extra_info("peername"))
        return await handler(request)

    app = web.Application(middlewares=[note_peer])
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1], peers


async def _echo(request):
    body = await request.read()
    return web.json_response({"method": request.method, "path": request.raw_path, "body": body.decode(),
                              "auth": request.headers.get("Authorization")},
                             status=int(request.query.get("status", "200")), headers={"X-Shardcat-Version": "7"})


async def test_answers_headers_and_reused_connections():
    runner, port, peers = await _serve([web.route("*", "/{tail:.*}", _echo)])
    client, shard = ShardClient(), Address("127.0.0.1", port)
    try:
        a = await client.request(shard, "POST", "/x/a%2Fb?q=1", {"Authorization": "Bearer t"}, b'{"k":1}')
        assert a.status == 200 and a.headers["x-shardcat-version"] == "7"
        assert a.headers["content-type"].startswith("application/json")
        assert b'"path": "/x/a%2Fb?q=1"' in a.body and b'"body": "{\\"k\\":1}"' in a.body
        assert b'"auth": "Bearer t"' in a.body
        b = await client.request(shard, "GET", "/y?status=404", {})
        assert b.status == 404 and b'"method": "GET"' in b.body
        many = await asyncio.gather(*(client.request(shard, "GET", f"/z{i}", {}) for i in range(20)))
        assert all(m.status == 200 for m in many)
        assert peers[0] == peers[1], "the second request must reuse the first one's connection"
        assert len(set(peers)) <= 20
    finally:
        client.close()
        await runner.cleanup()


@pytest.mark.skipif(sys.platform != "linux", reason="abstract Unix socket names are Linux's")
async def test_a_shard_on_this_host_is_reached_over_its_unix_socket():
    runner, port, peers = await _serve([web.route("*", "/{tail:.*}", _echo)])
    name = f"\0shardcat-test-{os.getpid()}"
    await web.UnixSite(runner, name).start()
    client = ShardClient()
    try:
        # The TCP port only fills the Host header: the request goes over the socket.
        answer = await client.request(Address("127.0.0.1", port, name), "POST", "/u?q=1", {}, b'{"k":1}')
        assert answer.status == 200 and b'"path": "/u?q=1"' in answer.body
        assert peers[-1] in ("", b"", None), f"came in over TCP from {peers[-1]}"
        with pytest.raises(ShardUnreachable):       # no such socket (e.g. the shard died)
            await client.request(Address("127.0.0.1", port, name + "-gone"), "GET", "/u", {})
    finally:
        client.close()
        await runner.cleanup()


async def test_a_closed_port_is_unreachable_not_lost():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]        # bound, never listening: connection refused
        with pytest.raises(ShardUnreachable):
            await ShardClient().request(Address("127.0.0.1", port), "POST", "/x", {}, b"{}")


async def test_a_shard_dying_mid_request_is_lost_not_unreachable():
    started, release = asyncio.Event(), asyncio.Event()

    async def dies(request):
        started.set()
        request.transport.close()          # the shard goes away after reading the request
        await release.wait()
        return web.Response()

    runner, port, _ = await _serve([web.post("/x", dies)])
    client = ShardClient()
    try:
        with pytest.raises(ConnectionLost):
            await client.request(Address("127.0.0.1", port), "POST", "/x", {}, b"{}")
        assert started.is_set()
    finally:
        release.set()
        client.close()
        await runner.cleanup()


async def test_no_answer_within_the_timeout_is_lost():
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return web.Response()

    runner, port, _ = await _serve([web.get("/slow", slow)])
    client = ShardClient(timeout=0.2)
    try:
        with pytest.raises(ConnectionLost, match="within 0.2 s"):
            await client.request(Address("127.0.0.1", port), "GET", "/slow", {})
    finally:
        release.set()
        client.close()
        await runner.cleanup()


async def test_a_request_waiting_on_a_shard_declared_dead_is_lost_at_once():
    """A dying shard may hold the connection and answer nothing (its raylet gone, its process hanging
    on the way out): once the router declares it dead its waiting requests fail as lost, so that a
    read goes to the new owner, instead of waiting out the timeout."""
    release, dead = asyncio.Event(), set()

    async def hangs(request):
        await release.wait()
        return web.Response()

    runner, port, _ = await _serve([web.get("/hangs", hangs)])
    shard = Address("127.0.0.1", port)
    client = ShardClient(timeout=30.0, gone=dead.__contains__)
    try:
        waiting = asyncio.create_task(client.request(shard, "GET", "/hangs", {}))
        await asyncio.sleep(1.5)
        assert not waiting.done()                     # alive: it waits for its answer
        dead.add(shard)
        with pytest.raises(ConnectionLost, match="declared dead"):
            await asyncio.wait_for(waiting, 5.0)      # not the 30 s timeout
    finally:
        release.set()
        client.close()
        await runner.cleanup()


async def test_connections_idle_too_long_or_closed_by_the_shard_are_not_reused(monkeypatch):
    runner, port, peers = await _serve([web.get("/{tail:.*}", _echo)])
    client = ShardClient()
    try:
        await client.request(Address("127.0.0.1", port), "GET", "/one", {})
        monkeypatch.setattr(shard_client, "IDLE_SECONDS", 0.0)    # every pooled connection is now too old
        await client.request(Address("127.0.0.1", port), "GET", "/two", {})
        assert peers[0] != peers[1]
        monkeypatch.setattr(shard_client, "IDLE_SECONDS", 15.0)
        await runner.cleanup()                                    # the shard closes its connections
        runner, port2, peers = await _serve([web.get("/{tail:.*}", _echo)])
        with pytest.raises(ShardUnreachable):                     # the old address is gone: a fresh connect fails
            await client.request(Address("127.0.0.1", port), "GET", "/three", {})
        assert (await client.request(Address("127.0.0.1", port2), "GET", "/four", {})).status == 200
    finally:
        client.close()
        await runner.cleanup()


@pytest.mark.skipif(sys.platform != "linux", reason="abstract Unix socket names are Linux's")
async def test_a_full_listen_queue_is_unreachable_not_lost():
    # A shard too busy to accept: Linux queues backlog + 1 connections, and a connect beyond
    # that must not pass for one (uvloop reports its EAGAIN as connected).
    name = f"\0shardcat-test-full-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(name)
        listener.listen(1)
        client = ShardClient(timeout=0.5)
        try:
            outcomes = await asyncio.gather(*(client.request(Address("127.0.0.1", 1, name), "POST", "/x", {}, b"{}")
                                              for _ in range(4)), return_exceptions=True)
        finally:
            client.close()
    kinds = sorted(type(o).__name__ for o in outcomes)
    assert kinds == ["ConnectionLost", "ConnectionLost", "ShardUnreachable", "ShardUnreachable"], outcomes


async def test_a_connection_the_shard_just_closed_is_not_reused():
    runner, port, peers = await _serve([web.get("/{tail:.*}", _echo)])
    client = ShardClient()
    try:
        await client.request(Address("127.0.0.1", port), "GET", "/one", {})
        (pooled,) = client._idle[Address("127.0.0.1", port)]
        pooled.transport.close()        # as uvloop does on the shard's EOF, connection_lost still to come
        assert (await client.request(Address("127.0.0.1", port), "GET", "/two", {})).status == 200
        assert peers[0] != peers[1]
    finally:
        client.close()
        await runner.cleanup()
