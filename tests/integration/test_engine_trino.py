"""Trino (the published server, jvm/trino) on shardcat: its Iceberg connector on shardcat's Iceberg REST
catalog (create, insert, select, time travel; tables written by pyiceberg read by Trino and back), the
grants of the token in Trino's catalog deciding what Trino's users read, and its Delta Lake connector,
which cannot reach a Unity catalog (its metastores are Thrift, Glue and Trino's own files) and so
reads a shardcat table's files ungoverned, once registered by path.

One Trino per module (a large server: marker `trino`). Each test makes its own Trino catalog with
`CREATE CATALOG`, configured with the token of the shardcat caller it tests. Trino's client is
synchronous and shardcat shares this test's event loop, so every query runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
import trino
from engine_tables import engine_tables
from governance_users import grant, user
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from trino.exceptions import TrinoQueryError
from trino_server import Trino

pytestmark = pytest.mark.trino

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


@pytest.fixture(scope="module")
def trino_server(tmp_path_factory):
    server = Trino(tmp_path_factory.mktemp("trino"))
    yield server
    server.stop()


class Sql:
    """Queries through Trino's Python client, each in a worker thread."""

    def __init__(self, server: Trino):
        self.server = server

    def _run(self, statement: str) -> list:
        connection = trino.dbapi.connect(host=self.server.host, port=self.server.port, user="trino_user")
        try:
            cursor = connection.cursor()
            cursor.execute(statement)
            return cursor.fetchall()
        finally:
            connection.close()

    async def __call__(self, statement: str) -> list:
        return await asyncio.to_thread(self._run, statement)

    async def iceberg_catalog(self, ws, warehouse: str) -> str:
        """A Trino catalog on shardcat's Iceberg REST catalog `warehouse`, as `ws`'s caller (its token)."""
        name = f"ice_{uuid.uuid4().hex[:8]}"
        await self(f"""CREATE CATALOG {name} USING iceberg WITH (
            "iceberg.catalog.type" = 'rest',
            "iceberg.rest-catalog.uri" = '{ws.api}/iceberg',
            "iceberg.rest-catalog.warehouse" = '{warehouse}',
            "iceberg.rest-catalog.security" = 'OAUTH2',
            "iceberg.rest-catalog.oauth2.token" = '{ws.token}',
            "fs.native-local.enabled" = 'true',
            "local.location" = '/')""")
        return name


@pytest.fixture
def sql(trino_server) -> Sql:
    return Sql(trino_server)


def pyiceberg(ws, warehouse: str):
    return load_catalog("shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse=warehouse, token=ws.token)


async def run(fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


async def new_warehouse(ws, name: str = "lake") -> None:
    status, body = await ws.call("POST", "/catalogs", json={"name": name})
    assert status == 200, body


# ---- Iceberg connector on the Iceberg REST catalog --------------------------------------------------


async def test_create_insert_select_time_travel(ws, sql, tmp_path: Path):
    await new_warehouse(ws)
    lake = await sql.iceberg_catalog(ws, "lake")
    await sql(f"CREATE SCHEMA {lake}.s")
    # Trino 476 creates a table whose location it does not name with a plain createTable, then refuses
    # the location because it is not empty: the catalog wrote the table's first metadata file there (as
    # the REST spec has it). The created table stays, empty. Later Trino releases stage the create.
    with pytest.raises(TrinoQueryError, match="Cannot create a table on a non-empty location"):
        await sql(f"CREATE TABLE {lake}.s.managed (id bigint)")
    await sql(f"DROP TABLE {lake}.s.managed")
    # Naming the location, Trino stages the create and commits it with its first write: an EXTERNAL table.
    location = f"file://{tmp_path}/external/t"
    await sql(f"CREATE TABLE {lake}.s.t (id bigint, name varchar) WITH (location = '{location}')")
    await sql(f"INSERT INTO {lake}.s.t VALUES (1, 'a'), (2, 'b')")
    await sql(f"INSERT INTO {lake}.s.t VALUES (3, 'c')")
    assert await sql(f"SELECT id, name FROM {lake}.s.t ORDER BY id") == [[1, "a"], [2, "b"], [3, "c"]]
    assert [["t"]] == await sql(f"SHOW TABLES FROM {lake}.s")

    snapshots = [row[0] for row in await sql(
        f'SELECT snapshot_id FROM {lake}.s."t$snapshots" ORDER BY committed_at')]
    assert len(snapshots) >= 2
    first_insert = snapshots[-2]
    assert await sql(f"SELECT id FROM {lake}.s.t FOR VERSION AS OF {first_insert} ORDER BY id") == [[1], [2]]

    # The table is shardcat's: an ICEBERG table in the schema, its pointer the one Trino committed last.
    status, row = await ws.call("GET", "/tables/lake.s.t")
    assert status == 200, row
    assert (row["data_source_format"], row["table_type"], row["storage_location"]) == ("ICEBERG", "EXTERNAL", location)
    assert [c["name"] for c in row["columns"]] == ["id", "name"]
    # pyiceberg reads what Trino wrote, at both snapshots.
    table = await run(lambda: pyiceberg(ws, "lake").load_table("s.t"))
    assert table.metadata_location == row["properties"]["metadata_location"]
    assert sorted((await run(lambda: table.scan().to_arrow()))["id"].to_pylist()) == [1, 2, 3]
    at_first = await run(lambda: table.scan(snapshot_id=first_insert).to_arrow())
    assert sorted(at_first["id"].to_pylist()) == [1, 2]


async def test_trino_reads_and_extends_a_table_pyiceberg_wrote(ws, sql):
    await new_warehouse(ws)
    ice = await run(pyiceberg, ws, "lake")
    await run(ice.create_namespace, "s")
    table = await run(ice.create_table, "s.made", SCHEMA)
    await run(table.append, pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["x", "y"])}))

    lake = await sql.iceberg_catalog(ws, "lake")
    assert await sql(f"SELECT id, name FROM {lake}.s.made ORDER BY id") == [[1, "x"], [2, "y"]]
    await sql(f"INSERT INTO {lake}.s.made VALUES (3, 'z')")            # Trino commits through shardcat
    fresh = await run(ice.load_table, "s.made")
    assert sorted((await run(lambda: fresh.scan().to_arrow()))["id"].to_pylist()) == [1, 2, 3]
    assert len(fresh.snapshots()) == 2


