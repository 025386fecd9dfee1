"""The UC Delta API (`/delta/v1`, api/delta.yaml of the open-source Unity Catalog) over HTTP: config,
the staging-table creation flow with a real version 0 in storage, loading a catalog-managed table
(metadata, latest version and unpublished commits in one answer), commits through update-table
sharing ratification with `/delta/preview/commits`, requirements, metadata updates landing in
the Unity Catalog table, rename / delete / exists / list, credentials, metrics, grants and errors.
"""

from __future__ import annotations

import asyncio
import uuid

import pyarrow as pa

from shardcat.delta import log as dlog
from shardcat.delta.client import DeltaCatalogClient

from governance_users import grant, user

DELTA = "/delta/v1"
SCHEMA = f"{DELTA}/catalogs/main/schemas/s"
COLUMNS = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {}},
    {"name": "amount", "type": "decimal(10,2)", "nullable": True, "metadata": {"comment": "in EUR"}},
    {"name": "tags", "type": {"type": "array", "element-type": "string", "contains-null": True}, "nullable": True,
     "metadata": {}},
    {"name": "day", "type": "date", "nullable": True, "metadata": {}}]}


async def setup(ws) -> None:
    assert (await ws.call("POST", "/catalogs", json={"name": "main"}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "main"}))[0] == 200


def camel(protocol: dict) -> dict:
    return {"minReaderVersion": protocol["min-reader-version"], "minWriterVersion": protocol["min-writer-version"],
            "readerFeatures": protocol["reader-features"], "writerFeatures": protocol["writer-features"]}


async def create_through_delta_api(ws, name: str) -> dict:
    """The Delta 4.1 flow: staging table, version 0 written at its location, then createTable."""
    status, staging = await ws.call("POST", f"{SCHEMA}/staging-tables", json={"name": name})
    assert status == 200, staging
    props = {k: v for k, v in staging["required-properties"].items() if v is not None}
    ict = dlog.now_ms()
    schema = pa.schema([("id", pa.int64())])
    dlog.Storage(staging["location"]).write(dlog.commit_file(0), dlog.encode_actions([
        dlog.commit_info(ict, "CREATE TABLE"), {"protocol": camel(staging["required-protocol"])},
        dlog.metadata(staging["table-id"], schema, props)]))
    status, created = await ws.call("POST", f"{SCHEMA}/tables", json={
        "name": name, "location": staging["location"], "table-type": "MANAGED",
        "columns": {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]},
        "protocol": staging["required-protocol"], "properties": props, "last-commit-timestamp-ms": ict})
    assert status == 200, created
    return created


def commit(version: int, name: str | None = None) -> dict:
    return {"version": version, "timestamp": 1_700_000_000_000 + version,
            "file-name": name or f"{version:020d}.{uuid.uuid4()}.json", "file-size": 10 + version,
            "file-modification-timestamp": 1_700_000_000_000 + version}


def update(table_id: str, *updates, etag: str | None = None) -> dict:
    requirements = [{"type": "assert-table-uuid", "uuid": table_id}]
    if etag is not None:
        requirements.append({"type": "assert-etag", "etag": etag})
    return {"requirements": requirements, "updates": list(updates)}


def add_commit(version: int, name: str | None = None) -> dict:
    return {"action": "add-commit", "commit": commit(version, name)}


async def test_config_negotiates_version_and_lists_endpoints(ws):
    await setup(ws)
    status, body = await ws.call("GET", f"{DELTA}/config", params={"catalog": "main", "protocol-versions": "1.3,2.0"})
    assert status == 200, body
    assert body["protocol-version"] == "1.0"
    assert "GET /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}" in body["endpoints"]
    assert "GET /v1/config" not in body["endpoints"]     # as delta.yaml's example and UC OSS 0.6 answer
    status, body = await ws.call("GET", f"{DELTA}/config", params={"catalog": "main", "protocol-versions": "2.0"})
    assert status == 400 and body["error"]["type"] == "InvalidParameterValueException", body
    status, body = await ws.call("GET", f"{DELTA}/config", params={"catalog": "nope", "protocol-versions": "1.0"})
    assert status == 404 and body["error"]["type"] == "NoSuchCatalogException", body
    assert body["error"]["code"] == 404


