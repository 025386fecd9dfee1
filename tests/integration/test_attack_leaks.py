"""Existence and metadata leaks (issue 42, items 11, 12, 13 and the second half of 18): whatever a
caller may not see must answer exactly as what does not exist, on every surface that names assets.

- A transaction's `read_versions` (POST /shardcat/transactions) named whether an invisible asset
  exists and the version it last changed at: by full name (any case), by id, for tables, volumes,
  models, schemas and catalogs.
- The OpenLineage intake answered 404 for an invisible dataset and 200 "unmapped" for a missing
  one, by name and by storage path (which paths a table owns), as input, output or column source.
- The history of a reused name (GET /shardcat/history/...) showed another user's dropped asset
  (owner, comment, properties), also when the schema holding it was dropped and made again.
- A name beginning with a lone combining mark was accepted for a catalog (and every securable).
"""

from __future__ import annotations

import re
import urllib.parse
import uuid

import pytest

from governance_users import grant, unique, user
from test_enforcement_matrix import ok
from test_names_lookalike import TYPES as NAMED_TYPES, _world as names_world

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": "{}", "position": 0}]


def _table(name: str, c: str, s: str = "s", **extra) -> dict:
    return {"name": name, "catalog_name": c, "schema_name": s, "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": COLS, **extra}


async def _world(server, ws, tmp_path):
    """Catalog c: schema s with the attacker's own table `mine` and what it may not see (an external
    table `secret` at tmp_path/secret, a view, a volume, a model), schema `hidden`; catalog `other`."""
    c, other = unique("c"), unique("other")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/catalogs", json={"name": other})
    for s in ("s", "hidden"):
        await ok(ws, "POST", "/schemas", json={"name": s, "catalog_name": c})
    secret = await ok(ws, "POST", "/tables", json={
        "name": "secret", "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": f"file://{tmp_path}/secret"})
    await ok(ws, "POST", "/tables", json={"name": "view_secret", "catalog_name": c, "schema_name": "s",
                                          "table_type": "VIEW", "columns": COLS, "view_definition": "SELECT 1"})
    await ok(ws, "POST", "/volumes", json={"name": "vol_secret", "catalog_name": c, "schema_name": "s",
                                           "volume_type": "MANAGED"})
    await ok(ws, "POST", "/models", json={"name": "m_secret", "catalog_name": c, "schema_name": "s"})
    attacker = await user(server, ws)
    await grant(ws, "catalog", c, attacker.name, "USE CATALOG")
    await grant(ws, "schema", f"{c}.s", attacker.name, "USE SCHEMA", "CREATE TABLE")
    await ok(attacker, "POST", "/tables", json=_table("mine", c, comment="untouched"))
    return c, other, secret, attacker


# ---- 11: a transaction's read_versions -------------------------------------------------------------

def _alike(answer: tuple, *keys: str) -> tuple:
    """An answer with the keys it may name and every number made alike (versions move between calls)."""
    status, body = answer
    text = str(body)
    for key in keys:
        text = text.replace(key, "KEY")
    return status, re.sub(r"\d+", "N", text)


