"""Batched resolve hands out temporary storage credentials where data will be touched.

Each allowed READ or WRITE item with storage (a table, a volume, the asset owning a path; for a
view, each base table among its dependencies) carries `temporary_credentials` in the
temporary-credentials endpoints' shape, scoped to that asset's storage; a denied item carries
none, nor does anything when the request says `"credentials": false`; a credential that cannot be
vended (gs://, abfss://, s3:// with no covering credential) is that item's `temporary_credentials_error`, the batch stands. s3:// runs
against test_vending.py's moto server (IAM and session policies enforced), whose fixtures are
imported here.
"""

from __future__ import annotations

import time

from governance_users import grant, user
from test_row_filters import _world as policy_world
from test_vending import denied, lake, moto, ok, session_policies_enforced, sts, vended_s3  # noqa: F401

from shardcat.governance import vending

COLS = [{"name": "id", "type_name": "LONG"}]
CREDS = "temporary_credentials"


async def _local_world(ws, tmp_path) -> dict:
    """Catalog c, schema s: external table a (file://), managed table m, view v over a, managed volume vol."""
    await ok(ws, "POST", "/catalogs", json={"name": "c"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "c"})
    base = {"catalog_name": "c", "schema_name": "s", "columns": COLS}
    out = {
        "a": await ok(ws, "POST", "/tables", json={**base, "name": "a", "table_type": "EXTERNAL",
                                                   "data_source_format": "PARQUET",
                                                   "storage_location": f"file://{tmp_path}/ext/a"}),
        "m": await ok(ws, "POST", "/tables", json={**base, "name": "m", "table_type": "MANAGED",
                                                   "data_source_format": "DELTA"}),
        "v": await ok(ws, "POST", "/tables", json={**base, "name": "v", "table_type": "VIEW",
                                                   "view_definition": "SELECT id FROM c.s.a"}),
        "vol": await ok(ws, "POST", "/volumes", json={"catalog_name": "c", "schema_name": "s", "name": "vol",
                                                      "volume_type": "MANAGED"}),
    }
    return out


def _fresh_hour(cred: dict) -> bool:
    left = cred["expiration_time"] - time.time() * 1000
    return 3500 * 1000 < left <= 3600 * 1000 + 5000


async def test_file_credentials_on_read_write_volume_path_and_view_items(ws, tmp_path):
    w = await _local_world(ws, tmp_path)
    out = await ok(ws, "POST", "/resolve", json={"items": [
        {"name": "c.s.a"},
        {"name": "c.s.m", "operation": "WRITE"},
        {"name": "c.s.vol", "securable_type": "VOLUME", "operation": "WRITE"},
        {"path": w["a"]["storage_location"] + "/part-0.parquet"},
        {"name": "c.s.v"},
        {"name": "c.s.missing"},
    ]})
    a, m, vol, by_path, v, missing = out["items"]
    # The same shape as POST /temporary-table-credentials: url and expiry, no secret for file://.
    endpoint = await ok(ws, "POST", "/temporary-table-credentials",
                        json={"table_id": w["a"]["table_id"], "operation": "READ"})
    assert set(a[CREDS]) == set(endpoint) == {"url", "expiration_time"}
    assert a[CREDS]["url"] == w["a"]["storage_location"] == endpoint["url"] and _fresh_hour(a[CREDS])
    assert m[CREDS]["url"] == w["m"]["storage_location"] and _fresh_hour(m[CREDS])
    assert vol[CREDS]["url"] == w["vol"]["storage_location"]
    # A path item: scoped to the storage of the asset owning the path (the item's decision is on it).
    assert by_path["name"] == "c.s.a" and by_path[CREDS]["url"] == w["a"]["storage_location"]
    # A view has no storage: nothing for the view itself, credentials for the base table it reads.
    assert CREDS not in v and "temporary_credentials_error" not in v
    (dep,) = v["dependencies"]
    assert dep["name"] == "c.s.a" and dep[CREDS]["url"] == w["a"]["storage_location"]
    assert CREDS not in missing


