"""Issue 28, storage paths: one canonical form, and the spellings it refuses.

Every rule (ownership, overlap, locations) compares canonical URLs, and every storage access
decodes a canonical URL with `storage_names` / `local_path` / `s3_bucket_key`. These tests hold
the two together: what `is_within` says is inside is inside on disk and in S3, whatever the
spelling, and spellings that readers disagree on are refused.
"""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given, strategies as st

from shardcat.entities.urls import (
    InvalidUrl, is_within, join_url, local_path, normalize_url, s3_bucket_key, storage_names, url_segments,
)

# Ways to spell a separator, a dot segment, a backslash or a control character that the
# storage side (a file system, S3, Hadoop, a browser) may read differently from the trie.
SEPARATORS = ["%2F", "%2f", "%5C", "%5c", "\\"]
DOT_SEGMENTS = ["%2E", "%2e", "%2E%2E", "%2e%2e", ".%2E", "%2e.", ".%2e", "%2E."]
CONTROLS = ["%00", "%0A", "%0d", "%1F", "%7F", "%C2%85", "%c2%9f", "\x00", "\n", "\r", "\t", "\x7f", "\x85"]
NOT_UTF8 = ["%FF", "%C3", "%80", "%ED%A0%80", "%C0%AF"]   # incl. a surrogate and an overlong '/'

BASES = ["s3://bucket/loc", "s3a://Bucket/loc", "file:///data/loc", "/data/loc", "gs://g/loc",
         "abfss://c@a.dfs.core.windows.net/loc"]


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("separator", SEPARATORS)
def test_encoded_separators_are_refused_anywhere_in_a_segment(base, separator):
    for path in (f"/t{separator}_delta_log", f"/{separator}t", f"/t{separator}", f"/..{separator}..{separator}etc",
                 f"/a/b{separator}c/d"):
        with pytest.raises(InvalidUrl, match="separator|backslash"):
            normalize_url(base + path)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("dots", DOT_SEGMENTS)
def test_encoded_dot_segments_are_refused(base, dots):
    for path in (f"/{dots}", f"/{dots}/x", f"/x/{dots}/y", f"/x/{dots}/{dots}/{dots}/etc"):
        with pytest.raises(InvalidUrl, match="dot segment"):
            normalize_url(base + path)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("control", CONTROLS)
def test_control_characters_are_refused_raw_or_encoded(base, control):
    with pytest.raises(InvalidUrl, match="control"):
        normalize_url(f"{base}/a{control}b")


@pytest.mark.parametrize("escape", NOT_UTF8)
def test_escapes_that_are_not_utf8_are_refused(escape):
    # One name per canonical segment: bytes a reader would replace or reject have no one reading.
    with pytest.raises(InvalidUrl, match="UTF-8"):
        normalize_url(f"s3://b/a{escape}")


@pytest.mark.parametrize("url, names", [
    ("s3://b/a%20b/%C3%A9", ["a b", "é"]),
    ("s3://b/100%25/a%252Fb", ["100%", "a%2Fb"]),     # decoded once: an escaped '%' stays a '%'
    ("/data/./x/../y", ["data", "y"]),                 # raw dot segments resolve (RFC 3986)
    ("s3://b/a%2Eb/...", ["a.b", "..."]),
])
def test_storage_names_decode_once(url, names):
    assert storage_names(url)[1] == names


def test_local_path_and_s3_key():
    assert local_path("file:///data/a%20b/c") == "/data/a b/c"
    assert local_path("file:///") == "/"
    assert s3_bucket_key("s3a://B/x/%C3%A9/y") == ("b", "x/é/y")
    assert s3_bucket_key("s3://b") == ("b", "")
    with pytest.raises(InvalidUrl):
        local_path("s3://b/x")
    with pytest.raises(InvalidUrl):
        s3_bucket_key("file:///x")


# --- properties: the rule and the access agree --------------------------------------------

_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6)
_spelled = st.lists(st.sampled_from(list("ab.%/\\2345cCeEfF") + ["%2F", "%2E", "%5C", "%25", "..", "%00"]),
                    max_size=16).map("".join)


@given(st.lists(_names, max_size=4), _spelled)
def test_property_within_the_rule_is_within_on_disk(parent_names, tail):
    """Any spelling below a parent either is refused, or its canonical form is inside the parent
    by the rule exactly when its decoded file path is inside the parent's path."""
    try:
        parent = join_url("file:///", *parent_names)
    except InvalidUrl:
        return      # names no URL may hold
    try:
        child = normalize_url(parent + "/" + tail)
    except InvalidUrl:
        return
    path, root = local_path(child), local_path(parent)
    on_disk = posixpath.normpath(path) == path and (path == root or path.startswith(root.rstrip("/") + "/"))
    assert is_within(child, parent) == on_disk
    # What storage sees decodes back to the same canonical form: one form, no second reading.
    head, names = storage_names(child)
    assert join_url(head, *names) == child
    assert all(n not in (".", "..") and not set(n) & set("/\\") for n in names)


@given(st.lists(_names, max_size=4), st.lists(_names, max_size=4))
def test_property_s3_prefix_matches_the_rule(parent_names, child_names):
    try:
        parent = join_url("s3://b", *parent_names)
        child = join_url(parent, *child_names)
    except InvalidUrl:
        return
    _, parent_key = s3_bucket_key(parent)
    _, child_key = s3_bucket_key(child)
    assert is_within(child, parent)
    assert child_key == parent_key or not parent_key or child_key.startswith(parent_key + "/")
    assert url_segments(child)[:len(url_segments(parent))] == url_segments(parent)


@given(_spelled)
def test_property_nothing_refused_is_half_accepted(tail):
    """A spelling is refused by every function or accepted by all, with one canonical answer."""
    url = "s3://b/loc/" + tail
    try:
        canonical = normalize_url(url)
    except InvalidUrl:
        for f in (url_segments, storage_names, s3_bucket_key, lambda u: is_within(u, "s3://b")):
            with pytest.raises(InvalidUrl):
                f(url)
        return
    assert normalize_url(canonical) == canonical
    assert s3_bucket_key(url) == s3_bucket_key(canonical)
    assert "%2F" not in canonical.upper() and "%5C" not in canonical.upper() and "\\" not in canonical
