"""The router's public HTTP/1.1 server: forwards a metastore's reads straight to its shard, and
hands every other request to the full router app (router/forward.py) on a loopback port.

Behind aiohttp's server the router reached 20.7% of the bare-server ceiling at 32 clients, and
behind this front 34.9% (docs/benchmarks.md). It parses requests with httptools and, for the
bulk of the traffic (reads of a metastore whose owner and caller are already known), sends the
request to the owner shard and relays its answer without building either side's objects.
Anything else (account-level routes, writes, a caller or an owner not yet cached, a shard that
refused or could not be reached, a request too large) goes to the router app unchanged, so the
app stays the one definition of the router's behaviour: authentication errors, retries, audit,
error JSON. A read that failed on the fast path is safe to send again there.
"""

from __future__ import annotations

import asyncio
import http
import logging
from collections import deque
from dataclasses import dataclass

import httptools
import orjson
from aiohttp import web

from ..auth import bearer
from ..governance.audit import REQUEST_ID_HEADER
from ..shards.http import MAX_BODY_BYTES, PREFIX, VERSION_HEADER
from .forward import AUTHENTICATOR, FORWARDER, Forwarder, metastore_in_path, safe_to_resend
from .middleware import Authenticator
from .shard_client import Address, Answer, ShardClient

log = logging.getLogger(__name__)

KEEP_ALIVE_SECONDS = 75.0       # an idle client connection is closed after this (aiohttp's default)
IDLE_SWEEP_SECONDS = 1.0        # how often idle connections are looked for
MAX_QUEUED = 16                 # pipelined requests read ahead per connection before reading pauses
# Not relayed either way: they describe one connection, or a framing this hop redoes.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "expect", "host",
                         "te", "trailer", "upgrade", "proxy-connection"})
# The shard's answer headers a fast-path answer carries.
_RELAYED = ("content-type", "date", VERSION_HEADER.lower(), REQUEST_ID_HEADER.lower())


@dataclass
class Request:
    method: str
    raw_path: str                   # as the client sent it, query included
    headers: dict[str, str]         # names in lower case
    body: bytes
    too_large: bool                 # the body passed MAX_BODY_BYTES (and was cut one byte past it)
    keep_alive: bool

    @property
    def path(self) -> str:
        return self.raw_path.partition("?")[0]


class Front:
    """Decides where each request goes and gets its answer: the fast path, or the router app."""

    def __init__(self, app: web.Application, app_address: Address):
        """`app`: the router app (make_router_app), listening at `app_address`."""
        self.forwarder: Forwarder = app[FORWARDER]
        self.authenticator: Authenticator = app[AUTHENTICATOR]
        self.app_address = app_address
        self.client = ShardClient()         # to the router app; the forwarder has its own to the shards
        self._own_routes = _own_routes(app, self.forwarder.forward)
        self.connections: set[_Connection] = set()
        self.stats = {"fast": 0, "through_app": 0}     # requests answered each way
        self._sweeper = asyncio.get_running_loop().create_task(self._close_idle_connections())

    def close(self) -> None:
        self._sweeper.cancel()
        self.client.close()

    async def _close_idle_connections(self) -> None:
        """Closes connections idle for KEEP_ALIVE_SECONDS: one sweep a second, not a timer re-armed
        per request."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(IDLE_SWEEP_SECONDS)
            cutoff = loop.time() - KEEP_ALIVE_SECONDS
            for connection in list(self.connections):
                if connection.idle_since is not None and connection.idle_since < cutoff:
                    connection.transport.close()

    async def answer(self, request: Request) -> Answer:
        answer = await self._fast(request) if self._fast_path(request) else None
        if answer is not None:
            self.stats["fast"] += 1
            return answer
        self.stats["through_app"] += 1
        return await self._through_app(request)

    def _fast_path(self, request: Request) -> bool:
        path = request.path
        if request.too_large or "%" in path or not path.startswith(PREFIX + "/"):
            return False
        if request.method not in ("GET", "POST") or not safe_to_resend(request.method, path):
            return False
        first = path[len(PREFIX) + 1:].partition("/")[0]
        return not any(matches(path) for matches in self._own_routes.get(first, ()))

    async def _fast(self, request: Request) -> Answer | None:
        """The owner shard's answer, or None where the router app must decide."""
        token = bearer(request.headers.get("authorization"))
        caller = self.authenticator.cached(token) if token else None
        if caller is None:
            return None
        metastore_id = metastore_in_path(request.path) or caller.metastore_id
        shard = self.forwarder.routing.assigned(metastore_id) if metastore_id else None
        if shard is None:
            return None
        headers = self.forwarder.shard_headers(metastore_id, request.headers)
        try:
            answer = await self.forwarder.client.request(shard.address, request.method, request.raw_path, headers,
                                                         request.body)
        except ConnectionError:
            return None                     # a read: the router app sends it again, with retries
        if answer.status == 421:            # not the owner (any more): the router app reasserts
            return None
        self.forwarder.acknowledge(metastore_id, answer)
        return Answer(answer.status, {k: answer.headers[k] for k in _RELAYED if k in answer.headers}, answer.body)

    async def _through_app(self, request: Request) -> Answer:
        headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
        # HEAD goes on as GET (our client would wait for the body a HEAD answer announces but never
        # carries); `_write` leaves the body out
        method = "GET" if request.method == "HEAD" else request.method
        try:
            answer = await self.client.request(self.app_address, method, request.raw_path, headers, request.body)
        except ConnectionError as e:
            log.error("the router app did not answer %s %s: %r", request.method, request.path, e)
            return _error(503, "TEMPORARILY_UNAVAILABLE", "The router is not ready; try again shortly.")
        return Answer(answer.status, {k: v for k, v in answer.headers.items() if k not in _HOP_BY_HOP}, answer.body)


