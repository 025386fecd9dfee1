"""Batched resolve: names and paths answered from one metastore snapshot, errors per item."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest

from shardcat.auth import Caller
from shardcat.catalog.features.resolve import MAX_ITEMS, ResolveService
from shardcat.catalog.tree.service import CatalogService
from shardcat.web.kit import encode_json
from shardcat.shards.shard import Shard
from shardcat.store.db import Store

COLUMNS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": "{}", "position": 0}]


async def _world(ws, base: str) -> dict:
    async def ok(method, path, body):
        status, out = await ws.call(method, path, json=body)
        assert status == 200, out
        return out

    await ok("POST", "/catalogs", {"name": "c"})
    await ok("POST", "/schemas", {"name": "s", "catalog_name": "c"})
    tables = {}
    for name in ("a", "b"):
        tables[name] = await ok("POST", "/tables", {
            "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
            "data_source_format": "PARQUET", "columns": COLUMNS,
            "storage_location": f"{base}/ext/{name}"})
    tables["v"] = await ok("POST", "/tables", {
        "name": "v", "catalog_name": "c", "schema_name": "s", "table_type": "VIEW", "columns": COLUMNS,
        "view_definition": "SELECT * FROM c.s.a"})
    return tables


async def test_names_and_paths_in_one_call(ws, server, tmp_path):
    base = f"file://{tmp_path}"
    tables = await _world(ws, base)
    status, out = await ws.call("POST", "/resolve", json={"items": [
        {"name": "c.s.a"},
        {"name": "C.S.B", "operation": "write"},
        {"name": "c.s.v", "securable_type": "TABLE"},
        {"name": "c.s.missing"},
        {"name": "c.s"},
        {"path": f"{base}/ext/b/part-0.parquet"},
        {"path": f"{base}/ext"},
        {"path": "not a url"},
        {"name": "c.s.a", "securable_type": "CATALOG"},
    ]})
    assert status == 200, out
    version = await server.store.metastore_version(ws.metastore_id)
    assert out["metastore_version"] == version and out["metastore_id"] == ws.metastore_id
    a, b, v, missing, short, by_path, no_owner, bad_path, bad_type = out["items"]
    assert a["table"] == tables["a"] and a["operation"] == "READ" and a["securable_type"] == "TABLE"
    assert b["table"] == tables["b"] and b["operation"] == "WRITE"
    assert v["table"]["view_definition"] == "SELECT * FROM c.s.a"
    assert missing["error"]["error_code"] == "NOT_FOUND" and "c.s.missing" in missing["error"]["message"]
    assert short["error"]["error_code"] == "INVALID_PARAMETER_VALUE"
    assert by_path["name"] == "c.s.b" and by_path["table"] == tables["b"]
    assert no_owner["error"]["error_code"] == "NOT_FOUND" and "No table or volume owns" in no_owner["error"]["message"]
    assert bad_path["error"]["error_code"] == "INVALID_PARAMETER_VALUE"
    assert bad_type["error"]["error_code"] == "INVALID_PARAMETER_VALUE" and "TABLE" in bad_type["error"]["message"]


async def test_a_path_in_managed_storage_names_the_metastore(ws, tmp_path):
    await _world(ws, f"file://{tmp_path}")
    status, table = await ws.call("POST", "/tables", json={
        "name": "m", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLUMNS})
    assert status == 200, table
    status, out = await ws.call("POST", "/resolve", json={"items": [
        {"path": table["storage_location"] + "/_delta_log/0.json"},
        {"path": ws.storage_root + "/somewhere/else"},
    ]})
    assert status == 200, out
    inside, outside = out["items"]
    assert inside["table"]["table_id"] == table["table_id"]
    assert outside["error"]["error_code"] == "NOT_FOUND" and "metastore" in outside["error"]["message"]


async def test_what_the_caller_may_not_see_answers_as_missing(ws, server, tmp_path):
    """By name or by path, an asset the caller may not see is answered as a missing one: no name,
    no type, no catalog or schema in the message; the audit log still records the refusal."""
    from governance_users import grant, user
    tables = await _world(ws, f"file://{tmp_path}")
    reader = await user(server, ws)
    await grant(ws, "catalog", "c", reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "c.s.b", reader.name, "BROWSE")       # b: seen, not readable
    status, out = await reader.call("POST", "/resolve", json={"items": [
        {"name": "c.s.a"}, {"name": "c.s.nope"}, {"path": f"file://{tmp_path}/ext/a/part-0"},
        {"path": f"file://{tmp_path}/ext/nope/part-0"}, {"name": "c.s.b"}]})
    assert status == 200, out
    by_name, missing, by_path, no_owner, seen = out["items"]
    assert by_name == {"operation": "READ", "name": "c.s.a", "securable_type": "TABLE",
                       "error": {"error_code": "NOT_FOUND", "message": "Table 'c.s.a' does not exist."}}, by_name
    assert missing["error"] == {"error_code": "NOT_FOUND", "message": "Table 'c.s.nope' does not exist."}
    assert by_path == {"operation": "READ", "path": f"file://{tmp_path}/ext/a/part-0", "error": {
        "error_code": "NOT_FOUND", "message": f"No table or volume owns path 'file://{tmp_path}/ext/a/part-0'."}}
    assert no_owner["error"]["message"] == by_path["error"]["message"].replace("/a/", "/nope/")
    assert seen["authorization"]["allowed"] is False and "SELECT" in seen["authorization"]["reason"]
    events = (await ws.call("GET", "/shardcat/audit", params={"principal": reader.name}))[1]["events"]
    refused = {(e.get("securable_full_name"), e["allowed"], e.get("error_code")) for e in events
               if e["action"] == "resolveRead"}
    assert {("c.s.a", False, "PERMISSION_DENIED"), (f"file://{tmp_path}/ext/a/part-0", False,
                                                    "PERMISSION_DENIED")} <= refused, refused
    assert tables["a"]["table_id"] in {e.get("securable_id") for e in events}


@pytest.mark.parametrize("body, says", [
    ({}, "items"),
    ({"items": []}, "items"),
    ({"items": "c.s.a"}, "items"),
    ({"items": [{"name": "c.s.a", "path": "s3://b/x"}]}, "exactly one"),
    ({"items": [{}]}, "exactly one"),
    ({"items": [{"name": 7}]}, "items[0].name must be a string"),
    ({"items": [{"name": "c.s.a", "operation": "DELETE"}]}, "READ or WRITE"),
    ({"items": [{"name": f"c.s.t{i}"} for i in range(MAX_ITEMS + 1)]}, f"At most {MAX_ITEMS}"),
])
async def test_bad_requests_are_refused_whole(ws, body, says):
    status, out = await ws.call("POST", "/resolve", json=body)
    assert status == 400 and out["error_code"] == "INVALID_PARAMETER_VALUE", out
    assert says in out["message"]


async def test_a_shard_behind_the_database_catches_up_to_one_snapshot(pg_url, tmp_path):
    """Shard b has `a` cached; shard a then writes `b`. A resolve through b of both names must
    not mix b's older snapshot (a from cache) with the newer one (b from the database)."""
    store = await Store.open(pg_url, min_size=1, max_size=2)
    try:
        await store.migrate()
        metastore_id = str(uuid.uuid4())
        await store.create_metastore(metastore_id, f"r-{metastore_id[:8]}", {"storage_root": f"file://{tmp_path}/root"})
        caller = Caller("admin", 1, True, 1, metastore_id)
        one, two = Shard(store, "one"), Shard(store, "two")
        s1 = CatalogService(one)
        await s1.create(caller, "catalog", {"name": "c"})
        await s1.create(caller, "schema", {"name": "s", "catalog_name": "c"})
        table = {"catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "CSV",
                 "columns": COLUMNS}
        await s1.create(caller, "table", {**table, "name": "a", "storage_location": f"file://{tmp_path}/ext/a"})
        resolver = ResolveService(two)
        first = await resolver.resolve(caller, {"items": [{"name": "c.s.a"}]})
        await s1.create(caller, "table", {**table, "name": "b", "storage_location": f"file://{tmp_path}/ext/b"})
        second = await resolver.resolve(caller, {"items": [{"name": "c.s.a"}, {"name": "c.s.b"}]})
        assert second["metastore_version"] == one.version_of(metastore_id) > first["metastore_version"]
        second = orjson.loads(encode_json(second))     # assets come pre-encoded (service.present)
        assert [i.get("table", {}).get("name") for i in second["items"]] == ["a", "b"]
        assert two.stats["reconciles"] == 1
    finally:
        await store.close()


async def test_concurrent_batches_of_fifty_names(ws, tmp_path):
    await _world(ws, f"file://{tmp_path}")
    bodies = [{"items": [{"name": n} for n in ("c.s.a", "c.s.b", "c.s.v") * 17]} for _ in range(5)]
    answers = await asyncio.gather(*(ws.call("POST", "/resolve", json=b) for b in bodies))
    for status, out in answers:
        assert status == 200 and len(out["items"]) == 51
        assert all("table" in item for item in out["items"])
