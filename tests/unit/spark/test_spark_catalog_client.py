"""shardcat.spark's HTTP calls against a real aiohttp server on loopback: one kept-alive
connection per thread, a connection the server closed while idle replaced unnoticed, a read
(and only a read) sent again when its connection closes under it, error JSON as CatalogError."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time

import psutil
import pytest
from aiohttp import web

from shardcat.spark.catalog import PREFIX, CatalogClient, CatalogError


class Server:
    """An aiohttp app in a thread of its own that counts connections and requests, and drops the
    connection instead of answering the first request to any path under /flaky."""

    def __init__(self, keepalive_timeout: float = 75.0):
        # Held, not their ids: a closed transport's id may be given to the next one.
        self.connections: list[asyncio.Transport] = []
        self.requests: list[str] = []
        self.dropped: set[str] = set()
        self.keepalive_timeout = keepalive_timeout
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not any(t is request.transport for t in self.connections):
            self.connections.append(request.transport)
        self.requests.append(f"{request.method} {request.path}")
        if request.path.startswith(PREFIX + "/flaky") and request.path not in self.dropped:
            self.dropped.add(request.path)
            await request.read()                # all of it first: a socket closed with bytes unread sends a reset,
            request.transport.close()           # not the FIN (the client saw either, by timing); then no answer
            return web.Response()
        if request.path.endswith("/missing"):
            return web.json_response({"error_code": "NOT_FOUND", "message": "no such thing"}, status=404)
        return web.json_response({"path": request.path})

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, keepalive_timeout=self.keepalive_timeout)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        self.ready.set()
        self.loop.run_forever()

    def __enter__(self) -> "Server":
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_calls_reuse_one_connection_per_thread():
    with Server() as server:
        client = CatalogClient(server.url, "t")
        for i in range(5):
            assert client.call("GET", f"/tables/c.s.t{i}") == {"path": f"{PREFIX}/tables/c.s.t{i}"}
        assert client.call("POST", "/resolve", {"items": []}) == {"path": f"{PREFIX}/resolve"}
        assert len(server.connections) == 1
        other = threading.Thread(target=client.call, args=("GET", "/tables/c.s.other"))
        other.start()
        other.join()
        assert len(server.connections) == 2 and len(server.requests) == 7
        assert client.stats.calls == 7
        client.close()                          # both threads' connections
        client.call("GET", "/catalogs")
        assert len(server.connections) == 3


def client_end(connection: asyncio.Transport) -> str | None:
    """The TCP state (psutil's) of the client's end of a connection the server holds, None if it has none."""
    client, server = connection.get_extra_info("peername")[:2], connection.get_extra_info("sockname")[:2]
    return next((c.status for c in psutil.net_connections("tcp")
                 if tuple(c.laddr) == client and c.raddr and tuple(c.raddr) == server), None)


def test_a_connection_the_server_closed_while_idle_is_replaced():
    with Server(keepalive_timeout=0.2) as server:
        client = CatalogClient(server.url, "t")
        client.call("POST", "/tables", {"name": "a"})
        # Idle until the server's close has reached the client's end (its FIN arrived: CLOSE_WAIT), not only until
        # the server's socket is closed: under load the FIN may still be on its way, and a write sent before it
        # arrives is one the connection closed under (which is not sent again: the next test).
        deadline = time.monotonic() + 30
        while client_end(server.connections[0]) != psutil.CONN_CLOSE_WAIT:
            assert time.monotonic() < deadline, "the client's end never saw the server close the idle connection"
            time.sleep(0.05)
        assert client.call("POST", "/tables", {"name": "b"}) == {"path": f"{PREFIX}/tables"}
        assert server.requests == [f"POST {PREFIX}/tables"] * 2 and len(server.connections) == 2


def test_reads_are_sent_again_when_their_connection_closes_under_them_and_writes_are_not():
    with Server() as server:
        client = CatalogClient(server.url, "t")
        client.call("GET", "/catalogs")
        assert client.call("GET", "/flaky/read") == {"path": f"{PREFIX}/flaky/read"}
        assert client.call("POST", "/resolve", {"items": []})["path"] == f"{PREFIX}/resolve"
        with pytest.raises(http.client.RemoteDisconnected):
            client.call("POST", "/flaky/write", {"name": "x"})
        assert server.requests.count(f"GET {PREFIX}/flaky/read") == 2
        assert server.requests.count(f"POST {PREFIX}/flaky/write") == 1
        # the next call gets a fresh connection
        assert client.call("GET", "/catalogs") == {"path": f"{PREFIX}/catalogs"}


def test_error_answers_become_catalog_errors():
    with Server() as server:
        client = CatalogClient(server.url + PREFIX, "t")
        with pytest.raises(CatalogError) as e:
            client.call("GET", "/tables/missing")
        assert (e.value.code, e.value.message, e.value.status) == ("NOT_FOUND", "no such thing", 404)
        assert client.call("GET", "/catalogs") == {"path": f"{PREFIX}/catalogs"}   # the connection stays usable
    with pytest.raises(ValueError, match="http"):
        CatalogClient("ftp://host/x", "t").call("GET", "/catalogs")


def test_a_client_pointed_elsewhere_follows():
    with Server() as first, Server() as second:
        client = CatalogClient(first.url, "t")
        client.call("GET", "/catalogs")
        client.api = second.url + "/api/1.0/unity-control"       # e.g. the SCIM API, on another server
        assert client.call("GET", "/scim2/Users") == {"path": "/api/1.0/unity-control/scim2/Users"}
        assert (len(first.requests), len(second.requests)) == (1, 1)
