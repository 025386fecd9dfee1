"""Catalog-managed Delta tables for Spark, through shardcat's Delta client (shardcat.delta.client).

Reads: the client builds the table's snapshot (the catalog's ratified commits over the published
log); Spark reads the snapshot's live Parquet files. Writes: Spark writes Parquet files into a
fresh directory inside the table's location; the client then stages a commit adding them (and,
for an overwrite, removing the live files) and asks the catalog to ratify it, rebasing over
concurrent appends as the client does. A partitioned table's files are moved from there into
their partition directories under the table's root before the commit, so that every live file
sits where Spark, given the root as its base path, reads its partition values from the path.
The async client runs on a private event loop thread, so this works from any caller (a script,
a notebook with its own loop, a test's worker thread).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..delta import log as dlog
from ..delta import partitions
from ..delta.client import DeltaCatalogClient, DeltaClientError, Snapshot, TableRef, Transaction
from ..delta.commits import FEATURE_PROPERTY


def is_catalog_managed(table: dict) -> bool:
    return (table.get("data_source_format") or "").upper() == "DELTA" and \
        (table.get("properties") or {}).get(FEATURE_PROPERTY) == "supported"


def ref(table: dict) -> TableRef:
    return TableRef(table["full_name"], table["table_id"], table["storage_location"])


class DeltaBridge:
    def __init__(self, api_url: str, token: str, stats):
        self.api_url, self.token, self.stats = api_url, token, stats
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="shardcat-delta", daemon=True)
        self._thread.start()
        self._client = DeltaCatalogClient(api_url, token)

    def _run(self, coro):
        started = time.perf_counter()
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result()
        finally:
            self.stats.seconds += time.perf_counter() - started
            self.stats.calls += 1

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._client.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()

    # ---- reading ---------------------------------------------------------------------------

    def snapshot(self, table: dict) -> Snapshot:
        return self._run(self._client.snapshot(ref(table)))

    def files(self, table: dict) -> tuple[list[str], list[tuple[str, dict]]]:
        """(partition columns, [(relative path, partition values)] of the live data files) of the
        table's latest ratified version."""
        state = self.snapshot(table).state
        return state.partition_columns, [(p, state.files[p].get("partitionValues") or {}) for p in sorted(state.files)]

    # ---- writing ---------------------------------------------------------------------------

    def create(self, full_name: str, arrow_schema, comment: str | None = None, partition_columns=()) -> dict:
        """A new catalog-managed table (staging table, version 0, registration); its TableInfo."""
        t = self._run(self._client.create_table(full_name, arrow_schema, partition_columns=partition_columns,
                                                comment=comment))
        return {"full_name": t.full_name, "table_id": t.table_id, "storage_location": t.location}

    def data_dir(self, table: dict) -> tuple[str, str]:
        """(relative directory, its URL) for Spark to write one transaction's files into."""
        rel = f"spark-{uuid.uuid4().hex}"
        return rel, _url(table["storage_location"], rel)

    def commit_files(self, table: dict, rel_dir: str, partition_columns: list[str], *, overwrite: bool) -> int:
        """Ratify a commit adding the Parquet files Spark wrote under `rel_dir`, partitioned by
        `partition_columns` (and removing every live file, for an overwrite). Returns the new version."""
        storage = dlog.Storage(table["storage_location"])
        infos = storage.fs.get_file_info(pafs.FileSelector(storage.path(rel_dir), recursive=True))
        adds = []
        for info in sorted(infos, key=lambda i: i.path):
            if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet") \
                    or info.base_name.startswith((".", "_")):
                continue
            rel = f"{rel_dir}/{info.path[len(storage.path(rel_dir)) + 1:]}"
            values = partitions.values_in_path(rel)
            if set(values) != set(partition_columns):
                raise DeltaClientError(f"{rel} is not in a directory of partition columns {partition_columns}.")
            if partition_columns:   # from Spark's output directory to the table's partition directory
                target = f"{partitions.directory(partition_columns, values)}/{info.base_name}"
                storage.fs.create_dir(storage.path(target.rsplit("/", 1)[0]), recursive=True)
                storage.fs.move(info.path, storage.path(target))
                rel = target
            with storage.fs.open_input_file(storage.path(rel)) as f:
                rows = pq.ParquetFile(f).metadata.num_rows
            adds.append(dlog.add(rel, info.size, rows, storage.mtime_ms(rel), values))
        if partition_columns:
            storage.fs.delete_dir(storage.path(rel_dir))

        async def go():
            snap = await self._client.snapshot(ref(table))
            if snap.state.partition_columns != partition_columns:
                raise DeltaClientError(f"Table '{table['full_name']}' is partitioned by "
                                       f"{snap.state.partition_columns}, not {partition_columns}.")
            now = dlog.now_ms()
            removes = [dlog.remove(a, now) for a in snap.state.files.values()] if overwrite else []
            txn = Transaction(snap.table, snap.version, "WRITE", adds, removes, blind_append=not overwrite,
                              parameters={"mode": "Overwrite" if overwrite else "Append"})
            return await self._client.commit(txn, snap)

        return self._run(go())


def in_partition_directories(partition_columns: list[str], files: list[tuple[str, dict]]) -> bool:
    """Whether every file (relative path, partition values) sits right in the directory of its
    values, so that Spark reading from the table's root finds the log's values in the paths."""
    return all(path.count("/") == len(partition_columns) and
               partitions.values_in_path(path) == {c: values.get(c) or None for c in partition_columns}
               for path, values in files)


def _url(location: str, relative: str) -> str:
    return location.rstrip("/") + "/" + relative
