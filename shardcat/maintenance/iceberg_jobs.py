"""Iceberg maintenance jobs, each a plain function a Ray task runs, through the catalog's Iceberg REST
endpoint with pyiceberg (a token minted for the run): every change is a commit the catalog checks
against the table's current metadata, so one that raced a writer fails (and is retried on the new
state) instead of overwriting it.

- expire snapshots: pyiceberg's `maintenance.expire_snapshots`, those older than the retention that
  no branch or tag points at, the current one never;
- compaction: the live rows rewritten as few files, one overwrite commit whose requirement is the
  snapshot it read; a concurrent append makes it fail (CommitFailedException), so the append stays; a
  snapshot naming a data file outside the table's location (or through a link) is not compacted;
- orphan files: a file under the table's location is deleted only when no metadata file of the
  table's log, no manifest list, manifest or data/delete file of any snapshot still known names it,
  it is older than the retention (a writer's files not committed yet are younger) and it lies under
  `data/` or `metadata/` of the table's own location, reached through no symbolic link (on file://);
- rewrite manifests: the current snapshot's data manifests, per partition spec, as few manifests of
  about the target size (their live entries kept as EXISTING, with their snapshot ids and sequence
  numbers; delete manifests kept as they are), in a new manifest list; one `replace` snapshot
  committed through the catalog with the requirement that `main` is still the snapshot read. A
  concurrent commit makes the catalog refuse it (409): the files it wrote are deleted (never
  committed, so its own) and it starts again on the new state, at most COMMIT_ATTEMPTS times. It
  writes only under the table's own `metadata/`, and reads no manifest list or manifest outside the
  table's location (or through a link): such a snapshot is not rewritten.
  pyiceberg 0.12 has no such action; its public manifest writers do the file format.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid

import pyarrow.fs as pafs
from pyiceberg.catalog import load_catalog
from pyiceberg.io import load_file_io
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.manifest import ManifestContent, write_manifest, write_manifest_list
from pyiceberg.table import TableProperties
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, AssertTableUUID, SetSnapshotRefUpdate

from ..entities.urls import InvalidUrl, is_within, normalize_url
from ..iceberg.confined import through_link
from ..web import store_endpoints

ORPHAN_MIN_AGE_MS = 3 * 24 * 3600 * 1000
MANIFEST_TARGET_BYTES = 8 * 1024 * 1024      # Iceberg's own default (commit.manifest.target-size-bytes)
COMMIT_ATTEMPTS = 4                          # a rewrite refused for a concurrent commit is redone this often at most


def _table(api_url: str, token: str, warehouse: str, identifier: str):
    catalog = load_catalog("shardcat-maintenance", type="rest", uri=f"{api_url}/iceberg", warehouse=warehouse,
                           token=token)
    table = catalog.load_table(identifier)
    endpoint = table.io.properties.get("s3.endpoint")
    if endpoint:        # the jobs read and delete with the catalog's rights: a store at a public or listed address only
        pinned = store_endpoints.connect_url(endpoint,
                                             path_style=table.io.properties.get("s3.force-virtual-addressing") != "true")
        table.io = load_file_io({**table.io.properties, "s3.endpoint": pinned}, table.metadata_location)
    return table


def signals(metadata_location: str, small_file_bytes: int) -> dict:
    """What a table's current snapshot shows the catalog's policy (blocking: a worker thread's): its
    small live data files and its data manifests. Read from the metadata file the catalog points at."""
    from pyiceberg.table import StaticTable
    table = StaticTable.from_metadata(metadata_location)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return {"small_files": 0, "manifests": 0}
    manifests = [m for m in snapshot.manifests(table.io) if m.content == ManifestContent.DATA]
    small = sum(e.data_file.file_size_in_bytes < small_file_bytes for m in manifests
                for e in m.fetch_manifest_entry(table.io, discard_deleted=True))
    return {"small_files": small, "manifests": len(manifests)}


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
    outside = _foreign_files(table)
    if outside:         # read with the catalog's rights, their rows would land in this table's storage
        raise ValueError(f"The table's snapshot names a data file outside it ('{outside[0]:.200}'): not compacted.")
    snapshot = table.current_snapshot()
    rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    # The overwrite's commit requires the table to be at the snapshot read: a writer that appended
    # meanwhile makes it fail, and the append stays (the run is retried on the new state).
    with table.transaction() as txn:
        txn.overwrite(rows, snapshot_properties={"shardcat.maintenance": "compact"})
    table = _table(api_url, token, warehouse, identifier)
    return {"files_before": before, "files_after": _data_files(table), "packed": before}


def _foreign_files(table) -> list[str]:
    """The current snapshot's data files that lie outside the table's own location or, on a local file
    system, are reached through a symbolic link: a writer's manifest may name any path."""
    return _outside(table, table.inspect.files().column("file_path").to_pylist())


def _outside(table, paths) -> list[str]:
    """Those of `paths` outside the table's own location or (local file system) reached through a link."""
    root = normalize_url(table.location())
    fs, base = pafs.FileSystem.from_uri(root)
    out = []
    for path in paths:
        try:
            url = normalize_url(path)
        except InvalidUrl:
            url = None
        if url is None or url == root or not is_within(url, root) or \
                (isinstance(fs, pafs.LocalFileSystem) and through_link(base, pafs.FileSystem.from_uri(url)[1])):
            out.append(path)
    return out


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
    local = isinstance(fs, pafs.LocalFileSystem)      # Arrow's local listing follows symbolic links
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    files = [i for i in infos if i.type == pafs.FileType.File]
    candidates = []
    for info in files:
        scheme = root.split("://", 1)[0]
        url = normalize_url(f"{scheme}://{info.path}")     # a local path starts with /: file:///...
        relative = url[len(root):].lstrip("/")
        inside = is_within(url, root) and relative.split("/", 1)[0] in ("data", "metadata") \
            and not (local and through_link(base, info.path))
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


# ---- rewrite manifests ----------------------------------------------------------------------


def _data_manifests_by_spec(manifests) -> dict[int, list]:
    out: dict[int, list] = {}
    for m in manifests:
        if m.content == ManifestContent.DATA:
            out.setdefault(m.partition_spec_id, []).append(m)
    return out


def _worth_rewriting(group: list, target_bytes: int) -> bool:
    """More manifests than their bytes need at the target size (or one with no live entry)."""
    needed = max(1, -(-sum(m.manifest_length for m in group) // target_bytes))
    return len(group) > needed or any(not (m.has_added_files() or m.has_existing_files()) for m in group)


def _write_packed(table, spec_id: int, group: list, snapshot_id: int, commit: uuid.UUID, counter, target_bytes: int,
                  written: list[str]) -> tuple[list, int]:
    """The group's live entries in new manifests of about target_bytes each, clustered by partition;
    (the new manifests, entries written). Every path written is added to `written` first."""
    meta, io = table.metadata, table.io
    entries = [e for m in group for e in m.fetch_manifest_entry(io, discard_deleted=True)]
    entries.sort(key=lambda e: repr(e.data_file.partition))
    compression = _compression(meta)
    out, writer = [], None
    for entry in entries:
        if writer is None:
            path = _metadata_path(table, f"{commit}-m{next(counter)}.avro")
            written.append(path)
            writer = write_manifest(format_version=meta.format_version, spec=meta.specs()[spec_id],
                                    schema=meta.schema(), output_file=io.new_output(path), snapshot_id=snapshot_id,
                                    avro_compression=compression).__enter__()
        writer.existing(entry)         # EXISTING, its snapshot id and sequence numbers kept
        if writer.tell() >= target_bytes:
            writer.__exit__(None, None, None)
            out.append(writer.to_manifest_file())
            writer = None
    if writer is not None:
        writer.__exit__(None, None, None)
        out.append(writer.to_manifest_file())
    return out, len(entries)


def _prepare(table, target_bytes: int, written: list[str]) -> tuple[dict, tuple | None]:
    """The new manifests and manifest list written (each path added to `written` first); (the counts,
    the commit's (requirements, updates), or None when nothing is worth rewriting)."""
    meta, io = table.metadata, table.io
    current = table.current_snapshot()
    outside = _outside(table, [current.manifest_list])
    manifests = [] if outside else current.manifests(io)
    outside = outside or _outside(table, [m.manifest_path for m in manifests])
    if outside:         # read with the catalog's rights, another table's entries would become this one's
        raise ValueError(f"The table's snapshot names a manifest outside it ('{outside[0]:.200}'): not rewritten.")
    groups = _data_manifests_by_spec(manifests)
    rewrite = {spec: group for spec, group in groups.items() if _worth_rewriting(group, target_bytes)}
    counts = {"manifests_before": len(manifests), "manifests_after": len(manifests), "rewritten": 0,
              "data_files": sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in manifests
                                if m.content == ManifestContent.DATA)}
    if not rewrite:
        return counts, None
    snapshot_id, commit, counter = meta.new_snapshot_id(), uuid.uuid4(), itertools.count()
    created, entries = [], 0
    for spec_id, group in sorted(rewrite.items()):
        new, n = _write_packed(table, spec_id, group, snapshot_id, commit, counter, target_bytes, written)
        created += new
        entries += n
    replaced = {m.manifest_path for group in rewrite.values() for m in group}
    kept = [m for m in manifests if m.manifest_path not in replaced]    # delete manifests, specs left alone
    sequence = meta.next_sequence_number()
    manifest_list = _metadata_path(table, f"snap-{snapshot_id}-0-{commit}.avro")
    written.append(manifest_list)
    with write_manifest_list(format_version=meta.format_version, output_file=io.new_output(manifest_list),
                             snapshot_id=snapshot_id, parent_snapshot_id=current.snapshot_id,
                             sequence_number=sequence, avro_compression=_compression(meta)) as writer:
        writer.add_manifests(kept + created)
    totals = {k: v for k, v in (current.summary.additional_properties if current.summary else {}).items()
              if k.startswith("total-")}        # the same data: the same totals
    summary = Summary(Operation.REPLACE, **totals, **{
        "manifests-created": str(len(created)), "manifests-replaced": str(len(replaced)),
        "manifests-kept": str(len(kept)), "entries-processed": str(entries),
        "shardcat.maintenance": "rewrite_manifests"})
    snapshot = Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=current.snapshot_id, sequence_number=sequence,
                        timestamp_ms=int(time.time() * 1000), manifest_list=manifest_list, summary=summary,
                        schema_id=meta.current_schema_id)
    requirements = (AssertTableUUID(uuid=meta.table_uuid),
                    AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=current.snapshot_id))
    updates = (AddSnapshotUpdate(snapshot=snapshot),
               SetSnapshotRefUpdate(ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id))
    return {**counts, "manifests_after": len(kept) + len(created), "rewritten": len(replaced),
            "entries": entries, "snapshot_id": snapshot_id}, (requirements, updates)


