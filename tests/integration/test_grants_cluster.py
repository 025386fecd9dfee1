"""Grants on the sharded cluster (real Ray, two shard actors): a revoke through the router takes
effect on the next request; the grants hold on the shard a metastore moves to; the old owner,
asked with a newer version, does not answer from the grants it remembers."""

from __future__ import annotations

from governance_users import grant, user

from tests.conftest import PREFIX, new_workspace, serving


cluster = serving("grants-cluster", shards=2)


async def _direct(caller, base_url: str, path: str, min_version: int):
    headers = {**caller.headers, "X-Shardcat-Min-Version": str(min_version)}
    async with caller.session.get(base_url + PREFIX + path, headers=headers) as r:
        return r.status, await r.json(content_type=None)


async def test_revoke_and_move(cluster, http, tmp_path):
    ws = await new_workspace(cluster, http, tmp_path)
    for path, body in (("/catalogs", {"name": "c"}), ("/schemas", {"name": "s", "catalog_name": "c"}),
                       ("/tables", {"name": "t", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
                                    "data_source_format": "DELTA", "columns": []})):
        assert (await ws.call("POST", path, json=body))[0] == 200
    reader = await user(cluster, ws, groups=["cluster-readers"])
    await grant(ws, "catalog", "c", "cluster-readers", "USE CATALOG", "USE SCHEMA", "SELECT")
    assert (await reader.call("GET", "/tables/c.s.t"))[0] == 200
    await grant(ws, "catalog", "c", "cluster-readers", remove=["SELECT"])
    status, body = await reader.call("GET", "/tables/c.s.t")
    assert (status, body["error_code"]) == (404, "NOT_FOUND")     # without SELECT it is invisible: as missing

    # Move the metastore to the other shard: the new owner loads the grants from the database.
    routing = cluster.cluster.routing
    old = routing.shards[routing.owner[ws.metastore_id]]
    new = next(h for h in routing.live() if h is not old)
    await cluster.store.assign_shard(ws.metastore_id, new.name)
    routing.owner[ws.metastore_id] = new.name
    await new.actor.own.remote([ws.metastore_id])
    status, body = await reader.call("GET", "/tables/c.s.t")
    assert (status, body["error_code"]) == (404, "NOT_FOUND")     # without SELECT it is invisible: as missing
    await grant(ws, "table", "c.s.t", "cluster-readers", "SELECT")     # through the new owner
    assert (await reader.call("GET", "/tables/c.s.t"))[0] == 200
    version = (await cluster.store.get_metastore(ws.metastore_id)).version
    # The old owner still holds the metastore in memory, with the grants it knew (no SELECT): asked
    # directly with the version the client saw, it must not answer from them: it catches up, sees
    # the metastore assigned elsewhere and steps aside.
    status, body = await _direct(reader, old.url, "/tables/c.s.t", version)
    assert (status, body["error_code"]) == (421, "NOT_OWNER"), body
