"""listFunctions and loadFunction on shardcat's Iceberg REST catalog: Unity Catalog SQL functions in the spec's
UDF metadata (a "spark" SQL representation; a table function as a udtf), functions without a representation
(a Python body, a type with no Iceberg counterpart) neither listed nor loadable, and the Unity Catalog API's
visibility rules: a user who may not see a function hears it is missing, in every spelling."""

from __future__ import annotations

import pytest
from governance_users import grant, user

P = "/iceberg/v1/catalogs/fn"
NS = "/iceberg/v1/namespaces/fn%1Fs"          # without a warehouse: catalog and schema


def param(name: str, type_name: str, type_text: str, position: int, **extra) -> dict:
    return {"name": name, "type_name": type_name, "type_text": type_text, "type_json": f'"{type_text}"',
            "position": position, **extra}


def sql_function(name: str, params: list, data_type: str, body: str, **extra) -> dict:
    return {"function_info": {
        "name": name, "catalog_name": "fn", "schema_name": "s", "input_params": {"parameters": params},
        "data_type": data_type, "full_data_type": data_type.lower(), "routine_body": "SQL",
        "routine_definition": body, "parameter_style": "S", "is_deterministic": True,
        "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER",
        "specific_name": name, **extra}}


@pytest.fixture
async def fn(ws):
    for path, body in (("/catalogs", {"name": "fn"}), ("/schemas", {"name": "s", "catalog_name": "fn"})):
        status, out = await ws.call("POST", path, json=body)
        assert status == 200, out
    made = [
        sql_function("add_tax", [param("amount", "DOUBLE", "double", 0), param("rate", "DECIMAL", "decimal(5,2)", 1,
                                                                              type_precision=5, type_scale=2)],
                     "DOUBLE", "amount * (1 + rate)", comment="With tax"),
        sql_function("recent", [param("days", "INT", "int", 0)], "TABLE_TYPE", "SELECT id FROM t",
                     return_params={"parameters": [param("id", "LONG", "bigint", 0)]}),
        sql_function("span", [param("i", "INTERVAL", "interval day", 0)], "INT", "1"),
        {"function_info": {**sql_function("py", [], "INT", "return 1")["function_info"], "routine_body": "EXTERNAL",
                           "external_language": "Python", "sql_data_access": "NO_SQL"}},
    ]
    for body in made:
        status, out = await ws.call("POST", "/functions", json=body)
        assert status == 200, out
    return ws


async def test_sql_functions_are_listed_and_loaded_as_udf_metadata(fn):
    for base in (f"{P}/namespaces/s", NS):
        status, body = await fn.call("GET", f"{base}/functions")
        assert status == 200, body
        assert sorted(i["name"] for i in body["identifiers"]) == ["add_tax", "recent"]
    status, body = await fn.call("GET", f"{P}/namespaces/s/functions/add_tax")
    assert status == 200, body
    metadata = body["metadata"]
    assert metadata["format-version"] == 1 and metadata["doc"] == "With tax"
    (definition,) = metadata["definitions"]
    assert definition["definition-id"] == "double,decimal(5,2)" and definition["function-type"] == "udf"
    assert definition["parameters"] == [{"name": "amount", "type": "double"}, {"name": "rate", "type": "decimal(5,2)"}]
    assert definition["return-type"] == "double"
    (version,) = definition["versions"]
    assert version["representations"] == [{"type": "sql", "dialect": "spark", "sql": "amount * (1 + rate)"}]
    assert metadata["definition-log"][0]["definition-versions"] == [{"definition-id": "double,decimal(5,2)",
                                                                     "version-id": 1}]
    status, body = await fn.call("GET", f"{P}/namespaces/s/functions/recent")
    (definition,) = body["metadata"]["definitions"]
    assert definition["function-type"] == "udtf"
    assert definition["return-type"] == {"type": "struct", "fields": [{"name": "id", "type": "long"}]}


async def test_functions_without_a_representation_answer_the_specs_error(fn):
    for name, why in (("py", "not SQL"), ("span", "INTERVAL")):
        status, body = await fn.call("GET", f"{P}/namespaces/s/functions/{name}")
        assert status == 404 and body["error"]["type"] == "NoSuchFunctionException" and why in body["error"]["message"]
    status, body = await fn.call("GET", f"{P}/namespaces/s/functions/nope")
    assert status == 404 and body["error"]["type"] == "NoSuchFunctionException"
    status, body = await fn.call("GET", f"{P}/namespaces/nope/functions")
    assert status == 404 and body["error"]["type"] == "NoSuchNamespaceException"


async def test_who_may_not_see_a_function_hears_it_is_missing(fn, server):
    stranger = await user(server, fn)
    for path in (f"{P}/namespaces/s/functions/add_tax", f"{P}/namespaces/S/functions/ADD_TAX",
                 f"{P}/namespaces/s/functions/add%5Ftax", f"{NS}/functions/add_tax"):
        status, body = await stranger.call("GET", path)
        assert status == 404 and body["error"]["type"] in ("NoSuchFunctionException", "NoSuchNamespaceException"), \
            (path, body)
        assert "amount" not in str(body)
    status, body = await stranger.call("GET", f"{P}/namespaces/s/functions")
    assert status == 404 or body["identifiers"] == []
    reader = await user(server, fn)
    await grant(fn, "catalog", "fn", reader.name, "USE_CATALOG")
    await grant(fn, "schema", "fn.s", reader.name, "USE_SCHEMA")
    await grant(fn, "function", "fn.s.add_tax", reader.name, "EXECUTE")
    status, body = await reader.call("GET", f"{P}/namespaces/s/functions")
    assert [i["name"] for i in body["identifiers"]] == ["add_tax"]
    status, body = await reader.call("GET", f"{P}/namespaces/s/functions/add_tax")
    assert status == 200 and body["metadata"]["definitions"]
    status, body = await reader.call("GET", f"{P}/namespaces/s/functions/recent")
    assert status == 404
