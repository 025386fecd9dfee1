"""What adding a data object to a share needs (issue 28, class 4): the share's owner (or a
metastore admin), and on the object what reading its data needs: SELECT on a table or view,
READ VOLUME on a volume, EXECUTE on a model, SELECT on a schema (all its tables), each with USE
CATALOG and USE SCHEMA above. An object the caller may not see answers exactly as a missing one;
tables with row filters or column masks (or a schema holding one) cannot be shared. A refused
update changes nothing. Share permissions: a share or recipient the caller may not see answers
as a missing one too."""

from __future__ import annotations

import pytest
from governance_users import grant, unique, user

from test_row_filters import _world as policy_world

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}', "position": 0}]


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def world(ws, server) -> dict:
    """Catalog c, schema c.s with table t, volume v and model m; a user `owner` who may create
    shares and owns share `share`, with no privilege on c yet."""
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": c, "schema_name": "s", "table_type": "MANAGED",
                                          "data_source_format": "DELTA", "columns": COLS})
    await ok(ws, "POST", "/volumes", json={"name": "v", "catalog_name": c, "schema_name": "s",
                                           "volume_type": "MANAGED"})
    await ok(ws, "POST", "/models", json={"name": "m", "catalog_name": c, "schema_name": "s"})
    owner = await user(server, ws)
    await grant(ws, "metastore", ws.metastore_id, owner.name, "CREATE SHARE")
    share = unique("share")
    await ok(owner, "POST", "/shares", json={"name": share})
    return {"c": c, "owner": owner, "share": share}


def add(name: str, kind: str = "TABLE") -> dict:
    return {"updates": [{"action": "ADD", "data_object": {"name": name, "data_object_type": kind}}]}


async def objects(ws, share: str) -> list:
    return (await ok(ws, "GET", f"/shares/{share}"))["objects"]


async def test_adding_a_table_needs_select_and_use_above_it(ws, server):
    w = await world(ws, server)
    c, owner, share = w["c"], w["owner"], w["share"]
    missing = await owner.call("PATCH", f"/shares/{share}", json=add(f"{c}.s.nope"))
    assert missing == (404, {"error_code": "NOT_FOUND", "message": f"Table '{c}.s.nope' does not exist."})

    # Invisible (no privilege at all, or SELECT without USE SCHEMA): the same answer as a missing table.
    for privileges in ((), ("SELECT",)):
        if privileges:
            await grant(ws, "table", f"{c}.s.t", owner.name, *privileges)
            await grant(ws, "catalog", c, owner.name, "USE CATALOG")
        status, body = await owner.call("PATCH", f"/shares/{share}", json=add(f"{c}.s.t"))
        assert (status, body) == (404, {"error_code": "NOT_FOUND", "message": f"Table '{c}.s.t' does not exist."})
    # Visible but no SELECT: refused, by name.
    await grant(ws, "schema", f"{c}.s", owner.name, "USE SCHEMA")
    await grant(ws, "table", f"{c}.s.t", owner.name, "BROWSE", remove=["SELECT"])
    status, body = await owner.call("PATCH", f"/shares/{share}", json=add(f"{c}.s.t"))
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and "SELECT" in body["message"], body
    # The whole-list form (the 2.1 spec's `objects`) is held to the same rule.
    status, body = await owner.call("PATCH", f"/shares/{share}", json={"objects": [{"name": f"{c}.s.t"}]})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body
    assert await objects(ws, share) == []          # nothing written by the refusals

    await grant(ws, "table", f"{c}.s.t", owner.name, "SELECT")
    added = await ok(owner, "PATCH", f"/shares/{share}", json=add(f"{c}.s.t"))
    assert [o["name"] for o in added["objects"]] == [f"{c}.s.t"]
    # Objects already shared keep their place when the whole list is sent again, even once SELECT is gone.
    await grant(ws, "table", f"{c}.s.t", owner.name, remove=["SELECT"])
    again = await ok(owner, "PATCH", f"/shares/{share}", json={"objects": [{"name": f"{c}.s.t", "comment": "x"}]})
    assert [(o["name"], o.get("comment")) for o in again["objects"]] == [(f"{c}.s.t", "x")]
    # Removing needs nothing more.
    await ok(owner, "PATCH", f"/shares/{share}",
             json={"updates": [{"action": "REMOVE", "data_object": {"name": f"{c}.s.t"}}]})


