"""The Delta commits API (`/delta/preview/commits`) of catalog-managed tables, over HTTP and
through the official SDK's DeltaCommitsApi: ratification of `latest + 1` only, conflicts,
idempotent replays, published-version reports, the unpublished-commit limit, metadata changes
landing in the table, bad input, and commits through two shards of one metastore.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import uuid

import pytest
from unitycatalog.client import ApiClient, Configuration, DeltaCommitsApi, TablesApi
from unitycatalog.client.exceptions import ApiException
from unitycatalog.client.models import (
    ColumnInfo,
    ColumnInfos,
    ColumnTypeName,
    DeltaCommit,
    DeltaCommitInfo,
    DeltaCommitMetadataProperties,
    DeltaGetCommits,
    DeltaMetadata,
)

from shardcat.auth import Caller
from shardcat.errors import CatalogError
from shardcat.catalog.protocols.delta_commits import DeltaCommitService
from shardcat.shards.shard import Shard

COMMITS = "/delta/preview/commits"
COLS = [{"name": "id", "type_name": "LONG"}]
FEATURE = "delta.feature.catalogManaged"


def staged_name(version: int) -> str:
    return f"{version:020d}.{uuid.uuid4()}.json"


def info(version: int, name: str | None = None, **extra) -> dict:
    return {"version": version, "timestamp": 1_700_000_000_000 + version, "file_name": name or staged_name(version),
            "file_size": 100 + version, "file_modification_timestamp": 1_700_000_000_000 + version, **extra}


async def setup_schema(ws, schema_props=None):
    assert (await ws.call("POST", "/catalogs", json={"name": "main"}))[0] == 200
    body = {"name": "s", "catalog_name": "main", **({"properties": schema_props} if schema_props else {})}
    assert (await ws.call("POST", "/schemas", json=body))[0] == 200


async def managed_table(ws, name: str, properties=None) -> dict:
    """A catalog-managed Delta table created the Delta 4.1 way: staging table first, then the table at its location."""
    status, staging = await ws.call("POST", "/staging-tables", json={"name": name, "catalog_name": "main",
                                                                       "schema_name": "s"})
    assert status == 200, staging
    status, table = await ws.call("POST", "/tables", json={
        "name": name, "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": staging["staging_location"],
        "properties": {FEATURE: "supported", "io.unitycatalog.tableId": staging["id"], **(properties or {})}})
    assert status == 200, table
    assert table["table_id"] == staging["id"]
    return table


def ref(table: dict) -> dict:
    return {"table_id": table["table_id"], "table_uri": table["storage_location"]}


async def commit(ws, table, version=None, **body):
    if version is not None:
        body["commit_info"] = info(version) if isinstance(version, int) else version
    return await ws.call("POST", COMMITS, json={**ref(table), **body})


async def get_commits(ws, table, start=0, **extra):
    status, body = await ws.call("GET", COMMITS, json={**ref(table), "start_version": start, **extra})
    assert status == 200, body
    return [c["version"] for c in body["commits"]], body["latest_table_version"], body


@pytest.fixture
async def table(ws):
    await setup_schema(ws)
    return await managed_table(ws, "t")


async def test_table_opts_in_through_staging(ws, table):
    props = table["properties"]
    assert props[FEATURE] == "supported" and props["io.unitycatalog.tableId"] == table["table_id"]
    assert await get_commits(ws, table) == ([], 0, {"commits": [], "latest_table_version": 0})


async def test_ratify_next_version_only(ws, table):
    for v in (1, 2, 3):
        status, body = await commit(ws, table, v)
        assert status == 200, body
    versions, latest, body = await get_commits(ws, table)
    assert versions == [1, 2, 3] and latest == 3
    assert body["commits"][0]["timestamp"] == 1_700_000_000_001
    assert (await get_commits(ws, table, start=2))[:2] == ([2, 3], 3)
    assert (await get_commits(ws, table, start=1, end_version=2))[:2] == ([1, 2], 3)
    # A stale proposal loses to the ratified commit: a conflict naming the latest version.
    status, body = await commit(ws, table, 2)
    assert status == 409 and body["error_code"] == "RESOURCE_CONFLICT"
    assert "version 2 was already ratified" in body["message"] and "latest version is 3" in body["message"]
    # A gap is not a conflict: the version is simply wrong.
    status, body = await commit(ws, table, 5)
    assert status == 400 and "next version after the latest ratified version 3" in body["message"]
    assert (await get_commits(ws, table))[:2] == ([1, 2, 3], 3)


async def test_replay_is_idempotent_and_writes_nothing(ws, server, table):
    first = info(1)
    assert (await commit(ws, table, first))[0] == 200
    before = await server.store.metastore_version(ws.metastore_id)
    status, body = await commit(ws, table, first)
    assert status == 200 and body == {}
    assert await server.store.metastore_version(ws.metastore_id) == before   # rolled back: no metastore write
    assert (await get_commits(ws, table))[:2] == ([1], 1)
    # Same version, another file: the other writer lost.
    assert (await commit(ws, table, info(1)))[0] == 409


async def test_concurrent_proposals_one_winner(ws, table):
    proposals = [info(1) for _ in range(12)]
    results = await asyncio.gather(*(commit(ws, table, p) for p in proposals))
    statuses = [s for s, _ in results]
    assert statuses.count(200) == 1 and statuses.count(409) == 11, statuses
    winner = proposals[statuses.index(200)]["file_name"]
    _, _, body = await get_commits(ws, table)
    assert [c["file_name"] for c in body["commits"]] == [winner]


async def test_published_versions_and_limit(ws):
    await setup_schema(ws)
    table = await managed_table(ws, "limited", {"shardcat.delta.maxUnpublishedCommits": "3"})
    for v in (1, 2, 3):
        assert (await commit(ws, table, v))[0] == 200
    status, body = await commit(ws, table, 4)
    assert status == 429 and body["error_code"] == "RESOURCE_EXHAUSTED"
    assert "3 unpublished commits" in body["message"] and "latest_backfilled_version" in body["message"]
    # Publishing in the same request frees room.
    fourth = info(4)
    assert (await commit(ws, table, fourth, latest_backfilled_version=2))[0] == 200
    assert (await get_commits(ws, table))[:2] == ([3, 4], 4)
    # A report alone; reports never go backwards; none past the latest version.
    assert (await commit(ws, table, latest_backfilled_version=4))[0] == 200
    assert (await get_commits(ws, table))[:2] == ([], 4)
    assert (await commit(ws, table, latest_backfilled_version=1))[0] == 200
    assert (await get_commits(ws, table))[:2] == ([], 4)
    status, body = await commit(ws, table, latest_backfilled_version=9)
    assert status == 400 and "latest ratified version is 4" in body["message"]
    # A late replay of a published commit is still recognised as that commit; a rival is not.
    assert await commit(ws, table, fourth) == (200, {})
    assert (await commit(ws, table, 4))[0] == 409
    assert (await commit(ws, table, 5))[0] == 200
    assert (await get_commits(ws, table))[:2] == ([5], 5)


async def test_inline_commits(ws, table):
    content = json.dumps({"commitInfo": {"inCommitTimestamp": 1}}) + "\n" + json.dumps({"add": {"path": "a"}}) + "\n"
    status, body = await commit(ws, table, info(1, file_size=len(content.encode()), inline_content=content))
    assert status == 200, body
    _, _, body = await get_commits(ws, table)
    assert body["commits"][0]["inline_content"] == content
    status, body = await commit(ws, table, info(2, file_size=3, inline_content=content))
    assert status == 400 and "inline content has" in body["message"]
    # Once published, the catalog forgets the content.
    assert (await commit(ws, table, latest_backfilled_version=1))[0] == 200
    assert (await get_commits(ws, table))[:2] == ([], 1)


async def test_metadata_change_updates_table_in_same_write(ws, table):
    name = "main.s.t"
    metadata = {"description": "now with names",
                "schema": {"columns": [{"name": "id", "type_name": "LONG", "position": 0},
                                       {"name": "name", "type_name": "STRING", "position": 1}]},
                "properties": {"properties": {"delta.enableInCommitTimestamps": "true", "owner.team": "x"}}}
    # A losing commit's metadata does not land.
    assert (await commit(ws, table, 1))[0] == 200
    assert (await commit(ws, table, 1, metadata=metadata))[0] == 409
    status, t = await ws.call("GET", f"/tables/{name}")
    assert [c["name"] for c in t["columns"]] == ["id"] and "comment" not in t
    assert (await commit(ws, table, 2, metadata=metadata))[0] == 200
    status, t = await ws.call("GET", f"/tables/{name}")
    assert [c["name"] for c in t["columns"]] == ["id", "name"]
    assert t["columns"][1]["type_text"] == "string"
    assert t["comment"] == "now with names"
    assert t["properties"]["owner.team"] == "x"
    assert t["properties"][FEATURE] == "supported"     # the catalog's own keys stay
    status, body = await commit(ws, table, 3, metadata={"properties": {"properties": {
        "io.unitycatalog.tableId": str(uuid.uuid4())}}})
    assert status == 400 and "io.unitycatalog.tableId" in body["message"]
    status, body = await commit(ws, table, 3, metadata={})
    assert status == 400 and "At least one of description, properties or schema" in body["message"]


async def test_catalog_default_for_new_managed_delta_tables(ws):
    await setup_schema(ws, schema_props={FEATURE: "supported"})
    status, t = await ws.call("POST", "/tables", json={
        "name": "d", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLS})
    assert status == 200 and t["properties"][FEATURE] == "supported"
    assert t["properties"]["io.unitycatalog.tableId"] == t["table_id"]
    assert (await commit(ws, t, 1))[0] == 200
    # A table may still opt out, and non-Delta tables are untouched.
    status, t = await ws.call("POST", "/tables", json={
        "name": "o", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLS, "properties": {FEATURE: "unsupported"}})
    assert status == 200 and t["properties"][FEATURE] == "unsupported"
    status, body = await commit(ws, t, 1)
    assert status == 400 and "not catalog-managed" in body["message"]
    status, t = await ws.call("POST", "/tables", json={
        "name": "p", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "PARQUET", "columns": COLS})
    assert status == 200 and FEATURE not in (t.get("properties") or {})


BAD = [
    ("no table id", {"table_id": None}, 400, "table_id"),
    ("table id not a uuid", {"table_id": "nope"}, 400, "UUID"),
    ("unknown table", {"table_id": str(uuid.uuid4())}, 404, "does not exist"),
    ("no table uri", {"table_uri": None}, 400, "table_uri"),
    ("other table uri", {"table_uri": "file:///elsewhere"}, 400, "does not match the location"),
    ("nothing to do", {"commit_info": None}, 400, "Either commit_info or latest_backfilled_version"),
    ("version 0", {"commit_info": info(0)}, 400, "commit_info.version' must be >= 1"),
    ("version text", {"commit_info": {**info(1), "version": "x"}}, 400, "must be an integer"),
    ("version past bigint", {"commit_info": {**info(1), "version": 1 << 63}}, 400, "must be at most"),
    ("backfill past bigint", {"latest_backfilled_version": (1 << 64) - 1}, 400, "must be at most"),
    ("no file name", {"commit_info": {**info(1), "file_name": None}}, 400, "commit_info.file_name"),
    ("path in file name", {"commit_info": info(1, "../00000000000000000001.x.json")}, 400, "one path segment"),
    ("file of another version", {"commit_info": info(1, staged_name(2))}, 400, "names version 2"),
    ("zero size", {"commit_info": {**info(1), "file_size": 0}}, 400, "file_size"),
    ("negative backfill", {"latest_backfilled_version": -1}, 400, "latest_backfilled_version"),
    ("metadata without commit", {"commit_info": None, "latest_backfilled_version": 0,
                                 "metadata": {"description": "x"}}, 400, "cannot carry metadata"),
    ("uniform not an object", {"uniform": "iceberg"}, 400, "'uniform' must be an object"),
    ("bad columns", {"metadata": {"schema": {"columns": [{"name": "x"}]}}}, 400, "type_name"),
]


@pytest.mark.parametrize("change,status,says", [pytest.param(c, s, m, id=i) for i, c, s, m in BAD])
async def test_bad_commit(ws, server, table, change, status, says):
    body = {**ref(table), "commit_info": info(1), **change}
    body = {k: v for k, v in body.items() if v is not None}
    before = await server.store.metastore_version(ws.metastore_id)
    got, out = await ws.call("POST", COMMITS, json=body)
    assert got == status, out
    assert says in out["message"], out
    assert await server.store.metastore_version(ws.metastore_id) == before
    assert (await get_commits(ws, table))[:2] == ([], 0)


async def test_bad_get_commits(ws, table):
    cases = [({"start_version": -1}, "start_version' must be >= 0"), ({"start_version": None}, "start_version"),
             ({"start_version": 3, "end_version": 1}, "end_version (1) must be >= start_version (3)"),
             ({"table_id": str(uuid.uuid4())}, "does not exist"),
             ({"start_version": 1 << 63}, "start_version' must be at most"),     # was a 500 (found by fuzzing)
             ({"end_version": (1 << 64) - 1}, "end_version' must be at most")]
    for change, says in cases:
        body = {k: v for k, v in {**ref(table), "start_version": 0, **change}.items() if v is not None}
        status, out = await ws.call("GET", COMMITS, json=body)
        assert status in (400, 404) and says in out["message"], out
    # Query parameters work too, for clients that send no body with GET.
    status, out = await ws.call("GET", COMMITS, params={**ref(table), "start_version": "0"})
    assert status == 200 and out == {"commits": [], "latest_table_version": 0}
    for huge in (str(10 ** 38), "9" * 5000):
        status, out = await ws.call("GET", COMMITS, params={**ref(table), "start_version": huge})
        assert (status, out["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), out


async def test_tables_that_are_not_catalog_managed(ws):
    await setup_schema(ws)
    status, ext = await ws.call("POST", "/tables", json={
        "name": "e", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": ws.storage_root + "/ext/e"})
    if status == 200:    # external locations may be required by the catalog; either way no commits
        status, body = await commit(ws, ext, 1)
        assert status == 400 and "only for MANAGED DELTA tables" in body["message"]
    status, body = await ws.call("POST", "/tables", json={
        "name": "e2", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "PARQUET", "columns": COLS, "properties": {FEATURE: "supported"}})
    assert status == 400 and "only for MANAGED DELTA tables" in body["message"]
    status, plain = await ws.call("POST", "/tables", json={
        "name": "m", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLS})
    status, body = await commit(ws, plain, 1)
    assert status == 400 and "not catalog-managed" in body["message"]


async def test_dropping_the_table_drops_its_commits(ws, server, table):
    """Kept while the table can be undropped (docs/versions.md), gone with its purge."""
    assert (await commit(ws, table, 1))[0] == 200
    assert (await ws.call("DELETE", "/tables/main.s.t"))[0] == 200
    count = "SELECT count(*) FROM delta_commits WHERE table_id = $1"
    assert await server.store.pool.fetchval(count, uuid.UUID(table["table_id"])) == 1
    status, body = await commit(ws, table, 2)
    assert status == 404
    assert (await ws.call("DELETE", f"/shardcat/dropped/{table['table_id']}"))[0] == 200
    assert await server.store.pool.fetchval(count, uuid.UUID(table["table_id"])) == 0


async def sdk_get_commits(api: DeltaCommitsApi, request: DeltaGetCommits):
    """DeltaCommitsApi.get_commits, with its parameters in the query string: the SDK's REST client
    drops the body of every GET (rest.py sends bodies only for POST/PUT/PATCH/OPTIONS/DELETE), so
    the plain `api.get_commits(request)` reaches any server without parameters."""
    method, url, headers, body, post = api._get_commits_serialize(request, None, None, None, 0)
    url += "?" + urllib.parse.urlencode({k: v for k, v in request.to_dict().items() if v is not None})
    response = await api.api_client.call_api(method, url, headers, body, post)
    await response.read()
    return api.api_client.response_deserialize(
        response_data=response, response_types_map={"200": "DeltaGetCommitsResponse"}).data


async def test_sdk_delta_commits_api(ws, table):
    config = Configuration(host=ws.api, access_token=ws.token)
    async with ApiClient(config, header_name="Authorization", header_value=f"Bearer {ws.token}") as client:
        api, tables = DeltaCommitsApi(client), TablesApi(client)
        with pytest.raises(ApiException) as e:     # as the SDK itself sends it: no parameters arrive
            await api.get_commits(DeltaGetCommits(**ref(table), start_version=0))
        assert e.value.status == 400 and "query parameters" in json.loads(e.value.body)["message"]
        got = await sdk_get_commits(api, DeltaGetCommits(**ref(table), start_version=0))
        assert got.commits == [] and got.latest_table_version == 0
        first = DeltaCommitInfo(**info(1))
        await api.commit(DeltaCommit(**ref(table), commit_info=first))
        await api.commit(DeltaCommit(**ref(table), commit_info=first))         # replay: success
        with pytest.raises(ApiException) as e:
            await api.commit(DeltaCommit(**ref(table), commit_info=DeltaCommitInfo(**info(1))))
        assert e.value.status == 409 and json.loads(e.value.body)["error_code"] == "RESOURCE_CONFLICT"
        metadata = DeltaMetadata(
            description="via sdk",
            schema=ColumnInfos(columns=[ColumnInfo(name="id", type_name=ColumnTypeName.LONG, type_text="bigint",
                                                   type_json='{"name":"id","type":"long","nullable":true,"metadata":{}}',
                                                   position=0, nullable=True)]),
            properties=DeltaCommitMetadataProperties(properties={"k": "v"}))
        await api.commit(DeltaCommit(**ref(table), commit_info=DeltaCommitInfo(**info(2)), metadata=metadata,
                                     latest_backfilled_version=1))
        got = await sdk_get_commits(api, DeltaGetCommits(**ref(table), start_version=0))
        assert [c.version for c in got.commits] == [2] and got.latest_table_version == 2
        assert got.commits[0].file_size == 102
        t = await tables.get_table("main.s.t")
        assert t.comment == "via sdk" and t.properties["k"] == "v"
        await api.commit(DeltaCommit(**ref(table), latest_backfilled_version=2))
        got = await sdk_get_commits(api, DeltaGetCommits(**ref(table), start_version=0, end_version=5))
        assert got.commits == [] and got.latest_table_version == 2


async def test_commits_through_two_shards_and_a_restart(ws, server, pg_url, table):
    """Two shards serving one metastore (a move in progress), then a fresh shard (a restart):
    every one sees the same ratified commits, and a stale proposal loses on any of them."""
    from shardcat.store.db import Store
    store = await Store.open(pg_url, min_size=1, max_size=3)
    try:
        caller = Caller("admin", 1, True, ws.workspace_id, ws.metastore_id)
        a, b = DeltaCommitService(Shard(store, "a")), DeltaCommitService(Shard(store, "b"))
        await a.commit(caller, {**ref(table), "commit_info": info(1)})
        await b.commit(caller, {**ref(table), "commit_info": info(2)})
        with pytest.raises(CatalogError) as e:
            await a.commit(caller, {**ref(table), "commit_info": info(2)})
        assert e.value.code == "RESOURCE_CONFLICT"
        await a.commit(caller, {**ref(table), "commit_info": info(3)})
        fresh = DeltaCommitService(Shard(store, "c"))
        got = await fresh.get_commits(caller, {**ref(table), "start_version": 0})
        assert [c["version"] for c in got["commits"]] == [1, 2, 3] and got["latest_table_version"] == 3
        assert (await get_commits(ws, table))[:2] == ([1, 2, 3], 3)   # and the server's own shard
    finally:
        await store.close()
