"""Delta Sharing through a sharded catalog's router (real Ray shards): the profile, the protocol
and the signed file URLs name the router, which forwards each to the metastore's shard."""

from __future__ import annotations

import json

import aiohttp

import delta_sharing

from shardcat.delta.client import DeltaCatalogClient
from tests.conftest import new_workspace, serving

from test_delta_sharing import activate, connector, ok, rows, SCHEMA

cluster = serving("sharing-cluster", shards=2)


async def test_connector_reads_through_the_router(cluster, http, tmp_path):
    ws = await new_workspace(cluster, http, tmp_path)
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        await delta.create_table("main.s.sales", SCHEMA, partition_columns=["region"])
        await delta.append("main.s.sales", rows(range(4), "eu"))
    await ok(ws, "POST", "/shares", json={"name": "trade"})
    await ok(ws, "PATCH", "/shares/trade", json={"updates": [{"action": "ADD", "data_object": {"name": "main.s.sales"}}]})
    made = await ok(ws, "POST", "/recipients", json={"name": "acme", "authentication_type": "TOKEN"})
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    profile = await activate(ws, made, tmp_path)
    endpoint = json.loads(open(profile).read())["endpoint"]
    assert endpoint.startswith(cluster.url)       # the router's address, not a shard's
    df = await connector(delta_sharing.load_as_pandas, f"{profile}#trade.s.sales")
    assert sorted(df["id"].tolist()) == [0, 1, 2, 3]
    assert await connector(delta_sharing.get_table_version, f"{profile}#trade.s.sales") == 1


async def test_ip_access_list_sees_the_client_behind_the_router(cluster, http, tmp_path):
    """Through the router a shard's front sees the router's address; the router vouches for the
    client's (signed), so a recipient's IP access list holds behind it too. The client speaks from
    127.0.0.2, the router from 127.0.0.1."""
    ws = await new_workspace(cluster, http, tmp_path)
    await ok(ws, "POST", "/shares", json={"name": "trade"})
    made = await ok(ws, "POST", "/recipients", json={"name": "acme", "authentication_type": "TOKEN"})
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    profile = json.loads(open(await activate(ws, made, tmp_path)).read())
    connector_ = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=connector_) as s:
        async def status():
            async with s.get(profile["endpoint"] + "/shares",
                             headers={"Authorization": f"Bearer {profile['bearerToken']}"}) as r:
                return r.status
        await ok(ws, "PATCH", "/recipients/acme", json={"ip_access_list": {"allowed_ip_addresses": ["127.0.0.1/32"]}})
        assert await status() == 403            # the router's address is not the client's
        await ok(ws, "PATCH", "/recipients/acme", json={"ip_access_list": {"allowed_ip_addresses": ["127.0.0.2/32"]}})
        assert await status() == 200
        # A client cannot vouch for itself: a forged header is not the router's signature.
        await ok(ws, "PATCH", "/recipients/acme", json={"ip_access_list": {"allowed_ip_addresses": ["10.9.9.9/32"]}})
        async with s.get(profile["endpoint"] + "/shares", headers={
                "Authorization": f"Bearer {profile['bearerToken']}", "X-Shardcat-Forwarded-For": "10.9.9.9;00"}) as r:
            assert r.status == 403
