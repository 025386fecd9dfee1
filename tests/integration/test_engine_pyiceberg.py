"""pyiceberg's REST catalog client against shardcat's Iceberg REST catalog, through shardcat alone:
the warehouse is a catalog; create a namespace and a table, append twice with pyarrow, read back at
both snapshots, a conflicting commit refused, a staged create, rename and drop; the grants decide
(no SELECT: no load; no MODIFY: no commit).

pyiceberg is synchronous and the server shares this test's event loop, so every pyiceberg call
runs in a worker thread. Data files go to the file:// managed storage the catalog hands out.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest
from governance_users import grant, user
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException, ForbiddenError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids], pa.string())})


def catalog(ws, warehouse: str = "ice", base: str = "iceberg"):
    """pyiceberg's REST catalog on shardcat, as a user configures it: the endpoint, a catalog, a token."""
    return load_catalog("shardcat", type="rest", uri=f"{ws.api}/{base}", warehouse=warehouse, token=ws.token)


async def run(fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


@pytest.fixture
async def ice(ws):
    status, body = await ws.call("POST", "/catalogs", json={"name": "ice"})
    assert status == 200, body
    return await run(catalog, ws)


async def test_create_append_twice_read_both_snapshots(ws, ice):
    await run(ice.create_namespace, "sales", {"comment": "orders"})
    assert ("sales",) in await run(ice.list_namespaces)
    assert (await run(ice.load_namespace_properties, "sales"))["comment"] == "orders"
    table = await run(ice.create_table, "sales.orders", SCHEMA)
    await run(table.append, rows(1, 2))
    first = table.current_snapshot().snapshot_id
    await run(table.append, rows(3))
    second = table.current_snapshot().snapshot_id
    assert first != second

    again = await run(ice.load_table, "sales.orders")          # a fresh load, through the catalog
    assert sorted((await run(lambda: again.scan().to_arrow()))["id"].to_pylist()) == [1, 2, 3]
    at_first = await run(lambda: again.scan(snapshot_id=first).to_arrow())
    assert sorted(at_first["id"].to_pylist()) == [1, 2]
    assert [s.snapshot_id for s in again.snapshots()] == [first, second]
    assert await run(ice.list_tables, "sales") == [("sales", "orders")]

    # The table is a shardcat table: ICEBERG, managed, its columns and current metadata file in its row.
    status, row = await ws.call("GET", "/tables/ice.sales.orders")
    assert status == 200, row
    assert (row["data_source_format"], row["table_type"]) == ("ICEBERG", "MANAGED")
    assert [c["name"] for c in row["columns"]] == ["id", "name"]
    assert row["properties"]["metadata_location"] == again.metadata_location
    assert again.metadata.location == row["storage_location"]


async def test_conflicting_commit_is_refused(ws, ice):
    await run(ice.create_namespace, "s")
    # No retries in the client: pyiceberg would otherwise refresh and redo a refused append.
    await run(ice.create_table, "s.t", SCHEMA, properties={"commit.retry.num-retries": "0"})
    one, two = await run(ice.load_table, "s.t"), await run(ice.load_table, "s.t")
    await run(one.append, rows(1))
    with pytest.raises(CommitFailedException):
        await run(two.append, rows(2))                  # based on the snapshot before `one`'s
    fresh = await run(ice.load_table, "s.t")
    assert (await run(lambda: fresh.scan().to_arrow()))["id"].to_pylist() == [1]
    # A commit whose requirements still hold is redone on the newer metadata: a property change
    # has none, and keeps the other writer's snapshot.
    def set_property():
        with two.transaction() as tx:
            tx.set_properties(owner_team="a")
    await run(set_property)
    fresh = await run(ice.load_table, "s.t")
    assert fresh.properties["owner_team"] == "a" and fresh.current_snapshot().snapshot_id == \
        one.current_snapshot().snapshot_id


async def test_staged_create_rename_drop(ws, ice):
    await run(ice.create_namespace, "s")

    def staged():
        tx = ice.create_table_transaction("s.staged", SCHEMA)
        tx.append(rows(7))
        tx.commit_transaction()
    await run(staged)
    table = await run(ice.load_table, "s.staged")
    assert (await run(lambda: table.scan().to_arrow()))["id"].to_pylist() == [7]
    status, row = await ws.call("GET", "/tables/ice.s.staged")
    assert row["table_type"] == "MANAGED" and row["table_id"] and status == 200

    await run(ice.rename_table, "s.staged", "s.renamed")
    assert await run(ice.list_tables, "s") == [("s", "renamed")]
    with pytest.raises(NoSuchTableError):
        await run(ice.load_table, "s.staged")
    await run(ice.purge_table, "s.renamed")
    with pytest.raises(NoSuchTableError):
        await run(ice.load_table, "s.renamed")
    status, _ = await ws.call("GET", "/tables/ice.s.renamed")
    assert status == 404


async def test_views(ice):
    from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion

    await run(ice.create_namespace, "s")
    version = ViewVersion(schema_id=0, representations=[SQLViewRepresentation(
        type="sql", sql="SELECT id FROM ice.s.t", dialect="spark")], default_namespace=["s"])
    await run(ice.create_view, "s.v", SCHEMA, version)
    assert await run(ice.list_views, "s") == [("s", "v")]
    assert await run(ice.view_exists, "s.v") and not await run(ice.view_exists, "s.nope")
    assert await run(ice.list_tables, "s") == []
    await run(ice.drop_view, "s.v")
    assert not await run(ice.view_exists, "s.v")


async def test_grants_decide(ws, server, ice):
    await run(ice.create_namespace, "s")
    table = await run(ice.create_table, "s.t", SCHEMA)
    await run(table.append, rows(1))
    reader = await user(server, ws)
    await grant(ws, "catalog", "ice", reader.name, "USE CATALOG", "USE SCHEMA")
    theirs = await run(catalog, reader)
    with pytest.raises(NoSuchTableError):
        await run(theirs.load_table, "s.t")             # no privilege on it: it answers as missing
    await grant(ws, "table", "ice.s.t", reader.name, "MODIFY")
    with pytest.raises(ForbiddenError, match="SELECT"):
        await run(theirs.load_table, "s.t")             # seen, but no SELECT: no metadata, no data
    await grant(ws, "table", "ice.s.t", reader.name, "SELECT", remove=["MODIFY"])
    mine = await run(theirs.load_table, "s.t")
    assert (await run(lambda: mine.scan().to_arrow()))["id"].to_pylist() == [1]
    version = (await server.store.get_metastore(ws.metastore_id)).version
    with pytest.raises(ForbiddenError, match="MODIFY"):
        await run(mine.append, rows(2))                 # no MODIFY: no commit
    assert (await server.store.get_metastore(ws.metastore_id)).version == version
    await grant(ws, "table", "ice.s.t", reader.name, "MODIFY")
    await run(mine.append, rows(2))
    fresh = await run(ice.load_table, "s.t")
    assert sorted((await run(lambda: fresh.scan().to_arrow()))["id"].to_pylist()) == [1, 2]

# ---- DuckDB's iceberg extension on the same catalog ------------------------------------------------


def _duckdb():
    """DuckDB with the iceberg extension (and avro, which it reads manifests with, and httpfs) loaded from
    their pip packages' files: no network."""
    import glob
    import os

    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_httpfs
    import duckdb_extension_iceberg

    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false"})
    for package, name in ((duckdb_extension_httpfs, "httpfs"), (duckdb_extension_avro, "avro"),
                          (duckdb_extension_iceberg, "iceberg")):
        files = os.path.join(os.path.dirname(package.__file__), "extensions", "*", f"{name}.duckdb_extension")
        (path,) = glob.glob(files)
        con.execute(f"LOAD '{path}'")
    return con


async def test_duckdb_reads_a_table_pyiceberg_wrote(ws, ice):
    await run(ice.create_namespace, "s")
    table = await run(ice.create_table, "s.t", SCHEMA)
    await run(table.append, rows(1, 2))
    await run(table.append, rows(3))

    def query():
        con = _duckdb()
        con.execute(f"CREATE SECRET shardcat (TYPE ICEBERG, TOKEN '{ws.token}')")
        con.execute(f"ATTACH 'ice' AS lake (TYPE ICEBERG, ENDPOINT '{ws.api}/iceberg', SECRET shardcat)")
        tables = con.execute("SHOW ALL TABLES").fetchall()
        got = con.execute("SELECT id, name FROM lake.s.t ORDER BY id").fetchall()
        con.execute("INSERT INTO lake.s.t VALUES (4, 'n4')")       # a commit through shardcat
        con.execute("CREATE TABLE lake.s.made AS SELECT range AS x FROM range(3)")     # DuckDB creates one too
        return tables, got

    tables, got = await run(query)
    assert ("lake", "s", "t") in [t[:3] for t in tables]
    assert got == [(1, "n1"), (2, "n2"), (3, "n3")]
    fresh = await run(ice.load_table, "s.t")                # DuckDB's write, read back by pyiceberg
    assert sorted((await run(lambda: fresh.scan().to_arrow()))["id"].to_pylist()) == [1, 2, 3, 4]
    made = await run(ice.load_table, "s.made")
    assert sorted((await run(lambda: made.scan().to_arrow()))["x"].to_pylist()) == [0, 1, 2]
    status, row = await ws.call("GET", "/tables/ice.s.made")       # staged, then created by its first commit
    assert (status, row["table_type"], row["data_source_format"]) == (200, "MANAGED", "ICEBERG")
    assert row["storage_location"].endswith(f"/tables/{row['table_id']}")


async def test_duckdb_reads_nothing_without_select(ws, server, ice):
    import duckdb

    await run(ice.create_namespace, "s")
    table = await run(ice.create_table, "s.t", SCHEMA)
    await run(table.append, rows(1))
    reader = await user(server, ws)
    await grant(ws, "catalog", "ice", reader.name, "USE CATALOG", "USE SCHEMA")

    def select(token: str):
        con = _duckdb()
        con.execute(f"CREATE SECRET shardcat (TYPE ICEBERG, TOKEN '{token}')")
        con.execute(f"ATTACH 'ice' AS lake (TYPE ICEBERG, ENDPOINT '{ws.api}/iceberg', SECRET shardcat)")
        try:
            return con.execute("SELECT id FROM lake.s.t").fetchall()
        except duckdb.Error as e:
            return e

    missing = await run(select, reader.token)             # no privilege on the table: answers as missing
    assert isinstance(missing, Exception) and "does not exist" in str(missing), missing
    await grant(ws, "table", "ice.s.t", reader.name, "MODIFY")
    refused = await run(select, reader.token)             # seen, but no SELECT
    assert isinstance(refused, Exception) and "403" in str(refused) and "SELECT" in str(refused), refused
    await grant(ws, "table", "ice.s.t", reader.name, "SELECT")
    assert await run(select, reader.token) == [(1,)]

