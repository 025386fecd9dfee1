"""Catalog-managed Delta tables from Spark by name: Spark writes the data files, shardcat's Delta
client has the catalog ratify the commit; reads take the live files from the catalog's snapshot.
A commit by a writer that is not Spark is visible to the next Spark read."""

from __future__ import annotations


import pyarrow as pa
import pytest

from shardcat.delta.client import DeltaCatalogClient
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
    with pytest.raises(CatalogError, match="DataFrame has columns"):
        await run(cat.write, spark.createDataFrame([(1,)], "other long"), "c.s.d", mode="append")
