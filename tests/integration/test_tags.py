"""Tags through the entity-tag-assignments API: on every securable that takes them and on table
columns, shown in the assets' answers, versioned and in the change feed and the audit log;
governed tags (tag policies) refuse values outside their list and callers without ASSIGN; search
finds assets by tag and by column tag."""

from __future__ import annotations

from governance_users import grant, unique, user

from test_enforcement_matrix import function, ok

TAGS = "/entity-tag-assignments"
COLUMNS = [{"name": "id", "type_name": "LONG", "position": 0},
           {"name": "email", "type_name": "STRING", "position": 1}]


async def _world(ws) -> str:
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    for t in ("people", "orders"):
        await ok(ws, "POST", "/tables", json={"name": t, "catalog_name": c, "schema_name": "s",
                                              "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": COLUMNS})
    await ok(ws, "POST", "/tables", json={"name": "v", "catalog_name": c, "schema_name": "s", "table_type": "VIEW",
                                          "columns": COLUMNS, "view_definition": f"SELECT * FROM {c}.s.people"})
    await ok(ws, "POST", "/volumes", json={"name": "raw", "catalog_name": c, "schema_name": "s",
                                           "volume_type": "MANAGED"})
    await ok(ws, "POST", "/functions", json=function(c, "f"))
    await ok(ws, "POST", "/models", json={"name": "m", "catalog_name": c, "schema_name": "s"})
    return c


async def _tag(ws, entity_type, entity_name, key, value=None):
    body = {"entity_type": entity_type, "entity_name": entity_name, "tag_key": key}
    if value is not None:
        body["tag_value"] = value
    return await ws.call("POST", TAGS, json=body)


async def test_tags_on_every_securable_and_column_are_shown_listed_updated_and_removed(ws):
    c = await _world(ws)
    entities = [("catalogs", c, f"/catalogs/{c}"), ("schemas", f"{c}.s", f"/schemas/{c}.s"),
                ("tables", f"{c}.s.people", f"/tables/{c}.s.people"), ("views", f"{c}.s.v", f"/tables/{c}.s.v"),
                ("volumes", f"{c}.s.raw", f"/volumes/{c}.s.raw"), ("functions", f"{c}.s.f", f"/functions/{c}.s.f"),
                ("registered_models", f"{c}.s.m", f"/models/{c}.s.m")]
    for entity_type, name, path in entities:
        status, body = await _tag(ws, entity_type, name, "domain", "sales")
        assert status == 200, (entity_type, body)
        assert body["tag_key"] == "domain" and body["tag_value"] == "sales" and body["entity_name"] == name
        assert (await _tag(ws, entity_type, name, "pii"))[0] == 200            # a key without a value
        shown = await ok(ws, "GET", path)
        assert shown["tags"] == {"domain": "sales", "pii": None}, (entity_type, shown)
        assert "tag_index" not in shown           # search's, not part of the answer

    status, body = await _tag(ws, "columns", f"{c}.s.people.email", "pii", "email")
    assert status == 200, body
    table = await ok(ws, "GET", f"/tables/{c}.s.people")
    assert table["columns"][1]["tags"] == {"pii": "email"} and "tags" not in table["columns"][0]
    got = await ok(ws, "GET", f"{TAGS}/columns/{c}.s.people.email/tags/pii")
    assert got == {"entity_type": "columns", "entity_name": f"{c}.s.people.email", "tag_key": "pii",
                   "tag_value": "email"}

    # The same key twice: ALREADY_EXISTS; PATCH changes the value; DELETE removes it.
    status, body = await _tag(ws, "tables", f"{c}.s.people", "domain", "hr")
    assert status == 409 and body["error_code"] == "ALREADY_EXISTS"
    body = await ok(ws, "PATCH", f"{TAGS}/tables/{c}.s.people/tags/domain", json={"tag_value": "hr"})
    assert body["tag_value"] == "hr"
    assert (await ok(ws, "GET", f"/tables/{c}.s.people"))["tags"]["domain"] == "hr"
    await ok(ws, "DELETE", f"{TAGS}/tables/{c}.s.people/tags/domain")
    status, body = await ws.call("GET", f"{TAGS}/tables/{c}.s.people/tags/domain")
    assert status == 404 and body["error_code"] == "NOT_FOUND"
    assert (await ok(ws, "GET", f"/tables/{c}.s.people"))["tags"] == {"pii": None}
    status, body = await ws.call("PATCH", f"{TAGS}/tables/{c}.s.people/tags/domain", json={"tag_value": "x"})
    assert status == 404

    # Listing pages through the keys in order.
    for k in ("a1", "a2", "a3"):
        assert (await _tag(ws, "schemas", f"{c}.s", k, "v"))[0] == 200
    first = await ok(ws, "GET", f"{TAGS}/schemas/{c}.s/tags", params={"max_results": "2"})
    assert [t["tag_key"] for t in first["tag_assignments"]] == ["a1", "a2"]
    rest = await ok(ws, "GET", f"{TAGS}/schemas/{c}.s/tags", params={"page_token": first["next_page_token"]})
    assert [t["tag_key"] for t in rest["tag_assignments"]] == ["a3", "domain", "pii"]
    assert "next_page_token" not in rest

    # Replacing a table's columns keeps the tags of the columns that stay.
    await ok(ws, "PATCH", f"/tables/{c}.s.people", json={"columns": [*COLUMNS, {"name": "age", "type_name": "INT",
                                                                                "position": 2}]})
    assert (await ok(ws, "GET", f"/tables/{c}.s.people"))["columns"][1]["tags"] == {"pii": "email"}