async def test_read_versions_of_an_invisible_asset_answer_as_a_missing_one(server, ws, tmp_path):
    c, other, secret, attacker = await _world(server, ws, tmp_path)
    operation = {"op": "update", "type": "table", "name": f"{c}.s.mine", "body": {"comment": "touched"}}
    refused = {**operation, "body": {"comment": "refused"}}
    invisible = [f"{c}.s.secret", f"{c.upper()}.S.SECRET", secret["table_id"], secret["table_id"].upper(),
                 f"{c}.s.view_secret", f"{c}.s.vol_secret", f"{c}.s.m_secret", f"{c}.hidden", other, other.upper()]
    missing = [f"{c}.s.nothing", f"{c.upper()}.S.NOTHING", str(uuid.uuid4()), str(uuid.uuid4()).upper(),
               f"{c}.s.nothing2", f"{c}.s.nothing3", f"{c}.s.nothing4", f"{c}.nothing", unique("none"),
               unique("NONE")]
    for hidden, absent in zip(invisible, missing):
        # at version 0 (it changed since) and at the newest version (it did not)
        now = (await ok(attacker, "POST", "/shardcat/transactions", json={"operations": [operation]}))["version"]
        for read in (0, now):
            seen = await attacker.call("POST", "/shardcat/transactions",
                                       json={"read_versions": {hidden: read}, "operations": [refused]})
            expected = await attacker.call("POST", "/shardcat/transactions",
                                           json={"read_versions": {absent: read}, "operations": [refused]})
            assert expected[0] == 409 and "does not exist" in expected[1]["message"], expected
            assert _alike(seen, hidden, absent) == _alike(expected, hidden, absent), (hidden, read, seen, expected)
            # beside a key the caller may see, too
            both = await attacker.call("POST", "/shardcat/transactions", json={
                "read_versions": {f"{c}.s.mine": now, hidden: read}, "operations": [refused]})
            assert both[0] == 409 and "does not exist" in both[1]["message"], both
    # the per-metastore check names no securable that changed (the secret, changed after read_at)
    await ok(ws, "PATCH", f"/tables/{c}.s.secret", json={"comment": "changed"})
    status, body = await attacker.call("POST", "/shardcat/transactions", json={
        "isolation": "metastore", "read_at": now, "operations": [refused]})
    assert status == 409 and "Conflict on the metastore" in body["message"], body
    assert secret["table_id"] not in body["message"] and "secret" not in body["message"], body
    # nothing the refused transactions held was written; the owner still sees its own reads
    assert (await ok(ws, "GET", f"/tables/{c}.s.mine"))["comment"] == "touched"
    now = (await ok(ws, "POST", "/shardcat/transactions", json={"operations": [operation]}))["version"]
    assert (await ok(ws, "POST", "/shardcat/transactions", json={
        "read_versions": {f"{c}.s.secret": now, secret["table_id"]: now}, "operations": [operation]}))["results"]
    status, body = await ws.call("POST", "/shardcat/transactions", json={
        "read_versions": {f"{c}.s.secret": 0}, "operations": [operation]})
    assert status == 409 and "changed at version" in body["message"], body


# ---- 12: the OpenLineage intake --------------------------------------------------------------------

def _event(inputs: list, outputs: list) -> dict:
    return {"eventType": "COMPLETE", "eventTime": "2026-01-01T00:00:00Z", "producer": "tests",
            "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "etl", "name": "nightly"},
            "inputs": inputs, "outputs": outputs}


def _with_column_source(output: dict, source: dict) -> dict:
    return {**output, "facets": {"columnLineage": {"fields": {"id": {"inputFields": [{**source, "field": "id"}]}}}}}


