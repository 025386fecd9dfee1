"""Stalling the server with a pattern (ReDoS, issue 42 item 9): a path query's `like` became a
backtracking regular expression run on the serving loop, so `"aaa…" like "%a%a%a…%b"` kept every
client waiting for seconds, and for hours a few `%a` later. A user who may see one table sends such
patterns through `POST /shardcat/query` against every field a pattern reaches (names, comments,
tags, properties, tag and property entries, column names, storage); another client's request,
timed beside each, and the attack itself must finish promptly. A pattern whose work over a long
text is beyond the query's bound on work is refused (400) instead of run. A share's partition
filter (LIKE, matched for every file a recipient reads) and table-summaries' name patterns are
tried the same way."""

from __future__ import annotations

import asyncio
import json
import time

from governance_users import grant, unique, user

from shardcat.delta.client import DeltaCatalogClient
from test_delta_sharing import SCHEMA, activate, rows
from test_enforcement_matrix import ok

QUERY = "/shardcat/query"
LETTERS = "a" * 40      # with 8 `%a` the old expression took ~10 s over 40 letters; with 30, longer than a day
# Each field a pattern reaches, as a query testing it with PATTERN (all over the one visible table).
FIELDS = {
    "name": '/catalog/schema/table[name like "{p}"]',
    "comment": '/catalog/schema/table[comment like "{p}"]',
    "tag": '/catalog/schema/table[tags["t"] like "{p}"]',
    "property": '/catalog/schema/table[properties["p"] like "{p}"]',
    "tag entry": '/catalog/schema/table[exists(tag[value like "{p}"])]',
    "property entry": '/catalog/schema/table[exists(property[value like "{p}"])]',
    "column": '/catalog/schema/table/column[name like "{p}"]',
    "storage": '/catalog/schema/table[storage like "{p}"]',
    "schema": '/catalog/schema[comment like "{p}"]',
}


async def _world(server, ws, tmp_path):
    """A catalog whose one table holds 40 a's in every field; an attacker who may see only that table,
    and a bystander with a grant of its own."""
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c, "comment": LETTERS})
    await ok(ws, "POST", "/tables", json={
        "name": LETTERS, "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "comment": LETTERS, "properties": {"p": LETTERS},
        "storage_location": f"file://{tmp_path}/{LETTERS}",
        "columns": [{"name": LETTERS, "type_name": "STRING", "type_text": "string", "type_json": "{}",
                     "position": 0}]})
    table = f"{c}.s.{LETTERS}"
    await ok(ws, "POST", "/entity-tag-assignments", json={"entity_type": "tables", "entity_name": table,
                                                          "tag_key": "t", "tag_value": LETTERS})
    attacker, bystander = await user(server, ws), await user(server, ws)
    for who in (attacker, bystander):
        await grant(ws, "catalog", c, who.name, "USE CATALOG")
        await grant(ws, "schema", f"{c}.s", who.name, "USE SCHEMA")
    await grant(ws, "table", table, attacker.name, "SELECT")
    return c, table, attacker, bystander


async def _timed(coro):
    started = time.perf_counter()
    result = await coro
    return result, time.perf_counter() - started


async def _beside(attacker, bystander, c: str, query: str | None, *, path: str = QUERY, body: dict | None = None):
    """The attack's answer and seconds (a path query, or `body` posted to `path`), and the longest a
    bystander waited for its reads, sent one after another for as long as the attack ran."""
    attack = asyncio.create_task(_timed(attacker.call("POST", path, json=body or {"query": query})))
    longest = 0.0
    while not attack.done():
        (status, _), waited = await _timed(bystander.call("GET", f"/catalogs/{c}"))
        assert status == 200
        longest = max(longest, waited)
    (status, body), took = await attack
    return status, body, took, longest


async def test_patterns_of_growing_size_stall_no_one(server, ws, tmp_path):
    c, table, attacker, bystander = await _world(server, ws, tmp_path)
    for k in (2, 4, 8, 12, 20, 30):
        for field, template in FIELDS.items():
            for pattern, matches in (("%a" * k + "%b", False), ("%a" * k + "%", True)):
                status, body, took, other = await _beside(attacker, bystander, c, template.format(p=pattern))
                assert status == 200, (field, k, body)
                assert bool(body["results"]) is matches, (field, k, body)
                # the old code: ~10 s at k = 8, hours at 30; the matcher now takes microseconds
                assert took < 1.0 and other < 1.0, (field, k, took, other)
                assert body["nodes_visited"] < 20, (field, k, body)


