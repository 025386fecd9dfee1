"""shardcat's Spark plugin (jvm/spark-plugin): a query's catalog tables resolved in ONE POST /resolve inside
Spark's parser, and Spark's table loads answered from that answer. Joins of several tables (Delta and
Parquet), a view expanded, a user without SELECT refused before anything runs, a trusted engine's row
filter and column mask applied in the plan, and the connector-style baseline (two calls per table)."""

from __future__ import annotations

import json
import time

import pytest

from shardcat.spark.types import to_columns

from tests.integration.governance_users import grant, unique, user
from tests.spark.helpers import add_catalog, ok, run

pytestmark = pytest.mark.spark_connectors

PLUGIN = "shardcat.spark.ShardcatCatalog"


def plugin_session(spark, caller, *, batch: bool = True):
    """A Spark session (sharing the test session's JVM) whose catalog `c` is shardcat's `c` for `caller`."""
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "2")
    session.conf.set("spark.databricks.delta.snapshotPartitions", "2")    # Delta's log replay: 50 tasks by default
    add_catalog(session, "c", PLUGIN, {"uri": caller.url, "token": caller.token,
                                       "batchResolve": str(batch).lower()})
    return session


async def resolve_calls(ws) -> int:
    return (await ok(ws, "GET", "/resolve/stats"))["resolve_calls"]


async def audit_requests(ws, principal: str, since_ms: int) -> dict[str, list[str]]:
    """The caller's HTTP requests since then, from the audit log: request id -> the actions it recorded."""
    body = await ok(ws, "GET", f"/shardcat/audit?principal={principal}&since={since_ms}&max_results=1000")
    out: dict[str, list[str]] = {}
    for e in body["events"]:
        out.setdefault(e["request_id"], []).append(e["action"])
    return out


async def register(ws, spark, tmp_path, name, rows, schema, fmt="DELTA", **extra):
    """Write `rows` as a `fmt` table under tmp_path and register it in c.s as an external table."""
    df = spark.createDataFrame(rows, schema)
    location = f"file://{tmp_path}/{name}"
    await run(lambda: df.write.format(fmt.lower()).save(location))
    await ok(ws, "POST", "/tables", {
        "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": fmt, "columns": to_columns(df.schema), "storage_location": location, **extra})


async def sql_function(ws, name, params, definition):
    await ok(ws, "POST", "/functions", {"function_info": {
        "name": name, "catalog_name": "c", "schema_name": "s", "data_type": "STRING", "full_data_type": "string",
        "input_params": {"parameters": [
            {"name": p, "type_text": "string", "type_name": "STRING", "position": i,
             "type_json": json.dumps({"name": p, "type": "string", "nullable": True, "metadata": {}})}
            for i, p in enumerate(params)]},
        "routine_body": "SQL", "routine_definition": definition, "parameter_style": "S", "is_deterministic": True,
        "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER", "specific_name": name}})


@pytest.fixture
async def world(ws, server, spark, tmp_path):
    """c.s: orders, customers (Delta), products (Parquet), a view over two of them, people (Parquet, a
    row filter and a masked column); a trusted engine, an analyst, and a stranger without SELECT on orders
    (SELECT on customers and on the view)."""
    await ok(ws, "POST", "/catalogs", {"name": "c"})
    await ok(ws, "POST", "/schemas", {"name": "s", "catalog_name": "c"})
    await register(ws, spark, tmp_path, "orders", [(1, 10, 100, 2), (2, 11, 101, 5), (3, 10, 101, 1)],
                   "id long, customer_id long, product_id long, qty long")
    await register(ws, spark, tmp_path, "customers", [(10, "ann"), (11, "bob")], "id long, name string")
    await register(ws, spark, tmp_path, "products", [(100, 2.5), (101, 4.0)], "id long, price double",
                   fmt="PARQUET")
    await ok(ws, "POST", "/tables", {
        "name": "big_orders", "catalog_name": "c", "schema_name": "s", "table_type": "VIEW",
        "view_definition": "SELECT o.id, c.name FROM orders o JOIN s.customers c ON o.customer_id = c.id "
                           "WHERE o.qty > 1",
        "columns": to_columns(spark.createDataFrame([], "id long, name string").schema)})
    await sql_function(ws, "eu_only", ["region"], "region = 'eu'")
    await sql_function(ws, "hide_email", ["email"], "concat(substr(email, 1, 1), '***')")
    people = spark.createDataFrame([(1, "ann@x.org", "eu"), (2, "bob@y.org", "us"), (3, "cy@z.org", "eu")],
                                   "id long, email string, region string")
    columns = to_columns(people.schema)
    columns[1]["mask"] = {"function_name": "c.s.hide_email", "using_column_names": []}
    await run(lambda: people.write.parquet(f"file://{tmp_path}/people"))
    await ok(ws, "POST", "/tables", {
        "name": "people", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": columns, "storage_location": f"file://{tmp_path}/people",
        "row_filter": {"function_name": "c.s.eu_only", "input_column_names": ["region"]}})
    engine = await user(server, ws, unique("engine"), trusted=True)
    analyst = await user(server, ws, unique("analyst"))
    for who in (engine, analyst):
        await grant(ws, "catalog", "c", who.name, "USE CATALOG", "USE SCHEMA", "SELECT", "EXECUTE")
    stranger = await user(server, ws, unique("stranger"))
    # BROWSE: the stranger sees that orders exists (else the catalog answers it as missing), may not read it
    await grant(ws, "catalog", "c", stranger.name, "USE CATALOG", "USE SCHEMA", "BROWSE")
    for name in ("c.s.customers", "c.s.big_orders"):
        await grant(ws, "table", name, stranger.name, "SELECT")
    return {"engine": engine, "analyst": analyst, "stranger": stranger}