async def test_staging_create_load_commit_and_replay(ws):
    await setup(ws)
    created = await create_through_delta_api(ws, "orders")
    md = created["metadata"]
    table_id = md["table-uuid"]
    assert created["latest-table-version"] == 0 and created["commits"] == []
    assert md["table-type"] == "MANAGED" and md["properties"]["delta.feature.catalogManaged"] == "supported"
    assert md["properties"]["io.unitycatalog.tableId"] == table_id
    assert md["last-commit-version"] == 0
    # The Unity Catalog API sees the same table, catalog-managed.
    status, uc = await ws.call("GET", "/tables/main.s.orders")
    assert status == 200 and uc["table_id"] == table_id and uc["storage_location"] == md["location"]

    c1 = commit(1)
    status, body = await ws.call("POST", f"{SCHEMA}/tables/orders", json=update(table_id, {"action": "add-commit",
                                                                                          "commit": c1}))
    assert status == 200, body
    assert body["latest-table-version"] == 1 and [c["version"] for c in body["commits"]] == [1]
    assert body["commits"][0]["file-name"] == c1["file-name"]
    # A lost response resent: the same commit again is a no-op success.
    status, again = await ws.call("POST", f"{SCHEMA}/tables/orders", json=update(table_id, {"action": "add-commit",
                                                                                           "commit": c1}))
    assert status == 200 and again["latest-table-version"] == 1, again
    # Another proposal for version 1 lost the race.
    status, body = await ws.call("POST", f"{SCHEMA}/tables/orders", json=update(table_id, add_commit(1)))
    assert status == 409 and body["error"]["type"] == "CommitVersionConflictException", body
    status, body = await ws.call("POST", f"{SCHEMA}/tables/orders", json=update(table_id, add_commit(3)))
    assert status == 400, body
    # Load answers all unpublished commits, newest first, with the latest version.
    status, body = await ws.call("POST", f"{SCHEMA}/tables/orders", json=update(table_id, add_commit(2)))
    assert status == 200, body
    status, loaded = await ws.call("GET", f"{SCHEMA}/tables/orders")
    assert status == 200 and loaded["latest-table-version"] == 2
    assert [c["version"] for c in loaded["commits"]] == [2, 1]
    # Publishing 1 drops it from the answer.
    status, body = await ws.call("POST", f"{SCHEMA}/tables/orders", json=update(
        table_id, {"action": "set-latest-backfilled-version", "latest-published-version": 1}))
    assert status == 200 and [c["version"] for c in body["commits"]] == [2], body


async def test_one_ratification_for_both_apis(ws):
    """A commit through /delta/preview/commits and one through /delta/v1 take versions of one sequence."""
    await setup(ws)
    async with DeltaCatalogClient(ws.api, ws.token, publish_after_commit=False) as client:
        t = await client.create_table("main.s.both", pa.schema([("id", pa.int64())]))
        await client.append(t, pa.table({"id": [1]}))                        # version 1, preview API
    status, body = await ws.call("POST", f"{SCHEMA}/tables/both", json=update(t.table_id, add_commit(1)))
    assert status == 409 and body["error"]["type"] == "CommitVersionConflictException", body
    status, body = await ws.call("POST", f"{SCHEMA}/tables/both", json=update(t.table_id, add_commit(2)))
    assert status == 200, body
    status, got = await ws.call("GET", "/delta/preview/commits", params={
        "table_id": t.table_id, "table_uri": t.location, "start_version": "0"})
    assert status == 200 and got["latest_table_version"] == 2
    assert [c["version"] for c in got["commits"]] == [1, 2]
    # The limit on unpublished commits holds here too.
    status, body = await ws.call("PATCH", "/tables/main.s.both", json={
        "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": t.table_id,
                       "shardcat.delta.maxUnpublishedCommits": "2"}})
    assert status == 200, body
    status, body = await ws.call("POST", f"{SCHEMA}/tables/both", json=update(t.table_id, add_commit(3)))
    assert status == 429 and body["error"]["type"] == "ResourceExhaustedException", body


