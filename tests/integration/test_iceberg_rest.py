"""shardcat's Iceberg REST catalog over plain HTTP: config and the warehouse prefix, namespaces with
and without a warehouse, commits whose requirements fail (409 CommitFailedException, nothing
written), the multi-table transaction (all or nothing, one metastore write), register, external
locations and purge, views, grants, and Iceberg's error model."""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlparse

import boto3
import pytest
from governance_users import grant, user
from pyiceberg.catalog import load_catalog
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField
from test_vending import denied, lake, moto, session_policies_enforced, sts  # noqa: F401  (IAM, STS, S3 on loopback)

ICE = "/iceberg/v1"
P = f"{ICE}/catalogs/ice"          # the prefix the config hands out for warehouse 'ice'
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


async def metastore_version(server, ws) -> int:
    return (await server.store.get_metastore(ws.metastore_id)).version


@pytest.fixture
async def ice(ws):
    for path, body in (("/catalogs", {"name": "ice"}), ("/schemas", {"name": "s", "catalog_name": "ice"})):
        status, out = await ws.call("POST", path, json=body)
        assert status == 200, out
    return ws


async def create(ws, name: str, **extra) -> dict:
    status, body = await ws.call("POST", f"{P}/namespaces/s/tables", json={"name": name, "schema": SCHEMA, **extra})
    assert status == 200, body
    return body


async def table(ws, name: str) -> dict:
    status, body = await ws.call("GET", f"{P}/namespaces/s/tables/{name}")
    assert status == 200, body
    return body


def set_property(key: str, value: str) -> dict:
    return {"action": "set-properties", "updates": {key: value}}


async def test_config_hands_out_the_warehouse_prefix(ice):
    for base in ("/iceberg", "/iceberg-rest"):
        status, body = await ice.call("GET", f"{base}/v1/config", params={"warehouse": "ice"})
        assert status == 200, body
        assert body["overrides"] == {"prefix": "catalogs/ice"}
        assert "POST /v1/{prefix}/transactions/commit" in body["endpoints"]
        status, body = await ice.call("GET", f"{base}/v1/catalogs/ice/namespaces")
        assert (status, body) == (200, {"namespaces": [["default"], ["s"]]})     # default: every catalog's
    status, body = await ice.call("GET", f"{ICE}/config", params={"warehouse": "nope"})
    assert status == 404 and body["error"]["type"] == "NoSuchWarehouseException" and body["error"]["code"] == 404


async def test_namespaces_without_a_warehouse_are_catalogs_then_schemas(ws):
    status, body = await ws.call("POST", f"{ICE}/namespaces", json={"namespace": ["c2"], "properties": {"a": "1"}})
    assert status == 200, body
    status, body = await ws.call("POST", f"{ICE}/namespaces", json={"namespace": ["c2", "s2"],
                                                                     "properties": {"comment": "hi", "b": "2"}})
    assert status == 200, body
    status, body = await ws.call("GET", f"{ICE}/namespaces")
    assert ["c2"] in body["namespaces"]
    status, body = await ws.call("GET", f"{ICE}/namespaces", params={"parent": "c2"})
    assert body == {"namespaces": [["c2", "default"], ["c2", "s2"]]}
    status, body = await ws.call("GET", f"{ICE}/namespaces/c2\x1fs2")
    assert (status, body) == (200, {"namespace": ["c2", "s2"], "properties": {"b": "2", "comment": "hi"}})
    status, body = await ws.call("POST", f"{ICE}/namespaces/c2\x1fs2/properties",
                                 json={"updates": {"c": "3"}, "removals": ["b", "zz"]})
    assert (status, body) == (200, {"updated": ["c"], "removed": ["b"], "missing": ["zz"]})
    status, body = await ws.call("GET", "/schemas/c2.s2")
    assert body["properties"] == {"c": "3"}
    status, body = await ws.call("POST", f"{ICE}/namespaces", json={"namespace": ["c2", "s2"]})
    assert status == 409 and body["error"]["type"] == "AlreadyExistsException"
    status, body = await ws.call("POST", f"{ICE}/namespaces", json={"namespace": ["c2", "s2", "x"]})
    assert status == 400
    status, body = await ws.call("DELETE", f"{ICE}/namespaces/c2")
    assert status == 409 and body["error"]["type"] == "NamespaceNotEmptyException"
    # Tables live in two-level namespaces here.
    status, body = await ws.call("POST", f"{ICE}/namespaces/c2\x1fs2/tables", json={"name": "t", "schema": SCHEMA})
    assert status == 200, body
    status, body = await ws.call("GET", f"{ICE}/namespaces/c2\x1fs2/tables")
    assert body == {"identifiers": [{"namespace": ["c2", "s2"], "name": "t"}]}
    status, body = await ws.call("GET", f"{ICE}/namespaces/c2/tables")
    assert status == 404 and body["error"]["type"] == "NoSuchNamespaceException"


