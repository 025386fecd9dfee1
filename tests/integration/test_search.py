"""Search by name or comment: every word must match, best matches first, only what the caller may
see, paged with a token; LIKE wildcards in a query are plain characters; bad input is a 400."""

from __future__ import annotations

import base64
import json
import uuid

import asyncpg
from governance_users import grant, user

from shardcat.store.assets import search_query

COLS = [{"name": "id", "type_name": "LONG"}]


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, body
    return body


async def _world(ws) -> None:
    """sales.core: orders, orders_archive, pre_orders, customers (tables), raw_orders (volume); hr.staff.people."""
    for catalog, schema in (("sales", "core"), ("hr", "staff")):
        await ok(ws, "POST", "/catalogs", json={"name": catalog})
        await ok(ws, "POST", "/schemas", json={"name": schema, "catalog_name": catalog})
    tables = {"orders": "Daily orders from the shop", "orders_archive": None, "pre_orders": None,
              "customers": "Who placed ORDERS", "people": "everyone on the payroll"}
    for name, comment in tables.items():
        catalog, schema = ("hr", "staff") if name == "people" else ("sales", "core")
        await ok(ws, "POST", "/tables", json={"name": name, "catalog_name": catalog, "schema_name": schema,
                                              "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": COLS, **({"comment": comment} if comment else {})})
    await ok(ws, "POST", "/volumes", json={"catalog_name": "sales", "schema_name": "core", "name": "raw_orders",
                                           "volume_type": "MANAGED"})


async def names(ws, **params) -> list[str]:
    return [r["full_name"] for r in (await ok(ws, "GET", "/shardcat/search", params=params))["results"]]


async def test_best_matches_first_and_every_word_must_match(ws):
    await _world(ws)
    out = await ok(ws, "GET", "/shardcat/search", params={"query": "ORDERS"})
    assert [(r["full_name"], r["securable_type"], r["match"]) for r in out["results"]] == [
        ("sales.core.orders", "TABLE", "name"),                  # the name itself
        ("sales.core.orders_archive", "TABLE", "name"),          # names starting with it
        ("sales.core.pre_orders", "TABLE", "name"),              # names holding it, in full-name order
        ("sales.core.raw_orders", "VOLUME", "name"),
        ("sales.core.customers", "TABLE", "full_name_or_comment")]   # only its comment holds it
    assert "next_page_token" not in out
    first = out["results"][0]
    assert first["comment"] == "Daily orders from the shop" and first["owner"] == "admin"
    assert first["table_type"] == "MANAGED" and first["data_source_format"] == "DELTA" and first["id"]
    assert await names(ws, query="orders daily") == ["sales.core.orders"]
    assert await names(ws, query="staff people") == ["hr.staff.people"]       # the schema's name is in the full name
    assert await names(ws, query="orders", securable_types="volume") == ["sales.core.raw_orders"]
    assert await names(ws, query="core", securable_types="SCHEMA,CATALOG") == ["sales.core"]
    assert await names(ws, query="nothing-like-this") == []


async def test_wildcards_are_plain_characters(ws):
    await _world(ws)
    assert await names(ws, query="%") == []
    assert await names(ws, query="_") == ["sales.core.orders_archive", "sales.core.pre_orders",
                                          "sales.core.raw_orders"]


async def test_pages_follow_the_token_to_the_same_answer(ws):
    await _world(ws)
    whole = await names(ws, query="o")
    assert len(whole) == 9        # three pages of 3 (the catalogs' default schemas' comments hold an "o")
    paged, token = [], None
    while True:
        out = await ok(ws, "GET", "/shardcat/search",
                       params={"query": "o", "max_results": "3", **({"page_token": token} if token else {})})
        assert len(out["results"]) <= 3
        paged += [r["full_name"] for r in out["results"]]
        token = out.get("next_page_token")
        if token is None:
            break
    assert paged == whole


async def test_only_what_the_caller_may_see(ws, server):
    await _world(ws)
    reader = await user(server, ws)
    assert await names(reader, query="orders") == []
    await grant(ws, "catalog", "sales", reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "sales.core.orders", reader.name, "SELECT")
    assert await names(reader, query="orders") == ["sales.core.orders"]
    # The catalog and schema holding it show (ranked: "sales" starts with s, "orders" holds it, "core"
    # only in its full name); the hr catalog and the other tables do not.
    assert await names(reader, query="s") == ["sales", "sales.core.orders", "sales.core", "sales.default"]


def _token(after: list) -> str:
    """A page token as the server makes them, around a value it would not make."""
    return base64.urlsafe_b64encode(json.dumps({"after": json.dumps(after)}).encode()).decode()


async def test_bad_input_is_a_clear_400(ws):
    for params, culprit in (({}, "query"), ({"query": "   "}, "query"), ({"query": "a " * 9}, "query"),
                            ({"query": "x" * 201}, "query"), ({"query": "a", "securable_types": "TABLE,NOPE"}, "NOPE"),
                            ({"query": "a", "max_results": "many"}, "max_results"),
                            ({"query": "a", "page_token": "garbage"}, "page_token"),
                            ({"query": "a", "page_token": _token([2 ** 40, "a", str(uuid.UUID(int=0))])},
                             "page_token")):
        status, body = await ws.call("GET", "/shardcat/search", params=params)
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (params, body)
        assert culprit in body["message"], (params, body)


async def test_a_selective_search_reads_the_trigram_index(ws, pg_url):
    """Search's conditions are on the expression migration 0009 indexes: among 20,000 tables (added
    in a transaction rolled back after), PostgreSQL finds a rare word through that index."""
    await _world(ws)
    conn = await asyncpg.connect(pg_url)
    rolled_back = conn.transaction()
    await rolled_back.start()
    try:
        await conn.execute(
            """INSERT INTO assets (id, metastore_id, type, namespace, parent_id, name, full_name, info, written_at)
               SELECT gen_random_uuid(), metastore_id, type, namespace, parent_id, name || g,
                      full_name || g, jsonb_build_object('comment', 'filler number ' || g), written_at
               FROM assets, generate_series(1, 20000) g WHERE metastore_id = $1 AND full_name = 'sales.core.orders'""",
            uuid.UUID(ws.metastore_id))
        await conn.execute("ANALYZE assets")
        plan = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) " + search_query(2), uuid.UUID(ws.metastore_id), ["table"], "daily",
            "daily%", "%daily%", -1, "", uuid.UUID(int=0), 10, "%daily%", "%shop%")
    finally:
        await rolled_back.rollback()
        await conn.close()
    assert '"Index Name": "assets_search"' in plan, plan
