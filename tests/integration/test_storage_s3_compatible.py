"""S3-compatible stores (open-source Unity Catalog issue 43): the `s3_compatible` storage credential.

moto's server on loopback plays the store (MinIO, R2), with IAM enforced: its only key is an IAM
user limited to one bucket, held by the credential. shardcat's own AWS identity is a key moto does
not know and no S3 or STS endpoint is configured, so whatever works here works through the
credential's endpoint and keys: vended static keys (a store without STS), down-scoped keys from
the store's own STS (`role_arn`), GET /files, and the Delta client with vended credentials.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid

import boto3
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError

from governance_users import grant, user
from shardcat.delta.client import DeltaCatalogClient
from shardcat.web.store_endpoints import ENV
from test_vending import ALLOW_ALL, TRUST_ANYONE, ok, session_policies_enforced  # noqa: F401

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '"long"', "position": 0}]


@contextlib.contextmanager
def listed_endpoint(netloc: str):
    """The operator lists `netloc` (host:port) in $SHARDCAT_S3_COMPATIBLE_ENDPOINTS while the block runs
    (web/store_endpoints.py): the catalog calls no store on loopback otherwise."""
    before = os.environ.get(ENV)
    os.environ[ENV] = ",".join(v for v in (before, netloc) if v)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


@pytest.fixture(scope="module")
def store():
    """A moto server as an S3-compatible store: a bucket, a key limited to it (S3 on the bucket,
    and AssumeRole for the STS variant), and a role for that STS."""
    from moto.server import ThreadedMotoServer
    import requests
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    admin = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "admin",
             "aws_secret_access_key": "admin"}
    suffix = uuid.uuid4().hex[:8]
    bucket = f"minio-{suffix}"
    iam = boto3.client("iam", **admin)
    role = iam.create_role(RoleName=f"store-role-{suffix}", AssumeRolePolicyDocument=TRUST_ANYONE)["Role"]["Arn"]
    iam.put_role_policy(RoleName=f"store-role-{suffix}", PolicyName="all", PolicyDocument=ALLOW_ALL)
    iam.create_user(UserName=f"store-key-{suffix}")
    iam.put_user_policy(UserName=f"store-key-{suffix}", PolicyName="bucket", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]},
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}))
    key = iam.create_access_key(UserName=f"store-key-{suffix}")["AccessKey"]
    s3 = boto3.client("s3", **admin)
    s3.create_bucket(Bucket=bucket)
    s3.create_bucket(Bucket=f"other-{suffix}")
    s3.put_object(Bucket=f"other-{suffix}", Key="x", Body=b"not the key's")
    s3.put_object(Bucket=bucket, Key="lake/free/f.csv", Body=b"a,b\n")
    requests.post(f"{url}/moto-api/reset-auth", data=b"0").raise_for_status()   # from now on: IAM enforced
    with listed_endpoint(f"{host}:{port}"):    # on loopback: the catalog calls it only because it is listed
        yield {"url": url, "bucket": bucket, "other": f"other-{suffix}", "role": role,
               "access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
    requests.post(f"{url}/moto-api/reset-auth", data=b"inf").raise_for_status()
    server.stop()


@contextlib.contextmanager
def auth_off(store):
    import requests
    requests.post(f"{store['url']}/moto-api/reset-auth", data=b"inf").raise_for_status()
    try:
        yield
    finally:
        requests.post(f"{store['url']}/moto-api/reset-auth", data=b"0").raise_for_status()


@pytest.fixture
def no_ambient_aws(monkeypatch):
    """shardcat's own identity: a key the store does not know; no STS or S3 endpoint configured."""
    for name in ("SHARDCAT_STS_ENDPOINT", "SHARDCAT_S3_ENDPOINT", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSHARDCATNOBODY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-key-the-store-knows")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def credential(store, **extra) -> dict:
    return {"endpoint_url": store["url"] + "/", "access_key_id": store["access_key_id"],
            "secret_access_key": store["secret_access_key"], **extra}


async def lake(ws, store, **extra) -> dict:
    """Catalog, schema, the s3_compatible credential, a location over lake/, external table t."""
    b = store["bucket"]
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "minio", "s3_compatible": credential(store, **extra)})
    await ok(ws, "POST", "/external-locations", json={"name": "lake", "url": f"s3://{b}/lake",
                                                      "credential_name": "minio"})
    return await ok(ws, "POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": f"s3://{b}/lake/t"})


def filesystem(answer: dict) -> pafs.S3FileSystem:
    """What an engine builds from a vended answer: pyarrow's S3 at the vended endpoint."""
    c = answer["aws_temp_credentials"]
    scheme, host = answer["endpoint_url"].split("://")
    return pafs.S3FileSystem(access_key=c["access_key_id"], secret_key=c["secret_access_key"],
                             session_token=c.get("session_token"), endpoint_override=host, scheme=scheme,
                             region=answer["region"], force_virtual_addressing=not answer["path_style_access"],
                             allow_delayed_open=True)   # one PutObject: moto fails pyarrow's multipart completion