async def test_requirements_and_metadata_updates(ws):
    await setup(ws)
    created = await create_through_delta_api(ws, "t")
    table_id, tag = created["metadata"]["table-uuid"], created["metadata"]["etag"]
    status, body = await ws.call("POST", f"{SCHEMA}/tables/t", json=update(str(uuid.uuid4()), add_commit(1)))
    assert status == 409 and body["error"]["type"] == "UpdateRequirementConflictException", body
    # A metadata-changing commit: columns, comment and properties land with version 1.
    status, body = await ws.call("POST", f"{SCHEMA}/tables/t", json=update(
        table_id, add_commit(1), {"action": "set-columns", "columns": COLUMNS},
        {"action": "set-partition-columns", "partition-columns": ["DAY"]},
        {"action": "set-table-comment", "comment": "orders"},
        {"action": "set-properties", "updates": {"owner.team": "sales"}},
        {"action": "set-domain-metadata", "updates": {"delta.clustering": {"clusteringColumns": [["id"]]}}},
        etag=tag))
    assert status == 200, body
    md = body["metadata"]
    assert md["etag"] != tag and md["last-commit-version"] == 1
    assert md["columns"] == COLUMNS and md["partition-columns"] == ["day"]
    assert md["properties"]["owner.team"] == "sales" and md["properties"]["delta.clusteringColumns"] == '[["id"]]'
    status, uc = await ws.call("GET", "/tables/main.s.t")
    assert uc["comment"] == "orders"
    cols = {c["name"]: c for c in uc["columns"]}
    assert cols["amount"]["type_name"] == "DECIMAL" and cols["amount"]["type_precision"] == 10
    assert cols["amount"]["comment"] == "in EUR" and cols["tags"]["type_text"] == "array<string>"
    assert cols["day"]["partition_index"] == 0
    # The old etag no longer holds: nothing of the request is applied.
    status, body = await ws.call("POST", f"{SCHEMA}/tables/t", json=update(
        table_id, add_commit(2), {"action": "set-properties", "updates": {"x": "1"}}, etag=tag))
    assert status == 409 and body["error"]["type"] == "UpdateRequirementConflictException", body
    status, loaded = await ws.call("GET", f"{SCHEMA}/tables/t")
    assert loaded["latest-table-version"] == 1 and "x" not in loaded["metadata"]["properties"]
    # Derived properties are the catalog's.
    status, body = await ws.call("POST", f"{SCHEMA}/tables/t", json=update(
        table_id, {"action": "set-properties", "updates": {"delta.feature.deletionVectors": "supported"}}))
    assert status == 400 and "derived" in body["error"]["message"], body
    status, body = await ws.call("POST", f"{SCHEMA}/tables/t", json=update(
        table_id, {"action": "set-protocol", "protocol": {"min-reader-version": 1, "min-writer-version": 7,
                                                          "writer-features": ["inCommitTimestamp"]}}))
    assert status == 400 and "catalogManaged" in body["error"]["message"], body
    status, body = await ws.call("POST", f"{SCHEMA}/tables/t", json=update(
        table_id, {"action": "remove-properties", "removals": ["owner.team"]},
        {"action": "remove-domain-metadata", "domains": ["delta.clustering"]}))
    assert status == 200, body
    assert "owner.team" not in body["metadata"]["properties"]
    assert "delta.clusteringColumns" not in body["metadata"]["properties"]


async def test_bad_updates_are_refused_whole(ws):
    await setup(ws)
    created = await create_through_delta_api(ws, "t")
    table_id = created["metadata"]["table-uuid"]
    cases = [
        {"updates": [add_commit(1)]},                                                   # no requirements
        {"requirements": [{"type": "assert-etag", "etag": "x"}], "updates": [add_commit(1)]},  # no uuid assertion
        update(table_id),                                                               # no updates
        update(table_id, {"action": "explode"}),
        update(table_id, add_commit(1), add_commit(2)),
        update(table_id, {"action": "set-properties", "updates": {"a": "1"}},
               {"action": "remove-properties", "removals": ["a"]}),
        update(table_id, {"action": "add-commit", "commit": {**commit(1), "file-name": "../1.json"}}),
        update(table_id, {"action": "set-columns", "columns": {"type": "struct", "fields": [
            {"name": "a", "type": "long", "nullable": True, "metadata": {}},
            {"name": "A", "type": "long", "nullable": True, "metadata": {}}]}}),
        update(table_id, {"action": "set-columns", "columns": {"type": "struct", "fields": [
            {"name": "a", "type": "quux", "nullable": True, "metadata": {}}]}}),
        update(table_id, {"action": "set-partition-columns", "partition-columns": ["nope"]}),
        update(table_id, {"action": "set-properties", "updates": [{"a": "1"}]},
               {"action": "remove-properties", "removals": [{"a": 1}]}),
        update(table_id, {"action": "set-domain-metadata", "updates": {"delta.nope": {}}}),
        update(table_id, {"action": "update-metadata-snapshot-version", "last-commit-version": 1,
                          "last-commit-timestamp-ms": 1}),                               # MANAGED table
    ]
    for body in cases:
        status, answer = await ws.call("POST", f"{SCHEMA}/tables/t", json=body)
        assert status == 400, (body, answer)
        assert answer["error"]["type"] in ("InvalidParameterValueException", "BadRequestException"), answer
    status, loaded = await ws.call("GET", f"{SCHEMA}/tables/t")
    assert loaded["latest-table-version"] == 0 and loaded["metadata"]["etag"] == created["metadata"]["etag"]
    status, answer = await ws.call("POST", f"{SCHEMA}/tables/t", data=b"{not json")
    assert status == 400 and answer["error"]["type"] == "BadRequestException", answer


