"""A Delta table's log as the catalog's readers (Delta Sharing, samples) read it: the published `_delta_log` (JSON
commits, single-file checkpoints) and, for a catalog-managed table, the catalog's ratified commits
that are not published yet, which win over anything published for the same version (Delta
protocol, "Reading Catalog-managed Tables"). Versions past the catalog's latest are not read.

Reads are blocking file-system calls (pyarrow.fs): callers run them in a worker thread. A commit
never changes once ratified or published, so parsed commits are kept in a small LRU.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from . import log as dlog
from .commits import FEATURE_PROPERTY, MAX_COMMITS_PER_PAGE, commit_info_json
from .log import Storage, TableState

_CACHE_COMMITS = 4096


class TableLogError(Exception):
    """The table's log cannot be read at what was asked (a version or time outside it)."""


class _CommitCache:
    def __init__(self, size: int):
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key):
        with self.lock:
            hit = self.items.get(key)
            if hit is not None:
                self.items.move_to_end(key)
            return hit

    def put(self, key, value) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_commits = _CommitCache(_CACHE_COMMITS)


@dataclass
class TableLog:
    """The versions of one table that can be read: published ones and the catalog's ratified ones."""
    location: str
    latest: int
    published: set[int]
    checkpoints: set[int]
    unpublished: dict[int, dict] = field(default_factory=dict)    # version -> DeltaCommitInfo JSON
    credentials: dict | None = None     # a vended answer to open the files with (delta/log.py Storage)

    @property
    def storage(self) -> Storage:
        return Storage(self.location, self.credentials)

    @property
    def earliest(self) -> int:
        """The oldest version whose commit is still there to read."""
        known = self.published | set(self.unpublished)
        return min(known) if known else 0

    def actions(self, version: int) -> list[dict]:
        commit = self.unpublished.get(version)
        source = ("staged", commit["file_name"]) if commit is not None else ("published", version)
        key = (self.location, version, source)
        hit = _commits.get(key)
        if hit is not None:
            return hit
        storage = self.storage
        if commit is not None:
            if commit.get("inline_content") is not None:
                found = dlog.decode_actions(commit["inline_content"])
            else:
                found = dlog.decode_actions(storage.read(f"{dlog.STAGED_DIR}/{commit['file_name']}"))
        elif version in self.published:
            found = dlog.decode_actions(storage.read(dlog.commit_file(version)))
        else:
            raise TableLogError(f"Version {version} of the table is no longer in its log.")
        _commits.put(key, found)
        return found

    def timestamp(self, version: int) -> int:
        """A version's commit time in ms: its in-commit timestamp, else commitInfo's, else the file's."""
        for a in self.actions(version):
            if "commitInfo" in a:
                info = a["commitInfo"]
                ts = info.get("inCommitTimestamp") or info.get("timestamp")
                if isinstance(ts, int):
                    return ts
        commit = self.unpublished.get(version)
        if commit is not None:
            return int(commit.get("commit_timestamp") or 0)
        return self.storage.mtime_ms(dlog.commit_file(version))

    def snapshot(self, version: int) -> TableState:
        """Protocol, metadata and live files at `version`."""
        return self.snapshot_with_versions(version)[0]

    def snapshot_with_versions(self, version: int) -> tuple[TableState, dict[str, int]]:
        """`snapshot`, and the version that added each live file (a checkpoint's files: its version)."""
        if version > self.latest or version < 0:
            raise TableLogError(f"Version {version} does not exist: the table's latest version is {self.latest}.")
        base = max((v for v in self.checkpoints if v <= version and v not in self.unpublished), default=None)
        if base is not None:
            state = dlog.read_checkpoint(self.storage, base)
        elif self.earliest > 0:      # the commits before the oldest one kept are gone, with no checkpoint
            raise TableLogError(f"Version {version} of the table is no longer in its log.")
        else:
            state = TableState()
        added_in = dict.fromkeys(state.files, state.version)
        for v in range(state.version + 1, version + 1):
            actions = self.actions(v)
            state.apply(v, actions)
            added_in.update((a["add"]["path"], v) for a in actions if "add" in a)
        if state.metadata is None:
            raise TableLogError("The table has no Delta metadata in its log.")
        return state, added_in

    def version_at(self, ms: int) -> int:
        """The newest version committed at or before `ms` (a snapshot "as of" a time)."""
        lo, hi, found = self.earliest, self.latest, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.timestamp(mid) <= ms:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        if found is None:
            raise TableLogError("The timestamp is before the table's earliest version.")
        return found

    def version_from(self, ms: int) -> int:
        """The oldest version committed at or after `ms` (a range starting at a time)."""
        lo, hi, found = self.earliest, self.latest, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.timestamp(mid) >= ms:
                found, hi = mid, mid - 1
            else:
                lo = mid + 1
        if found is None:
            raise TableLogError("The timestamp is after the table's latest version.")
        return found


def open_log(location: str, catalog_latest: int | None, unpublished: dict[int, dict],
             credentials: dict | None = None) -> TableLog:
    """The table's log: `catalog_latest` is the catalog's latest ratified version for a
    catalog-managed table (None: a filesystem table, whose newest published commit is its latest)."""
    storage = Storage(location, credentials)
    published, checkpoints = storage.list_log()
    if catalog_latest is None:
        if not published:
            raise TableLogError("The table has no Delta log at its location.")
        latest = max(published)
    else:
        latest = catalog_latest
        published = {v for v in published if v <= latest}
        checkpoints = {v for v in checkpoints if v <= latest}
    return TableLog(location, latest, published, checkpoints, dict(unpublished), credentials)


async def table_log(store, table, credentials: dict | None = None) -> TableLog:
    """A Delta table's log as readers see it: the published log and, for a catalog-managed table,
    the catalog's ratified commits (read off the event loop). Raises TableLogError, OSError or
    ValueError when it cannot be read. `credentials`: a vended answer for the table's location, for
    storage pyarrow is not configured for (an abfss:// table's SAS)."""
    latest, unpublished = None, {}
    if (table.info.get("properties") or {}).get(FEATURE_PROPERTY) == "supported":
        start = 0
        while True:
            _, _, head, _, rows = await store.delta_commits(table.metastore_id, table.id, start, None,
                                                            MAX_COMMITS_PER_PAGE)
            latest = head or 0
            unpublished.update({r["version"]: commit_info_json(r) for r in rows})
            if len(rows) < MAX_COMMITS_PER_PAGE:
                break
            start = rows[-1]["version"] + 1
    return await asyncio.to_thread(open_log, table.info.get("storage_location"), latest, unpublished, credentials)