async def test_openlineage_answers_an_invisible_dataset_as_a_missing_one(server, ws, tmp_path):
    c, other, secret, attacker = await _world(server, ws, tmp_path)
    mine = {"namespace": "shardcat", "name": f"{c}.s.mine"}
    # (invisible, missing) datasets, by name and by storage path, in several spellings
    pairs = [({"namespace": "shardcat", "name": f"{c}.s.secret"}, {"namespace": "shardcat", "name": f"{c}.s.nothing"}),
             ({"namespace": "spark", "name": f"{c.upper()}.S.SECRET"}, {"namespace": "spark", "name": f"{c}.S.NOPE"}),
             ({"namespace": "shardcat", "name": f"{c}.s.view_secret"}, {"namespace": "shardcat", "name": f"{c}.s.v0"}),
             ({"namespace": "shardcat", "name": f"{c}.s.vol_secret"}, {"namespace": "shardcat", "name": f"{c}.s.v1"}),
             ({"namespace": "file", "name": f"{tmp_path}/secret"},
              {"namespace": "file", "name": f"{tmp_path}/nothing"}),
             ({"namespace": "file", "name": f"{tmp_path}/secret/part-0.parquet"},
              {"namespace": "file", "name": f"{tmp_path}/nothing/part-0.parquet"}),
             ({"namespace": f"file://{tmp_path}", "name": "secret/x=1/part-1.parquet"},
              {"namespace": f"file://{tmp_path}", "name": "nothing/x=1/part-1.parquet"})]
    for hidden, absent in pairs:
        for shape in ("input", "output", "column source"):
            answers = []
            for d in (hidden, absent):
                event = {"input": _event([d], [mine]), "output": _event([], [d]),
                         "column source": _event([], [_with_column_source(mine, d)])}[shape]
                answers.append(await attacker.call("POST", "/openlineage/api/v1/lineage", json=event))
            (status, seen), (expected_status, expected) = answers
            assert expected_status == 200 and expected["unmapped"] == [absent], (shape, expected)
            assert status == 200 and seen["unmapped"] == [hidden], (shape, hidden, seen)
            assert {**seen, "unmapped": None} == {**expected, "unmapped": None}, (shape, seen, expected)
    # nothing was recorded into or out of what the caller may not see
    for name in ("secret", "view_secret", "mine"):
        graph = await ok(ws, "GET", "/shardcat/lineage", params={"name": f"{c}.s.{name}"})
        assert graph["edges"] == [], (name, graph)
    # a table the caller sees but may not write is still a 403 (existence is no secret there)
    reader = await user(server, ws)
    await grant(ws, "catalog", c, reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    status, body = await reader.call("POST", "/openlineage/api/v1/lineage",
                                     json=_event([{"namespace": "shardcat", "name": f"{c}.s.mine"}],
                                                 [{"namespace": "shardcat", "name": f"{c}.s.secret"}]))
    assert status == 403 and body["error_code"] == "PERMISSION_DENIED", body


# ---- 13: the history of a reused name --------------------------------------------------------------

async def _history(who, kind: str, name: str):
    return await who.call("GET", f"/shardcat/history/{kind}/{urllib.parse.quote(name, safe='')}")


async def test_the_history_of_a_reused_name_shows_only_what_the_caller_could_see(server, ws):
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "h", "catalog_name": c})
    first, second, reader, outsider = [await user(server, ws) for _ in range(4)]
    for who in (first, second):
        await grant(ws, "catalog", c, who.name, "USE CATALOG", "CREATE SCHEMA")
        await grant(ws, "schema", f"{c}.h", who.name, "USE SCHEMA", "CREATE TABLE", "CREATE VOLUME")
    await grant(ws, "catalog", c, reader.name, "USE CATALOG")
    await grant(ws, "schema", f"{c}.h", reader.name, "USE SCHEMA", "SELECT", "READ VOLUME")
    await grant(ws, "catalog", c, outsider.name, "USE CATALOG")
    # the first user's table and volume, with its plans in them, dropped; the second makes the names again
    await ok(first, "POST", "/tables", json=_table("t", c, "h", comment="first's plan",
                                                   properties={"k": "first-secret"}))
    await ok(first, "PATCH", f"/tables/{c}.h.t", json={"comment": "first's plan, revised"})
    await ok(first, "POST", "/volumes", json={"name": "v", "catalog_name": c, "schema_name": "h",
                                              "volume_type": "MANAGED", "comment": "first's plan"})
    await ok(first, "DELETE", f"/tables/{c}.h.t")
    await ok(first, "DELETE", f"/volumes/{c}.h.v")
    await ok(second, "POST", "/tables", json=_table("t", c, "h", comment="second's"))
    await ok(second, "POST", "/volumes", json={"name": "v", "catalog_name": c, "schema_name": "h",
                                               "volume_type": "MANAGED", "comment": "second's"})

    for kind, name in (("TABLE", f"{c}.h.t"), ("table", f"{c.upper()}.H.T"), ("VOLUME", f"{c}.h.v"),
                       ("volume", f"{c}.H.V")):
        everything = await _history(ws, kind, name)
        assert everything[0] == 200 and {v["asset"].get("owner") for v in everything[1]["versions"]} == \
            {first.name, second.name}, everything
        # each user sees its own incarnation only: as if the other's did not exist
        for who, mine, theirs in ((second, "second's", "first"), (first, "first's", "second's")):
            status, body = await _history(who, kind, name)
            assert status == 200, (kind, who.name, body)
            assert {v["asset"]["owner"] for v in body["versions"]} == {who.name}, body
            assert all(v["asset"]["comment"].startswith(mine) for v in body["versions"]), body
            assert theirs not in str(body), body
        # SELECT (READ VOLUME) on the schema reads both, as it could have while they existed
        status, body = await _history(reader, kind, name)
        assert status == 200 and len({v["id"] for v in body["versions"]}) == 2, body
        # the outsider sees neither: the very answer of a name that never was
        status, body = await _history(outsider, kind, name)
        never = await _history(outsider, kind, f"{c}.h.never")
        assert (status, body["error_code"]) == (never[0], never[1]["error_code"]) == (404, "NOT_FOUND"), body


