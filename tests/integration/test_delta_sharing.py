"""The Delta Sharing protocol server, read by the official `delta-sharing` Python connector (PyPI,
unchanged) with a profile a recipient retrieved through its activation link: shares, schemas and
tables, snapshots at the latest version, an older version and a timestamp, predicate and limit
hints, the change data feed, both response formats, a partition-filtered share, and the
governance of recipients (expired, rotated, revoked tokens, IP access lists, removed tables).
A second reader (Polars) reads the pre-signed files a query hands out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
import uuid

import aiohttp
import delta_sharing
import polars as pl
import pyarrow as pa
import pytest
from requests import HTTPError

from shardcat.delta.client import DeltaCatalogClient

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())])
SHARING = "/api/2.1/delta-sharing"


def rows(ids, region: str) -> pa.Table:
    return pa.table({"id": list(ids), "region": [region] * len(ids), "amount": [float(i) for i in ids]},
                    schema=SCHEMA)


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


@pytest.fixture
async def world(ws):
    """main.s.sales (partitioned by region, change data feed on) at versions 0..3, a share holding
    it with history and CDF, and a recipient granted the share."""
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        await delta.create_table("main.s.sales", SCHEMA, partition_columns=["region"],
                                 properties={"delta.enableChangeDataFeed": "true"})
        await delta.append("main.s.sales", rows(range(0, 3), "eu"))           # v1
        times = [int(time.time() * 1000)]
        await asyncio.sleep(0.05)
        await delta.append("main.s.sales", rows(range(3, 5), "us"))           # v2
        await delta.append("main.s.sales", rows(range(5, 6), "eu"))           # v3
        await delta.create_table("main.s.hidden", SCHEMA)
    await ok(ws, "POST", "/shares", json={"name": "trade"})
    await ok(ws, "PATCH", "/shares/trade", json={"updates": [{"action": "ADD", "data_object": {
        "name": "main.s.sales", "history_data_sharing_status": "ENABLED", "cdf_enabled": True}}]})
    made = await ok(ws, "POST", "/recipients", json={"name": "acme", "authentication_type": "TOKEN"})
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    return {"ws": ws, "recipient": made, "before_v2": times[0]}


async def activate(ws, recipient: dict, tmp_path, name="profile.share") -> str:
    """The recipient's profile, retrieved through its activation link as a recipient would."""
    code = recipient["tokens"][-1]["activation_url"]
    async with aiohttp.ClientSession() as s:     # no Authorization header: the link is the credential
        async with s.get(f"{ws.api}/public/data_sharing_activation/{code}") as r:
            assert r.status == 200, await r.text()
            profile = await r.json()
    path = tmp_path / name
    path.write_text(json.dumps(profile))
    return str(path)


def connector(fn, *args, **kw):
    """The connector is synchronous (requests): off the event loop the server runs on."""
    return asyncio.to_thread(fn, *args, **kw)


