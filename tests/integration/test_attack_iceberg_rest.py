"""Attacks on the Iceberg REST catalog's newest operations (issue 46), tried as users with fewer rights would.

- Scan planning: a plan is its caller's own, and only while the caller may still read the table: after a
  REVOKE, or once the table is dropped and another made under its name, its id and its tasks answer as
  missing or refused, by every operation (fetch, cancel, tasks).
- Idempotency-Key: a key never answers someone else's request (another user's, or the same user's with
  another body); a replay carries no storage credential and nothing the caller was not answered before.
- ETag / If-None-Match: a 304 is answered only after the load's own authorization, whatever the tag is
  spelled (`*`, a list, weak).
- Remote signing: only requests to the table's own objects are signed, however the request is spelled (a
  sibling table's prefix, `..`, `//`, `%2e`, case, `s3a://`), and not after a REVOKE; the request that is
  signed is the one checked: a Host header naming another host or a copy from another object
  (`x-amz-copy-source`) is refused.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pyarrow as pa
import pytest
from governance_users import grant, user
from pyiceberg.catalog import load_catalog
from test_iceberg_signing import REMOTE, T as SIGNED, sign, signed_table  # noqa: F401
from test_storage_s3_compatible import auth_off, credential, no_ambient_aws, store  # noqa: F401

ICE = "/iceberg/v1"
P = f"{ICE}/catalogs/ice"
T = f"{P}/namespaces/s/tables/events"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


async def run(fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


def key() -> dict:
    return {"Idempotency-Key": str(uuid.uuid4())}


@pytest.fixture
async def events(ws, server):
    """ice.s.events with 6 data files, and `reader`: USE CATALOG, USE SCHEMA, SELECT on it."""
    await ok(ws, "POST", "/catalogs", json={"name": "ice"})
    ice = await run(load_catalog, "shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token)
    await run(ice.create_namespace, "s")
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField
    table = await run(ice.create_table, "s.events", Schema(NestedField(1, "id", LongType(), required=False)))
    for n in range(6):
        await run(table.append, pa.table({"id": pa.array([n], pa.int64())}))
    reader = await user(server, ws)
    await grant(ws, "catalog", "ice", reader.name, "USE_CATALOG")
    await grant(ws, "schema", "ice.s", reader.name, "USE_SCHEMA")
    await grant(ws, "table", "ice.s.events", reader.name, "SELECT")
    return reader


async def test_a_plan_is_useless_after_a_revoke_or_a_new_table_under_its_name(ws, server, events, monkeypatch):
    from shardcat.catalog.protocols.iceberg import scan
    monkeypatch.setattr(scan, "PAGE_TASKS", 2)
    reader = events
    first = await ok(reader, "POST", f"{T}/plan", json={})
    assert first["status"] == "completed" and first["plan-tasks"], first
    fetched = await ok(reader, "GET", f"{T}/plan/{first['plan-id']}")
    assert fetched["file-scan-tasks"] == first["file-scan-tasks"]
    await grant(ws, "table", "ice.s.events", reader.name, remove=["SELECT"])
    spellings = (T, f"{P}/namespaces/S/tables/EVENTS", f"{P}/namespaces/s/tables/ev%65nts")
    for path in spellings:
        for method, tail, body in (("GET", f"/plan/{first['plan-id']}", None),
                                   ("POST", "/tasks", {"plan-task": first["plan-tasks"][0]}),
                                   ("DELETE", f"/plan/{first['plan-id']}", None),
                                   ("POST", "/plan", {})):
            status, answer = await reader.call(method, path + tail, json=body)
            assert status in (403, 404) and "file-scan-tasks" not in answer, (path, tail, answer)
    # Granted again: the plan is there (the refusal did not consume it) -- but a new table under the name is
    # not the planned one: its plan id and tasks answer as missing.
    await grant(ws, "table", "ice.s.events", reader.name, "SELECT")
    await ok(reader, "POST", f"{T}/tasks", json={"plan-task": first["plan-tasks"][0]})
    status, _ = await ws.call("DELETE", T)
    assert status == 204
    await ok(ws, "POST", f"{P}/namespaces/s/tables", json={"name": "events", "schema": SCHEMA})
    await grant(ws, "table", "ice.s.events", reader.name, "SELECT")
    for method, tail, body in (("GET", f"/plan/{first['plan-id']}", None),
                               ("POST", "/tasks", {"plan-task": first["plan-tasks"][0]})):
        status, answer = await reader.call(method, T + tail, json=body)
        assert status == 404 and "file-scan-tasks" not in answer, (tail, answer)


async def test_an_idempotency_key_never_answers_another_request(ws, server, events):
    reader = events
    writer = await user(server, ws)
    await grant(ws, "catalog", "ice", writer.name, "USE_CATALOG")
    await grant(ws, "schema", "ice.s", writer.name, "USE_SCHEMA", "CREATE_TABLE")
    k = key()
    mine = await ok(writer, "POST", f"{P}/namespaces/s/tables", json={"name": "a", "schema": SCHEMA}, headers=k)
    # The same caller, the same key, the same path, another body: refused, not the first answer.
    for other in ({"name": "b", "schema": SCHEMA}, {"name": "a", "schema": SCHEMA, "properties": {"x": "y"}}):
        status, body = await writer.call("POST", f"{P}/namespaces/s/tables", json=other, headers=k)
        assert status == 400 and "metadata" not in body, (other, body)
    assert (await ws.call("GET", f"{P}/namespaces/s/tables/b"))[0] == 404          # nothing made either
    # The same body again (another spelling of the same JSON): the first answer.
    status, again = await writer.call("POST", f"{P}/namespaces/s/tables", json={"schema": SCHEMA, "name": "a"},
                                      headers=k)
    assert status == 200 and again["metadata"]["table-uuid"] == mine["metadata"]["table-uuid"]
    # Another user with the writer's key and body: their own request (the name is taken), never the answer.
    other = await user(server, ws)
    await grant(ws, "catalog", "ice", other.name, "USE_CATALOG")
    await grant(ws, "schema", "ice.s", other.name, "USE_SCHEMA", "CREATE_TABLE")
    for who in (reader, other):
        status, body = await who.call("POST", f"{P}/namespaces/s/tables", json={"name": "a", "schema": SCHEMA},
                                      headers=k)
        assert status in (403, 409) and mine["metadata"]["table-uuid"] not in json.dumps(body), body
    # A plan replayed after a REVOKE answers no credentials and nothing it did not answer before.
    pk = key()
    planned = await ok(reader, "POST", f"{T}/plan", json={}, headers=pk)
    await grant(ws, "table", "ice.s.events", reader.name, remove=["SELECT"])
    status, replay = await reader.call("POST", f"{T}/plan", json={}, headers=pk)
    if status == 200:
        assert not replay.get("storage-credentials") and replay["file-scan-tasks"] == planned["file-scan-tasks"]
    else:
        assert status in (403, 404) and "file-scan-tasks" not in replay, replay
    status, body = await reader.call("POST", f"{T}/plan", json={"filter": {"type": "eq", "term": "id", "value": 1}},
                                     headers=pk)
    assert status in (400, 403, 404) and "file-scan-tasks" not in body, body


async def test_a_304_is_never_answered_to_who_may_not_load(ws, server, events):
    reader = events
    async with ws.session.get(ws.api + T, headers=ws.headers) as r:
        tag = r.headers["ETag"]
    stranger = await user(server, ws)
    spellings = [tag, "*", f"W/{tag}", f'"x", {tag}', tag.upper(), f" {tag} "]
    for who, expected in ((stranger, 404), (reader, None)):
        for spelled in spellings:
            async with who.session.get(who.api + T, headers={**who.headers, "If-None-Match": spelled}) as r:
                body = await r.read()
                if expected:
                    assert r.status == expected and "ETag" not in r.headers, (spelled, r.status)
                else:
                    assert r.status in (200, 304), (spelled, r.status, body)
    await grant(ws, "table", "ice.s.events", reader.name, remove=["SELECT"])
    for spelled in spellings:
        async with reader.session.get(reader.api + T, headers={**reader.headers, "If-None-Match": spelled}) as r:
            assert r.status in (403, 404) and "ETag" not in r.headers, (spelled, r.status)


async def test_the_signer_signs_only_what_it_checked(ws, server, signed_table, store):
    b, url = signed_table["bucket"], signed_table["url"]
    host = url.split("://")[1]
    inside = f"{url}/{b}/lake/reg/data/a.parquet"
    # A sibling table at lake/regx (its own asset): none of its objects is signed for reg, however spelled.
    status, _ = await sign(ws, inside)
    assert status == 200
    sibling = [f"{url}/{b}/lake/regx/secret", f"{url}/{b}/lake/reg/../regx/secret",
               f"{url}/{b}/lake/reg/%2e%2e/regx/secret", f"{url}/{b}/lake/reg/%2E./regx/secret",
               f"{url}/{b}/lake/reg/data/..%2f..%2f..%2fregx%2fsecret", f"{url}/{b}/lake//regx/secret",
               f"{url}/{b}/lake/REGX/secret", f"{url}/{b}/Lake/reg/data/a.parquet",
               f"s3a://{b}/lake/reg/data/a.parquet", f"s3://{b}/lake/reg/data/a.parquet",
               f"{url}/{b.upper()}/lake/reg/data/a.parquet", f"{url}/{b}%2Flake/reg/data/a.parquet",
               f"{url}/{b}?list-type=2&prefix=lake/reg/../regx/", f"{url}/{b}?list-type=2&prefix=lake/reg%2F..%2Fregx",
               f"{url}/{b}?list-type=2&prefix=lake/reg", f"{url}/{b}?list-type=2&prefix=lake/reg/&prefix=lake/",
               f"{url}/{b}/lake/reg/data/a.parquet?uploadId=1&x-id=GetObject&acl"]
    for uri in sibling:
        status, body = await sign(ws, uri)
        assert status in (400, 403), (uri, body)
    # The request signed is the request checked: no Host naming another host, no copy from another object.
    for headers in ({"Host": ["other.example"]}, {"host": [f"{b}.{host}"]}, {"HOST": ["evil"]},
                    {"x-amz-copy-source": [f"/{b}/lake/regx/secret"]},
                    {"X-Amz-Copy-Source": [f"{b}/lake/free/f.csv"]},
                    {"x-amz-copy-source-range": ["bytes=0-1"], "x-amz-copy-source": [f"/{b}/lake/regx/secret"]}):
        for method in ("GET", "PUT"):
            status, body = await ws.call("POST", f"{SIGNED}/sign", json={
                "region": "us-east-1", "uri": inside, "method": method, "headers": headers})
            assert status in (400, 403), (headers, method, body)
    status, body = await ws.call("POST", f"{SIGNED}/sign", json={
        "region": "us-east-1", "uri": inside, "method": "GET", "headers": {"Host": [host]}})
    assert status == 200, body                 # the request's own host is fine
    # After a REVOKE, nothing is signed for the reader, read or write.
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE_SCHEMA")
    await grant(ws, "table", "main.s.reg", reader.name, "SELECT")
    assert (await sign(reader, inside))[0] == 200
    await grant(ws, "table", "main.s.reg", reader.name, remove=["SELECT"])
    for method in ("GET", "HEAD", "PUT"):
        status, body = await sign(reader, inside, method=method)
        assert status in (403, 404) and "headers" not in body, (method, body)


async def test_a_commit_cannot_point_a_snapshot_at_another_tables_manifests(ws, server, events):
    """A writer of one table commits a snapshot whose manifest list is another table's: planning (which reads
    manifests with the catalog's own rights on file://) would answer that table's files and column bounds to
    the writer's readers. The commit is refused, and nothing of the other table is planned."""
    from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate
    writer = await user(server, ws)
    await grant(ws, "catalog", "ice", writer.name, "USE_CATALOG")
    await grant(ws, "schema", "ice.s", writer.name, "USE_SCHEMA", "CREATE_TABLE")
    mine_catalog = await run(load_catalog, "w", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice",
                             token=writer.token)
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField
    mine = await run(mine_catalog.create_table, "s.mine", Schema(NestedField(1, "id", LongType(), required=False)))
    admin = await run(load_catalog, "a", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token)
    victim = await run(admin.load_table, "s.events")
    stolen = victim.current_snapshot().manifest_list
    for manifest_list in (stolen, stolen.replace("file://", ""),
                          f"{mine.location()}/metadata/../../{stolen.rsplit('/tables/', 1)[1].split('/', 1)[0]}"
                          f"/metadata/{stolen.rsplit('/', 1)[1]}"):
        snapshot = Snapshot(snapshot_id=7, sequence_number=1, timestamp_ms=1, manifest_list=manifest_list,
                            summary=Summary(Operation.APPEND), schema_id=0)
        try:
            await run(mine_catalog.commit_table, mine, (), (
                AddSnapshotUpdate(snapshot=snapshot),
                SetSnapshotRefUpdate(ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH, snapshot_id=7)))
            committed = True
        except Exception:       # noqa: BLE001 -- refused: what is wanted
            committed = False
        status, answer = await writer.call("POST", f"{P}/namespaces/s/tables/mine/plan", json={})
        victim_files = {t.file.file_path for t in await run(lambda: list(victim.scan().plan_files()))}
        assert not victim_files & {t["data-file"]["file-path"] for t in answer.get("file-scan-tasks", [])}, \
            (manifest_list, committed, answer)
        assert not committed, manifest_list
        mine = await run(mine_catalog.load_table, "s.mine")


