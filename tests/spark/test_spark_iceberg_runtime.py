"""Iceberg's Spark runtime (iceberg-spark-runtime-4.1_2.13, jvm/spark) on shardcat's Iceberg REST catalog, as
an Iceberg user configures it (`type=rest`, the endpoint, a warehouse that is a shardcat catalog, a token):
create, insert, MERGE, time travel, metadata tables, schema evolution; a table Spark wrote read by pyiceberg
and DuckDB, one pyiceberg wrote read by Spark; the grants decide. (Not on S3: docs/spark.md says why.)

Spark calls block and the server shares the test's event loop, so each runs in a worker thread (run)."""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.integration.governance_users import grant, user
from tests.spark.helpers import iceberg_catalog, ok, run

pytestmark = pytest.mark.spark_connectors


def pyiceberg(caller, warehouse: str):
    return load_catalog("py", type="rest", uri=f"{caller.api}/iceberg", warehouse=warehouse, token=caller.token)


def duckdb_iceberg(caller, warehouse: str):
    """DuckDB attached to the warehouse through its iceberg extension (with avro and httpfs, from their pip
    packages' files: no network)."""
    import duckdb
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false"})
    for package in ("duckdb_extension_httpfs", "duckdb_extension_avro", "duckdb_extension_iceberg"):
        module = __import__(package)
        [path] = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "*", "*.duckdb_extension"))
        con.execute(f"LOAD '{path}'")
    con.execute(f"CREATE SECRET shardcat (TYPE ICEBERG, TOKEN '{caller.token}')")
    con.execute(f"ATTACH '{warehouse}' AS lake (TYPE ICEBERG, ENDPOINT '{caller.api}/iceberg', SECRET shardcat)")
    return con


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


async def test_create_insert_merge_time_travel_metadata_and_evolution(ws, spark):
    await ok(ws, "POST", "/catalogs", {"name": "ice"})
    cat = iceberg_catalog(spark, ws, "ice")
    t = f"{cat}.sales.orders"

    def write():
        spark.sql(f"CREATE NAMESPACE {cat}.sales")
        spark.sql(f"CREATE TABLE {t} (id BIGINT, name STRING) USING iceberg")
        spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
        spark.createDataFrame([(2, "B"), (3, "c")], "id long, name string").createOrReplaceTempView("changes")
        spark.sql(f"""MERGE INTO {t} o USING changes c ON o.id = c.id
                      WHEN MATCHED THEN UPDATE SET o.name = c.name WHEN NOT MATCHED THEN INSERT *""")
        spark.sql(f"ALTER TABLE {t} ADD COLUMN qty INT")
        spark.sql(f"INSERT INTO {t} VALUES (4, 'd', 7)")
    await run(write)

    def read():
        snapshots = rows(spark, f"SELECT snapshot_id, operation FROM {t}.snapshots ORDER BY committed_at")
        first = snapshots[0][0]
        return (snapshots, rows(spark, f"SELECT * FROM {t} ORDER BY id"),
                rows(spark, f"SELECT * FROM {t} VERSION AS OF {first} ORDER BY id"),
                rows(spark, f"SELECT count(*) FROM {t}.files")[0][0],
                rows(spark, f"SHOW TABLES IN {cat}.sales"))
    snapshots, now, first, files, listed = await run(read)
    assert [op for _, op in snapshots] == ["append", "overwrite", "append"]
    assert now == [(1, "a", None), (2, "B", None), (3, "c", None), (4, "d", 7)]
    assert first == [(1, "a"), (2, "b")]                 # the first snapshot, with its own schema
    assert files >= 2
    assert [r[1] for r in listed] == ["orders"]

    # A shardcat table: ICEBERG, its evolved columns, the metadata file Spark's last commit made current.
    row = await ok(ws, "GET", "/tables/ice.sales.orders")
    assert (row["data_source_format"], row["table_type"]) == ("ICEBERG", "MANAGED")
    assert [c["name"] for c in row["columns"]] == ["id", "name", "qty"]

    # Read back by pyiceberg and DuckDB, through the catalog alone.
    table = await run(lambda: pyiceberg(ws, "ice").load_table("sales.orders"))
    assert table.metadata_location == row["properties"]["metadata_location"]
    got = (await run(lambda: table.scan().to_arrow())).sort_by("id")
    assert got.to_pylist()[-1] == {"id": 4, "name": "d", "qty": 7} and got.num_rows == 4
    assert await run(lambda: duckdb_iceberg(ws, "ice").execute(
        "SELECT id, name, qty FROM lake.sales.orders ORDER BY id").fetchall()) == now


async def test_spark_reads_what_pyiceberg_wrote(ws, spark):
    await ok(ws, "POST", "/catalogs", {"name": "ice"})
    py = await run(pyiceberg, ws, "ice")        # its first call (config) needs the server: off the loop
    await run(py.create_namespace, "s")
    table = await run(py.create_table, "s.made", Schema(NestedField(1, "id", LongType(), required=False),
                                                        NestedField(2, "name", StringType(), required=False)))
    await run(table.append, pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["x", "y"]}))
    cat = iceberg_catalog(spark, ws, "ice")
    assert await run(rows, spark, f"SELECT * FROM {cat}.s.made ORDER BY id") == [(1, "x"), (2, "y")]
    await run(spark.sql, f"INSERT INTO {cat}.s.made VALUES (3, 'z')")       # and Spark's commit, pyiceberg's read
    again = await run(py.load_table, "s.made")
    assert sorted((await run(lambda: again.scan().to_arrow()))["id"].to_pylist()) == [1, 2, 3]


async def test_grants_decide(ws, server, spark):
    await ok(ws, "POST", "/catalogs", {"name": "ice"})
    admin = iceberg_catalog(spark, ws, "ice")
    await run(spark.sql, f"CREATE NAMESPACE {admin}.s")
    await run(spark.sql, f"CREATE TABLE {admin}.s.t (id BIGINT) USING iceberg")
    await run(spark.sql, f"INSERT INTO {admin}.s.t VALUES (1)")

    outsider = await user(server, ws)
    await grant(ws, "catalog", "ice", outsider.name, "USE CATALOG", "USE SCHEMA")
    theirs = iceberg_catalog(spark, outsider, "ice")
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND|NoSuchTable"):   # no SELECT: as if missing
        await run(rows, spark, f"SELECT * FROM {theirs}.s.t")

    reader = await user(server, ws)
    await grant(ws, "catalog", "ice", reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    mine = iceberg_catalog(spark, reader, "ice")
    assert await run(rows, spark, f"SELECT * FROM {mine}.s.t") == [(1,)]
    with pytest.raises(Exception, match="MODIFY"):                              # no MODIFY: no commit
        await run(spark.sql, f"INSERT INTO {mine}.s.t VALUES (2)")
    await run(spark.sql, f"REFRESH TABLE {admin}.s.t")
    assert await run(rows, spark, f"SELECT * FROM {admin}.s.t") == [(1,)]