async def test_connector_reads_a_shared_table_end_to_end(world, tmp_path):
    ws = world["ws"]
    profile = await activate(ws, world["recipient"], tmp_path)
    client = delta_sharing.SharingClient(profile)
    tables = await connector(client.list_all_tables)
    assert [(t.share, t.schema, t.name) for t in tables] == [("trade", "s", "sales")]
    assert [s.name for s in await connector(client.list_shares)] == ["trade"]

    url = f"{profile}#trade.s.sales"
    df = await connector(delta_sharing.load_as_pandas, url)
    assert sorted(df["id"].tolist()) == list(range(6))
    assert sorted(set(df["region"])) == ["eu", "us"]
    assert list(df.columns) == ["id", "region", "amount"]

    older = await connector(delta_sharing.load_as_pandas, url, version=1)
    assert sorted(older["id"].tolist()) == [0, 1, 2]
    stamp = dt.datetime.fromtimestamp(world["before_v2"] / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    as_of = await connector(delta_sharing.load_as_pandas, url, timestamp=stamp)
    assert sorted(as_of["id"].tolist()) == [0, 1, 2]

    # The delta response format: the connector's delta-kernel path reads the same rows.
    via_kernel = await connector(delta_sharing.load_as_pandas, url, use_delta_format=True)
    assert sorted(via_kernel["id"].tolist()) == list(range(6))

    assert await connector(delta_sharing.get_table_version, url) == 3
    changes = await connector(delta_sharing.load_table_changes_as_pandas, url, starting_version=2, ending_version=3)
    assert sorted(changes["id"].tolist()) == [3, 4, 5]
    assert set(changes["_change_type"]) == {"insert"}
    assert sorted(set(changes["_commit_version"])) == [2, 3]
    since = await connector(delta_sharing.load_table_changes_as_pandas, url, starting_timestamp=stamp)
    assert sorted(since["id"].tolist()) == [3, 4, 5]


async def test_predicate_and_limit_hints_skip_files(world, tmp_path):
    ws = world["ws"]
    profile = await activate(ws, world["recipient"], tmp_path)
    url = f"{profile}#trade.s.sales"
    hint = json.dumps({"op": "equal", "children": [{"op": "column", "name": "region", "valueType": "string"},
                                                   {"op": "literal", "value": "us", "valueType": "string"}]})
    lines = await query(world, profile, {"jsonPredicateHints": hint})
    assert [f["file"]["partitionValues"]["region"] for f in lines[2:]] == ["us"]
    df = await connector(delta_sharing.load_as_pandas, url, jsonPredicateHints=hint)
    assert sorted(df["id"].tolist()) == [3, 4]
    # The deprecated SQL form too.
    lines = await query(world, profile, {"predicateHints": ["region = 'us'"]})
    assert [f["file"]["partitionValues"]["region"] for f in lines[2:]] == ["us"]
    # A malformed hint filters nothing (best effort, as the protocol says).
    assert len((await query(world, profile, {"jsonPredicateHints": "{not json"}))[2:]) == 3
    assert len((await query(world, profile, {"limitHint": 1}))[2:]) == 1
    limited = await connector(delta_sharing.load_as_pandas, url, limit=2)
    assert len(limited) == 2


async def query(world, profile_path: str, body: dict, headers=None) -> list[dict]:
    profile = json.loads(open(profile_path).read())
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{profile['endpoint']}/shares/trade/schemas/s/tables/sales/query", json=body,
                          headers={"Authorization": f"Bearer {profile['bearerToken']}", **(headers or {})}) as r:
            assert r.status == 200, await r.text()
            return [json.loads(line) for line in (await r.text()).splitlines()]


async def test_polars_reads_the_presigned_files(world, tmp_path):
    profile = await activate(world["ws"], world["recipient"], tmp_path)
    lines = await query(world, profile, {})
    urls = [line["file"]["url"] for line in lines[2:]]
    assert len(urls) == 3 and all(u.startswith("http") for u in urls)

    def read():
        return pl.concat([pl.read_parquet(u) for u in urls])
    frame = await asyncio.to_thread(read)
    assert sorted(frame["id"].to_list()) == list(range(6))


async def test_delta_response_format(world, tmp_path):
    """responseformat=delta: Delta actions a recipient puts in a local log; the catalog's own
    features (catalogManaged, in-commit timestamps) are not in the recipient's copy."""
    profile = await activate(world["ws"], world["recipient"], tmp_path)
    caps = {"delta-sharing-capabilities": "responseformat=delta;readerfeatures=deletionvectors"}
    lines = await query(world, profile, {}, headers=caps)
    protocol, metadata, *files = lines
    assert protocol == {"protocol": {"deltaProtocol": {"minReaderVersion": 1, "minWriterVersion": 2}}}
    md = metadata["metaData"]["deltaMetadata"]
    assert md["partitionColumns"] == ["region"] and md["configuration"]["delta.enableChangeDataFeed"] == "true"
    assert not any(k.startswith(("delta.enableInCommit", "delta.feature", "io.unitycatalog")) for k in md["configuration"])
    adds = [f["file"]["deltaSingleAction"]["add"] for f in files]
    assert len(adds) == 3 and all(a["path"].startswith("http") for a in adds)

    def read():
        return pl.concat([pl.read_parquet(a["path"]) for a in adds])
    assert sorted((await asyncio.to_thread(read))["id"].to_list()) == list(range(6))
    # Both formats offered: this table needs nothing the parquet format lacks, so parquet it is.
    both = await query(world, profile, {}, headers={"delta-sharing-capabilities": "responseformat=delta,parquet"})
    assert both[0] == {"protocol": {"minReaderVersion": 1}}