async def test_bad_tag_input_is_refused_and_writes_nothing(ws):
    c = await _world(ws)
    for body, code in [
        ({"entity_type": "tables", "entity_name": f"{c}.s.people", "tag_key": "a=b", "tag_value": "x"}, 400),
        ({"entity_type": "tables", "entity_name": f"{c}.s.people", "tag_key": " a", "tag_value": "x"}, 400),
        ({"entity_type": "tables", "entity_name": f"{c}.s.people", "tag_key": "k" * 256}, 400),
        ({"entity_type": "tables", "entity_name": f"{c}.s.people", "tag_key": "k", "tag_value": "v" * 1001}, 400),
        ({"entity_type": "tables", "entity_name": f"{c}.s.people", "tag_key": "k", "tag_value": 3}, 400),
        ({"entity_type": "gadgets", "entity_name": f"{c}.s.people", "tag_key": "k"}, 400),
        ({"entity_type": "tables", "entity_name": f"{c}.s.nope", "tag_key": "k"}, 404),
        ({"entity_type": "columns", "entity_name": f"{c}.s.people.nope", "tag_key": "k"}, 404),
        ({"entity_type": "columns", "entity_name": "nope", "tag_key": "k"}, 400),
        ({"entity_type": "volumes", "entity_name": f"{c}.s.people", "tag_key": "k"}, 404),   # a table, not a volume
    ]:
        status, answer = await ws.call("POST", TAGS, json=body)
        assert status == code and "error_code" in answer, (body, answer)
    assert "tags" not in await ok(ws, "GET", f"/tables/{c}.s.people")


async def test_tag_writes_are_metastore_writes_in_the_change_feed_and_the_audit_log(ws):
    c = await _world(ws)
    before = (await ok(ws, "GET", "/shardcat/changes", params={"since_version": "0"}))["metastore_version"]
    assert (await _tag(ws, "tables", f"{c}.s.people", "domain", "sales"))[0] == 200
    feed = await ok(ws, "GET", "/shardcat/changes", params={"since_version": str(before)})
    assert feed["metastore_version"] == before + 1
    assert feed["changes"][0]["securables"][0]["full_name"] == f"{c}.s.people"
    assert feed["changes"][0]["securables"][0]["change"] == "UPDATE"
    audit = await ok(ws, "GET", "/shardcat/audit", params={"metastore_id": ws.metastore_id})
    assert any(e.get("action") == "createEntityTagAssignment" for e in audit["events"]), audit["events"][-3:]


