"""Turn a storage URL into one canonical form, so equal locations compare equal.

Canonical form: ``scheme://authority/seg/seg`` with

* scheme ``s3`` (for ``s3``/``s3a``/``s3n``), ``gs``, ``abfss`` (for ``abfss``/``abfs``) or ``file``;
* the authority lower-cased (bucket, ``container@account-host``; empty for ``file``), an
  ``abfss`` host always ``<account>.dfs.<an Azure cloud's storage suffix>``;
* no empty, ``.`` or ``..`` segments and no trailing slash;
* each segment percent-encoded one fixed way: bytes in ``_SAFE`` stay literal,
  every other byte becomes upper-case ``%XX`` (so ``%7e`` -> ``~``, ``' '`` -> ``%20``,
  ``é`` -> ``%C3%A9``).

Refused (``InvalidUrl``), because storage systems and engines disagree on what they mean
and a rule checked on one reading would be bypassed through another (issue 28): encoded
separators (``%2F``, ``%5C``), a segment that is ``.`` or ``..`` only once decoded
(``%2E``, ``.%2e``, ``%2E%2E``), backslashes, control characters (raw or encoded), and
escapes that do not decode to UTF-8. Raw ``.`` and ``..`` segments are resolved (RFC 3986).
So a canonical segment names exactly one file or key name, and decoding is a bijection.

Azure (issue 49): ``abfs://`` is Hadoop's non-TLS spelling of the same ADLS Gen2 files, so it
becomes ``abfss://`` (two spellings of one place must meet in the trie, or a location on one
would not cover a table on the other). ``wasb://``/``wasbs://`` and an ``abfss`` host on the
Blob endpoint (``account.blob.core.windows.net``) name the same account through another API:
refused with the abfss:// spelling to use, rather than guessed. Container names are Azure's
(lower-case letters, digits, single hyphens); account names lower-case letters and digits.

The root of a bucket is ``s3://bucket``; the root of the local filesystem is ``file:///``.
Every rule (ownership, overlap, locations) compares canonical forms, and every storage
access derives its file path or object key from the canonical form with ``storage_names``,
``local_path`` or ``s3_bucket_key`` below: the one place a storage URL is decoded.
Nothing here does I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = [
    "InvalidUrl", "normalize_url", "url_segments", "url_from_segments", "join_url", "is_within",
    "storage_names", "local_path", "s3_bucket_key", "adls_parts", "gs_bucket_key",
]


class InvalidUrl(ValueError):
    """A string that is not a usable storage URL; the message names it and says why."""

    def __init__(self, url: object, reason: str):
        shown = repr(url) if len(repr(url)) <= 300 else repr(url)[:300] + "..."
        super().__init__(f"invalid storage URL {shown}: {reason}")
        self.url = url
        self.reason = reason

    def __reduce__(self):  # rebuild from (url, reason) so it survives pickling
        return (type(self), (self.url, self.reason))


# Scheme as written -> canonical scheme. s3a/s3n are Hadoop's names for the same S3 objects.
# abfs is Hadoop's non-TLS spelling of abfss: the same files.
_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "abfss": "abfss", "abfs": "abfss", "file": "file"}
# Azure's Blob-endpoint spellings of the same accounts: refused with the spelling to use.
_AZURE_BLOB_SCHEMES = ("wasb", "wasbs")

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(.*)", re.DOTALL)
# A bucket / container / host name: lower-case letters, digits, '.', '_', '-', starting and
# ending with a letter or digit, no two dots in a row (S3 and GCS both refuse an empty dot-separated
# part; rules out '..', ports, userinfo and percent-escapes).
_NAME = r"[a-z0-9](?:(?:[a-z0-9_\-]|\.(?!\.))*[a-z0-9])?"
_BUCKET_RE = re.compile(_NAME)
# container@account.dfs.<suffix>: the suffixes of Azure's public, China and US Government clouds.
AZURE_DFS_SUFFIXES = ("dfs.core.windows.net", "dfs.core.chinacloudapi.cn", "dfs.core.usgovcloudapi.net")
_ABFS_RE = re.compile(r"(?P<container>[a-z0-9](?:-?[a-z0-9])*)@(?P<account>[a-z0-9]+)\.(?P<suffix>"
                      + "|".join(re.escape(x) for x in AZURE_DFS_SUFFIXES) + ")")

# Bytes kept literal in a canonical segment: RFC 3986 unreserved characters plus the
# sub-delimiters, ':' and '@' (all legal in a path, and '=' is common in Hive partition dirs).
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@")
_HEX = frozenset("0123456789abcdefABCDEF")
_SAFE_CHARS = frozenset(chr(b) for b in _SAFE)
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")   # C0 controls, DEL and C1 controls
_SEPARATORS = (0x2F, 0x5C)                          # '/' and '\\': a path separator to some reader


def _is_control(ch: str) -> bool:
    # C0 controls, DEL and C1 controls (Unicode category Cc).
    return ch < " " or "\x7f" <= ch <= "\x9f"


def _encode(raw: bytes) -> str:
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in raw)


def _decode(url: str, segment: str) -> bytes:
    """The bytes a path segment stands for: percent-escapes decoded, other characters as UTF-8."""
    out = bytearray()
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "%":
            hexpair = segment[i + 1:i + 3]
            if len(hexpair) != 2 or not set(hexpair) <= _HEX:
                raise InvalidUrl(url, f"malformed percent-escape {segment[i:i + 3]!r}")
            byte = int(hexpair, 16)
            if byte in _SEPARATORS:
                raise InvalidUrl(url, f"contains an encoded path separator {segment[i:i + 3]!r}")
            out.append(byte)
            i += 3
        else:
            try:
                out += ch.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate
                raise InvalidUrl(url, "contains a character that is not valid Unicode") from None
            i += 1
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidUrl(url, "contains percent-escapes that are not UTF-8") from None
    # An escaped control character is still a control character.
    if any(_is_control(ch) for ch in text):
        raise InvalidUrl(url, "contains a percent-encoded control character")
    return bytes(out)


def _path_segments(url: str, path: str) -> list[str]:
    """Canonical segments of an absolute path: empty and '.' dropped, '..' resolved."""
    segments: list[str] = []
    for raw in path.split("/"):
        if not raw:
            continue    # a leading, repeated or trailing slash: no new level
        if raw not in (".", "..") and _SAFE_CHARS.issuperset(raw):
            segments.append(raw)    # already canonical: the common case, and a rebuild does it 100,000 times
            continue
        decoded = _decode(url, raw)
        if decoded in (b".", b"..") and "%" in raw:
            # RFC 3986 says %2E is '.', but not every reader decodes before it resolves dots.
            raise InvalidUrl(url, f"contains an encoded dot segment {raw!r}")
        if decoded in (b"", b"."):
            continue  # repeated slash, trailing slash or '.': no new level
        if decoded == b"..":
            if not segments:
                raise InvalidUrl(url, "path uses '..' to escape above the root")
            segments.pop()
            continue
        segments.append(_encode(decoded))
    return segments


def _split(url: str) -> tuple[str, ...]:
    """Parse and validate ``url`` into ``(scheme://authority, seg, ...)``."""
    if not isinstance(url, str):
        raise TypeError(f"storage URL must be a str, not {type(url).__name__}")
    return _parse(url)


# A write parses the same few URLs several times (its base to join, then its own path for the
# overlap check and each trie update): the answers, immutable, are kept for the next asker.
@functools.lru_cache(maxsize=8192)
def _parse(url: str) -> tuple[str, ...]:
    if not url:
        raise InvalidUrl(url, "empty")
    if _CONTROL_RE.search(url):
        raise InvalidUrl(url, "contains control characters")
    if "\\" in url:
        raise InvalidUrl(url, "contains a backslash (a path separator to some readers)")
    # A raw '?' or '#' starts a query/fragment; storage keys containing them must be escaped.
    if "?" in url:
        raise InvalidUrl(url, "query strings are not allowed in a storage URL")
    if "#" in url:
        raise InvalidUrl(url, "fragments are not allowed in a storage URL")

    match = _SCHEME_RE.fullmatch(url)
    if match is None:
        if url.startswith("//"):
            # '//x/y' names host x to Hadoop, not directory x; too ambiguous to guess.
            raise InvalidUrl(url, "no scheme, and a path starting with '//' is not a local path")
        if not url.startswith("/"):
            raise InvalidUrl(url, "no scheme and not an absolute path (relative paths are not allowed)")
        scheme, rest = "file", url  # Spark users pass bare local paths
    else:
        written, rest = match.groups()
        scheme = _SCHEMES.get(written.lower())
        if written.lower() in _AZURE_BLOB_SCHEMES:
            raise InvalidUrl(url, f"{written.lower()}:// addresses Azure's Blob endpoint; write the same "
                                  "place as abfss://<container>@<account>.dfs.core.windows.net/<path>")
        if scheme is None:
            supported = ", ".join(sorted(_SCHEMES))
            raise InvalidUrl(url, f"unsupported scheme {written!r} (supported: {supported})")

    if scheme == "file":
        if rest.startswith("//"):
            authority, slash, path = rest[2:].partition("/")
            if authority.lower() not in ("", "localhost"):
                raise InvalidUrl(url, f"file URL names host {authority!r}; only local files are allowed")
            path = slash + path
        elif rest.startswith("/"):
            path = rest  # file:/a/b
        else:
            raise InvalidUrl(url, "file URL must have an absolute path")
        return ("file://", *_path_segments(url, path))

    if not rest.startswith("//"):
        raise InvalidUrl(url, f"must be of the form {scheme}://<authority>/<path>")
    authority, _, path = rest[2:].partition("/")
    if not authority:
        what = "container@account host" if scheme == "abfss" else "bucket"
        raise InvalidUrl(url, f"missing {what}")
    authority = authority.lower()
    if scheme == "abfss":
        if not _ABFS_RE.fullmatch(authority):
            blob = authority.replace(".blob.core.", ".dfs.core.")
            if blob != authority and _ABFS_RE.fullmatch(blob):
                raise InvalidUrl(url, f"host of {authority!r} is the Blob endpoint; write {blob!r}")
            raise InvalidUrl(url, f"authority {authority!r} is not of the form container@account-host "
                                  f"(an account host ends in .{AZURE_DFS_SUFFIXES[0]} or another Azure cloud's)")
    elif not _BUCKET_RE.fullmatch(authority):
        raise InvalidUrl(url, f"invalid bucket name {authority!r}")
    return (f"{scheme}://{authority}", *_path_segments(url, path))


def url_from_segments(segments: Iterable[str]) -> str:
    """The canonical URL for segments as returned by ``url_segments`` (its inverse)."""
    head, *path = segments
    if not path:
        return "file:///" if head == "file://" else head
    return head + "/" + "/".join(path)


def normalize_url(url: str) -> str:
    """The canonical form of a storage URL; raises ``InvalidUrl`` if it is not one."""
    return url_from_segments(_split(url))


def url_segments(url: str) -> tuple[str, ...]:
    """The canonical URL as a key path: ``("s3://bucket", "a", "b")``, ``("file://", "tmp")``."""
    return _split(url)


def join_url(base: str, *segments: str) -> str:
    """The canonical URL of ``base`` extended by ``segments``.

    Each segment is one literal name (not percent-decoded: ``"50%"`` becomes ``50%25``);
    ``/``, empty, ``.`` and ``..`` are refused so a join can never leave ``base``.
    """
    parts = list(_split(base))
    for name in segments:
        if name.__class__ is str and name not in (".", "..") and name and _SAFE_CHARS.issuperset(name):
            parts.append(name)      # one literal, canonical name already (an id, "tables"): the common case
            continue
        if not isinstance(name, str):
            raise TypeError(f"path segment must be a str, not {type(name).__name__}")
        if name in ("", ".", "..") or "/" in name or "\\" in name:
            raise InvalidUrl(base, f"cannot join segment {name!r}: must be one non-empty name")
        if any(_is_control(ch) for ch in name):
            raise InvalidUrl(base, f"cannot join segment {name!r}: contains control characters")
        try:
            parts.append(_encode(name.encode("utf-8")))
        except UnicodeEncodeError:
            raise InvalidUrl(base, f"cannot join segment {name!r}: not valid Unicode") from None
    return url_from_segments(parts)


def is_within(child: str, parent: str) -> bool:
    """True if ``child`` is ``parent`` or below it, comparing whole segments."""
    c, p = _split(child), _split(parent)
    return c[:len(p)] == p


# ---- from the canonical form to storage: the one place a storage URL is decoded ----------


def storage_names(url: str) -> tuple[str, list[str]]:
    """(``scheme://authority``, the path's names as the storage system spells them).

    Each name is one decoded segment: never empty, ``.`` or ``..``, never containing ``/``,
    ``\\`` or a control character (``_split`` refuses what would), always valid text."""
    head, *segments = _split(url)
    return head, [_decode(url, s).decode("utf-8") for s in segments]


def local_path(url: str) -> str:
    """The absolute local filesystem path of a ``file://`` URL."""
    head, names = storage_names(url)
    if head != "file://":
        raise InvalidUrl(url, "not a file:// URL")
    return "/" + "/".join(names)


def s3_bucket_key(url: str) -> tuple[str, str]:
    """(bucket, key prefix without slashes at either end) of an ``s3://`` URL."""
    head, names = storage_names(url)
    if not head.startswith("s3://"):
        raise InvalidUrl(url, "not an s3:// URL")
    return head.removeprefix("s3://"), "/".join(names)


def adls_parts(url: str) -> tuple[str, str, str, str]:
    """(account, container, account host, path without slashes at either end) of an ``abfss://`` URL."""
    head, names = storage_names(url)
    if not head.startswith("abfss://"):
        raise InvalidUrl(url, "not an abfss:// URL")
    match = _ABFS_RE.fullmatch(head.removeprefix("abfss://"))
    return match["account"], match["container"], f"{match['account']}.{match['suffix']}", "/".join(names)


def gs_bucket_key(url: str) -> tuple[str, str]:
    """(bucket, object name prefix without slashes at either end) of a ``gs://`` URL."""
    head, names = storage_names(url)
    if not head.startswith("gs://"):
        raise InvalidUrl(url, "not a gs:// URL")
    return head.removeprefix("gs://"), "/".join(names)
