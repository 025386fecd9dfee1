"""Raw HTTP for what the SDK does not cover: the 2.1 `/storage-credentials` naming with every
credential kind and redacted secrets, SERVICE credentials, and `GET /files` over file://
and over s3:// against moto's S3 server on loopback."""

from __future__ import annotations

import os
import uuid

import pytest

from shardcat.entities.urls import join_url, normalize_url

AZURE_SP = {"directory_id": "tenant-1", "application_id": "app-1", "client_secret": "s3cr3t-azure"}


def _pem_key() -> str:
    """A service account's private key in PEM, as its JSON key holds it (a GCP credential must carry one)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


GCP_KEY = {"email": "sa@p.iam.gserviceaccount.com", "private_key_id": "kid-1", "private_key": _pem_key()}


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def stored_info(server, ws, name: str) -> dict:
    row = await server.store.pool.fetchrow(
        "SELECT info FROM assets WHERE metastore_id = $1 AND namespace = 'credential' AND full_name = $2",
        uuid.UUID(ws.metastore_id), name)
    return row["info"]


async def test_storage_credentials_every_kind_secrets_redacted(ws, server):
    azure = await ok(ws, "POST", "/storage-credentials", json={"name": "az", "azure_service_principal": AZURE_SP,
                                                               "comment": "a", "skip_validation": True})
    assert azure["azure_service_principal"] == {"directory_id": "tenant-1", "application_id": "app-1"}
    assert azure["purpose"] == "STORAGE" and azure["metastore_id"] == ws.metastore_id and azure["comment"] == "a"
    assert "skip_validation" not in azure
    gcp = await ok(ws, "POST", "/storage-credentials", json={"name": "gcp", "gcp_service_account_key": GCP_KEY})
    assert gcp["gcp_service_account_key"] == {"email": GCP_KEY["email"], "private_key_id": "kid-1"}
    mi = await ok(ws, "POST", "/storage-credentials", json={"name": "mi", "azure_managed_identity": {
        "access_connector_id": "/subscriptions/x/ac", "managed_identity_id": "/subscriptions/x/mi"}})
    assert mi["azure_managed_identity"]["access_connector_id"] == "/subscriptions/x/ac"
    # Secrets are kept (a later vending needs them), encrypted (docs/security.md), and never shown, by get or list.
    opened = server.store.secrets.open
    assert opened((await stored_info(server, ws, "az"))["azure_service_principal"]["client_secret"]) == "s3cr3t-azure"
    assert opened((await stored_info(server, ws, "gcp"))["gcp_service_account_key"]["private_key"]) \
        == GCP_KEY["private_key"]
    for path in ("/storage-credentials", "/credentials", "/storage-credentials/az", "/storage-credentials/gcp"):
        text = str(await ok(ws, "GET", path))
        assert "s3cr3t-azure" not in text and "BEGIN KEY" not in text
    listed = await ok(ws, "GET", "/storage-credentials")
    assert [c["name"] for c in listed["storage_credentials"]] == ["az", "gcp", "mi"]

    # Update within a kind keeps what is not given; switching kind replaces it whole.
    az2 = await ok(ws, "PATCH", "/storage-credentials/az", json={"azure_service_principal": {"application_id": "app-2"}})
    assert az2["azure_service_principal"] == {"directory_id": "tenant-1", "application_id": "app-2"}
    assert opened((await stored_info(server, ws, "az"))["azure_service_principal"]["client_secret"]) == "s3cr3t-azure"
    switched = await ok(ws, "PATCH", "/storage-credentials/az",
                        json={"aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}, "name": "aws"})
    assert "azure_service_principal" not in switched and switched["aws_iam_role"]["role_arn"] == "arn:aws:iam::1:role/r"
    assert switched["name"] == "aws" and switched["id"] == az2["id"]
    assert "azure_service_principal" not in await stored_info(server, ws, "aws")
    await ok(ws, "DELETE", "/storage-credentials/aws")
    status, body = await ws.call("GET", "/credentials/aws")
    assert status == 404 and body["error_code"] == "NOT_FOUND"


async def test_service_credentials_only_under_credentials(ws):
    made = await ok(ws, "POST", "/credentials", json={"name": "svc", "purpose": "SERVICE",
                                                      "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/svc"}})
    assert made["purpose"] == "SERVICE"
    await ok(ws, "POST", "/credentials", json={"name": "sto", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/s"}})
    assert [c["name"] for c in (await ok(ws, "GET", "/credentials"))["credentials"]] == ["sto", "svc"]
    assert [c["name"] for c in (await ok(ws, "GET", "/credentials", params={"purpose": "SERVICE"}))["credentials"]] \
        == ["svc"]
    assert [c["name"] for c in (await ok(ws, "GET", "/storage-credentials"))["storage_credentials"]] == ["sto"]
    status, body = await ws.call("GET", "/storage-credentials/svc")
    assert status == 404 and "Storage credential 'svc'" in body["message"]
    # One namespace for both namings: the 2.1 endpoint cannot reuse a SERVICE credential's name.
    status, body = await ws.call("POST", "/storage-credentials", json={
        "name": "SVC", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/x"}})
    assert status == 409 and body["error_code"] == "ALREADY_EXISTS"
    # An external location needs a STORAGE credential.
    status, body = await ws.call("POST", "/external-locations", json={"name": "l", "url": "s3://b/l",
                                                                      "credential_name": "svc"})
    assert status == 400 and "STORAGE credential" in body["message"]


async def test_storage_credentials_page(ws):
    for i in range(7):
        await ok(ws, "POST", "/storage-credentials", json={"name": f"c{i}", "aws_iam_role": {
            "role_arn": f"arn:aws:iam::1:role/r{i}"}})
    # SERVICE credentials between them must not break the STORAGE-only pages.
    for i in range(3):
        await ok(ws, "POST", "/credentials", json={"name": f"c{i}x", "purpose": "SERVICE", "aws_iam_role": {
            "role_arn": f"arn:aws:iam::1:role/s{i}"}})
    names, token = [], None
    for _ in range(20):
        page = await ok(ws, "GET", "/storage-credentials", params={"max_results": 2, **({"page_token": token} if token else {})})
        assert len(page["storage_credentials"]) <= 2
        names += [c["name"] for c in page["storage_credentials"]]
        token = page.get("next_page_token")
        if not token:
            break
    assert names == [f"c{i}" for i in range(7)]


# ---- GET /files ---------------------------------------------------------------------


async def test_files_on_local_storage(ws, tmp_path):
    data = tmp_path / "lake"
    (data / "t1" / "_delta_log").mkdir(parents=True)
    (data / "a.txt").write_bytes(b"hello")
    (data / "b c.bin").write_bytes(b"x" * 1000)
    base = normalize_url(str(data))
    status, body = await ws.call("GET", "/files", params={"url": base})
    assert status == 400 and "not inside any external location" in body["message"]
    await ok(ws, "POST", "/storage-credentials", json={"name": "c", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}})
    await ok(ws, "POST", "/external-locations", json={"name": "lake", "url": base, "credential_name": "c"})

    listed = await ok(ws, "GET", "/files", params={"url": base})
    files = listed["files"]
    assert [f["name"] for f in files] == ["a.txt", "b c.bin", "t1"]
    a, bc, t1 = files
    assert a == {"path": join_url(base, "a.txt"), "name": "a.txt", "size": 5, "is_dir": False,
                 "mtime": int(os.stat(data / "a.txt").st_mtime * 1000)}
    assert bc["size"] == 1000 and bc["path"] == base + "/b%20c.bin"
    assert t1["is_dir"] is True and t1["path"] == join_url(base, "t1")
    assert "next_page_token" not in listed
    inner = await ok(ws, "GET", "/files", params={"url": join_url(base, "t1")})
    assert [f["name"] for f in inner["files"]] == ["_delta_log"]

    names, token = [], None
    for _ in range(5):
        page = await ok(ws, "GET", "/files", params={"url": base, "max_results": 2,
                                                     **({"page_token": token} if token else {})})
        names += [f["name"] for f in page["files"]]
        token = page.get("next_page_token")
        if not token:
            break
    assert names == ["a.txt", "b c.bin", "t1"]
    status, body = await ws.call("GET", "/files", params={"url": join_url(base, "missing")})
    assert status == 404 and body["error_code"] == "NOT_FOUND"


@pytest.fixture(scope="module")
def moto_s3():
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    saved = {k: os.environ.get(k) for k in ("SHARDCAT_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.update(SHARDCAT_S3_ENDPOINT=f"http://{host}:{port}", AWS_ACCESS_KEY_ID="testing",
                      AWS_SECRET_ACCESS_KEY="testing")
    yield f"http://{host}:{port}"
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


async def test_files_on_s3(ws, moto_s3):
    import boto3
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    for key, size in (("data/t1/part-0.parquet", 10), ("data/t1/_delta_log/0.json", 3), ("data/readme.md", 7),
                      ("data/t2/x", 1), ("other/y", 1)):
        s3.put_object(Bucket=bucket, Key=key, Body=b"z" * size)
    await ok(ws, "POST", "/storage-credentials", json={"name": "c", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}})
    await ok(ws, "POST", "/external-locations", json={"name": "lake", "url": f"s3://{bucket}/data",
                                                      "credential_name": "c"})
    listed = await ok(ws, "GET", "/files", params={"url": f"s3://{bucket}/data/"})
    assert [(f["name"], f["is_dir"]) for f in listed["files"]] == [("readme.md", False), ("t1", True), ("t2", True)]
    readme = listed["files"][0]
    assert readme["path"] == f"s3://{bucket}/data/readme.md" and readme["size"] == 7 and readme["mtime"] > 0
    inner = await ok(ws, "GET", "/files", params={"url": f"s3://{bucket}/data/t1"})
    assert [(f["name"], f["size"]) for f in inner["files"]] == [("_delta_log", 0), ("part-0.parquet", 10)]

    names, token = [], None
    for _ in range(5):
        page = await ok(ws, "GET", "/files", params={"url": f"s3://{bucket}/data", "max_results": 1,
                                                     **({"page_token": token} if token else {})})
        assert len(page["files"]) <= 1
        names += [f["name"] for f in page["files"]]
        token = page.get("next_page_token")
        if not token:
            break
    assert names == ["readme.md", "t1", "t2"]
    # Outside the location (same bucket), and a bucket that does not exist.
    status, body = await ws.call("GET", "/files", params={"url": f"s3://{bucket}/other"})
    assert status == 400 and "not inside any external location" in body["message"]
    await ok(ws, "POST", "/external-locations", json={"name": "gone", "url": "s3://no-such-bucket-x",
                                                      "credential_name": "c"})
    status, body = await ws.call("GET", "/files", params={"url": "s3://no-such-bucket-x/a"})
    assert status == 404 and "no-such-bucket-x" in body["message"]
