"""Webhooks as a way into the server's network (issue 42, items 7 and 16): server-side request
forgery and deliveries in the name of someone who lost the right.

A metastore admin aims a webhook at loopback, the cloud metadata address, private, link-local,
shared (CGNAT), multicast or reserved ranges, the server's own port, in every spelling an address
takes (decimal, hex, octal, short, IPv6, IPv4-mapped IPv6, userinfo, trailing dot, names that
resolve there), by registration and by a metastore update; a name that passed at registration and
resolves to loopback later; a receiver the operator allowed that redirects to loopback. Each is
refused or fails, the receivers on 127.0.0.1 get nothing, and what the API shows of a failing
webhook is one state whatever the network said. A webhook whose creator is no longer an admin
(the metastore's owner changed, removed from the owning group, no longer an account admin)
delivers nothing more and says it is suspended.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from aiohttp import web
from yarl import URL

from governance_users import unique, user
from test_enforcement_matrix import ok
from tests.conftest import new_workspace, serving

ALLOWED = "localhost"       # the one host the `allowing` server may post to although it is loopback
allowing = serving("webhooks-allowing", webhook_allow_hosts=(ALLOWED,))
allowing_cluster = serving("webhooks-allowing-cluster", shards=1, webhook_allow_hosts=(ALLOWED,))


class Receiver:
    """An HTTP server on 127.0.0.1 counting what it is sent; `answer` makes its response."""

    def __init__(self, answer=None):
        self.got: list[dict] = []
        self.hits = 0
        self.answer = answer or (lambda request: web.Response(status=204))
        self.runner = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits += 1
        body = await request.read()
        response = self.answer(request)
        if 200 <= response.status < 300 and body:
            self.got.append(json.loads(body))
        return response

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.port = self.runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()

    @property
    def versions(self) -> list[int]:
        return [e["data"]["version"] for e in self.got]


async def _until(check, seconds: float = 60.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


async def _hooks(ws) -> dict[str, dict]:
    return {h["id"]: h for h in (await ok(ws, "GET", "/shardcat/webhooks"))["webhooks"]}


async def _state_is(ws, hook_id: str, state: str) -> bool:
    return (await _hooks(ws))[hook_id].get("state") == state


async def _version(ws) -> int:
    return (await ok(ws, "GET", "/shardcat/changes", params={"since_version": "0", "max_results": "1"}))[
        "metastore_version"]


def _spellings(port: int, server_port: int) -> list[str]:
    """Every way of naming a destination that is not a public address (`port`: a live receiver)."""
    loopback = [f"http://{host}:{port}/hook" for host in (
        "127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.0.0.1", "127.1", "127.0.1", "127.000.000.001",
        "0.0.0.0", "0", "[::1]", "[::]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]",
        "evil@127.0.0.1", "user:password@127.0.0.1", "localhost", "LOCALHOST", "localhost.", "user@localhost",
        "127.0.0.1.", "127.255.255.254")]
    return loopback + [
        f"https://127.0.0.1:{port}/hook",
        f"http://127.0.0.1:{server_port}/api/2.1/unity-catalog/catalogs",      # the server's own port
        "http://169.254.169.254/latest/meta-data/", "http://169.254.169.254./latest/meta-data/",
        "http://2852039166/latest/meta-data/", "http://[fe80::1]/", "http://[::ffff:169.254.169.254]/",
        "http://10.0.0.1/", "http://10.255.255.255/", "http://012.0.0.1/", "http://172.16.0.1/",
        "http://172.31.255.254/", "http://192.168.0.1/", "http://192.168.1.1:8080/x", "http://[fc00::1]/",
        "http://[fd12:3456:789a::1]/", "http://[fec0::1]/", "http://100.64.0.1/", "http://100.127.255.254/",
        "http://224.0.0.1/", "http://239.255.255.250:1900/", "http://[ff02::1]/", "http://240.0.0.1/",
        "http://255.255.255.255/", "http://192.0.0.1/", "http://198.18.0.1/", "http://192.0.2.1/",
        "http://[64:ff9b::7f00:1]/", "http://[2001:db8::1]/",
        "http://no-such-host.invalid/hook",       # a name that does not resolve: refused the same way
    ]


async def test_every_spelling_of_a_non_public_destination_is_refused_at_registration(server, ws):
    async with Receiver() as sink:
        port = int(server.url.rsplit(":", 1)[1])
        messages = set()
        for url in _spellings(sink.port, port):
            status, body = await ws.call("POST", "/shardcat/webhooks", json={"url": url})
            assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (url, status, body)
            messages.add(body["message"])
        # One answer for every refusal: it tells nothing of what the name resolved to.
        assert len(messages) == 1, messages
        assert "127.0.0.1" not in messages.pop()
        for url in ("ftp://example.com/x", "file:///etc/passwd", "gopher://127.0.0.1:70/", "http:///x", "//x/y"):
            status, body = await ws.call("POST", "/shardcat/webhooks", json={"url": url})
            assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (url, body)
        assert await _hooks(ws) == {}
        await ok(ws, "POST", "/catalogs", json={"name": unique("c")})
        assert sink.hits == 0


async def test_a_metastore_update_cannot_plant_a_webhook(server, ws):
    async with Receiver() as sink:
        hook = {"id": "planted", "url": f"http://127.0.0.1:{sink.port}/hook", "secret": "x" * 20,
                "from_version": 0, "created_at": 0, "created_by": "admin"}
        status, body = await ws.call("PATCH", f"/metastores/{ws.metastore_id}", json={"webhooks": {"planted": hook}})
        assert status in (200, 400), body
        assert "webhooks" not in (await server.store.get_metastore(ws.metastore_id)).info
        assert await _hooks(ws) == {}
        await ok(ws, "POST", "/catalogs", json={"name": unique("c")})
        assert sink.hits == 0


@pytest.fixture
async def aws(allowing, http, tmp_path):
    """An admin of a fresh metastore on the server that allows posting to `localhost`."""
    return await new_workspace(allowing, http, tmp_path)


async def test_the_allowed_host_is_the_only_exception_and_no_spelling_borrows_it(allowing, aws):
    async with Receiver() as control, Receiver() as sink:
        good = await ok(aws, "POST", "/shardcat/webhooks", json={"url": f"http://{ALLOWED}:{control.port}/hook"})
        port = int(allowing.url.rsplit(":", 1)[1])
        for url in [u for u in _spellings(sink.port, port) if URL(u).host != ALLOWED]:
            status, body = await aws.call("POST", "/shardcat/webhooks", json={"url": url})
            assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (url, status, body)
        assert list(await _hooks(aws)) == [good["id"]]
        await ok(aws, "POST", "/catalogs", json={"name": unique("c")})
        last = await _version(aws)

        async def delivered():
            return last in control.versions
        await _until(delivered)
        assert sink.hits == 0
        await ok(aws, "DELETE", f"/shardcat/webhooks/{good['id']}")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_an_allowed_receiver_that_redirects_to_loopback_is_not_followed(aws, status):
    async with Receiver() as sink:
        targets = [f"http://127.0.0.1:{sink.port}/hook", f"http://{ALLOWED}:{sink.port}/hook"]
        async with Receiver(lambda r: web.Response(status=status, headers={"Location": targets[0]})) as first, \
                Receiver(lambda r: web.Response(status=status, headers={"Location": targets[1]})) as second:
            hooks = [await ok(aws, "POST", "/shardcat/webhooks", json={"url": f"http://{ALLOWED}:{r.port}/r"})
                     for r in (first, second)]

            async def retried():        # several tries each: a client that follows would have by now
                return first.hits >= 3 and second.hits >= 3
            await _until(retried)
            assert sink.hits == 0
            listed = await _hooks(aws)
            for hook in hooks:
                assert listed[hook["id"]]["state"] == "FAILING", listed[hook["id"]]
                assert listed[hook["id"]]["delivered_version"] is None
                await ok(aws, "DELETE", f"/shardcat/webhooks/{hook['id']}")


class Dns:
    """Answers for made-up names (the rest as the system resolves them), as an attacker's DNS
    server gives them: `answers[name]` is a list of answers, one per question, the last repeated."""

    def __init__(self, monkeypatch):
        self.answers: dict[str, list[str]] = {}
        self.asked: dict[str, int] = {}
        real = socket.getaddrinfo

        def getaddrinfo(host, port, *args, **kw):
            name = host.decode() if isinstance(host, bytes) else host
            if name not in self.answers:
                return real(host, port, *args, **kw)
            self.asked[name] = self.asked.get(name, 0) + 1
            answers = self.answers[name]
            return real(answers.pop(0) if len(answers) > 1 else answers[0], port, *args, **kw)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


async def test_a_name_that_resolves_to_loopback_after_registration_gets_nothing(aws, monkeypatch):
    dns = Dns(monkeypatch)
    name = f"{unique('hooks')}.example.com"
    dns.answers[name] = ["93.184.215.14", "127.0.0.1"]     # public at registration, then loopback
    async with Receiver() as sink:
        hook = await ok(aws, "POST", "/shardcat/webhooks", json={"url": f"http://{name}:{sink.port}/hook"})
        await ok(aws, "POST", "/catalogs", json={"name": unique("c")})

        async def tried():
            return dns.asked[name] >= 3
        await _until(tried)
        assert sink.hits == 0
        await _until(lambda: _state_is(aws, hook["id"], "FAILING"))
        await ok(aws, "DELETE", f"/shardcat/webhooks/{hook['id']}")
    # A name that resolves to loopback at registration is refused there.
    status, body = await aws.call("POST", "/shardcat/webhooks", json={"url": f"http://{name}:{sink.port}/hook"})
    assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", body
    dns.answers[name] = ["::ffff:10.1.2.3"]
    status, body = await aws.call("POST", "/shardcat/webhooks", json={"url": f"http://{name}/hook"})
    assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", body


class RecordingSession:
    """Stands for aiohttp's session in `destinations.post`: notes where each request would connect."""

    def __init__(self):
        self.sent: list[tuple[URL, dict]] = []

    def post(self, url, *, headers, **kw):
        self.sent.append((URL(url), headers))
        answer = type("Answer", (), {"status": 204})()

        class Context:
            async def __aenter__(self):
                return answer

            async def __aexit__(self, *exc):
                return None
        return Context()


