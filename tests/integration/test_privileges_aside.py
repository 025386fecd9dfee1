"""A cold owner of a large metastore loads its whole privilege index aside (#48): meanwhile a user's
requests are decided from the securables they ask about (governance/index.py). Here every
metastore counts as large (`privileges_aside_above=-1`) and the load aside is held back: users
with more and fewer rights, by several spellings and through several APIs, get what the whole
index gives them on the shared server, and the whole index is not loaded for it; read before the
writes made meanwhile, it is brought forward over them when it is swapped in. A list (what is
visible below a schema) waits for the whole index."""

from __future__ import annotations

import asyncio

import pytest

from conftest import new_workspace, serving
from governance_users import grant, user
from shardcat.governance import index as index_module
from shardcat.serving.app import SERVING
from shardcat.shards.state import CacheConfig

aside = serving("privileges-aside", cache=CacheConfig(privileges_aside_above=-1))
COLUMNS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}',
            "position": 0, "nullable": True}]


def _table(name: str) -> dict:
    return {"name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": COLUMNS}


@pytest.fixture(params=["whole index", "loading aside"])
async def world(request, server, aside, http, tmp_path, monkeypatch):
    running = server if request.param == "whole index" else aside
    ws = await new_workspace(running, http, tmp_path)
    for path, body in (("/catalogs", {"name": "c"}), ("/schemas", {"name": "s", "catalog_name": "c"}),
                       ("/tables", _table("t1")), ("/tables", _table("t2"))):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer
    bob, carol = await user(running, ws), await user(running, ws)
    await grant(ws, "catalog", "c", bob.name, "USE CATALOG")
    await grant(ws, "schema", "c.s", bob.name, "USE SCHEMA")
    await grant(ws, "table", "c.s.t1", bob.name, "SELECT")
    shard = running.runner.app[SERVING].shard
    held = asyncio.Event()
    if request.param == "loading aside":
        read = index_module.load_index

        async def read_then_held(store, metastore_id, pace=None):    # read at once, swapped in when let go
            got = await read(store, metastore_id, pace)
            await held.wait()
            return got
        monkeypatch.setattr(index_module, "load_index", read_then_held)
        shard.drop(ws.metastore_id)         # cold: the next request starts it afresh
    yield running, ws, bob, carol, shard, request.param, held
    held.set()


def _whole_loaded(shard, metastore_id) -> bool:
    state = shard.states.get(metastore_id)
    return state is not None and state.privileges is not None


async def test_each_user_gets_what_the_whole_index_gives_without_waiting_for_it(world):
    running, ws, bob, carol, shard, mode, held = world
    outcomes = []
    for who, caller in (("bob", bob), ("carol", carol)):
        for name in ("c.s.t1", "C.S.T1", "c.s.t2", "c.s.none"):
            status, _ = await caller.call("GET", f"/tables/{name}")
            outcomes.append((who, "get", name, status))
        status, _ = await caller.call("PATCH", "/tables/c.s.t1", json={"comment": "mine now"})
        outcomes.append((who, "update", status))
        status, _ = await caller.call("POST", "/tables", json=_table(f"by_{who}"))
        outcomes.append((who, "create", status))
        status, _ = await caller.call("DELETE", "/tables/c.s.t2")
        outcomes.append((who, "delete", status))
        status, body = await caller.call("POST", "/resolve", json={"items": [{"name": "c.s.t1"}, {"name": "c.s.t2"}],
                                                                   "credentials": False})
        outcomes.append((who, "resolve", status, [("table" in item) for item in body.get("items", [])]))
        status, _ = await caller.call("GET", "/schemas/c.s")
        outcomes.append((who, "schema", status))
    assert outcomes == [
        ("bob", "get", "c.s.t1", 200), ("bob", "get", "C.S.T1", 200), ("bob", "get", "c.s.t2", 404),
        ("bob", "get", "c.s.none", 404), ("bob", "update", 403), ("bob", "create", 403), ("bob", "delete", 404),
        ("bob", "resolve", 200, [True, False]), ("bob", "schema", 200),
        ("carol", "get", "c.s.t1", 404), ("carol", "get", "C.S.T1", 404), ("carol", "get", "c.s.t2", 404),
        ("carol", "get", "c.s.none", 404), ("carol", "update", 404), ("carol", "create", 404),
        ("carol", "delete", 404), ("carol", "resolve", 200, [False, False]), ("carol", "schema", 404)], mode
    status, body = await ws.call("GET", "/tables/c.s.t1")
    assert status == 200 and body.get("comment") is None           # no refused write landed
    if mode == "loading aside":
        assert not _whole_loaded(shard, ws.metastore_id)            # every answer above came without it
        assert shard.stats["privilege_chain_loads"] > 0

    # A grant and a revoke meanwhile count at once; the new table's owner decides about it at once.
    await grant(ws, "schema", "c.s", bob.name, "CREATE TABLE")
    await grant(ws, "table", "c.s.t1", bob.name, remove=["SELECT"])
    assert (await bob.call("GET", "/tables/c.s.t1"))[0] == 404
    status, made = await bob.call("POST", "/tables", json=_table("bobs"))
    assert status == 200 and made["owner"] == bob.name, made
    assert (await bob.call("PATCH", "/tables/c.s.bobs", json={"comment": "ok"}))[0] == 200
    assert (await carol.call("GET", "/tables/c.s.bobs"))[0] == 404

    # The whole index, read before those writes, is brought forward over them when it is swapped in.
    held.set()
    for _ in range(500):
        if _whole_loaded(shard, ws.metastore_id):
            break
        await asyncio.sleep(0.01)
    assert _whole_loaded(shard, ws.metastore_id)
    assert (await bob.call("GET", "/tables/c.s.t1"))[0] == 404
    assert (await bob.call("PATCH", "/tables/c.s.bobs", json={"comment": "still ok"}))[0] == 200
    # A list needs the whole index: answered with what bob may see.
    status, body = await bob.call("GET", "/tables", params={"catalog_name": "c", "schema_name": "s"})
    assert status == 200 and [t["name"] for t in body["tables"]] == ["bobs"], body
