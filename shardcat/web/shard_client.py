"""The router's HTTP/1.1 client for its hops (to the shards, and from its front to the router app):
pooled keep-alive connections, nothing more.

aiohttp's general-purpose client was about a third of the router's work per forwarded request.
This one sends a request whose bytes are already known and reads the answer (parsed by
httptools, llhttp's binding), one request at a time per connection. It tells the caller
whether a failed request can have reached the shard: `ShardUnreachable` (never connected: safe
to send again) versus `ConnectionLost` (sent, outcome unknown).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import httptools

IDLE_SECONDS = 15.0     # well under the shards' keep-alive timeout (aiohttp: 75 s), so a pooled
                        # connection is not closed by the shard while a request is on its way
MAX_IDLE_PER_SHARD = 256


class ShardUnreachable(ConnectionError):
    """No connection could be made: the request never left."""


class ConnectionLost(ConnectionError):
    """The connection failed after the request was sent (or timed out): it may have been applied."""


class Address(NamedTuple):
    """Where a hop goes: a TCP host and port, or, for a server on this host, a Unix socket it also
    listens on (cheaper than loopback TCP; the host and port then only fill the Host header)."""
    host: str
    port: int
    unix: str | None = None


@dataclass
class Answer:
    status: int
    headers: dict[str, str]       # names in lower case
    body: bytes


class _Connection(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.idle_since = 0.0
        self.deadline = 0.0         # loop time by which the request on it must be answered
        self._waiter: asyncio.Future | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self.fail(ConnectionLost(f"unreadable answer from the shard: {e}"))
            self.close()

    def connection_lost(self, exc) -> None:
        self.fail(ConnectionLost(f"the shard closed the connection{f': {exc}' if exc else ''}"))

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        answer = Answer(self.parser.get_status_code(), self._headers, b"".join(self._body))
        if not self.parser.should_keep_alive():
            self.close()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(answer)

    # --
    def fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)

    @property
    def closed(self) -> bool:
        # The transport's word: closed by the shard, it says so a loop turn before connection_lost.
        return self.transport is None or self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, request: bytes, timeout: float) -> Answer:
        """Sends the request and waits for its answer; ShardClient's watchdog fails it after `timeout`."""
        self._headers, self._body = {}, []
        self._waiter = self.loop.create_future()
        self.deadline = self.loop.time() + timeout
        self.transport.write(request)
        try:
            return await self._waiter
        finally:
            self._waiter = None


class ShardClient:
    """Keep-alive connections per shard address; `request` sends one request and returns its answer.

    `gone(address)`: whether the shard there was declared dead (the router's supervisor): a request
    waiting on it fails as lost within the watchdog's second instead of at the timeout. A shard
    whose process hangs as it dies (its raylet gone) holds a connection open and answers nothing."""

    def __init__(self, timeout: float = 30.0, gone: Callable[[Address], bool] | None = None):
        self.timeout = timeout
        self.gone = gone
        self._idle: dict[Address, list[_Connection]] = {}
        self._waiting: dict[_Connection, Address] = {}  # a request sent, its answer not yet in
        self._watchdog: asyncio.Task | None = None

    async def request(self, address: Address, method: str, raw_path: str, headers: dict[str, str],
                      body: bytes = b"") -> Answer:
        lines = [f"{method} {raw_path} HTTP/1.1", f"Host: {address.host}:{address.port}",
                 f"Content-Length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        connection = await self._acquire(address)
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._fail_overdue())
        self._waiting[connection] = address
        try:
            answer = await connection.exchange(request, self.timeout)
        except BaseException:
            connection.close()
            raise
        finally:
            self._waiting.pop(connection, None)
        self._release(address, connection)
        return answer

    async def _fail_overdue(self) -> None:
        """Fails the requests not answered within the timeout: one watchdog for all of them, not a
        timer started and cancelled per request (the router's hottest path)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(1.0, self.timeout / 4))
            now = loop.time()
            for connection, address in list(self._waiting.items()):
                if connection.deadline < now:
                    connection.fail(ConnectionLost(f"no answer from the shard within {self.timeout:g} s"))
                elif self.gone is not None and self.gone(address):
                    connection.fail(ConnectionLost("the shard was declared dead while the request waited"))

    async def _acquire(self, address: Address) -> _Connection:
        idle = self._idle.get(address)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < IDLE_SECONDS:
                return connection
            connection.close()
        try:
            return await asyncio.wait_for(_connect(address), self.timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise ShardUnreachable(f"cannot connect to {address.unix or f'{address.host}:{address.port}'!r}: "
                                   f"{e!r}") from None

    def _release(self, address: Address, connection: _Connection) -> None:
        idle = self._idle.setdefault(address, [])
        if connection.closed or len(idle) >= MAX_IDLE_PER_SHARD:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


async def _connect(address: Address) -> _Connection:
    loop = asyncio.get_running_loop()
    if address.unix is None:
        return (await loop.create_connection(lambda: _Connection(loop), address.host, address.port))[1]
    # Connected by hand: uvloop's create_unix_connection refuses Linux's abstract socket names.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, address.unix)
        # A full listen queue fails a Unix connect with EAGAIN, which uvloop reports as connected.
        sock.getpeername()
        return (await loop.create_unix_connection(lambda: _Connection(loop), sock=sock))[1]
    except BaseException:
        sock.close()
        raise
