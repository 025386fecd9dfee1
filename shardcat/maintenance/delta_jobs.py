"""Delta maintenance jobs, each a plain function a Ray task runs: bin-packing small files, a
checkpoint (and log compaction), vacuum.

A catalog-managed table is changed only by a commit the catalog ratifies (shardcat's Delta client,
delta/client.py, with a token minted for the run): the compaction reads a snapshot, writes the
packed files, and proposes one commit that removes the small files and adds the packed ones
(dataChange false). A writer that committed meanwhile wins its version; the compaction is rebased
over it by the client's rules (a concurrent append rebases; a concurrent removal of a file it
packs, or a metadata change, is a conflict and the run fails without changing anything), so no
writer's commit is ever lost. A table the catalog does not manage (a plain Delta log) is packed by
delta-rs's own optimize, whose commit is put-if-absent on the log.

Vacuum is delta/vacuum.py's, rules and all: only files the log removed, strictly inside the root,
past the retention, none a shallow clone references (`keep`, worked out by the catalog).
"""

from __future__ import annotations

import asyncio
import collections
import os

import deltalake
import pyarrow as pa
import ray
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..delta import log as dlog
from ..delta import partitions
from ..delta import vacuum as delta_vacuum
from ..delta.client import DeltaCatalogClient, Transaction
from ..entities.urls import storage_names

SMALL_FILE_BYTES = 8 * 1024 * 1024     # a file below this is "small" (packed); Delta's optimize aims at ~1 GB
TARGET_FILE_BYTES = 128 * 1024 * 1024  # a packed file holds small files up to about this much


def _bins(files: list[dict], target: int) -> list[list[dict]]:
    """Small files grouped by partition, each group cut into bins of about `target` bytes; bins of one
    file are left alone (rewriting one file gains nothing)."""
    by_partition: dict[tuple, list[dict]] = collections.defaultdict(list)
    for f in files:
        by_partition[tuple(sorted((f.get("partitionValues") or {}).items()))].append(f)
    out = []
    for group in by_partition.values():
        current, size = [], 0
        for f in sorted(group, key=lambda f: f["path"]):
            if current and size + (f.get("size") or 0) > target:
                out.append(current)
                current, size = [], 0
            current.append(f)
            size += f.get("size") or 0
        out.append(current)
    return [b for b in out if len(b) > 1]


def _inside(storage: dlog.Storage, path) -> bool:
    """Whether a log's `path` names a file strictly inside the table's root, reached through no symbolic
    link (on a local file system). The jobs read with the catalog's own identity: a writer's log naming
    another's file (`../x`, an absolute URL, a link) must not have its rows copied into the table."""
    url = delta_vacuum.file_url(storage.location, path)
    if url is None:
        return False
    if not isinstance(storage.fs, pafs.LocalFileSystem):
        return True
    names = storage_names(url)[1][len(storage_names(storage.location)[1]):]
    target = storage.path("/".join(names))
    return os.path.realpath(target) == os.path.join(os.path.realpath(storage.root), *names)


def _pack(location: str, bin_: list[dict], data_columns: list[str], schema: pa.Schema, partitioned: list) -> dict:
    """One bin of small files read and written as one file (in its partition's directory); its add
    action, dataChange false (the same rows)."""
    storage = dlog.Storage(location)
    parts = []
    for f in bin_:
        with storage.fs.open_input_file(storage.path(f["path"])) as handle:
            parts.append(pq.read_table(handle, columns=data_columns))
    data = pa.concat_tables(parts).cast(pa.schema([schema.field(n) for n in data_columns]))
    values = bin_[0].get("partitionValues") or {}
    directory = partitions.directory(partitioned, values) + "/" if partitioned else ""
    added = dlog.write_data_file(storage, directory, data, values)
    added["add"]["dataChange"] = False         # readers of changes skip it
    return added


_pack_remote = ray.remote(scheduling_strategy="SPREAD")(_pack)