async def test_plain_tables_exists_list_rename_delete_and_errors(ws):
    await setup(ws)
    status, plain = await ws.call("POST", "/tables", json={
        "name": "plain", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200, plain
    status, other = await ws.call("POST", "/tables", json={
        "name": "pq", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "PARQUET", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200, other
    # A plain Delta table: metadata only; its log is the file system's.
    status, body = await ws.call("GET", f"{SCHEMA}/tables/plain")
    assert status == 200 and "latest-table-version" not in body and "commits" not in body, body
    assert body["metadata"]["columns"]["fields"][0] == {"name": "id", "type": "long", "nullable": True,
                                                        "metadata": {}}
    status, body = await ws.call("GET", f"{SCHEMA}/tables/pq")
    assert status == 400 and body["error"]["type"] == "UnsupportedTableFormatException", body
    status, body = await ws.call("GET", f"{SCHEMA}/tables/nope")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException", body
    status, body = await ws.call("GET", f"{DELTA}/catalogs/main/schemas/nope/tables/t")
    assert status == 404 and body["error"]["type"] == "NoSuchSchemaException", body
    status, body = await ws.call("GET", f"{SCHEMA}/tables")
    assert status == 200 and body["identifiers"] == [{"namespace": ["main", "s"], "name": "plain"}], body

    async with ws.session.head(ws.api + f"{SCHEMA}/tables/plain", headers=ws.headers) as r:
        assert r.status == 204
    async with ws.session.head(ws.api + f"{SCHEMA}/tables/nope", headers=ws.headers) as r:
        assert r.status == 404
    status, _ = await ws.call("POST", f"{SCHEMA}/tables/plain/rename", json={"new-name": "renamed"})
    assert status == 204
    assert (await ws.call("GET", "/tables/main.s.renamed"))[0] == 200
    status, body = await ws.call("POST", f"{SCHEMA}/tables/renamed/rename", json={"new-name": "pq"})
    assert status == 409 and body["error"]["type"] == "AlreadyExistsException", body
    # Commits are for catalog-managed tables only.
    status, body = await ws.call("POST", f"{SCHEMA}/tables/renamed", json=update(plain["table_id"], add_commit(1)))
    assert status == 400 and "catalog-managed" in body["error"]["message"], body
    status, _ = await ws.call("DELETE", f"{SCHEMA}/tables/renamed")
    assert status == 204
    assert (await ws.call("GET", "/tables/main.s.renamed"))[0] == 404


async def test_create_external_and_refusals(ws):
    await setup(ws)
    base = {"name": "x", "location": "file:///nowhere/x", "table-type": "MANAGED", "columns": COLUMNS,
            "protocol": {"min-reader-version": 1, "min-writer-version": 2}, "properties": {},
            "last-commit-timestamp-ms": 1}
    status, body = await ws.call("POST", f"{SCHEMA}/tables", json=base)      # MANAGED but not catalog-managed
    assert status == 400 and "catalogManaged" in body["error"]["message"], body
    status, body = await ws.call("POST", f"{SCHEMA}/tables", json={**base, "name": "ext", "table-type": "EXTERNAL"})
    assert status == 200 and body["metadata"]["table-type"] == "EXTERNAL", body     # local mode: any path
    assert "latest-table-version" not in body and body["metadata"]["columns"] == COLUMNS
    status, body = await ws.call("POST", f"{SCHEMA}/tables/ext", json=update(body["metadata"]["table-uuid"], {
        "action": "update-metadata-snapshot-version", "last-commit-version": 7, "last-commit-timestamp-ms": 99}))
    assert status == 200 and body["metadata"]["last-commit-version"] == 7, body
    status, body = await ws.call("POST", f"{SCHEMA}/tables",
                                 json={**base, "properties": {"delta.minReaderVersion": "3"}})
    assert status == 400 and "derived" in body["error"]["message"], body
    status, body = await ws.call("POST", f"{SCHEMA}/tables", json={k: v for k, v in base.items() if k != "columns"})
    assert status == 400, body
    assert (await ws.call("GET", "/tables/main.s.x"))[0] == 404


async def test_credentials_metrics_and_grants(ws, server):
    await setup(ws)
    created = await create_through_delta_api(ws, "t")
    md = created["metadata"]
    status, body = await ws.call("GET", f"{SCHEMA}/tables/t/credentials", params={"operation": "READ"})
    assert status == 200, body
    [cred] = body["storage-credentials"]
    assert cred["prefix"] == md["location"] and cred["operation"] == "READ" and cred["config"] == {}
    assert cred["expiration-time-ms"] > dlog.now_ms()
    status, body = await ws.call("GET", f"{SCHEMA}/tables/t/credentials", params={"operation": "WRITE"})
    assert status == 400, body
    status, staging = await ws.call("POST", f"{SCHEMA}/staging-tables", json={"name": "later"})
    assert status == 200 and staging["storage-credentials"][0]["operation"] == "READ_WRITE"
    status, body = await ws.call("GET", f"{DELTA}/staging-tables/{staging['table-id']}/credentials")
    assert status == 200 and body["storage-credentials"][0]["prefix"] == staging["location"], body
    status, body = await ws.call("GET", f"{DELTA}/staging-tables/{uuid.uuid4()}/credentials")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException", body
    status, body = await ws.call("GET", f"{DELTA}/temporary-path-credentials",
                                 params={"location": "file:///elsewhere/x", "operation": "READ"})
    assert status in (400, 403), body       # no external location: nothing to vend for
    status, _ = await ws.call("POST", f"{SCHEMA}/tables/t/metrics", json={
        "table-id": md["table-uuid"], "report": {"commit-report": {"num-files-added": 1}}})
    assert status == 204
    status, body = await ws.call("POST", f"{SCHEMA}/tables/t/metrics", json={"table-id": str(uuid.uuid4())})
    assert status == 400, body

    # A stranger: the table, and the catalog holding it, answer as missing (docs/security.md).
    eve = await user(server, ws)
    for method, path, body in (("GET", f"{SCHEMA}/tables/t", None), ("POST", f"{SCHEMA}/tables/t",
                                                                     update(md["table-uuid"], add_commit(1))),
                               ("GET", f"{DELTA}/staging-tables/{staging['table-id']}/credentials", None)):
        status, answer = await eve.call(method, path, json=body)
        assert status == 404, (path, answer)
    await grant(ws, "catalog", "main", eve.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", eve.name, "USE SCHEMA")
    status, answer = await eve.call("GET", f"{SCHEMA}/tables/t")
    assert status == 404 and answer["error"]["type"] == "NoSuchTableException", answer
    status, answer = await eve.call("GET", f"{DELTA}/catalogs/main/schemas/nope/tables/t")
    assert status == 404 and answer["error"]["type"] == "NoSuchSchemaException", answer

    # A reader without SELECT: neither the table's commits nor its credentials.
    bob = await user(server, ws)
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", bob.name, "USE SCHEMA", "BROWSE")
    for path, params in ((f"{SCHEMA}/tables/t", None), (f"{SCHEMA}/tables/t/credentials", {"operation": "READ"})):
        status, body = await bob.call("GET", path, params=params)
        assert status == 403 and body["error"]["type"] == "PermissionDeniedException", body
    status, body = await bob.call("POST", f"{SCHEMA}/tables/t", json=update(md["table-uuid"], add_commit(1)))
    assert status == 403, body
    await grant(ws, "table", "main.s.t", bob.name, "SELECT")
    status, body = await bob.call("GET", f"{SCHEMA}/tables/t")
    assert status == 200 and body["latest-table-version"] == 0
    status, body = await bob.call("GET", f"{SCHEMA}/tables/t/credentials", params={"operation": "READ_WRITE"})
    assert status == 403, body
    status, body = await bob.call("POST", f"{SCHEMA}/tables/t", json=update(md["table-uuid"], add_commit(1)))
    assert status == 403, body
    await grant(ws, "table", "main.s.t", bob.name, "MODIFY")
    status, body = await bob.call("POST", f"{SCHEMA}/tables/t", json=update(md["table-uuid"], add_commit(1)))
    assert status == 200 and body["latest-table-version"] == 1, body


async def test_audit_names_the_operation_and_the_table(ws):
    await setup(ws)
    created = await create_through_delta_api(ws, "t")
    table_id = created["metadata"]["table-uuid"]
    assert (await ws.call("POST", f"{SCHEMA}/tables/t", json=update(table_id, add_commit(1))))[0] == 200
    assert (await ws.call("POST", f"{SCHEMA}/tables/t", json=update(table_id, add_commit(1, "x"))))[0] == 400
    assert (await ws.call("GET", f"{SCHEMA}/tables/t"))[0] == 200
    status, body = await ws.call("GET", "/shardcat/audit", params={"metastore_id": ws.metastore_id})
    assert status == 200, body
    events = [(e["action"], e.get("securable_type"), e.get("securable_full_name"), e["status"], e.get("error_code"))
              for e in reversed(body["events"]) if e["route"].startswith("/delta/v1") or "/delta/v1" in e["route"]]
    assert events == [
        ("createDeltaStagingTable", "TABLE", "main.s.t", 200, None),
        ("createDeltaTable", "TABLE", "main.s.t", 200, None),
        ("updateDeltaTable", "TABLE", "main.s.t", 200, None),
        ("updateDeltaTable", "TABLE", "main.s.t", 400, "InvalidParameterValueException"),
        ("loadDeltaTable", "TABLE", "main.s.t", 200, None)], events


JUNK = [b"[]", b'"x"', b"{}", b'{"name": 5}', b'{"name": "a", "columns": {"fields": "x"}}', b'{"new-name": ["x"]}',
        b'{"table-id": 5}', b'{"requirements": "x", "updates": {}}', b'{"name": "a", "location": 7}',
        b'{"name": "a", "location": "file:///x", "table-type": "MANAGED", "columns": {"type": "struct", "fields": []},'
        b' "protocol": [], "properties": {}, "last-commit-timestamp-ms": 1}',
        b'{"requirements": [{"type": "assert-table-uuid", "uuid": []}], "updates": [{"action": "add-commit"}]}',
        b'{"name": "a\\u0000b"}', b'{"name": "a.b"}', b'{"table-id": "00000000-0000-0000-0000-000000000000"}']


async def test_junk_is_a_4xx_in_the_apis_shape(ws):
    await setup(ws)
    created = await create_through_delta_api(ws, "t")
    paths = [f"{SCHEMA}/staging-tables", f"{SCHEMA}/tables", f"{SCHEMA}/tables/t", f"{SCHEMA}/tables/t/rename",
             f"{SCHEMA}/tables/t/metrics"]
    refused = 0
    for path in paths:
        for body in JUNK:
            status, answer = await ws.call("POST", path, data=body, headers={"Content-Type": "application/json"})
            assert status < 500, (path, body, status, answer)
            if status >= 400:
                assert set(answer["error"]) == {"message", "type", "code"} and answer["error"]["code"] == status
                refused += 1
    assert refused >= len(paths) * len(JUNK) - 3     # the few bodies valid for some route: staging table "a"
    for params in ({}, {"operation": "x"}, {"operation": "READ", "location": "not a url"}):
        for path in (f"{SCHEMA}/tables/t/credentials", f"{DELTA}/temporary-path-credentials",
                     f"{DELTA}/staging-tables/not-a-uuid/credentials", f"{DELTA}/config"):
            status, answer = await ws.call("GET", path, params=params)
            assert status < 500 and (status == 200 or answer["error"]["code"] == status), (path, params, answer)
    status, loaded = await ws.call("GET", f"{SCHEMA}/tables/t")
    assert loaded["latest-table-version"] == 0 and loaded["metadata"]["etag"] == created["metadata"]["etag"]


async def test_concurrent_proposals_one_wins(ws):
    """Proposals for the same version, through both APIs at once: exactly one is ratified."""
    await setup(ws)
    created = await create_through_delta_api(ws, "race")
    md = created["metadata"]
    v1 = [ws.call("POST", f"{SCHEMA}/tables/race", json=update(md["table-uuid"], add_commit(1))) for _ in range(6)]
    preview = [ws.call("POST", "/delta/preview/commits", json={
        "table_id": md["table-uuid"], "table_uri": md["location"],
        "commit_info": {k.replace("-", "_"): v for k, v in commit(1).items()}}) for _ in range(6)]
    answers = await asyncio.gather(*v1, *preview)
    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] + [409] * 11, answers
    status, loaded = await ws.call("GET", f"{SCHEMA}/tables/race")
    assert loaded["latest-table-version"] == 1 and len(loaded["commits"]) == 1
