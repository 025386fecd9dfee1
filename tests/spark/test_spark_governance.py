"""shardcat.spark under governance: the catalog's decisions reach Spark queries. A denied table
fails the query with the catalog's reason; a trusted engine gets the row filter and column
masks and applies them; an untrusted engine is refused such tables; a read by storage path is
decided by the owning table's grants."""

from __future__ import annotations

import json

import pytest

from shardcat.spark import CatalogError, connect
from shardcat.spark.types import to_columns

from tests.integration.governance_users import grant, unique, user
from tests.spark.helpers import ok, run


async def function(ws, name, params, definition):
    return await ok(ws, "POST", "/functions", {"function_info": {
        "name": name, "catalog_name": "c", "schema_name": "s", "data_type": "STRING", "full_data_type": "string",
        "input_params": {"parameters": [
            {"name": p, "type_text": "string", "type_name": "STRING", "position": i,
             "type_json": json.dumps({"name": p, "type": "string", "nullable": True, "metadata": {}})}
            for i, p in enumerate(params)]},
        "routine_body": "SQL", "routine_definition": definition, "parameter_style": "S", "is_deterministic": True,
        "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER", "specific_name": name}})


@pytest.fixture
async def world(ws, server, spark, tmp_path):
    """c.s.people (row filter: region = 'eu'; email masked), c.s.secret, and three callers."""
    await ok(ws, "POST", "/catalogs", {"name": "c"})
    await ok(ws, "POST", "/schemas", {"name": "s", "catalog_name": "c"})
    people = spark.createDataFrame([(1, "ann@x.org", "eu"), (2, "bob@y.org", "us"), (3, "cy@z.org", "eu")],
                                   "id long, email string, region string")
    await run(lambda: people.write.parquet(f"file://{tmp_path}/people"))
    await run(lambda: people.write.parquet(f"file://{tmp_path}/secret"))
    await function(ws, "eu_only", ["region"], "region = 'eu'")
    await function(ws, "hide_email", ["email"], "concat(substr(email, 1, 1), '***')")
    columns = to_columns(people.schema)
    columns[1]["mask"] = {"function_name": "c.s.hide_email", "using_column_names": []}
    await ok(ws, "POST", "/tables", {
        "name": "people", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": columns, "storage_location": f"file://{tmp_path}/people",
        "row_filter": {"function_name": "c.s.eu_only", "input_column_names": ["region"]}})
    await ok(ws, "POST", "/tables", {
        "name": "secret", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": to_columns(people.schema),
        "storage_location": f"file://{tmp_path}/secret"})
    engine = await user(server, ws, unique("engine"), trusted=True)
    analyst = await user(server, ws, unique("analyst"))
    for who in (engine, analyst):
        await grant(ws, "catalog", "c", who.name, "USE CATALOG", "USE SCHEMA", "SELECT", "EXECUTE")
    stranger = await user(server, ws, unique("stranger"))
    await grant(ws, "catalog", "c", stranger.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "c.s.people", stranger.name, "SELECT")
    sessions = {"engine": connect(spark, ws.url, engine.token, trusted_engine=True),
                "analyst": connect(spark, ws.url, analyst.token),
                "stranger": connect(spark, ws.url, stranger.token)}
    yield sessions, tmp_path
    for s in sessions.values():
        s.close()


async def test_trusted_engine_gets_filtered_rows_and_masked_columns(world, spark):
    sessions, _ = world
    rows = await run(lambda: sessions["engine"].sql("SELECT id, email, region FROM c.s.people ORDER BY id").collect())
    assert [tuple(r) for r in rows] == [(1, "a***", "eu"), (3, "c***", "eu")]
    # no temporary view the library registered holds the unfiltered, unmasked rows
    views = [t.name for t in await run(spark.catalog.listTables) if t.isTemporary and "people" in t.name]
    assert views
    for v in views:
        assert await run(lambda: sorted(r.email for r in spark.table(v).collect())) == ["a***", "c***"]
    # the policies apply under joins and aliases too
    joined = await run(lambda: sessions["engine"].sql(
        "SELECT p.email, s.email AS raw FROM c.s.people p JOIN c.s.secret s ON p.id = s.id ORDER BY p.id").collect())
    assert [tuple(r) for r in joined] == [("a***", "ann@x.org"), ("c***", "cy@z.org")]


async def test_untrusted_engine_is_refused_tables_with_policies(world):
    sessions, _ = world
    with pytest.raises(CatalogError) as e:
        await run(sessions["analyst"].sql, "SELECT count(*) FROM c.s.people")
    assert e.value.code == "PERMISSION_DENIED" and e.value.name == "c.s.people"
    assert "trusted engine" in e.value.message
    # a table without policies is fine for the same caller, and so are catalog functions in a query
    assert (await run(lambda: sessions["analyst"].table("c.s.secret").count())) == 3
    masked = await run(lambda: sessions["analyst"].sql(
        "SELECT c.s.hide_email(email) AS e FROM c.s.secret ORDER BY id").collect())
    assert [r.e for r in masked] == ["a***", "b***", "c***"]



async def test_a_closed_session_leaves_no_temporary_view(world, spark):
    """The Spark session outlives a caller's Shardcat session: its views (what that caller may
    read, unmasked for an excepted group) must not stay for the next one."""
    engine = world[0]["engine"].catalog
    mine = connect(spark, engine.api, engine.token, trusted_engine=True)
    await run(lambda: mine.sql("SELECT id FROM c.s.people").collect())

    def temporary() -> set[str]:
        return {t.name for t in spark.catalog.listTables() if t.isTemporary}

    registered = set(mine._temp_views)
    assert registered and registered <= await run(temporary)
    mine.close()
    assert not registered & await run(temporary)

async def test_denied_table_fails_the_query_with_the_catalogs_reason(world):
    sessions, _ = world
    stranger = sessions["stranger"]
    with pytest.raises(CatalogError) as e:
        await run(stranger.sql, "SELECT * FROM c.s.secret s JOIN c.s.people p ON s.id = p.id")
    # The stranger may not see c.s.secret at all: it answers as a missing table would (security.md).
    assert e.value.code == "NOT_FOUND" and e.value.name == "c.s.secret"
    assert "c.s.secret" in e.value.message and "does not exist" in e.value.message


async def test_path_reads_obey_the_owning_tables_grants(world):
    sessions, tmp_path = world
    with pytest.raises(CatalogError) as e:
        await run(sessions["stranger"].read_path, f"file://{tmp_path}/secret")
    assert e.value.code == "NOT_FOUND" and "c.s.secret" not in str(e.value)    # a path answer names no table
    df = await run(sessions["analyst"].read_path, f"file://{tmp_path}/secret")
    assert await run(df.count) == 3
    # by path, a table's row filter and masks apply as they do by name
    people = await run(sessions["engine"].read_path, f"file://{tmp_path}/people")
    assert await run(lambda: sorted(tuple(r) for r in people.collect())) == [(1, "a***", "eu"), (3, "c***", "eu")]
    with pytest.raises(CatalogError) as e:
        await run(sessions["analyst"].read_path, f"file://{tmp_path}/people")
    assert e.value.code == "PERMISSION_DENIED" and "trusted engine" in e.value.message
