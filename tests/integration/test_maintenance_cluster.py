"""Maintenance with `--shards` (real Ray, two shard actors behind the router): the shard owning the
metastore runs the jobs as Ray tasks, which call the catalog back at the router's address (the server
tells every shard where it listens); a Delta compaction and an Iceberg manifest rewrite each commit
through the router to the owner shard, and the runs are followed through the router."""

from __future__ import annotations

import asyncio

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from shardcat.delta.client import DeltaCatalogClient
from tests.conftest import new_workspace, serving

cluster = serving("maintenance-cluster", shards=2)


async def finished(ws, table: str) -> list[dict]:
    for _ in range(300):       # Ray may be starting a worker on a loaded machine
        status, body = await ws.call("GET", "/shardcat/maintenance/runs", params={"table": table})
        assert status == 200, body
        if body["runs"] and all(r["status"] in ("SUCCEEDED", "FAILED") for r in body["runs"]):
            return body["runs"]
        await asyncio.sleep(0.5)
    raise AssertionError(f"the runs of {table} never finished: {body}")


async def test_jobs_call_back_through_the_router(cluster, http, tmp_path):
    ws = await new_workspace(cluster, http, tmp_path)
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"}),
                       ("/catalogs", {"name": "ice"})):
        assert (await ws.call("POST", path, json=body))[0] == 200
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        table = await client.create_table("main.s.d", pa.schema([("id", pa.int64())]))
        for i in range(4):
            await client.append(table, pa.table({"id": pa.array([i], pa.int64())}))

    def iceberg_table():
        catalog = load_catalog("c", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token)
        catalog.create_namespace("s")
        t = catalog.create_table("s.e", Schema(NestedField(1, "id", LongType(), required=False)))
        for i in range(4):
            t.append(pa.table({"id": pa.array([i], pa.int64())}))
        return catalog

    catalog = await asyncio.to_thread(iceberg_table)
    owner = cluster.cluster.routing.owner[ws.metastore_id]
    assert cluster.cluster.api_url == cluster.url                # what every shard was told

    for name, actions in (("main.s.d", ["compact"]), ("ice.s.e", ["rewrite_manifests"])):
        status, body = await ws.call("POST", "/shardcat/maintenance/runs", json={"table": name, "actions": actions})
        assert status == 200, body
    [delta_run] = await finished(ws, "main.s.d")
    [iceberg_run] = await finished(ws, "ice.s.e")
    assert delta_run["status"] == "SUCCEEDED" and (delta_run["files_before"], delta_run["files_after"]) == (4, 1), \
        delta_run
    assert iceberg_run["status"] == "SUCCEEDED" and (iceberg_run["files_before"], iceberg_run["files_after"]) == (4, 1), \
        iceberg_run
    assert delta_run["node"] and iceberg_run["node"]
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        assert sorted(r["id"] for r in (await client.read("main.s.d")).to_pylist()) == [0, 1, 2, 3]
    ids = await asyncio.to_thread(lambda: sorted(catalog.load_table("s.e").scan().to_arrow()["id"].to_pylist()))
    assert ids == [0, 1, 2, 3]
    assert cluster.cluster.routing.owner[ws.metastore_id] == owner       # one shard served it throughout
