"""Idempotency-Key, ETag and `snapshots=refs` on shardcat's Iceberg REST catalog, and unregisterTable.

A mutation sent again with its Idempotency-Key answers its first outcome and applies nothing twice (a
commit, a create, a drop), also when the first answer was a 4xx; the key is the caller's own (another
user's request with the same key runs as that user's and never hears the first answer); a key reused for
another request is refused; the key's lifetime is in /v1/config, and keys live in PostgreSQL (a new
server process on the same database replays them). loadTable answers an ETag and 304 to If-None-Match,
after the same authorization a load has."""

from __future__ import annotations

import uuid

import pytest
from governance_users import grant, user
from test_iceberg_rest import P, SCHEMA, create, metastore_version, set_property

ICE = "/iceberg/v1"


@pytest.fixture
async def ice(ws):
    for path, body in (("/catalogs", {"name": "ice"}), ("/schemas", {"name": "s", "catalog_name": "ice"})):
        status, out = await ws.call("POST", path, json=body)
        assert status == 200, out
    return ws


def key() -> dict:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def raw(ws, method: str, path: str, *, headers=None, json=None, params=None):
    """(status, headers, body bytes) of one call."""
    async with ws.session.request(method, ws.api + path, json=json, params=params,
                                  headers={**ws.headers, **(headers or {})}) as r:
        return r.status, r.headers, await r.read()


async def test_config_advertises_the_key_lifetime_and_every_served_endpoint(ice):
    status, body = await ice.call("GET", f"{ICE}/config", params={"warehouse": "ice"})
    assert status == 200 and body["idempotency-key-lifetime"] == "PT1H"
    for endpoint in ("POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
                     "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
                     "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
                     "GET /v1/{prefix}/namespaces/{namespace}/functions"):
        assert endpoint in body["endpoints"]


async def test_a_repeated_commit_answers_the_first_outcome_and_applies_once(ice, server):
    created = await create(ice, "t")
    once = key()
    commit = {"requirements": [], "updates": [set_property("k", "v")]}
    status, first = await ice.call("POST", f"{P}/namespaces/s/tables/t", json=commit, headers=once)
    assert status == 200, first
    version = await metastore_version(server, ice)
    status, again = await ice.call("POST", f"{P}/namespaces/s/tables/t", json=commit, headers=once)
    assert (status, again) == (200, first)
    assert await metastore_version(server, ice) == version          # nothing written the second time
    status, loaded = await ice.call("GET", f"{P}/namespaces/s/tables/t")
    assert loaded["metadata-location"] == first["metadata-location"] != created["metadata-location"]
    assert len(loaded["metadata"]["metadata-log"]) == 1                # one commit after the create
    # Without the key the same body is a second commit.
    status, second = await ice.call("POST", f"{P}/namespaces/s/tables/t", json=commit)
    assert status == 200 and second["metadata-location"] != first["metadata-location"]


async def test_a_refused_request_replays_its_refusal_and_a_create_runs_once(ice):
    once = key()
    body = {"name": "c", "schema": SCHEMA}
    status, first = await ice.call("POST", f"{P}/namespaces/s/tables", json=body, headers=once)
    assert status == 200, first
    status, again = await ice.call("POST", f"{P}/namespaces/s/tables", json=body, headers=once)
    assert (status, again) == (200, first)            # not "already exists": the first answer
    other = key()
    status, taken = await ice.call("POST", f"{P}/namespaces/s/tables", json=body, headers=other)
    assert status == 409 and taken["error"]["type"] == "AlreadyExistsException"
    status, drop = await ice.call("DELETE", f"{P}/namespaces/s/tables/c", headers=other)
    assert status == 400 and "another request" in drop["error"]["message"]    # one key, one request
    status, _ = await ice.call("DELETE", f"{P}/namespaces/s/tables/c")
    assert status == 204
    status, again = await ice.call("POST", f"{P}/namespaces/s/tables", json=body, headers=other)
    assert (status, again) == (409, taken)            # the 409 is final: replayed, the table not created again
    status, _ = await ice.call("GET", f"{P}/namespaces/s/tables/c")
    assert status == 404