async def test_activation_link_works_once_and_rotation_issues_a_new_one(world, tmp_path):
    ws = world["ws"]
    code = world["recipient"]["tokens"][0]["activation_url"]
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{ws.api}/public/data_sharing_activation_info/{code}") as r:
            assert r.status == 200 and (await r.json())["retrieved"] is False
        await activate(ws, world["recipient"], tmp_path)
        async with s.get(f"{ws.api}/public/data_sharing_activation/{code}") as r:
            assert r.status == 403, await r.text()
        async with s.get(f"{ws.api}/public/data_sharing_activation_info/{code}") as r:
            assert (await r.json())["retrieved"] is True
        async with s.get(f"{ws.api}/public/data_sharing_activation/{ws.metastore_id}.nope") as r:
            assert r.status == 404
    assert (await ok(ws, "GET", "/recipients/acme"))["activated"] is True
    rotated = await ok(ws, "POST", "/recipients/acme/rotate-token", json={"existing_token_expire_in_seconds": 0})
    assert rotated["tokens"][-1]["activation_url"] != code
    profile = await activate(ws, rotated, tmp_path, "new.share")
    df = await connector(delta_sharing.load_as_pandas, f"{profile}#trade.s.sales")
    assert len(df) == 6


# ---- governance and bad input, over raw HTTP (status and the protocol's error JSON) ---------------


async def call(profile_path: str, method: str, path: str, *, token: str | None = None, headers=None, **kw):
    profile = json.loads(open(profile_path).read())
    headers = {"Authorization": f"Bearer {token or profile['bearerToken']}", **(headers or {})}
    async with aiohttp.ClientSession() as s:
        async with s.request(method, profile["endpoint"] + path, headers=headers, **kw) as r:
            text = await r.text()
            try:
                return r.status, json.loads(text), r.headers
            except ValueError:
                return r.status, text, r.headers


TABLE = "/shares/trade/schemas/s/tables/sales"


async def test_bad_input_answers_the_protocols_errors(world, tmp_path):
    profile = await activate(world["ws"], world["recipient"], tmp_path)
    for path in ("/shares/nope", "/shares/nope/schemas", "/shares/trade/schemas/nope/tables",
                 "/shares/trade/schemas/s/tables/nope/version", "/shares/trade/schemas/s/tables/hidden/metadata"):
        status, body, _ = await call(profile, "GET", path)
        assert status == 404 and body["errorCode"] == "RESOURCE_DOES_NOT_EXIST", (path, body)
    # A table that exists in the metastore but not in the share reads exactly like one that does not exist.
    _, hidden, _ = await call(profile, "GET", "/shares/trade/schemas/s/tables/hidden/version")
    _, missing, _ = await call(profile, "GET", "/shares/trade/schemas/s/tables/nope/version")
    assert hidden["message"].replace("hidden", "X") == missing["message"].replace("nope", "X")

    status, body, _ = await call(profile, "POST", TABLE + "/query", json={"version": 99})
    assert status == 400 and body["errorCode"] == "INVALID_PARAMETER_VALUE" and "latest version is 3" in body["message"]
    status, body, _ = await call(profile, "POST", TABLE + "/query", json={"timestamp": "2001-01-01T00:00:00Z"})
    assert status == 400 and "before the table's earliest version" in body["message"]
    status, body, _ = await call(profile, "POST", TABLE + "/query", json={"timestamp": "yesterday"})
    assert status == 400 and body["errorCode"] == "INVALID_PARAMETER_VALUE"
    status, body, _ = await call(profile, "POST", TABLE + "/query", json={"version": 1, "timestamp": "2030-01-01T00:00:00Z"})
    assert status == 400
    status, body, _ = await call(profile, "POST", TABLE + "/query", data=b"[1,2")
    assert status == 400 and body["errorCode"] == "MALFORMED_REQUEST"
    status, body, _ = await call(profile, "POST", TABLE + "/query", json={"limitHint": -1})
    assert status == 400
    status, body, _ = await call(profile, "GET", TABLE + "/changes")
    assert status == 400 and "startingVersion" in body["message"]
    status, body, _ = await call(profile, "GET", TABLE + "/changes?startingVersion=9")
    assert status == 400
    status, body, _ = await call(profile, "POST", TABLE + "/query", json={},
                                 headers={"delta-sharing-capabilities": "responseformat=csv"})
    assert status == 400 and "responseformat" in body["message"]
    status, body, _ = await call(profile, "GET", "/shares?maxResults=x")
    assert status == 400
    status, body, _ = await call(profile, "GET", "/shares?pageToken=garbage")
    assert status == 400


