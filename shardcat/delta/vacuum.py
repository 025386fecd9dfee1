"""Vacuum: delete the data files a Delta table's own log removed, and nothing else.

A table's folder may hold files that are not the table's (it was registered on a shared folder),
and its log is written by whoever may write there, so a file is deleted only when all hold:

- the table has a valid published log (one with a metaData action); else nothing is deleted;
- the log added the file (in a commit, or among a checkpoint's live files) and a later commit
  removed it, and nothing added it again;
- the removal (its deletionTimestamp, else its commit's time) and the file itself are older than
  the retention;
- its path, read as the protocol says (a URI relative to the table's root, percent-encoded, or an
  absolute URI), names a file strictly inside the table's root, in no folder starting with `_`
  or `.` (the log, staged commits), reached through no symbolic link (on a local file system),
  and is a plain file;
- no shallow clone references it (`keep`: delta/clone.py).

Files nobody's log names are never looked at: a vacuum lists no folder.
"""

from __future__ import annotations

import os
import stat

import pyarrow.fs as pafs

from ..entities.urls import InvalidUrl, is_within, normalize_url, storage_names
from . import log as dlog


class NoDeltaLog(ValueError):
    """The table's location has no valid Delta log: a vacuum there deletes nothing."""


def file_url(root: str, path) -> str | None:
    """The canonical URL of a file a log names, if it lies strictly inside the table's canonical
    `root`; None for anything else, however spelled (`..`, encoded dots or slashes, other roots)."""
    if not isinstance(path, str) or not path:
        return None
    try:
        url = normalize_url(path if "://" in path else f"{root}/{path}")
    except InvalidUrl:
        return None
    return url if url != root and is_within(url, root) else None


def log_history(storage: dlog.Storage) -> tuple[set[str], dict[str, int]]:
    """(the paths live in the table's published snapshot, {path its log added then removed: when
    removed}). Replays every commit when the log has them all from version 0, else from the latest
    checkpoint. NoDeltaLog if there is no log, or it is not one."""
    try:
        commits, checkpoints = storage.list_log()
        state, start = dlog.TableState(), 0
        if not (commits and len(commits) == max(commits) + 1) and checkpoints:
            start = max(checkpoints) + 1
            state = dlog.read_checkpoint(storage, start - 1)
        added, removed = set(state.files), {}
        for version in sorted(v for v in commits if v >= start):
            actions = dlog.decode_actions(storage.read(dlog.commit_file(version)))
            info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
            when = info.get("inCommitTimestamp") or info.get("timestamp") or \
                storage.mtime_ms(dlog.commit_file(version))
            for action in actions:
                if "add" in action:
                    added.add(action["add"]["path"])
                    removed.pop(action["add"]["path"], None)
                elif "remove" in action and action["remove"]["path"] in added:
                    removed[action["remove"]["path"]] = action["remove"].get("deletionTimestamp") or when
            state.apply(version, actions)
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
        raise NoDeltaLog(f"its Delta log at '{storage.location}' cannot be read ({type(e).__name__})") from None
    if state.metadata is None:
        raise NoDeltaLog(f"there is no valid Delta log at '{storage.location}' (no _delta_log with metadata)")
    return set(state.files), {p: w for p, w in removed.items() if isinstance(w, int)}


def _plain_file(storage: dlog.Storage, names: list[str], older_than_ms: int) -> bool:
    """Whether the file at `names` under the table's root is a plain file older than the retention,
    reached through no symbolic link below the root."""
    target = storage.path("/".join(names))
    if not isinstance(storage.fs, pafs.LocalFileSystem):
        info = storage.fs.get_file_info(target)
        return info.type == pafs.FileType.File and (info.mtime_ns or 0) // 1_000_000 <= older_than_ms
    try:
        st = os.lstat(target)
    except OSError:
        return False
    # A symlinked folder on the way would lead out of the root: the file's real path must be the
    # root's real path and the names as written.
    inside = os.path.join(os.path.realpath(storage.root), *names)
    return stat.S_ISREG(st.st_mode) and os.path.realpath(target) == inside and \
        st.st_mtime_ns // 1_000_000 <= older_than_ms


def vacuum(location: str, keep: set[str], *, older_than_ms: int, dry_run: bool = False) -> dict:
    """Delete (or with `dry_run` only name) the files of the table at `location` its log removed
    before `older_than_ms` (the rules above), except those in `keep` (URLs shallow clones reference).
    Returns {"deleted": urls, "kept_for_clones": urls}. NoDeltaLog when the table has no valid log."""
    storage = dlog.Storage(location)
    root = storage.location
    depth = len(storage_names(root)[1])
    live, removed = log_history(storage)
    live_urls = {file_url(root, p) for p in live}
    deleted, kept = set(), set()
    for path, when in removed.items():
        url = file_url(root, path)
        if url is None or url in live_urls or when > older_than_ms:
            continue
        names = storage_names(url)[1][depth:]
        if any(n.startswith(("_", ".")) for n in names):
            continue
        if url in keep:
            kept.add(url)
        elif url not in deleted and _plain_file(storage, names, older_than_ms):
            if not dry_run:
                storage.fs.delete_file(storage.path("/".join(names)))
            deleted.add(url)
    return {"deleted": sorted(deleted), "kept_for_clones": sorted(kept)}
