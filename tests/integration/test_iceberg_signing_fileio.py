"""pyiceberg's own S3 FileIO through shardcat's remote signer, against moto's S3 server (IAM enforced).

The store is S3-compatible with static keys the catalog holds (an `s3_compatible` credential, as MinIO or R2
without STS); the client has none. pyiceberg 0.12 loads the table asking for remote signing, takes the FileIO
and signer the table's config names (`py-io-impl` FsspecFileIO, `s3.remote-signing-enabled`, `s3.signer.uri`,
`s3.signer.endpoint`), and writes (data files, manifests) and reads every object through requests the catalog
signed. It runs in a child process (pyiceberg_signed_calls.py), in a virtual environment of its own, made once and
kept under ~/.cache/shardcat-tests: s3fs, which FsspecFileIO needs, pins fsspec, and through aiobotocore botocore
and aiohttp, to other versions than the suite's (s3fs 2026.9: botocore 1.43.115-117, aiohttp 3.14).
Attacks, through pyiceberg's own FileIO and by hand: a reader with SELECT only writes nothing; keys outside the
table and another table's keys are not signed; methods other than an object read, write or delete are refused,
and a signature for one method does not carry another.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import boto3
import pytest
import requests
from governance_users import grant, user
from test_iceberg_signing import P, ok, sign, signed_table  # noqa: F401
from test_storage_s3_compatible import auth_off, no_ambient_aws, store  # noqa: F401

SCRIPT = os.path.join(os.path.dirname(__file__), "pyiceberg_signed_calls.py")
PACKAGES = ["pyiceberg[s3fs,pyarrow]==0.12.0", "s3fs==2026.9.0"]      # the versions tested
VENV = Path(os.environ.get("SHARDCAT_TEST_CACHE", Path.home() / ".cache" / "shardcat-tests")) / "pyiceberg-s3fs-0.12.0"


def _client_python() -> str:
    """The Python of a virtual environment with pyiceberg 0.12 and s3fs as their users install them; made once."""
    python = VENV / "bin" / "python"
    probe = [str(python), "-c", "import pyiceberg.io.fsspec, s3fs, pyarrow"]
    if not python.exists() or subprocess.run(probe, capture_output=True).returncode != 0:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], check=True, timeout=900)
        subprocess.run(probe, check=True)
    return str(python)


@pytest.fixture(scope="module")
async def client_python() -> str:
    return await asyncio.to_thread(_client_python)


@pytest.fixture(scope="module", autouse=True)
def moto_as_s3_answers():
    """Two answers of moto 5.2's S3 server that differ from S3's, made S3's for this module (its moto runs in this
    process); both are on the catalog's own path, which writes a table's metadata with pyarrow's S3 client:
    - moto checks a signature over the query string as the client sent it; S3 over SigV4's canonical query
      (each name and value decoded, then encoded leaving only unreserved characters: '/' is %2F). pyarrow sends a
      listing's `prefix=a/b/` with '/' raw (botocore with %2F), so moto refuses the listing pyarrow makes to see
      that a metadata file does not exist yet before writing it.
    - moto answers CompleteMultipartUpload in a `CompleteMultipartUploadResponse` element; S3 in
      `CompleteMultipartUploadResult`, which the AWS C++ SDK in pyarrow reads (else: "error embedded in a 200 OK
      response"), so every file pyarrow writes to moto fails.
    Nothing else of moto's checks changes (the signature is still checked, IAM still enforced)."""
    from moto.iam.access_control import IAMRequestBase
    from moto.s3.responses import S3Response

    original, post = IAMRequestBase._create_aws_request, S3Response._key_response_post

    def completed(self, *args, **kwargs):
        status, headers, body = post(self, *args, **kwargs)
        if isinstance(body, str) and "<CompleteMultipartUploadResponse " in body[:200]:
            body = body.replace("CompleteMultipartUploadResponse", "CompleteMultipartUploadResult")
        return status, headers, body

    def canonical(self):
        request = original(self)
        parts = urlsplit(request.url)
        if parts.query:
            pairs = [pair.partition("=") for pair in parts.query.split("&")]
            request.url = urlunsplit(parts._replace(query="&".join(
                f"{quote(unquote(k), safe='-_.~')}={quote(unquote(v), safe='-_.~')}" for k, _, v in pairs)))
        return request

    IAMRequestBase._create_aws_request, S3Response._key_response_post = canonical, completed
    yield
    IAMRequestBase._create_aws_request, S3Response._key_response_post = original, post


async def pyiceberg(python: str, caller, steps: list[dict], name: str = "s.reg") -> list[dict]:
    """pyiceberg's steps on `name` as `caller`, in the child: [the FileIO it got, then each step's outcome]."""
    # No S3 keys, no AWS configuration, no instance metadata: whatever reaches the store was signed by the catalog.
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
    proc = await asyncio.create_subprocess_exec(
        python, SCRIPT, f"{caller.api}/iceberg", caller.token, "main", name, json.dumps(steps),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


def objects(store, prefix: str) -> set[str]:
    with auth_off(store):
        s3 = boto3.client("s3", endpoint_url=store["url"], region_name="us-east-1", aws_access_key_id="admin",
                          aws_secret_access_key="admin")
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=store["bucket"], Prefix=prefix)
        return {o["Key"] for page in pages for o in page.get("Contents", [])}


async def signed(ws, principal: str) -> int:
    status, body = await ws.call("GET", "/shardcat/audit", params={
        "metastore_id": ws.metastore_id, "principal": principal, "action": "icebergSignRequest"})
    assert status == 200, body
    return len([e for e in body["events"] if e["allowed"]])


async def test_pyiceberg_writes_and_reads_through_the_signer(ws, store, signed_table, client_python):
    b = signed_table["bucket"]
    before = objects(store, "lake/reg/")
    io, appended, read, again = await pyiceberg(client_python, ws, [
        {"action": "append", "ids": [1, 2, 3]}, {"action": "read"}, {"action": "append", "ids": [4]}])
    assert io["ok"] == {"io": "FsspecFileIO", "keys": [], "signing": "true"}, io
    assert "ok" in appended, json.dumps(appended)
    assert appended["ok"]["files"] and all(f.startswith(f"s3://{b}/lake/reg/data/") for f in appended["ok"]["files"])
    assert read == {"ok": [1, 2, 3]}, json.dumps(read)
    assert "ok" in again, json.dumps(again)   # a failure names the S3 requests sent
    written = objects(store, "lake/reg/") - before
    assert {f"lake/reg/data/{f.rsplit('/', 1)[1]}" for f in appended["ok"]["files"]} <= written
    assert any(k.startswith("lake/reg/metadata/") and k.endswith(".avro") for k in written)   # manifests, by the client
    [_, after] = await pyiceberg(client_python, ws, [{"action": "read"}])
    assert after == {"ok": [1, 2, 3, 4]}, json.dumps(after)
    assert await signed(ws, "admin") >= 6                   # every object went through the catalog's signer


async def test_a_reader_with_select_only_reads_and_writes_nothing(ws, server, store, signed_table, client_python):
    b = signed_table["bucket"]
    [_, seeded] = await pyiceberg(client_python, ws, [{"action": "append", "ids": [7]}])
    assert "ok" in seeded, json.dumps(seeded)
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE_SCHEMA", "SELECT")
    before = objects(store, "lake/")
    io, read, appended, put, outside, sibling = await pyiceberg(client_python, reader, [
        {"action": "read"}, {"action": "append", "ids": [8]},
        {"action": "put", "path": f"s3://{b}/lake/reg/data/mine.parquet"},
        {"action": "get", "path": f"s3://{b}/lake/free/f.csv"},
        {"action": "get", "path": f"s3://{b}/lake/regx/secret"}])
    assert io["ok"]["keys"] == [] and read == {"ok": [7]}, (io, read)
    for refused in (appended, put, outside, sibling):           # the catalog refused to sign (pyiceberg's SignError)
        assert refused.get("failed") == "SignError" and "Failed to sign request 403" in refused["message"], refused
    assert objects(store, "lake/") == before                  # nothing written, by data file or by hand
    [_, after] = await pyiceberg(client_python, ws, [{"action": "read"}])
    assert after == {"ok": [7]}


async def test_another_tables_keys_and_other_methods_are_not_signed(ws, server, store, signed_table):
    b, url = signed_table["bucket"], signed_table["url"]
    # A second table in the same bucket, which the reader may not see.
    with auth_off(store):
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="admin",
                          aws_secret_access_key="admin")
        metadata = s3.get_object(Bucket=b, Key=signed_table["key"])["Body"].read().decode()
        s3.put_object(Bucket=b, Key="lake/other/metadata/00000-1.metadata.json",
                      Body=metadata.replace("/lake/reg", "/lake/other").encode())
        s3.put_object(Bucket=b, Key="lake/other/data/o.parquet", Body=b"the other table's")
    await ok(ws, "POST", f"{P}/namespaces/s/register", json={
        "name": "other", "metadata-location": f"s3://{b}/lake/other/metadata/00000-1.metadata.json"})
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE_SCHEMA")
    await grant(ws, "table", "main.s.reg", reader.name, "SELECT")
    theirs = f"{url}/{b}/lake/other/data/o.parquet"
    for uri in (theirs, f"{url}/{b}/lake/reg/../other/data/o.parquet",
                f"{url}/{b}/lake/reg/%2E%2E/other/data/o.parquet", f"{url}/{b}?list-type=2&prefix=lake%2Fother%2F"):
        status, body = await sign(reader, uri)                      # on the table they may read
        assert status == 403 and body["error"]["type"] == "ForbiddenException", (uri, body)
    for path in (f"{P}/namespaces/s/tables/other", f"{P}/namespaces/S/tables/OTHER"):
        status, body = await sign(reader, theirs, path=path)         # on the table itself: not theirs to see
        assert status == 404 and body["error"]["type"] == "NoSuchTableException", (path, body)
    # Methods: only object reads for a reader; nothing but GET, HEAD, PUT, POST, DELETE for anyone.
    inside = f"{url}/{b}/lake/reg/data/a.parquet"
    for method in ("put", "Delete", "PATCH", "OPTIONS", "TRACE", "CONNECT", "PROPFIND", ""):
        status, body = await sign(reader, inside, method=method)
        assert status in (400, 403), (method, body)
    for method in ("PATCH", "OPTIONS", "TRACE", "COPY"):
        status, body = await sign(ws, inside, method=method)
        assert status == 403 and "not signed" in body["error"]["message"], (method, body)
    # A read's signature does not carry a write: the store refuses a PUT sent with a GET's signed headers.
    status, body = await sign(reader, inside)
    assert status == 200, body
    headers = {k: v[0] for k, v in body["headers"].items()}
    replay = await asyncio.to_thread(requests.put, inside, data=b"replayed", headers=headers)
    assert replay.status_code == 403, replay.text
    got = await asyncio.to_thread(requests.get, inside, headers=headers)
    assert got.status_code == 200 and got.content == b"inside"            # the signature itself was good