def _metadata_path(table, name: str) -> str:
    """Where the job writes: the table's own metadata/ folder (never a `write.metadata.path` a writer set)."""
    return f"{table.location().rstrip('/')}/metadata/{name}"


def _compression(meta) -> str:
    return meta.properties.get(TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)


def rewrite_manifests(*, api_url: str, token: str, warehouse: str, identifier: str,
                      target_bytes: int = MANIFEST_TARGET_BYTES, attempts: int = COMMIT_ATTEMPTS) -> dict:
    """The current snapshot's data manifests rewritten as few of about target_bytes per partition spec,
    in one `replace` commit through the catalog, redone on the new state when a concurrent commit
    wins (up to `attempts` tries; then CommitFailedException, nothing of this job left behind)."""
    for attempt in range(1, attempts + 1):
        table = _table(api_url, token, warehouse, identifier)
        current = table.current_snapshot()
        if current is None or table.metadata.format_version not in (1, 2):
            n = 0 if current is None else len(current.manifests(table.io))
            out = {"manifests_before": n, "manifests_after": n, "files_before": n, "files_after": n, "rewritten": 0}
            if current is not None:        # pyiceberg 0.12's manifest writers write v1 and v2 only
                out["skipped"] = f"format version {table.metadata.format_version}"
            return out
        written: list[str] = []
        try:
            out, commit = _prepare(table, target_bytes, written)
        except BaseException:
            _delete_all(table.io, written)
            raise
        if commit is not None:
            try:
                # The catalog's own commit path: refused (409) unless main is still the snapshot read.
                table.catalog.commit_table(table, *commit)
            except CommitFailedException:
                _delete_all(table.io, written)       # refused, so never part of the table: this job's own
                if attempt == attempts:
                    raise
                continue
            except (CommitStateUnknownException, OSError):
                raise      # the commit may have landed: its files stay (an orphan-file run finds them if not)
            except BaseException:
                _delete_all(table.io, written)
                raise
        # files, for the runs table: the manifests (what this job rewrites)
        return {**out, "files_before": out["manifests_before"], "files_after": out["manifests_after"],
                "commit_attempts": attempt}
    raise AssertionError("unreachable")


def _delete_all(io, paths: list[str]) -> None:
    for path in paths:
        try:
            io.delete(path)
        except OSError:
            pass
