"""The Python Delta client (shardcat.delta.client) on catalog-managed tables, against a real server:
concurrent writer processes, a crash between staging and ratification, readers seeing ratified
but unpublished commits, rebasing and clear conflicts, metadata changes reaching the catalog, the
unpublished-commit limit, and the published table read back by delta-rs (`deltalake`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import uuid
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from shardcat.delta import log as dlog
from shardcat.delta.client import CommitConflict, DeltaCatalogClient, Transaction
from shardcat.delta.log import Storage

SCHEMA = pa.schema([("worker", pa.int64()), ("seq", pa.int64()), ("id", pa.string())])
WRITERS, APPENDS, ROWS = 4, 5, 3


def rows(worker: int, seq: int, n: int = ROWS) -> pa.Table:
    return pa.table({"worker": [worker] * n, "seq": [seq] * n, "id": [f"{worker}-{seq}-{i}" for i in range(n)]},
                    schema=SCHEMA)


async def setup(ws) -> None:
    assert (await ws.call("POST", "/catalogs", json={"name": "main"}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "main"}))[0] == 200


@pytest.fixture
async def delta(ws):
    await setup(ws)
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        yield client


def local_path(location: str) -> str:
    return Storage(location).root


# ---- processes (spawned: each imports this module and runs its own event loop) ----------


def _append_worker(api: str, token: str, name: str, worker: int, appends: int, start) -> tuple[list[int], int]:
    async def run():
        async with DeltaCatalogClient(api, token) as client:
            await client.snapshot(name)            # warm up, then start together with the other writers
            start.wait(60)
            versions = [await client.append(name, rows(worker, i)) for i in range(appends)]
            return versions, client.stats["conflicts"]
    return asyncio.run(run())


def _stage_then_crash(api: str, token: str, name: str) -> None:
    async def run():
        async with DeltaCatalogClient(api, token) as client:
            snap = await client.snapshot(name)
            txn = Transaction(snap.table, snap.version, "WRITE", client.write_files(snap, rows(99, 0)))
            client.stage(txn, snap.version + 1, snap.state.ict)
        os._exit(17)    # the writer dies after staging, before asking the catalog to ratify
    asyncio.run(run())


# ---- tests -------------------------------------------------------------------------------


async def test_concurrent_writer_processes(ws, server, delta):
    table = await delta.create_table("main.s.t", SCHEMA)
    loop = asyncio.get_running_loop()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(WRITERS, mp_context=ctx) as pool:
        start = manager.Barrier(WRITERS)
        futures = [loop.run_in_executor(pool, _append_worker, ws.api, ws.token, "main.s.t", w, APPENDS, start)
                   for w in range(WRITERS)]
        outcomes = await asyncio.wait_for(asyncio.gather(*futures), timeout=240)
    results = [versions for versions, _ in outcomes]
    assert sum(conflicts for _, conflicts in outcomes) > 0    # the writers did race, and rebased
    total = WRITERS * APPENDS
    versions = sorted(v for r in results for v in r)
    assert versions == list(range(1, total + 1))            # every version ratified exactly once, no gaps
    for r in results:
        assert r == sorted(r)                                 # each writer's appends in its own order
    ratified = await server.store.pool.fetch(
        "SELECT version FROM delta_commits WHERE table_id = $1 ORDER BY version", uuid.UUID(table.table_id))
    assert [r["version"] for r in ratified] == list(range(1, total + 1))

    snap = await delta.snapshot("main.s.t")
    assert snap.version == total
    data = await delta.read("main.s.t", snap)
    assert data.num_rows == total * ROWS                      # no lost append
    assert sorted(data.column("id").to_pylist()) == sorted(
        f"{w}-{s}-{i}" for w in range(WRITERS) for s in range(APPENDS) for i in range(ROWS))
    # The published log: one file per version, in-commit timestamps strictly increasing.
    await delta.publish(table)
    storage = Storage(table.location)
    published, _ = storage.list_log()
    assert published == set(range(total + 1))
    icts = [dlog.decode_actions(storage.read(dlog.commit_file(v)))[0]["commitInfo"]["inCommitTimestamp"]
            for v in range(total + 1)]
    assert icts == sorted(icts) and len(set(icts)) == len(icts)


async def test_crash_between_staging_and_ratification(ws, server, delta):
    table = await delta.create_table("main.s.t", SCHEMA)
    assert await delta.append(table, rows(1, 0)) == 1
    loop = asyncio.get_running_loop()
    ctx = multiprocessing.get_context("spawn")
    process = ctx.Process(target=_stage_then_crash, args=(ws.api, ws.token, "main.s.t"))
    await loop.run_in_executor(None, process.start)
    await loop.run_in_executor(None, process.join, 60)
    assert process.exitcode == 17
    staged = Storage(table.location).fs.get_file_info(
        dlog.pafs.FileSelector(Storage(table.location).path(dlog.STAGED_DIR)))
    orphans = [f.base_name for f in staged if f.base_name.startswith(f"{2:020d}.")]
    assert len(orphans) == 1                                   # the proposal is on disk ...
    snap = await delta.snapshot(table)
    assert snap.version == 1                                   # ... but no version 2 exists
    assert (await delta.read(table, snap)).column("worker").to_pylist() == [1] * ROWS
    latest, commits = await delta.get_commits(table)
    assert latest == 1 and commits == {}
    # The next writer takes version 2; the orphan never becomes visible.
    assert await delta.append(table, rows(2, 0)) == 2
    data = await delta.read(table)
    assert sorted(set(data.column("worker").to_pylist())) == [1, 2] and data.num_rows == 2 * ROWS


async def test_readers_see_ratified_unpublished_commits(ws, delta):
    table = await delta.create_table("main.s.t", SCHEMA)
    async with DeltaCatalogClient(ws.api, ws.token, publish_after_commit=False) as writer:
        assert await writer.append(table, rows(1, 0)) == 1
        assert await writer.append(table, rows(1, 1)) == 2
    # An inline commit: the catalog holds its content, nothing is on disk for it.
    snap = await delta.snapshot(table)
    [add] = delta.write_files(snap, rows(7, 0))
    content = dlog.encode_actions([dlog.commit_info(snap.state.ict + 1, "WRITE", blind_append=True), add]).decode()
    status, body = await ws.call("POST", "/delta/preview/commits", json={
        **table.commit_ref(), "commit_info": {
            "version": 3, "timestamp": snap.state.ict + 1, "file_name": dlog.staged_file_name(3),
            "file_size": len(content.encode()), "file_modification_timestamp": snap.state.ict + 1,
            "inline_content": content}})
    assert status == 200, body
    storage = Storage(table.location)
    assert storage.list_log()[0] == {0}                        # only the creation commit is published
    async with DeltaCatalogClient(ws.api, ws.token) as reader:
        snap = await reader.snapshot("main.s.t")
        assert snap.version == 3 and sorted(snap.unpublished) == [1, 2, 3]
        data = await reader.read("main.s.t", snap)
        assert sorted(set(data.column("worker").to_pylist())) == [1, 7] and data.num_rows == 3 * ROWS
        # A published file for a version the catalog still holds is ignored in favour of the catalog's.
        storage.write(dlog.commit_file(1), dlog.encode_actions([dlog.commit_info(1, "BOGUS")]))
        assert (await reader.read("main.s.t")).num_rows == 3 * ROWS
        storage.delete(dlog.commit_file(1))
        # And a published file past the catalog's latest version is ignored altogether.
        storage.write(dlog.commit_file(4), dlog.encode_actions([dlog.commit_info(1, "WRITE"), add]))
        assert (await reader.snapshot("main.s.t")).version == 3
        storage.delete(dlog.commit_file(4))
        assert await reader.publish("main.s.t") == 3
    assert storage.list_log()[0] == {0, 1, 2, 3}
    assert await delta.get_commits(table) == (3, {})
    assert (await delta.read(table)).num_rows == 3 * ROWS


async def test_rebase_blind_appends_and_conflicting_changes_fail(ws, delta):
    table = await delta.create_table("main.s.t", SCHEMA)
    await delta.append(table, rows(1, 0))
    stale = await delta.snapshot(table)
    await delta.append(table, rows(2, 0))                      # someone else wins version 2
    append = Transaction(table, stale.version, "WRITE", delta.write_files(stale, rows(3, 0)))
    assert await delta.commit(append, stale) == 3              # a blind append rebases
    now = dlog.now_ms()
    overwrite = Transaction(table, stale.version, "WRITE", delta.write_files(stale, rows(4, 0)),
                            [dlog.remove(a, now) for a in stale.state.files.values()],
                            blind_append=False)
    with pytest.raises(CommitConflict, match="concurrently added data"):
        await delta.commit(overwrite, stale)
    snap = await delta.snapshot(table)
    assert snap.version == 3
    assert sorted(set((await delta.read(table)).column("worker").to_pylist())) == [1, 2, 3]
    # Not stale: the overwrite goes through.
    assert await delta.overwrite(table, rows(5, 0)) == 4
    assert (await delta.read(table)).column("worker").to_pylist() == [5] * ROWS
    # A blind append over a concurrent metadata change does not guess: it fails clearly.
    stale = await delta.snapshot(table)
    await delta.update_metadata(table, properties={"owner.team": "a"})
    late = Transaction(table, stale.version, "WRITE", delta.write_files(stale, rows(6, 0)))
    with pytest.raises(CommitConflict, match="metadata"):
        await delta.commit(late, stale)


async def test_metadata_changes_reach_the_catalog(ws, delta):
    table = await delta.create_table("main.s.t", SCHEMA, comment="first")
    wider = SCHEMA.append(pa.field("score", pa.float64()))
    version = await delta.update_metadata(table, schema=wider, properties={"owner.team": "data"},
                                          description="second")
    status, t = await ws.call("GET", "/tables/main.s.t")
    assert [c["name"] for c in t["columns"]] == ["worker", "seq", "id", "score"]
    assert t["columns"][3]["type_name"] == "DOUBLE"
    assert t["comment"] == "second" and t["properties"]["owner.team"] == "data"
    assert t["properties"]["delta.feature.catalogManaged"] == "supported"
    snap = await delta.snapshot(table)
    assert snap.version == version and snap.schema == wider
    await delta.append(table, pa.table({"worker": [1], "seq": [1], "id": ["x"], "score": [0.5]}, schema=wider))
    assert (await delta.read(table)).column("score").to_pylist() == [0.5]


async def test_unpublished_limit_makes_writers_publish(ws, delta):
    table = await delta.create_table("main.s.t", SCHEMA, properties={"shardcat.delta.maxUnpublishedCommits": "2"})
    async with DeltaCatalogClient(ws.api, ws.token, publish_after_commit=False) as lazy:
        for i in range(5):
            assert await lazy.append(table, rows(1, i)) == i + 1
            latest, unpublished = await lazy.get_commits(table)
            assert len(unpublished) <= 2                       # the catalog refused more; the writer published
    assert Storage(table.location).list_log()[0] >= {0, 1, 2, 3}
    assert (await delta.read(table)).num_rows == 5 * ROWS


async def test_published_table_reads_the_same_in_delta_rs(ws, delta):
    table = await delta.create_table("main.s.t", SCHEMA, catalog_managed_protocol=False)
    async with DeltaCatalogClient(ws.api, ws.token, publish_after_commit=False) as writer:
        for i in range(3):
            await writer.append(table, rows(i % 2, i))
        await writer.overwrite(table, rows(8, 8))               # removes: the log has tombstones too
        assert await writer.publish(table, checkpoint=True) == 4
        await writer.append(table, rows(9, 9))
        await writer.append(table, rows(5, 5))
        assert len((await writer.get_commits(table))[1]) == 2   # ratified, not yet published
        assert await writer.publish(table) == 6
    assert Storage(table.location).exists(dlog.checkpoint_file(4))
    ours = (await delta.read(table)).sort_by("id")
    theirs = DeltaTable(local_path(table.location))
    assert theirs.version() == (await delta.snapshot(table)).version == 6
    assert theirs.to_pyarrow_table().cast(SCHEMA).sort_by("id") == ours
    assert ours.num_rows == 3 * ROWS
    assert sorted(set(ours.column("worker").to_pylist())) == [5, 8, 9]


async def test_delta_rs_refuses_catalog_managed_protocol_without_the_catalog(ws, delta):
    """With `catalogManaged` in the protocol (the default), a filesystem-only reader must not read
    the table behind the catalog's back: delta-rs refuses it, as the Delta protocol asks."""
    table = await delta.create_table("main.s.t", SCHEMA)
    await delta.append(table, rows(1, 0))
    with pytest.raises(Exception, match="(?i)catalog"):
        DeltaTable(local_path(table.location))
    assert (await delta.read(table)).num_rows == ROWS


