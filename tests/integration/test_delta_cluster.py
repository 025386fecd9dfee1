"""Delta commits on the sharded cluster (real Ray): ratified commits survive a metastore moving
to another shard (with the old owner still believing it owns it) and the owner shard being killed."""

from __future__ import annotations

import asyncio
import time

import pyarrow as pa

from shardcat.delta import log as dlog
from shardcat.delta.client import DeltaCatalogClient
from tests.conftest import PREFIX, new_workspace, serving

SCHEMA = pa.schema([("n", pa.int64())])


cluster = serving("delta-cluster", shards=2)


async def test_commits_survive_a_move_and_a_killed_shard(cluster, http, tmp_path):
    ws = await new_workspace(cluster, http, tmp_path)
    assert (await ws.call("POST", "/catalogs", json={"name": "main"}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "main"}))[0] == 200
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        table = await delta.create_table("main.s.t", SCHEMA)
        for n in range(3):
            assert await delta.append(table, pa.table({"n": [n]}, schema=SCHEMA)) == n + 1

        # Move the metastore without telling the old owner: both believe they own it.
        routing = cluster.cluster.routing
        old = routing.shards[routing.owner[ws.metastore_id]]
        new = next(h for h in routing.live() if h is not old)
        await cluster.store.assign_shard(ws.metastore_id, new.name)
        routing.owner[ws.metastore_id] = new.name
        await new.actor.own.remote([ws.metastore_id])
        assert await delta.append(table, pa.table({"n": [3]}, schema=SCHEMA)) == 4   # through the new owner
        # A writer with a stale route proposes version 4 again at the old owner: it must not win.
        name = dlog.staged_file_name(4)
        body = {**table.commit_ref(), "commit_info": {"version": 4, "timestamp": dlog.now_ms(), "file_name": name,
                                                      "file_size": 10, "file_modification_timestamp": 1}}
        async with http.post(old.url + PREFIX + "/delta/preview/commits", json=body, headers=ws.headers) as r:
            assert r.status in (409, 421), await r.text()

        # Kill the owner; the router hands the metastore to a survivor, and commits go on.
        owner = routing.owner[ws.metastore_id]
        await cluster.cluster.kill(owner)
        killed_at = time.monotonic()
        while routing.shards[owner].alive:
            assert time.monotonic() - killed_at < 30     # bounded; how fast: docs/reliability.md
            await asyncio.sleep(0.05)
        assert await delta.append(table, pa.table({"n": [4]}, schema=SCHEMA)) == 5
        snap = await delta.snapshot(table)
        assert snap.version == 5
        assert sorted((await delta.read(table, snap)).column("n").to_pylist()) == [0, 1, 2, 3, 4]
        latest, unpublished = await delta.get_commits(table)
        assert latest == 5 and unpublished == {}      # every commit published and reported
