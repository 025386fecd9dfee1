"""Iceberg manifest rewrite (maintenance/iceberg_jobs.py rewrite_manifests) on real tables through the
catalog: many small manifests over two partition specs become one per spec, a delete manifest DuckDB
wrote is kept, every entry keeps its snapshot id and sequence numbers (now EXISTING), pyiceberg and
DuckDB read the same rows; a concurrent append during the rewrite is never lost (the catalog refuses
the stale commit, the job starts again on the new state) or, out of tries, the job gives up leaving
nothing behind; the manifest count starts a run by itself, recorded in the runs table and the audit."""

from __future__ import annotations

import asyncio
import os

import deltalake
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import BadRequestError, CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from governance_users import grant, user
from shardcat.catalog.features import maintenance as feature
from shardcat.entities.values import now_ms
from shardcat.maintenance import iceberg_jobs, runner

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "item", StringType(), required=False))


@pytest.fixture(autouse=True)
def no_background_ticks(monkeypatch):
    """The tests drive the ticks themselves: the shard's own loop stays asleep."""
    monkeypatch.setattr(feature, "TICK_SECONDS", 1e6)


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "item": [f"i{i % 3}" for i in ids]})


def ice(ws):
    return load_catalog("t", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token)


def spec(ws, **extra) -> dict:
    return {"api_url": ws.api, "token": ws.token, "warehouse": "ice", "identifier": "s.events", **extra}


async def events(ws, appends: int, *, evolve: bool = False):
    """ice.s.events: `appends` one-row appends (a manifest each); with `evolve`, as many more after the
    spec gained an identity partition on `item` (a second spec)."""
    assert (await ws.call("POST", "/catalogs", json={"name": "ice"}))[0] == 200

    def make():
        catalog = ice(ws)
        catalog.create_namespace("s")
        table = catalog.create_table("s.events", SCHEMA)
        for i in range(appends):
            table.append(rows(i))
        if evolve:
            with table.update_spec() as update:
                update.add_identity("item")
            for i in range(appends, 2 * appends):
                table.append(rows(i))
        return table

    return await asyncio.to_thread(make)


def duckdb_rows(ws, sql: str) -> list[tuple]:
    from test_engine_pyiceberg import _duckdb
    con = _duckdb()
    con.execute(f"CREATE SECRET shardcat (TYPE ICEBERG, TOKEN '{ws.token}')")
    con.execute(f"ATTACH 'ice' AS lake (TYPE ICEBERG, ENDPOINT '{ws.api}/iceberg', SECRET shardcat)")
    return con.execute(sql).fetchall()


def state(ws) -> dict:
    """What the current snapshot is: its manifests by content, each entry's identity, the rows."""
    table = ice(ws).load_table("s.events")
    snapshot = table.current_snapshot()
    manifests = snapshot.manifests(table.io)
    entries = {}
    for m in manifests:
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
            entries[e.data_file.file_path] = (int(e.status), e.snapshot_id, e.sequence_number,
                                              e.file_sequence_number, int(e.data_file.content), m.partition_spec_id)
    return {"table": table, "snapshot": snapshot, "entries": entries,
            "data": sorted((m.partition_spec_id, m.manifest_path) for m in manifests if m.content == 0),
            "deletes": sorted(m.manifest_path for m in manifests if m.content == 1),
            "ids": sorted(table.scan().to_arrow()["id"].to_pylist())}


def unreferenced_metadata(table) -> set[str]:
    """Avro files under the table's metadata/ that no metadata file, snapshot or manifest names."""
    root = table.location().removeprefix("file://")
    on_disk = {f"file://{os.path.join(root, 'metadata', n)}" for n in os.listdir(os.path.join(root, "metadata"))
               if n.endswith(".avro")}
    return {p for p in on_disk if p not in iceberg_jobs._referenced(table)}