async def test_a_post_connects_to_the_address_it_vetted_never_to_a_second_answer(monkeypatch):
    """DNS rebinding: the name answers public to the check and loopback right after. The request goes
    to the literal address that was checked (the name only in Host), so the second answer is never used."""
    from shardcat.web import destinations

    dns = Dns(monkeypatch)
    name = f"{unique('rebind')}.example.com"
    dns.answers[name] = ["93.184.215.14", "127.0.0.1"]
    session = RecordingSession()
    status = await destinations.post(session, URL(f"http://{name}:8080/hook?x=1"), frozenset(), data=b"{}",
                                     headers={"X-Shardcat-Signature": "s"})
    assert status == 204 and dns.asked[name] == 1
    [(url, headers)] = session.sent
    assert url.host == "93.184.215.14" and url.port == 8080 and url.path_qs == "/hook?x=1"
    assert headers["Host"] == f"{name}:8080"
    # The next post asks again, gets loopback and sends nothing.
    with pytest.raises(destinations.Refused):
        await destinations.post(session, URL(f"http://{name}:8080/hook"), frozenset(), data=b"{}", headers={})
    assert len(session.sent) == 1


async def test_every_failure_shows_the_same_state(aws, monkeypatch):
    """A closed port, a receiver answering 500, one that redirects and a name that no longer resolves
    differ only in their ids and URLs: the API does not map the network."""
    dns = Dns(monkeypatch)
    name = f"{unique('gone')}.example.com"
    dns.answers[name] = ["93.184.215.14", "no-such-host.invalid"]    # then it no longer resolves
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]          # nothing listens there once the socket is closed
    async with Receiver(lambda r: web.Response(status=500)) as failing, \
            Receiver(lambda r: web.Response(status=302, headers={"Location": "/elsewhere"})) as moving:
        urls = [f"http://{ALLOWED}:{closed}/hook", f"http://{ALLOWED}:{failing.port}/hook",
                f"http://{ALLOWED}:{moving.port}/hook", f"http://{name}/hook"]
        hooks = [await ok(aws, "POST", "/shardcat/webhooks", json={"url": url}) for url in urls]
        for hook in hooks:
            await _until(lambda: _state_is(aws, hook["id"], "FAILING"))
        listed = await _hooks(aws)
        shown = [{k: v for k, v in listed[h["id"]].items() if k not in ("id", "url", "created_at", "from_version")}
                 for h in hooks]
        assert all(s == shown[0] for s in shown), shown
        for hook in hooks:
            await ok(aws, "DELETE", f"/shardcat/webhooks/{hook['id']}")


