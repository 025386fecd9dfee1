"""Tests for storage URL normalisation (shardcat.cache.urls)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, strategies as st

from shardcat.entities.urls import InvalidUrl, is_within, join_url, normalize_url, url_from_segments, url_segments

ABFSS = "abfss://cont@acct.dfs.core.windows.net"

CANONICAL = [
    # schemes and authorities
    ("s3://bucket/a/b", "s3://bucket/a/b"),
    ("S3://Bucket/A/b", "s3://bucket/A/b"),          # path case is kept
    ("s3a://bucket/a", "s3://bucket/a"),
    ("S3A://bucket/a", "s3://bucket/a"),
    ("s3n://bucket/a", "s3://bucket/a"),
    ("gs://my_bucket.x/a", "gs://my_bucket.x/a"),
    ("GS://BUCKET/a", "gs://bucket/a"),
    ("abfss://Cont@Acct.DFS.core.windows.net/a", ABFSS + "/a"),
    ("abfs://cont@acct.dfs.core.windows.net/a", ABFSS + "/a"),     # abfs: the same files without TLS
    # bucket roots
    ("s3://bucket", "s3://bucket"),
    ("s3://bucket/", "s3://bucket"),
    ("s3://bucket//", "s3://bucket"),
    ("s3://bucket/.", "s3://bucket"),
    ("s3://bucket/a/..", "s3://bucket"),
    (ABFSS + "/", ABFSS),
    # file forms
    ("file:/a/b", "file:///a/b"),
    ("file:///a/b", "file:///a/b"),
    ("file://localhost/a/b", "file:///a/b"),
    ("file://LocalHost/a/b", "file:///a/b"),
    ("FILE:///a/b/", "file:///a/b"),
    ("file:////a//b", "file:///a/b"),
    ("/a/b", "file:///a/b"),
    ("/a/b/", "file:///a/b"),
    ("/", "file:///"),
    ("file:/", "file:///"),
    ("file://", "file:///"),
    ("file:///", "file:///"),
    ("file://localhost", "file:///"),
    # slashes, '.' and '..'
    ("s3://b/a//b///c", "s3://b/a/b/c"),
    ("s3://b/a/b/", "s3://b/a/b"),
    ("s3://b/./a/./b/.", "s3://b/a/b"),
    ("s3://b/a/x/../b", "s3://b/a/b"),
    ("s3://b/a/x/y/../../b/", "s3://b/a/b"),
    ("/a/../b", "file:///b"),
    ("s3://b/...", "s3://b/..."),                     # only exactly '..' is special
    ("s3://b/a..b/.a", "s3://b/a..b/.a"),
    # percent encoding: one canonical form
    ("s3://b/%7Euser", "s3://b/~user"),
    ("s3://b/%7euser", "s3://b/~user"),
    ("s3://b/%61%62", "s3://b/ab"),
    ("s3://b/a b", "s3://b/a%20b"),
    ("s3://b/a%20b", "s3://b/a%20b"),
    ("s3://b/100%25", "s3://b/100%25"),
    ("s3://b/%c3%a9", "s3://b/%C3%A9"),
    ("s3://b/é", "s3://b/%C3%A9"),
    ("s3://b/t/date=2024-01-01/x+y:z@w", "s3://b/t/date=2024-01-01/x+y:z@w"),
    ("s3://b/%3D%3a", "s3://b/=:"),
    ("s3://b/%3F%23", "s3://b/%3F%23"),               # escaped '?' and '#' are key characters
    ("s3://b/a%2Eb", "s3://b/a.b"),                   # an escaped dot inside a name is a dot
    ("s3://b/%2E%2E%2E", "s3://b/..."),               # three dots are a name, not a dot segment
    ("s3://b/.%2Ea", "s3://b/..a"),
    ("s3://b/a%252Fb", "s3://b/a%252Fb"),             # an escaped '%': the name holds "%2F" literally
]


@pytest.mark.parametrize("url, expected", CANONICAL)
def test_normalize(url, expected):
    assert normalize_url(url) == expected


@pytest.mark.parametrize("url, expected", CANONICAL)
def test_normalize_is_idempotent(url, expected):
    assert normalize_url(expected) == expected


INVALID = [
    ("", "empty"),
    ("a/b", "relative"),
    ("a", "relative"),
    ("./a", "relative"),
    ("//host/a", "'//'"),
    ("http://host/a", "unsupported scheme 'http'"),
    ("hdfs://nn/a", "unsupported scheme 'hdfs'"),
    ("C:/data", "unsupported scheme 'C'"),
    ("s3:", "s3://"),
    ("s3:bucket/a", "s3://"),
    ("s3:/bucket/a", "s3://"),
    ("s3://", "missing bucket"),
    ("s3:///a", "missing bucket"),
    ("gs:///a", "missing bucket"),
    ("abfss:///a", "missing container@account"),
    ("abfss://acct.dfs.core.windows.net/a", "container@account-host"),
    ("abfss://@acct/a", "container@account-host"),
    ("abfss://c@/a", "container@account-host"),
    ("abfss://a@b@c/a", "container@account-host"),
    ("s3://user@bucket/a", "invalid bucket name"),
    ("s3://bucket:9000/a", "invalid bucket name"),
    ("s3://buck%65t/a", "invalid bucket name"),
    ("s3://../a", "invalid bucket name"),
    ("s3://-b/a", "invalid bucket name"),
    ("s3://b c/a", "invalid bucket name"),
    ("file://host/a", "host 'host'"),
    ("file:a/b", "absolute path"),
    ("file:", "absolute path"),
    ("s3://b/..", "above the root"),
    ("s3://b/a/../..", "above the root"),
    ("s3://b/%2E%2E/a", "encoded dot segment"),
    ("s3://b/a%2Fb", "encoded path separator"),
    ("s3://b/a%5Cb", "encoded path separator"),
    ("s3://b/a\\b", "backslash"),
    ("s3://b/%FF", "not UTF-8"),
    ("/..", "above the root"),
    ("file:///a/../../b", "above the root"),
    ("s3://b/a?x=1", "query"),
    ("s3://b/a?", "query"),
    ("s3://b/a#frag", "fragment"),
    ("s3://b/a\nb", "control"),
    ("s3://b/a\x00", "control"),
    ("s3://b/a\x7f", "control"),
    ("s3://b/a\x85", "control"),
    ("\ts3://b/a", "control"),
    ("s3://b/a%0Ab", "control"),
    ("s3://b/a%00", "control"),
    ("s3://b/a%7F", "control"),
    ("s3://b/a%C2%85", "control"),                    # escaped C1 control
    ("s3://b/a%", "percent-escape"),
    ("s3://b/a%2", "percent-escape"),
    ("s3://b/a%zz", "percent-escape"),
    ("s3://b/a%%41", "percent-escape"),
    ("s3://b/\udc80", "not valid Unicode"),
]


@pytest.mark.parametrize("url, reason", INVALID)
def test_invalid(url, reason):
    with pytest.raises(InvalidUrl) as caught:
        normalize_url(url)
    message = str(caught.value)
    assert reason in message
    assert repr(url)[:40] in message  # names the offending URL
    assert isinstance(caught.value, ValueError)


def test_non_string_is_type_error():
    with pytest.raises(TypeError):
        normalize_url(None)  # type: ignore[arg-type]


def test_invalid_url_pickles():
    error = InvalidUrl("s3://", "missing bucket")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.url == "s3://" and copy.reason == "missing bucket"


@pytest.mark.parametrize("url, segments", [
    ("s3://Bucket", ("s3://bucket",)),
    ("s3://bucket/", ("s3://bucket",)),
    ("s3a://bucket/a/b/", ("s3://bucket", "a", "b")),
    ("gs://b/x", ("gs://b", "x")),
    (ABFSS + "/t/1", (ABFSS, "t", "1")),
    ("/tmp/x", ("file://", "tmp", "x")),
    ("file:///", ("file://",)),
])
def test_url_segments(url, segments):
    assert url_segments(url) == segments
    assert url_from_segments(segments) == normalize_url(url)


def test_url_segments_rejects_invalid():
    with pytest.raises(InvalidUrl):
        url_segments("s3://b/../x")


@pytest.mark.parametrize("base, names, expected", [
    ("s3://b", ("tables", "1234"), "s3://b/tables/1234"),
    ("s3a://B/root/", ("tables", "u"), "s3://b/root/tables/u"),
    ("/tmp/x", ("y",), "file:///tmp/x/y"),
    ("file:///", ("y",), "file:///y"),
    ("s3://b/r", (), "s3://b/r"),
    ("s3://b", ("a b", "50%", "é"), "s3://b/a%20b/50%25/%C3%A9"),  # names are literal
    ("s3://b", ("%2F",), "s3://b/%252F"),
    ("s3://b", ("...",), "s3://b/..."),
])
def test_join_url(base, names, expected):
    assert join_url(base, *names) == expected
    assert normalize_url(expected) == expected


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/", "a\nb", "a\\b"])
def test_join_url_refuses_names_that_leave_one_level(name):
    with pytest.raises(InvalidUrl) as caught:
        join_url("s3://b/root", name)
    assert "s3://b/root" in str(caught.value)


def test_join_url_refuses_invalid_base():
    with pytest.raises(InvalidUrl):
        join_url("relative/root", "x")


@pytest.mark.parametrize("child, parent, expected", [
    ("s3://b/a", "s3://b/a", True),
    ("s3://b/a/", "s3a://B/a", True),
    ("s3://b/a/x/y", "s3://b/a", True),
    ("s3://b/a", "s3://b", True),
    ("s3://b", "s3://b/a", False),
    ("s3://b/ab", "s3://b/a", False),                  # sibling prefix, not a child
    ("s3://b/a", "s3://b/ab", False),
    ("s3://bb/a", "s3://b", False),
    ("gs://b/a", "s3://b", False),
    ("s3://b/a/../c", "s3://b/a", False),
    ("/tmp/x", "file:///tmp", True),
    ("/tmp", "file:///", True),
    (ABFSS + "/a/b", ABFSS, True),
    ("abfss://other@acct.dfs.core.windows.net/a", ABFSS, False),
])
def test_is_within(child, parent, expected):
    assert is_within(child, parent) is expected


# --- properties -------------------------------------------------------------------------

_heads = st.sampled_from(["s3://b", "S3A://B", "gs://g", ABFSS, "file://", "file://localhost", ""])
_chars = st.characters(blacklist_categories=("Cc", "Cs"))
_segments = st.text(_chars, max_size=6).filter(lambda s: not set(s) & set("/\\?#"))


def _escape_some(text: str, mask: list[bool]) -> str:
    """Percent-escape the UTF-8 bytes of the characters picked by ``mask``."""
    out = []
    for i, ch in enumerate(text):
        if ch == "%" or (mask[i % len(mask)] if mask else False):
            out.append("".join(f"%{b:02x}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "".join(out)


@st.composite
def _urls(draw):
    head = draw(_heads)
    names = draw(st.lists(_segments, max_size=5))
    mask = draw(st.lists(st.booleans(), max_size=8))
    path = "/".join(_escape_some(n, mask) for n in names if n not in (".", ".."))
    if not head:
        path = path.lstrip("/")  # a bare path must not start with '//' (that names a host)
    return head + "/" + path, names


@given(_urls())
def test_property_normalize_idempotent_and_segment_roundtrip(drawn):
    url, _ = drawn
    canonical = normalize_url(url)
    assert normalize_url(canonical) == canonical
    segments = url_segments(url)
    assert url_from_segments(segments) == canonical
    assert all(s and "/" not in s and s not in (".", "..") for s in segments[1:])
    assert canonical.isascii()
    assert is_within(url, canonical) and is_within(canonical, url)


@given(_heads, st.lists(_segments.filter(lambda s: s not in ("", ".", "..")), max_size=5),
       st.lists(st.booleans(), max_size=8), st.lists(st.booleans(), max_size=8))
def test_property_escaping_choice_does_not_matter(head, names, mask_a, mask_b):
    a = head + "/" + "/".join(_escape_some(n, mask_a) for n in names)
    b = head + "/" + "/".join(_escape_some(n, mask_b) for n in names)
    assert normalize_url(a) == normalize_url(b)
    # Each name stays exactly one segment, whatever it contains.
    assert len(url_segments(a)) == len(names) + 1


@given(_heads, st.lists(_segments.filter(lambda s: s not in ("", ".", "..")), max_size=5))
def test_property_join_url_matches_escaped_path(head, names):
    escaped = "/".join(_escape_some(n, [True]) for n in names)
    assert join_url(head + "/", *names) == normalize_url(head + "/" + escaped)
    assert is_within(join_url(head + "/", *names), head + "/")
