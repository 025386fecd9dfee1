"""Maintenance jobs (shardcat/maintenance/) as Ray tasks on real tables through the catalog: Delta
bin-packing (catalog-managed, through the catalog's commits; plain, by delta-rs), checkpoint, vacuum;
Iceberg compaction, snapshot expiry, orphan files. File counts before and after, the data identical,
and a concurrent writer's commit never lost (a compaction rebased over an append, refused after a
concurrent removal of what it packs, an Iceberg compaction failing after a concurrent append)."""

from __future__ import annotations

import asyncio
import os
import time

import deltalake
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from shardcat.delta import log as dlog
from shardcat.delta.client import CommitConflict, DeltaCatalogClient
from shardcat.maintenance import delta_jobs, iceberg_jobs, runner

SCHEMA = pa.schema([("id", pa.int64()), ("item", pa.string())])
ICE_SCHEMA = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "item", StringType(), required=False))


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "item": [f"i{i}" for i in ids]})


def sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


async def managed_table(ws, name: str, appends: int) -> DeltaCatalogClient:
    """main.s.<name>, catalog-managed, `appends` commits of one row each (one small file each)."""
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"})):
        status, out = await ws.call("POST", path, json=body)
        assert status == 200 or out.get("error_code") == "ALREADY_EXISTS", out
    client = DeltaCatalogClient(ws.api, ws.token)
    table = await client.create_table(f"main.s.{name}", SCHEMA)
    for i in range(appends):
        await client.append(table, rows(i))
    return client


def spec(ws, name: str, location: str, **extra) -> dict:
    return {"api_url": ws.api, "token": ws.token, "full_name": f"main.s.{name}", "location": location,
            "catalog_managed": True, **extra}


async def test_delta_compaction_checkpoint_and_vacuum_as_ray_tasks(ws):
    client = await managed_table(ws, "small", 12)
    async with client:
        before = await client.snapshot("main.s.small")
        data_before = sorted_rows(await client.read("main.s.small"))
        location = before.table.location
        assert len(before.state.files) == 12

        packed = await runner.run("delta.compact", spec(ws, "small", location))
        assert (packed["files_before"], packed["files_after"], packed["packed"]) == (12, 1, 12)
        assert packed["node"] and packed["attempt"] == 1
        after = await client.snapshot("main.s.small")
        assert len(after.state.files) == 1 and after.version == before.version + 1
        assert sorted_rows(await client.read("main.s.small")) == data_before
        optimize = dlog.decode_actions(dlog.Storage(location).read(dlog.commit_file(after.version)))
        assert {a["add"]["dataChange"] for a in optimize if "add" in a} == {False}

        checkpointed = await runner.run("delta.checkpoint", spec(ws, "small", location))
        assert checkpointed["checkpoints"] == 1 and checkpointed["version"] == after.version
        assert sorted_rows(await client.read("main.s.small")) == data_before

        # the 12 packed files are still on disk until a vacuum past the retention deletes them
        assert delta_jobs.data_files_on_disk(location) == 13
        kept = await runner.run("delta.vacuum", {"location": location, "keep": [],
                                                 "older_than_ms": dlog.now_ms() - 3600_000})
        assert kept["deleted"] == 0 and kept["files_after"] == 13       # removed within the retention: kept
        vacuumed = await runner.run("delta.vacuum", {"location": location, "keep": [],
                                                     "older_than_ms": dlog.now_ms() + 1000})
        assert (vacuumed["deleted"], vacuumed["files_before"], vacuumed["files_after"]) == (12, 13, 1)
        assert sorted_rows(await client.read("main.s.small")) == data_before


async def test_a_compaction_rebases_over_a_concurrent_append(ws, monkeypatch):
    client = await managed_table(ws, "raced", 5)
    async with client, DeltaCatalogClient(ws.api, ws.token) as writer:
        original = DeltaCatalogClient.ratify
        raced = []

        async def ratify_after_a_writer(self, staged):
            if staged.txn.operation == "OPTIMIZE" and not raced:
                raced.append(await writer.append("main.s.raced", rows(100)))    # wins the version first
            return await original(self, staged)

        monkeypatch.setattr(DeltaCatalogClient, "ratify", ratify_after_a_writer)
        location = (await client.snapshot("main.s.raced")).table.location
        out = await asyncio.to_thread(delta_jobs.compact, **spec(ws, "raced", location))
        assert raced and out["version"] == raced[0] + 1          # rebased on top of the writer's commit
        assert out["files_after"] == 2                           # the packed file and the writer's
        assert [r["id"] for r in sorted_rows(await client.read("main.s.raced"))] == [0, 1, 2, 3, 4, 100]