@pytest.mark.parametrize("kind, name, privilege, securable", [
    ("VOLUME", "s.v", "READ VOLUME", "volume"),
    ("MODEL", "s.m", "EXECUTE", "registered_model"),
    ("SCHEMA", "s", "SELECT", "schema"),
])
async def test_other_objects_need_their_read_privilege(ws, server, kind, name, privilege, securable):
    w = await world(ws, server)
    c, owner, share = w["c"], w["owner"], w["share"]
    full = f"{c}.{name}"
    status, body = await owner.call("PATCH", f"/shares/{share}", json=add(full, kind))
    gone = await owner.call("PATCH", f"/shares/{share}", json=add(f"{c}.{name}x", kind))
    assert (status, body["error_code"]) == (404, "NOT_FOUND") == (gone[0], gone[1]["error_code"]), body
    assert body["message"].replace(full, "X") == gone[1]["message"].replace(f"{c}.{name}x", "X")
    await grant(ws, "catalog", c, owner.name, "USE CATALOG", "USE SCHEMA", "BROWSE")
    status, body = await owner.call("PATCH", f"/shares/{share}", json=add(full, kind))
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and privilege in body["message"], body
    await grant(ws, securable, full, owner.name, privilege)
    added = await ok(owner, "PATCH", f"/shares/{share}", json=add(full, kind))
    assert [(o["name"], o["data_object_type"]) for o in added["objects"]] == [(full, kind)]


async def test_tables_with_row_filters_or_masks_cannot_be_shared(ws, server):
    c, table = await policy_world(ws)       # c.s.people: a row filter and a column mask
    share = unique("share")
    await ok(ws, "POST", "/shares", json={"name": share})
    for body in (add(f"{c}.s.people"), add(f"{c}.s", "SCHEMA"), {"objects": [{"name": f"{c}.s.people"}]}):
        status, answer = await ws.call("PATCH", f"/shares/{share}", json=body)     # even an admin
        assert (status, answer["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), answer
        assert f"{c}.s.people" in answer["message"] and "cannot be shared" in answer["message"], answer
    assert await objects(ws, share) == []
    # A caller without SELECT learns nothing about the policies: refused for the privilege first.
    owner = await user(server, ws)
    await grant(ws, "metastore", ws.metastore_id, owner.name, "CREATE SHARE")
    await grant(ws, "catalog", c, owner.name, "USE CATALOG", "USE SCHEMA", "BROWSE")
    mine = unique("share")
    await ok(owner, "POST", "/shares", json={"name": mine})
    status, answer = await owner.call("PATCH", f"/shares/{mine}", json=add(f"{c}.s.people"))
    assert (status, answer["error_code"]) == (403, "PERMISSION_DENIED") and "row filter" not in answer["message"]


async def test_share_and_recipient_the_caller_may_not_see_answer_as_missing(ws, server):
    w = await world(ws, server)
    owner, share = w["owner"], w["share"]
    stranger = await user(server, ws)
    recipient = unique("rcpt")
    await ok(ws, "POST", "/recipients", json={"name": recipient, "authentication_type": "TOKEN"})
    change = {"changes": [{"principal": recipient, "add": ["SELECT"]}]}
    # someone else's share, and a share that does not exist
    for name in (share, unique("nope")):
        for method, path, body in (("GET", f"/shares/{name}", None), ("PATCH", f"/shares/{name}", {"comment": "x"}),
                                   ("DELETE", f"/shares/{name}", None),
                                   ("GET", f"/shares/{name}/permissions", None),
                                   ("PATCH", f"/shares/{name}/permissions", change)):
            status, answer = await stranger.call(method, path, json=body)
            gone = {"error_code": "NOT_FOUND", "message": f"Share '{name}' does not exist."}
            assert (status, answer) == (404, gone), (method, path)
    # a recipient the share's owner may not see, and one that does not exist: granting or revoking
    for name in (recipient, unique("nope")):
        for verb in ("add", "remove"):
            status, answer = await owner.call("PATCH", f"/shares/{share}/permissions",
                                              json={"changes": [{"principal": name, verb: ["SELECT"]}]})
            assert (status, answer) == (404, {"error_code": "NOT_FOUND",
                                              "message": f"Recipient '{name}' does not exist."}), verb
    # Once granted (by someone who may), the share's owner may revoke it: the share names it.
    await ok(ws, "PATCH", f"/shares/{share}/permissions", json=change)
    revoked = await ok(owner, "PATCH", f"/shares/{share}/permissions",
                       json={"changes": [{"principal": recipient, "remove": ["SELECT"]}]})
    assert revoked["privilege_assignments"] == []
