"""Delta Sharing catalog objects over raw HTTP (the SDK has no sharing APIs): shares and their
data objects, share permissions, recipients and their tokens, providers and their profiles."""

from __future__ import annotations

import json
import time
import uuid

from shardcat.auth import hash_token

COLS = [{"name": "id", "type_name": "LONG"}, {"name": "day", "type_name": "STRING"}]
PROFILE = {"shareCredentialsVersion": 1, "endpoint": "https://sharing.example.com/delta-sharing/",
           "bearerToken": "very-secret-token", "expirationTime": "2030-01-01T00:00:00.0Z"}


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def world(ws):
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    for name in ("a", "b"):
        await ok(ws, "POST", "/tables", json={"name": name, "catalog_name": "main", "schema_name": "s",
                                              "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": COLS})


async def test_share_objects(ws):
    await world(ws)
    t0 = int(time.time() * 1000)
    share = await ok(ws, "POST", "/shares", json={"name": "Sales", "comment": "q3", "objects": [{"name": "x"}]})
    assert share["name"] == "sales" and share["comment"] == "q3" and share["objects"] == []   # objects: IGN on create
    assert share["owner"] == share["created_by"] == "admin" and share["created_at"] >= t0 - 5
    assert str(uuid.UUID(share["id"])) == share["id"]

    updated = await ok(ws, "PATCH", "/shares/sales", json={"updates": [
        {"action": "ADD", "data_object": {"name": "MAIN.s.a", "data_object_type": "TABLE", "cdf_enabled": True,
                                          "history_data_sharing_status": "ENABLED", "start_version": 0,
                                          "partitions": [{"values": [{"name": "day", "op": "EQUAL",
                                                                      "value": "2024-01-01"}]}]}},
        {"action": "ADD", "data_object": {"name": "main.s.b", "shared_as": "s.bee", "comment": "b!"}},
    ]})
    a, b = updated["objects"]
    assert a["name"] == "main.s.a" and a["data_object_type"] == "TABLE" and a["shared_as"] == "s.a"
    assert a["cdf_enabled"] is True and a["history_data_sharing_status"] == "ENABLED" and a["start_version"] == 0
    assert a["partitions"] == [{"values": [{"name": "day", "op": "EQUAL", "value": "2024-01-01"}]}]
    assert a["added_by"] == "admin" and a["added_at"] >= t0 - 5 and a["status"] == "ACTIVE"
    assert b["shared_as"] == "s.bee" and b["comment"] == "b!"
    assert (await ok(ws, "GET", "/shares/sales"))["objects"] == updated["objects"]

    again = await ok(ws, "PATCH", "/shares/sales", json={"updates": [
        {"action": "UPDATE", "data_object": {"name": "main.s.a", "cdf_enabled": False, "comment": "now"}},
        {"action": "REMOVE", "data_object": {"name": "main.s.b"}},
    ]})
    assert [o["name"] for o in again["objects"]] == ["main.s.a"]
    assert again["objects"][0]["cdf_enabled"] is False and again["objects"][0]["comment"] == "now"
    assert again["objects"][0]["partitions"] == a["partitions"]   # UPDATE keeps what it does not name

    # The 2.1 form: `objects` is the whole list (and the spec's partition_specification wrapping).
    replaced = await ok(ws, "PATCH", "/shares/sales", json={"objects": [
        {"name": "main.s.b", "partition_specification": {"partitions": [{"values": [{"name": "day", "op": "LIKE",
                                                                                     "value": "2024%"}]}]}},
        {"name": "main.s", "data_object_type": "SCHEMA"}]})
    assert [(o["name"], o["data_object_type"]) for o in replaced["objects"]] == [("main.s.b", "TABLE"),
                                                                                ("main.s", "SCHEMA")]
    assert replaced["objects"][0]["partitions"][0]["values"][0]["op"] == "LIKE"

    renamed = await ok(ws, "PATCH", "/shares/sales", json={"new_name": "sales2", "comment": "c2"})
    assert renamed["name"] == "sales2" and renamed["id"] == share["id"] and renamed["objects"] == replaced["objects"]
    assert [s["name"] for s in (await ok(ws, "GET", "/shares"))["shares"]] == ["sales2"]
    await ok(ws, "DELETE", "/shares/sales2")
    assert (await ok(ws, "GET", "/shares"))["shares"] == []


