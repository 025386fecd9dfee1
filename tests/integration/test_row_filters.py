"""Row filters and column masks: set by the table's owner through create/update (functions must
exist, columns must be the table's); shown only to trusted engines; untrusted callers get no
access to the data of such tables (resolve, temporary credentials), whatever their grants."""

from __future__ import annotations

from governance_users import grant, unique, user

from test_enforcement_matrix import function

COLUMNS = [{"name": "region", "type_name": "STRING", "type_text": "string", "type_json": '{"type":"string"}',
            "position": 0},
           {"name": "ssn", "type_name": "STRING", "type_text": "string", "type_json": '{"type":"string"}',
            "position": 1, "mask": {"function_name": "CAT.s.redact", "using_column_names": ["region"]}}]


async def _world(ws):
    c = unique("c")
    assert (await ws.call("POST", "/catalogs", json={"name": c}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": c}))[0] == 200
    for f in ("only_eu", "redact"):
        status, body = await ws.call("POST", "/functions", json=function(c, f))
        assert status == 200, body
    columns = [{**col, "mask": {**col["mask"], "function_name": f"{c}.s.redact"}} if "mask" in col else col
               for col in COLUMNS]
    status, table = await ws.call("POST", "/tables", json={
        "name": "people", "catalog_name": c, "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": columns,
        "row_filter": {"function_name": f"{c}.s.only_eu", "input_column_names": ["region"]}})
    assert status == 200, table
    return c, table


async def test_policies_are_checked_and_shown_to_trusted_engines_only(ws, server):
    c, table = await _world(ws)
    name = f"{c}.s.people"
    assert "row_filter" not in table and all("mask" not in col for col in table["columns"])   # ws: untrusted
    engine = await user(server, ws, trusted=True)
    analyst = await user(server, ws)
    for u in (engine, analyst):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    status, seen = await engine.call("GET", f"/tables/{name}")
    assert seen["row_filter"] == {"function_name": f"{c}.s.only_eu", "input_column_names": ["region"]}
    assert seen["columns"][1]["mask"] == {"function_name": f"{c}.s.redact", "using_column_names": ["region"]}
    status, seen = await analyst.call("GET", f"/tables/{name}")
    assert status == 200 and "row_filter" not in seen and "mask" not in seen["columns"][1]
    status, listed = await engine.call("GET", "/tables", params={"catalog_name": c, "schema_name": "s"})
    assert listed["tables"][0]["row_filter"]["function_name"] == f"{c}.s.only_eu"
    status, listed = await analyst.call("GET", "/tables", params={"catalog_name": c, "schema_name": "s"})
    assert "row_filter" not in listed["tables"][0]

    # Resolve: the trusted engine gets the table with its policies; the analyst is refused, with the reason.
    items = {"items": [{"name": name, "operation": "READ"}]}
    status, body = await engine.call("POST", "/resolve", json=items)
    item = body["items"][0]
    assert item["authorization"]["allowed"] and item["table"]["row_filter"]["input_column_names"] == ["region"]
    status, body = await analyst.call("POST", "/resolve", json=items)
    item = body["items"][0]
    assert item["authorization"]["allowed"] is False and "row filter" in item["authorization"]["reason"]
    assert "table" not in item       # a denied item carries no storage details
    status, body = await analyst.call("POST", "/temporary-table-credentials",
                                      json={"table_id": table["table_id"], "operation": "READ"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and "row filter" in body["message"]
    status, body = await engine.call("POST", "/temporary-table-credentials",
                                     json={"table_id": table["table_id"], "operation": "READ"})
    assert status == 200, body

    # Dropping the filter (the owner may) opens the table to the analyst.
    status, body = await analyst.call("PATCH", f"/tables/{name}", json={"row_filter": {}})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")
    plain = [{k: v for k, v in col.items() if k != "mask"} for col in COLUMNS]
    status, body = await ws.call("PATCH", f"/tables/{name}", json={"row_filter": {}, "columns": plain})
    assert status == 200, body
    status, body = await analyst.call("POST", "/resolve", json=items)
    assert body["items"][0]["authorization"]["allowed"] is True


async def test_bad_policies_are_refused(ws, server):
    c, _ = await _world(ws)
    version = (await server.store.get_metastore(ws.metastore_id)).version
    base = {"catalog_name": c, "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
            "columns": [{k: v for k, v in col.items() if k != "mask"} for col in COLUMNS]}
    for bad, says in (({"function_name": f"{c}.s.nope", "input_column_names": ["region"]}, "does not exist"),
                      ({"function_name": f"{c}.s.only_eu", "input_column_names": ["zip"]}, "'zip'"),
                      ({"function_name": f"{c}.s.only_eu", "extra": 1}, "unknown field"),
                      ({"input_column_names": []}, "function_name")):
        status, body = await ws.call("POST", "/tables", json={"name": "t", **base, "row_filter": bad})
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body
        assert says in body["message"], body
    masked = [{**base["columns"][0], "mask": {"function_name": f"{c}.s.gone"}}]
    status, body = await ws.call("POST", "/tables", json={"name": "t", **{**base, "columns": masked}})
    assert status == 400 and "mask" in body["message"] and "does not exist" in body["message"]
    assert (await server.store.get_metastore(ws.metastore_id)).version == version
