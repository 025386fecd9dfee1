"""The limits the fronts' HTTP/1.1 server (web/http1.py) puts on what a client may send, and
the collecting of one request head under them: the one place both fronts (the router's and each
shard's) enforce them. Pure: no sockets, no clock.

A request head is collected here whole before the parser sees it: bytes are appended to one
bytearray (linear), the end of the head is searched for only in bytes not searched yet, and
nothing past the limits is ever kept. The parser then gets the head in one piece, so it never
joins a line from fragments (httptools joins a header that arrives in pieces by concatenating
bytes: quadratic in the pieces).
"""

from __future__ import annotations

from dataclasses import dataclass

from .wire import MAX_BODY_BYTES

_CRLF = b"\r\n"
_END_OF_HEAD = b"\r\n\r\n"


@dataclass(frozen=True)
class HttpLimits:
    """What one client connection may send and how long it may take; the answer to each limit
    passed is in `LimitExceeded`'s docstring. Defaults are those of common production servers."""
    max_request_line: int = 8 * 1024        # bytes of "METHOD target HTTP/1.1" (nginx, aiohttp: 8 KiB)
    max_header_bytes: int = 32 * 1024       # bytes of the header lines after the request line (room for large JWTs)
    max_headers: int = 100                  # header lines (Apache's LimitRequestFields)
    max_body_bytes: int = MAX_BODY_BYTES    # a body the front buffers (the apps' client_max_size)
    header_timeout: float = 20.0            # s from a request's first byte (or the connection's start, or the
                                            # previous answer) to the end of its head (Apache's mod_reqtimeout)
    body_timeout: float = 60.0              # s without a byte while a body is read (nginx's client_body_timeout)
    keep_alive: float = 75.0                # s an idle connection stays open between requests (nginx, aiohttp)
    linger: float = 5.0                     # s a refused connection's further input is read and dropped before it
                                            # is closed, so the client reads the refusal rather than a reset

    @property
    def max_head(self) -> int:
        """The most bytes a head may have: the request line, its CRLF and the header lines (ending CRLF)."""
        return self.max_request_line + 2 + self.max_header_bytes


class LimitExceeded(Exception):
    """A request broke a limit: answered with `status` and Unity Catalog error JSON, then the
    connection is closed. 414 request line, 431 header size or count, 408 header or body time,
    413 body size."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def request_line_too_long(limits: HttpLimits) -> LimitExceeded:
    return LimitExceeded(414, "REQUEST_LIMIT_EXCEEDED",
                         f"The request line (method, URL, version) is longer than the limit of "
                         f"{limits.max_request_line} bytes.")


def headers_too_large(limits: HttpLimits) -> LimitExceeded:
    return LimitExceeded(431, "REQUEST_LIMIT_EXCEEDED",
                         f"The request's headers are larger than the limit of {limits.max_header_bytes} bytes.")


def too_many_headers(limits: HttpLimits) -> LimitExceeded:
    return LimitExceeded(431, "REQUEST_LIMIT_EXCEEDED",
                         f"The request has more than the limit of {limits.max_headers} headers.")


def headers_too_slow(limits: HttpLimits) -> LimitExceeded:
    return LimitExceeded(408, "REQUEST_LIMIT_EXCEEDED",
                         f"The request's headers did not arrive within the limit of {limits.header_timeout:g} s.")


def body_too_slow(limits: HttpLimits) -> LimitExceeded:
    return LimitExceeded(408, "REQUEST_LIMIT_EXCEEDED",
                         f"The request body stalled: no data for the limit of {limits.body_timeout:g} s.")


def body_too_large(limits: HttpLimits) -> LimitExceeded:
    # the words of the apps' own 413 (web/middleware.py), so both paths answer alike
    return LimitExceeded(413, "REQUEST_TOO_LARGE",
                         f"The request body is larger than the limit of {limits.max_body_bytes} bytes.")


class HeadReader:
    """Collects the bytes of one request head, refusing (LimitExceeded) as soon as a limit is
    passed: `feed` returns the whole head and the bytes after it once the head is complete."""

    def __init__(self, limits: HttpLimits):
        self.limits = limits
        self.buffer = bytearray()
        self._line_end = -1         # where the request line's CRLF starts, once seen
        self._searched = 0          # bytes of `buffer` already searched for the end of the head
        # a head no longer than this passes every limit (a header line has at least 3 bytes): not checked
        self._short = min(limits.max_request_line + 2, limits.max_header_bytes, 3 * limits.max_headers + 2)
        self._max_head = limits.max_head

    def __len__(self) -> int:
        return len(self.buffer)

    def feed(self, data: bytes, start: int = 0) -> tuple[bytes | memoryview, int] | None:
        """Takes `data` from `start` on: (the head, with its ending blank line; where in `data` the
        bytes after it begin) once the head is complete, else None (all of it taken)."""
        limits = self.limits
        buffer = self.buffer
        if not buffer:
            if start >= len(data) or data[start] in b"\r\n":     # empty lines before a request line are
                while start < len(data) and data[start] in b"\r\n":  # ignored (RFC 9112 2.2)
                    start += 1
                if start == len(data):
                    return None
            # the common case, a whole head in one read: searched where it is, not copied
            end = data.find(_END_OF_HEAD, start, start + self._max_head)
            if end >= 0:
                end += len(_END_OF_HEAD)
                if end - start > self._short:
                    line_end = data.find(_CRLF, start, start + limits.max_request_line + 2)
                    if line_end < 0:
                        raise request_line_too_long(limits)
                    self._check(data, line_end, end)
                return (data if start == 0 and end == len(data) else memoryview(data)[start:end]), end
        held = len(buffer)
        room = limits.max_head - held
        buffer += memoryview(data)[start:start + room]     # never more than a head may have: the rest stays
        if self._line_end < 0:                                # in `data`
            self._line_end = buffer.find(_CRLF, max(held - 1, 0), limits.max_request_line + 2)
            if self._line_end < 0:
                if len(buffer) > limits.max_request_line + 1:
                    raise request_line_too_long(limits)
                return None
            self._searched = self._line_end
        end = buffer.find(_END_OF_HEAD, max(self._searched - 3, self._line_end))
        if end < 0:
            self._searched = len(buffer)
            if len(buffer) - (self._line_end + 2) >= limits.max_header_bytes:     # and its end is yet to come
                raise headers_too_large(limits)
            return None
        end += len(_END_OF_HEAD)
        self._check(buffer, self._line_end, end)
        head = bytes(buffer[:end])
        self.buffer = bytearray()
        self._line_end, self._searched = -1, 0
        return head, start + end - held

    def _check(self, head: bytes | bytearray, line_end: int, end: int) -> None:
        """The limits on a complete head in `head`: its request line's CRLF at `line_end`, its end at `end`."""
        limits = self.limits
        if end - (line_end + 2) > limits.max_header_bytes:
            raise headers_too_large(limits)
        if head.count(_CRLF, line_end + 2, end) - 1 > limits.max_headers:
            raise too_many_headers(limits)
