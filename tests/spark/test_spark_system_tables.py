"""System tables read by Spark through shardcat's Spark plugin, by name: the audit log and lineage for a
user granted SELECT (refused to one without), information_schema for a trusted engine with the catalog's
row filter on the caller applied in the plan (only the rows of the user Spark runs as), refused to an
engine that is not trusted."""

from __future__ import annotations

import pytest

from tests.integration.governance_users import grant, unique, user
from tests.spark.helpers import add_catalog, ok, run

pytestmark = pytest.mark.spark_connectors

PLUGIN = "shardcat.spark.ShardcatCatalog"


def system_session(spark, caller):
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "2")
    session.conf.set("spark.databricks.delta.snapshotPartitions", "2")
    add_catalog(session, "system", PLUGIN, {"uri": caller.url, "token": caller.token})
    return session


async def refreshed_until_audited(ws, action: str, tries: int = 20):
    """Refresh until the audit table holds `action` (its rows reach PostgreSQL from a buffer written every
    0.2 s), looked at with delta-rs: each Spark query costs seconds."""
    import asyncio
    import deltalake
    location = (await ok(ws, "GET", "/tables/system.access.audit"))["storage_location"]
    for _ in range(tries):
        await ok(ws, "POST", "/shardcat/system-tables/refresh")
        actions = deltalake.DeltaTable(location).to_pyarrow_table(columns=["action"])["action"].to_pylist()
        if action in actions:
            return
        await asyncio.sleep(0.3)
    raise AssertionError("the audit table never showed it")


@pytest.fixture
async def world(ws, server, spark):
    await ok(ws, "POST", "/catalogs", {"name": "main"})
    await ok(ws, "POST", "/schemas", {"name": "s", "catalog_name": "main"})
    for name in ("a", "b"):
        await ok(ws, "POST", "/tables", {"name": name, "catalog_name": "main", "schema_name": "s",
                                         "table_type": "MANAGED", "data_source_format": "DELTA",
                                         "columns": [{"name": "id", "type_name": "LONG"}]})
    await ok(ws, "POST", "/shardcat/lineage", {"target": "main.s.a", "sources": [{"name": "main.s.b"}], "job": "j"})
    await ok(ws, "POST", "/shardcat/system-tables")
    # the trusted engine's principal is the user Spark runs as: what current_user() answers in its plan
    spark_user = await run(lambda: spark.sql("SELECT current_user()").collect()[0][0])
    engine = await user(server, ws, spark_user, trusted=True)
    analyst = await user(server, ws, unique("analyst"))
    stranger = await user(server, ws, unique("stranger"))
    for who in (engine, analyst, stranger):
        await grant(ws, "catalog", "main", who.name, "USE CATALOG", "USE SCHEMA")
        await grant(ws, "catalog", "system", who.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "main.s.a", engine.name, "SELECT")
    await grant(ws, "table", "main.s.b", analyst.name, "SELECT")
    for who in (engine, analyst):
        await grant(ws, "schema", "system.information_schema", who.name, "SELECT", "EXECUTE")
    await grant(ws, "table", "system.access.audit", analyst.name, "SELECT")
    await grant(ws, "table", "system.access.table_lineage", analyst.name, "SELECT")
    await ok(ws, "POST", "/shardcat/system-tables/refresh")
    return {"engine": engine, "analyst": analyst, "stranger": stranger}


async def test_spark_reads_audit_and_lineage_with_a_grant_only(ws, spark, world):
    analyst = system_session(spark, world["analyst"])
    await refreshed_until_audited(ws, "reportLineage")
    rows = await run(lambda: analyst.sql("SELECT count(*) FROM system.access.audit "
                                         "WHERE action = 'reportLineage'").collect())
    assert rows[0][0] == 1
    edges = await run(lambda: analyst.sql("SELECT source_name, target_name FROM system.access.table_lineage")
                      .collect())
    assert [tuple(r) for r in edges] == [("main.s.b", "main.s.a")]
    stranger = system_session(spark, world["stranger"])
    with pytest.raises(Exception) as e:
        await run(lambda: stranger.sql("SELECT count(*) FROM system.access.audit").collect())
    assert "NOT_FOUND: Table 'system." in str(e.value)        # what it may not see answers as missing


async def test_a_trusted_engine_reads_only_its_callers_rows_of_information_schema(ws, spark, world):
    engine = system_session(spark, world["engine"])
    rows = await run(lambda: engine.sql("SELECT DISTINCT visible_to, table_name FROM system.information_schema.tables "
                                        "WHERE table_catalog = 'main'").collect())
    assert [tuple(r) for r in rows] == [(world["engine"].name, "a")]
    # the table holds the other principals' rows too (the admin's, the analyst's): the filter took them out
    status, body = await world["engine"].call("GET", "/tables/system.information_schema.tables")
    assert body["row_filter"]["function_name"] == "system.information_schema.visible_to_caller"
    analyst = system_session(spark, world["analyst"])          # not a trusted engine: refused
    with pytest.raises(Exception) as e:
        await run(lambda: analyst.sql("SELECT * FROM system.information_schema.tables").collect())
    assert "NOT_FOUND: Table 'system." in str(e.value)        # what it may not see answers as missing