def boto(answer: dict):
    c = answer["aws_temp_credentials"]
    return boto3.client("s3", endpoint_url=answer["endpoint_url"], region_name=answer["region"],
                        aws_access_key_id=c["access_key_id"], aws_secret_access_key=c["secret_access_key"],
                        aws_session_token=c.get("session_token"))


def no_secret_in(value) -> bool:
    return "secret_access_key" not in json.dumps(value)


async def test_the_credential_keeps_its_secret(ws, server, store):
    body = {"name": "minio", "s3_compatible": credential(store, region="auto")}
    made = await ok(ws, "POST", "/credentials", json=body)
    assert made["s3_compatible"] == {"endpoint_url": store["url"], "access_key_id": store["access_key_id"],
                                     "region": "auto", "path_style_access": True}
    listed = await ok(ws, "GET", "/credentials")
    shown = [await ok(ws, "GET", "/credentials/minio"), await ok(ws, "GET", "/storage-credentials/minio"),
             listed, await ok(ws, "GET", "/storage-credentials")]
    assert all(no_secret_in(v) for v in shown) and no_secret_in(made)
    # An update naming the kind keeps the secret it leaves out (vending below still works).
    patched = await ok(ws, "PATCH", "/credentials/minio",
                       json={"s3_compatible": {"path_style_access": False}, "comment": "c"})
    assert patched["s3_compatible"]["path_style_access"] is False and no_secret_in(patched)
    assert patched["s3_compatible"]["access_key_id"] == store["access_key_id"]
    # Sealed at rest (store/sealing.py), like the other kinds' secrets.
    stored = json.loads(await server.store.pool.fetchval(
        "SELECT info::text FROM assets WHERE metastore_id = $1 AND type = 'credential' AND name = 'minio'",
        uuid.UUID(ws.metastore_id)))["s3_compatible"]["secret_access_key"]
    assert stored.startswith("sealed:v1:") and store["secret_access_key"] not in stored
    assert server.store.secrets.open(stored) == store["secret_access_key"]