async def test_denied_items_and_credentials_false_get_none(ws, server, tmp_path):
    w = await _local_world(ws, tmp_path)
    reader = await user(server, ws)
    await grant(ws, "catalog", "c", reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "c.s.a", reader.name, "SELECT")
    items = [{"name": "c.s.a"}, {"name": "c.s.a", "operation": "WRITE"}, {"name": "c.s.m"},
             {"path": w["m"]["storage_location"]}]
    out = await ok(reader, "POST", "/resolve", json={"items": items})
    read_a, write_a, m, by_path = out["items"]
    assert read_a["authorization"]["allowed"] and read_a[CREDS]["url"] == w["a"]["storage_location"]
    assert write_a["authorization"]["allowed"] is False, write_a
    for item in (m, by_path):      # a table the reader may not see answers as a missing one
        assert item["error"]["error_code"] == "NOT_FOUND" and "authorization" not in item, item
    for item in (write_a, m, by_path):
        assert CREDS not in item and "temporary_credentials_error" not in item and "table" not in item

    # Metadata only: the same answer with no credentials anywhere (items or dependencies).
    out = await ok(ws, "POST", "/resolve", json={"credentials": False, "items": items + [{"name": "c.s.v"}]})
    assert all(i["authorization"]["allowed"] for i in out["items"])
    for item in out["items"]:
        for entry in (item, *item.get("dependencies", ())):
            assert CREDS not in entry and "temporary_credentials_error" not in entry, entry
    status, body = await ws.call("POST", "/resolve", json={"credentials": "no", "items": items})
    assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE" and "credentials" in body["message"]


async def test_every_decision_and_credential_is_in_the_audit_log(ws, server, tmp_path):
    """A resolve leaves in the audit log what the same calls one by one would: a row per item and
    per dependency (allowed, or why not, or its error) and one per credential handed out, all
    under the request's id beside the request's own row."""
    w = await _local_world(ws, tmp_path)
    reader = await user(server, ws)
    await grant(ws, "catalog", "c", reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "c.s.a", reader.name, "SELECT")
    await grant(ws, "table", "c.s.v", reader.name, "SELECT")
    await ok(reader, "POST", "/resolve", json={"items": [
        {"name": "c.s.a"}, {"name": "c.s.m", "operation": "WRITE"}, {"name": "c.s.v"}, {"name": "c.s.missing"}]})
    events = (await ok(ws, "GET", "/shardcat/audit", params={"principal": reader.name, "max_results": "100"}))["events"]
    assert len({e["request_id"] for e in events}) == 1
    rows = sorted((e["action"], e.get("securable_full_name"), e["allowed"], e.get("error_code"), e.get("status"))
                  for e in events)
    a_read, a_creds = ("resolveRead", "c.s.a", True, None, None), \
        ("generateTemporaryTableCredentials", "c.s.a", True, None, None)
    assert rows == sorted([
        ("resolve", None, True, None, 200),                                # the request's own row
        a_read, a_creds,                                                   # the item
        ("resolveWrite", "c.s.m", False, "PERMISSION_DENIED", None),
        ("resolveRead", "c.s.v", True, None, None), a_read, a_creds,       # the view and what it reads
        ("resolveRead", "c.s.missing", True, "NOT_FOUND", None)])
    by_name = {(e["action"], e.get("securable_full_name")): e for e in events}
    assert by_name[("resolveRead", "c.s.a")]["securable_id"] == w["a"]["table_id"]
    assert by_name[("resolveRead", "c.s.a")]["securable_type"] == "TABLE"
    assert "MODIFY" in by_name[("resolveWrite", "c.s.m")]["message"]
    assert "c.s.missing" in by_name[("resolveRead", "c.s.missing")]["message"]


async def test_policy_tables_give_credentials_to_trusted_engines_only(ws, server):
    c, table = await policy_world(ws)
    engine = await user(server, ws, trusted=True)
    analyst = await user(server, ws)
    for u in (engine, analyst):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    items = {"items": [{"name": f"{c}.s.people"}]}
    (item,) = (await ok(engine, "POST", "/resolve", json=items))["items"]
    assert item[CREDS]["url"] == table["storage_location"]
    (item,) = (await ok(analyst, "POST", "/resolve", json=items))["items"]
    assert item["authorization"]["allowed"] is False and CREDS not in item