async def test_a_schema_dropped_and_made_again_lends_nothing_to_the_new_owner(server, ws):
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    first, second = await user(server, ws), await user(server, ws)
    for who in (first, second):
        await grant(ws, "catalog", c, who.name, "USE CATALOG", "CREATE SCHEMA")
    await ok(first, "POST", "/schemas", json={"name": "x", "catalog_name": c, "comment": "first's schema"})
    await ok(first, "POST", "/tables", json=_table("t", c, "x", comment="first's plan", properties={"k": "s3cret"}))
    status, _ = await first.call("DELETE", f"/schemas/{c}.x", params={"force": "true"})
    assert status == 200
    # the second user owns the new schema: ownership of today's parent must not reach the old table
    await ok(second, "POST", "/schemas", json={"name": "x", "catalog_name": c, "comment": "second's schema"})
    await ok(second, "POST", "/tables", json=_table("t", c, "x", comment="second's"))
    for kind, name in (("TABLE", f"{c}.x.t"), ("SCHEMA", f"{c}.x"), ("schema", f"{c.upper()}.X")):
        status, body = await _history(second, kind, name)
        assert status == 200 and {v["asset"]["owner"] for v in body["versions"]} == {second.name}, body
        assert "first" not in str(body) and "s3cret" not in str(body), body
        status, body = await _history(first, kind, name)
        assert status == 200 and {v["asset"]["owner"] for v in body["versions"]} == {first.name}, body


# ---- 18b: a name beginning with a combining mark ---------------------------------------------------

MARKS = [pytest.param("\u0301abc", id="acute-Mn"), pytest.param("\u0903abc", id="visarga-Mc"),
         pytest.param("\u20ddabc", id="enclosing-circle-Me"), pytest.param("\u0301", id="mark-alone"),
         pytest.param("\u0301\u0301e", id="marks")]


@pytest.mark.parametrize("spelling", MARKS)
@pytest.mark.parametrize("kind", list(NAMED_TYPES))
async def test_a_name_beginning_with_a_combining_mark_is_refused(ws, kind, spelling):
    await names_world(ws)
    path, body, item = NAMED_TYPES[kind]
    status, refused = await ws.call("POST", path, json=body(spelling, ws))
    assert status == 400 and refused["error_code"] == "INVALID_PARAMETER_VALUE", refused
    assert "combining mark" in refused["message"], refused
    status, _ = await ws.call("GET", item(urllib.parse.quote(spelling, safe="")))
    assert status == 400
    # the mark inside a name is fine (café decomposed is café)
    status, made = await ws.call("POST", path, json=body(f"x{spelling}", ws))
    assert status == 200, made


@pytest.mark.parametrize("spelling", MARKS)
async def test_a_rename_to_a_name_beginning_with_a_combining_mark_is_refused(ws, spelling):
    await names_world(ws)
    for path in ("/catalogs/main", "/schemas/main.s"):
        status, refused = await ws.call("PATCH", path, json={"new_name": spelling})
        assert status == 400 and refused["error_code"] == "INVALID_PARAMETER_VALUE", (path, refused)
    await ok(ws, "POST", "/tables", json=_table("t", "main"))
    status, refused = await ws.call("PATCH", "/tables/main.s.t", json={"new_name": spelling})
    assert status == 400 and refused["error_code"] == "INVALID_PARAMETER_VALUE", refused
    status, refused = await ws.call("POST", "/shardcat/transactions", json={"operations": [
        {"op": "create", "type": "schema", "body": {"name": spelling, "catalog_name": "main"}}]})
    assert status == 400 and refused["error_code"] == "INVALID_PARAMETER_VALUE", refused
