"""The load generator's HTTP/1.1 client: keep-alive connections sending prebuilt requests.

The benchmarks share the machine's two cores with the servers they measure, so every microsecond
the client spends on a request is one the server does not get. aiohttp's client costs about
75 µs of CPU per request; this one sends bytes built once per run, reads only the status line
and the body's framing (Content-Length or chunked), and leaves timeouts to one watchdog.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from yarl import URL


class BadResponse(ConnectionError):
    """The server's bytes are not an HTTP/1.1 response this client can frame."""


@dataclass(frozen=True)
class Prepared:
    """One request, ready to write."""
    host: str
    port: int
    raw: bytes
    label: str          # "GET http://...", for error samples


def prepare(method: str, url: URL, headers: dict[str, str], body: bytes | None) -> Prepared:
    target = url.raw_path_qs
    lines = [f"{method} {target} HTTP/1.1", f"Host: {url.raw_host}:{url.port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return Prepared(url.raw_host, url.port, head + (body or b""), f"{method} {url}")


def _frame(buf: bytearray) -> tuple[int, int, bool] | None:
    """(status, length of the whole response in buf, server closes after it), or None if incomplete."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = bytes(buf[:head_end]).lower()
    if not head.startswith(b"http/1."):
        raise BadResponse(f"not an HTTP/1.x response: {bytes(buf[:40])!r}")
    status = int(head[9:12])
    closes = b"\r\nconnection: close" in head
    start = head_end + 4
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        end = head.find(b"\r\n", at + 2)
        total = start + int(head[at + 17:end if end >= 0 else None])
        return (status, total, closes) if len(buf) >= total else None
    if b"\r\ntransfer-encoding: chunked" in head:
        pos = start
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
            pos = line_end + 2 + size + 2        # chunk, then its CRLF
            if size == 0:
                trailer_end = buf.find(b"\r\n\r\n", line_end)   # a last chunk may carry trailers
                if buf[line_end + 2:line_end + 4] == b"\r\n":
                    pos = line_end + 4
                elif trailer_end < 0:
                    return None
                else:
                    pos = trailer_end + 4
                return (status, pos, closes) if len(buf) >= pos else None
            if len(buf) < pos:
                return None
    if status in (204, 304) or 100 <= status < 200:
        return status, start, closes
    raise BadResponse("a response with neither Content-Length nor chunked framing")


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future | None = None
        self.lost = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.waiter is None or self.waiter.done():
            return
        try:
            framed = _frame(self.buf)
        except (BadResponse, ValueError) as e:
            self.waiter.set_exception(BadResponse(str(e)))
            self.transport.abort()
            return
        if framed is not None:
            status, length, closes = framed
            del self.buf[:length]
            if closes:
                self.transport.close()
            self.waiter.set_result(status)

    def connection_lost(self, exc) -> None:
        self.lost = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the server closed the connection mid-response"))


class Client:
    """One closed-loop worker's connections, one per (host, port), reopened when lost."""

    def __init__(self) -> None:
        self._connections: dict[tuple[str, int], _Connection] = {}
        self.sent_at: float | None = None       # the request in flight; the watchdog's clock

    async def send(self, request: Prepared) -> int:
        """The response's status; ConnectionError or TimeoutError if none came."""
        key = (request.host, request.port)
        conn = self._connections.get(key)
        loop = asyncio.get_running_loop()
        if conn is None or conn.lost:
            _, conn = await loop.create_connection(_Connection, request.host, request.port)
            self._connections[key] = conn
        conn.buf.clear()
        conn.waiter = loop.create_future()
        self.sent_at = time.monotonic()
        conn.transport.write(request.raw)
        try:
            return await conn.waiter
        finally:
            self.sent_at = None
            conn.waiter = None

    def time_out(self) -> None:
        """Abort every connection: the request in flight then fails as a timeout."""
        for conn in self._connections.values():
            if conn.waiter is not None and not conn.waiter.done():
                conn.waiter.set_exception(TimeoutError("no response in time"))
            if conn.transport is not None:
                conn.transport.abort()

    def close(self) -> None:
        for conn in self._connections.values():
            if conn.transport is not None:
                conn.transport.close()
        self._connections.clear()


async def watchdog(clients: list[Client], timeout: float) -> None:
    """Time out any request in flight for longer than `timeout`; runs until cancelled."""
    while True:
        await asyncio.sleep(min(0.5, timeout / 4))
        now = time.monotonic()
        for client in clients:
            if client.sent_at is not None and now - client.sent_at > timeout:
                client.time_out()
