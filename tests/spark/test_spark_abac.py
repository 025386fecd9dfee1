"""shardcat.spark under an ABAC policy: a column mask attached by tag on the catalog reaches a
table created after it; the trusted engine reads the column masked, a member of the excepted
group reads it in clear, an untrusted engine is refused the table."""

from __future__ import annotations

import pytest

from shardcat.spark import CatalogError, connect
from shardcat.spark.types import to_columns

from tests.integration.governance_users import grant, unique, user
from tests.spark.helpers import ok, run
from tests.spark.test_spark_governance import function


async def test_an_abac_mask_by_tag_is_applied_by_spark(ws, server, spark, tmp_path):
    await ok(ws, "POST", "/catalogs", {"name": "c"})
    await ok(ws, "POST", "/schemas", {"name": "s", "catalog_name": "c"})
    await function(ws, "hide_email", ["email"], "concat(substr(email, 1, 1), '***')")
    auditors = unique("auditors")
    await ok(ws, "POST", "/policies", {
        "name": "mask_pii", "on_securable_type": "CATALOG", "on_securable_fullname": "c",
        "policy_type": "POLICY_TYPE_COLUMN_MASK", "for_securable_type": "TABLE",
        "to_principals": ["account users"], "except_principals": [auditors],
        "match_columns": [{"condition": "hasTag('pii')", "alias": "pii"}],
        "column_mask": {"function_name": "c.s.hide_email", "on_column": "pii"}})

    people = spark.createDataFrame([(1, "ann@x.org"), (2, "bob@y.org")], "id long, email string")
    await run(lambda: people.write.parquet(f"file://{tmp_path}/people"))
    await ok(ws, "POST", "/tables", {
        "name": "people", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": to_columns(people.schema),
        "storage_location": f"file://{tmp_path}/people"})
    await ok(ws, "POST", "/entity-tag-assignments", {"entity_type": "columns", "entity_name": "c.s.people.email",
                                                      "tag_key": "pii"})
    engine = await user(server, ws, unique("engine"), trusted=True)
    auditor = await user(server, ws, unique("auditor"), trusted=True, groups=[auditors])
    analyst = await user(server, ws, unique("analyst"))
    for who in (engine, auditor, analyst):
        await grant(ws, "catalog", "c", who.name, "USE CATALOG", "USE SCHEMA", "SELECT", "EXECUTE")
    sessions = {"engine": connect(spark, ws.url, engine.token, trusted_engine=True),
                "auditor": connect(spark, ws.url, auditor.token, trusted_engine=True),
                "analyst": connect(spark, ws.url, analyst.token)}
    try:
        rows = await run(lambda: sessions["engine"].sql("SELECT id, email FROM c.s.people ORDER BY id").collect())
        assert [tuple(r) for r in rows] == [(1, "a***"), (2, "b***")]
        rows = await run(lambda: sessions["auditor"].sql("SELECT id, email FROM c.s.people ORDER BY id").collect())
        assert [tuple(r) for r in rows] == [(1, "ann@x.org"), (2, "bob@y.org")]
        with pytest.raises(CatalogError) as e:
            await run(sessions["analyst"].sql, "SELECT count(*) FROM c.s.people")
        assert e.value.code == "PERMISSION_DENIED" and "trusted engine" in e.value.message
    finally:
        for s in sessions.values():
            s.close()