async def test_a_pattern_too_costly_for_a_long_text_is_refused_not_run(server, ws, tmp_path):
    c, table, attacker, bystander = await _world(server, ws, tmp_path)
    await ok(ws, "PATCH", f"/tables/{table}", json={"comment": "a" * 1_000_000})
    # every place of a megabyte compared with 2,000 characters: beyond the bound on work, a 400 at once
    for pattern in ("%" + "_" * 2000 + "b%", "%" + "a" * 2000 + "b%", "%" + "_a" * 1000 + "%b"):
        status, body, took, other = await _beside(attacker, bystander, c,
                                                  f'/catalog/schema/table[comment like "{pattern}"]')
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", body
        assert "like" in body["message"]
        assert took < 1.0 and other < 1.0, (pattern[:10], took, other)
    # a short pattern over the same text is cheap work: answered (a pass over the text)
    status, body, took, _ = await _beside(attacker, bystander, c, '/catalog/schema/table[comment like "%a%b"]')
    assert status == 200 and body["results"] == [] and took < 1.0
    status, body, _, _ = await _beside(attacker, bystander, c, '/catalog/schema/table[comment like "a%a"]')
    assert status == 200 and [r["full_name"] for r in body["results"]] == [table]


async def test_other_likes_stall_no_one(server, ws, tmp_path):
    """The other `like`s a caller writes: a share's partition filter (matched in Python for every file
    a recipient reads), and table-summaries' name patterns (PostgreSQL's LIKE, which does not backtrack)."""
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        await delta.create_table("main.s.sales", SCHEMA, partition_columns=["region"])
        await delta.append("main.s.sales", rows(range(0, 3), "a" * 30))
        await delta.append("main.s.sales", rows(range(3, 5), "a" * 29 + "b"))
    recipient = await ok(ws, "POST", "/recipients", json={"name": "acme", "authentication_type": "TOKEN"})
    profile = json.loads(open(await activate(ws, recipient, tmp_path)).read())
    bystander = await user(server, ws)
    await grant(ws, "catalog", "main", bystander.name, "USE CATALOG")
    for i, k in enumerate((4, 12, 30)):      # the old expression: seconds at 12, days at 30
        share = f"s{i}"
        await ok(ws, "POST", "/shares", json={"name": share})
        await ok(ws, "PATCH", f"/shares/{share}", json={"updates": [{"action": "ADD", "data_object": {
            "name": "main.s.sales", "partitions": [{"values": [{"name": "region", "op": "LIKE",
                                                                  "value": "%a" * k + "%b"}]}]}}]})
        await ok(ws, "PATCH", f"/shares/{share}/permissions",
                 json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
        url = f"{profile['endpoint']}/shares/{share}/schemas/s/tables/sales/query"
        headers = {"Authorization": f"Bearer {profile['bearerToken']}"}

        async def read():
            async with ws.session.post(url, json={}, headers=headers) as r:
                return r.status, await r.text()

        attack = asyncio.create_task(_timed(read()))
        longest = 0.0
        while not attack.done():
            (status, _), waited = await _timed(bystander.call("GET", "/catalogs/main"))
            longest = max(longest, waited)
        (status, text), took = await attack
        assert status == 200, text
        files = [json.loads(line)["file"] for line in text.splitlines() if "file" in json.loads(line)]
        # only the files of the partition ending in b (with 30 %a, none: 29 a's come before it)
        assert {f["partitionValues"]["region"] for f in files} == ({"a" * 29 + "b"} if k < 30 else set()), k
        assert took < 1.0 and longest < 1.0, (k, took, longest)
    for k in (10, 30, 120):
        pattern = "%a" * k + "%b"
        status, body, took, longest = await _beside(
            ws, bystander, "main", None, path="/table-summaries",
            body={"catalog_name": "main", "schema_name_pattern": "%", "table_name_pattern": pattern})
        assert status == 200 and body["tables"] == [] and took < 1.0 and longest < 1.0, (k, body, took, longest)