async def test_table_version_head_and_get(world, tmp_path):
    profile = await activate(world["ws"], world["recipient"], tmp_path)
    status, _, headers = await call(profile, "HEAD", TABLE)
    assert status == 200 and headers["Delta-Table-Version"] == "3"
    status, _, headers = await call(profile, "GET", TABLE + "/version")
    assert status == 200 and headers["Delta-Table-Version"] == "3"
    stamp = dt.datetime.fromtimestamp(world["before_v2"] / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    status, _, headers = await call(profile, "GET", TABLE + "/version", params={"startingTimestamp": stamp})
    assert status == 200 and headers["Delta-Table-Version"] == "2"
    status, _, headers = await call(profile, "GET", TABLE + "/version",
                                    params={"startingTimestamp": "2001-01-01T00:00:00Z"})
    assert status == 200 and headers["Delta-Table-Version"] == "0"


async def test_paging(world, tmp_path):
    ws = world["ws"]
    for name in ("a1", "a2", "a3"):
        await ok(ws, "POST", "/shares", json={"name": name})
        await ok(ws, "PATCH", f"/shares/{name}/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    profile = await activate(ws, world["recipient"], tmp_path)
    seen, token = [], None
    while True:
        params = {"maxResults": "2", **({"pageToken": token} if token else {})}
        status, body, _ = await call(profile, "GET", "/shares", params=params)
        assert status == 200 and len(body["items"]) <= 2
        seen += [s["name"] for s in body["items"]]
        token = body.get("nextPageToken")
        if not token:
            break
    assert seen == ["a1", "a2", "a3", "trade"]


async def test_governance_refuses_at_once(world, tmp_path):
    ws = world["ws"]
    profile = await activate(ws, world["recipient"], tmp_path)
    assert (await call(profile, "GET", TABLE + "/version"))[0] == 200
    lines = await query(world, profile, {})
    file_url = lines[2]["file"]["url"]

    # An IP access list without the caller's address: 403; with it: served again.
    await ok(ws, "PATCH", "/recipients/acme", json={"ip_access_list": {"allowed_ip_addresses": ["10.1.0.0/16"]}})
    status, body, _ = await call(profile, "GET", "/shares")
    assert status == 403 and body["errorCode"] == "PERMISSION_DENIED"
    async with aiohttp.ClientSession() as s, s.get(file_url) as r:
        assert r.status == 403
    await ok(ws, "PATCH", "/recipients/acme", json={"ip_access_list": {"allowed_ip_addresses": ["127.0.0.1/32"]}})
    assert (await call(profile, "GET", "/shares"))[0] == 200

    # A signed file URL: the one file only; a changed signature or path is refused.
    async with aiohttp.ClientSession() as s:
        async with s.get(file_url) as r:
            assert r.status == 200 and (await r.read())[:4] == b"PAR1"
        url, _, mac = file_url.partition("?X-Databricks-Signature=")
        forged = f"{url}?X-Databricks-Signature={'A' if mac[0] != 'A' else 'B'}{mac[1:]}"
        async with s.get(forged) as r:
            assert r.status == 403
        async with s.get(url) as r:                # no signature
            assert r.status == 403
        # Another file of the same table under the same signature: the signature covers the path.
        other = lines[3]["file"]["url"].partition("?")[0]
        async with s.get(f"{other}?X-Databricks-Signature={mac}") as r:
            assert r.status == 403

    # The table removed from the share: not found at once, and its handed-out URLs stop.
    await ok(ws, "PATCH", "/shares/trade", json={"updates": [{"action": "REMOVE", "data_object": {"name": "main.s.sales"}}]})
    status, body, _ = await call(profile, "GET", TABLE + "/version")
    assert status == 404 and body["errorCode"] == "RESOURCE_DOES_NOT_EXIST"
    async with aiohttp.ClientSession() as s, s.get(file_url) as r:
        assert r.status == 403

    # The share's grant revoked: the share is gone from the recipient's view.
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "acme", "remove": ["SELECT"]}]})
    status, body, _ = await call(profile, "GET", "/shares")
    assert status == 200 and body["items"] == []
    assert (await call(profile, "GET", "/shares/trade"))[0] == 404

    # A rotated token past its grace period: refused; the new one works.
    rotated = await ok(ws, "POST", "/recipients/acme/rotate-token", json={"existing_token_expire_in_seconds": 0})
    status, body, _ = await call(profile, "GET", "/shares")
    assert status == 401 and body["errorCode"] == "UNAUTHENTICATED"
    fresh = await activate(ws, rotated, tmp_path, "fresh.share")
    assert (await call(fresh, "GET", "/shares"))[0] == 200
    # A deleted recipient: refused.
    await ok(ws, "DELETE", "/recipients/acme")
    assert (await call(fresh, "GET", "/shares"))[0] == 401
    # No token, a token of the API, or another metastore: all the same 401.
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{ws.url}{SHARING}/metastores/{ws.metastore_id}/shares") as r:
            assert r.status == 401
    assert (await call(fresh, "GET", "/shares", token=ws.token))[0] == 401


