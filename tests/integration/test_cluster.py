"""The sharded cluster on a real Ray: routing, direct-to-shard requests, failover, dual ownership."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

import orjson
import pytest
import ray
from yarl import URL

from shardcat.client.direct import DirectClient
from shardcat.cluster.ray_cluster import HUNG_AFTER, PING_INTERVAL, RayCluster
from shardcat.router.routing import RoutingTable
from shardcat.web.shard_client import ShardClient
from shardcat.serving.actor import ShardActor
from shardcat.shards.shard import CacheConfig
from tests.conftest import PREFIX, new_workspace, serving


cluster = serving("cluster", shards=2)


@pytest.fixture
async def cws(cluster, http, tmp_path):
    """A fresh metastore and workspace, served through the cluster's router."""
    return await new_workspace(cluster, http, tmp_path)


async def _get(ws, base_url: str, path: str):
    async with ws.session.get(base_url + PREFIX + path, headers=ws.headers) as r:
        return r.status, await r.json(content_type=None)


async def test_router_forwards_and_client_can_go_direct(cluster, cws):
    status, catalog = await cws.call("POST", "/catalogs", json={"name": "c1"})
    assert status == 200, catalog
    status, routing = await cws.call("GET", "/shardcat/routing")
    assert status == 200
    owner = routing["metastores"][cws.metastore_id]
    assert routing["my_shard"] == routing["shards"][owner]["url"]
    # Straight to the owner shard: same answer as through the router.
    assert await _get(cws, routing["my_shard"], "/catalogs/c1") == (200, catalog)
    # Through the router, the shard's audit request id and metastore version come back too.
    async with cws.session.get(cws.url + PREFIX + "/catalogs/c1", headers=cws.headers) as r:
        assert r.status == 200 and len(r.headers["X-Shardcat-Request-Id"]) == 32
        assert int(r.headers["X-Shardcat-Version"]) >= 1
    # The owner served the second read of c1 from its cache.
    owner_actor = cluster.cluster.routing.shards[owner].actor
    stats = await owner_actor.stats.remote()
    assert stats["cache"]["hits"] >= 1
    assert stats["niceness"] == 0       # Ray's default for workers (15) would put the router and clients first
    # Any other shard refuses and says why.
    other = next(s["url"] for name, s in routing["shards"].items() if name != owner and s["alive"])
    status, err = await _get(cws, other, "/catalogs/c1")
    assert status == 421 and err["error_code"] == "NOT_OWNER"


@pytest.mark.skipif(sys.platform != "linux", reason="abstract Unix socket names are Linux's")
async def test_the_router_reaches_local_shards_over_unix_sockets(cluster, cws):
    """A local Ray's shards also listen on a Unix socket, and the router's hops use it."""
    status, catalog = await cws.call("POST", "/catalogs", json={"name": "over_unix"})
    assert status == 200, catalog
    routing = cluster.cluster.routing
    owner = routing.shards[routing.owner[cws.metastore_id]]
    assert owner.local_socket.startswith("\0shardcat-")
    assert owner.address == (URL(owner.url).host, URL(owner.url).port, owner.local_socket)
    client = ShardClient()
    try:
        answer = await client.request(owner.address, "GET", PREFIX + "/catalogs/over_unix", cws.headers)
    finally:
        client.close()
    assert answer.status == 200 and orjson.loads(answer.body) == catalog


