"""ABAC policies: a column mask or row filter attached by tag on a catalog or schema reaches every
matching table under it, including tables created after the policy; trusted engines receive it
(getTable, lists, resolve), excepted principals do not, untrusted engines are refused the data;
the precedence over a table's own filter; the policies in effect visible to the table's owner."""

from __future__ import annotations

from governance_users import grant, unique, user

from test_enforcement_matrix import function, ok

COLUMNS = [{"name": "region", "type_name": "STRING", "position": 0},
           {"name": "email", "type_name": "STRING", "position": 1},
           {"name": "ssn", "type_name": "STRING", "position": 2}]


async def _catalog(ws) -> str:
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    for f in ("redact", "only_eu", "hash"):
        await ok(ws, "POST", "/functions", json=function(c, f))
    return c


async def _table(ws, c: str, name: str, **extra) -> dict:
    return await ok(ws, "POST", "/tables", json={"name": name, "catalog_name": c, "schema_name": "s",
                                                 "table_type": "MANAGED", "data_source_format": "DELTA",
                                                 "columns": COLUMNS, **extra})


async def _tag(ws, entity_type, name, key, value=None):
    body = {"entity_type": entity_type, "entity_name": name, "tag_key": key}
    if value is not None:
        body["tag_value"] = value
    await ok(ws, "POST", "/entity-tag-assignments", json=body)


def _mask_policy(c: str, name: str, to: list[str], excepted: list[str] = (), on: str = "CATALOG",
                 where: str | None = None) -> dict:
    return {"name": name, "on_securable_type": on, "on_securable_fullname": where or c,
            "policy_type": "POLICY_TYPE_COLUMN_MASK", "for_securable_type": "TABLE",
            "to_principals": to, "except_principals": list(excepted),
            "match_columns": [{"condition": "hasTag('pii')", "alias": "pii_col"},
                              {"condition": "hasTagValue('geo', 'region')", "alias": "geo"}],
            "column_mask": {"function_name": f"{c}.s.redact", "on_column": "pii_col", "using": [{"alias": "geo"}]}}


async def _people(server, ws):
    engine = await user(server, ws, trusted=True, groups=["analysts"])
    excepted = await user(server, ws, trusted=True, groups=["analysts", unique("auditors")])
    untrusted = await user(server, ws, groups=["analysts"])
    return engine, excepted, untrusted


