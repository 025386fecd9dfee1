"""Remote signing on S3, with moto playing the store (IAM enforced).

Remote signing: an S3-compatible store reached with static keys (an `s3_compatible` credential without a
role, as MinIO or R2 without STS), the table registered from a metadata file put there. A client that
accepts only remote signing (X-Iceberg-Access-Delegation: remote-signing) loads the table with
`s3.remote-signing-enabled` and no keys; pyiceberg's own S3V4RestSigner, registered on a boto3 S3 client
exactly as pyiceberg's FsspecFileIO registers it (s3fs itself is not installed here: it pins aiohttp and
botocore), has each request signed by the catalog and sent to moto. Reads need SELECT, writes MODIFY; keys
outside the table, other buckets, other hosts, sub-resources and dot segments are refused, however spelled.
"""

from __future__ import annotations

import asyncio

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError
from governance_users import grant, user
from pyiceberg.io.fsspec import S3V4RestSigner
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField
from test_storage_s3_compatible import auth_off, credential, no_ambient_aws, store  # noqa: F401

P = "/iceberg/v1/catalogs/main"
T = f"{P}/namespaces/s/tables/reg"
REMOTE = {"X-Iceberg-Access-Delegation": "remote-signing"}


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


@pytest.fixture
async def signed_table(ws, store, no_ambient_aws):
    """main.s.reg at s3://<bucket>/lake/reg, behind an s3_compatible credential with static keys."""
    b = store["bucket"]
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "minio", "s3_compatible": credential(store)})
    await ok(ws, "POST", "/external-locations", json={"name": "lake", "url": f"s3://{b}/lake", "credential_name": "minio"})
    location = f"s3://{b}/lake/reg"
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location)
    key = "lake/reg/metadata/00000-1.metadata.json"
    with auth_off(store):
        s3 = boto3.client("s3", endpoint_url=store["url"], region_name="us-east-1", aws_access_key_id="admin",
                          aws_secret_access_key="admin")
        s3.put_object(Bucket=b, Key=key, Body=metadata.model_dump_json().encode())
        s3.put_object(Bucket=b, Key="lake/reg/data/a.parquet", Body=b"inside")
        s3.put_object(Bucket=b, Key="lake/regx/secret", Body=b"a sibling's")
        s3.put_object(Bucket=b, Key="lake/free/f.csv", Body=b"outside")
    await ok(ws, "POST", f"{P}/namespaces/s/register", json={"name": "reg", "metadata-location": f"s3://{b}/{key}"})
    return {"bucket": b, "key": key, "url": store["url"]}


