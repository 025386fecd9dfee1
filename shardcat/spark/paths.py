"""The path a Spark read is given for a storage path the catalog resolved: the one it checked.

The catalog decides on the canonical form of a URL (entities/urls.py). Handing Spark the caller's
own spelling would let Hadoop read it another way (it does not percent-decode, it resolves
globs), so reads go to the canonical form decoded once, and a glob or a climb out of a volume
is refused before any file is touched. Pure functions; no Spark import.
"""

from __future__ import annotations

from ..entities.urls import InvalidUrl, join_url, normalize_url, storage_names
from .catalog import CatalogError

# Hadoop's glob characters (DataFrameReader.load expands them), and its escape.
_GLOB = frozenset("*?[]{}\\")


def _refused(path: str, why: str) -> CatalogError:
    return CatalogError("INVALID_PARAMETER_VALUE", f"Invalid path '{path}': {why}", name=path)


def engine_path(path: str, written: str | None = None) -> str:
    """The spelling of storage URL `path` to give Spark: its canonical form, each name decoded.
    `written` (default `path`) is what the user wrote; an s3a:// or s3n:// scheme in it is kept,
    since that picks Hadoop's filesystem."""
    try:
        url = normalize_url(path)
    except InvalidUrl as e:
        raise _refused(path, str(e)) from None
    head, names = storage_names(url)
    if any(_GLOB.intersection(name) for name in names):
        raise _refused(path, "glob characters (* ? [ ] { }) would let Spark read more than the catalog checked.")
    scheme = (written or path).split("://", 1)[0].lower() if "://" in (written or path) else ""
    if head.startswith("s3://") and scheme in ("s3a", "s3n"):
        head = scheme + head[2:]
    return head + "/" + "/".join(names)


def volume_file_url(volume_location: str, tail: str | None) -> str:
    """The canonical URL of `tail` ('/a/b', literal names) inside a volume; never outside it."""
    names = [n for n in (tail or "").split("/") if n]
    try:
        return join_url(volume_location, *names)
    except InvalidUrl as e:
        raise _refused(f"{volume_location}{tail or ''}", f"a volume path holds plain names only ({e.reason}).") from None