async def test_failed_requirements_are_409_and_write_nothing(ice, server):
    created = await create(ice, "t")
    before = await metastore_version(server, ice)
    for requirement in ({"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"},
                        {"type": "assert-current-schema-id", "current-schema-id": 7},
                        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}):
        status, body = await ice.call("POST", f"{P}/namespaces/s/tables/t",
                                      json={"requirements": [requirement], "updates": [set_property("k", "v")]})
        assert status == 409 and body["error"]["type"] == "CommitFailedException", body
    assert await metastore_version(server, ice) == before
    assert (await table(ice, "t"))["metadata-location"] == created["metadata-location"]

    uuid = created["metadata"]["table-uuid"]
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables/t", json={
        "requirements": [{"type": "assert-table-uuid", "uuid": uuid}], "updates": [set_property("k", "v")]})
    assert status == 200 and body["metadata"]["properties"]["k"] == "v", body
    assert body["metadata-location"] != created["metadata-location"]
    assert (await table(ice, "t"))["metadata-location"] == body["metadata-location"]
    status, row = await ice.call("GET", "/tables/ice.s.t")
    assert row["properties"]["previous_metadata_location"] == created["metadata-location"]
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables/t", json={"updates": [{"action": "nope"}]})
    assert status == 400 and body["error"]["type"] == "BadRequestException"


async def test_multi_table_transaction_is_all_or_nothing_in_one_write(ice, server):
    a, b = await create(ice, "a"), await create(ice, "b")

    def change(name, created, uuid=None):
        return {"identifier": {"namespace": ["s"], "name": name},
                "requirements": [{"type": "assert-table-uuid", "uuid": uuid or created["metadata"]["table-uuid"]}],
                "updates": [set_property("batch", "1")]}

    before = await metastore_version(server, ice)
    status, body = await ice.call("POST", f"{P}/transactions/commit", json={"table-changes": [
        change("a", a), change("b", b, uuid="00000000-0000-0000-0000-000000000000")]})
    assert status == 409 and body["error"]["type"] == "CommitFailedException", body
    assert await metastore_version(server, ice) == before
    for name, created in (("a", a), ("b", b)):
        loaded = await table(ice, name)
        assert loaded["metadata-location"] == created["metadata-location"]
        assert "batch" not in loaded["metadata"]["properties"]

    status, body = await ice.call("POST", f"{P}/transactions/commit",
                                  json={"table-changes": [change("a", a), change("b", b)]})
    assert status == 204, body
    assert await metastore_version(server, ice) == before + 1          # both pointers, one metastore write
    for name in ("a", "b"):
        assert (await table(ice, name))["metadata"]["properties"]["batch"] == "1"

    # A table the caller may not MODIFY refuses the whole transaction.
    writer = await user(server, ice)
    await grant(ice, "catalog", "ice", writer.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    await grant(ice, "table", "ice.s.a", writer.name, "MODIFY")
    before = await metastore_version(server, ice)
    changes = [{**change(name, created), "updates": [set_property("w", "1")]} for name, created in (("a", a), ("b", b))]
    status, body = await writer.call("POST", f"{P}/transactions/commit", json={"table-changes": changes})
    assert status == 403 and body["error"]["type"] == "ForbiddenException", body
    assert await metastore_version(server, ice) == before
    assert "w" not in (await table(ice, "a"))["metadata"]["properties"]


async def test_external_location_register_and_purge(ice, tmp_path):
    # Register reads only where the caller may read: inside an external location (test_attack_iceberg.py).
    await ice.call("POST", "/storage-credentials", json={"name": "cred", "aws_iam_role": {"role_arn": "arn:x"}})
    status, body = await ice.call("POST", "/external-locations", json={
        "name": "ext", "url": (tmp_path / "ext").as_uri(), "credential_name": "cred"})
    assert status == 200, body
    location = (tmp_path / "ext" / "t").as_uri()
    created = await create(ice, "ext", location=location)
    status, row = await ice.call("GET", "/tables/ice.s.ext")
    assert (row["table_type"], row["storage_location"].rstrip("/")) == ("EXTERNAL", location)
    # One asset per path: no second table inside it.
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables",
                                  json={"name": "inner", "schema": SCHEMA, "location": location + "/x"})
    assert status == 400 and "overlaps" in body["error"]["message"], body

    status, _ = await ice.call("DELETE", f"{P}/namespaces/s/tables/ext")      # no purge: the files stay
    assert status == 204
    metadata_file = urlparse(created["metadata-location"]).path
    assert os.path.exists(metadata_file)
    register = {"name": "back", "metadata-location": created["metadata-location"]}
    status, body = await ice.call("POST", f"{P}/namespaces/s/register", json=register)
    assert status == 200 and body["metadata-location"] == created["metadata-location"], body
    status, body = await ice.call("POST", f"{P}/namespaces/s/register", json=register)
    assert status == 409 and body["error"]["type"] == "AlreadyExistsException"
    status, body = await ice.call("POST", f"{P}/namespaces/s/register", json={
        "name": "none", "metadata-location": (tmp_path / "ext" / "nowhere" / "00000-x.metadata.json").as_uri()})
    assert status == 400 and "does not exist" in body["error"]["message"], body

    status, back = await ice.call("GET", "/tables/ice.s.back")
    status, _ = await ice.call("DELETE", f"{P}/namespaces/s/tables/back", params={"purgeRequested": "true"})
    assert status == 204
    status, body = await ice.call("GET", f"{P}/namespaces/s/tables/back")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException"
    # An EXTERNAL table's files are never deleted, purgeRequested or not (docs/versions.md): purged
    # now, only its history goes (a managed table's files go: test_attack_storage_deletes.py).
    assert os.path.exists(metadata_file)
    status, body = await ice.call("DELETE", f"/shardcat/dropped/{back['table_id']}")
    assert status == 200 and body["purged"] == 1 and body["storage_deleted"] == [], body
    assert os.path.exists(metadata_file)


