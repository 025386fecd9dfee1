"""The fronts' HTTP/1.1 server (the router's and each shard's): requests parsed with httptools as
they arrive, each handed to an `answer` coroutine, answers written in order per connection.

It builds no request or response objects beyond two small records, which is why a front answers
a request in a fraction of what aiohttp.web's server takes (bench_front, docs/benchmarks.md). Whatever a front
does not answer itself it relays (`relay`) to the aiohttp app behind it on a private address.
"""

from __future__ import annotations

import asyncio
import http
import logging
import os
import secrets
import socket
import sys
import time
from collections import deque
from dataclasses import dataclass
from email.utils import formatdate
from typing import Awaitable, Callable, Protocol

import httptools
import orjson
from aiohttp import web

from ..shards.delta_api import HEAD_HEADER
from ..shards.http import MAX_BODY_BYTES
from .shard_client import Address, Answer, ShardClient

log = logging.getLogger(__name__)

KEEP_ALIVE_SECONDS = 75.0       # an idle client connection is closed after this (aiohttp's default)
IDLE_SWEEP_SECONDS = 1.0        # how often idle connections are looked for
BACKLOG = 1024                  # connections waiting to be accepted: a burst of clients (the loops' default,
                                # 100, overflowed at 128: dropped handshakes cost seconds)
MAX_QUEUED = 16                 # pipelined requests read ahead per connection before reading pauses
# Not relayed either way: they describe one connection, or a framing this hop redoes.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "expect", "host",
                         "te", "trailer", "upgrade", "proxy-connection"})


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


class Front(Protocol):
    """What stands before an app: answers each request, itself or by relaying it to the app."""
    client: ShardClient         # its connections to the app

    async def answer(self, request: Request) -> Answer: ...


def error_answer(status: int, code: str, message: str) -> Answer:
    return Answer(status, {"content-type": "application/json"}, orjson.dumps({"error_code": code, "message": message}))


async def relay(client: ShardClient, address: Address, request: Request) -> Answer:
    """The request sent on to the app at `address`, and its answer."""
    headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
    # HEAD goes on as GET (our client would wait for the body a HEAD answer announces but never
    # carries); `_write` leaves the body out
    method = "GET" if request.method == "HEAD" else request.method
    if request.method == "HEAD":    # ... saying so, for the routes whose HEAD is not a GET's (shards/delta_api.py)
        headers[HEAD_HEADER.lower()] = "HEAD"
    try:
        answer = await client.request(address, method, request.raw_path, headers, request.body)
    except ConnectionError as e:
        log.error("the app behind the front did not answer %s %s: %r", request.method, request.path, e)
        return error_answer(503, "TEMPORARILY_UNAVAILABLE", "The server is not ready; try again shortly.")
    return Answer(answer.status, {k: v for k, v in answer.headers.items() if k not in _HOP_BY_HOP}, answer.body)


_date: tuple[int, str] = (0, "")


def http_date() -> str:
    """The Date header's value, formatted once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, formatdate(now, usegmt=True))     # English names whatever the locale
    return _date[1]


class Server:
    """The connections of one front, on as many listening sockets as it is given."""

    def __init__(self, answer: Callable[[Request], Awaitable[Answer]]):
        self.answer = answer
        self.connections: set[_Connection] = set()
        self.listening: list[asyncio.AbstractServer] = []
        self._sweeper = asyncio.get_running_loop().create_task(self._close_idle_connections())

    async def listen(self, host: str, port: int) -> int:
        """Accept connections on (host, port); port 0 picks a free one, returned."""
        server = await asyncio.get_running_loop().create_server(lambda: _Connection(self), host, port,
                                                                    backlog=BACKLOG)
        self.listening.append(server)
        return server.sockets[0].getsockname()[1]

    async def listen_unix(self, name: str) -> None:
        """Accept connections on a Unix socket; a leading NUL names an abstract one (Linux)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:    # bound by hand: uvloop refuses abstract names
            sock.bind(name)
            sock.setblocking(False)
            server = await asyncio.get_running_loop().create_unix_server(lambda: _Connection(self), sock=sock,
                                                                         backlog=BACKLOG)
        except BaseException:
            sock.close()
            raise
        self.listening.append(server)

    def close(self) -> None:
        """Stop listening and close every connection."""
        self._sweeper.cancel()
        for server in self.listening:
            server.close()
        for connection in list(self.connections):
            connection.transport.close()

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


class _Connection(asyncio.Protocol):
    """One client connection: requests parsed as they arrive, answered one at a time, in order."""

    def __init__(self, server: Server):
        self.server = server
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
        self.server.connections.add(self)
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
        self.server.connections.discard(self)
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
                    answer = await self.server.answer(request)
                except Exception:
                    log.exception("front: failed on %s %s", request.method, request.path)
                    answer = error_answer(500, "INTERNAL_ERROR",
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
        if request.method == "HEAD" or not answer.body:
            self.transport.write(head)
        else:
            self.transport.writelines((head, answer.body))     # not head + body: a listing's 236 KB copied again

    def _refuse(self, message: str) -> None:
        answer = error_answer(400, "MALFORMED_REQUEST", message)
        self._write(Request("", "", {}, b"", False, False), answer)
        self.transport.close()

    def _idle(self) -> None:
        if not self.queue:
            self.idle_since = asyncio.get_running_loop().time()


_REASONS = {s.value: s.phrase for s in http.HTTPStatus}


def _reason(status: int) -> str:
    return _REASONS.get(status, "Unknown")


@dataclass
class Listening:
    """A front on its public address, with the app behind it on a private one."""
    server: Server
    port: int
    runner: web.AppRunner
    front: Front

    def stop(self) -> None:
        """Stop listening and close the client connections (the runner is its owner's to clean up)."""
        self.server.close()
        self.front.client.close()


async def serve_behind(app: web.Application, make_front: Callable[[Address], Front], host: str, port: int,
                       unix: str | None = None) -> Listening:
    """Serve `app` on a private address with the front `make_front(that address)` before it, on
    (host, port) and, if named, on a Unix socket too; port 0 picks a free one."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    if sys.platform == "linux":     # abstract (leading NUL): this host only, no file left behind
        private = f"\0shardcat-app-{os.getpid()}-{secrets.token_hex(4)}"
        await web.UnixSite(runner, private, backlog=BACKLOG).start()
        address = Address("127.0.0.1", 0, private)
    else:
        await web.TCPSite(runner, "127.0.0.1", 0, backlog=BACKLOG).start()
        address = Address(*runner.addresses[0][:2])
    front = make_front(address)
    server = Server(front.answer)
    public_port = await server.listen(host, port)
    if unix is not None:
        await server.listen_unix(unix)
    return Listening(server, public_port, runner, front)
