"""Pushed change events: a webhook receiver that is slow, then down, then back gets every event
(CloudEvents, HMAC-signed) at least once, in metastore-version order, none missing, and the writes
never wait for it; the server-sent event stream resumes from a version; only admins subscribe."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket

from aiohttp import web

from governance_users import unique, user

from test_enforcement_matrix import ok
from tests.conftest import serving

# Receivers listen on loopback, which webhooks may not reach unless the server allows it by name.
server = serving("events", webhook_allow_hosts=("localhost",))

SECRET = "a-test-secret-of-some-length"


class Receiver:
    """A webhook receiver on loopback whose mood the test sets: fine, slow, or refusing (503)."""

    def __init__(self):
        self.got: list[dict] = []
        self.mood = "fine"
        self.bad_signatures = 0
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.runner = self.site = None

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if request.headers.get("X-Shardcat-Signature") != expected:
            self.bad_signatures += 1
            return web.Response(status=400)
        if self.mood == "slow":
            await asyncio.sleep(0.3)
        if self.mood == "refusing":
            return web.Response(status=503)
        self.got.append(json.loads(body))
        return web.Response(status=204)

    async def up(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        self.site = web.TCPSite(self.runner, "127.0.0.1", self.port)
        await self.site.start()

    async def down(self) -> None:
        await self.runner.cleanup()

    @property
    def versions(self) -> list[int]:
        return [e["data"]["version"] for e in self.got]


async def _until(check, seconds: float = 120.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


async def test_a_slow_then_down_then_back_webhook_gets_every_event_in_order(ws, server):
    receiver = Receiver()
    await receiver.up()
    hook = await ok(ws, "POST", "/shardcat/webhooks", json={"url": f"http://localhost:{receiver.port}/hook",
                                                            "secret": SECRET})
    try:
        first = hook["from_version"] + 1          # the registration's own write
        c = unique("c")
        await ok(ws, "POST", "/catalogs", json={"name": c})
        receiver.mood = "slow"
        for i in range(5):
            await ok(ws, "POST", "/schemas", json={"name": f"slow{i}", "catalog_name": c})
        receiver.mood = "refusing"
        for i in range(5):
            await ok(ws, "POST", "/schemas", json={"name": f"refused{i}", "catalog_name": c})
        await receiver.down()
        for i in range(5):                        # writes go on while the receiver is gone
            await ok(ws, "POST", "/schemas", json={"name": f"down{i}", "catalog_name": c})
        last = (await ok(ws, "GET", "/shardcat/changes", params={"since_version": "0", "max_results": "1"}))[
            "metastore_version"]
        await asyncio.sleep(0.5)
        receiver.mood = "fine"
        await receiver.up()
        await _until(lambda: last in receiver.versions)
        # Every version once or more, in order: the first sighting of each goes up by one, none missing.
        seen = list(dict.fromkeys(receiver.versions))
        assert seen == list(range(first, last + 1)), seen
        assert receiver.versions == sorted(receiver.versions)
        assert receiver.bad_signatures == 0
        event = receiver.got[-1]
        assert event["type"] == "io.shardcat.metastore.change" and event["specversion"] == "1.0"
        assert event["source"] == f"/metastores/{ws.metastore_id}"
        assert event["id"] == f"{ws.metastore_id}:{last}"
        assert event["data"]["securables"][0]["full_name"] == f"{c}.down4"
        listed = await ok(ws, "GET", "/shardcat/webhooks")
        assert listed["webhooks"][0]["id"] == hook["id"] and "secret" not in listed["webhooks"][0]
        assert "webhooks" not in await ok(ws, "GET", f"/metastores/{ws.metastore_id}")
        # The secret is answered once, at registration, and kept sealed (security.md, Secrets).
        stored = (await server.store.get_metastore(ws.metastore_id)).info["webhooks"][hook["id"]]["secret"]
        assert hook["secret"] == SECRET and stored.startswith("sealed:v1:") and SECRET not in stored
    finally:
        await ok(ws, "DELETE", f"/shardcat/webhooks/{hook['id']}")
        await receiver.down()


async def test_the_event_stream_resumes_from_a_version_and_is_for_admins_only(server, ws):
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    start = (await ok(ws, "GET", "/shardcat/changes", params={"since_version": "0", "max_results": "1"}))[
        "metastore_version"]
    await ok(ws, "POST", "/schemas", json={"name": "a", "catalog_name": c})

    async def read_events(n: int, **kw) -> list[tuple[str, dict]]:
        """Like an EventSource: read, and reconnect with the last id seen, until n events came."""
        out, last = [], None
        while len(out) < n:
            headers = {**ws.headers, **({"Last-Event-ID": last} if last else {})}
            async with ws.session.get(f"{ws.api}/shardcat/events", **{**kw, "headers": {**kw.get("headers", {}),
                                                                                        **headers}}) as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
                event_id = None
                for line in (await r.text()).split("\n"):
                    if line.startswith("id: "):
                        event_id = last = line[4:]
                    elif line.startswith("data: "):
                        out.append((event_id, json.loads(line[6:])))
        return out[:n]

    got = await read_events(1, params={"since_version": str(start)})
    assert got[0][1]["data"]["version"] == start + 1
    assert got[0][1]["data"]["securables"][0]["full_name"] == f"{c}.a"
    # A reconnecting EventSource sends the last id it saw; a new write arrives while it listens.
    reading = asyncio.ensure_future(read_events(1, headers={**ws.headers, "Last-Event-ID": got[0][0]}))
    await asyncio.sleep(0.2)
    await ok(ws, "POST", "/schemas", json={"name": "b", "catalog_name": c})
    later = await asyncio.wait_for(reading, 10)
    assert later[0][1]["data"]["version"] == start + 2

    nobody = await user(server, ws)
    status, body = await nobody.call("GET", "/shardcat/events")
    assert status == 403
    status, body = await nobody.call("POST", "/shardcat/webhooks", json={"url": "http://127.0.0.1:9/x"})
    assert status == 403
    status, body = await ws.call("POST", "/shardcat/webhooks", json={"url": "ftp://x"})
    assert status == 400
