"""Attacks on the catalog's own calls to an `s3_compatible` store (web/store_endpoints.py), by a principal who
may create storage credentials, and through every API that makes the catalog call the credential's endpoint.

The endpoint is the credential creator's choice, and the catalog itself sends requests there: GET /files, STS
AssumeRole (the `role_arn` variant), Iceberg metadata reads and writes (vended or remote-signed tables), and
the maintenance jobs, which read and delete with the catalog's rights. Aimed at loopback, the cloud's instance
metadata service or a private network, those requests reached services the creator cannot. The catalog now
calls an endpoint only when its host resolves to public addresses alone, or the operator listed it
($SHARDCAT_S3_COMPATIBLE_ENDPOINTS): refused (400) when a credential names one, and again at every call, so
an endpoint unlisted since, or a name that resolves to loopback later (DNS rebinding), is not called either.
The `listener` stands in for the internal service: it records every request it gets.
"""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
import types
import uuid

import boto3
import pytest

from governance_users import grant, user
from shardcat.delta import log as dlog
from shardcat.errors import CatalogError
from shardcat.web import destinations
from shardcat.web.store_endpoints import ENV
from test_iceberg_signing import REMOTE, T, signed_table  # noqa: F401
from test_storage_s3_compatible import auth_off, credential, listed_endpoint, no_ambient_aws, store  # noqa: F401

PUBLIC = "93.184.216.34"


class Listener:
    """An HTTP server on loopback, the internal service an attacker aims at: records every request."""

    def __init__(self):
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                seen.append((self.command, self.path))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def listener():
    found = Listener()
    yield found
    found.server.shutdown()


def spellings(port: int) -> list[str]:
    """The listener's address as a credential may spell it, and the other places no store may be."""
    return [f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}",
            f"http://[::ffff:127.0.0.1]:{port}", f"http://2130706433:{port}", f"http://0x7f000001:{port}",
            f"http://0177.0.0.1:{port}", f"http://127.1:{port}", f"https://localhost:{port}",
            "http://169.254.169.254", "http://[fd00:ec2::254]", "http://10.0.0.1:9000", "http://192.168.1.1:9000"]


def keys(endpoint: str, **extra) -> dict:
    return {"endpoint_url": endpoint, "access_key_id": "k", "secret_access_key": "s", **extra}


async def attacker_of(server, ws):
    attacker = await user(server, ws)
    await grant(ws, "metastore", ws.metastore_id, attacker.name, "CREATE STORAGE CREDENTIAL",
                "CREATE EXTERNAL LOCATION")
    return attacker


async def test_no_credential_names_an_address_that_is_not_public(ws, server, listener, store):
    attacker = await attacker_of(server, ws)
    for endpoint in spellings(listener.port):
        for path, extra in (("/storage-credentials", {}), ("/credentials", {"purpose": "STORAGE"}),
                            ("/storage-credentials", {"role_arn": "arn:aws:iam::000000000000:role/r"})):
            name = f"c{uuid.uuid4().hex[:8]}"
            fields = keys(endpoint, **{k: v for k, v in extra.items() if k == "role_arn"})
            body = {"name": name, "s3_compatible": fields, **{k: v for k, v in extra.items() if k == "purpose"}}
            status, answer = await attacker.call("POST", path, json=body)
            assert (status, answer.get("error_code")) == (400, "INVALID_PARAMETER_VALUE"), (endpoint, path, answer)
            assert ENV in answer["message"] and "--s3-compatible-endpoint" in answer["message"], answer
            assert (await ws.call("GET", f"/storage-credentials/{name}"))[0] == 404
    assert listener.seen == []


async def test_no_credential_is_moved_to_such_an_address(ws, listener, store):
    made = await ws.call("POST", "/storage-credentials", json={"name": "minio", "s3_compatible": credential(store)})
    assert made[0] == 200, made
    for endpoint in spellings(listener.port):
        status, answer = await ws.call("PATCH", "/storage-credentials/minio",
                                       json={"s3_compatible": {"endpoint_url": endpoint}})
        assert (status, answer.get("error_code")) == (400, "INVALID_PARAMETER_VALUE"), (endpoint, answer)
        assert ENV in answer["message"], answer
    status, kept = await ws.call("GET", "/storage-credentials/minio")
    assert kept["s3_compatible"]["endpoint_url"] == store["url"]
    assert listener.seen == []


