"""shardcat.spark on a real local PySpark against a real server: queries resolved in one call,
writes by name through the catalog, reads by name and by path, and bad input named clearly."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

from shardcat.spark import CatalogError
from shardcat.spark.types import to_columns, to_schema
from tests.spark.helpers import ok, run


async def view(ws, name, sql):
    return await ok(ws, "POST", "/tables", {
        "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "VIEW", "view_definition": sql,
        "columns": [{"name": "x", "type_name": "LONG", "type_text": "bigint", "position": 0}]})


async def stats(ws) -> int:
    return (await ok(ws, "GET", "/resolve/stats"))["resolve_calls"]


def test_type_mapping_round_trips():
    schema = T.StructType([
        T.StructField("id", T.LongType(), False), T.StructField("i", T.IntegerType()),
        T.StructField("amount", T.DecimalType(12, 3)), T.StructField("day", T.DateType()),
        T.StructField("at", T.TimestampType()), T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("tags", T.ArrayType(T.StringType())), T.StructField("m", T.MapType(T.StringType(), T.IntegerType())),
        T.StructField("st", T.StructType([T.StructField("a", T.ShortType()), T.StructField("b", T.BinaryType())])),
        T.StructField("ok", T.BooleanType(), metadata={"comment": "flag"}),
    ])
    cols = to_columns(schema, partition_by=["day"])
    by = {c["name"]: c for c in cols}
    assert [c["type_name"] for c in cols] == ["LONG", "INT", "DECIMAL", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ",
                                              "ARRAY", "MAP", "STRUCT", "BOOLEAN"]
    assert by["amount"]["type_text"] == "decimal(12,3)" and by["amount"]["type_precision"] == 12
    assert by["tags"]["type_text"] == "array<string>" and by["st"]["type_text"] == "struct<a:smallint,b:binary>"
    assert json.loads(by["id"]["type_json"]) == {"name": "id", "type": "long", "nullable": False, "metadata": {}}
    assert by["day"]["partition_index"] == 0 and by["ok"]["comment"] == "flag" and by["id"]["nullable"] is False
    assert to_schema(cols) == schema


async def test_join_of_three_tables_and_a_view_in_one_resolve(ws, cat, spark):
    orders = spark.createDataFrame([(1, 10, 100, 2), (2, 11, 101, 1), (3, 10, 101, 5)],
                                   "id long, customer_id long, product_id long, qty int")
    customers = spark.createDataFrame([(10, "ann", "eu"), (11, "bob", "us")], "id long, name string, region string")
    products = spark.createDataFrame([(100, "pen", 1.5), (101, "ink", 4.0)], "id long, title string, price double")
    await run(cat.write, orders, "c.s.orders", mode="create")
    await run(cat.write, customers, "c.s.customers", mode="create", format="CSV")
    await run(cat.write, products, "c.s.products", mode="create", format="JSON")
    await view(ws, "eu_customers", "SELECT id, name FROM customers WHERE region = 'eu'")
    query = """
        SELECT o.id, c.name, p.title, o.qty * p.price AS total, e.name IS NOT NULL AS eu
        FROM c.s.orders o JOIN c.s.customers c ON o.customer_id = c.id
        JOIN c.s.products p ON o.product_id = p.id
        LEFT JOIN c.s.eu_customers e ON e.id = c.id ORDER BY o.id"""
    before = await stats(ws)
    rows = await run(lambda: cat.sql(query).collect())
    assert await stats(ws) == before + 1          # one batched resolve for three tables and a view
    assert [tuple(r) for r in rows] == [(1, "ann", "pen", 3.0, True), (2, "bob", "ink", 4.0, False),
                                        (3, "ann", "ink", 20.0, True)]
    # the same tables again in the job: answered from the job's cache, no call
    again = await run(lambda: cat.sql("SELECT count(*) FROM c.s.orders JOIN c.s.eu_customers e "
                                      "ON customer_id = e.id").collect())
    assert again[0][0] == 2 and await stats(ws) == before + 1
    assert cat.summary()["cache_hits"] >= 2
    # a query with one new name makes one call; the cached names come back "unchanged" (no assets)
    await run(cat.write, products, "c.s.products2", mode="create")
    await run(lambda: cat.sql("SELECT count(*) FROM c.s.orders o JOIN c.s.products2 p ON o.product_id = p.id "
                              "JOIN c.s.customers c ON o.customer_id = c.id").collect())
    assert cat.summary()["unchanged"] == 2
    # another writer changes a cached table: the next call that includes it brings the new definition
    await ok(ws, "PATCH", "/tables/c.s.customers", {"comment": "changed elsewhere"})
    await view(ws, "us_customers", "SELECT id, name FROM customers WHERE region = 'us'")
    await run(lambda: cat.sql("SELECT count(*) FROM c.s.customers JOIN c.s.us_customers USING (id)").collect())
    assert cat.summary()["unchanged"] == 2            # customers was not unchanged this time
    assert cat.catalog._cache[("TABLE", "c.s.customers")].asset["comment"] == "changed elsewhere"


async def test_writes_create_append_overwrite_match_the_catalog(ws, cat, spark):
    df = spark.createDataFrame([Row(id=1, name="a", score=1.5), Row(id=2, name="b", score=2.5)],
                               "id long, name string, score double")
    for fmt in ("PARQUET", "CSV", "JSON", "ORC"):
        name = f"c.s.t_{fmt.lower()}"
        created = await run(cat.write, df, name, mode="create", format=fmt)
        table = await ok(ws, "GET", f"/tables/{name}")
        assert table["table_type"] == "MANAGED" and table["data_source_format"] == fmt
        assert table["storage_location"].startswith(ws.storage_root) and created["table_id"] == table["table_id"]
        assert [(c["name"], c["type_name"], c["type_text"], c["type_json"]) for c in table["columns"]] == \
               [(c["name"], c["type_name"], c["type_text"], c["type_json"]) for c in to_columns(df.schema)]
        assert await run(lambda: cat.table(name).count()) == 2
        await run(cat.write, df, name, mode="append")
        back = await run(lambda: sorted(tuple(r) for r in cat.table(name).collect()))
        assert back == [(1, "a", 1.5), (1, "a", 1.5), (2, "b", 2.5), (2, "b", 2.5)]
        # what Spark wrote is what the catalog describes: read the files directly with the catalog's schema
        files = await run(lambda: spark.read.schema(to_schema(table["columns"])).format(fmt.lower())
                          .option("header", "true").load(table["storage_location"]).count())
        assert files == 4
        await run(cat.write, df.limit(1), name, mode="overwrite")
        assert await run(lambda: cat.table(name).count()) == 1
    with pytest.raises(CatalogError, match="already exists"):
        await run(cat.write, df, "c.s.t_parquet", mode="create")
    with pytest.raises(CatalogError, match="DataFrame has columns"):
        await run(cat.write, df.select("id"), "c.s.t_parquet", mode="append")


async def test_reads_by_volume_path_and_by_storage_path(ws, cat, spark, tmp_path):
    await ok(ws, "POST", "/volumes", {"name": "raw", "catalog_name": "c", "schema_name": "s",
                                      "volume_type": "MANAGED"})
    location = await run(cat.volume_location, "c.s.raw")
    directory = location.removeprefix("file://") + "/orders"
    import os
    os.makedirs(directory, exist_ok=True)
    with open(directory + "/part-1.csv", "w") as f:
        f.write("id,qty\n1,2\n2,3\n")
    df = await run(cat.read_path, "/Volumes/c/s/raw/orders", format="csv", header="true", inferSchema="true")
    assert await run(lambda: sorted(tuple(r) for r in df.collect())) == [(1, 2), (2, 3)]
    await run(cat.write, df, "c.s.by_path", mode="create")
    table = await ok(ws, "GET", "/tables/c.s.by_path")
    # The write reported its lineage: the volume whose files it read.
    assert cat.writes[-1]["sources"] == ["c.s.raw"]
    lineage = await ok(ws, "GET", "/shardcat/lineage?name=c.s.by_path&direction=upstream")
    assert [(e["source"]["full_name"], e["source"]["securable_type"]) for e in lineage["edges"]] == [
        ("c.s.raw", "VOLUME")]
    by_path = await run(cat.read_path, table["storage_location"])      # the owning table's format and schema
    assert await run(by_path.count) == 2 and by_path.columns == ["id", "qty"]
    with pytest.raises(CatalogError, match="No table or volume owns path") as e:
        await run(cat.read_path, f"file://{tmp_path}/nobody/owns/this", format="csv")
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(CatalogError, match="c.s.nope") as e:
        await run(cat.read_path, "/Volumes/c/s/nope/x.csv", format="csv")
    assert e.value.code == "NOT_FOUND"


async def test_bad_input_names_the_culprit(ws, cat, spark):
    df = spark.createDataFrame([(1,)], "id long")
    await run(cat.write, df, "c.s.base", mode="create")
    await view(ws, "broken", "SELECT id FROM (SELECT id FROM base")
    await view(ws, "loop_a", "SELECT * FROM c.s.loop_b")
    await view(ws, "loop_b", "SELECT * FROM c.s.loop_a")
    cases = [
        ("SELECT * FROM c.s.missing", "NOT_FOUND", "c.s.missing"),
        ("SELECT * FROM c.s.base JOIN c.s.broken USING (id)", "INVALID_PARAMETER_VALUE", "c.s.broken"),
        ("SELECT * FROM c.s.loop_a", "INVALID_PARAMETER_VALUE", "c.s.loop_a -> c.s.loop_b -> c.s.loop_a"),
        ("SELECT * FROM c.s.base WHERE", "INVALID_PARAMETER_VALUE", "does not parse"),
    ]
    for query, code, fragment in cases:
        with pytest.raises(CatalogError) as e:
            await run(cat.sql, query)
        assert e.value.code == code and fragment in str(e.value), (query, str(e.value))
    with pytest.raises(CatalogError, match="Invalid table name 'c.s'"):
        await run(cat.table, "c.s")
    with pytest.raises(CatalogError, match="bad name") as e:
        await run(cat.write, df, "c.s.bad name", mode="create")
    assert e.value.code == "INVALID_PARAMETER_VALUE"
    # the good table still reads after all that
    assert await run(lambda: cat.table("c.s.base").count()) == 1