async def test_views(ice):
    view = {"name": "v", "schema": SCHEMA, "properties": {"p": "1"}, "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT id FROM ice.s.t", "dialect": "spark"}],
        "default-namespace": ["s"]}}
    status, created = await ice.call("POST", f"{P}/namespaces/s/views", json=view)
    assert status == 200, created
    await create(ice, "t")
    status, body = await ice.call("GET", f"{P}/namespaces/s/views")
    assert body == {"identifiers": [{"namespace": ["s"], "name": "v"}]}
    status, body = await ice.call("GET", f"{P}/namespaces/s/tables")
    assert body == {"identifiers": [{"namespace": ["s"], "name": "t"}]}
    status, row = await ice.call("GET", "/tables/ice.s.v")
    assert (row["table_type"], row["view_definition"]) == ("VIEW", "SELECT id FROM ice.s.t")

    uuid = created["metadata"]["view-uuid"]
    replace = {"requirements": [{"type": "assert-view-uuid", "uuid": uuid}], "updates": [
        {"action": "add-view-version", "view-version": {
            "version-id": 2, "schema-id": 0, "timestamp-ms": 2, "summary": {},
            "representations": [{"type": "sql", "sql": "SELECT id + 1 AS id FROM ice.s.t", "dialect": "spark"}],
            "default-namespace": ["s"]}},
        {"action": "set-current-view-version", "view-version-id": -1}]}
    status, body = await ice.call("POST", f"{P}/namespaces/s/views/v", json=replace)
    assert status == 200 and body["metadata"]["current-version-id"] == 2, body
    status, loaded = await ice.call("GET", f"{P}/namespaces/s/views/v")
    assert loaded["metadata-location"] == body["metadata-location"]
    status, row = await ice.call("GET", "/tables/ice.s.v")
    assert row["view_definition"] == "SELECT id + 1 AS id FROM ice.s.t"
    status, body = await ice.call("POST", f"{P}/namespaces/s/views/v", json={
        **replace, "requirements": [{"type": "assert-view-uuid", "uuid": "x"}]})
    assert status == 409 and body["error"]["type"] == "CommitFailedException"
    status, body = await ice.call("GET", f"{P}/namespaces/s/views/t")
    assert status == 404 and body["error"]["type"] == "NoSuchViewException"
    status, _ = await ice.call("POST", f"{P}/views/rename", json={
        "source": {"namespace": ["s"], "name": "v"}, "destination": {"namespace": ["s"], "name": "w"}})
    assert status == 204
    status, body = await ice.call("GET", f"{P}/namespaces/s/views/v")
    assert status == 404
    status, _ = await ice.call("DELETE", f"{P}/namespaces/s/views/w")
    assert status == 204
    status, body = await ice.call("GET", f"{P}/namespaces/s/views")
    assert body == {"identifiers": []}