def _own_routes(app: web.Application, forward_handler) -> dict[str, list]:
    """Matchers of the router app's own routes under the API prefix (everything but the forwarding
    catch-all), by the path segment after the prefix: a path none of them matches is a metastore's."""
    out: dict[str, list] = {}
    for resource in app.router.resources():
        if all(route.handler == forward_handler for route in resource):
            continue
        info = resource.get_info()
        shape = info.get("path") or info.get("formatter") or ""
        if not shape.startswith(PREFIX + "/"):
            continue
        first = shape[len(PREFIX) + 1:].partition("/")[0]
        if "{" in first:
            raise ValueError(f"the router's own route {shape} has no fixed first segment")
        matcher = info["pattern"].fullmatch if "pattern" in info else shape.__eq__
        out.setdefault(first, []).append(matcher)
    return out


def _error(status: int, code: str, message: str) -> Answer:
    return Answer(status, {"content-type": "application/json"}, orjson.dumps({"error_code": code, "message": message}))


class _Connection(asyncio.Protocol):
    """One client connection: requests parsed as they arrive, answered one at a time, in order."""

    def __init__(self, front: Front):
        self.front = front
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.queue: deque[Request] = deque()
        self.ready = asyncio.Event()            # a request is queued
        self.writable = asyncio.Event()         # the transport takes more output
        self.writable.set()
        self.paused = False
        self.server_task: asyncio.Task | None = None
        self.idle_since: float | None = None    # loop time of the last answer, while no request is pending
        self._start()

    def _start(self) -> None:
        self.url, self.headers, self.body, self.size = b"", {}, [], 0

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.front.connections.add(self)
        self.server_task = asyncio.get_running_loop().create_task(self._serve())
        self._idle()

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():         # refused (see `_refuse`): the rest is not read
            return
        self.idle_since = None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse("Protocol upgrades are not supported.")
        except httptools.HttpParserError as e:
            self._refuse(f"Malformed HTTP request: {e}.")

    def connection_lost(self, exc) -> None:
        self.front.connections.discard(self)
        if self.server_task is not None:
            self.server_task.cancel()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    # -- httptools callbacks
    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self.headers.get("expect", "").lower() == "100-continue":
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        if self.size <= MAX_BODY_BYTES:         # past the limit, keep one byte more: the app answers 413
            self.body.append(body[:MAX_BODY_BYTES + 1 - self.size])
        self.size += len(body)

    def on_message_complete(self) -> None:
        self.queue.append(Request(self.parser.get_method().decode("ascii"), self.url.decode("latin-1"),
                                  self.headers, b"".join(self.body), self.size > MAX_BODY_BYTES,
                                  self.parser.should_keep_alive()))
        self._start()
        self.ready.set()
        if len(self.queue) >= MAX_QUEUED and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    # --
    async def _serve(self) -> None:
        while True:
            await self.ready.wait()
            self.ready.clear()
            while self.queue:
                request = self.queue.popleft()
                if self.paused and len(self.queue) < MAX_QUEUED // 2:
                    self.paused = False
                    self.transport.resume_reading()
                try:
                    answer = await self.front.answer(request)
                except Exception:
                    log.exception("front: failed on %s %s", request.method, request.path)
                    answer = _error(500, "INTERNAL_ERROR",
                                    "The server failed to handle the request; it has been logged.")
                await self.writable.wait()
                self._write(request, answer)
                if not request.keep_alive:
                    self.transport.close()
                    return
                self._idle()

    def _write(self, request: Request, answer: Answer) -> None:
        lines = [f"HTTP/1.1 {answer.status} {_reason(answer.status)}", f"Content-Length: {len(answer.body)}"]
        lines += [f"{name}: {value}" for name, value in answer.headers.items()]
        if not request.keep_alive:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.transport.write(head if request.method == "HEAD" else head + answer.body)

    def _refuse(self, message: str) -> None:
        answer = _error(400, "MALFORMED_REQUEST", message)
        self._write(Request("", "", {}, b"", False, False), answer)
        self.transport.close()

    def _idle(self) -> None:
        if not self.queue:
            self.idle_since = asyncio.get_running_loop().time()


_REASONS = {s.value: s.phrase for s in http.HTTPStatus}


def _reason(status: int) -> str:
    return _REASONS.get(status, "Unknown")


class Listening:
    """The front listening on its public address, with the router app behind it on loopback."""

    def __init__(self, front: Front, server: asyncio.AbstractServer, runner: web.AppRunner):
        self.front, self.server, self.runner = front, server, runner
        self.port: int = server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Stop listening and close the client connections (the runner is its owner's to clean up)."""
        self.server.close()
        for connection in list(self.front.connections):
            connection.transport.close()
        self.front.close()


async def start_front(app: web.Application, host: str, port: int) -> Listening:
    """Serve the router app (make_router_app) behind a front on (host, port); port 0 picks a free one."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()       # the front's alone: loopback
    front = Front(app, Address(*runner.addresses[0][:2]))
    server = await asyncio.get_running_loop().create_server(lambda: _Connection(front), host, port)
    return Listening(front, server, runner)
