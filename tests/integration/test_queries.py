"""Path queries through the server (POST /shardcat/query): the issue's example over a world made
through the API (tags through the tag API, a group owner, grants), only what the caller may see,
pages whose token pins the version while the metastore moves on, the bound on work, and clear 400s."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from governance_users import grant, unique, user

from test_enforcement_matrix import ok

QUERY = "/shardcat/query"
COLUMNS = [{"name": "id", "type_name": "LONG", "position": 0},
           {"name": "email", "type_name": "STRING", "position": 1}]
EXAMPLE = ('/catalog[name = "{c}"]/schema/table[owner_kind = "group" and exists(column[tags["pii"]]) '
           'and not comment]')


async def _table(ws, c, s, name, **extra):
    await ok(ws, "POST", "/tables", json={"name": name, "catalog_name": c, "schema_name": s, "table_type": "MANAGED",
                                          "data_source_format": "DELTA", "columns": COLUMNS, **extra})


async def _world(server, ws):
    """c.sales: orders (group-owned, email tagged pii, no comment), people (group-owned, pii, commented),
    events (group-owned, no pii), logs (user-owned, pii); c.hr: staff (group-owned, pii); other.x.t."""
    c, team = unique("c"), unique("team")
    await server.store.create_principal(team, "group")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    for s in ("sales", "hr"):
        await ok(ws, "POST", "/schemas", json={"name": s, "catalog_name": c})
    await _table(ws, c, "sales", "orders")
    await _table(ws, c, "sales", "people", comment="who bought")
    await _table(ws, c, "sales", "events")
    await _table(ws, c, "sales", "logs")
    await _table(ws, c, "hr", "staff")
    for t in ("orders", "people", "logs"):
        status, body = await ws.call("POST", "/entity-tag-assignments", json={
            "entity_type": "columns", "entity_name": f"{c}.sales.{t}.email", "tag_key": "pii"})
        assert status == 200, body
    status, body = await ws.call("POST", "/entity-tag-assignments", json={
        "entity_type": "columns", "entity_name": f"{c}.hr.staff.email", "tag_key": "pii", "tag_value": "email"})
    assert status == 200, body
    for t in ("sales.orders", "sales.people", "sales.events", "hr.staff"):
        await ok(ws, "PATCH", f"/tables/{c}.{t}", json={"owner": team})
    await ok(ws, "POST", "/catalogs", json={"name": f"{c}_other"})
    await ok(ws, "POST", "/schemas", json={"name": "x", "catalog_name": f"{c}_other"})
    await _table(ws, f"{c}_other", "x", "t")
    return c, team


async def query(ws, q, **body):
    return await ok(ws, "POST", QUERY, json={"query": q, **body})


async def names(ws, q, **body) -> list[str]:
    """Every result's full name, following the page tokens."""
    out, token = [], None
    for _ in range(100):
        page = await query(ws, q, **body, **({"page_token": token} if token else {}))
        out += [r["full_name"] for r in page["results"]]
        token = page.get("next_page_token")
        if token is None:
            return out
    raise AssertionError("too many pages")


async def test_the_issues_example_and_only_what_the_caller_may_see(server, ws):
    c, team = await _world(server, ws)
    page = await query(ws, EXAMPLE.format(c=c))
    assert [r["full_name"] for r in page["results"]] == [f"{c}.hr.staff", f"{c}.sales.orders"]
    first = page["results"][0]
    assert first["kind"] == "table" and first["securable_type"] == "TABLE" and first["owner"] == team and first["id"]
    assert "next_page_token" not in page and page["version"] > 0 and page["nodes_visited"] > 5

    assert await names(ws, f'/catalog[name = "{c}"]/schema/table/column[tags["pii"] = "email"]') == \
        [f"{c}.hr.staff.email"]
    assert await names(ws, f'/catalog[name like "{c}%"]/schema[exists(table[owner_kind = "user"])]') == \
        [f"{c}.sales", f"{c}_other.x"]

    # a user who may use c and c.sales and read orders only: c.hr and the other tables are not there,
    # not even through a filter (no exists(...) sees them)
    reader = await user(server, ws)
    await grant(ws, "catalog", c, reader.name, "USE CATALOG")
    await grant(ws, "schema", f"{c}.sales", reader.name, "USE SCHEMA")
    await grant(ws, "table", f"{c}.sales.orders", reader.name, "SELECT")
    assert await names(reader, EXAMPLE.format(c=c)) == [f"{c}.sales.orders"]
    assert await names(reader, f'/catalog[name like "{c}%"]/*/*') == [f"{c}.sales.orders"]
    assert await names(reader, "/catalog[exists(schema/table[name = \"staff\"])]") == []
    assert await names(reader, f'/catalog[name = "{c}"]/schema[exists(table[name = "people"])]') == []
    # grants: a reader of orders sees its grants (the permissions API's rule), none of the others'
    assert await names(reader, f'/catalog/schema/table[exists(grant[principal = "{reader.name}"])]') == \
        [f"{c}.sales.orders"]
    assert await names(ws, f'/catalog/schema[exists(grant[principal = "{reader.name}" and '
                           'privilege = "USE SCHEMA"])]') == [f"{c}.sales"]
    assert await names(reader, f'/catalog/schema[exists(grant[principal = "{reader.name}"])]') == [f"{c}.sales"]

    # one who holds SELECT on a table but may not use its catalog: the catalog is listed (it holds
    # something granted to it), but it may not read it, so its grants are not there for a filter
    peeker = await user(server, ws)
    await grant(ws, "table", f"{c}.sales.people", peeker.name, "SELECT")
    assert await names(peeker, f'/catalog[name = "{c}"]') == [c]
    assert await names(ws, f'/catalog[name = "{c}" and exists(grant)]') == [c]
    assert await names(peeker, f'/catalog[name = "{c}" and exists(grant)]') == []
    assert await names(peeker, f'/catalog[name = "{c}" and not exists(grant[principal = "{reader.name}"])]') == [c]
    assert await names(peeker, f'/catalog[name = "{c}"]/*') == []          # nor may it walk into it