async def test_grants_decide_what_is_listed_and_loaded(ice, server):
    await create(ice, "t")
    await create(ice, "u")
    reader = await user(server, ice)
    await grant(ice, "catalog", "ice", reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ice, "table", "ice.s.u", reader.name, "SELECT")
    status, body = await reader.call("GET", f"{P}/namespaces/s/tables")
    assert body == {"identifiers": [{"namespace": ["s"], "name": "u"}]}
    status, body = await reader.call("GET", f"{P}/namespaces/s/tables/t")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException", body     # unseen: as if missing
    await grant(ice, "table", "ice.s.t", reader.name, "MODIFY")
    status, body = await reader.call("GET", f"{P}/namespaces/s/tables/t")
    assert status == 403 and body["error"]["type"] == "ForbiddenException" and "SELECT" in body["error"]["message"]
    status, body = await reader.call("GET", f"{P}/namespaces/s/tables/u")
    assert status == 200
    status, body = await reader.call("POST", f"{P}/namespaces/s/tables", json={"name": "new", "schema": SCHEMA})
    assert status == 403 and "CREATE TABLE" in body["error"]["message"], body


async def test_a_delta_table_is_not_an_iceberg_table(ice):
    status, body = await ice.call("POST", "/tables", json={
        "name": "d", "catalog_name": "ice", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": []})
    assert status == 200, body
    status, body = await ice.call("GET", f"{P}/namespaces/s/tables/d")
    assert status == 404 and "not an Iceberg table" in body["error"]["message"]
    # A table in a missing namespace is a missing table, as in Iceberg's reference catalog, in its words.
    status, body = await ice.call("GET", f"{P}/namespaces/Nope/tables/D")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException", body
    assert body["error"]["message"] == "Table does not exist: Nope.D", body


async def test_a_table_deeper_than_a_schema_is_a_missing_table(ice):
    """Iceberg's Java client loads `s.t.snapshots` as t's metadata table only after the catalog says the
    table `snapshots` in namespace `s.t` does not exist (NoSuchTableException, not a namespace error)."""
    await create(ice, "t")
    for method, kind, path in (("GET", "Table", "tables/snapshots"), ("HEAD", None, "tables/files"),
                               ("GET", "View", "views/snapshots")):
        status, body = await ice.call(method, f"{P}/namespaces/s\x1ft/{path}")
        assert status == 404, (path, body)
        if kind:
            assert body["error"]["type"] == f"NoSuch{kind}Exception", body
    status, body = await ice.call("POST", f"{P}/namespaces/s\x1ft/tables", json={"name": "x", "schema": SCHEMA})
    assert status == 404 and body["error"]["type"] == "NoSuchNamespaceException"      # creating there still says why


async def test_pyiceberg_through_the_databricks_path(ice):
    def work():
        cat = load_catalog("x", type="rest", uri=f"{ice.api}/iceberg-rest", warehouse="ice", token=ice.token)
        cat.create_table("s.viadbx", Schema(NestedField(1, "id", LongType(), required=False)))
        return cat.list_tables("s")
    assert await asyncio.to_thread(work) == [("s", "viadbx")]


async def test_concurrent_commits_are_serialized(ice):
    created = await create(ice, "t")
    uuid = created["metadata"]["table-uuid"]

    async def commit(i: int):
        return await ice.call("POST", f"{P}/namespaces/s/tables/t", json={
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid}], "updates": [set_property(f"k{i}", "v")]})

    # Eight writers at once, each based on the same metadata: each is redone on the one before it.
    answers = await asyncio.gather(*(commit(i) for i in range(8)))
    assert [status for status, _ in answers] == [200] * 8, answers
    loaded = await table(ice, "t")
    assert {f"k{i}" for i in range(8)} <= set(loaded["metadata"]["properties"])
    assert len(loaded["metadata"]["metadata-log"]) == 8          # eight metadata files, one after another
    assert len({body["metadata-location"] for _, body in answers}) == 8

    # Requirements that cannot both hold: of two appends based on the same (no) snapshot, one wins.
    snapshot = {"snapshot-id": 11, "sequence-number": 1, "timestamp-ms": 1,
                "manifest-list": f"{created['metadata']['location']}/metadata/none.avro",     # the table's own
                "summary": {"operation": "append"}, "schema-id": 0}

    async def append(snapshot_id: int):
        return await ice.call("POST", f"{P}/namespaces/s/tables/t", json={
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
            "updates": [{"action": "add-snapshot", "snapshot": {**snapshot, "snapshot-id": snapshot_id}},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": snapshot_id}]})
    answers = await asyncio.gather(append(11), append(12))
    assert sorted(status for status, _ in answers) == [200, 409], answers


# ---- s3:// storage: the catalog reads with, and hands out, vended down-scoped credentials --------------


async def test_s3_table_config_carries_vended_credentials(ws, server, sts, monkeypatch):
    """moto plays IAM, STS and S3 with IAM enforced. The table's first metadata file is put there with
    the role's own keys; shardcat registers it, reading it with keys it vends for the table's prefix,
    and hands the caller keys for that prefix only, read-write with MODIFY, read-only with SELECT.
    (Writing metadata to moto's S3 through pyarrow is not tested: pyarrow 26's S3 client and moto 5
    disagree on multipart uploads and on signing listings.)"""
    monkeypatch.setenv("SHARDCAT_S3_ENDPOINT", sts["url"])
    b = sts["bucket"]
    await lake(ws, sts)                         # catalog main, schema s, external location s3://<b>/data (a role)
    location = f"s3://{b}/data/reg"
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location)
    key = "data/reg/metadata/00000-1.metadata.json"
    role = boto3.client("sts", endpoint_url=sts["url"], region_name="us-east-1",
                        aws_access_key_id=sts["key"]["AccessKeyId"],
                        aws_secret_access_key=sts["key"]["SecretAccessKey"]).assume_role(
        RoleArn=sts["role"], RoleSessionName="setup")["Credentials"]
    s3(sts, role["AccessKeyId"], role["SecretAccessKey"], role["SessionToken"]).put_object(
        Bucket=b, Key=key, Body=metadata.model_dump_json().encode())

    status, body = await ws.call("POST", "/iceberg/v1/catalogs/main/namespaces/s/register",
                                 json={"name": "reg", "metadata-location": f"s3://{b}/{key}"})
    assert status == 200, body
    assert body["metadata"]["table-uuid"] == str(metadata.table_uuid)
    (credential,) = body["storage-credentials"]
    config = credential["config"]
    assert credential["prefix"] == location and config["s3.endpoint"] == sts["url"] and config == body["config"]
    mine = s3(sts, config["s3.access-key-id"], config["s3.secret-access-key"], config["s3.session-token"])
    assert mine.get_object(Bucket=b, Key=key)["Body"].read()
    mine.put_object(Bucket=b, Key="data/reg/data/x", Body=b"x")        # the owner may MODIFY: read-write keys
    assert denied(lambda: mine.get_object(Bucket=b, Key="data/t1/part-0.parquet"))

    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    status, body = await reader.call("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/reg")
    assert status == 200, body
    config = body["config"]
    theirs = s3(sts, config["s3.access-key-id"], config["s3.secret-access-key"], config["s3.session-token"])
    assert theirs.get_object(Bucket=b, Key=key)["Body"].read()
    assert denied(lambda: theirs.put_object(Bucket=b, Key="data/reg/data/y", Body=b"y"))


def s3(fake_aws, key_id: str, secret: str, token: str):
    return boto3.client("s3", endpoint_url=fake_aws["url"], region_name="us-east-1", aws_access_key_id=key_id,
                        aws_secret_access_key=secret, aws_session_token=token)


async def test_no_file_is_written_or_read_where_no_new_table_could_be(ice, server, tmp_path):
    """A location inside another table's storage, or a managed root, is refused before the catalog
    writes metadata there (create, stage-create, views) or reads it (register)."""
    other = await create(ice, "other")
    inside = other["metadata"]["location"] + "/sub"
    status, row = await ice.call("GET", "/tables/ice.s.other")
    root = row["storage_location"].rsplit("/tables/", 1)[0]
    for body in ({"name": "a", "schema": SCHEMA, "location": inside},
                 {"name": "b", "schema": SCHEMA, "location": inside, "stage-create": True},
                 {"name": "c", "schema": SCHEMA, "location": root + "/elsewhere"}):
        status, answer = await ice.call("POST", f"{P}/namespaces/s/tables", json=body)
        assert status == 400 and "overlaps" in answer["error"]["message"], (body, answer)
    assert not os.path.exists(urlparse(inside).path)
    status, answer = await ice.call("POST", f"{P}/namespaces/s/register", json={
        "name": "r", "metadata-location": other["metadata-location"]})
    assert status == 400 and "overlaps" in answer["error"]["message"], answer
    # A user with CREATE TABLE but no CREATE EXTERNAL TABLE on the external location: refused first.
    await ice.call("POST", "/storage-credentials", json={"name": "cred", "aws_iam_role": {"role_arn": "arn:x"}})
    ext = str(tmp_path / "ext")
    status, body = await ice.call("POST", "/external-locations", json={
        "name": "ext", "url": f"file://{ext}", "credential_name": "cred"})
    assert status == 200, body
    maker = await user(server, ice)
    await grant(ice, "catalog", "ice", maker.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    status, body = await maker.call("POST", f"{P}/namespaces/s/tables",
                                    json={"name": "d", "schema": SCHEMA, "location": f"file://{ext}/d"})
    assert status == 403 and "CREATE EXTERNAL TABLE" in body["error"]["message"], body
    assert not os.path.exists(f"{ext}/d")
    await grant(ice, "external_location", "ext", maker.name, "CREATE EXTERNAL TABLE")
    status, body = await maker.call("POST", f"{P}/namespaces/s/tables",
                                    json={"name": "d", "schema": SCHEMA, "location": f"file://{ext}/d"})
    assert status == 200, body


async def test_the_metadata_pointer_moves_only_through_the_iceberg_catalog(ice, tmp_path):
    """Through the Unity Catalog API no table gets a metadata pointer (it names a file the catalog would
    read as metadata), and an update keeps an Iceberg table's pointer and format."""
    elsewhere = (tmp_path / "other.metadata.json").as_uri()
    status, body = await ice.call("POST", "/tables", json={
        "name": "forged", "catalog_name": "ice", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "ICEBERG", "columns": [], "storage_location": (tmp_path / "forged").as_uri(),
        "properties": {"metadata_location": elsewhere}})
    assert status == 400 and "metadata_location" in body["message"], body
    created = await create(ice, "t")
    status, body = await ice.call("PATCH", "/tables/ice.s.t", json={"properties": {"metadata_location": elsewhere}})
    assert status == 400 and "metadata_location" in body["message"], body
    status, body = await ice.call("PATCH", "/tables/ice.s.t", json={"data_source_format": "DELTA"})
    assert status == 400, body
    # A properties map without the pointer keeps it; the table stays an Iceberg table.
    status, body = await ice.call("PATCH", "/tables/ice.s.t", json={"properties": {"team": "a"}, "comment": "c"})
    assert status == 200 and body["properties"] == {"team": "a", "metadata_location": created["metadata-location"]}
    assert (await table(ice, "t"))["metadata-location"] == created["metadata-location"]
    status, body = await ice.call("POST", "/tables", json={
        "name": "d", "catalog_name": "ice", "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
        "columns": []})
    status, body = await ice.call("PATCH", "/tables/ice.s.d", json={
        "data_source_format": "ICEBERG", "properties": {"metadata_location": elsewhere}})
    assert status == 400 and "metadata_location" in body["message"], body


async def test_the_audit_log_names_iceberg_operations(ice):
    created = await create(ice, "t")
    status, _ = await ice.call("POST", f"{P}/namespaces/s/tables/t", json={
        "requirements": [{"type": "assert-table-uuid", "uuid": created["metadata"]["table-uuid"]}],
        "updates": [set_property("k", "v")]})
    assert status == 200
    status, body = await ice.call("GET", "/shardcat/audit", params={
        "metastore_id": ice.metastore_id, "action": "icebergUpdateTable"})
    assert status == 200, body
    assert [(e["securable_type"], e["securable_full_name"], e["allowed"]) for e in body["events"]] == \
        [("TABLE", "ice.s.t", True)]