@pytest.mark.parametrize("fields, word", [
    ({"endpoint_url": "ftp://minio:9000"}, "http"),
    ({"endpoint_url": "http://minio:9000/bucket"}, "no path"),
    ({"endpoint_url": "http://:9000"}, "host"),
    ({"endpoint_url": "http://minio:99999"}, "valid URL"),
    ({"path_style_access": "yes"}, "true or false"),
    ({"secret_access_key": None}, "secret_access_key"),
    ({"access_key_id": 7}, "access_key_id"),
    ({"role_arn": "store-role"}, "ARN"),
])
async def test_bad_credentials_are_refused(ws, fields, word):
    body = {"endpoint_url": "http://minio:9000", "access_key_id": "k", "secret_access_key": "s", **fields}
    body = {k: v for k, v in body.items() if v is not None}
    status, answer = await ws.call("POST", "/storage-credentials", json={"name": "bad", "s3_compatible": body})
    assert (status, answer["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), answer
    assert word in answer["message"], answer
    status, _ = await ws.call("GET", "/storage-credentials/bad")
    assert status == 404


async def test_static_keys_are_vended_with_the_endpoint(ws, server, store, no_ambient_aws):
    b = store["bucket"]
    table = await lake(ws, store)
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert answer["url"] == f"s3://{b}/lake/t"
    assert (answer["endpoint_url"], answer["region"], answer["path_style_access"]) == (store["url"], "us-east-1", True)
    assert answer["aws_temp_credentials"] == {"access_key_id": store["access_key_id"],
                                              "secret_access_key": store["secret_access_key"]}
    # An engine writes and reads the table's files with what it was handed, and nothing else.
    fs = filesystem(answer)
    pq.write_table(pa.table({"id": [1, 2, 3]}), f"{b}/lake/t/part-0.parquet", filesystem=fs)
    assert pq.read_table(f"{b}/lake/t/part-0.parquet", filesystem=fs).column("id").to_pylist() == [1, 2, 3]
    assert boto(answer).get_object(Bucket=b, Key="lake/t/part-0.parquet")["ContentLength"] > 0
    # GET /files lists at the location's credential's endpoint (no other is configured). moto
    # miscomputes the signature of a listing with Delimiter=/, so it checks no keys meanwhile.
    with auth_off(store):
        files = await ok(ws, "GET", "/files", params={"url": f"s3://{b}/lake/t"})
        assert [(f["name"], f["is_dir"]) for f in files["files"]] == [("part-0.parquet", False)]
        assert [f["name"] for f in (await ok(ws, "GET", "/files", params={"url": f"s3://{b}/lake"}))["files"]] == \
            ["free", "t"]
    # The grants decide first: without SELECT, no keys (a table bob may not see answers as missing).
    bob = await user(server, ws)
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG", "USE SCHEMA")
    status, body = await bob.call("POST", "/temporary-table-credentials",
                                  json={"table_id": table["table_id"], "operation": "READ"})
    assert (status, body["error_code"]) == (404, "NOT_FOUND") and "aws_temp_credentials" not in body
    await grant(ws, "table", "main.s.t", bob.name, "BROWSE")
    status, body = await bob.call("POST", "/temporary-table-credentials",
                                  json={"table_id": table["table_id"], "operation": "READ"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and "aws_temp_credentials" not in body
    status, body = await bob.call("GET", "/files", params={"url": f"s3://{b}/lake/t"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")
    await grant(ws, "table", "main.s.t", bob.name, "SELECT")
    answer = await ok(bob, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ"})
    assert pq.read_table(f"{b}/lake/t/part-0.parquet", filesystem=filesystem(answer)).num_rows == 3
    # Batched resolve carries the same answer.
    resolved = await ok(bob, "POST", "/resolve", json={"items": [{"name": "main.s.t"}]})
    assert resolved["items"][0]["temporary_credentials"]["endpoint_url"] == store["url"]


async def test_a_read_only_location_vends_no_write_keys(ws, store, no_ambient_aws):
    table = await lake(ws, store)
    await ok(ws, "PATCH", "/external-locations/lake", json={"read_only": True})
    status, body = await ws.call("POST", "/temporary-table-credentials",
                                 json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body


async def test_the_stores_sts_vends_keys_scoped_to_the_table(ws, store, no_ambient_aws, session_policies_enforced):
    b = store["bucket"]
    table = await lake(ws, store, role_arn=store["role"])
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    c = answer["aws_temp_credentials"]
    assert c["access_key_id"] != store["access_key_id"] and c["session_token"]
    assert answer["endpoint_url"] == store["url"]
    s3 = boto(answer)
    s3.put_object(Bucket=b, Key="lake/t/part-1.parquet", Body=b"x")
    assert s3.get_object(Bucket=b, Key="lake/t/part-1.parquet")["Body"].read() == b"x"
    for key in ("lake/free/f.csv", "lake/t-old/x"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=b, Key=key)
        assert e.value.response["Error"]["Code"] == "AccessDenied", key
    # The static key itself cannot reach another bucket: the store limits it, as the docs ask.
    with pytest.raises(ClientError):
        boto({**answer, "aws_temp_credentials": {"access_key_id": store["access_key_id"],
                                                 "secret_access_key": store["secret_access_key"]}}
             ).get_object(Bucket=store["other"], Key="x")


async def test_delta_client_reads_and_writes_through_vended_credentials(ws, store, no_ambient_aws):
    b = store["bucket"]
    # The Delta client lists _delta_log, which moto cannot check keys for (see above): the store
    # takes any key meanwhile, and only the vended endpoint leads to it.
    with auth_off(store):
        await lake(ws, store)
        await ok(ws, "POST", "/catalogs", json={"name": "managed", "storage_root": f"s3://{b}/lake/managed"})
        await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "managed"})
        schema = pa.schema([("id", pa.int64())])
        async with DeltaCatalogClient(ws.api, ws.token, vend_credentials=True) as delta:
            # Version 0 goes to the staging location with the keys vended for the staging table.
            await delta.create_table("managed.s.events", schema)
            table = await delta.table("managed.s.events")
            assert table.credentials["endpoint_url"] == store["url"]
            assert await delta.append("managed.s.events", pa.table({"id": [1, 2]})) == 1
            assert await delta.append(table, pa.table({"id": [3]})) == 2
            assert sorted((await delta.read("managed.s.events")).column("id").to_pylist()) == [1, 2, 3]
        async with DeltaCatalogClient(ws.api, ws.token) as plain:     # without them pyarrow has neither the endpoint nor the keys
            with pytest.raises(OSError):
                await plain.read("managed.s.events")


async def test_staging_table_credentials_are_for_who_may_create_the_table(ws, server):
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    bob = await user(server, ws)
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    staging = await ok(bob, "POST", "/staging-tables", json={"name": "new", "catalog_name": "main", "schema_name": "s"})
    answer = await ok(bob, "POST", "/temporary-table-credentials",
                      json={"table_id": staging["id"], "operation": "READ_WRITE"})
    assert answer["url"] == staging["staging_location"]
    await grant(ws, "catalog", "main", bob.name, remove=["CREATE TABLE"])
    status, body = await bob.call("POST", "/temporary-table-credentials",
                                  json={"table_id": staging["id"], "operation": "READ_WRITE"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body


async def test_a_secret_in_the_wrong_shape_is_not_echoed(ws):
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY-not-shown"
    for value in (secret, [secret], {"endpoint_url": "http://minio:9000", "access_key_id": "k",
                                     "secret_access_key": [secret]}):
        status, answer = await ws.call("POST", "/storage-credentials", json={"name": "bad", "s3_compatible": value})
        assert (status, answer["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), answer
        assert secret not in json.dumps(answer), answer