async def test_recipients_tokens_and_share_permissions(ws, server):
    await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}",
             json={"delta_sharing_recipient_token_lifetime_in_seconds": 3600})
    t0 = int(time.time() * 1000)
    made = await ok(ws, "POST", "/recipients", json={
        "name": "Acme", "authentication_type": "TOKEN", "comment": "partner",
        "ip_access_list": {"allowed_ip_addresses": ["10.0.0.0/8", "192.168.1.7"]}})
    assert made["name"] == "acme" and made["authentication_type"] == "TOKEN"
    assert made["ip_access_list"] == {"allowed_ip_addresses": ["10.0.0.0/8", "192.168.1.7"]}
    [token] = made["tokens"]
    plain = token["bearer_token"]
    assert token["activation_url"] and t0 + 3_599_000 <= token["expiration_time"] <= t0 + 3_700_000
    # Only the hash is stored; the plain token is never shown again.
    row = await server.store.pool.fetchrow(
        "SELECT info FROM assets WHERE metastore_id = $1 AND namespace = 'recipient'", uuid.UUID(ws.metastore_id))
    assert plain not in json.dumps(row["info"])
    assert row["info"]["tokens"][0]["token_hash"] == hash_token(plain).hex()
    got = await ok(ws, "GET", "/recipients/acme")
    assert "bearer_token" not in got["tokens"][0] and "token_hash" not in got["tokens"][0]
    assert got["tokens"][0]["id"] == token["id"]

    rotated = await ok(ws, "POST", "/recipients/acme/rotate-token", json={"existing_token_expire_in_seconds": 60})
    old, new = rotated["tokens"]
    assert old["id"] == token["id"] and old["expiration_time"] <= int(time.time() * 1000) + 60_000
    assert new["bearer_token"] != plain and "bearer_token" not in old
    rotated = await ok(ws, "POST", "/recipients/acme/rotate-token", json={"existing_token_expire_in_seconds": 0})
    assert len(rotated["tokens"]) == 2 and rotated["tokens"][0]["id"] == new["id"]

    updated = await ok(ws, "PATCH", "/recipients/acme", json={"ip_access_list": {"allowed_ip_addresses": []},
                                                              "comment": "c"})
    assert updated["ip_access_list"] == {"allowed_ip_addresses": []} and updated["comment"] == "c"

    await ok(ws, "POST", "/shares", json={"name": "s1"})
    await ok(ws, "POST", "/shares", json={"name": "s2"})
    await ok(ws, "POST", "/recipients", json={"name": "other", "authentication_type": "DATABRICKS",
                                              "data_recipient_global_metastore_id": "aws:us-west-2:" + str(uuid.uuid4())})
    perms = await ok(ws, "PATCH", "/shares/s1/permissions", json={"changes": [
        {"principal": "ACME", "add": ["SELECT"]}, {"principal": "other", "add": ["SELECT"]}]})
    assert perms == {"privilege_assignments": [{"principal": "acme", "privileges": ["SELECT"]},
                                               {"principal": "other", "privileges": ["SELECT"]}]}
    await ok(ws, "PATCH", "/shares/s2/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    assert await ok(ws, "GET", "/shares/s1/permissions") == perms
    mine = await ok(ws, "GET", "/recipients/acme/share-permissions")
    assert mine == {"permissions_out": [
        {"share_name": "s1", "privilege_assignments": [{"principal": "acme", "privileges": ["SELECT"]}]},
        {"share_name": "s2", "privilege_assignments": [{"principal": "acme", "privileges": ["SELECT"]}]}]}

    # A renamed recipient keeps its grants; a deleted one loses them.
    await ok(ws, "PATCH", "/recipients/acme", json={"new_name": "acme2"})
    assert (await ok(ws, "GET", "/shares/s1/permissions"))["privilege_assignments"][0]["principal"] == "acme2"
    await ok(ws, "PATCH", "/shares/s1/permissions", json={"changes": [{"principal": "other", "remove": ["SELECT"]}]})
    await ok(ws, "DELETE", "/recipients/acme2")
    assert await ok(ws, "GET", "/shares/s1/permissions") == {"privilege_assignments": []}
    assert [r["name"] for r in (await ok(ws, "GET", "/recipients"))["recipients"]] == ["other"]


async def test_providers(ws):
    made = await ok(ws, "POST", "/providers", json={"name": "Vendor", "authentication_type": "TOKEN",
                                                    "recipient_profile_str": json.dumps(PROFILE), "comment": "v"})
    assert made["name"] == "vendor" and made["comment"] == "v"
    assert made["recipient_profile"] == {"endpoint": PROFILE["endpoint"], "share_credentials_version": 1}
    assert "very-secret-token" not in json.dumps(made)
    assert json.loads(made["recipient_profile_str"])["endpoint"] == PROFILE["endpoint"]
    assert await ok(ws, "GET", "/providers/vendor") == made
    assert "very-secret-token" not in json.dumps(await ok(ws, "GET", "/providers"))

    # The provider's shares this metastore knows: those its catalogs were made from.
    await ok(ws, "POST", "/catalogs", json={"name": "shared_c", "provider_name": "vendor", "share_name": "daily"})
    await ok(ws, "POST", "/catalogs", json={"name": "plain"})
    assert await ok(ws, "GET", "/providers/vendor/shares") == {"shares": [{"name": "daily"}]}

    profile2 = {**PROFILE, "endpoint": "https://other.example.com/ds/"}
    updated = await ok(ws, "PATCH", "/providers/vendor", json={"recipient_profile_str": json.dumps(profile2),
                                                               "new_name": "vendor2"})
    assert updated["name"] == "vendor2" and updated["recipient_profile"]["endpoint"] == profile2["endpoint"]
    await ok(ws, "DELETE", "/providers/vendor2")
    assert (await ok(ws, "GET", "/providers"))["providers"] == []
