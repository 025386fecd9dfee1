"""Batched resolve expands views and functions into what they depend on, from one snapshot;
cycles, depth limits, unparsable SQL and missing dependencies are reported per item."""

from __future__ import annotations

import json

import pytest

from shardcat.catalog.tree.dependencies import MAX_DEPTH, sql_references

COLUMNS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0,
            "type_json": json.dumps({"name": "id", "type": "long", "nullable": True, "metadata": {}})}]


async def ok(ws, method, path, body=None):
    status, out = await ws.call(method, path, json=body)
    assert status == 200, (path, out)
    return out


async def table(ws, name, tmp_path):
    return await ok(ws, "POST", "/tables", {
        "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLUMNS, "storage_location": f"file://{tmp_path}/{name}"})


async def view(ws, name, sql):
    return await ok(ws, "POST", "/tables", {
        "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "VIEW", "columns": COLUMNS,
        "view_definition": sql})


async def function(ws, name, definition):
    param = {"name": "x", "type_text": "bigint", "type_name": "LONG", "position": 0,
             "type_json": json.dumps({"name": "x", "type": "long", "nullable": True, "metadata": {}})}
    return await ok(ws, "POST", "/functions", {"function_info": {
        "name": name, "catalog_name": "c", "schema_name": "s", "input_params": {"parameters": [param]},
        "data_type": "LONG", "full_data_type": "bigint", "routine_body": "SQL", "routine_definition": definition,
        "parameter_style": "S", "is_deterministic": True, "sql_data_access": "READS_SQL_DATA",
        "is_null_call": False, "security_type": "DEFINER", "specific_name": name}})


async def resolve(ws, *names, **extra):
    return await ok(ws, "POST", "/resolve", {"items": [{"name": n} for n in names], **extra})


@pytest.fixture
async def schema(ws):
    await ok(ws, "POST", "/catalogs", {"name": "c"})
    await ok(ws, "POST", "/schemas", {"name": "s", "catalog_name": "c"})
    return ws


def test_sql_references_qualify_and_skip_ctes():
    tables, functions = sql_references(
        "WITH x AS (SELECT * FROM a) SELECT s2.f(x.id), upper(b.y), other.s3.g(1) FROM x JOIN s2.b b "
        "ON x.id = b.id JOIN `C`.`S`.`Weird-Name` w", "c", "s", query=True)
    assert tables == ["c.s2.b", "c.s.weird-name", "c.s.a"]
    assert functions == ["c.s2.f", "other.s3.g"]
    with pytest.raises(ValueError):
        sql_references("SELECT * FROM (SELECT 1", "c", "s", query=True)
    with pytest.raises(ValueError, match="not a query"):
        sql_references("SELEC * FRM t", "c", "s", query=True)


async def test_views_and_functions_expand_recursively_in_one_snapshot(schema, tmp_path):
    ws = schema
    for name in ("a", "b", "d"):
        await table(ws, name, tmp_path)
    await function(ws, "lookup", "(SELECT max(id) FROM c.s.d WHERE id = x)")
    await view(ws, "inner_v", "SELECT a.id FROM a JOIN s.b ON a.id = b.id")
    await view(ws, "outer_v", "WITH w AS (SELECT id FROM c.s.inner_v) SELECT c.s.lookup(w.id) AS id FROM w")
    before = await ok(ws, "GET", "/resolve/stats")
    out = await resolve(ws, "c.s.outer_v", "c.s.a")
    after = await ok(ws, "GET", "/resolve/stats")
    assert after["resolve_calls"] == before["resolve_calls"] + 1
    outer, a = out["items"]
    assert "error" not in outer, outer
    names = [d["name"] for d in outer["dependencies"]]
    # deepest first: each dependency comes after everything it depends on
    assert sorted(names) == ["c.s.a", "c.s.b", "c.s.d", "c.s.inner_v", "c.s.lookup"]
    assert names.index("c.s.a") < names.index("c.s.inner_v") and names.index("c.s.d") < names.index("c.s.lookup")
    deps = {d["name"]: d for d in outer["dependencies"]}
    assert deps["c.s.lookup"]["securable_type"] == "FUNCTION" and deps["c.s.lookup"]["function"]["name"] == "lookup"
    assert deps["c.s.inner_v"]["table"]["table_type"] == "VIEW"
    assert deps["c.s.inner_v"]["depends_on"] == [{"name": "c.s.a", "securable_type": "TABLE"},
                                                 {"name": "c.s.b", "securable_type": "TABLE"}]
    assert outer["depends_on"] == [{"name": "c.s.inner_v", "securable_type": "TABLE"},
                                   {"name": "c.s.lookup", "securable_type": "FUNCTION"}]
    assert a["depends_on"] == [] and "dependencies" not in a
    # every answer, top-level or dependency, is at the response's version
    version = (await resolve(ws, "c.s.a"))["metastore_version"]
    assert version == out["metastore_version"]   # nothing changed in between
    # asking for no expansion
    flat = await resolve(ws, "c.s.outer_v", expand_dependencies=False)
    assert "dependencies" not in flat["items"][0]


async def test_bad_views_are_errors_naming_the_culprit(schema, tmp_path):
    ws = schema
    await table(ws, "a", tmp_path)
    await view(ws, "cyc1", "SELECT * FROM c.s.cyc2")
    await view(ws, "cyc2", "SELECT * FROM c.s.cyc3 UNION ALL SELECT * FROM a")
    await view(ws, "cyc3", "SELECT * FROM c.s.cyc1")
    await view(ws, "broken", "SELECT * FROM (SELECT id FROM a")
    await view(ws, "over_broken", "SELECT * FROM c.s.broken")
    await view(ws, "dangling", "SELECT * FROM c.s.gone JOIN a USING (id)")
    out = await resolve(ws, "c.s.cyc1", "c.s.broken", "c.s.over_broken", "c.s.dangling", "c.s.a", "c.s.nope")
    cyc, broken, over, dangling, a, nope = out["items"]
    assert cyc["error"]["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "Dependency cycle: c.s.cyc1 -> c.s.cyc2 -> c.s.cyc3 -> c.s.cyc1" in cyc["error"]["message"]
    assert broken["error"]["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "view 'c.s.broken' does not parse" in broken["error"]["message"]
    assert "view 'c.s.broken' does not parse" in over["error"]["message"]
    assert "c.s.over_broken -> c.s.broken" in over["error"]["message"]
    assert dangling["error"]["error_code"] == "NOT_FOUND" and "'c.s.gone'" in dangling["error"]["message"]
    assert "error" not in a and a["table"]["name"] == "a"       # one bad item does not fail the batch
    assert nope["error"]["error_code"] == "NOT_FOUND"


async def test_depth_limit_is_reported_not_looped(schema, tmp_path):
    ws = schema
    await table(ws, "base", tmp_path)
    await view(ws, "v0", "SELECT * FROM base")
    for i in range(1, 5):
        await view(ws, f"v{i}", f"SELECT * FROM v{i - 1}")
    # v4 -> v3 -> v2 -> v1 -> v0 -> base: 5 levels
    deep = (await resolve(ws, "c.s.v4", max_depth=4))["items"][0]
    assert deep["error"]["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "View 'c.s.v4' nests deeper than 4 levels" in deep["error"]["message"]
    fits = (await resolve(ws, "c.s.v4", "c.s.v2", max_depth=5))["items"]
    assert [d["name"] for d in fits[0]["dependencies"]] == ["c.s.base", "c.s.v0", "c.s.v1", "c.s.v2", "c.s.v3"]
    assert [d["name"] for d in fits[1]["dependencies"]] == ["c.s.base", "c.s.v0", "c.s.v1"]
    status, err = await ws.call("POST", "/resolve", json={"items": [{"name": "c.s.v4"}], "max_depth": MAX_DEPTH + 1})
    assert status == 400 and "max_depth" in err["message"]


async def test_if_changed_since_answers_unchanged_with_fresh_decisions(schema, tmp_path):
    ws = schema
    await table(ws, "a", tmp_path)
    await table(ws, "b", tmp_path)
    await view(ws, "v", "SELECT * FROM a JOIN b USING (id)")
    first = await resolve(ws, "c.s.v")
    version = first["metastore_version"]
    out = await ok(ws, "POST", "/resolve", {"items": [{"name": "c.s.v", "if_changed_since": version},
                                                      {"name": "c.s.a", "if_changed_since": 0}]})
    v, a = out["items"]
    assert v["unchanged"] is True and "table" not in v and v["authorization"]["allowed"] is True
    assert [d["name"] for d in v["dependencies"]] == ["c.s.a", "c.s.b"]
    assert all("table" not in d and d["authorization"]["allowed"] for d in v["dependencies"])
    assert "unchanged" not in a and a["table"]["name"] == "a"       # written after version 0
    # a dependency changes: the view is no longer unchanged, though its own row is the same
    await ok(ws, "PATCH", "/tables/c.s.b", {"comment": "changed"})
    again = (await ok(ws, "POST", "/resolve", {"items": [{"name": "c.s.v", "if_changed_since": version}]}))["items"][0]
    assert "unchanged" not in again and again["table"]["name"] == "v"
    assert [d["table"].get("comment") for d in again["dependencies"]] == [None, "changed"]
    status, err = await ws.call("POST", "/resolve", json={"items": [{"name": "c.s.v", "if_changed_since": "x"}]})
    assert status == 400 and "if_changed_since" in err["message"]