async def test_pages_pin_the_version_while_the_metastore_moves_on(server, ws):
    c, _ = await _world(server, ws)
    q = f'/catalog[name = "{c}"]/schema/table'
    page = await query(ws, q, max_results=2)
    assert [r["name"] for r in page["results"]] == ["staff", "events"]
    version = page["version"]
    # writes after the first page: a new table, a dropped one, a changed comment
    await _table(ws, c, "sales", "zebra")
    await ok(ws, "DELETE", f"/tables/{c}.sales.people")
    await ok(ws, "PATCH", f"/tables/{c}.sales.orders", json={"comment": "now commented"})
    rest = []
    token = page["next_page_token"]
    while token:
        more = await query(ws, q, max_results=2, page_token=token)
        assert more["version"] == version
        rest += more["results"]
        token = more.get("next_page_token")
    assert [r["name"] for r in rest] == ["logs", "orders", "people"]
    assert "comment" not in rest[1]                      # as it was at the first page's version
    # a new query reads the new version
    assert await names(ws, q) == [f"{c}.hr.staff"] + [f"{c}.sales.{t}" for t in ("events", "logs", "orders", "zebra")]


async def test_the_bound_on_work_ends_a_page_early_and_the_next_goes_on(server, ws):
    c, _ = await _world(server, ws)
    q = f'/catalog[name = "{c}"]/schema/table/column'
    everything = await names(ws, q)
    assert len(everything) == 10
    page = await query(ws, q, max_nodes=4)
    assert page["work_bound_reached"] is True and page["next_page_token"]
    assert page["nodes_visited"] <= 4 + 1 and len(page["results"]) < 10
    assert await names(ws, q, max_nodes=4) == everything          # small pages add up to the same answer


async def test_bad_queries_and_tokens_are_clear_400s(ws):
    for q, words in [("/schema", "not a child of the metastore"), ("/catalog[name = ]", "character 17"),
                     ("/catalog[nme = \"x\"]", "unknown field 'nme'"), ("", "empty"),
                     ("/catalog[created_at > \"soon\"]", "not a date or time")]:
        status, body = await ws.call("POST", QUERY, json={"query": q})
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE" and words in body["message"], body
    status, body = await ws.call("POST", QUERY, json={"query": 7})
    assert status == 400 and "must be a string" in body["message"]
    status, body = await ws.call("POST", QUERY, json={"query": "/catalog", "max_nodes": 0})
    assert status == 400 and "max_nodes" in body["message"]
    status, body = await ws.call("POST", QUERY, json={"query": "/catalog", "page_token": "nonsense"})
    assert status == 400 and "page_token" in body["message"]
    await ok(ws, "POST", "/catalogs", json={"name": unique("a")})
    await ok(ws, "POST", "/catalogs", json={"name": unique("b")})
    token = (await query(ws, "/catalog", max_results=1))["next_page_token"]
    status, body = await ws.call("POST", QUERY, json={"query": "/catalog/schema", "page_token": token})
    assert status == 400 and "another query" in body["message"]


async def test_a_token_outlives_its_held_snapshot_through_the_history(server, ws):
    """Another owner's write (straight to the store: this shard replays it, and its cache forgets what
    changed) and eight newer snapshots that push the query's out of the shard: the next pages are
    read at the token's version, c.sales's tables from the metastore's history, as they were."""
    c, _ = await _world(server, ws)
    q = f'/catalog[name = "{c}"]/schema/table'
    page = await query(ws, q, max_results=1)
    assert [r["name"] for r in page["results"]] == ["staff"]
    store, ms = server.store, ws.metastore_id
    version, logs = await store.get_asset(ms, "table", f"{c}.sales.logs")
    _, orders = await store.get_asset(ms, "table", f"{c}.sales.orders")
    async with store.write(ms, version) as tx:
        await tx.delete([logs])
        await tx.put(dataclasses.replace(orders, info={**orders.info, "comment": "now commented"}))
    for i in range(9):       # each a write through this shard (it catches up first), then a new snapshot
        await ok(ws, "POST", "/catalogs", json={"name": f"{c}_n{i}"})
        await query(ws, f'/catalog[name = "{c}_n{i}"]')
    rest, token = [], page["next_page_token"]
    while token:
        more = await query(ws, q, max_results=2, page_token=token)
        assert more["version"] == page["version"]
        rest += more["results"]
        token = more.get("next_page_token")
    assert [r["name"] for r in rest] == ["events", "logs", "orders", "people"]
    assert "comment" not in rest[2]
    now = await names(ws, q)
    assert f"{c}.sales.logs" not in now and len(now) == 4


async def test_every_example_of_the_doc_runs(server, ws):
    """docs/queries.md's examples, through the server over a small world: each is answered (200)."""
    c, _ = await _world(server, ws)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "queries.md").read_text()
    examples = re.findall(r"```query\n(.*?)\n```", doc, re.S)
    assert len(examples) >= 15
    for q in examples:
        status, body = await ws.call("POST", QUERY, json={"query": q})
        assert status == 200 and isinstance(body["results"], list), (q, body)
    # the opening example, with its catalog renamed to this world's
    assert await names(ws, examples[0].replace('"main"', f'"{c}"')) == [f"{c}.hr.staff", f"{c}.sales.orders"]
