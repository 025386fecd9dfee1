"""The fronts' HTTP/1.1 server (the router's and each shard's): requests parsed with httptools as
they arrive, each handed to an `answer` coroutine, answers written in order per connection.

It builds no request or response objects beyond two small records, which is why a front answers
a request in a fraction of what aiohttp.web's server takes (bench_front, docs/benchmarks.md). Whatever a front
does not answer itself it relays (`relay`) to the aiohttp app behind it on a private address.

What a client may send is bounded by the server's HttpLimits (web/http_limits.py: request
line 414, header size and count 431, header and body time 408, body size 413, idle keep-alive),
each passed answered in Unity Catalog error JSON before the connection is closed. Heads are
collected whole by a HeadReader before httptools sees them, so buffering is linear and bounded.

Why not a well-kept server instead (a hand-written protocol server must earn its place): measured
side by side (benchmarks/bench_http_servers.py, docs/benchmarks.md) serving the same constant
getTable-sized answer, aiohttp's low-level server (web_server.Server, C parser) and uvicorn's
httptools protocol each took about 1.6x this server's CPU per request, uvicorn's h11 protocol
about 5x; the rule was to switch to one within 10%. Nor does any of them enforce these limits by
itself: aiohttp's counts no headers, checks a URL's length per piece received (a 1 MiB URL sent
in 4 KiB pieces was read on), refuses with plain-text 400s and has no header-read timer;
uvicorn's httptools protocol reads a URL or header sent in pieces without end; h11 takes a
64 KiB request line or header at once.
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
from collections import Counter, deque
from dataclasses import dataclass
from email.utils import formatdate
from typing import Awaitable, Callable, Protocol

import httptools
import orjson
from aiohttp import web

from .iceberg_errors import protocol_body
from .http_limits import HeadReader, HttpLimits, LimitExceeded, body_too_large, body_too_slow, headers_too_slow
from .shard_client import Address, Answer, ShardClient
from .wire import CLIENT_ADDRESS_HEADER, CLIENT_HOST_HEADER, HEAD_HEADER

log = logging.getLogger(__name__)

IDLE_SWEEP_SECONDS = 1.0        # how often overdue connections are looked for (more often under short limits)
BACKLOG = 1024                  # connections waiting to be accepted: a burst of clients (the loops' default,
                                # 100, overflowed at 128: dropped handshakes cost seconds)
MAX_QUEUED = 16                 # pipelined requests read ahead per connection before reading pauses (as does a
                                # body's worth of queued bodies)
# Not relayed either way: they describe one connection, or a framing this hop redoes.
_END_OF_HEAD = b"\r\n\r\n"
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "expect", "host",
                         "te", "trailer", "upgrade", "proxy-connection"})


@dataclass
class Request:
    method: str
    raw_path: str                   # as the client sent it, query included
    headers: dict[str, str]         # names in lower case
    body: bytes
    keep_alive: bool
    peer: str | None = None         # the client's address
    operation: str | None = None    # the endpoint registry's operation name, where a front's fast path knew it

    @property
    def path(self) -> str:
        return self.raw_path.partition("?")[0]


class Front(Protocol):
    """What stands before an app: answers each request, itself or by relaying it to the app."""
    client: ShardClient         # its connections to the app

    async def answer(self, request: Request) -> Answer: ...


def error_answer(status: int, code: str, message: str) -> Answer:
    return Answer(status, {"content-type": "application/json"}, orjson.dumps({"error_code": code, "message": message}))


def refusal(limit: LimitExceeded) -> Answer:
    return error_answer(limit.status, limit.code, limit.message)


class _Unframed(Exception):
    """A request began where the HeadReader could not see it (see `_Connection.on_message_begin`)."""


async def relay(client: ShardClient, address: Address, request: Request) -> Answer:
    """The request sent on to the app at `address`, and its answer."""
    headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
    # Who asked, and by what name, for the app behind (a recipient's IP access list, the URLs it
    # hands out). The address is always this hop's peer, so no client can claim another (behind a
    # router, a shard sees the router's); the Host a router passed on is kept (it names the router:
    # the URLs a shard hands out must too), a client's own only changes what it is told back.
    headers[CLIENT_ADDRESS_HEADER.lower()] = request.peer or ""
    headers.setdefault(CLIENT_HOST_HEADER.lower(), request.headers.get("host", ""))
    # HEAD goes on as GET (our client would wait for the body a HEAD answer announces but never
    # carries); `_write` leaves the body out
    method = "GET" if request.method == "HEAD" else request.method
    if request.method == "HEAD":    # ... saying so, for the routes whose HEAD is not a GET's (catalog/protocols/delta_api.py)
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
    """The connections of one front, on as many listening sockets as it is given, under `limits`."""

    def __init__(self, answer: Callable[[Request], Awaitable[Answer]], limits: HttpLimits | None = None):
        self.answer = answer
        self.limits = limits or HttpLimits()
        self.connections: set[_Connection] = set()
        self.listening: list[asyncio.AbstractServer] = []
        self.largest_buffered = 0       # the most bytes one connection held of a request not yet whole
        self.refused: Counter[int] = Counter()     # connections refused, by the status they were answered
        self._sweeper = asyncio.get_running_loop().create_task(self._close_overdue_connections())

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

    async def _close_overdue_connections(self) -> None:
        """Acts on the connections past their deadline (idle, a head or a body too slow, a refusal
        lingered long enough): one sweep now and then, not a timer re-armed per request."""
        loop = asyncio.get_running_loop()
        while True:
            limits = self.limits
            await asyncio.sleep(min(IDLE_SWEEP_SECONDS, limits.header_timeout / 4, limits.keep_alive / 4,
                                    limits.body_timeout / 4, limits.linger / 4))
            now = loop.time()
            for connection in list(self.connections):
                deadline = connection.deadline()
                if deadline is not None and deadline < now:
                    connection.overdue()


class _Connection(asyncio.Protocol):
    """One client connection: request heads collected under the server's limits (HeadReader) and
    parsed whole, bodies parsed as they arrive, requests answered one at a time, in order.

    A limit passed, a malformed request or a deadline missed is answered (in order, after the
    answers already due) with Unity Catalog error JSON; then this side is shut for writing, and
    whatever the client still sends is read and dropped for up to `limits.linger` seconds before
    the connection is closed, so the client reads the refusal rather than a reset."""

    def __init__(self, server: Server):
        self.server = server
        self.limits = server.limits
        self.parser = httptools.HttpRequestParser(self)
        self.head = HeadReader(self.limits)
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        self.queue: deque[Request | Answer | None] = deque()    # an Answer: a refusal; None: close here
        self.queued_bytes = 0                   # of the bodies in `queue`
        self.ready = asyncio.Event()            # something is queued
        self.writable = asyncio.Event()         # the transport takes more output
        self.writable.set()
        self.paused = False
        self.held: list[bytes] = []             # read while paused, not parsed yet
        self.answering = False                  # the serve loop is on a request: the app's time, not the client's
        self.done = False                       # refused or ending: input is dropped
        self.fresh = True                       # no request yet
        self.client_eof = False                 # the client will send no more
        self.in_message = False                 # the parser has a request's head, its body is not complete
        self.feeding_body = False               # a body is being fed (a request beginning there is unframed)
        self.body_left: int | None = None       # Content-Length bytes yet to feed; None when chunked
        self.tail = b""                         # the last bytes of a chunked body fed (see `_chunked_end`)
        self.since = 0.0                        # loop time the current wait began: see `deadline`
        self.server_task: asyncio.Task | None = None
        self.loop = asyncio.get_running_loop()
        self._start()

    def _start(self) -> None:
        self.url, self.headers, self.body, self.size = b"", {}, [], 0

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername") if hasattr(transport, "get_extra_info") else None
        self.peer = peer[0] if isinstance(peer, tuple) and peer else None
        self.server.connections.add(self)
        self.server_task = self.loop.create_task(self._serve())
        self.since = self.loop.time()           # the first head is due within header_timeout of now

    def data_received(self, data: bytes) -> None:
        if self.done or self.transport.is_closing():     # refused: the rest is read and dropped
            return
        if self.paused:                                  # a read already under way when reading paused
            self.held.append(data)
            return
        self._take(data)

    def eof_received(self) -> bool:
        self.client_eof = True
        if not (self.queue or self.answering):
            return False                        # nothing more to answer: close
        if not self.done:
            self._end()                         # the client sent all it will: answer what is due, then close
        return True

    def connection_lost(self, exc) -> None:
        self.server.connections.discard(self)
        if self.server_task is not None:
            self.server_task.cancel()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    # -- reading
    def _take(self, data: bytes) -> None:
        """Parses what arrived, refusing the connection at the first limit passed or malformed request."""
        try:
            self._parse(data)
        except httptools.HttpParserUpgrade:
            self._refuse(self._malformed("Protocol upgrades are not supported."))
        except httptools.HttpParserError as e:
            limit = e.__context__
            if isinstance(limit, LimitExceeded):        # raised in one of our callbacks
                self._refuse(refusal(limit))
            elif isinstance(limit, _Unframed):
                self._end()
            else:
                self._refuse(self._malformed(f"Malformed HTTP request: {e}."))
        except LimitExceeded as limit:
            self._refuse(refusal(limit))

    def _malformed(self, message: str) -> Answer:
        """400 for a request the parser refused: in the Iceberg or Delta API's error model under theirs."""
        body = protocol_body(self.url.decode("latin-1").split("?", 1)[0], 400, "MALFORMED_REQUEST", message)
        return error_answer(400, "MALFORMED_REQUEST", message) if body is None else \
            Answer(400, {"content-type": "application/json"}, body)

    def _parse(self, data: bytes) -> None:
        at = 0
        while at < len(data):
            if self.paused:                     # enough queued: the rest waits for the answers
                self.held.append(data[at:])
                return
            if not self.in_message:
                first = not self.head.buffer
                got = self.head.feed(data, at)
                if got is None:
                    if first:
                        self.since = self.loop.time()   # a head's first bytes: the rest is due within header_timeout
                    self._note_buffered(len(self.head))
                    return
                head, at = got
                self.in_message = True
                self.tail = b""
                self.parser.feed_data(head)     # the whole head at once; a request without a body completes here
                continue
            # a body, fed so that it ends where a feed ends and the next head is the HeadReader's again:
            # exactly what Content-Length says, or a chunked body up to where it could end
            if self.body_left is not None:
                end = min(len(data), at + self.body_left)
                self.body_left -= end - at
            else:
                end = self._chunked_end(data, at)
            self.since = self.loop.time()
            self.feeding_body = True
            try:
                self.parser.feed_data(memoryview(data)[at:end] if at or end < len(data) else data)
            finally:
                self.feeding_body = False
            at = end

    def _chunked_end(self, data: bytes, at: int) -> int:
        """Where in `data` the chunked body fed from `at` on could end: a chunked message ends with
        an empty line (after the last chunk, or its trailers), so just after the next CRLF CRLF,
        counting the last bytes fed before; else the end of `data`."""
        across = (self.tail + data[at:at + 3]).find(_END_OF_HEAD)
        if across >= 0:
            end = at + across + 4 - len(self.tail)
        else:
            found = data.find(_END_OF_HEAD, at)
            end = len(data) if found < 0 else found + 4
        self.tail = (self.tail + data[max(at, end - 3):end])[-3:]
        return end

    def _note_buffered(self, size: int) -> None:
        if size > self.server.largest_buffered:
            self.server.largest_buffered = size

    # -- httptools callbacks (a LimitExceeded raised here stops the parser: see `_take`)
    def on_url(self, url: bytes) -> None:
        if self.feeding_body:
            # A request began inside what was fed as a body (bodies are fed to end where they can
            # end, so this should not happen): its head would reach the parser without the
            # HeadReader's limits. Answer what came before, then close (RFC 9112 9.3.2: a client
            # retries what a closed connection left unanswered).
            raise _Unframed()
        self.url = url                          # once per request: the head is parsed whole

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        headers = self.headers
        if "transfer-encoding" in headers:
            self.body_left = None               # chunked
        else:
            length = headers.get("content-length")
            self.body_left = int(length) if length is not None else 0
            if self.body_left > self.limits.max_body_bytes:
                raise body_too_large(self.limits)   # refused before a byte of it is read (nor 100 Continue sent)
        expect = headers.get("expect")
        if expect is not None and expect.lower() == "100-continue":
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > self.limits.max_body_bytes:
            raise body_too_large(self.limits)
        self.body.append(body)
        self._note_buffered(self.size)

    def on_message_complete(self) -> None:
        self.fresh = False
        body = b"".join(self.body) if self.body else b""
        self.queue.append(Request(self.parser.get_method().decode("ascii"), self.url.decode("latin-1"),
                                  self.headers, body, self.parser.should_keep_alive(), self.peer))
        self.queued_bytes += len(body)
        self.in_message = False
        self._start()
        self.ready.set()
        if (len(self.queue) >= MAX_QUEUED or self.queued_bytes > self.limits.max_body_bytes) and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    # -- answering
    async def _serve(self) -> None:
        while True:
            await self.ready.wait()
            self.ready.clear()
            while self.queue:
                self.answering = True
                request = self.queue.popleft()
                if not isinstance(request, Request):        # a refusal or the end: the last thing written
                    await self.writable.wait()
                    if request is not None:
                        self._write("", False, request)
                    self._linger()
                    return
                self.queued_bytes -= len(request.body)
                try:
                    answer = await self.server.answer(request)
                except Exception:
                    log.exception("front: failed on %s %s", request.method, request.path)
                    answer = error_answer(500, "INTERNAL_ERROR",
                                          "The server failed to handle the request; it has been logged.")
                await self.writable.wait()
                self._write(request.method, request.keep_alive, answer)
                if not request.keep_alive:
                    self._linger()
                    return
                if self.paused:
                    self._resume()
            self.answering = False
            self.since = self.loop.time()       # idle from now, or the next head is due within header_timeout

    def _resume(self) -> None:
        """Reads on once the queue is short again, first what was read while paused."""
        if len(self.queue) < MAX_QUEUED // 2 and self.queued_bytes <= self.limits.max_body_bytes \
                and not self.done:
            self.paused = False
            held, self.held = self.held, []
            if held:
                self._take(b"".join(held))
            if not self.paused and not self.transport.is_closing():
                self.transport.resume_reading()

    def _write(self, method: str, keep_alive: bool, answer: Answer) -> None:
        status = answer.status
        start = _STARTS.get(status) or f"HTTP/1.1 {status} {_reason(status)}\r\nContent-Length: "
        head = "".join([start, str(len(answer.body)), *[f"\r\n{name}: {value}" for name, value in answer.headers.items()],
                        "\r\n\r\n" if keep_alive else "\r\nConnection: close\r\n\r\n"]).encode("latin-1")
        if method == "HEAD" or not answer.body:
            self.transport.write(head)
        else:
            self.transport.writelines((head, answer.body))     # not head + body: a listing's 236 KB copied again

    def _refuse(self, answer: Answer) -> None:
        """Answers `answer` after the answers already due, and ends the connection."""
        self.server.refused[answer.status] += 1
        self.done = True
        self.held = []
        self.queue.append(answer)
        self.ready.set()

    def _end(self) -> None:
        """Ends the connection after the answers already due."""
        self.done = True
        self.held = []
        self.queue.append(None)
        self.ready.set()

    def _linger(self) -> None:
        """Shuts this side for writing once the answers are sent, and drops the client's input
        until it closes or `limits.linger` passes (closing at once could reset the connection
        and lose the answer with it)."""
        self.done = True
        self.answering = False
        if self.transport.is_closing():
            return
        if self.client_eof:
            self.transport.close()              # sends what is buffered first
            return
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        self.since = self.loop.time()

    # -- deadlines (looked at by the server's sweep, not kept up to date per request)
    def deadline(self) -> float | None:
        """The loop time by which what the connection waits for now is due; None for no limit."""
        limits = self.limits
        if self.answering or self.queue:
            return None                         # the app's time, not the client's
        if self.done:
            return self.since + limits.linger
        if self.in_message:
            return self.since + limits.body_timeout
        if len(self.head) or self.fresh:
            return self.since + limits.header_timeout
        return self.since + limits.keep_alive

    def overdue(self) -> None:
        """Past the deadline: a refusal lingered, an idle connection, a head or a body too slow."""
        if self.done or not (len(self.head) or self.in_message):
            self.transport.close()              # lingered enough, or idle (never sent a byte: nothing to answer)
        elif self.in_message:
            self._refuse(refusal(body_too_slow(self.limits)))
        else:
            self._refuse(refusal(headers_too_slow(self.limits)))


