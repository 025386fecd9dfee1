"""UniForm: Delta tables written by delta-rs and by shardcat's Delta client (catalog-managed), read as Iceberg
tables through shardcat's Iceberg REST catalog by pyiceberg and DuckDB's iceberg extension: the same rows as
Delta at every version (one Iceberg snapshot per Delta version), served read-only (commits, drops and
renames through Iceberg refused), governed as native Iceberg tables (no SELECT: the same refusals; a row
filter: untrusted engines get nothing), and a Delta log naming another table's files never served.

pyiceberg is synchronous and the server shares this test's event loop, so its calls run in threads.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import deltalake
import pyarrow as pa
import pytest
from governance_users import grant, user
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import BadRequestError, ForbiddenError, NoSuchTableError

from shardcat.delta.client import DeltaCatalogClient
from shardcat.entities.urls import local_path
from test_engine_pyiceberg import _duckdb
from test_row_filters import _world

UNIFORM = {"delta.universalFormat.enabledFormats": "iceberg"}
COLUMNS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}', "position": 0},
           {"name": "day", "type_name": "STRING", "type_text": "string", "type_json": '{"type":"string"}',
            "position": 1}]


async def run(fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


def iceberg(ws, token: str | None = None, warehouse: str = "main"):
    return load_catalog("shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse=warehouse,
                        token=token or ws.token)


async def delta_table(ws, name: str, properties: dict | None = UNIFORM, catalog: str = "main") -> dict:
    """A MANAGED DELTA table registered in the catalog (delta-rs then writes at its location)."""
    status, table = await ws.call("POST", "/tables", json={
        "name": name, "catalog_name": catalog, "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLUMNS, "properties": properties or {}})
    assert status == 200, table
    return table


@pytest.fixture
async def main(ws):
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"})):
        status, made = await ws.call("POST", path, json=body)
        assert status == 200, made


async def client_snapshot(ws, name: str):
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        return await client.snapshot(name)


def rows(ids, days):
    return pa.table({"id": pa.array(ids, pa.int64()), "day": pa.array(days, pa.string())})


def ordered(table: pa.Table) -> list[tuple]:
    return sorted(zip(table["id"].to_pylist(), table["day"].to_pylist()))


async def test_delta_rs_table_read_by_pyiceberg_and_duckdb_at_every_version(ws, main):
    table = await delta_table(ws, "events")
    location = table["storage_location"]
    deltalake.write_deltalake(location, rows([1, 2], ["a", "b"]), partition_by=["day"])
    deltalake.write_deltalake(location, rows([3], ["a"]), mode="append", partition_by=["day"])
    deltalake.write_deltalake(location, rows([7], ["c"]), mode="overwrite", partition_by=["day"])
    ice = await run(iceberg, ws)

    assert ("s", "events") in await run(ice.list_tables, "s")
    loaded = await run(ice.load_table, "s.events")
    assert loaded.metadata_location.startswith(location + "/metadata/")      # beside the log, as UniForm puts it
    assert ordered(await run(lambda: loaded.scan().to_arrow())) == [(7, "c")]
    by_version = {int(s.summary["delta-version"]): s.snapshot_id for s in loaded.snapshots()}
    assert sorted(by_version) == [0, 1, 2]
    for version in (0, 1, 2):       # each Iceberg snapshot is that Delta version's data
        delta = deltalake.DeltaTable(location, version=version).to_pyarrow_table()
        at = await run(lambda: loaded.scan(snapshot_id=by_version[version]).to_arrow())
        assert ordered(at) == ordered(delta.select(["id", "day"]))

    deltalake.write_deltalake(location, rows([8, 9], ["c", "d"]), mode="append", partition_by=["day"])
    again = await run(ice.load_table, "s.events")             # the next load converts version 3 only
    assert [s.summary["delta-version"] for s in again.snapshots()] == ["0", "1", "2", "3"]
    assert ordered(await run(lambda: again.scan().to_arrow())) == [(7, "c"), (8, "c"), (9, "d")]
    status, row = await ws.call("GET", "/tables/main.s.events")
    assert row["uniform"]["iceberg"]["converted_delta_version"] == 3
    assert row["uniform"]["iceberg"]["metadata_location"] == again.metadata_location

    def duck():
        con = _duckdb()
        con.execute(f"CREATE SECRET shardcat (TYPE ICEBERG, TOKEN '{ws.token}')")
        con.execute(f"ATTACH 'main' AS lake (TYPE ICEBERG, ENDPOINT '{ws.api}/iceberg', SECRET shardcat)")
        return con.execute("SELECT id, day FROM lake.s.events ORDER BY id").fetchall()

    assert await run(duck) == [(7, "c"), (8, "c"), (9, "d")]


async def test_read_only_through_iceberg(ws, main):
    table = await delta_table(ws, "events")
    deltalake.write_deltalake(table["storage_location"], rows([1], ["a"]))
    ice = await run(iceberg, ws)
    loaded = await run(ice.load_table, "s.events")
    with pytest.raises(ForbiddenError, match="read-only"):
        await run(loaded.append, rows([2], ["b"]))
    with pytest.raises(ForbiddenError, match="read-only"):
        await run(ice.drop_table, "s.events")
    with pytest.raises(ForbiddenError, match="read-only"):
        await run(ice.rename_table, "s.events", "s.renamed")
    status, body = await ws.call("POST", "/iceberg/v1/catalogs/main/namespaces/s/tables/events", json={
        "requirements": [], "updates": [{"action": "set-properties", "updates": {"x": "y"}}]})
    assert status == 403 and body["error"]["type"] == "ForbiddenException", body
    assert deltalake.DeltaTable(table["storage_location"]).version() == 0          # nothing written
    assert ordered(await run(lambda: (ice.load_table("s.events")).scan().to_arrow())) == [(1, "a")]


async def test_plain_delta_tables_stay_invisible_to_iceberg(ws, main):
    table = await delta_table(ws, "plain", properties=None)
    deltalake.write_deltalake(table["storage_location"], rows([1], ["a"]))
    ice = await run(iceberg, ws)
    assert ("s", "plain") not in await run(ice.list_tables, "s")
    with pytest.raises(NoSuchTableError):
        await run(ice.load_table, "s.plain")
    # Altered to UniForm (PATCH properties), it is served.
    status, body = await ws.call("PATCH", "/tables/main.s.plain", json={"properties": UNIFORM})
    assert status == 200, body
    assert ordered(await run(lambda: ice.load_table("s.plain").scan().to_arrow())) == [(1, "a")]


async def test_catalog_managed_table_with_an_unpublished_commit(ws, main):
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        t = await client.create_table("main.s.orders", pa.schema([("id", pa.int64()), ("day", pa.string())]),
                                      properties=UNIFORM)
        await client.append(t, rows([1, 2], ["a", "b"]))
        client.publish_after_commit = False
        await client.append(t, rows([3], ["c"]))          # version 2: ratified, held by the catalog only
        expected = ordered(await client.read("main.s.orders"))
    ice = await run(iceberg, ws)
    loaded = await run(ice.load_table, "s.orders")
    assert ordered(await run(lambda: loaded.scan().to_arrow())) == expected == [(1, "a"), (2, "b"), (3, "c")]
    assert loaded.current_snapshot().summary["delta-version"] == "2"


async def test_a_commit_reporting_its_own_uniform_metadata_is_accepted_and_not_served(ws, main):
    """A Delta writer with UniForm reports the Iceberg metadata it wrote (`uniform` in add-commit); the
    catalog accepts the commit, ignores the report and serves the metadata it writes itself."""
    other = await delta_table(ws, "other")
    deltalake.write_deltalake(other["storage_location"], rows([666], ["x"]))
    elsewhere = (await run(lambda: iceberg(ws).load_table("s.other"))).metadata_location
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        t = await client.create_table("main.s.orders", pa.schema([("id", pa.int64()), ("day", pa.string())]),
                                      properties=UNIFORM)
        await client.append(t, rows([1], ["a"]))
    snap = await client_snapshot(ws, "main.s.orders")
    content = json.dumps({"commitInfo": {"inCommitTimestamp": snap.state.ict + 1, "timestamp": snap.state.ict + 1}})
    status, body = await ws.call("POST", "/delta/preview/commits", json={
        "table_id": t.table_id, "table_uri": t.location,
        "commit_info": {"version": 2, "timestamp": snap.state.ict + 1, "file_name": f"{2:020d}.{uuid.uuid4()}.json",
                        "file_size": len(content), "file_modification_timestamp": snap.state.ict + 1,
                        "inline_content": content},
        "uniform": {"iceberg": {"metadata_location": elsewhere, "converted_delta_version": 2}}})
    assert status == 200, body
    served = await run(lambda: iceberg(ws).load_table("s.orders"))
    assert served.metadata_location != elsewhere and served.metadata_location.startswith(t.location + "/metadata/")
    assert ordered(await run(lambda: served.scan().to_arrow())) == [(1, "a")]


async def test_governed_as_a_native_iceberg_table(ws, server, main):
    table = await delta_table(ws, "events")
    deltalake.write_deltalake(table["storage_location"], rows([1], ["a"]))
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG", "USE SCHEMA")
    theirs = await run(iceberg, ws, reader.token)
    with pytest.raises(NoSuchTableError):                # no privilege on it: answers as a missing one
        await run(theirs.load_table, "s.events")
    assert ("s", "events") not in await run(theirs.list_tables, "s")
    await grant(ws, "table", "main.s.events", reader.name, "MODIFY")
    with pytest.raises(ForbiddenError, match="SELECT"):    # seen, but no SELECT
        await run(theirs.load_table, "s.events")
    await grant(ws, "table", "main.s.events", reader.name, "SELECT")
    assert ordered(await run(lambda: theirs.load_table("s.events").scan().to_arrow())) == [(1, "a")]


async def test_row_filter_tables_are_for_trusted_engines_only(ws, server):
    c, _ = await _world(ws)
    status, table = await ws.call("PATCH", f"/tables/{c}.s.people", json={"properties": UNIFORM})
    assert status == 200, table
    deltalake.write_deltalake(table["storage_location"], pa.table({"region": ["EU", "US"], "ssn": ["1", "2"]}))
    with pytest.raises(ForbiddenError, match="trusted engine"):
        await run(lambda: iceberg(ws, warehouse=c).load_table("s.people"))      # ws's admin: an untrusted engine
    engine = await user(server, ws, trusted=True, admin=True)
    loaded = await run(lambda: iceberg(ws, engine.token, warehouse=c).load_table("s.people"))
    assert loaded.scan().to_arrow().num_rows == 2


@pytest.mark.parametrize("spelling", ["absolute", "dotdot"])
async def test_a_log_naming_another_tables_file_is_not_served(ws, main, spelling):
    victim = await delta_table(ws, "victim", properties=None)
    deltalake.write_deltalake(victim["storage_location"], rows([42], ["secret"]))
    [secret] = deltalake.DeltaTable(victim["storage_location"]).file_uris()
    table = await delta_table(ws, "events")
    deltalake.write_deltalake(table["storage_location"], rows([1], ["a"]))
    # A writer of `events` (MODIFY) adds the victim's file to its own log.
    root = local_path(table["storage_location"])
    path = secret if spelling == "absolute" else "../" + os.path.relpath(local_path(secret), os.path.dirname(root))
    add = {"add": {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True,
                   "stats": json.dumps({"numRecords": 1})}}
    with open(os.path.join(root, "_delta_log", f"{1:020d}.json"), "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps(add) + "\n")
    ice = await run(iceberg, ws)
    with pytest.raises(BadRequestError, match="outside the table"):
        await run(ice.load_table, "s.events")
    status, row = await ws.call("GET", "/tables/main.s.events")
    assert "uniform" not in row                            # nothing recorded, nothing served