async def _compact_managed(api_url: str, token: str, full_name: str, small: int, target: int) -> dict:
    """Bin-pack through the catalog: the new files first, then one commit (rebased or refused by the
    client's rules); a refused commit's files are deleted (this run wrote them, no log names them)."""
    async with DeltaCatalogClient(api_url, token) as client:
        snap = await client.snapshot(full_name)
        before = len(snap.state.files)
        storage = dlog.Storage(snap.table.location, snap.table.credentials)
        bins = _bins([f for f in snap.state.files.values() if (f.get("size") or 0) < small
                      and _inside(storage, f["path"])], target)       # a file from elsewhere is left as it is
        if not bins:
            return {"files_before": before, "files_after": before, "version": snap.version, "packed": 0}
        partitioned = snap.state.partition_columns
        data_columns = [n for n in snap.schema.names if n not in partitioned]
        now = dlog.now_ms()
        if len(bins) > 1 and ray.is_initialized():
            # many bins: each packed by a task of its own, spread over the nodes (this task waits, its CPU lent)
            adds = ray.get([_pack_remote.remote(snap.table.location, b, data_columns, snap.schema, partitioned)
                            for b in bins])
        else:
            adds = [_pack(snap.table.location, b, data_columns, snap.schema, partitioned) for b in bins]
        removes = []
        for b in bins:
            for f in b:
                removed = dlog.remove(f, now)
                removed["remove"]["dataChange"] = False
                removes.append(removed)
        # blind_append: the compaction read only the files it removes; the client's rebase then lets a
        # concurrent append through and refuses a concurrent removal of any of them (CommitConflict).
        txn = Transaction(snap.table, snap.version, "OPTIMIZE", adds, removes, blind_append=True,
                          parameters={"predicate": "[]", "targetSize": str(target)})
        try:
            version = await client.commit(txn, snap)
        except BaseException:
            for a in adds:      # written by this run and never committed: provably no one's
                storage.delete(a["add"]["path"])
            raise
        after = len((await client.snapshot(full_name)).state.files)
        return {"files_before": before, "files_after": after, "version": version,
                "packed": sum(len(b) for b in bins)}


def compact(*, api_url: str, token: str, full_name: str, location: str, catalog_managed: bool,
            small_file_bytes: int = SMALL_FILE_BYTES, target_file_bytes: int = TARGET_FILE_BYTES) -> dict:
    """Bin-pack the table's small files. Returns files before and after, and the version made."""
    if catalog_managed:
        return asyncio.run(_compact_managed(api_url, token, full_name, small_file_bytes, target_file_bytes))
    storage = dlog.Storage(location)
    outside = [p for p in delta_vacuum.log_history(storage)[0] if not _inside(storage, p)]
    if outside:         # delta-rs packs every small file: none may come from elsewhere
        raise ValueError(f"The table's log names a file outside it ('{outside[0]:.200}'): not compacted.")
    table = deltalake.DeltaTable(location)
    before = len(table.file_uris())
    metrics = table.optimize.compact(target_size=target_file_bytes)
    table.update_incremental()
    return {"files_before": before, "files_after": len(table.file_uris()), "version": table.version(),
            "packed": metrics.get("numFilesRemoved", 0)}


async def _checkpoint_managed(api_url: str, token: str, full_name: str) -> dict:
    async with DeltaCatalogClient(api_url, token) as client:
        version = await client.publish(full_name, checkpoint=True)
        return {"version": version}


def checkpoint(*, api_url: str, token: str, full_name: str, location: str, catalog_managed: bool) -> dict:
    """Publish what the catalog ratified and write a checkpoint of it; for a plain log also a compacted
    log file of the commits since the previous checkpoint (delta-rs)."""
    if catalog_managed:
        out = asyncio.run(_checkpoint_managed(api_url, token, full_name))
    else:
        table = deltalake.DeltaTable(location)
        _, checkpoints = dlog.Storage(location).list_log()
        start = max(checkpoints, default=-1) + 1
        if table.version() > start:
            table.compact_logs(start, table.version())
        table.create_checkpoint()
        out = {"version": table.version(), "log_compacted": [start, table.version()]}
    commits, checkpoints = dlog.Storage(location).list_log()
    return {**out, "log_files": len(commits), "checkpoints": len(checkpoints)}


def vacuum(*, location: str, keep: list[str], older_than_ms: int) -> dict:
    """delta/vacuum.py's vacuum: the files the log removed before `older_than_ms`, none in `keep`."""
    before = data_files_on_disk(location)
    out = delta_vacuum.vacuum(location, set(keep), older_than_ms=older_than_ms)
    return {"deleted": len(out["deleted"]), "kept_for_clones": len(out["kept_for_clones"]),
            "files_before": before, "files_after": data_files_on_disk(location)}


def data_files_on_disk(location: str) -> int:
    """Parquet files under the table's root outside its log (what a vacuum can shrink)."""
    storage = dlog.Storage(location)
    infos = storage.fs.get_file_info(pafs.FileSelector(storage.root, recursive=True, allow_not_found=True))
    return sum(1 for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")
               and "/_delta_log/" not in i.path + "/")


def live_files(location: str) -> int:
    """How many data files the published log's snapshot holds (for signals and reports)."""
    live, _ = delta_vacuum.log_history(dlog.Storage(location))
    return len(live)