async def test_applying_a_tag_needs_apply_tag_and_reading_it_needs_reading_the_asset(server, ws):
    c = await _world(ws)
    analyst = await user(server, ws)
    await grant(ws, "catalog", c, analyst.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    status, body = await _tag(analyst, "tables", f"{c}.s.people", "domain", "sales")
    assert status == 403 and "APPLY TAG" in body["message"]
    outsider = await user(server, ws)
    status, body = await _tag(outsider, "tables", f"{c}.s.people", "domain", "sales")
    assert status == 404          # a table the caller may not see answers as a missing one
    await grant(ws, "schema", f"{c}.s", analyst.name, "APPLY TAG")
    status, body = await _tag(analyst, "tables", f"{c}.s.people", "domain", "sales")
    assert status == 200, body
    assert body["updated_by"] == analyst.name
    status, body = await outsider.call("GET", f"{TAGS}/tables/{c}.s.people/tags")
    assert status == 404
    listed = await ok(analyst, "GET", f"{TAGS}/tables/{c}.s.people/tags")
    assert listed["tag_assignments"][0]["tag_value"] == "sales"


async def test_governed_tags_refuse_other_values_and_callers_without_assign(server, ws):
    c = await _world(ws)
    key = unique("class")
    steward, tagger = await user(server, ws), await user(server, ws)
    for u in (steward, tagger):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA", "APPLY TAG")
    status, body = await steward.call("POST", "/tag-policies", json={"tag_key": key, "values": [{"name": "x"}]})
    assert status == 403                  # only metastore admins manage tag policies
    policy = await ok(ws, "POST", "/tag-policies", json={
        "tag_key": key, "description": "data class", "values": [{"name": "public"}, {"name": "pii"}],
        "assign_principals": [steward.name]})
    assert policy["values"] == [{"name": "public"}, {"name": "pii"}]
    assert (await ok(ws, "GET", f"/tag-policies/{key}"))["assign_principals"] == [steward.name]
    assert key in [p["tag_key"] for p in (await ok(ws, "GET", "/tag-policies"))["tag_policies"]]
    assert "tag_policies" not in await ok(ws, "GET", f"/metastores/{ws.metastore_id}")
    status, body = await ws.call("POST", "/tag-policies", json={"tag_key": key})
    assert status == 409

    table = f"{c}.s.people"
    status, body = await _tag(steward, "tables", table, key, "secret")
    assert status == 400 and "public, pii" in body["message"]
    status, body = await _tag(steward, "tables", table, key)
    assert status == 400                  # a governed tag with values needs one
    status, body = await _tag(tagger, "tables", table, key, "pii")
    assert status == 403 and "ASSIGN" in body["message"]
    status, body = await _tag(steward, "columns", f"{table}.email", key, "pii")
    assert status == 200, body
    status, body = await _tag(steward, "tables", table, key, "public")
    assert status == 200, body
    # Removing a governed tag needs ASSIGN too.
    status, body = await tagger.call("DELETE", f"{TAGS}/tables/{table}/tags/{key}")
    assert status == 403
    # An ungoverned key stays open to anyone with APPLY TAG.
    assert (await _tag(tagger, "tables", table, unique("free"), "anything"))[0] == 200

    # The policy changes: the new values hold from then on.
    await ok(ws, "PATCH", f"/tag-policies/{key}", json={"values": [{"name": "restricted"}]})
    status, body = await steward.call("PATCH", f"{TAGS}/tables/{table}/tags/{key}", json={"tag_value": "pii"})
    assert status == 400
    await ok(ws, "DELETE", f"/tag-policies/{key}")
    status, body = await tagger.call("PATCH", f"{TAGS}/tables/{table}/tags/{key}", json={"tag_value": "anything"})
    assert status == 200, body


async def test_search_finds_assets_by_tag_value_and_column_tag(server, ws):
    c = await _world(ws)
    assert (await _tag(ws, "tables", f"{c}.s.orders", "domain", "sales"))[0] == 200
    assert (await _tag(ws, "schemas", f"{c}.s", "domain", "finance"))[0] == 200
    assert (await _tag(ws, "columns", f"{c}.s.people.email", "pii", "email"))[0] == 200
    assert (await _tag(ws, "volumes", f"{c}.s.raw", "pii"))[0] == 200

    found = await ok(ws, "GET", "/shardcat/search", params={"query": "tag:pii"})
    assert [r["full_name"] for r in found["results"]] == [f"{c}.s.people", f"{c}.s.raw"]
    people = found["results"][0]
    assert people["matching_columns"] == ["email"] and people["match"] == "tag"
    found = await ok(ws, "GET", "/shardcat/search", params={"query": "tag:domain=sales"})
    assert [r["full_name"] for r in found["results"]] == [f"{c}.s.orders"]
    assert found["results"][0]["tags"] == {"domain": "sales"}
    found = await ok(ws, "GET", "/shardcat/search", params={"query": "tag:domain"})
    assert [r["full_name"] for r in found["results"]] == [f"{c}.s", f"{c}.s.orders"]
    found = await ok(ws, "GET", "/shardcat/search", params={"query": "peo tag:pii=email"})
    assert [r["full_name"] for r in found["results"]] == [f"{c}.s.people"]
    found = await ok(ws, "GET", "/shardcat/search", params={"query": "tag:pii", "securable_types": "VOLUME"})
    assert [r["full_name"] for r in found["results"]] == [f"{c}.s.raw"]
    status, body = await ws.call("GET", "/shardcat/search", params={"query": "tag:a,b"})
    assert status == 400

    # A caller sees only what it may read.
    analyst = await user(server, ws)
    await grant(ws, "table", f"{c}.s.orders", analyst.name, "SELECT")
    await grant(ws, "catalog", c, analyst.name, "USE CATALOG", "USE SCHEMA")
    found = await ok(analyst, "GET", "/shardcat/search", params={"query": "tag:pii"})
    assert found["results"] == []
    found = await ok(analyst, "GET", "/shardcat/search", params={"query": "tag:domain=sales"})
    assert [r["full_name"] for r in found["results"]] == [f"{c}.s.orders"]