async def test_search_changes_and_lineage_through_the_router(cluster, cws):
    """shardcat's own read and report endpoints reach the owner shard like the Unity Catalog ones."""
    start = (await cws.call("GET", "/shardcat/changes"))[1]["metastore_version"]
    await cws.call("POST", "/catalogs", json={"name": "c"})
    await cws.call("POST", "/schemas", json={"name": "s", "catalog_name": "c"})
    for name in ("orders", "daily_orders"):
        status, _ = await cws.call("POST", "/tables", json={
            "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
        assert status == 200
    status, _ = await cws.call("POST", "/shardcat/lineage", json={"target": "c.s.daily_orders",
                                                                   "sources": [{"name": "c.s.orders"}]})
    assert status == 200
    status, found = await cws.call("GET", "/shardcat/search", params={"query": "orders"})
    assert status == 200 and [r["full_name"] for r in found["results"]] == ["c.s.orders", "c.s.daily_orders"]
    status, feed = await cws.call("GET", "/shardcat/changes", params={"since_version": str(start)})
    changed = [s["full_name"] for c in feed["changes"] for s in c["securables"]]
    # the catalog's write makes its default schema too, the two in either order
    assert status == 200 and sorted(changed[:2]) == ["c", "c.default"]
    assert changed[2:] == ["c.s", "c.s.orders", "c.s.daily_orders"]
    status, lineage = await cws.call("GET", "/shardcat/lineage", params={"name": "c.s.daily_orders"})
    assert status == 200 and [e["source"]["full_name"] for e in lineage["edges"]] == ["c.s.orders"]


async def test_transactions_through_the_router(cluster, cws):
    """A multi-asset transaction reaches the owner shard through the router: one version for all of it;
    disjoint ones sent at once all commit, two writing the same table: one 409 naming it."""
    def table(name: str) -> dict:
        return {"op": "create", "type": "table", "body": {
            "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]}}

    status, done = await cws.call("POST", "/shardcat/transactions", json={"operations": [
        {"op": "create", "type": "catalog", "body": {"name": "c"}},
        {"op": "create", "type": "schema", "body": {"name": "s", "catalog_name": "c"}},
        *[table(f"t{i}") for i in range(4)]]})
    assert status == 200, done
    read_at = done["version"]

    def comment(name: str, text: str) -> dict:
        return {"read_at": read_at, "operations": [
            {"op": "update", "type": "table", "name": f"c.s.{name}", "body": {"comment": text}}]}

    answers = await asyncio.gather(*[cws.call("POST", "/shardcat/transactions", json=comment(f"t{i}", "mine"))
                                     for i in range(4)])
    assert [s for s, _ in answers] == [200] * 4, answers
    read_at = max(b["version"] for _, b in answers)
    answers = await asyncio.gather(*[cws.call("POST", "/shardcat/transactions", json=comment("t0", text))
                                     for text in ("x", "y")])
    assert sorted(s for s, _ in answers) == [200, 409], answers
    assert "Conflict on table 'c.s.t0'" in next(b for s, b in answers if s == 409)["message"]


async def test_killed_shard_metastores_are_served_again(cluster, cws):
    for i in range(5):
        assert (await cws.call("POST", "/catalogs", json={"name": f"k{i}"}))[0] == 200
    routing = cluster.cluster.routing
    owner = routing.owner[cws.metastore_id]
    killed_at = time.monotonic()
    await cluster.cluster.kill(owner)
    while routing.shards[owner].alive:          # the supervisor notices within its ping timeout
        assert time.monotonic() - killed_at < 30     # bounded; how fast: docs/reliability.md
        await asyncio.sleep(0.05)
    # The router retries within its budget, so clients see success once a survivor took over.
    status, body = await cws.call("GET", "/catalogs")
    assert status == 200, body
    assert sorted(c["name"] for c in body["catalogs"]) == [f"k{i}" for i in range(5)]
    assert routing.owner[cws.metastore_id] != owner
    assert not routing.shards[owner].alive
    # Writes work on the new owner, and a replacement shard joined.
    assert (await cws.call("POST", "/catalogs", json={"name": "after"}))[0] == 200
    deadline = time.monotonic() + 30
    while len(routing.live()) < 2:      # the supervisor starts a replacement shard
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)


async def test_a_busy_shard_is_not_taken_for_dead(cluster, cws):
    """The supervisor's ping is answered off the serving loop: a loop stalled for longer than the
    old 1 s ping timeout (a burst of heavy requests does that on two cores) answers at once with
    its stall, and the shard keeps its metastores; only a stall past HUNG_AFTER is a hang."""
    assert (await cws.call("POST", "/catalogs", json={"name": "busy"}))[0] == 200
    owner = (await cws.call("GET", "/shardcat/routing"))[1]["metastores"][cws.metastore_id]
    handle = cluster.cluster.routing.shards[owner]
    seen = len(cluster.cluster.events)
    stalled = None
    for _ in range(10):             # on a busy machine the pings may all miss a stall: stall again
        stall = handle.actor.pause.remote(1.2)
        while stalled is None and not ray.wait([stall], timeout=0)[0]:
            lag, _ = await asyncio.wait_for(handle.actor.ping.remote(), 5)
            stalled = lag if lag > 0.3 else None
            await asyncio.sleep(0.05)
        await stall
        if stalled is not None:
            break
    assert stalled is not None and stalled < HUNG_AFTER
    await asyncio.sleep(3 * PING_INTERVAL)
    assert not [e for e in cluster.cluster.events[seen:] if e["event"] == "shard_unresponsive"]
    assert cluster.cluster.routing.shards[owner] is handle and handle.alive
    assert (await cws.call("GET", "/shardcat/routing"))[1]["metastores"][cws.metastore_id] == owner
    assert (await cws.call("GET", "/catalogs/busy"))[0] == 200


async def test_dual_ownership_is_detected_and_the_stale_owner_drops(cluster, cws):
    assert (await cws.call("POST", "/catalogs", json={"name": "d0"}))[0] == 200
    routing = cluster.cluster.routing
    old = routing.shards[routing.owner[cws.metastore_id]]
    new = next(h for h in routing.live() if h is not old)
    # Move the metastore without telling the old owner: both now believe they own it.
    await cluster.store.assign_shard(cws.metastore_id, new.name)
    routing.owner[cws.metastore_id] = new.name
    await new.actor.own.remote([cws.metastore_id])
    assert cws.metastore_id in await old.actor.owned.remote()
    # A write through the new owner moves the version past what the old owner knows.
    assert (await cws.call("POST", "/catalogs", json={"name": "d1"}))[0] == 200
    # A client with a stale routing table asks the old owner: it notices the foreign write,
    # sees the assignment names another shard, drops the metastore and says so.
    status, err = await _get(cws, old.url, "/catalogs/d1")
    assert status == 421 and err["error_code"] == "NOT_OWNER", err
    assert cws.metastore_id not in await old.actor.owned.remote()
    assert (await old.actor.stats.remote())["dual_owner_drops"] >= 1
    status, got = await cws.call("GET", "/catalogs/d1")
    assert status == 200 and got["name"] == "d1"


async def _write_while_the_metastore_moves(cluster, cws, method: str, path: str, **kw) -> tuple[int, dict]:
    """Send a write through the router while the metastore's row is locked (so that its transaction
    waits on its owner), move the metastore to the other shard meanwhile (warmed, switched, the old
    owner told to drop it), then let the write commit on the owner it reached: its (status, body)."""
    routing, ms = cluster.cluster.routing, cws.metastore_id
    new = next(h.name for h in routing.live() if h.name != routing.owner[ms])
    pool = cluster.store.pool
    async with pool.acquire() as holder, holder.transaction():
        await holder.execute("SELECT version FROM metastores WHERE id = $1 FOR UPDATE", uuid.UUID(ms))
        write = asyncio.create_task(cws.call(method, path, **kw))
        deadline = time.monotonic() + 60
        while not await pool.fetchval("""SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
                                           AND query LIKE '%metastores%' AND pid <> $1""", holder.get_server_pid()):
            assert not write.done(), write.result()     # it must be waiting on the lock, not answered
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await routing.move(ms, new)
        assert routing.owner[ms] == new
    return await write


async def test_a_write_on_a_moving_metastore_is_answered_once_and_what_it_acknowledged_is_served(cluster, cws):
    """Writes take the router's fast path. One that commits on a metastore's old owner after the
    metastore moved is acknowledged by it, never sent again to the new owner (which would answer a
    drop already done with 404), and the new owner serves what it acknowledged (issue 33)."""
    table = {"catalog_name": "c", "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
             "columns": []}
    assert (await cws.call("POST", "/catalogs", json={"name": "c"}))[0] == 200
    assert (await cws.call("POST", "/schemas", json={"name": "s", "catalog_name": "c"}))[0] == 200
    for name in ("t1", "t2"):
        assert (await cws.call("POST", "/tables", json={"name": name, **table}))[0] == 200
    stats = cluster.front.front.stats
    before = dict(stats)
    # A drop, then (the metastore moving back) a create, each committing on the owner it reached.
    status, body = await _write_while_the_metastore_moves(cluster, cws, "DELETE", "/tables/c.s.t1")
    assert status == 200, body
    status, made = await _write_while_the_metastore_moves(cluster, cws, "POST", "/tables",
                                                          json={"name": "t3", **table})
    assert status == 200 and made["full_name"] == "c.s.t3", made
    # Each went straight to its shard once: none came back refused and went through the router app.
    assert stats["fast"] - before["fast"] == 2 and stats["through_app"] == before["through_app"], (before, stats)
    # The new owner serves what was acknowledged on the old one: t1 gone, t3 there, t2 untouched.
    assert (await cws.call("GET", "/tables/c.s.t1"))[0] == 404
    status, got = await cws.call("GET", "/tables/c.s.t3")
    assert status == 200 and got["table_id"] == made["table_id"], got
    assert (await cws.call("DELETE", "/tables/c.s.t3"))[0] == 200
    assert (await cws.call("DELETE", "/tables/c.s.t2"))[0] == 200
    listed = await cws.call("GET", "/tables", params={"catalog_name": "c", "schema_name": "s"})
    assert listed == (200, {"tables": []}), listed


async def test_a_shard_with_the_cache_off_reads_the_database_every_time(cluster, cws, pg_url):
    assert (await cws.call("POST", "/catalogs", json={"name": "nc"}))[0] == 200
    actor = ShardActor.remote("no-cache", pg_url, CacheConfig(enabled=False))
    try:
        url, _ = await actor.start.remote()
        await actor.own.remote([cws.metastore_id])
        for _ in range(3):
            status, got = await _get(cws, url, "/catalogs/nc")
            assert status == 200 and got["name"] == "nc"
        assert (await actor.stats.remote())["cache"] == {}          # no metastore cache was built
    finally:
        ray.kill(actor, no_restart=True)


async def test_shards_run_the_event_loop_asked_for_whatever_the_workers_inherit(cluster, pg_url):
    """`--event-loop asyncio` reaches a shard actor through its own environment: the workers of a
    joined cluster do not inherit this process's (the session's Ray workers get uvloop)."""
    assert "RAY_USE_UVLOOP" not in os.environ
    some_shard = next(h for h in cluster.cluster.routing.shards.values() if h.alive)
    assert (await some_shard.actor.stats.remote())["event_loop"] == "uvloop"
    handle = await RayCluster(RoutingTable(cluster.store), pg_url, event_loop="asyncio").add_shard("on-asyncio")
    try:
        assert (await handle.actor.stats.remote())["event_loop"] == "asyncio"
    finally:
        ray.kill(handle.actor, no_restart=True)


async def test_the_direct_client_skips_the_router_and_follows_a_failover(cluster, cws):
    client = DirectClient(cws.url, cws.token, cws.session)
    status, made = await client.call("POST", "/catalogs", json={"name": "direct"})
    assert status == 200, made
    routing = cluster.cluster.routing
    owner = routing.shards[routing.owner[cws.metastore_id]]
    assert client.shard_url == owner.url != cws.url
    assert client.seen_version >= 1
    await cluster.cluster.kill(owner.name)
    deadline = time.monotonic() + 30
    while owner.alive:                  # the kill has taken effect once the supervisor noticed
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    # The dead shard refuses connections; the client asks the router again until a survivor serves.
    status, got = await client.call("GET", "/catalogs/direct")
    assert status == 200 and got == made
    assert client.shard_url != owner.url


async def test_path_queries_through_the_router_page_on_the_owner_shard(cluster, cws):
    """POST /shardcat/query reaches the owner shard; its page tokens (read-only POSTs) follow it there."""
    await cws.call("POST", "/catalogs", json={"name": "q"})
    await cws.call("POST", "/schemas", json={"name": "s", "catalog_name": "q"})
    for name in ("a", "b", "c"):
        status, _ = await cws.call("POST", "/tables", json={
            "name": name, "catalog_name": "q", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
        assert status == 200
    found, token = [], None
    for _ in range(5):
        status, page = await cws.call("POST", "/shardcat/query", json={
            "query": '/catalog[name = "q"]/schema/table/column[type = "LONG"]', "max_results": 2,
            **({"page_token": token} if token else {})})
        assert status == 200, page
        found += [r["full_name"] for r in page["results"]]
        token = page.get("next_page_token")
        if token is None:
            break
    assert found == ["q.s.a.id", "q.s.b.id", "q.s.c.id"]