async def test_many_manifests_become_one_per_spec_and_the_data_stays(ws):
    await events(ws, 4, evolve=True)
    # DuckDB deletes a row through the catalog: a positional delete file in a delete manifest
    await asyncio.to_thread(duckdb_rows, ws, "DELETE FROM lake.s.events WHERE id = 5")
    before = await asyncio.to_thread(state, ws)
    assert len(before["data"]) == 8 and len(before["deletes"]) == 1
    assert {spec for spec, _ in before["data"]} == {0, 1}
    assert 5 not in before["ids"] and len(before["ids"]) == 7
    leftovers = unreferenced_metadata(before["table"])

    out = await runner.run("iceberg.rewrite_manifests", spec(ws))
    assert (out["manifests_before"], out["manifests_after"], out["rewritten"]) == (9, 3, 8)
    assert (out["files_before"], out["files_after"], out["commit_attempts"], out["attempt"]) == (9, 3, 1, 1)

    after = await asyncio.to_thread(state, ws)
    assert [spec for spec, _ in after["data"]] == [0, 1]                    # one data manifest per spec
    assert after["deletes"] == before["deletes"]                            # the delete manifest as it was
    assert after["snapshot"].summary.operation.value == "replace"
    assert after["snapshot"].parent_snapshot_id == before["snapshot"].snapshot_id
    totals = {k: v for k, v in before["snapshot"].summary.additional_properties.items() if k.startswith("total-")}
    assert totals and all(after["snapshot"].summary[k] == v for k, v in totals.items())
    # every live entry still there, EXISTING, with the snapshot that added it and its sequence numbers
    assert after["entries"].keys() == before["entries"].keys()
    for path, (status, snapshot_id, seq, file_seq, content, spec_id) in after["entries"].items():
        was = before["entries"][path]
        assert (snapshot_id, seq, file_seq, content, spec_id) == was[1:], path
        assert status == (0 if content == 0 else was[0]), path             # data entries EXISTING (0)
    assert after["ids"] == before["ids"]
    assert await asyncio.to_thread(duckdb_rows, ws, "SELECT id FROM lake.s.events ORDER BY id") == \
        [(i,) for i in before["ids"]]
    # the snapshot before the rewrite still reads the same rows
    old = await asyncio.to_thread(lambda: sorted(after["table"].scan(snapshot_id=before["snapshot"].snapshot_id)
                                                 .to_arrow()["id"].to_pylist()))
    assert old == before["ids"]
    assert unreferenced_metadata(after["table"]) == leftovers              # nothing written but what is used

    again = await runner.run("iceberg.rewrite_manifests", spec(ws))       # nothing left worth rewriting
    assert (again["manifests_before"], again["manifests_after"], again["rewritten"]) == (3, 3, 0)
    assert (await asyncio.to_thread(state, ws))["snapshot"].snapshot_id == after["snapshot"].snapshot_id


async def test_the_target_size_decides(ws):
    await events(ws, 6)
    before = (await asyncio.to_thread(state, ws))["snapshot"].snapshot_id
    # each one-entry manifest is already past 1 KiB (its header alone): none is worth rewriting
    out = await runner.run("iceberg.rewrite_manifests", spec(ws, target_bytes=1024))
    assert (out["manifests_before"], out["manifests_after"], out["rewritten"]) == (6, 6, 0)
    assert (await asyncio.to_thread(state, ws))["snapshot"].snapshot_id == before       # no commit
    out = await runner.run("iceberg.rewrite_manifests", spec(ws))
    assert (out["manifests_before"], out["manifests_after"], out["rewritten"]) == (6, 1, 6)


def appending_once(monkeypatch, ws, loads: list):
    """The job's first load of the table is followed by a writer's append (before the job commits)."""
    original = iceberg_jobs._table

    def load_then_append(*args):
        table = original(*args)
        if not loads:
            ice(ws).load_table("s.events").append(rows(99))
        loads.append(table.current_snapshot().snapshot_id)
        return table

    monkeypatch.setattr(iceberg_jobs, "_table", load_then_append)


async def test_a_concurrent_append_is_kept_and_the_rewrite_redone(ws, monkeypatch):
    table = await events(ws, 5)
    leftovers = unreferenced_metadata(table)
    loads = []
    appending_once(monkeypatch, ws, loads)
    out = await asyncio.to_thread(iceberg_jobs.rewrite_manifests, **spec(ws))
    assert out["commit_attempts"] == 2 and len(loads) == 2 and loads[0] != loads[1]   # refused, redone on the new state
    assert (out["manifests_before"], out["manifests_after"]) == (6, 1)                  # the append's manifest too
    after = await asyncio.to_thread(state, ws)
    assert after["ids"] == [0, 1, 2, 3, 4, 99]
    assert after["snapshot"].parent_snapshot_id == loads[1]
    assert unreferenced_metadata(after["table"]) == leftovers             # the refused attempt's files deleted


