"""UniForm tables: Delta tables whose Iceberg metadata the catalog writes, and serves read-only through
the Iceberg REST catalog.

A MANAGED or EXTERNAL DELTA table is a UniForm table when its catalog properties set
`delta.universalFormat.enabledFormats` to a list naming `iceberg` (created or altered so; a
catalog-managed table too). Before its Iceberg metadata is served, `current` brings it up to the
table's latest Delta version (the catalog's ratified version for a catalog-managed table, else the
newest in `_delta_log`): the versions since the last conversion become Iceberg snapshots
(iceberg/uniform.py), written by pyiceberg under the table's `metadata/` folder. The table's row
then records `uniform.iceberg` = {metadata_location, converted_delta_version,
converted_delta_timestamp} in one metastore write; only the catalog sets it (no API accepts the
field), so no metadata file a writer names is ever served.

Bounds: a conversion runs in a worker thread, never on the serving loop; one at a time per table
(a second load waits for it and finds it done), at most CONCURRENT per process; each run converts
at most iceberg/uniform.py's MAX_VERSIONS_PER_RUN versions one by one (further behind, one
snapshot catches up), and its work is the new versions' files (the first one: the table's live files).
Loads of a table already converted read nothing but the Delta head (the catalog's commits, or one
listing of `_delta_log`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import weakref

from ...auth import Caller
from ...delta import commits as delta_rules
from ...delta import log as dlog
from ...delta import replay
from ...entities.asset import Asset
from ...entities.urls import is_within
from ...errors import CatalogError
from ...iceberg import uniform as converter
from ...iceberg.metadata import METADATA_LOCATION, storage_properties
from ...governance import vending
from ...shards.shard import MetastoreState, Shard
from ...store.writes import WriteTx

CONCURRENT = int(os.environ.get("SHARDCAT_UNIFORM_CONVERSIONS", "2"))
_SLOTS: dict[int, asyncio.Semaphore] = {}        # per event loop (a process may run more than one in tests)
_LOCKS: "weakref.WeakValueDictionary[str, asyncio.Lock]" = weakref.WeakValueDictionary()
MAX_COMMITS = 1_000                               # the catalog's unpublished commits read per conversion


def is_uniform(asset: Asset | None) -> bool:
    return asset is not None and asset.type == "table" and asset.info.get("data_source_format") == "DELTA" and \
        asset.info.get("table_type") in ("MANAGED", "EXTERNAL") and \
        converter.enabled(asset.info.get("properties"))


def converted(asset: Asset) -> dict:
    """The row's record of its last conversion ({} before the first)."""
    found = (asset.info.get("uniform") or {}).get("iceberg") or {}
    location = found.get("metadata_location")
    # A record from before the table's location changed (an EXTERNAL table moved) is no record.
    return found if isinstance(location, str) and asset.storage_path and is_within(location, asset.storage_path) \
        else {}


def _slots() -> asyncio.Semaphore:
    loop = id(asyncio.get_running_loop())
    if loop not in _SLOTS:
        _SLOTS[loop] = asyncio.Semaphore(CONCURRENT)
    return _SLOTS[loop]


def _io(location: str) -> dict:
    """The catalog's own storage access (as for shallow clones): none on file://; on s3:// the server's
    configuration, at $SHARDCAT_S3_ENDPOINT if set."""
    if location.startswith("file:"):
        return {}
    return storage_properties({}, os.environ.get("SHARDCAT_S3_ENDPOINT"), vending.region())


class Unconvertible(CatalogError):
    def __init__(self, table: Asset, why: str):
        super().__init__("INVALID_PARAMETER_VALUE", f"Delta table '{table.full_name}' has no Iceberg metadata: {why}.")


class UniformService:
    def __init__(self, shard: Shard):
        self.shard = shard

    async def _head(self, caller: Caller, table: Asset, storage: dlog.Storage) -> tuple[int | None, dict]:
        """(latest Delta version, the catalog's unpublished commits by version)."""
        if delta_rules.is_catalog_managed(table.info.get("properties")):
            _, _, latest, _, rows = await self.shard.store.delta_commits(
                caller.metastore(), table.id, 0, None, MAX_COMMITS)
            return latest, {r["version"]: r for r in rows}
        return await asyncio.to_thread(replay.latest_published, storage), {}

    async def metadata_location(self, caller: Caller, table: Asset) -> str:
        """The Iceberg metadata file of `table` (a UniForm table the caller may read) as of its latest Delta
        version, converting what is missing first."""
        storage = dlog.Storage(table.storage_path)
        latest, unpublished = await self._head(caller, table, storage)
        if latest is None:
            raise Unconvertible(table, "its Delta log has no version yet")
        done = converted(table)
        if done.get("converted_delta_version") == latest:
            return done["metadata_location"]
        lock = _LOCKS.get(table.id)
        if lock is None:
            lock = _LOCKS[table.id] = asyncio.Lock()
        async with lock, _slots():
            fresh = await self.shard.lookup_id(caller.metastore(), table.id, caller.min_version)
            done = converted(fresh) if fresh is not None else {}
            if done.get("converted_delta_version", -1) >= latest:
                return done["metadata_location"]
            try:
                result = await asyncio.to_thread(self._convert, table, storage, done, latest, unpublished)
            except replay.Unconvertible as e:
                raise Unconvertible(table, str(e)) from None
            await self._record(caller, table, result)
            return result.metadata_location

    @staticmethod
    def _convert(table: Asset, storage: dlog.Storage, done: dict, latest: int, unpublished: dict):
        previous = done.get("metadata_location")
        start = done.get("converted_delta_version")
        if start is None or latest - start > converter.MAX_VERSIONS_PER_RUN:
            first = max(0, latest - converter.MAX_VERSIONS_PER_RUN) if start is None else start
            since = replay.state_at(storage, first, unpublished)
            versions = [(v, replay.actions_at(storage, v, unpublished)) for v in range(first + 1, latest + 1)] \
                if start is None else [(latest, converter.catch_up(since, replay.state_at(storage, latest, unpublished)))]
        else:
            since = replay.state_at(storage, start, unpublished)
            versions = [(v, replay.actions_at(storage, v, unpublished)) for v in range(start + 1, latest + 1)]
        return converter.convert(table.storage_path, storage, table.id, previous, since, versions,
                                 _io(table.storage_path))

    async def _record(self, caller: Caller, table: Asset, result: converter.Converted) -> None:
        """The conversion's record on the row, unless a newer one is there already (or the table is gone)."""
        record = {"metadata_location": result.metadata_location, "converted_delta_version": result.delta_version}
        if result.delta_timestamp is not None:
            record["converted_delta_timestamp"] = result.delta_timestamp

        async def write(tx: WriteTx, state: MetastoreState):
            row = await tx.get_by_id(table.id)
            if row is None or row.storage_path != table.storage_path or \
                    converted(row).get("converted_delta_version", -1) >= result.delta_version:
                return None
            return await tx.put(dataclasses.replace(row, info={**row.info, "uniform": {"iceberg": record}}))

        await self.shard.write(caller.metastore(), write)


async def served(shard: Shard, caller: Caller, table: Asset) -> Asset:
    """`table` as the Iceberg REST catalog serves it (to a caller who may read its data): a UniForm table
    carries its converted metadata as its metadata pointer, in this copy only (never written back)."""
    if not is_uniform(table):
        return table
    location = await UniformService(shard).metadata_location(caller, table)
    properties = {**(table.info.get("properties") or {}), METADATA_LOCATION: location}
    return dataclasses.replace(table, info={**table.info, "properties": properties})
