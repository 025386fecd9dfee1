"""Iceberg maintenance jobs, each a plain function a Ray task runs, through the catalog's Iceberg REST
endpoint with pyiceberg (a token minted for the run): every change is a commit the catalog checks
against the table's current metadata, so one that raced a writer fails (and is retried on the new
state) instead of overwriting it.

- expire snapshots: pyiceberg's `maintenance.expire_snapshots`, those older than the retention that
  no branch or tag points at, the current one never;
- compaction: the live rows rewritten as few files, one overwrite commit whose requirement is the
  snapshot it read; a concurrent append makes it fail (CommitFailedException), so the append stays;
- orphan files: a file under the table's location is deleted only when no metadata file of the
  table's log, no manifest list, manifest or data/delete file of any snapshot still known names it,
  it is older than the retention (a writer's files not committed yet are younger) and it lies under
  `data/` or `metadata/` of the table's own location.

pyiceberg 0.12 has no manifest rewrite: the compaction's commit writes one new manifest, which is
what a rewrite would give a table of small appends.
"""

from __future__ import annotations

import time

import pyarrow.fs as pafs
from pyiceberg.catalog import load_catalog

from ..entities.urls import is_within, normalize_url

ORPHAN_MIN_AGE_MS = 3 * 24 * 3600 * 1000


def _table(api_url: str, token: str, warehouse: str, identifier: str):
    catalog = load_catalog("shardcat-maintenance", type="rest", uri=f"{api_url}/iceberg", warehouse=warehouse,
                           token=token)
    return catalog.load_table(identifier)


def _data_files(table) -> int:
    snapshot = table.current_snapshot()
    return 0 if snapshot is None else len(table.inspect.files())


def expire_snapshots(*, api_url: str, token: str, warehouse: str, identifier: str, older_than_ms: int) -> dict:
    table = _table(api_url, token, warehouse, identifier)
    before = len(table.snapshots())
    protected = {ref.snapshot_id for ref in table.refs().values()}
    old = [s.snapshot_id for s in table.snapshots()
           if s.timestamp_ms < older_than_ms and s.snapshot_id not in protected]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()
        table = _table(api_url, token, warehouse, identifier)
    return {"snapshots_before": before, "snapshots_after": len(table.snapshots()),
            "files_before": _data_files(table), "files_after": _data_files(table)}


def compact(*, api_url: str, token: str, warehouse: str, identifier: str, min_files: int = 2) -> dict:
    table = _table(api_url, token, warehouse, identifier)
    before = _data_files(table)
    if before < min_files:
        return {"files_before": before, "files_after": before, "packed": 0}
    snapshot = table.current_snapshot()
    rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    # The overwrite's commit requires the table to be at the snapshot read: a writer that appended
    # meanwhile makes it fail, and the append stays (the run is retried on the new state).
    with table.transaction() as txn:
        txn.overwrite(rows, snapshot_properties={"shardcat.maintenance": "compact"})
    table = _table(api_url, token, warehouse, identifier)
    return {"files_before": before, "files_after": _data_files(table), "packed": before}


def _referenced(table) -> set[str]:
    """Every file the table's metadata still reaches: metadata log, manifest lists, manifests, data files."""
    io, meta = table.io, table.metadata
    out = {normalize_url(table.metadata_location)}
    out |= {normalize_url(e.metadata_file) for e in meta.metadata_log}
    for snapshot in meta.snapshots:
        out.add(normalize_url(snapshot.manifest_list))
        for manifest in snapshot.manifests(io):
            out.add(normalize_url(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                out.add(normalize_url(entry.data_file.file_path))
    for stats in meta.statistics or []:
        out.add(normalize_url(stats.statistics_path))
    return out


def remove_orphan_files(*, api_url: str, token: str, warehouse: str, identifier: str, older_than_ms: int) -> dict:
    table = _table(api_url, token, warehouse, identifier)
    root = normalize_url(table.location())
    referenced = _referenced(table)
    fs, base = pafs.FileSystem.from_uri(root)
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    files = [i for i in infos if i.type == pafs.FileType.File]
    candidates = []
    for info in files:
        scheme = root.split("://", 1)[0]
        url = normalize_url(f"{scheme}://{info.path}")     # a local path starts with /: file:///...
        relative = url[len(root):].lstrip("/")
        inside = is_within(url, root) and relative.split("/", 1)[0] in ("data", "metadata")
        if inside and (info.mtime_ns or 0) // 1_000_000 < older_than_ms and url not in referenced:
            candidates.append((url, info.path))
    if candidates:     # the metadata read again just before deleting: a commit in between is seen
        referenced = _referenced(_table(api_url, token, warehouse, identifier))
    deleted = 0
    for url, path in candidates:
        if url not in referenced:
            fs.delete_file(path)
            deleted += 1
    return {"files_before": len(files), "files_after": len(files) - deleted, "deleted": deleted,
            "checked_at_ms": int(time.time() * 1000)}