async def test_unvendable_storage_is_a_per_item_error(ws, tmp_path, monkeypatch):
    monkeypatch.delenv("SHARDCAT_STS_ENDPOINT", raising=False)
    w = await _local_world(ws, tmp_path)
    for name, url in (("g", "gs://bkt/t/g"), ("z", "abfss://c@acct.dfs.core.windows.net/t/z"), ("s3", "s3://bkt/t/s")):
        await ok(ws, "POST", "/tables", json={"name": name, "catalog_name": "c", "schema_name": "s",
                                              "table_type": "EXTERNAL", "data_source_format": "PARQUET",
                                              "columns": COLS, "storage_location": url})
    status, out = await ws.call("POST", "/resolve", json={"items": [
        {"name": "c.s.g"}, {"name": "c.s.z", "operation": "WRITE"}, {"name": "c.s.s3"}, {"name": "c.s.a"}]})
    assert status == 200, out
    g, z, s3, a = out["items"]
    for item, scheme, why in ((g, "gs", "no external location covers it"), (z, "abfss", "no external location covers it"),
                              (s3, "s3", "no external location covers it")):
        err = item["temporary_credentials_error"]
        assert err["error_code"] == "FAILED_PRECONDITION" and why in err["message"], err
        assert CREDS not in item and "error" not in item
        assert item["authorization"]["allowed"] and item["table"]["storage_location"].startswith(scheme)
    assert a[CREDS]["url"] == w["a"]["storage_location"]


# ---- s3:// against moto -------------------------------------------------------------------------


async def test_s3_read_credentials_from_resolve_are_scoped_to_the_table(ws, sts):
    b = sts["bucket"]
    await lake(ws, sts)
    (item,) = (await ok(ws, "POST", "/resolve", json={"items": [{"name": "main.s.t1"}]}))["items"]
    cred = item[CREDS]
    assert cred["url"] == f"s3://{b}/data/t1"
    assert set(cred["aws_temp_credentials"]) == {"access_key_id", "secret_access_key", "session_token"}
    s3 = vended_s3(sts, cred)
    assert s3.get_object(Bucket=b, Key="data/t1/part-0.parquet")["Body"].read() == b"content of data/t1/part-0.parquet"
    for outside in ("data/t2/part-0.parquet", "data/t1-old/part-0.parquet", "secret/x"):
        assert denied(lambda: s3.get_object(Bucket=b, Key=outside)), outside
    assert denied(lambda: s3.put_object(Bucket=b, Key="data/t1/new", Body=b"x"))     # READ: no writes

    (item,) = (await ok(ws, "POST", "/resolve", json={"items": [{"name": "main.s.t1", "operation": "WRITE"}]}))["items"]
    rw = vended_s3(sts, item[CREDS])
    rw.put_object(Bucket=b, Key="data/t1/part-9.parquet", Body=b"new")
    rw.delete_object(Bucket=b, Key="data/t1/part-9.parquet")
    assert denied(lambda: rw.put_object(Bucket=b, Key="data/t2/part-9.parquet", Body=b"x"))

    # A read-only external location: no read-write credentials, for that item alone.
    await ok(ws, "PATCH", "/external-locations/data", json={"read_only": True})
    out = await ok(ws, "POST", "/resolve", json={"items": [{"name": "main.s.t1", "operation": "WRITE"},
                                                           {"name": "main.s.t1"}]})
    write, read = out["items"]
    assert write["temporary_credentials_error"]["error_code"] == "PERMISSION_DENIED"
    assert "read-only" in write["temporary_credentials_error"]["message"] and CREDS not in write
    assert "aws_temp_credentials" in read[CREDS]


async def test_s3_credentials_come_from_the_vending_cache(ws, sts):
    await lake(ws, sts)
    await ok(ws, "POST", "/tables", json={"name": "v", "catalog_name": "main", "schema_name": "s",
                                          "table_type": "VIEW", "columns": COLS,
                                          "view_definition": "SELECT id FROM main.s.t1"})
    vending.AWS.cache.clear()       # earlier tests vended for the same role and prefix
    calls = vending.AWS.stats["assume_role"]
    first = (await ok(ws, "POST", "/resolve", json={"items": [{"name": "main.s.t1"}]}))["items"][0]
    # The second resolve names the table and the view over it: both answered from the cache.
    table, view = (await ok(ws, "POST", "/resolve", json={"items": [{"name": "main.s.t1"},
                                                                    {"name": "main.s.v"}]}))["items"]
    assert vending.AWS.stats["assume_role"] == calls + 1
    assert table[CREDS] == first[CREDS] == view["dependencies"][0][CREDS]
    assert CREDS not in view
    # The endpoint shares the same function and cache.
    endpoint = await ok(ws, "POST", "/temporary-table-credentials",
                        json={"table_id": first["table"]["table_id"], "operation": "READ"})
    assert endpoint == first[CREDS] and vending.AWS.stats["assume_role"] == calls + 1
