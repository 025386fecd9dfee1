"""Two shards owning one metastore: no stale read after an acknowledged write, no lost update.

The client remembers the newest metastore version it saw acknowledged and sends it with
every request (as the router does); each shard serves from its multi-version cache and
must catch up first when it is behind. Hypothesis drives random interleavings through
both shards and compares every answer with a model of the metastore.
"""

from __future__ import annotations

import asyncio
import uuid

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardcat.auth import Caller
from shardcat.errors import CatalogError
from shardcat.shards import shard as shard_module
from shardcat.catalog.tree.service import CatalogService
from shardcat.shards.session import Session
from shardcat.shards.shard import CacheConfig, Shard
from shardcat.serving.app import _metastore_session
from shardcat.store.db import Store
from shardcat.web.middleware import error_middleware

NAMES = ["t0", "t1", "t2", "t3"]
TABLE = {"catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "PARQUET",
         "columns": []}

ops = st.lists(st.one_of(
    st.tuples(st.just("create"), st.integers(0, 1), st.sampled_from(NAMES)),
    st.tuples(st.just("update"), st.integers(0, 1), st.sampled_from(NAMES), st.text("abc", max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 1), st.sampled_from(NAMES)),
    st.tuples(st.just("get"), st.integers(0, 1), st.sampled_from(NAMES)),
    st.tuples(st.just("list"), st.integers(0, 1)),
), min_size=1, max_size=30)


async def _new_metastore(store: Store, root: str) -> str:
    await store.migrate()
    metastore_id = str(uuid.uuid4())
    await store.create_metastore(metastore_id, f"p-{metastore_id[:8]}", {"storage_root": f"{root}/{metastore_id}"})
    return metastore_id


async def _scenario(pg_url: str, root: str, steps) -> None:
    store = await Store.open(pg_url, min_size=1, max_size=4)
    try:
        metastore_id = await _new_metastore(store, root)
        shards = [Shard(store, "a"), Shard(store, "b")]
        services = [CatalogService(s) for s in shards]
        seen = 0                                       # newest version acknowledged to this client

        def caller() -> Caller:
            return Caller("admin", 1, True, 1, metastore_id, min_version=seen)

        def acknowledge(i: int) -> None:
            nonlocal seen
            seen = max(seen, shards[i].version_of(metastore_id))

        await services[0].create(caller(), "catalog", {"name": "c"})
        acknowledge(0)
        await services[1].create(caller(), "schema", {"name": "s", "catalog_name": "c"})
        acknowledge(1)
        model: dict[str, str | None] = {}              # table name -> comment
        for op, i, *args in steps:
            service = services[i]
            if op == "create":
                name = args[0]
                try:
                    await service.create(caller(), "table", {**TABLE, "name": name,
                                                            "storage_location": f"s3://bucket/{metastore_id}/{name}"})
                    assert name not in model, f"created {name} twice"
                    model[name] = None
                except CatalogError as e:
                    assert e.code == "ALREADY_EXISTS" and name in model, e.message
            elif op == "update":
                name, comment = args
                try:
                    got = await service.update(caller(), "table", f"c.s.{name}", {"comment": comment})
                    assert name in model and got["comment"] == comment
                    model[name] = comment
                except CatalogError as e:
                    assert e.code == "NOT_FOUND" and name not in model, e.message
            elif op == "delete":
                name = args[0]
                try:
                    await service.delete(caller(), "table", f"c.s.{name}")
                    assert name in model
                    del model[name]
                except CatalogError as e:
                    assert e.code == "NOT_FOUND" and name not in model, e.message
            elif op == "get":
                name = args[0]
                try:
                    got = await service.get(caller(), "table", f"c.s.{name}")
                    assert name in model, f"stale read: {name} was deleted"
                    assert got.get("comment") == model[name], "stale read of a comment"
                except CatalogError as e:
                    assert e.code == "NOT_FOUND" and name not in model, f"stale read: {name} exists"
            else:
                listed = await service.list(caller(), "table", "c.s")
                assert sorted(t["name"] for t in listed["tables"]) == sorted(model), "stale listing"
            acknowledge(i)
        # Nothing acknowledged was lost: the database (through a fresh, cache-less shard) agrees.
        fresh = CatalogService(Shard(store, "check", cache=CacheConfig(enabled=False)))
        listed = await fresh.list(Caller("admin", 1, True, 1, metastore_id), "table", "c.s")
        assert {t["name"]: t.get("comment") for t in listed["tables"]} == model
    finally:
        await store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_two_owners_never_read_stale_or_lose_updates(pg_url, tmp_path, steps):
    asyncio.run(_scenario(pg_url, f"file://{tmp_path}", steps))


