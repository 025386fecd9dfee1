"""Catalog-managed Delta tables from Spark by name: Spark writes the data files, shardcat's Delta
client has the catalog ratify the commit; reads take the live files from the catalog's snapshot.
A commit by a writer that is not Spark is visible to the next Spark read. Partitioned tables too."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from shardcat.delta.client import DeltaCatalogClient, Transaction
from shardcat.delta.log import Storage
from shardcat.spark import CatalogError
from tests.spark.helpers import ok, run


async def test_spark_appends_and_reads_a_catalog_managed_table(ws, cat, spark):
    df = spark.createDataFrame([(1, "a", 0.5), (2, "b", 1.5)], "id long, name string, score double")
    created = await run(cat.write, df, "c.s.events", mode="create", format="DELTA")
    table = await ok(ws, "GET", "/tables/c.s.events")
    assert table["table_id"] == created["table_id"] and table["data_source_format"] == "DELTA"
    assert table["properties"]["delta.feature.catalogManaged"] == "supported"
    assert [(c["name"], c["type_name"]) for c in table["columns"]] == [("id", "LONG"), ("name", "STRING"),
                                                                       ("score", "DOUBLE")]
    await run(cat.write, df, "c.s.events", mode="append")
    assert await run(lambda: cat.table("c.s.events").count()) == 4

    # the catalog ratified both commits; the Delta client reads the same rows Spark wrote
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        snap = await delta.snapshot("c.s.events")
        assert snap.version == 2
        rows = (await delta.read("c.s.events")).sort_by("id")
        assert rows.column("id").to_pylist() == [1, 1, 2, 2]
        # a writer that is not Spark commits; Spark's next read by name sees it
        version = await delta.append("c.s.events", pa.table({"id": [7], "name": ["z"], "score": [9.0]}))
        assert version == 3
    back = await run(lambda: sorted(tuple(r) for r in cat.sql(
        "SELECT id, name, score FROM c.s.events WHERE id > 1").collect()))
    assert back == [(2, "b", 1.5), (2, "b", 1.5), (7, "z", 9.0)]

    await run(cat.write, df.limit(1), "c.s.events", mode="overwrite")
    assert await run(lambda: [tuple(r) for r in cat.table("c.s.events").collect()]) == [(1, "a", 0.5)]
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        assert (await delta.snapshot("c.s.events")).version == 4
        assert (await delta.read("c.s.events")).num_rows == 1


async def test_delta_joins_other_formats_in_one_query(ws, cat, spark):
    await run(cat.write, spark.createDataFrame([(1, 10)], "id long, v long"), "c.s.d", mode="create", format="DELTA")
    await run(cat.write, spark.createDataFrame([(1, "x")], "id long, w string"), "c.s.p", mode="create")
    empty = await run(cat.write, spark.createDataFrame([], "id long"), "c.s.empty", mode="create", format="DELTA")
    assert empty["data_source_format"] == "DELTA"
    rows = await run(lambda: cat.sql("SELECT d.v, p.w, (SELECT count(*) FROM c.s.empty) AS n "
                                     "FROM c.s.d d JOIN c.s.p p USING (id)").collect())
    assert [tuple(r) for r in rows] == [(10, "x", 0)]
    # Lineage of a write from a join: both tables whose files it read (the empty one has none).
    joined = await run(cat.sql, "SELECT d.id, d.v, p.w FROM c.s.d d JOIN c.s.p p USING (id)")
    await run(cat.write, joined, "c.s.joined", mode="create", format="DELTA")
    assert cat.writes[-1]["sources"] == ["c.s.d", "c.s.p"]
    lineage = await ok(ws, "GET", "/shardcat/lineage?name=c.s.joined")
    assert sorted((e["direction"], e["source"]["full_name"]) for e in lineage["edges"]) == [
        ("upstream", "c.s.d"), ("upstream", "c.s.p")]
    with pytest.raises(CatalogError, match="DataFrame has columns"):
        await run(cat.write, spark.createDataFrame([(1,)], "other long"), "c.s.d", mode="append")


async def test_partitioned_delta_table_from_spark(ws, cat, spark):
    """A partitioned catalog-managed table: Spark's files move to the table's partition directories,
    the log names their values, and every reader (Spark by path, the Delta client by the log) agrees,
    also on values Spark must escape in a directory name."""
    df = spark.createDataFrame([(1, "EU", "2024-01-01"), (2, "a:b/c", "2024-01-01"), (3, None, "2024-01-02")],
                               "id long, region string, day string").selectExpr("id", "region", "CAST(day AS DATE) day")
    await run(cat.write, df, "c.s.pd", mode="create", format="DELTA", partition_by=["DAY", "region"])
    table = await ok(ws, "GET", "/tables/c.s.pd")
    assert {c["name"]: c.get("partition_index") for c in table["columns"]} == {"id": None, "region": 1, "day": 0}
    await run(cat.write, df.filter("id = 1"), "c.s.pd", mode="append")
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        snap = await delta.snapshot("c.s.pd")
        assert snap.state.partition_columns == ["day", "region"]
        paths = sorted(p.rsplit("/", 1)[0] for p in snap.state.files)
        assert paths == ["day=2024-01-01/region=EU", "day=2024-01-01/region=EU", "day=2024-01-01/region=a%3Ab%2Fc",
                         "day=2024-01-02/region=__HIVE_DEFAULT_PARTITION__"]
        by_client = sorted((await delta.read("c.s.pd")).to_pylist(), key=lambda r: (r["id"], r["region"] or ""))
        # a writer that is not Spark adds a partition Spark has not seen
        await delta.append("c.s.pd", pa.table({"id": [9], "region": ["US"], "day": [datetime.date(2024, 3, 1)]}))
    jan1, jan2 = datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)
    expected = [(1, "EU", jan1), (1, "EU", jan1), (2, "a:b/c", jan1), (3, None, jan2)]
    assert [(r["id"], r["region"], r["day"]) for r in by_client] == expected
    rows = await run(lambda: sorted(tuple(r) for r in cat.sql(
        "SELECT id, region, day FROM c.s.pd WHERE day < DATE'2024-02-01'").collect()))
    assert rows == sorted(expected, key=lambda r: (r[0], r[1] or ""))
    assert await run(lambda: cat.table("c.s.pd").filter("region = 'US'").count()) == 1
    await run(cat.write, df.filter("id = 3"), "c.s.pd", mode="overwrite")
    assert await run(lambda: [tuple(r) for r in cat.table("c.s.pd").collect()]) == [(3, None, jan2)]


async def test_delta_files_outside_their_partition_directories_read_by_the_log(ws, cat, spark):
    """Another writer may put a partitioned table's files anywhere: their values come from the log."""
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        table = await delta.create_table("c.s.odd", pa.schema([("id", pa.int64()), ("day", pa.date32())]),
                                         partition_columns=["day"])
        snap = await delta.snapshot(table)
        [add] = delta.write_files(snap, pa.table({"id": [1, 2], "day": [datetime.date(2024, 5, 6)] * 2}))
        storage = Storage(table.location)
        storage.fs.create_dir(storage.path("elsewhere"))
        storage.fs.move(storage.path(add["add"]["path"]), storage.path("elsewhere/f.parquet"))
        add["add"]["path"] = "elsewhere/f.parquet"
        await delta.commit(Transaction(snap.table, snap.version, "WRITE", [add]), snap)
        await delta.append(table, pa.table({"id": [3], "day": [None]}, schema=snap.schema))
    rows = await run(lambda: sorted(tuple(r) for r in cat.table("c.s.odd").collect()))
    assert rows == [(1, datetime.date(2024, 5, 6)), (2, datetime.date(2024, 5, 6)), (3, None)]


async def test_bad_delta_partition_columns_are_refused(ws, cat, spark):
    df = spark.createDataFrame([(1, 0.5)], "id long, score double")
    with pytest.raises(ValueError, match="type double"):
        await run(cat.write, df, "c.s.bad", mode="create", format="DELTA", partition_by=["score"])
    assert (await ws.call("GET", "/tables/c.s.bad"))[0] == 404