async def test_a_mask_by_tag_reaches_a_table_created_after_the_policy(server, ws):
    c = await _catalog(ws)
    engine, excepted, untrusted = await _people(server, ws)
    auditors = [g for g in (await server.store.pool.fetch(
        "SELECT p.name FROM principals p JOIN group_members m ON m.group_id = p.id "
        "JOIN principals u ON u.id = m.member_id WHERE u.name = $1", excepted.name)) if g["name"] != "analysts"][0]
    policy = await ok(ws, "POST", "/policies", json=_mask_policy(c, "mask_pii", ["analysts"], [auditors["name"]]))
    assert policy["id"] and policy["column_mask"]["on_column"] == "pii_col"

    table = await _table(ws, c, "people")           # created after the policy
    name = f"{c}.s.people"
    await _tag(ws, "columns", f"{name}.email", "pii", "email")
    await _tag(ws, "columns", f"{name}.region", "geo", "region")
    for u in (engine, excepted, untrusted):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA", "SELECT")

    mask = {"function_name": f"{c}.s.redact", "using_column_names": ["region"]}
    # The trusted engine gets the mask on the pii column, through getTable, lists and resolve.
    seen = await ok(engine, "GET", f"/tables/{name}")
    assert seen["columns"][1]["mask"] == mask and "mask" not in seen["columns"][0]
    assert "mask" not in seen["columns"][2] and seen["effective_policies"] == ["mask_pii"]
    listed = await ok(engine, "GET", "/tables", params={"catalog_name": c, "schema_name": "s"})
    assert listed["tables"][0]["columns"][1]["mask"] == mask
    items = {"items": [{"name": name, "operation": "READ"}]}
    item = (await ok(engine, "POST", "/resolve", json=items))["items"][0]
    assert item["authorization"]["allowed"] and item["table"]["columns"][1]["mask"] == mask
    # the policy's function comes with it, as a table's own mask function does
    assert [d["name"] for d in item["dependencies"]] == [f"{c}.s.redact"]

    # The excepted group's member reads it unmasked.
    item = (await ok(excepted, "POST", "/resolve", json=items))["items"][0]
    assert item["authorization"]["allowed"] and all("mask" not in col for col in item["table"]["columns"])
    assert "effective_policies" not in await ok(excepted, "GET", f"/tables/{name}")

    # An untrusted engine the policy governs is refused the data, with the reason.
    item = (await ok(untrusted, "POST", "/resolve", json=items))["items"][0]
    assert item["authorization"]["allowed"] is False and "column masks" in item["authorization"]["reason"]
    status, body = await untrusted.call("POST", "/temporary-table-credentials",
                                        json={"table_id": table["table_id"], "operation": "READ"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")

    # Untag the column: the policy no longer applies; the untrusted engine may read again.
    await ok(ws, "DELETE", f"/entity-tag-assignments/columns/{name}.email/tags/pii")
    item = (await ok(untrusted, "POST", "/resolve", json=items))["items"][0]
    assert item["authorization"]["allowed"] is True
    seen = await ok(engine, "GET", f"/tables/{name}")
    assert all("mask" not in col for col in seen["columns"])

    # A table whose pii column has no geo column for the policy's argument: the policy does not apply.
    other = await ok(ws, "POST", "/tables", json={"name": "nogeo", "catalog_name": c, "schema_name": "s",
                                                  "table_type": "MANAGED", "data_source_format": "DELTA",
                                                  "columns": [{**col, "position": i} for i, col in
                                                              enumerate(COLUMNS[1:])]})
    await _tag(ws, "columns", f"{c}.s.nogeo.email", "pii")
    assert other and all("mask" not in col for col in (await ok(engine, "GET", f"/tables/{c}.s.nogeo"))["columns"])


async def test_row_filter_policy_when_condition_and_precedence_over_the_tables_own(server, ws):
    c = await _catalog(ws)
    engine = await user(server, ws, trusted=True)
    await grant(ws, "catalog", c, engine.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    own = {"function_name": f"{c}.s.hash", "input_column_names": ["ssn"]}
    await _table(ws, c, "eu", row_filter=own)
    await _table(ws, c, "us", row_filter=own)
    await _tag(ws, "tables", f"{c}.s.eu", "residency", "eu")
    await _tag(ws, "columns", f"{c}.s.eu.region", "geo", "region")
    await _tag(ws, "columns", f"{c}.s.us.region", "geo", "region")
    await ok(ws, "POST", "/policies", json={
        "name": "eu_only", "on_securable_type": "SCHEMA", "on_securable_fullname": f"{c}.s",
        "policy_type": "POLICY_TYPE_ROW_FILTER", "for_securable_type": "TABLE", "to_principals": ["account users"],
        "when_condition": "hasTagValue('residency', 'eu')",
        "match_columns": [{"condition": "hasTagValue('geo', 'region')", "alias": "r"}],
        "row_filter": {"function_name": f"{c}.s.only_eu", "using": [{"alias": "r"}]}})
    # The policy's filter replaces the table's own where the when_condition holds; elsewhere the own stays.
    eu = await ok(engine, "GET", f"/tables/{c}.s.eu")
    assert eu["row_filter"] == {"function_name": f"{c}.s.only_eu", "input_column_names": ["region"]}
    assert (await ok(engine, "GET", f"/tables/{c}.s.us"))["row_filter"] == own

    # A second policy filtering the same table for the same caller: refused (fail closed).
    await ok(ws, "POST", "/policies", json={
        "name": "second", "on_securable_type": "CATALOG", "on_securable_fullname": c,
        "policy_type": "POLICY_TYPE_ROW_FILTER", "for_securable_type": "TABLE", "to_principals": [engine.name],
        "when_condition": "hasTag('residency')",
        "match_columns": [{"condition": "hasTag('geo')", "alias": "r"}],
        "row_filter": {"function_name": f"{c}.s.hash", "using": [{"alias": "r"}]}})
    item = (await ok(engine, "POST", "/resolve", json={"items": [{"name": f"{c}.s.eu"}]}))["items"][0]
    assert item["authorization"]["allowed"] is False and "conflicting" in item["authorization"]["reason"]
    await ok(ws, "DELETE", f"/policies/CATALOG/{c}/second")
    item = (await ok(engine, "POST", "/resolve", json={"items": [{"name": f"{c}.s.eu"}]}))["items"][0]
    assert item["authorization"]["allowed"] is True

    # The table's owner sees the policies in effect on it (inherited from its schema and catalog).
    owner = await user(server, ws)
    await grant(ws, "catalog", c, owner.name, "USE CATALOG", "USE SCHEMA")
    await ok(ws, "PATCH", f"/tables/{c}.s.eu", json={"owner": owner.name})
    seen = await ok(owner, "GET", f"/policies/TABLE/{c}.s.eu", params={"include_inherited": "true"})
    assert [p["name"] for p in seen["policies"]] == ["eu_only"]
    assert (await ok(owner, "GET", f"/policies/TABLE/{c}.s.eu"))["policies"] == []
    status, body = await owner.call("GET", f"/policies/SCHEMA/{c}.s")
    assert status == 403                           # the schema's policies: its administrators only
    status, body = await engine.call("GET", f"/policies/TABLE/{c}.s.eu", params={"include_inherited": "true"})
    assert status == 403


async def test_policy_management_needs_administration_and_checks_its_input(server, ws):
    c = await _catalog(ws)
    outsider = await user(server, ws)
    await grant(ws, "catalog", c, outsider.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    status, body = await outsider.call("POST", "/policies", json=_mask_policy(c, "p", ["analysts"]))
    assert status == 403
    version = (await server.store.get_metastore(ws.metastore_id)).version
    for change, says in [({"policy_type": "POLICY_TYPE_GRANT"}, "policy_type"),
                         ({"for_securable_type": "VOLUME"}, "for_securable_type"),
                         ({"to_principals": []}, "to_principals"),
                         ({"when_condition": "isAdmin()"}, "hasTag"),
                         ({"column_mask": {"function_name": f"{c}.s.nope", "on_column": "pii_col"}}, "does not exist"),
                         ({"column_mask": {"function_name": f"{c}.s.redact", "on_column": "zz"}}, "on_column"),
                         ({"column_mask": {"function_name": f"{c}.s.redact", "on_column": "pii_col",
                                           "using": [{"constant": "1"}]}}, "constant"),
                         ({"on_securable_type": "VOLUME"}, "on_securable_type"),
                         ({"on_securable_fullname": unique("gone")}, "does not exist")]:
        status, body = await ws.call("POST", "/policies", json={**_mask_policy(c, "p", ["analysts"]), **change})
        assert status in (400, 404) and says in body["message"], (change, body)
    assert (await server.store.get_metastore(ws.metastore_id)).version == version
    await ok(ws, "POST", "/policies", json=_mask_policy(c, "p", ["analysts"]))
    status, body = await ws.call("POST", "/policies", json=_mask_policy(c, "p", ["analysts"]))
    assert status == 409
    updated = await ok(ws, "PATCH", f"/policies/CATALOG/{c}/p", json={"comment": "masks pii", "to_principals": ["x"]})
    assert updated["comment"] == "masks pii" and updated["to_principals"] == ["x"]
    assert (await ok(ws, "GET", f"/policies/CATALOG/{c}/p"))["comment"] == "masks pii"
    await ok(ws, "DELETE", f"/policies/CATALOG/{c}/p")
    status, body = await ws.call("GET", f"/policies/CATALOG/{c}/p")
    assert status == 404


async def test_a_table_an_abac_policy_reaches_cannot_be_shared(server, ws):
    """A recipient would read it unmasked: as with a table's own masks, adding it to a share is
    refused, and a schema holding it too."""
    c = await _catalog(ws)
    await ok(ws, "POST", "/policies", json=_mask_policy(c, "mask_pii", ["account users"]))
    await _table(ws, c, "people")
    await _tag(ws, "columns", f"{c}.s.people.email", "pii", "email")
    await _tag(ws, "columns", f"{c}.s.people.region", "geo", "region")
    share = unique("share")
    await ok(ws, "POST", "/shares", json={"name": share})
    for name, kind in ((f"{c}.s.people", "TABLE"), (f"{c}.s", "SCHEMA")):
        status, body = await ws.call("PATCH", f"/shares/{share}", json={
            "updates": [{"action": "ADD", "data_object": {"name": name, "data_object_type": kind}}]})
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body
        assert "cannot be shared" in body["message"] and "ABAC" in body["message"]
    # Without the tag no policy reaches it, and it may be shared.
    await ok(ws, "DELETE", f"/entity-tag-assignments/columns/{c}.s.people.email/tags/pii")
    await ok(ws, "PATCH", f"/shares/{share}", json={
        "updates": [{"action": "ADD", "data_object": {"name": f"{c}.s.people", "data_object_type": "TABLE"}}]})
