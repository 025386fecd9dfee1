"""Iceberg commits on the sharded cluster (real Ray): with two shards both believing they own the
metastore, a commit sent straight to the stale owner (whose cache holds the table's older metadata)
is never applied on that older metadata. Its metastore write fails the version check, and the
stale owner, catching up, finds the metastore moved and answers 421 NOT_OWNER (a router re-sends
such a request to the owner); had it still owned it, the commit would be checked against the
current metadata. Either way the new owner's append is kept."""

from __future__ import annotations

import asyncio

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from tests.conftest import PREFIX, new_workspace, serving

cluster = serving("iceberg-cluster", shards=2)


async def test_a_stale_owner_cannot_lose_a_commit(cluster, http, tmp_path):
    ws = await new_workspace(cluster, http, tmp_path)
    assert (await ws.call("POST", "/catalogs", json={"name": "ice"}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "ice"}))[0] == 200
    catalog = await asyncio.to_thread(load_catalog, "c", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice",
                                      token=ws.token)
    schema = Schema(NestedField(1, "n", LongType(), required=False))
    table = await asyncio.to_thread(catalog.create_table, "s.t", schema)
    await asyncio.to_thread(table.append, pa.table({"n": pa.array([0], pa.int64())}))

    routing = cluster.cluster.routing
    old = routing.shards[routing.owner[ws.metastore_id]]
    async with http.get(f"{old.url}{PREFIX}/iceberg/v1/catalogs/ice/namespaces/s/tables/t",
                        headers=ws.headers) as r:
        assert r.status == 200
        before = (await r.json())["metadata"]["current-snapshot-id"]        # the old owner caches the table now

    # Move the metastore without telling the old owner: both believe they own it.
    new = next(h for h in routing.live() if h is not old)
    await cluster.store.assign_shard(ws.metastore_id, new.name)
    routing.owner[ws.metastore_id] = new.name
    await new.actor.own.remote([ws.metastore_id])
    await asyncio.to_thread(table.append, pa.table({"n": pa.array([1], pa.int64())}))     # through the new owner

    stale = f"{old.url}{PREFIX}/iceberg/v1/catalogs/ice/namespaces/s/tables/t"
    # Based on the snapshot the old owner still caches: refused, whichever shard answers.
    refused = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": before}],
               "updates": [{"action": "set-properties", "updates": {"lost": "yes"}}]}
    async with http.post(stale, json=refused, headers=ws.headers) as r:
        assert r.status in (409, 421), await r.text()
        assert (await r.json()).get("error_code") in ("NOT_OWNER", None), await r.text()
    # No requirement on the snapshot: redone on the current metadata, the new owner's append kept.
    async with http.post(stale, json={"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
                         headers=ws.headers) as r:
        assert r.status in (200, 421), await r.text()

    fresh = await asyncio.to_thread(catalog.load_table, "s.t")
    assert "lost" not in fresh.properties
    # Through the router: HEAD (pyiceberg's table_exists) and a two-level namespace in a path (%1F).
    assert await asyncio.to_thread(catalog.table_exists, "s.t")
    async with http.get(f"{ws.api}/iceberg/v1/namespaces/ice%1Fs/tables", headers=ws.headers) as r:
        assert (r.status, await r.json()) == (200, {"identifiers": [{"namespace": ["ice", "s"], "name": "t"}]})
    assert sorted((await asyncio.to_thread(lambda: fresh.scan().to_arrow()))["n"].to_pylist()) == [0, 1]
    assert len(fresh.snapshots()) == 2


async def test_a_commit_retried_after_a_shard_failover_is_applied_once(cluster, http, tmp_path):
    """Idempotency-Key across shards: a commit lands on the metastore's owner, the metastore moves to the
    other shard, and the client's retry with the same key (through the router) answers the first outcome:
    the commit is not applied again (its answer came from PostgreSQL, not from the first shard's memory)."""
    import uuid
    ws = await new_workspace(cluster, http, tmp_path)
    assert (await ws.call("POST", "/catalogs", json={"name": "ice"}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "ice"}))[0] == 200
    path = "/iceberg/v1/catalogs/ice/namespaces/s/tables"
    status, _ = await ws.call("POST", path, json={"name": "t", "schema": {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "n", "type": "long", "required": False}]}})
    assert status == 200
    key = {"Idempotency-Key": str(uuid.uuid4())}
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    status, first = await ws.call("POST", f"{path}/t", json=commit, headers=key)
    assert status == 200, first

    routing = cluster.cluster.routing
    old = routing.shards[routing.owner[ws.metastore_id]]
    new = next(h for h in routing.live() if h is not old)
    await cluster.store.assign_shard(ws.metastore_id, new.name)
    routing.owner[ws.metastore_id] = new.name
    await new.actor.own.remote([ws.metastore_id])

    status, again = await ws.call("POST", f"{path}/t", json=commit, headers=key)
    assert (status, again) == (200, first)
    status, loaded = await ws.call("GET", f"{path}/t")
    assert loaded["metadata-location"] == first["metadata-location"]
    assert len(loaded["metadata"]["metadata-log"]) == 1           # the create's file, then one commit
    # The router passes a load's ETag on, and If-None-Match back: a 304 through it.
    async with http.get(f"{ws.api}{path}/t", headers=ws.headers) as r:
        tag = r.headers["ETag"]
    async with http.get(f"{ws.api}{path}/t", headers={**ws.headers, "If-None-Match": tag}) as r:
        assert r.status == 304 and r.headers["ETag"] == tag