async def test_a_key_that_is_not_a_uuid_is_refused(ice):
    for bad in ("nope", "x" * 36, str(uuid.uuid4()) + "0"):
        status, body = await ice.call("POST", f"{ICE}/namespaces", json={"namespace": ["k1"]},
                                      headers={"Idempotency-Key": bad})
        assert status == 400 and body["error"]["type"] == "BadRequestException", body
    status, _ = await ice.call("GET", f"{ICE}/namespaces/k1")
    assert status == 404


async def test_another_users_request_with_the_same_key_runs_as_theirs(ice, server):
    await create(ice, "t")
    bob = await user(server, ice)
    await grant(ice, "catalog", "ice", bob.name, "USE_CATALOG")
    await grant(ice, "schema", "ice.s", bob.name, "USE_SCHEMA", "SELECT")
    shared = key()
    commit = {"requirements": [], "updates": [set_property("owner-says", "yes")]}
    status, first = await ice.call("POST", f"{P}/namespaces/s/tables/t", json=commit, headers=shared)
    assert status == 200
    # Bob (SELECT, no MODIFY) sends the same key and body: his own request, refused; not the admin's answer.
    status, body = await bob.call("POST", f"{P}/namespaces/s/tables/t", json=commit, headers=shared)
    assert status == 403 and "metadata" not in body, body
    # Nor does a load under that key hear anything of it.
    status, body = await bob.call("GET", f"{P}/namespaces/s/tables/t", headers=shared)
    assert status == 200 and body["metadata-location"] == first["metadata-location"]


async def test_keys_outlive_the_server_process(ice, server, pg_url, tmp_path):
    """A retry served by another process on the same PostgreSQL (a shard's failover) replays the answer."""
    from shardcat.cluster.server import ServeConfig, start
    once = key()
    status, first = await ice.call("POST", f"{ICE}/namespaces", json={"namespace": ["k2"]}, headers=once)
    assert status == 200
    other = await start(ServeConfig(port=0, data_dir=tmp_path / "second", db=pg_url))
    try:
        async with ice.session.post(other.url + "/api/2.1/unity-catalog" + f"{ICE}/namespaces",
                                    json={"namespace": ["k2"]}, headers={**ice.headers, **once}) as r:
            assert (r.status, await r.json()) == (200, first)     # not 409 AlreadyExists
    finally:
        await other.stop()


async def test_load_table_etag_and_304(ice):
    await create(ice, "t")
    status, headers, _ = await raw(ice, "GET", f"{P}/namespaces/s/tables/t")
    etag = headers["ETag"]
    assert status == 200 and etag
    status, headers, body = await raw(ice, "GET", f"{P}/namespaces/s/tables/t", headers={"If-None-Match": etag})
    assert (status, body) == (304, b"") and headers["ETag"] == etag
    # `snapshots=refs` is another representation: another tag.
    status, headers, _ = await raw(ice, "GET", f"{P}/namespaces/s/tables/t", params={"snapshots": "refs"})
    assert status == 200 and headers["ETag"] != etag
    status, _, _ = await raw(ice, "GET", f"{P}/namespaces/s/tables/t", params={"snapshots": "some"})
    assert status == 400
    status, _ = await ice.call("POST", f"{P}/namespaces/s/tables/t",
                               json={"requirements": [], "updates": [set_property("k", "v")]})
    assert status == 200
    status, headers, _ = await raw(ice, "GET", f"{P}/namespaces/s/tables/t", headers={"If-None-Match": etag})
    assert status == 200 and headers["ETag"] != etag           # a new version: the full answer


async def test_a_304_needs_the_right_to_load(ice, server):
    await create(ice, "t")
    _, headers, _ = await raw(ice, "GET", f"{P}/namespaces/s/tables/t")
    stranger = await user(server, ice)
    status, _, body = await raw(stranger, "GET", f"{P}/namespaces/s/tables/t", headers={"If-None-Match": headers["ETag"]})
    assert status == 404 and b"NoSuchTableException" in body
    reader = await user(server, ice)
    await grant(ice, "catalog", "ice", reader.name, "USE_CATALOG")
    await grant(ice, "schema", "ice.s", reader.name, "USE_SCHEMA")       # sees it, no SELECT
    await grant(ice, "table", "ice.s.t", reader.name, "APPLY_TAG")
    status, _, body = await raw(reader, "GET", f"{P}/namespaces/s/tables/t", headers={"If-None-Match": headers["ETag"]})
    assert status == 403


