"""Shallow clones of Delta tables, and what they reference (which a vacuum keeps: delta/vacuum.py).

A shallow clone is a new table whose `_delta_log` (at its own location) starts with one commit
adding every live file of the source's snapshot by absolute URL: the source's files are shared,
nothing is copied, and the clone's later writes go under its own location only. The source's
files must then outlive the source's own need for them: a vacuum keeps every file a clone's
snapshot references (`referenced`).
"""

from __future__ import annotations

from ..entities.urls import InvalidUrl, is_within, join_url, normalize_url
from ..entities.values import now_ms
from . import log as dlog


class NotClonable(ValueError):
    """A source whose log cannot be shallow-cloned: unreadable, or naming a file outside its
    table's storage (`../x`, an absolute URL elsewhere), which the clone would then reference."""


def read_published(storage: dlog.Storage, *, until_ms: int | None = None) -> dlog.TableState | None:
    """The table's state from its published log (checkpoint, then JSON commits), up to the last
    commit at or before `until_ms` (its in-commit timestamp, else its file's time); None if it has
    no log."""
    commits, checkpoints = storage.list_log()
    if not commits and not checkpoints:
        return None
    state = dlog.TableState()
    start = 0
    usable = sorted(c for c in checkpoints if until_ms is None)
    if usable:
        state = dlog.read_checkpoint(storage, usable[-1])
        start = usable[-1] + 1
    for v in sorted(c for c in commits if c >= start):
        actions = dlog.decode_actions(storage.read(dlog.commit_file(v)))
        if until_ms is not None and state.version >= 0:
            info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
            when = info.get("inCommitTimestamp") or info.get("timestamp") or storage.mtime_ms(dlog.commit_file(v))
            if when > until_ms:
                break
        state.apply(v, actions)
    return state if state.metadata is not None else None


def absolute(location: str, path: str) -> str:
    """A log's file path as an absolute URL (paths in a log are relative to its table unless absolute)."""
    if "://" in path:
        return normalize_url(path)
    return join_url(normalize_url(location), *[p for p in path.split("/") if p])


def _inside(location: str, path: str, roots: list[str]) -> str:
    """`absolute(location, path)` if it lies under one of `roots`; NotClonable otherwise. A relative
    path is one with no empty, '.' or '..' segment (join_url refuses them) and no leading '/', which
    some readers take as an absolute path."""
    try:
        if path.startswith("/") or "\\" in path:
            raise InvalidUrl(path, "neither relative nor a URL")
        url = absolute(location, path)
    except InvalidUrl:
        url = None
    if url is None or not any(is_within(url, root) for root in roots):
        raise NotClonable(f"its Delta log names a file outside its storage ('{path:.200}'): no clone may "
                          "reference it")
    return url


def read_source(location: str, *, until_ms: int | None = None, within: list[str] = ()) -> dlog.TableState | None:
    """The state (as of `until_ms`) of the table at `location` to shallow-clone, None without a log;
    NotClonable when its log cannot be read, or names a data file or deletion vector outside its
    storage and the storage of the tables it itself shallow-clones (`within`)."""
    try:
        state = read_published(dlog.Storage(location), until_ms=until_ms)
    except (ValueError, KeyError, TypeError) as e:
        raise NotClonable(f"its Delta log cannot be read ({type(e).__name__})") from None
    if state is None:
        return None
    roots = [normalize_url(location), *within]
    for f in state.files.values():
        if not isinstance(f.get("path"), str):
            raise NotClonable("its Delta log adds a file without a path")
        _inside(location, f["path"], roots)
        dv = f.get("deletionVector")
        if isinstance(dv, dict) and dv.get("storageType") == "p":       # an absolute path
            _inside(location, str(dv.get("pathOrInlineDv")), roots)
    return state


def shallow_clone(source_location: str, target_location: str, table_id: str, *, until_ms: int | None = None,
                  source_name: str = "", state: dlog.TableState | None = None) -> dict | None:
    """Write version 0 of a shallow clone of the table at `source_location` (as of `until_ms`) at
    `target_location`; `state`: the source's, already read by `read_source` (else read here).
    Returns {"version": the source version cloned, "files": how many} or None when the source has
    no Delta log (nothing is written then)."""
    if state is None:
        state = read_source(source_location, until_ms=until_ms)
    if state is None:
        return None
    target = dlog.Storage(target_location)
    when = now_ms()
    md = {**state.metadata, "id": table_id, "createdTime": when}
    config = dict(md.get("configuration") or {})
    for key in [k for k in config if k.startswith("delta.feature.catalog") or k == "io.unitycatalog.tableId"]:
        config.pop(key)
    md["configuration"] = config
    # The source's protocol, less catalog management: the clone's log is its own, not the catalog's.
    proto = {k: v for k, v in (state.protocol or {"minReaderVersion": 1, "minWriterVersion": 2}).items()}
    for key in ("readerFeatures", "writerFeatures"):
        if key in proto:
            proto[key] = [f for f in proto[key] if f not in ("catalogManaged", "catalogOwned-preview")]
    actions = [dlog.commit_info(when, "CLONE", {"source": source_name or source_location,
                                                "sourceVersion": state.version, "isShallow": True}),
               {"protocol": proto}, {"metaData": md}]
    for f in state.files.values():
        actions.append({"add": {**f, "path": absolute(source_location, f["path"]), "dataChange": True}})
    target.write(dlog.commit_file(0), dlog.encode_actions(actions))
    return {"version": state.version, "files": len(state.files)}


def referenced(location: str) -> set[str]:
    """The absolute URLs of the live files of the table at `location` (none without a log). A path
    no join resolves (`../x`: a clone's owner writes its log) names no file to keep."""
    state = read_published(dlog.Storage(location))
    out = set()
    for path in state.files if state is not None else ():
        try:
            out.add(absolute(location, path))
        except InvalidUrl:
            continue
    return out