async def _admin_by_group(allowing, aws):
    """A user who is a metastore admin through the group that owns the metastore."""
    group = unique("owners")
    alice = await user(allowing, aws, groups=[group])
    await ok(aws, "PATCH", f"/metastores/{aws.metastore_id}", json={"owner": group})
    return alice, group


@pytest.mark.parametrize("demotion", ["owner-changed", "left-the-group", "account-admin-revoked", "deleted"])
async def test_a_webhook_stops_when_its_creator_is_no_longer_an_admin(allowing, aws, demotion):
    store = allowing.store
    if demotion == "account-admin-revoked":
        creator = await user(allowing, aws, admin=True)
    else:
        creator, group = await _admin_by_group(allowing, aws)
    async with Receiver() as receiver:
        hook = await ok(creator, "POST", "/shardcat/webhooks", json={"url": f"http://{ALLOWED}:{receiver.port}/h"})
        await ok(aws, "POST", "/catalogs", json={"name": unique("c")})
        before = await _version(aws)

        async def delivered():
            return before in receiver.versions
        await _until(delivered)
        assert (await _hooks(aws))[hook["id"]]["state"] == "ACTIVE"

        if demotion == "owner-changed":
            await ok(aws, "PATCH", f"/metastores/{aws.metastore_id}", json={"owner": unique("someone")})
        elif demotion == "left-the-group":
            await store.pool.execute("DELETE FROM group_members WHERE member_id = (SELECT id FROM principals "
                                     "WHERE name = $1)", creator.name)
            await ok(aws, "POST", "/catalogs", json={"name": unique("c")})
        elif demotion == "account-admin-revoked":
            await store.pool.execute("UPDATE principals SET is_account_admin = false WHERE name = $1", creator.name)
            await ok(aws, "POST", "/catalogs", json={"name": unique("c")})
        else:
            await store.pool.execute("DELETE FROM principals WHERE name = $1", creator.name)
            await ok(aws, "POST", "/catalogs", json={"name": unique("c")})
        demoted_at = await _version(aws)
        for _ in range(3):
            await ok(aws, "POST", "/catalogs", json={"name": unique("c")})
        await _until(lambda: _state_is(aws, hook["id"], "SUSPENDED"))
        assert max(receiver.versions) < demoted_at, (receiver.versions, demoted_at)
        listed = (await _hooks(aws))[hook["id"]]
        assert listed["delivered_version"] < demoted_at
        await ok(aws, "DELETE", f"/shardcat/webhooks/{hook['id']}")


async def test_in_a_cluster_the_shards_refuse_and_allow_alike(allowing_cluster, http, tmp_path):
    ws = await new_workspace(allowing_cluster, http, tmp_path)
    async with Receiver() as receiver:
        for url in (f"http://127.0.0.1:{receiver.port}/hook", f"http://2130706433:{receiver.port}/hook",
                    "http://169.254.169.254/latest/meta-data/"):
            status, body = await ws.call("POST", "/shardcat/webhooks", json={"url": url})
            assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (url, body)
        hook = await ok(ws, "POST", "/shardcat/webhooks", json={"url": f"http://{ALLOWED}:{receiver.port}/hook"})
        await ok(ws, "POST", "/catalogs", json={"name": unique("c")})
        last = await _version(ws)

        async def delivered():
            return last in receiver.versions
        await _until(delivered)
        await ok(ws, "DELETE", f"/shardcat/webhooks/{hook['id']}")