async def test_out_of_tries_it_gives_up_and_leaves_nothing(ws, monkeypatch):
    table = await events(ws, 3)
    leftovers = unreferenced_metadata(table)
    loads = []
    appending_once(monkeypatch, ws, loads)
    with pytest.raises(CommitFailedException):
        await asyncio.to_thread(iceberg_jobs.rewrite_manifests, **spec(ws, attempts=1))
    after = await asyncio.to_thread(state, ws)
    assert after["ids"] == [0, 1, 2, 99] and after["snapshot"].summary.operation.value == "append"
    assert len(after["data"]) == 4                                        # the writer's commit, untouched
    assert unreferenced_metadata(after["table"]) == leftovers


def service(server) -> feature.Maintenance:
    [found] = [m for m in feature._SERVICES.values() if m.api_url == server.url]
    return found


async def test_the_manifest_count_starts_a_run_recorded_everywhere(ws, server):
    await events(ws, 5)
    assert (await ws.call("POST", "/shardcat/system-tables"))[0] == 200
    status, body = await ws.call("PUT", "/shardcat/maintenance/policies", json={
        "securable_type": "TABLE", "full_name": "ice.s.events",
        "policy": {"enabled": True, "rewrite_manifests_min_count": 5, "manifest_target_bytes": 65536}})
    assert status == 200 and body["policy"]["rewrite_manifests_min_count"] == "5", body
    for bad in ({"rewrite_manifests_min_count": 1}, {"manifest_target_bytes": "huge"}):
        status, body = await ws.call("PUT", "/shardcat/maintenance/policies", json={
            "securable_type": "TABLE", "full_name": "ice.s.events", "policy": bad})
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", body
    maintenance = service(server)
    table_id = (await ws.call("GET", "/tables/ice.s.events"))[1]["table_id"]
    now = now_ms()
    maintenance.last_run[table_id] = now                  # the schedule is not due: the signal alone decides
    runs = await maintenance.tick(ws.metastore_id, now=now + 1000)
    assert [(r["table_name"], r["action"], r["trigger"], r["status"]) for r in runs] == [
        ("ice.s.events", "rewrite_manifests", "rewrite_manifests", "SUCCEEDED")], runs
    assert (runs[0]["files_before"], runs[0]["files_after"]) == (5, 1)
    assert (await asyncio.to_thread(state, ws))["ids"] == [0, 1, 2, 3, 4]
    assert await maintenance.tick(ws.metastore_id, now=now + 2000) == []        # one manifest now: quiet

    status, runs_table = await ws.call("GET", "/tables/system.maintenance.runs")
    recorded = deltalake.DeltaTable(runs_table["storage_location"]).to_pyarrow_table().to_pylist()
    assert [(r["table_name"], r["action"], r["status"], r["files_before"], r["files_after"]) for r in recorded] == [
        ("ice.s.events", "rewrite_manifests", "SUCCEEDED", 5, 1)]
    for _ in range(150):        # the audit log is written in the background: a loaded machine takes a while
        status, audit = await ws.call("GET", "/shardcat/audit", params={"action": "maintenanceRun",
                                                                        "principal": "System maintenance"})
        mine = [e for e in audit.get("events", []) if e.get("metastore_id") == ws.metastore_id]
        if mine:
            break
        await asyncio.sleep(0.2)
    assert [(e["securable_full_name"], e["allowed"]) for e in mine] == [("ice.s.events", True)]


async def test_who_may_run_it(ws, server):
    await events(ws, 2)
    before = (await asyncio.to_thread(state, ws))["snapshot"].snapshot_id
    reader = await user(server, ws)
    await grant(ws, "catalog", "ice", reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    for name in ("ice.s.events", "ICE.S.EVENTS"):
        status, body = await reader.call("POST", "/shardcat/maintenance/runs",
                                         json={"table": name, "actions": ["rewrite_manifests"]})
        assert status == 403, body                    # SELECT is not MODIFY
    stranger = await user(server, ws)
    status, body = await stranger.call("POST", "/shardcat/maintenance/runs",
                                       json={"table": "ice.s.events", "actions": ["rewrite_manifests"]})
    assert status == 404, body                        # what it may not see answers as missing
    status, body = await ws.call("POST", "/catalogs", json={"name": "d"})
    await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "d"})
    status, body = await ws.call("POST", "/tables", json={
        "name": "t", "catalog_name": "d", "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
        "columns": [{"name": "id", "type_name": "LONG"}]})
    status, body = await ws.call("POST", "/shardcat/maintenance/runs", json={"table": "d.s.t",
                                                                            "actions": ["rewrite_manifests"]})
    assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", body    # an Iceberg job on Delta
    await asyncio.sleep(0.5)
    assert (await asyncio.to_thread(state, ws))["snapshot"].snapshot_id == before      # nothing ran


