"""Views through `/tables`, as the open-source spec (0.6) has them: `view_dependencies` name
existing tables, views and functions, checked on create and on a PATCH that replaces them; a
METRIC_VIEW needs at least one; getTable takes the spec's `read_streaming_table_as_managed` /
`read_materialized_view_as_managed` flags. Plain HTTP: the SDK that unitycatalog-ai pins
(`unitycatalog-client` 0.4) has no VIEW table type.
"""

from __future__ import annotations

import pytest

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0,
         "type_json": '{"name": "id", "type": "long", "nullable": true, "metadata": {}}'}]


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


@pytest.fixture
async def tables(ws):
    """Catalog c, schema s, a managed table c.s.base and a function c.s.double; the SDK's TablesApi."""
    await ok(ws, "POST", "/catalogs", json={"name": "c"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "c"})
    await ok(ws, "POST", "/tables", json={"name": "base", "catalog_name": "c", "schema_name": "s",
                                          "table_type": "MANAGED", "data_source_format": "DELTA",
                                          "columns": [{"name": "id", "type_name": "LONG", "position": 0}]})
    await ok(ws, "POST", "/functions", json={"function_info": {
        "name": "double", "catalog_name": "c", "schema_name": "s", "input_params": {"parameters": []},
        "data_type": "LONG", "full_data_type": "LONG", "routine_body": "SQL", "routine_definition": "2",
        "parameter_style": "S", "is_deterministic": True, "sql_data_access": "NO_SQL", "is_null_call": False,
        "security_type": "DEFINER", "specific_name": "double"}})
    return Tables(ws)


class Tables:
    """The table calls of these tests, answering (status, body)."""

    def __init__(self, ws):
        self.ws = ws

    async def create(self, body: dict):
        return await self.ws.call("POST", "/tables", json=body)

    async def get(self, full_name: str, **params):
        return await self.ws.call("GET", f"/tables/{full_name}",
                                  params={k: str(v).lower() for k, v in params.items()})


def deps(*names: str) -> dict:
    return {"dependencies": [
        {"function": {"function_full_name": n[3:]}} if n.startswith("fn:") else {"table": {"table_full_name": n}}
        for n in names]}


def view(name: str, table_type="VIEW", dependencies=None, sql="SELECT id FROM c.s.base") -> dict:
    body = {"name": name, "catalog_name": "c", "schema_name": "s", "table_type": table_type, "columns": COLS,
            "view_definition": sql}
    if dependencies is not None:
        body["view_dependencies"] = dependencies
    return body


async def made(tables: Tables, body: dict) -> dict:
    status, answer = await tables.create(body)
    assert status == 200, answer
    return answer


async def test_views_name_tables_views_and_functions(ws, tables):
    v1 = await made(tables, view("v1", dependencies=deps("c.s.base", "fn:c.s.double")))
    assert v1["view_dependencies"] == deps("c.s.base", "fn:c.s.double")
    # A view over a view; names are case-insensitive and answered as stored.
    v2 = await made(tables, view("v2", dependencies=deps("C.S.V1"), sql="SELECT id FROM c.s.v1"))
    assert v2["view_dependencies"] == deps("c.s.v1")
    status, got = await tables.get("c.s.v2", read_streaming_table_as_managed=True,
                                   read_materialized_view_as_managed=False)
    assert (status, got) == (200, v2)
    # Without a list (the Spark connector sends none when it cannot tell): allowed.
    bare = await made(tables, view("bare"))
    assert "view_dependencies" not in bare
    metric = await made(tables, view("m", "METRIC_VIEW", deps("c.s.base"), sql="version: 0.1"))
    assert metric["table_type"] == "METRIC_VIEW" and metric["view_dependencies"] == deps("c.s.base")
    listed = await ok(ws, "GET", "/tables", params={"catalog_name": "c", "schema_name": "s"})
    assert {t["name"]: t.get("view_dependencies") for t in listed["tables"] if t["table_type"] != "MANAGED"} == {
        "v1": deps("c.s.base", "fn:c.s.double"), "v2": deps("c.s.v1"), "bare": None, "m": deps("c.s.base")}


@pytest.mark.parametrize("dependencies, error", [
    (deps("c.s.missing"), 404),
    (deps("fn:c.s.missing"), 404),
    (deps("fn:c.s.base"), 404),       # a table is not a function
    (deps("c.nowhere.base"), 404),
    (deps("c.s"), 400),
])
async def test_dependencies_must_exist(tables, dependencies, error):
    status, body = await tables.create(view("v", dependencies=dependencies))
    assert status == error, body
    assert (await tables.get("c.s.v"))[0] == 404


async def test_a_metric_view_needs_dependencies(tables):
    for empty in (None, {"dependencies": []}):
        status, body = await tables.create(view("m", "METRIC_VIEW", empty, sql="version: 0.1"))
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body


@pytest.mark.parametrize("raw", [
    {"dependencies": [{}]},
    {"dependencies": [{"table": {"table_full_name": "c.s.base"}, "function": {"function_full_name": "c.s.double"}}]},
    {"dependencies": [{"table": {"name": "c.s.base"}}]},
    {"dependencies": "c.s.base"},
])
async def test_malformed_dependencies_are_refused(ws, tables, raw):
    status, body = await ws.call("POST", "/tables", json={
        "name": "v", "catalog_name": "c", "schema_name": "s", "table_type": "VIEW", "columns": [],
        "view_definition": "SELECT 1", "view_dependencies": raw})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body
    assert "view_dependencies" in body["message"]


async def test_a_patch_replacing_dependencies_is_checked(ws, tables):
    await made(tables, view("v", dependencies=deps("c.s.base")))
    status, body = await ws.call("PATCH", "/tables/c.s.v", json={
        "view_dependencies": {"dependencies": [{"table": {"table_full_name": "c.s.gone"}}]}})
    assert (status, body["error_code"]) == (404, "NOT_FOUND"), body
    assert (await tables.get("c.s.v"))[1]["view_dependencies"] == deps("c.s.base")
    await ok(ws, "PATCH", "/tables/c.s.v", json={
        "view_dependencies": {"dependencies": [{"function": {"function_full_name": "c.s.double"}}]}})
    assert (await tables.get("c.s.v"))[1]["view_dependencies"] == deps("fn:c.s.double")


async def test_a_table_keeps_no_view_dependencies(ws, tables):
    made = await ok(ws, "POST", "/tables", json={
        "name": "t", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [],
        "view_dependencies": {"dependencies": [{"table": {"table_full_name": "c.s.base"}}]}})
    assert "view_dependencies" not in made