def signed_client(config: dict, token: str):
    """A boto3 S3 client whose requests pyiceberg's S3V4RestSigner has signed by the catalog."""
    # The properties pyiceberg hands its FileIO: the catalog's (its uri, the token) under the table's config.
    signer = S3V4RestSigner({"uri": config["s3.signer.uri"], "token": token, **config})
    client = boto3.client("s3", endpoint_url=config["s3.endpoint"], region_name=config["s3.region"],
                          config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"}))
    client.meta.events.register_last("before-sign.s3", signer)
    return client


async def run(fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


async def test_load_table_offers_remote_signing_and_no_keys(ws, signed_table):
    body = await ok(ws, "GET", T, headers=REMOTE)
    config = body["config"]
    assert config["s3.remote-signing-enabled"] == "true" and body["storage-credentials"] == []
    assert not any("secret" in k or "access-key" in k for k in config)
    assert config["s3.signer.uri"] == f"{ws.api}/iceberg" and config["s3.signer.endpoint"] == \
        "v1/catalogs/main/namespaces/s/tables/reg/sign"
    # Without the header (or offering vended credentials too, at a store whose keys cannot be scoped: signing).
    plain = await ok(ws, "GET", T)
    assert "s3.remote-signing-enabled" not in plain["config"]
    both = await ok(ws, "GET", T, headers={"X-Iceberg-Access-Delegation": "vended-credentials,remote-signing"})
    assert both["config"]["s3.remote-signing-enabled"] == "true"


async def test_pyiceberg_signer_reads_and_writes_inside_the_table(ws, signed_table):
    b = signed_table["bucket"]
    config = (await ok(ws, "GET", T, headers=REMOTE))["config"]
    s3 = signed_client(config, ws.token)
    body = await run(lambda: s3.get_object(Bucket=b, Key="lake/reg/data/a.parquet")["Body"].read())
    assert body == b"inside"
    await run(s3.put_object, Bucket=b, Key="lake/reg/data/b.parquet", Body=b"new")
    assert await run(lambda: s3.head_object(Bucket=b, Key="lake/reg/data/b.parquet")["ContentLength"]) == 3
    await run(s3.delete_object, Bucket=b, Key="lake/reg/data/b.parquet")
    with pytest.raises(ClientError):
        await run(s3.head_object, Bucket=b, Key="lake/reg/data/b.parquet")
    # A listing under the table is signed too (not sent here: moto 5 checks the signature of a listing whose
    # prefix holds '/' against another canonical query than botocore's, its own signed requests included).
    status, body = await sign(ws, f"{config['s3.endpoint']}/{b}?list-type=2&prefix=lake%2Freg%2Fdata%2F")
    assert status == 200 and body["headers"]["Authorization"]


async def sign(ws, uri: str, method: str = "GET", path: str = T, **extra):
    return await ws.call("POST", f"{path}/sign", json={"region": "us-east-1", "uri": uri, "method": method,
                                                       "headers": {"User-Agent": ["t"]}, **extra})


async def test_requests_outside_the_table_are_not_signed(ws, signed_table):
    b, url = signed_table["bucket"], signed_table["url"]
    host = url.split("://")[1]
    status, _ = await sign(ws, f"{url}/{b}/lake/reg/data/a.parquet")
    assert status == 200
    refused = [f"{url}/{b}/lake/free/f.csv", f"{url}/{b}/lake/regx/secret", f"{url}/{b}/lake/reg",
               f"{url}/{b}/lake/reg/../free/f.csv", f"{url}/{b}/lake/reg/%2E%2E/free/f.csv",
               f"{url}/{b}/lake/reg/data/..%2F..%2Ffree/f.csv", f"{url}/{b}/lake/reg//data/a.parquet",
               f"{url}/{b}/LAKE/REG/data/a.parquet", f"{url}/{b}/lake%2Freg%2F..%2Ffree%2Ff.csv",
               f"{url}/other-bucket/lake/reg/data/a.parquet", f"http://evil.example/{b}/lake/reg/data/a.parquet",
               f"https://{host}/{b}/lake/reg/data/a.parquet", f"{url}/{b}/lake/reg/data/a.parquet?acl",
               f"{url}/{b}?delete", f"{url}/{b}?list-type=2&prefix=lake/", f"{url}/{b}?list-type=2",
               f"http://user@{host}/{b}/lake/reg/data/a.parquet"]
    for uri in refused:
        status, body = await sign(ws, uri)
        assert status in (400, 403) and body["error"]["code"] == status, (uri, body)
    status, body = await sign(ws, f"{url}/{b}/lake/reg/data/a.parquet", provider="gcs")
    assert status == 400
    status, body = await sign(ws, f"{url}/{b}?delete", method="POST")
    assert status == 403


async def test_signing_follows_the_grants(ws, server, signed_table):
    b, url = signed_table["bucket"], signed_table["url"]
    inside = f"{url}/{b}/lake/reg/data/a.parquet"
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE_SCHEMA", "SELECT")
    status, _ = await sign(reader, inside)
    assert status == 200
    for method in ("PUT", "DELETE", "POST"):
        status, body = await sign(reader, inside, method=method)
        assert status == 403, (method, body)
    config = (await ok(reader, "GET", T, headers=REMOTE))["config"]
    s3 = signed_client(config, reader.token)
    with pytest.raises(Exception):          # pyiceberg's SignError: the catalog refused to sign the write
        await run(s3.put_object, Bucket=b, Key="lake/reg/data/c.parquet", Body=b"no")
    stranger = await user(server, ws)
    for path in (T, f"{P}/namespaces/S/tables/REG", f"{P}/namespaces/s/tables/r%65g"):
        status, body = await sign(stranger, inside, path=path)
        assert status == 404 and body["error"]["type"] == "NoSuchTableException", (path, body)