# ---- partitioned tables -------------------------------------------------------------------

PARTITIONED = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("region", pa.string())])


def events(ids, days, regions) -> pa.Table:
    import datetime
    return pa.table({"id": ids, "day": [None if d is None else datetime.date(2024, 1, d) for d in days],
                     "region": regions}, schema=PARTITIONED)


async def test_partitioned_table_files_values_and_delta_rs(ws, delta):
    """One file per partition, in its Hive-style directory, without the partition columns; the
    log's partition values fill them back in, for this client and for delta-rs alike."""
    import pyarrow.parquet as pq
    table = await delta.create_table("main.s.p", PARTITIONED, partition_columns=["day", "region"],
                                     catalog_managed_protocol=False)
    info = (await ws.call("GET", "/tables/main.s.p"))[1]
    assert {c["name"]: c.get("partition_index") for c in info["columns"]} == {"id": None, "day": 0, "region": 1}
    await delta.append(table, events([1, 2, 3, 4, 5], [1, 1, 2, None, 2], ["EU", "EU", "a:b/c", "EU", ""]))
    snap = await delta.snapshot(table)
    assert snap.state.partition_columns == ["day", "region"]
    files = {a["path"].rsplit("/", 1)[0]: a for a in snap.state.files.values()}
    assert set(files) == {"day=2024-01-01/region=EU", "day=2024-01-02/region=a%3Ab%2Fc",
                          "day=__HIVE_DEFAULT_PARTITION__/region=EU",
                          "day=2024-01-02/region=__HIVE_DEFAULT_PARTITION__"}
    assert files["day=2024-01-01/region=EU"]["partitionValues"] == {"day": "2024-01-01", "region": "EU"}
    assert files["day=__HIVE_DEFAULT_PARTITION__/region=EU"]["partitionValues"] == {"day": None, "region": "EU"}
    storage = Storage(table.location)
    for path in snap.state.files:
        assert pq.read_schema(storage.path(path)).names == ["id"]
    expected = events([1, 2, 3, 4, 5], [1, 1, 2, None, 2], ["EU", "EU", "a:b/c", "EU", None])  # "" is no value
    assert (await delta.read(table)).sort_by("id") == expected

    await delta.overwrite(table, events([6, 7], [3, 3], ["US", "US"]))
    await delta.append(table, events([8], [1], ["EU"]))
    assert await delta.publish(table, checkpoint=True) == 3
    ours = (await delta.read(table)).sort_by("id")
    assert ours == events([6, 7, 8], [3, 3, 1], ["US", "US", "EU"])
    theirs = DeltaTable(local_path(table.location))
    assert theirs.metadata().partition_columns == ["day", "region"]
    assert theirs.to_pyarrow_table().select(PARTITIONED.names).cast(PARTITIONED).sort_by("id") == ours
    assert len(theirs.file_uris(file_pruning_predicate="region = 'US'")) == 1    # delta-rs prunes by the log's values


async def test_partitioning_mistakes_are_refused_before_anything_is_written(ws, delta):
    with pytest.raises(ValueError, match="type double"):
        await delta.create_table("main.s.bad", SCHEMA.append(pa.field("score", pa.float64())),
                                 partition_columns=["score"])
    with pytest.raises(ValueError, match="'nope' is not a column"):
        await delta.create_table("main.s.bad", SCHEMA, partition_columns=["nope"])
    assert (await ws.call("GET", "/tables/main.s.bad"))[0] == 404
    table = await delta.create_table("main.s.p", PARTITIONED, partition_columns=["day"])
    with pytest.raises(ValueError, match="'day' is not a column"):
        await delta.update_metadata(table, schema=pa.schema([("id", pa.int64()), ("region", pa.string())]))
    assert (await delta.snapshot(table)).version == 0