async def test_a_compaction_that_conflicts_changes_nothing(ws, monkeypatch):
    client = await managed_table(ws, "conflict", 4)
    async with client, DeltaCatalogClient(ws.api, ws.token) as writer:
        original = DeltaCatalogClient.ratify
        done = []

        async def ratify_after_an_overwrite(self, staged):
            if staged.txn.operation == "OPTIMIZE" and not done:
                done.append(await writer.overwrite("main.s.conflict", rows(7)))   # removes what is packed
            return await original(self, staged)

        monkeypatch.setattr(DeltaCatalogClient, "ratify", ratify_after_an_overwrite)
        location = (await client.snapshot("main.s.conflict")).table.location
        on_disk = delta_jobs.data_files_on_disk(location)
        with pytest.raises(CommitConflict):
            await asyncio.to_thread(delta_jobs.compact, **spec(ws, "conflict", location))
        assert [r["id"] for r in sorted_rows(await client.read("main.s.conflict"))] == [7]    # the writer's stands
        assert delta_jobs.data_files_on_disk(location) == on_disk + 1    # its file; the packed one was removed


async def test_a_plain_delta_table_is_packed_by_delta_rs(ws, tmp_path):
    location = str(tmp_path / "plain")
    for i in range(8):
        deltalake.write_deltalake(location, rows(i), mode="append")
    out = await runner.run("delta.compact", {"api_url": ws.api, "token": ws.token, "full_name": "x.y.z",
                                             "location": location, "catalog_managed": False})
    assert (out["files_before"], out["files_after"]) == (8, 1)
    assert [r["id"] for r in sorted_rows(deltalake.DeltaTable(location).to_pyarrow_table())] == list(range(8))
    checkpointed = await runner.run("delta.checkpoint", {"api_url": ws.api, "token": ws.token, "full_name": "x.y.z",
                                                         "location": location, "catalog_managed": False})
    assert checkpointed["checkpoints"] == 1


async def test_a_failing_job_is_retried_then_reported(ws):
    with pytest.raises(runner.JobFailed) as e:
        await runner.run("delta.vacuum", {"location": "file:///nonexistent/table", "keep": [], "older_than_ms": 0},
                         attempts=2, backoff=0.01)
    assert e.value.attempts == 2 and "NoDeltaLog" in str(e.value)


# ---- Iceberg ------------------------------------------------------------------------------


def ice_catalog(ws):
    return load_catalog("t", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token)


def ice_spec(ws, **extra) -> dict:
    return {"api_url": ws.api, "token": ws.token, "warehouse": "ice", "identifier": "s.events", **extra}


@pytest.fixture
async def events(ws):
    assert (await ws.call("POST", "/catalogs", json={"name": "ice"}))[0] == 200

    def make():
        catalog = ice_catalog(ws)
        catalog.create_namespace("s")
        table = catalog.create_table("s.events", ICE_SCHEMA)
        for i in range(6):
            table.append(rows(i))
        return table

    return await asyncio.to_thread(make)


async def test_iceberg_compaction_expiry_and_orphans(ws, events):
    def state():
        table = ice_catalog(ws).load_table("s.events")
        return table, sorted_rows(table.scan().to_arrow()), len(table.inspect.files()), len(table.snapshots())

    table, data, files, snapshots = await asyncio.to_thread(state)
    assert (files, snapshots) == (6, 6)
    packed = await runner.run("iceberg.compact", ice_spec(ws))
    assert (packed["files_before"], packed["files_after"]) == (6, 1)
    _, data_after, files, snapshots = await asyncio.to_thread(state)
    assert data_after == data and files == 1

    expired = await runner.run("iceberg.expire_snapshots", ice_spec(ws, older_than_ms=int(time.time() * 1000) + 1000))
    assert expired["snapshots_before"] > 1 and expired["snapshots_after"] == 1      # the current one stays
    assert (await asyncio.to_thread(state))[1] == data

    # a stray file (old) under data/ is an orphan; the live data file (old too) is not
    root = table.location().removeprefix("file://")
    stray = os.path.join(root, "data", "stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"not referenced")
    old = time.time() - 10 * 24 * 3600
    for dirpath, _, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(dirpath, n), (old, old))
    cleaned = await runner.run("iceberg.remove_orphan_files", ice_spec(ws, older_than_ms=int(time.time() * 1000) - 3600_000))
    assert not os.path.exists(stray) and cleaned["deleted"] >= 1
    assert (await asyncio.to_thread(state))[1] == data           # everything the table reaches is still there


async def test_an_iceberg_compaction_never_loses_a_concurrent_append(ws, events, monkeypatch):
    original = iceberg_jobs._table
    calls = []

    def load_then_append(*args):
        table = original(*args)
        if not calls:       # the compaction has read its snapshot; a writer appends before it commits
            ice_catalog(ws).load_table("s.events").append(rows(99))
        calls.append(1)
        return table

    monkeypatch.setattr(iceberg_jobs, "_table", load_then_append)
    # the catalog refuses the stale commit; pyiceberg retries it on the new state, where its own
    # validation finds the added file: either way the compaction fails and the append stays
    with pytest.raises((CommitFailedException, ValidationException)):
        await asyncio.to_thread(iceberg_jobs.compact, **ice_spec(ws))
    ids = await asyncio.to_thread(lambda: sorted(ice_catalog(ws).load_table("s.events").scan().to_arrow()["id"].to_pylist()))
    assert ids == [0, 1, 2, 3, 4, 5, 99]