async def test_a_registered_table_cannot_point_its_snapshots_at_another_tables_manifests(ws, server, events,
                                                                                        tmp_path):
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import LongType, NestedField
    admin = await run(load_catalog, "a", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token)
    victim = await run(admin.load_table, "s.events")
    ext = tmp_path / "ext"
    ext.mkdir()
    await ok(ws, "POST", "/storage-credentials", json={"name": "c", "aws_iam_role": {"role_arn": "arn:x"}})
    await ok(ws, "POST", "/external-locations", json={"name": "ext", "url": ext.as_uri(), "credential_name": "c"})
    writer = await user(server, ws)
    await grant(ws, "catalog", "ice", writer.name, "USE_CATALOG")
    await grant(ws, "schema", "ice.s", writer.name, "USE_SCHEMA", "CREATE_TABLE")
    await grant(ws, "external_location", "ext", writer.name, "READ FILES", "CREATE EXTERNAL TABLE")
    location = (ext / "reg").as_uri()
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location)
    stolen = victim.metadata.snapshots[-1]
    metadata = metadata.model_copy(update={"snapshots": [stolen], "current_snapshot_id": stolen.snapshot_id,
                                           "refs": {"main": {"snapshot-id": stolen.snapshot_id, "type": "branch"}},
                                           "last_sequence_number": stolen.sequence_number})
    path = ext / "reg" / "metadata" / "00000-x.metadata.json"
    path.parent.mkdir(parents=True)
    path.write_text(metadata.model_dump_json())
    status, body = await writer.call("POST", f"{P}/namespaces/s/register",
                                     json={"name": "reg", "metadata-location": path.as_uri()})
    assert status == 400 and stolen.manifest_list not in json.dumps(body), body
    status, answer = await writer.call("POST", f"{P}/namespaces/s/tables/reg/plan", json={})
    assert status == 404 and "file-scan-tasks" not in answer, answer