async def test_expired_token_is_refused(world, tmp_path):
    ws = world["ws"]
    await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}",
             json={"delta_sharing_recipient_token_lifetime_in_seconds": 1})
    made = await ok(ws, "POST", "/recipients", json={"name": "brief", "authentication_type": "TOKEN"})
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "brief", "add": ["SELECT"]}]})
    profile = await activate(ws, made, tmp_path)
    expires = made["tokens"][0]["expiration_time"]
    while int(time.time() * 1000) <= expires:     # wait until past the token's expiry
        await asyncio.sleep(0.2)
    status, body, _ = await call(profile, "GET", "/shares")
    assert status == 401 and body["errorCode"] == "UNAUTHENTICATED"
    with pytest.raises(HTTPError):
        await connector(delta_sharing.SharingClient(profile).list_all_tables)


async def test_partition_filtered_share_sees_only_its_partitions(world, tmp_path):
    ws = world["ws"]
    await ok(ws, "POST", "/shares", json={"name": "eu_only"})
    await ok(ws, "PATCH", "/shares/eu_only", json={"updates": [{"action": "ADD", "data_object": {
        "name": "main.s.sales", "shared_as": "s.sales",
        "partitions": [{"values": [{"name": "region", "op": "EQUAL", "recipient_property_key": "zone"}]}]}}]})
    made = await ok(ws, "POST", "/recipients", json={"name": "eu_reader", "authentication_type": "TOKEN",
                                                      "properties_kv_pairs": {"properties": {"zone": "eu"}}})
    await ok(ws, "PATCH", "/shares/eu_only/permissions", json={"changes": [{"principal": "eu_reader", "add": ["SELECT"]}]})
    profile = await activate(ws, made, tmp_path)
    df = await connector(delta_sharing.load_as_pandas, f"{profile}#eu_only.s.sales")
    assert sorted(df["id"].tolist()) == [0, 1, 2, 5] and set(df["region"]) == {"eu"}
    # History is not shared on this object: no version, no changes.
    status, body, _ = await call(profile, "POST", "/shares/eu_only/schemas/s/tables/sales/query", json={"version": 1})
    assert status == 400 and "history sharing" in body["message"]
    # A literal filter, LIKE.
    await ok(ws, "PATCH", "/shares/eu_only", json={"updates": [{"action": "UPDATE", "data_object": {
        "name": "main.s.sales", "partitions": [{"values": [{"name": "region", "op": "LIKE", "value": "u%"}]}]}}]})
    df = await connector(delta_sharing.load_as_pandas, f"{profile}#eu_only.s.sales")
    assert sorted(df["id"].tolist()) == [3, 4]