async def test_grants_decide_what_trinos_user_reads(ws, server, sql):
    await new_warehouse(ws)
    ice = await run(pyiceberg, ws, "lake")
    await run(ice.create_namespace, "s")
    table = await run(ice.create_table, "s.t", SCHEMA)
    await run(table.append, pa.table({"id": pa.array([7], pa.int64()), "name": pa.array(["seven"])}))

    reader = await user(server, ws)
    await grant(ws, "catalog", "lake", reader.name, "USE CATALOG", "USE SCHEMA")
    theirs = await sql.iceberg_catalog(reader, "lake")
    assert await sql(f"SHOW TABLES FROM {theirs}.s") == []           # no privilege on it: not listed
    with pytest.raises(TrinoQueryError, match="does not exist"):
        await sql(f"SELECT * FROM {theirs}.s.t")                      # ... and answered as missing
    await grant(ws, "table", "lake.s.t", reader.name, "MODIFY")
    with pytest.raises(TrinoQueryError, match="Failed to load table"):
        await sql(f"SELECT * FROM {theirs}.s.t")                      # seen, no SELECT: an error, no rows
    # Trino names no cause; shardcat's audit log has its refusal of the load (403, naming SELECT).
    status, body = await ws.call("GET", "/shardcat/audit", params={
        "metastore_id": ws.metastore_id, "principal": reader.name, "action": "icebergLoadTable"})
    assert status == 200, body
    refused = [e for e in body["events"] if not e["allowed"]]
    assert refused and all(e["status"] == 403 and "SELECT" in e["message"] for e in refused), body
    await grant(ws, "table", "lake.s.t", reader.name, "SELECT", remove=["MODIFY"])
    assert await sql(f"SELECT id, name FROM {theirs}.s.t") == [[7, "seven"]]
    with pytest.raises(TrinoQueryError, match="MODIFY"):
        await sql(f"INSERT INTO {theirs}.s.t VALUES (8, 'eight')")     # no MODIFY: no commit
    assert await sql(f"SELECT count(*) FROM {theirs}.s.t") == [[1]]