async def test_unregister_answers_the_last_metadata_and_keeps_the_files(ice, tmp_path):
    from shardcat.entities.urls import local_path
    created = await create(ice, "t")
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables/t", json={
        "requirements": [], "updates": [set_property("k", "v")]})
    assert status == 200
    status, out = await ice.call("POST", f"{P}/namespaces/s/tables/t/unregister")
    assert status == 200, out
    assert out["metadata-location"] == body["metadata-location"] and out["metadata"]["properties"]["k"] == "v"
    import os
    assert os.path.exists(local_path(out["metadata-location"]))           # the files stay
    status, err = await ice.call("GET", f"{P}/namespaces/s/tables/t")
    assert status == 404 and err["error"]["type"] == "NoSuchTableException"
    status, err = await ice.call("POST", f"{P}/namespaces/s/tables/t", json={
        "requirements": [], "updates": [set_property("k", "w")]})
    assert status == 404                                                    # later commits fail
    status, err = await ice.call("POST", f"{P}/namespaces/s/tables/t/unregister")
    assert status == 404 and err["error"]["type"] == "NoSuchTableException"
    assert created


async def test_unregister_needs_the_right_to_drop(ice, server):
    await create(ice, "t")
    reader = await user(server, ice)
    await grant(ice, "catalog", "ice", reader.name, "USE_CATALOG")
    await grant(ice, "schema", "ice.s", reader.name, "USE_SCHEMA", "SELECT", "MODIFY")
    for path in (f"{P}/namespaces/s/tables/t/unregister", f"{P}/namespaces/S/tables/T/unregister",
                 f"{P}/namespaces/s/tables/%74/unregister"):
        status, body = await reader.call("POST", path)
        assert status == 403, (path, body)
    stranger = await user(server, ice)
    status, body = await stranger.call("POST", f"{P}/namespaces/s/tables/t/unregister")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException"
    status, _ = await ice.call("GET", f"{P}/namespaces/s/tables/t")
    assert status == 200


async def test_snapshots_refs_answers_only_the_snapshots_refs_name(ice):
    import asyncio

    import pyarrow as pa
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    def write():
        catalog = load_catalog("t", type="rest", uri=f"{ice.api}/iceberg", warehouse="ice", token=ice.token)
        table = catalog.create_table("s.snaps", Schema(NestedField(1, "id", LongType(), required=False)))
        for i in range(3):
            table.append(pa.table({"id": pa.array([i], pa.int64())}))
        first = table.snapshots()[0].snapshot_id
        table.manage_snapshots().create_tag(first, "v1").commit()
        return first, table.current_snapshot().snapshot_id

    first, current = await asyncio.to_thread(write)
    status, everything = await ice.call("GET", f"{P}/namespaces/s/tables/snaps", params={"snapshots": "all"})
    assert status == 200 and len(everything["metadata"]["snapshots"]) == 3
    status, refs = await ice.call("GET", f"{P}/namespaces/s/tables/snaps", params={"snapshots": "refs"})
    assert status == 200
    assert {s["snapshot-id"] for s in refs["metadata"]["snapshots"]} == {first, current}     # main and tag v1


async def test_create_and_commit_answer_the_etag_a_load_has(ice):
    status, headers, _ = await raw(ice, "POST", f"{P}/namespaces/s/tables", json={"name": "e", "schema": SCHEMA})
    assert status == 200
    status, again, _ = await raw(ice, "GET", f"{P}/namespaces/s/tables/e", headers={"If-None-Match": headers["ETag"]})
    assert status == 304
    status, committed, _ = await raw(ice, "POST", f"{P}/namespaces/s/tables/e",
                                     json={"requirements": [], "updates": [set_property("k", "v")]})
    assert status == 200 and committed["ETag"] != headers["ETag"]
    status, _, _ = await raw(ice, "GET", f"{P}/namespaces/s/tables/e", headers={"If-None-Match": committed["ETag"]})
    assert status == 304


async def test_a_staged_create_answers_without_an_etag(ice):
    status, headers, body = await raw(ice, "POST", f"{P}/namespaces/s/tables",
                                      json={"name": "staged", "schema": SCHEMA, "stage-create": True})
    assert status == 200 and "ETag" not in headers, body