# ---- attacks: a writer's metadata steering the job ----------------------------------------------


async def attacker_table(ws, server):
    """ice.s.events (the victim, the admin's) and ice.s.mine, made and appended to by a user who may create
    tables in ice.s and holds nothing on events."""
    await events(ws, 2)
    attacker = await user(server, ws)
    await grant(ws, "catalog", "ice", attacker.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")

    def make():
        catalog = load_catalog("a", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=attacker.token)
        mine = catalog.create_table("s.mine", SCHEMA)
        mine.append(rows(1))
        mine.append(rows(2))
        return catalog.load_table("s.mine")

    return attacker, await asyncio.to_thread(make)


async def test_a_snapshot_naming_another_tables_manifest_is_not_rewritten(ws, server):
    from pyiceberg.manifest import write_manifest_list
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

    attacker, mine = await attacker_table(ws, server)

    def craft():
        """The attacker's commit: a manifest list in its own table naming the victim's manifests (paths on
        file:// storage are there to be listed)."""
        victim = ice(ws).load_table("s.events")
        theirs = victim.current_snapshot().manifests(victim.io)
        current = mine.current_snapshot()
        snapshot_id, sequence = mine.metadata.new_snapshot_id(), mine.metadata.next_sequence_number()
        path = f"{mine.location()}/metadata/snap-{snapshot_id}-crafted.avro"
        with write_manifest_list(format_version=2, output_file=mine.io.new_output(path), snapshot_id=snapshot_id,
                                 parent_snapshot_id=current.snapshot_id, sequence_number=sequence,
                                 avro_compression="gzip") as writer:
            writer.add_manifests(current.manifests(mine.io) + theirs)
        snapshot = Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=current.snapshot_id, sequence_number=sequence,
                            manifest_list=path, summary=Summary(Operation.APPEND),
                            schema_id=mine.metadata.current_schema_id)
        mine.catalog.commit_table(mine, (AssertRefSnapshotId(ref="main", snapshot_id=current.snapshot_id),),
                                  (AddSnapshotUpdate(snapshot=snapshot),
                                   SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH,
                                                        snapshot_id=snapshot_id)))
        return snapshot_id

    crafted = await asyncio.to_thread(craft)
    victim_dir = (await asyncio.to_thread(state, ws))["table"].location().removeprefix("file://")
    victim_files = sorted(os.listdir(os.path.join(victim_dir, "metadata")))
    with pytest.raises(runner.JobFailed, match="outside"):
        await runner.run("iceberg.rewrite_manifests", spec(ws, identifier="s.mine"), attempts=1)
    after = await asyncio.to_thread(lambda: ice(ws).load_table("s.mine"))
    assert after.current_snapshot().snapshot_id == crafted                 # nothing committed
    assert sorted(os.listdir(os.path.join(victim_dir, "metadata"))) == victim_files
    assert unreferenced_metadata(after) == set()                           # nothing of the job left behind


async def test_the_job_writes_only_under_the_tables_own_metadata(ws, server, tmp_path):
    attacker, mine = await attacker_table(ws, server)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def steer():
        with mine.transaction() as txn:        # pyiceberg's writers would put new metadata files there
            txn.set_properties({"write.metadata.path": f"file://{elsewhere}"})

    with pytest.raises(BadRequestError, match="must lie inside its location"):    # the catalog refuses it first
        await asyncio.to_thread(steer)
    out = await runner.run("iceberg.rewrite_manifests", spec(ws, identifier="s.mine"))
    assert (out["manifests_before"], out["manifests_after"]) == (2, 1)
    assert list(elsewhere.iterdir()) == []
    after = await asyncio.to_thread(lambda: ice(ws).load_table("s.mine"))
    root = after.location()
    assert after.current_snapshot().manifest_list.startswith(f"{root}/metadata/")
    assert all(m.manifest_path.startswith(f"{root}/metadata/") for m in after.current_snapshot().manifests(after.io))
    assert sorted(after.scan().to_arrow()["id"].to_pylist()) == [1, 2]
