"""The permissions API (GET/PATCH/PUT /permissions, /effective-permissions) through the official
SDK's GrantsApi and plain HTTP; the authorization API (POST /shardcat/authorize)."""

from __future__ import annotations

import pytest
from unitycatalog.client import ApiClient, Configuration
from unitycatalog.client.api.grants_api import GrantsApi
from unitycatalog.client.exceptions import ApiException
from unitycatalog.client.models import PermissionsChange, Privilege, SecurableType, UpdatePermissions

from governance_users import grant, unique, user

TABLE = {"table_type": "MANAGED", "data_source_format": "DELTA", "columns": []}


async def _tree(ws):
    """Catalog c, schema c.s, table c.s.t."""
    c = unique("c")
    assert (await ws.call("POST", "/catalogs", json={"name": c}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": c}))[0] == 200
    status, t = await ws.call("POST", "/tables", json={"name": "t", "catalog_name": c, "schema_name": "s", **TABLE})
    assert status == 200, t
    return c


def _grants_api(ws, token=None) -> ApiClient:
    token = token or ws.token
    return ApiClient(Configuration(host=ws.api), header_name="Authorization", header_value=f"Bearer {token}")


async def _version(server, ws) -> int:
    return (await server.store.get_metastore(ws.metastore_id)).version


async def test_sdk_grants_round_trip(ws):
    c = await _tree(ws)
    async with _grants_api(ws) as client:
        grants = GrantsApi(client)
        out = await grants.update(SecurableType.CATALOG, c, UpdatePermissions(changes=[
            PermissionsChange(principal="alice", add=[Privilege.USE_CATALOG, Privilege.SELECT], remove=[]),
            PermissionsChange(principal="data-eng", add=[Privilege.USE_CATALOG], remove=[])]))
        assert {(a.principal, tuple(a.privileges)) for a in out.privilege_assignments} == {
            ("alice", (Privilege.SELECT, Privilege.USE_CATALOG)), ("data-eng", (Privilege.USE_CATALOG,))}
        got = await grants.get(SecurableType.CATALOG, c, principal="alice")
        assert [(a.principal, a.privileges) for a in got.privilege_assignments] == [
            ("alice", [Privilege.SELECT, Privilege.USE_CATALOG])]
        out = await grants.update(SecurableType.CATALOG, c, UpdatePermissions(changes=[
            PermissionsChange(principal="alice", add=[], remove=[Privilege.SELECT])]))
        assert [a.privileges for a in out.privilege_assignments if a.principal == "alice"] == [[Privilege.USE_CATALOG]]
        # A table and a schema by full name; nothing granted there yet.
        assert (await grants.get(SecurableType.TABLE, f"{c}.s.t")).privilege_assignments == []
        await grants.update(SecurableType.SCHEMA, f"{c}.s", UpdatePermissions(changes=[
            PermissionsChange(principal="alice", add=[Privilege.USE_SCHEMA, Privilege.CREATE_TABLE], remove=[])]))
        got = await grants.get(SecurableType.SCHEMA, f"{c}.s")
        assert [(a.principal, a.privileges) for a in got.privilege_assignments] == [
            ("alice", [Privilege.CREATE_TABLE, Privilege.USE_SCHEMA])]
        with pytest.raises(ApiException) as e:
            await grants.get(SecurableType.TABLE, f"{c}.s.nope")
        assert e.value.status == 404


async def test_old_names_validation_and_put_replace(ws, server):
    c = await _tree(ws)
    body = await grant(ws, "catalog", c, "bob", "USAGE", "use_schema", "ALL_PRIVILEGES")
    assert body == {"privilege_assignments": [
        {"principal": "bob", "privileges": ["ALL PRIVILEGES", "USE CATALOG", "USE SCHEMA"]}]}
    body = await grant(ws, "schema", f"{c}.s", "bob", "USAGE")
    assert body["privilege_assignments"][0]["privileges"] == ["USE SCHEMA"]
    before = await _version(server, ws)
    for kind, name, privilege in (("metastore", ws.metastore_id, "SELECT"), ("table", f"{c}.s.t", "USE CATALOG"),
                                  ("catalog", c, "READ FILES"), ("catalog", c, "NOPE")):
        status, body = await ws.call("PATCH", f"/permissions/{kind}/{name}", json={
            "changes": [{"principal": "bob", "add": [privilege]}]})
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body
        assert privilege.split()[0] in body["message"]
    status, body = await ws.call("GET", f"/permissions/widget/{c}")
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    assert await _version(server, ws) == before     # refusals change nothing

    status, body = await ws.call("PUT", f"/permissions/catalog/{c}", json={"privilege_assignments": [
        {"principal": "carol", "privileges": ["SELECT"]}, {"principal": "bob", "privileges": []}]})
    assert status == 200, body
    assert body == {"privilege_assignments": [{"principal": "carol", "privileges": ["SELECT"]}]}   # as PATCH answers
    status, body = await ws.call("GET", f"/permissions/catalog/{c}")
    assert body == {"privilege_assignments": [{"principal": "carol", "privileges": ["SELECT"]}]}
    # The metastore itself, by id, with the 2.1 spelling of a hyphenated securable type too.
    await grant(ws, "metastore", ws.metastore_id, "carol", "CREATE CATALOG", "CREATE_EXTERNAL_LOCATION")
    status, body = await ws.call("GET", f"/permissions/METASTORE/{ws.metastore_id}", params={"principal": "carol"})
    assert body["privilege_assignments"] == [
        {"principal": "carol", "privileges": ["CREATE CATALOG", "CREATE EXTERNAL LOCATION"]}]


async def test_effective_permissions_say_where_each_comes_from(ws):
    c = await _tree(ws)
    await grant(ws, "catalog", c, "dana", "USE CATALOG", "SELECT", "CREATE SCHEMA")
    await grant(ws, "schema", f"{c}.s", "dana", "USE SCHEMA")
    await grant(ws, "table", f"{c}.s.t", "dana", "MODIFY")
    await grant(ws, "table", f"{c}.s.t", "erin", "SELECT")
    status, body = await ws.call("GET", f"/effective-permissions/table/{c}.s.t")
    assert status == 200, body
    by = {a["principal"]: a["privileges"] for a in body["privilege_assignments"]}
    assert by["erin"] == [{"privilege": "SELECT"}]
    # USE CATALOG / USE SCHEMA / CREATE SCHEMA do not apply to a table; SELECT comes from the catalog.
    assert sorted(by["dana"], key=lambda p: p["privilege"]) == [
        {"privilege": "MODIFY"},
        {"privilege": "SELECT", "inherited_from_type": "CATALOG", "inherited_from_name": c}]
    status, body = await ws.call("GET", f"/effective-permissions/schema/{c}.s", params={"principal": "dana"})
    assert body["privilege_assignments"] == [{"principal": "dana", "privileges": [
        {"privilege": "USE SCHEMA"},
        {"privilege": "SELECT", "inherited_from_type": "CATALOG", "inherited_from_name": c}]}]


async def test_grants_need_administration_and_refusals_change_nothing(ws, server):
    c = await _tree(ws)
    stranger = await user(server, ws)
    await grant(ws, "catalog", c, stranger.name, "USE CATALOG", "SELECT", "ALL PRIVILEGES")
    before = await _version(server, ws)
    status, body = await stranger.call("PATCH", f"/permissions/catalog/{c}", json={
        "changes": [{"principal": stranger.name, "add": ["CREATE SCHEMA"]}]})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body
    assert "MANAGE" in body["message"] and c in body["message"]
    assert await _version(server, ws) == before
    status, body = await ws.call("GET", f"/permissions/catalog/{c}", params={"principal": stranger.name})
    assert body["privilege_assignments"][0]["privileges"] == ["ALL PRIVILEGES", "SELECT", "USE CATALOG"]
    # MANAGE on the catalog: may grant on it and on everything below, without reading the table.
    await grant(ws, "catalog", c, stranger.name, "MANAGE")
    await grant(stranger, "table", f"{c}.s.t", "frank", "SELECT")
    # An owner administers what it owns: a catalog its owner created.
    owner = await user(server, ws)
    await grant(ws, "metastore", ws.metastore_id, owner.name, "CREATE CATALOG")
    mine = unique("mine")
    status, body = await owner.call("POST", "/catalogs", json={"name": mine})
    assert status == 200 and body["owner"] == owner.name, body
    await grant(owner, "catalog", mine, "gina", "USE CATALOG")


async def test_authorize_api_says_how(ws, server):
    c = await _tree(ws)
    group = unique("readers")
    reader = await user(server, ws, groups=[group])
    await grant(ws, "catalog", c, group, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "catalog", c, reader.name, "SELECT")
    items = [{"securable_type": "table", "full_name": f"{c}.s.t", "privilege": "SELECT"},
             {"securable_type": "table", "full_name": f"{c}.s.t", "privilege": "MODIFY"},
             {"securable_type": "catalog", "full_name": c, "privilege": "USAGE"},
             {"securable_type": "table", "full_name": f"{c}.s.gone", "privilege": "SELECT"},
             {"securable_type": "table", "full_name": f"{c}.s.t", "privilege": "read"}]
    status, body = await reader.call("POST", "/shardcat/authorize", json={"items": items})
    assert status == 200, body
    select, modify, usage, gone, read = body["items"]
    assert select["allowed"] and select["how"] == {"source": "grant", "securable_type": "CATALOG", "full_name": c,
                                                   "inherited": True, "privilege": "SELECT"}
    assert not modify["allowed"] and "MODIFY" in modify["reason"]
    assert usage["allowed"] and usage["how"]["via_group"] == group and usage["how"]["inherited"] is False
    assert not gone["allowed"] and "does not exist" in gone["reason"]
    assert read["allowed"]
    # Asking about someone else: admins only.
    status, body = await reader.call("POST", "/shardcat/authorize", json={"principal": "admin", "items": items})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")
    status, body = await ws.call("POST", "/shardcat/authorize", json={"principal": reader.name, "items": items})
    assert status == 200 and [i["allowed"] for i in body["items"]] == [True, False, True, False, True], body
    status, body = await ws.call("POST", "/shardcat/authorize", json={"items": items[:1]})
    assert body["items"][0]["how"] == {"source": "admin", "as": "account admin"}


async def test_rename_and_external_storage_need_their_own_privileges(ws, server):
    c = await _tree(ws)
    owner = await user(server, ws)
    await grant(ws, "catalog", c, owner.name, "USE CATALOG", "USE SCHEMA")
    assert (await ws.call("PATCH", f"/tables/{c}.s.t", json={"owner": owner.name}))[0] == 200
    # The table's owner may change it, but renaming also needs CREATE TABLE in the schema.
    assert (await owner.call("PATCH", f"/tables/{c}.s.t", json={"comment": "mine"}))[0] == 200
    status, body = await owner.call("PATCH", f"/tables/{c}.s.t", json={"new_name": "t2"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and "CREATE TABLE" in body["message"]
    await grant(ws, "schema", f"{c}.s", owner.name, "CREATE TABLE")
    status, body = await owner.call("PATCH", f"/tables/{c}.s.t", json={"new_name": "t2"})
    assert status == 200 and body["full_name"] == f"{c}.s.t2", body

    # An EXTERNAL table inside an external location needs CREATE EXTERNAL TABLE on that location.
    loc = unique("loc")
    url = ws.storage_root.rsplit("/storage/", 1)[0] + f"/ext/{loc}"
    assert (await ws.call("POST", "/storage-credentials", json={
        "name": loc, "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}}))[0] == 200
    assert (await ws.call("POST", "/external-locations", json={"name": loc, "url": url,
                                                               "credential_name": loc}))[0] == 200
    external = {"name": "ext", "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL",
                "data_source_format": "PARQUET", "columns": [], "storage_location": f"{url}/ext"}
    version = await _version(server, ws)
    status, body = await owner.call("POST", "/tables", json=external)
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body
    assert "CREATE EXTERNAL TABLE" in body["message"] and loc in body["message"]
    assert await _version(server, ws) == version
    await grant(ws, "external_location", loc, owner.name, "CREATE EXTERNAL TABLE")
    status, body = await owner.call("POST", "/tables", json=external)
    assert status == 200 and body["owner"] == owner.name, body
    # A catalog whose managed storage lies in the location: CREATE MANAGED STORAGE on it.
    await grant(ws, "metastore", ws.metastore_id, owner.name, "CREATE CATALOG")
    rooted = {"name": unique("rooted"), "storage_root": f"{url}/managed"}
    status, body = await owner.call("POST", "/catalogs", json=rooted)
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and "CREATE MANAGED STORAGE" in body["message"]
    await grant(ws, "external_location", loc, owner.name, "CREATE MANAGED STORAGE")
    status, body = await owner.call("POST", "/catalogs", json=rooted)
    assert status == 200, body


async def test_administration_is_not_data_access(ws, server):
    c = await _tree(ws)
    manager, schema_owner = await user(server, ws), await user(server, ws)
    for u in (manager, schema_owner):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "catalog", c, manager.name, "MANAGE")
    assert (await ws.call("PATCH", f"/schemas/{c}.s", json={"owner": schema_owner.name}))[0] == 200
    items = {"items": [{"name": f"{c}.s.t", "operation": "READ"}]}
    for u in (manager, schema_owner):
        status, table = await u.call("GET", f"/tables/{c}.s.t")     # they administer it: they see it
        assert status == 200, table
        status, body = await u.call("POST", "/resolve", json=items)
        decision = body["items"][0]["authorization"]
        assert decision["allowed"] is False and "SELECT" in decision["reason"], decision
        status, body = await u.call("POST", "/temporary-table-credentials",
                                    json={"table_id": table["table_id"], "operation": "READ"})
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")
        assert (await u.call("PATCH", f"/tables/{c}.s.t", json={"comment": u.name}))[0] == 200


async def test_filtered_lists_page_through_what_is_visible(ws, server):
    c = await _tree(ws)
    for i in range(6):
        assert (await ws.call("POST", "/tables", json={"name": f"x{i}", "catalog_name": c, "schema_name": "s",
                                                       **TABLE}))[0] == 200
    reader = await user(server, ws)
    await grant(ws, "catalog", c, reader.name, "USE CATALOG", "USE SCHEMA")
    for name in ("x1", "x3", "x4"):
        await grant(ws, "table", f"{c}.s.{name}", reader.name, "SELECT")
    seen, token = [], None
    for _ in range(3):
        params = {"catalog_name": c, "schema_name": "s", "max_results": "2", **({"page_token": token} if token else {})}
        status, body = await reader.call("GET", "/tables", params=params)
        assert status == 200, body
        seen.append([t["name"] for t in body["tables"]])
        token = body.get("next_page_token")
        if token is None:
            break
    assert seen == [["x1", "x3"], ["x4"]]
    status, body = await reader.call("GET", "/catalogs")
    assert [x["name"] for x in body["catalogs"]] == [c]       # only the catalog it may use
    status, body = await reader.call("POST", "/table-summaries", json={"catalog_name": c})
    assert [t["full_name"] for t in body["tables"]] == [f"{c}.s.{n}" for n in ("x1", "x3", "x4")]


async def test_share_grants_need_the_share_and_the_recipient(ws, server):
    owner = await user(server, ws)
    share, recipient = unique("share"), unique("rcpt")
    assert (await ws.call("POST", "/shares", json={"name": share}))[0] == 200
    assert (await ws.call("POST", "/recipients", json={"name": recipient, "authentication_type": "TOKEN"}))[0] == 200
    assert (await ws.call("PATCH", f"/shares/{share}", json={"owner": owner.name}))[0] == 200
    change = {"changes": [{"principal": recipient, "add": ["SELECT"]}]}
    status, body = await owner.call("PATCH", f"/shares/{share}/permissions", json=change)
    # a recipient the share owner may not see answers as a missing one
    assert (status, body) == (404, {"error_code": "NOT_FOUND", "message": f"Recipient '{recipient}' does not exist."})
    assert (await ws.call("PATCH", f"/recipients/{recipient}", json={"owner": owner.name}))[0] == 200
    status, body = await owner.call("PATCH", f"/shares/{share}/permissions", json=change)
    assert status == 200 and body["privilege_assignments"] == [{"principal": recipient, "privileges": ["SELECT"]}]


async def test_changing_a_views_owner_needs_membership_of_the_new_owner(ws, server):
    """The 2.1 spec's updateTable rule: a VIEW's owner may only be changed to a principal the caller
    is (or is a member of); other tables' owners change under the usual rules."""
    c = await _tree(ws)
    group = unique("g")
    alice = await user(server, ws, groups=[group])
    bob = unique("bob")
    status, view = await ws.call("POST", "/tables", json={
        "name": "v", "catalog_name": c, "schema_name": "s", "table_type": "VIEW", "columns": [],
        "view_definition": f"SELECT * FROM {c}.s.t"})
    assert status == 200, view
    await grant(ws, "catalog", c, alice.name, "USE CATALOG")
    await grant(ws, "schema", f"{c}.s", alice.name, "USE SCHEMA")
    for name in ("v", "t"):
        assert (await ws.call("PATCH", f"/tables/{c}.s.{name}", json={"owner": alice.name}))[0] == 200

    before = await _version(server, ws)
    status, err = await alice.call("PATCH", f"/tables/{c}.s.v", json={"owner": bob})
    assert (status, err["error_code"]) == (403, "PERMISSION_DENIED") and "member of the new owner" in err["message"]
    assert await _version(server, ws) == before
    assert (await ws.call("GET", f"/tables/{c}.s.v"))[1]["owner"] == alice.name

    status, got = await alice.call("PATCH", f"/tables/{c}.s.v", json={"owner": group})   # a group she is in
    assert status == 200 and got["owner"] == group, got
    status, got = await alice.call("PATCH", f"/tables/{c}.s.t", json={"owner": bob})     # not a view
    assert status == 200 and got["owner"] == bob, got
    status, got = await ws.call("PATCH", f"/tables/{c}.s.v", json={"owner": bob})        # an account admin
    assert status == 200 and got["owner"] == bob, got