async def test_recipient_reads_are_audited(world, tmp_path, server):
    ws = world["ws"]
    profile = await activate(ws, world["recipient"], tmp_path)
    await query(world, profile, {})
    for _ in range(50):
        rows = await server.store.pool.fetch(
            "SELECT principal, action FROM audit_log WHERE metastore_id = $1 AND principal LIKE 'recipient:%'",
            uuid.UUID(ws.metastore_id))
        if any(r["action"] == "deltaSharingQueryTable" for r in rows):
            break
        await asyncio.sleep(0.1)
    assert {(r["principal"], r["action"]) for r in rows} >= {("recipient:acme", "deltaSharingQueryTable")}


async def test_catalog_managed_table_is_shared_from_its_ratified_commits(world, tmp_path):
    """A commit the catalog ratified but no writer published yet is part of what a recipient reads."""
    ws = world["ws"]
    async with DeltaCatalogClient(ws.api, ws.token, publish_after_commit=False) as delta:
        version = await delta.append("main.s.sales", rows(range(100, 102), "us"))
    assert version == 4
    table = await ok(ws, "GET", "/tables/main.s.sales")
    from shardcat.delta.log import Storage
    assert 4 not in Storage(table["storage_location"]).list_log()[0]     # not published
    profile = await activate(ws, world["recipient"], tmp_path)
    url = f"{profile}#trade.s.sales"
    assert await connector(delta_sharing.get_table_version, url) == 4
    df = await connector(delta_sharing.load_as_pandas, url)
    assert sorted(df["id"].tolist()) == [*range(6), 100, 101]


