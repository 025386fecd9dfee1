"""The fronts' request-head limits (shardcat/router/http_limits.py): a head is returned whole however
it arrives, every limit is refused with its status as soon as it is passed, and no more than a
head's limit is ever held, however much arrives at once."""

import pytest

from shardcat.web.http_limits import HeadReader, HttpLimits, LimitExceeded

LIMITS = HttpLimits(max_request_line=64, max_header_bytes=256, max_headers=5)
HEAD = b"GET /api/2.1/unity-catalog/catalogs/c HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n"


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def feed_all(reader: HeadReader, chunks: list[bytes]):
    """The first complete head and what followed it in its chunk; the most bytes held on the way."""
    held = 0
    for chunk in chunks:
        got = reader.feed(chunk)
        held = max(held, len(reader))
        if got is not None:
            head, at = got
            return bytes(head), chunk[at:], held
    return None, b"", held


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(HEAD), len(HEAD) + 10])
def test_a_head_is_returned_whole_however_it_is_cut(size):
    reader = HeadReader(LIMITS)
    head, rest, held = feed_all(reader, pieces(HEAD + b"BODY", size))
    assert head == HEAD and HEAD.endswith(b"\r\n\r\n")
    assert held <= LIMITS.max_head and len(reader) == 0        # nothing kept once it is returned


def test_pipelined_heads_come_one_at_a_time_from_one_read():
    data = b"\r\n" + HEAD + HEAD.replace(b"/c ", b"/d ")      # an empty line before a request is ignored
    reader = HeadReader(LIMITS)
    first, at = reader.feed(data)
    assert bytes(first) == HEAD
    second, at = reader.feed(data, at)
    assert b"/d " in bytes(second) and at == len(data)
    assert reader.feed(b"\r\n") is None and len(reader) == 0


@pytest.mark.parametrize("size", [1, 5, 4096])
def test_a_long_request_line_is_refused_with_414(size):
    reader = HeadReader(LIMITS)
    line = b"GET /" + b"a" * 100 + b" HTTP/1.1\r\n\r\n"
    with pytest.raises(LimitExceeded) as refused:
        feed_all(reader, pieces(line, size))
    assert refused.value.status == 414 and refused.value.code == "REQUEST_LIMIT_EXCEEDED"
    assert "64 bytes" in refused.value.message
    # a line of exactly the limit passes
    exact = b"GET /" + b"a" * (64 - len(b"GET / HTTP/1.1")) + b" HTTP/1.1\r\n\r\n"
    assert feed_all(HeadReader(LIMITS), pieces(exact, size))[0] == exact


@pytest.mark.parametrize("size", [1, 3, 100, 1 << 20])
def test_large_headers_are_refused_with_431_holding_no_more_than_a_head(size):
    reader = HeadReader(LIMITS)
    flood = b"GET / HTTP/1.1\r\nX: " + b"a" * (1 << 20)       # never ends
    held = 0
    with pytest.raises(LimitExceeded) as refused:
        for chunk in pieces(flood, size):
            reader.feed(chunk)
            held = max(held, len(reader))
    assert refused.value.status == 431 and "256 bytes" in refused.value.message
    assert held <= LIMITS.max_head


def test_header_bytes_at_the_limit_pass_and_one_more_is_refused():
    def head(n: int) -> bytes:      # header lines of exactly n bytes, the blank line included
        return b"GET / HTTP/1.1\r\nX: " + b"a" * (n - len(b"X: \r\n\r\n")) + b"\r\n\r\n"
    for size in (1, 1000):
        assert feed_all(HeadReader(LIMITS), pieces(head(256), size))[0] == head(256)
        with pytest.raises(LimitExceeded) as refused:
            feed_all(HeadReader(LIMITS), pieces(head(257), size))
        assert refused.value.status == 431


@pytest.mark.parametrize("size", [1, 1000])
def test_too_many_headers_are_refused_with_431(size):
    five = b"GET / HTTP/1.1\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(5)) + b"\r\n"
    assert feed_all(HeadReader(LIMITS), pieces(five, size))[0] == five
    six = b"GET / HTTP/1.1\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(6)) + b"\r\n"
    with pytest.raises(LimitExceeded) as refused:
        feed_all(HeadReader(LIMITS), pieces(six, size))
    assert refused.value.status == 431 and "5 headers" in refused.value.message


def test_a_huge_read_is_not_copied_whole():
    """One read of 64 MiB with no end of head: refused, and only a head's worth was ever held."""
    reader = HeadReader(HttpLimits())
    with pytest.raises(LimitExceeded) as refused:
        reader.feed(b"GET / HTTP/1.1\r\nX: " + b"a" * (64 << 20))
    assert refused.value.status == 431 and len(reader) <= HttpLimits().max_head


def test_defaults_are_those_of_production_servers():
    limits = HttpLimits()
    assert limits.max_request_line == 8192 and limits.max_header_bytes == 32768 and limits.max_headers == 100
    assert limits.max_body_bytes == 4 << 20 and 0 < limits.header_timeout <= 60 and limits.keep_alive == 75