async def test_trino_reads_a_uniform_delta_table_by_its_name(ws, server, sql):
    """A Delta table delta-rs wrote (partitioned by `day`, files without Iceberg field ids) with UniForm, read by
    Trino's Iceberg connector through the REST catalog by its name, at its latest Delta version; the grants of
    Trino's token decide; a write through Iceberg is refused (read-only)."""
    await new_warehouse(ws)
    status, body = await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "lake"})
    assert status == 200, body
    table = await uniform_table(ws, "lake", "events")
    deltalake.write_deltalake(table["storage_location"], rows([1, 2], ["a", "b"]), partition_by=["day"])
    deltalake.write_deltalake(table["storage_location"], rows([3], ["a"]), mode="append", partition_by=["day"])
    lake = await sql.iceberg_catalog(ws, "lake")
    assert [["events"]] == await sql(f"SHOW TABLES FROM {lake}.s")
    assert await sql(f"SELECT id, day FROM {lake}.s.events ORDER BY id") == [[1, "a"], [2, "b"], [3, "a"]]
    assert await sql(f"SELECT count(*) FROM {lake}.s.events WHERE day = 'a'") == [[2]]
    deltalake.write_deltalake(table["storage_location"], rows([9], ["c"]), mode="overwrite", partition_by=["day"])
    assert await sql(f"SELECT id, day FROM {lake}.s.events") == [[9, "c"]]          # the latest Delta version
    with pytest.raises(TrinoQueryError, match="read-only"):
        await sql(f"INSERT INTO {lake}.s.events VALUES (10, 'd')")
    assert deltalake.DeltaTable(table["storage_location"]).version() == 2           # nothing written

    reader = await user(server, ws)
    await grant(ws, "catalog", "lake", reader.name, "USE CATALOG", "USE SCHEMA")
    theirs = await sql.iceberg_catalog(reader, "lake")
    assert await sql(f"SHOW TABLES FROM {theirs}.s") == []                          # no privilege: not listed
    with pytest.raises(TrinoQueryError, match="does not exist"):
        await sql(f"SELECT * FROM {theirs}.s.events")
    await grant(ws, "table", "lake.s.events", reader.name, "SELECT")
    assert await sql(f"SELECT id, day FROM {theirs}.s.events") == [[9, "c"]]


def rows(ids: list[int], days: list[str]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": pa.array(days)})


async def uniform_table(ws, catalog: str, name: str) -> dict:
    """A MANAGED DELTA table with UniForm (`delta.universalFormat.enabledFormats` = iceberg) in `catalog`.s."""
    columns = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}',
                "position": 0},
               {"name": "day", "type_name": "STRING", "type_text": "string", "type_json": '{"type":"string"}',
                "position": 1}]
    status, table = await ws.call("POST", "/tables", json={
        "name": name, "catalog_name": catalog, "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": columns,
        "properties": {"delta.universalFormat.enabledFormats": "iceberg"}})
    assert status == 200, table
    return table


# ---- Delta Lake connector ------------------------------------------------------------------------------


async def test_delta_lake_reads_registered_paths_ungoverned(ws, server, sql, tmp_path: Path):
    """Trino's Delta Lake connector has no Unity metastore: it can only be told a table's path in its
    own (file) metastore, and then reads the files with no catalog call, whoever shardcat's grants
    allow. A catalog-managed table (Delta's catalogManaged feature) it refuses."""
    tables = await engine_tables(ws)
    metastore = tmp_path / "trino-metastore"
    metastore.mkdir()
    delta = f"delta_{uuid.uuid4().hex[:8]}"
    await sql(f"""CREATE CATALOG {delta} USING delta_lake WITH (
        "hive.metastore" = 'file',
        "hive.metastore.catalog.dir" = 'file://{metastore}',
        "delta.register-table-procedure.enabled" = 'true',
        "fs.native-local.enabled" = 'true',
        "local.location" = '/')""")
    await sql(f"CREATE SCHEMA {delta}.s")
    await sql(f"CALL {delta}.system.register_table(schema_name => 's', table_name => 'plain', "
              f"table_location => '{tables['plain']['storage_location']}')")
    assert await sql(f"SELECT id FROM {delta}.s.plain ORDER BY id") == [[10], [20]]

    await sql(f"CALL {delta}.system.register_table(schema_name => 's', table_name => 'orders', "
              f"table_location => '{tables['orders'].location}')")
    # A catalogManaged table is an error, not rows (Trino 476 words it "Schema 's' does not exist").
    with pytest.raises(TrinoQueryError):
        await sql(f"SELECT * FROM {delta}.s.orders")
    assert await sql(f"SELECT id FROM {delta}.s.plain ORDER BY id") == [[10], [20]]    # the schema is there

    # The reader has no grant at all in shardcat; Trino, which never asks it, reads the files still.
    stranger = await user(server, ws)
    status, _ = await stranger.call("GET", "/tables/main.s.plain")
    assert status == 404