async def _lake_at(ws, endpoint: str, bucket: str, **extra) -> None:
    for path, body in (("/storage-credentials", {"name": "aimed", "s3_compatible": keys(endpoint, **extra)}),
                       ("/external-locations", {"name": "aimed", "url": f"s3://{bucket}/lake",
                                                "credential_name": "aimed"})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer


async def test_a_listed_endpoint_is_called_and_unlisted_since_it_is_not(ws, listener, monkeypatch, no_ambient_aws):
    """The operator listed the endpoint: GET /files reaches it. Unlisted later: refused before any request."""
    listener.seen.clear()
    with listed_endpoint(f"127.0.0.1:{listener.port}"):
        await _lake_at(ws, f"http://127.0.0.1:{listener.port}", "b")
        await ws.call("GET", "/files", params={"url": "s3://b/lake/x"})
        assert [c for c, _ in listener.seen] == ["GET"], listener.seen     # listed: called
    listener.seen.clear()
    status, answer = await ws.call("GET", "/files", params={"url": "s3://b/lake/x"})
    assert (status, answer["error_code"]) == (400, "FAILED_PRECONDITION"), answer
    assert ENV in answer["message"], answer
    assert listener.seen == []


async def test_the_stores_sts_is_called_only_while_listed(ws, listener, no_ambient_aws):
    listener.seen.clear()
    with listed_endpoint(f"127.0.0.1:{listener.port}"):
        await _lake_at(ws, f"http://127.0.0.1:{listener.port}", "b", role_arn="arn:aws:iam::000000000000:role/r")
        await ws.call("POST", "/temporary-path-credentials", json={"url": "s3://b/lake/x", "operation": "PATH_READ"})
        assert {c for c, _ in listener.seen} == {"POST"}, listener.seen    # listed: AssumeRole sent
    listener.seen.clear()
    status, answer = await ws.call("POST", "/temporary-path-credentials",
                                   json={"url": "s3://b/lake/y", "operation": "PATH_READ"})
    assert (status, answer["error_code"]) == (400, "FAILED_PRECONDITION"), answer
    assert ENV in answer["message"], answer
    assert listener.seen == []


@pytest.fixture
def rebinding(monkeypatch):
    """Names under .rebind.test answer the vetting resolver in turn from `answers[name]` (the last one
    repeated): a name an attacker's DNS makes public when it is checked and loopback when it is used."""
    answers: dict[str, list[str]] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        if host.endswith(".rebind.test"):
            address = answers[host].pop(0) if len(answers[host]) > 1 else answers[host][0]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return socket.getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(destinations, "socket", types.SimpleNamespace(getaddrinfo=getaddrinfo,
                                                                      SOCK_STREAM=socket.SOCK_STREAM))
    return answers


async def test_a_name_resolving_to_loopback_later_is_not_called(ws, server, listener, rebinding, no_ambient_aws):
    listener.seen.clear()
    attacker = await attacker_of(server, ws)
    name = "localhost.rebind.test"
    rebinding[name] = [PUBLIC, "127.0.0.1"]           # public when the credential is made, loopback after
    for path, body in (("/storage-credentials", {"name": "aimed", "s3_compatible": keys(f"http://{name}:{listener.port}")}),
                       ("/external-locations", {"name": "aimed", "url": "s3://b/lake", "credential_name": "aimed"})):
        status, answer = await attacker.call("POST", path, json=body)
        assert status == 200, answer
    status, answer = await attacker.call("GET", "/files", params={"url": "s3://b/lake/x"})
    assert (status, answer["error_code"]) == (400, "FAILED_PRECONDITION"), answer
    assert listener.seen == []


async def test_iceberg_metadata_is_read_at_a_listed_store_only(ws, store, signed_table, monkeypatch):  # noqa: F811
    """The catalog reads a table's metadata file itself, at the store, for remote signing and for vended
    credentials alike: unlisted, both are refused before the store is called."""
    status, body = await ws.call("GET", T, headers=REMOTE)
    assert status == 200 and body["config"]["s3.remote-signing-enabled"] == "true", body
    monkeypatch.setenv(ENV, "")
    for headers in (REMOTE, {"X-Iceberg-Access-Delegation": "vended-credentials"}, {}):
        status, body = await ws.call("GET", T, headers=headers)
        assert status == 400 and ENV in body["error"]["message"], (headers, body)


async def _run(ws, table: str, action: str) -> dict:
    status, body = await ws.call("POST", "/shardcat/maintenance/runs", json={"table": table, "actions": [action]})
    assert status == 200, body
    for _ in range(300):
        status, body = await ws.call("GET", "/shardcat/maintenance/runs", params={"table": table})
        if body["runs"] and body["runs"][-1]["status"] in ("SUCCEEDED", "FAILED"):
            return body["runs"][-1]
        await asyncio.sleep(0.5)
    raise AssertionError(body)


async def test_maintenance_does_not_call_an_unlisted_store(ws, store, signed_table, monkeypatch):  # noqa: F811
    """An Iceberg table on the store: a maintenance run (a Ray task loading the table through the catalog and
    reading, writing and deleting its files with what it is vended) runs while the store is listed; unlisted,
    it fails on the endpoint, and the store's files stay as they were."""
    def objects() -> list[str]:
        s3 = boto3.client("s3", endpoint_url=store["url"], region_name="us-east-1", aws_access_key_id="admin",
                          aws_secret_access_key="admin")
        return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=store["bucket"], Prefix="lake/").get("Contents", []))

    listed = await _run(ws, "main.s.reg", "expire_snapshots")
    assert listed["status"] == "SUCCEEDED", listed
    with auth_off(store):
        before = objects()
    monkeypatch.setenv(ENV, "")
    refused = await _run(ws, "main.s.reg", "expire_snapshots")
    assert refused["status"] == "FAILED" and ENV in refused["detail"], refused
    with auth_off(store):
        assert objects() == before


def test_the_jobs_delta_storage_refuses_an_unlisted_store(store, monkeypatch):
    """The Delta jobs open storage with the answer the catalog vended (delta/log.py): its endpoint is vetted
    there too, in the Ray worker."""
    answer = {"aws_temp_credentials": {"access_key_id": "k", "secret_access_key": "s"}, "url": "s3://b/t",
              "endpoint_url": store["url"], "region": "us-east-1", "path_style_access": True}
    assert dlog.vended_s3(answer) is not None                  # listed (the store fixture's entry)
    monkeypatch.setenv(ENV, "")
    with pytest.raises(CatalogError) as refused:
        dlog.vended_s3(answer)
    assert ENV in str(refused.value)