def test_reconcile_replays_the_change_log_or_rebuilds(pg_url, tmp_path, monkeypatch):
    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        try:
            metastore_id = await _new_metastore(store, f"file://{tmp_path}")
            a, b = Shard(store, "a"), Shard(store, "b")
            sa, sb = CatalogService(a), CatalogService(b)
            caller = Caller("admin", 1, True, 1, metastore_id)
            await sa.create(caller, "catalog", {"name": "c"})
            assert (await sb.get(caller, "catalog", "c"))["name"] == "c"     # b caches it
            await sa.update(caller, "catalog", "c", {"comment": "one"})
            # b is behind by one change: a client that saw it acknowledged makes b replay the log.
            seen = Caller("admin", 1, True, 1, metastore_id, min_version=a.version_of(metastore_id))
            assert (await sb.get(seen, "catalog", "c"))["comment"] == "one"
            assert b.stats["reconciles"] == 1 and b.stats["rebuilds"] == 1   # the first build only
            # A gap past RECONCILE_GAP makes b drop its cache and rebuild instead.
            monkeypatch.setattr(shard_module, "RECONCILE_GAP", 3)
            for i in range(5):
                await sa.update(caller, "catalog", "c", {"comment": f"v{i}"})
            seen = Caller("admin", 1, True, 1, metastore_id, min_version=a.version_of(metastore_id))
            assert (await sb.get(seen, "catalog", "c"))["comment"] == "v4"
            assert b.stats["rebuilds"] == 2 and b.stats["reconciles"] == 1
        finally:
            await store.close()

    asyncio.run(scenario())


def test_the_cache_serves_reads_and_the_session_version_keeps_them_fresh(pg_url, tmp_path):
    """Without the client's version a shard answers from its cache (stale is allowed there);
    with it, the shard catches up first. This is what the property test above relies on."""
    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        try:
            metastore_id = await _new_metastore(store, f"file://{tmp_path}")
            a, b = Shard(store, "a"), Shard(store, "b")
            sa, sb = CatalogService(a), CatalogService(b)
            caller = Caller("admin", 1, True, 1, metastore_id)
            await sa.create(caller, "catalog", {"name": "c", "comment": "old"})
            assert (await sb.get(caller, "catalog", "c"))["comment"] == "old"     # b caches it
            hits = b.states[metastore_id].cache.stats()["hits"]
            await sa.update(caller, "catalog", "c", {"comment": "new"})
            assert (await sb.get(caller, "catalog", "c"))["comment"] == "old"     # from b's cache
            assert b.states[metastore_id].cache.stats()["hits"] == hits + 1
            seen = Caller("admin", 1, True, 1, metastore_id, min_version=a.version_of(metastore_id))
            assert (await sb.get(seen, "catalog", "c"))["comment"] == "new"
        finally:
            await store.close()

    asyncio.run(scenario())


def test_lookup_by_id_is_served_from_the_cache_and_kept_fresh(pg_url, tmp_path):
    """Endpoints that name an asset by id (temporary credentials, a model version's model) read it
    like lookups by name: from the cache, caught up to the client's version first; an id that is
    not a UUID, or that no asset has, is None."""
    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        try:
            metastore_id = await _new_metastore(store, f"file://{tmp_path}")
            a, b = Shard(store, "a"), Shard(store, "b")
            caller = Caller("admin", 1, True, 1, metastore_id)
            catalog = await CatalogService(a).create(caller, "catalog", {"name": "c", "comment": "old"})
            assert (await b.lookup_id(metastore_id, catalog["id"])).info["comment"] == "old"   # read, cached
            stats = b.states[metastore_id].cache.stats()
            await CatalogService(a).update(caller, "catalog", "c", {"comment": "new"})
            assert (await b.lookup_id(metastore_id, catalog["id"].upper())).info["comment"] == "old"
            assert b.states[metastore_id].cache.stats()["hits"] == stats["hits"] + 1
            assert b.states[metastore_id].cache.stats()["misses"] == stats["misses"]
            seen = a.version_of(metastore_id)
            assert (await b.lookup_id(metastore_id, catalog["id"], seen)).info["comment"] == "new"
            assert await b.lookup_id(metastore_id, "not-a-uuid") is None
            assert await b.lookup_id(metastore_id, str(uuid.uuid4())) is None
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_shard_never_answers_not_owner_for_a_write_it_applied(pg_url, tmp_path):
    """NOT_OWNER (421) tells the router nothing was done and to send the request to the owner. A
    request whose write was applied and that then meets NOT_OWNER (the metastore moved away before
    its answer was made) is answered 503, outcome for the client to read back, never 421: sent
    again, a drop done would be answered 404 by the new owner (issue 33). A request that only read
    still gets its 421."""
    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        try:
            metastore_id = await _new_metastore(store, f"file://{tmp_path}")
            shard = Shard(store, "a", claim_on_demand=False)
            caller = Caller("admin", 1, True, 1, metastore_id)

            @web.middleware
            async def signed_in(request, handler):
                # the request's session, as the apps' first middleware (audit) enters it
                with Session():
                    request["caller"] = caller
                    return await handler(request)

            async def write_then_read(request):
                shard.own(metastore_id)
                await CatalogService(shard).create(caller, "catalog", {"name": request.match_info["name"]})
                shard.drop(metastore_id)                 # moved away, as the router does it
                await shard.state(metastore_id)          # a read after the write: NOT_OWNER
                return web.json_response({})

            async def read(request):
                await shard.state(metastore_id)
                return web.json_response({})

            app = web.Application(middlewares=[error_middleware(1 << 20), signed_in, _metastore_session(shard)])
            app.add_routes([web.post("/write/{name}", write_then_read), web.get("/read", read)])
            async with TestClient(TestServer(app)) as client:
                r = await client.post("/write/moved")
                assert r.status == 503 and (await r.json())["error_code"] == "TEMPORARILY_UNAVAILABLE"
                assert (await store.get_asset(metastore_id, "catalog", "moved"))[1] is not None   # it was applied
                r = await client.get("/read")
                assert r.status == 421 and (await r.json())["error_code"] == "NOT_OWNER"
        finally:
            await store.close()

    asyncio.run(scenario())