async def test_alias_and_start_version(world, tmp_path):
    """A table shared under another name is found by that name only; its history starts at start_version."""
    ws = world["ws"]
    await ok(ws, "POST", "/shares", json={"name": "aliased"})
    await ok(ws, "PATCH", "/shares/aliased", json={"updates": [{"action": "ADD", "data_object": {
        "name": "main.s.sales", "shared_as": "pub.orders", "history_data_sharing_status": "ENABLED",
        "start_version": 2}}]})
    await ok(ws, "PATCH", "/shares/aliased/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    profile = await activate(ws, world["recipient"], tmp_path)
    status, body, _ = await call(profile, "GET", "/shares/aliased/all-tables")
    assert status == 200 and [(t["schema"], t["name"]) for t in body["items"]] == [("pub", "orders")]
    assert (await call(profile, "GET", "/shares/aliased/schemas/s/tables/sales/version"))[0] == 404
    df = await connector(delta_sharing.load_as_pandas, f"{profile}#aliased.pub.orders", version=2)
    assert sorted(df["id"].tolist()) == [0, 1, 2, 3, 4]
    status, body, _ = await call(profile, "POST", "/shares/aliased/schemas/pub/tables/orders/query", json={"version": 1})
    assert status == 400 and "starts at version 2" in body["message"]
    status, body, _ = await call(profile, "GET", "/shares/aliased/schemas/pub/tables/orders/changes?startingVersion=1")
    assert status == 400


async def test_file_urls_expire(world, tmp_path, monkeypatch):
    from shardcat.catalog.protocols.delta_sharing import files
    profile = await activate(world["ws"], world["recipient"], tmp_path)
    monkeypatch.setattr(files, "URL_SECONDS", 0)        # URLs that expire as they are made
    lines = await query(world, profile, {})
    assert all(line["file"]["expirationTimestamp"] <= int(time.time() * 1000) for line in lines[2:])
    async with aiohttp.ClientSession() as s, s.get(lines[2]["file"]["url"]) as r:
        assert r.status == 403 and "expired" in (await r.json())["message"]


async def test_query_from_a_starting_version(world, tmp_path):
    """startingVersion (the streaming read): the data change files of each version, with their version."""
    profile = await activate(world["ws"], world["recipient"], tmp_path)
    lines = await query(world, profile, {"startingVersion": 2, "endingVersion": 3})
    adds = [line["add"] for line in lines[2:]]
    assert sorted((a["version"], a["partitionValues"]["region"]) for a in adds) == [(2, "us"), (3, "eu")]
    assert all(a["timestamp"] > 0 and a["url"].startswith("http") for a in adds)
    delta = await query(world, profile, {"startingVersion": 3},
                        headers={"delta-sharing-capabilities": "responseformat=delta"})
    assert [line["file"]["version"] for line in delta[2:]] == [3]
    assert "add" in delta[2]["file"]["deltaSingleAction"]


async def test_changes_with_historical_metadata(world, tmp_path):
    ws = world["ws"]
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        assert await delta.update_metadata("main.s.sales", description="orders, by region") == 4
        await delta.append("main.s.sales", rows([50], "us"))                                      # v5
    profile = await activate(ws, world["recipient"], tmp_path)
    status, text, headers = await call(profile, "GET", TABLE + "/changes",
                                       params={"startingVersion": "3", "includeHistoricalMetadata": "true"})
    assert status == 200 and headers["Delta-Table-Version"] == "3"
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["metaData"]["version"] for line in lines[2:] if "metaData" in line] == [4]
    assert lines[1]["metaData"]["description"] == "orders, by region"
    assert sorted(line["add"]["version"] for line in lines[2:] if "add" in line) == [3, 5]
    status, text, _ = await call(profile, "GET", TABLE + "/changes", params={"startingVersion": "3"})
    assert not any("metaData" in json.loads(line) for line in text.splitlines()[2:])


async def test_a_time_travel_read_gives_each_file_its_version(world, tmp_path):
    profile = await activate(world["ws"], world["recipient"], tmp_path)
    lines = await query(world, profile, {"version": 2})
    assert lines[1]["metaData"]["version"] == 2
    files = sorted((f["file"]["version"], f["file"]["partitionValues"]["region"]) for f in lines[2:])
    assert files == [(1, "eu"), (2, "us")] and all(f["file"]["timestamp"] > 0 for f in lines[2:])
    latest = await query(world, profile, {})
    assert all("version" not in f["file"] for f in latest[2:])


async def test_a_table_that_comes_to_carry_a_row_filter_is_no_longer_served(world, tmp_path):
    """Sharing refuses a filtered table; one filtered after it was shared leaves the recipient's
    view at once, with the file URLs already handed out (the recipient would read it unfiltered)."""
    ws = world["ws"]
    profile = await activate(ws, world["recipient"], tmp_path)
    file_url = (await query(world, profile, {}))[2]["file"]["url"]
    await ok(ws, "POST", "/functions", json={"function_info": {
        "name": "eu_only", "catalog_name": "main", "schema_name": "s", "input_params": {"parameters": []},
        "data_type": "BOOLEAN", "full_data_type": "BOOLEAN", "routine_body": "SQL",
        "routine_definition": "region = 'eu'", "parameter_style": "S", "is_deterministic": True,
        "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER",
        "specific_name": "eu_only"}})
    await ok(ws, "PATCH", "/tables/main.s.sales",
             json={"row_filter": {"function_name": "main.s.eu_only", "input_column_names": ["region"]}})
    status, body, _ = await call(profile, "GET", TABLE + "/version")
    assert status == 404 and body["errorCode"] == "RESOURCE_DOES_NOT_EXIST", body
    async with aiohttp.ClientSession() as s, s.get(file_url) as r:
        assert r.status == 403
