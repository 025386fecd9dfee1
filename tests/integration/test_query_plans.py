"""Cached query plans stay bounded as a metastore grows (issue 33).

A pooled connection keeps its prepared statements, and after a few executions PostgreSQL may
keep a generic plan for each, made from the statistics of the moment. Plans made while a
metastore was small must not make a write read more rows as it grows. Here every connection of
a fresh database is held to generic plans from the first execution (`plan_cache_mode`), the
worst case: a table takes commits while small, then the metastore gains tables and the table
commits, and the rows PostgreSQL read for the commits must stay a few per commit, where a cached
bitmap-and-sort walked the table's whole history and an id lookup every asset of the metastore.
"""

from __future__ import annotations

import asyncio
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from shardcat.auth import Caller
from shardcat.catalog.protocols.delta_commits import DeltaCommitService
from shardcat.catalog.tree.service import CatalogService
from shardcat.shards.shard import Shard
from shardcat.store.db import Store

EARLY, LATER, SMALL, TABLES = 5, 300, 30, 300


def _proposal(ref: dict, version: int) -> dict:
    return {**ref, "commit_info": {"version": version, "timestamp": 1, "file_size": 1, "file_modification_timestamp": 1,
                                   "file_name": f"{version:020d}.{uuid.uuid4()}.json"},
            **({"latest_backfilled_version": version - 1} if version > 1 else {})}


async def _rows_read(admin, table: str) -> int:
    await admin.execute("SELECT pg_stat_clear_snapshot()")
    row = await admin.fetchrow("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n "
                               "FROM pg_stat_user_tables WHERE relname = $1", table)
    return row["n"]


async def _commits_on_a_growing_metastore(url: str, root: str) -> None:
    store = await Store.open(url, min_size=1, max_size=1)     # one connection: its plans are the ones reused
    try:
        await store.migrate()
        ms = str(uuid.uuid4())
        await store.create_metastore(ms, f"p-{ms[:8]}", {"storage_root": f"{root}/{ms}"})
        shard = Shard(store, "plans")
        service, delta = CatalogService(shard), DeltaCommitService(shard)
        caller = Caller("admin", 1, True, 1, ms)
        await service.create(caller, "catalog", {"name": "c"})
        await service.create(caller, "schema", {"name": "s", "catalog_name": "c"})
        staging = await service.create_staging_table(caller, {"name": "d", "catalog_name": "c", "schema_name": "s"})
        table = await service.create(caller, "table", {
            "name": "d", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}],
            "storage_location": staging["staging_location"],
            "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": staging["id"]}})
        ref = {"table_id": table["table_id"], "table_uri": table["storage_location"]}

        async def more_tables(names: range) -> None:
            for i in names:
                await service.create(caller, "table", {"name": f"t{i}", "catalog_name": "c", "schema_name": "s",
                                                       "table_type": "MANAGED", "data_source_format": "DELTA",
                                                       "columns": []})

        await more_tables(range(SMALL))
        for version in range(1, EARLY + 1):          # plans made now, while everything is small
            await delta.commit(caller, _proposal(ref, version))
        await more_tables(range(SMALL, TABLES))
        for version in range(EARLY + 1, EARLY + LATER + 1):
            await delta.commit(caller, _proposal(ref, version))
    finally:
        await store.close()


def test_delta_commits_read_a_few_rows_each_however_the_metastore_grows(pg_url, tmp_path):
    async def scenario():
        name = f"shardcat_plans_{uuid.uuid4().hex[:12]}"
        admin = await asyncpg.connect(pg_url)
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            await admin.execute(f'ALTER DATABASE "{name}" SET plan_cache_mode = force_generic_plan')
            url = urlunsplit(urlsplit(pg_url)._replace(path="/" + name))
            await _commits_on_a_growing_metastore(url, f"file://{tmp_path}")
            db = await asyncpg.connect(url)
            try:
                # A backend reports what it read as it exits: wait for the pool's to be gone.
                for _ in range(100):
                    if not await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
                                             "AND pid <> pg_backend_pid()", name):
                        break
                    await asyncio.sleep(0.05)
                commits = EARLY + LATER
                commit_rows, asset_rows = await _rows_read(db, "delta_commits"), await _rows_read(db, "assets")
            finally:
                await db.close()
        finally:
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            await admin.close()
        # ~3 commit rows per commit (the head's two walks, the one it publishes); the whole history
        # each time would be ~150 per commit on average here
        assert commit_rows < 10 * commits, commit_rows
        # the table by id, ~1 per commit, plus what the table creations read; every asset of the
        # metastore for each commit would be ~300 per commit
        assert asset_rows < 10 * commits + 20 * TABLES, asset_rows

    asyncio.run(scenario())


def test_reads_by_id_stay_in_their_metastore(pg_url, tmp_path):
    """The metastore is checked on the row, not in SQL (`_asset_of`): an id of another metastore's
    asset finds nothing, whichever read asks (the store's, a write's, a Delta commit's)."""
    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        try:
            await store.migrate()
            ids = {}
            for label in ("mine", "theirs"):
                ms = str(uuid.uuid4())
                await store.create_metastore(ms, f"i-{ms[:8]}", {"storage_root": f"file://{tmp_path}/{ms}"})
                service = CatalogService(Shard(store, label))
                catalog = await service.create(Caller("admin", 1, True, 1, ms), "catalog", {"name": "c"})
                ids[label] = (ms, catalog["id"])
            (mine, my_catalog), (_, their_catalog) = ids["mine"], ids["theirs"]
            assert (await store.get_asset_by_id(mine, my_catalog))[1].id == my_catalog
            assert (await store.get_asset_by_id(mine, their_catalog))[1] is None
            assert [a.id for a in (await store.get_assets_by_ids(mine, [my_catalog, their_catalog]))[1]] == [my_catalog]
            assert [a.id for a in (await store.get_assets_by_keys(mine, [], [my_catalog, their_catalog]))[1]] \
                == [my_catalog]
            async with store.write(mine, (await store.get_asset_by_id(mine, my_catalog))[0]) as tx:
                assert (await tx.get_by_id(their_catalog)) is None
                assert (await tx.table_with_delta_head(their_catalog))[0] is None
                assert (await tx.get_by_id(my_catalog)).id == my_catalog
        finally:
            await store.close()

    asyncio.run(scenario())