_REASONS = {s.value: s.phrase for s in http.HTTPStatus}
# an answer's first line and the name of its first header, for every status with a reason phrase
_STARTS = {status: f"HTTP/1.1 {status} {reason}\r\nContent-Length: " for status, reason in _REASONS.items()}


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
                       unix: str | None = None, limits: HttpLimits | None = None) -> Listening:
    """Serve `app` on a private address with the front `make_front(that address)` before it, on
    (host, port) and, if named, on a Unix socket too; port 0 picks a free one. The front refuses
    what passes `limits`; the app's own parser takes everything the front relays (a little
    room for the headers a hop adds) and keeps connections as long as the front's client does."""
    limits = limits or HttpLimits()
    runner = web.AppRunner(app, access_log=None, max_line_size=limits.max_request_line + 256,
                           max_field_size=limits.max_header_bytes + 1024, max_headers=limits.max_headers + 32,
                           keepalive_timeout=limits.keep_alive)
    await runner.setup()
    if sys.platform == "linux":     # abstract (leading NUL): this host only, no file left behind
        private = f"\0shardcat-app-{os.getpid()}-{secrets.token_hex(4)}"
        await web.UnixSite(runner, private, backlog=BACKLOG).start()
        address = Address("127.0.0.1", 0, private)
    else:
        await web.TCPSite(runner, "127.0.0.1", 0, backlog=BACKLOG).start()
        address = Address(*runner.addresses[0][:2])
    front = make_front(address)
    server = Server(front.answer, limits)
    public_port = await server.listen(host, port)
    if unix is not None:
        await server.listen_unix(unix)
    return Listening(server, public_port, runner, front)