JOIN = """SELECT o.id, c.name, o.qty * p.price AS total
          FROM c.s.orders o JOIN c.s.customers c ON o.customer_id = c.id
          JOIN c.s.products p ON o.product_id = p.id ORDER BY o.id"""


async def test_a_join_of_three_tables_is_one_resolve_call(ws, spark, world):
    analyst = world["analyst"]
    session = plugin_session(spark, analyst)
    before, since = await resolve_calls(ws), _now_ms()
    rows = await run(lambda: session.sql(JOIN).collect())
    assert [tuple(r) for r in rows] == [(1, "ann", 5.0), (2, "bob", 20.0), (3, "ann", 4.0)]
    assert await resolve_calls(ws) - before == 1
    [actions] = (await audit_requests(ws, analyst.name, since)).values()      # one HTTP request in all
    assert actions.count("resolveRead") == 3 and "getTable" not in actions, actions


async def test_connector_style_loads_make_two_calls_per_table(ws, spark, world):
    """The baseline of the benchmark: without the parser's batching, each load asks for the table and its credentials."""
    analyst = world["analyst"]
    session = plugin_session(spark, analyst, batch=False)
    before, since = await resolve_calls(ws), _now_ms()
    rows = await run(lambda: session.sql(JOIN).collect())
    assert len(rows) == 3
    assert await resolve_calls(ws) == before
    requests = await audit_requests(ws, analyst.name, since)
    assert len(requests) == 6, requests
    actions = sum(requests.values(), [])
    assert actions.count("getTable") == 3 and actions.count("generateTemporaryTableCredentials") == 3, actions


async def test_a_user_without_select_gets_an_error_not_rows(spark, world):
    session = plugin_session(spark, world["stranger"])
    with pytest.raises(Exception) as e:
        await run(lambda: session.sql(JOIN).collect())
    assert "PERMISSION_DENIED" in str(e.value) and "c.s.orders" in str(e.value)
    # the table it may read is fine, by SQL and by name
    assert await run(lambda: session.sql("SELECT count(*) FROM c.s.customers").collect()[0][0]) == 2
    assert await run(lambda: session.table("c.s.customers").count()) == 2
    with pytest.raises(Exception) as e:
        await run(lambda: session.table("c.s.orders").count())
    assert "PERMISSION_DENIED" in str(e.value)


async def test_a_view_is_expanded_from_the_same_answer(ws, spark, world):
    session = plugin_session(spark, world["analyst"])
    before = await resolve_calls(ws)
    rows = await run(lambda: session.sql("SELECT v.id, v.name FROM c.s.big_orders v ORDER BY v.id").collect())
    assert [tuple(r) for r in rows] == [(1, "ann"), (2, "bob")]
    assert await resolve_calls(ws) - before == 1
    # the view's base tables need the caller's own SELECT: the stranger, who may read the view, not orders
    stranger = plugin_session(spark, world["stranger"])
    with pytest.raises(Exception) as e:
        await run(lambda: stranger.sql("SELECT * FROM c.s.big_orders").collect())
    assert "PERMISSION_DENIED" in str(e.value) and "needed by c.s.big_orders" in str(e.value)


async def test_a_trusted_engine_reads_filtered_rows_and_masked_columns(spark, world):
    engine = plugin_session(spark, world["engine"])
    rows = await run(lambda: engine.sql("SELECT id, email, region FROM c.s.people ORDER BY id").collect())
    assert [tuple(r) for r in rows] == [(1, "a***", "eu"), (3, "c***", "eu")]
    joined = await run(lambda: engine.sql(
        "SELECT p.email, c.name FROM c.s.people p JOIN c.s.customers c ON p.id + 9 = c.id ORDER BY p.id").collect())
    assert [tuple(r) for r in joined] == [("a***", "ann")]
    # aggregates see only the filtered rows; the raw table is not reachable by name outside SQL
    assert await run(lambda: engine.sql("SELECT count(*) FROM c.s.people").collect()[0][0]) == 2
    with pytest.raises(Exception) as e:
        await run(lambda: engine.table("c.s.people").count())
    assert "row filter or column masks" in str(e.value)
    # an engine that is not trusted is refused the governed table
    analyst = plugin_session(spark, world["analyst"])
    with pytest.raises(Exception) as e:
        await run(lambda: analyst.sql("SELECT * FROM c.s.people").collect())
    assert "PERMISSION_DENIED" in str(e.value) and "trusted engine" in str(e.value)


def _now_ms() -> int:
    return int(time.time() * 1000)
