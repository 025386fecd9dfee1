"""Credential vending for s3:// against a local moto server playing IAM, STS and S3.

What moto proves, and what it does not: with IAM enforcement switched on (the server's
`/moto-api/reset-auth`), moto checks every S3 and STS request's SigV4 signature, refuses
unknown keys and session tokens, and evaluates the *role's* policies for the assumed-role
keys. It does not apply an AssumeRole *session* policy (moto 5's AssumedRoleAccessKey
collects the role's policies only). `session_policies_enforced` below adds that one AWS
rule to the in-process moto server: an assumed-role request must also be permitted by the
session policy the role was assumed with, judged by moto's own policy evaluator. moto also
ignores condition operators other than StringEquals, so the ListBucket s3:prefix
condition (StringLike) is checked on the policy document itself, not by moto.
"""

from __future__ import annotations

import json
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from shardcat.auth import hash_token, new_token
from shardcat.governance import vending
from shardcat.governance.vending import session_policy
from shardcat.entities.values import now_ms
from tests.conftest import Workspace

COLS = [{"name": "id", "type_name": "LONG"}]
ALLOW_ALL = json.dumps({"Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
TRUST_ANYONE = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]})


# ---- the session policy document ---------------------------------------------------------------


def _judge(policy: dict, action: str, resource: str) -> str:
    from moto.iam.access_control import IAMPolicy
    return IAMPolicy(json.dumps(policy)).is_action_permitted(action, resource).name


def test_read_policy_allows_only_the_prefix():
    p = session_policy("lake", "data/t1", write=False)
    assert _judge(p, "s3:GetObject", "arn:aws:s3:::lake/data/t1/part-0.parquet") == "PERMITTED"
    assert _judge(p, "s3:GetObject", "arn:aws:s3:::lake/data/t1/_delta_log/0.json") == "PERMITTED"
    for outside in ("lake/data/t2/x", "lake/data/t1-old/x", "lake/data/t1", "other/data/t1/x"):
        assert _judge(p, "s3:GetObject", f"arn:aws:s3:::{outside}") != "PERMITTED", outside
    for write in ("s3:PutObject", "s3:DeleteObject"):
        assert _judge(p, write, "arn:aws:s3:::lake/data/t1/x") != "PERMITTED"
    (listing,) = [s for s in p["Statement"] if s["Action"] == ["s3:ListBucket"]]
    assert listing["Resource"] == ["arn:aws:s3:::lake"]
    # Listing only under the prefix: the prefix itself and what lies below it, not a sibling like t1-old.
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["data/t1", "data/t1/*"]}}


def test_read_write_policy_adds_put_and_delete_on_the_prefix_only():
    p = session_policy("lake", "data/t1", write=True)
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert _judge(p, action, "arn:aws:s3:::lake/data/t1/x") == "PERMITTED"
        assert _judge(p, action, "arn:aws:s3:::lake/data/t2/x") != "PERMITTED"
    assert _judge(p, "s3:DeleteBucket", "arn:aws:s3:::lake") != "PERMITTED"
    whole = session_policy("lake", "", write=False)     # a whole bucket
    assert _judge(whole, "s3:GetObject", "arn:aws:s3:::lake/any/key") == "PERMITTED"
    assert _judge(whole, "s3:GetObject", "arn:aws:s3:::other/any/key") != "PERMITTED"


def test_s3_location_and_lifetime_bounds(monkeypatch):
    assert vending.s3_location("s3://lake/data/a%20b/t") == ("lake", "data/a b/t")
    assert vending.s3_location("s3://lake") == ("lake", "")
    for raw, want in (("60", 900), ("999999", 43200), ("1800", 1800), ("junk", 3600)):
        monkeypatch.setenv("SHARDCAT_CREDENTIAL_SECONDS", raw)
        assert vending.lifetime_seconds() == want


# ---- a moto server with IAM enforcement -------------------------------------------------------


@pytest.fixture(scope="module")
def moto():
    """A moto server on loopback: a bucket with objects in and out of a table's prefix, a role
    that may do anything in S3 (as a real account's role would), and an IAM user for shardcat."""
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    admin = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "admin",
             "aws_secret_access_key": "admin"}
    iam = boto3.client("iam", **admin)
    # Unique names: moto's backends are process-wide, and other modules import this fixture.
    suffix = uuid.uuid4().hex[:8]
    role_name, user_name = f"lake-access-{suffix}", f"shardcat-{suffix}"
    role = iam.create_role(RoleName=role_name, AssumeRolePolicyDocument=TRUST_ANYONE)["Role"]["Arn"]
    iam.put_role_policy(RoleName=role_name, PolicyName="all-s3", PolicyDocument=ALLOW_ALL)
    iam.create_user(UserName=user_name)
    iam.put_user_policy(UserName=user_name, PolicyName="assume", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}))
    key = iam.create_access_key(UserName=user_name)["AccessKey"]
    s3 = boto3.client("s3", **admin)
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    for k in ("data/t1/part-0.parquet", "data/t1/_delta_log/0.json", "data/t1-old/part-0.parquet",
              "data/t2/part-0.parquet", "data/free/f.csv", "secret/x", "root/m/x"):
        s3.put_object(Bucket=bucket, Key=k, Body=f"content of {k}".encode())
    import requests
    requests.post(f"{url}/moto-api/reset-auth", data=b"0").raise_for_status()   # from now on: IAM enforced
    yield {"url": url, "role": role, "bucket": bucket, "key": key}
    requests.post(f"{url}/moto-api/reset-auth", data=b"inf").raise_for_status()
    server.stop()


@pytest.fixture
def session_policies_enforced(monkeypatch):
    """Teach the in-process moto server AWS's session-policy rule (see the module docstring)."""
    from moto.iam import access_control
    from moto.sts.models import sts_backends

    original = access_control.IAMRequestBase.check_action_permitted

    def check(self, resource):
        original(self, resource)
        key = self._access_key
        if isinstance(key, access_control.AssumedRoleAccessKey):
            for assumed in sts_backends[self.account_id]["aws"].assumed_roles:
                if assumed.access_key_id == key._access_key_id and assumed.policy:
                    result = access_control.IAMPolicy(assumed.policy).is_action_permitted(self._action, resource)
                    if result != access_control.PermissionResult.PERMITTED:
                        self._raise_access_denied()

    monkeypatch.setattr(access_control.IAMRequestBase, "check_action_permitted", check)


@pytest.fixture
def sts(moto, monkeypatch, session_policies_enforced):
    """shardcat configured for the moto STS, with the IAM user's keys as its own identity."""
    monkeypatch.setenv("SHARDCAT_STS_ENDPOINT", moto["url"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto["key"]["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto["key"]["SecretAccessKey"])
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return moto


def vended_s3(moto, answer: dict):
    c = answer["aws_temp_credentials"]
    return boto3.client("s3", endpoint_url=moto["url"], region_name="us-east-1",
                        aws_access_key_id=c["access_key_id"], aws_secret_access_key=c["secret_access_key"],
                        aws_session_token=c["session_token"])


def denied(call) -> bool:
    try:
        call()
    except ClientError as e:
        return e.response["Error"]["Code"] == "AccessDenied"
    return False


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def lake(ws, moto) -> dict:
    """Catalog, schema, a storage credential with the role, an external location over data/, table t1."""
    b = moto["bucket"]
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "lake", "aws_iam_role": {"role_arn": moto["role"]}})
    await ok(ws, "POST", "/external-locations", json={"name": "data", "url": f"s3://{b}/data",
                                                      "credential_name": "lake"})
    return await ok(ws, "POST", "/tables", json={
        "name": "t1", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": f"s3://{b}/data/t1"})


async def test_read_credentials_work_inside_the_prefix_only(ws, sts):
    b = sts["bucket"]
    table = await lake(ws, sts)
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ"})
    assert answer["url"] == f"s3://{b}/data/t1"
    assert set(answer["aws_temp_credentials"]) == {"access_key_id", "secret_access_key", "session_token"}
    s3 = vended_s3(sts, answer)
    got = s3.get_object(Bucket=b, Key="data/t1/part-0.parquet")["Body"].read()
    assert got == b"content of data/t1/part-0.parquet"
    for outside in ("data/t2/part-0.parquet", "data/t1-old/part-0.parquet", "secret/x", "data/free/f.csv"):
        assert denied(lambda: s3.get_object(Bucket=b, Key=outside)), outside
    # Read-only keys cannot write or delete, not even inside the prefix.
    assert denied(lambda: s3.put_object(Bucket=b, Key="data/t1/new", Body=b"x"))
    assert denied(lambda: s3.delete_object(Bucket=b, Key="data/t1/part-0.parquet"))
    # Keys that were never vended, or a tampered session token, get nothing at all.
    c = answer["aws_temp_credentials"]
    forged = boto3.client("s3", endpoint_url=sts["url"], region_name="us-east-1",
                          aws_access_key_id=c["access_key_id"], aws_secret_access_key=c["secret_access_key"],
                          aws_session_token=c["session_token"] + "x")
    with pytest.raises(ClientError):
        forged.get_object(Bucket=b, Key="data/t1/part-0.parquet")
    # The audit names the table the credentials were for (the request only named its id).
    events = (await ok(ws, "GET", "/shardcat/audit", params={
        "metastore_id": ws.metastore_id, "action": "generateTemporaryTableCredentials"}))["events"]
    assert [(e["securable_type"], e["securable_full_name"], e["securable_id"], e["allowed"]) for e in events] == \
        [("TABLE", "main.s.t1", table["table_id"], True)]


async def test_read_write_credentials_write_inside_the_prefix_only(ws, sts):
    b = sts["bucket"]
    table = await lake(ws, sts)
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    s3 = vended_s3(sts, answer)
    s3.put_object(Bucket=b, Key="data/t1/part-1.parquet", Body=b"new")
    assert s3.get_object(Bucket=b, Key="data/t1/part-1.parquet")["Body"].read() == b"new"
    s3.delete_object(Bucket=b, Key="data/t1/part-1.parquet")
    assert denied(lambda: s3.put_object(Bucket=b, Key="data/t2/part-9.parquet", Body=b"x"))
    assert denied(lambda: s3.delete_object(Bucket=b, Key="secret/x"))


async def test_unexpired_credentials_are_reused(ws, sts, monkeypatch):
    table = await lake(ws, sts)
    vending.AWS.cache.clear()       # earlier tests vended for the same role and prefix
    calls = vending.AWS.stats["assume_role"]
    first = await ok(ws, "POST", "/temporary-table-credentials",
                     json={"table_id": table["table_id"], "operation": "READ"})
    again = await ok(ws, "POST", "/temporary-table-credentials",
                     json={"table_id": table["table_id"], "operation": "READ"})
    assert again == first and vending.AWS.stats["assume_role"] == calls + 1
    # Another access mode is another credential; so is another prefix.
    rw = await ok(ws, "POST", "/temporary-table-credentials",
                  json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert rw["aws_temp_credentials"]["access_key_id"] != first["aws_temp_credentials"]["access_key_id"]
    assert vending.AWS.stats["assume_role"] == calls + 2
    # STS was asked for the configured lifetime; the cache lets go a margin before expiry.
    import time
    assert 3000 * 1000 < first["expiration_time"] - time.time() * 1000 <= 3600 * 1000 + 5000
    key = next(k for k in vending.AWS.cache if k[2] == first["url"] and k[3] == "READ")
    assert vending.AWS.cache.ttu(key, vending.AWS.cache[key], 0) == \
        pytest.approx(first["expiration_time"] / 1000 - vending.SAFETY_MARGIN_SECONDS, abs=0.01)
    # A credential within the safety margin of its expiry is not handed out again: STS is asked anew.
    vending.AWS.cache.clear()
    monkeypatch.setattr(vending, "SAFETY_MARGIN_SECONDS", 3600 + 60)
    one = await ok(ws, "POST", "/temporary-table-credentials",
                   json={"table_id": table["table_id"], "operation": "READ"})
    two = await ok(ws, "POST", "/temporary-table-credentials",
                   json={"table_id": table["table_id"], "operation": "READ"})
    assert one["aws_temp_credentials"] != two["aws_temp_credentials"]
    assert vending.AWS.stats["assume_role"] == calls + 4


async def test_path_credentials_follow_the_owning_asset_or_the_location(ws, sts):
    b = sts["bucket"]
    await lake(ws, sts)
    # Inside the table: the table decides; the keys are scoped to the path asked for.
    inner = await ok(ws, "POST", "/temporary-path-credentials",
                     json={"url": f"s3://{b}/data/t1/_delta_log", "operation": "PATH_READ"})
    s3 = vended_s3(sts, inner)
    assert s3.get_object(Bucket=b, Key="data/t1/_delta_log/0.json")["Body"].read()
    assert denied(lambda: s3.get_object(Bucket=b, Key="data/t1/part-0.parquet"))
    # No asset there, but an external location: READ FILES on it decides.
    free = await ok(ws, "POST", "/temporary-path-credentials",
                    json={"url": f"s3://{b}/data/free", "operation": "PATH_READ"})
    s3 = vended_s3(sts, free)
    assert s3.get_object(Bucket=b, Key="data/free/f.csv")["Body"].read() == b"content of data/free/f.csv"
    assert denied(lambda: s3.get_object(Bucket=b, Key="data/t1/part-0.parquet"))
    # Outside every external location: refused.
    status, body = await ws.call("POST", "/temporary-path-credentials",
                                 json={"url": f"s3://{b}/secret", "operation": "PATH_READ"})
    assert status == 400 and "not inside any external location" in body["message"]


async def s3_rooted_workspace(server, http, root: str) -> Workspace:
    """A fresh metastore whose storage root is on S3, its workspace, and an admin token."""
    metastore_id = str(uuid.uuid4())
    now = now_ms()
    await server.store.create_metastore(metastore_id, f"ms-{metastore_id[:8]}", {
        "storage_root": f"{root}/{metastore_id}", "owner": "admin", "created_at": now, "created_by": "admin",
        "updated_at": now, "updated_by": "admin"})
    workspace_id = (1 << 41) + uuid.uuid4().int % (1 << 40)
    await server.store.assign(workspace_id, metastore_id, None)
    admin = await server.store.create_principal("admin", "user", is_account_admin=True)
    token = new_token()
    await server.store.add_token(admin.id, hash_token(token), workspace_id)
    return Workspace(server.url, token, metastore_id, workspace_id, f"{root}/{metastore_id}", http)


async def test_managed_storage_uses_the_metastores_root_credential(sts, server, http, monkeypatch):
    """A managed table under an s3:// metastore root: the metastore's storage_root_credential_id decides
    which role is assumed; without one, $SHARDCAT_STORAGE_ROOT_ROLE_ARN; without that, a clear refusal."""
    b = sts["bucket"]
    ws = await s3_rooted_workspace(server, http, f"s3://{b}/root")
    monkeypatch.delenv("SHARDCAT_STORAGE_ROOT_ROLE_ARN", raising=False)
    cred = await ok(ws, "POST", "/storage-credentials", json={"name": "root", "aws_iam_role": {"role_arn": sts["role"]}})
    await ok(ws, "POST", "/catalogs", json={"name": "m"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "m"})
    table = await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": "m", "schema_name": "s",
                                                  "table_type": "MANAGED", "data_source_format": "DELTA",
                                                  "columns": COLS})
    assert table["storage_location"].startswith(ws.storage_root + "/")
    ask = {"table_id": table["table_id"], "operation": "READ_WRITE"}
    status, body = await ws.call("POST", "/temporary-table-credentials", json=ask)
    assert status == 400 and body["error_code"] == "FAILED_PRECONDITION"
    assert "storage_root_credential_id" in body["message"]

    await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}", json={"storage_root_credential_id": cred["id"]})
    answer = await ok(ws, "POST", "/temporary-table-credentials", json=ask)
    s3 = vended_s3(sts, answer)
    key = table["storage_location"].removeprefix(f"s3://{b}/") + "/part-0.parquet"
    s3.put_object(Bucket=b, Key=key, Body=b"m")
    assert s3.get_object(Bucket=b, Key=key)["Body"].read() == b"m"
    assert denied(lambda: s3.get_object(Bucket=b, Key="root/m/x"))
    assert denied(lambda: s3.put_object(Bucket=b, Key=ws.storage_root.removeprefix(f"s3://{b}/") + "/x", Body=b"x"))

    for wrong in ("not-a-uuid", str(uuid.uuid4()), table["table_id"]):
        await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}", json={"storage_root_credential_id": wrong})
        status, body = await ws.call("POST", "/temporary-table-credentials", json=ask)
        assert status == 400 and body["error_code"] == "FAILED_PRECONDITION", body
        assert f"storage_root_credential_id '{wrong}' names no credential" in body["message"]

    await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}", json={"storage_root_credential_id": ""})
    monkeypatch.setenv("SHARDCAT_STORAGE_ROOT_ROLE_ARN", sts["role"])
    got = await ok(ws, "POST", "/temporary-table-credentials", json={**ask, "operation": "READ"})
    assert vended_s3(sts, got).get_object(Bucket=b, Key=key)["Body"].read() == b"m"


async def test_no_sts_configured_and_other_clouds_are_a_clear_refusal(ws, monkeypatch):
    """Without the cloud's token service configured, each cloud says which setting is missing (so a
    test or a laptop never reaches a real cloud by accident)."""
    for name in ("SHARDCAT_STS_ENDPOINT", "SHARDCAT_GCP_SERVICE_ACCOUNT_KEY", "SHARDCAT_AZURE_AUTHORITY_HOST"):
        monkeypatch.delenv(name, raising=False)
    await ok(ws, "POST", "/credentials", json={"name": "aws", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}})
    await ok(ws, "POST", "/credentials", json={"name": "gcp", "databricks_gcp_service_account": {}})
    await ok(ws, "POST", "/credentials", json={"name": "az", "azure_service_principal": {
        "directory_id": "d", "application_id": "a", "client_secret": "s"}})
    for name, url, cred, setting in (
            ("s3loc", "s3://bkt/x", "aws", "SHARDCAT_STS_ENDPOINT"),
            ("gsloc", "gs://bkt/x", "gcp", "SHARDCAT_GCP_SERVICE_ACCOUNT_KEY"),
            ("azloc", "abfss://c@acct.dfs.core.windows.net/x", "az", "SHARDCAT_AZURE_AUTHORITY_HOST")):
        await ok(ws, "POST", "/external-locations", json={"name": name, "url": url, "credential_name": cred})
        status, body = await ws.call("POST", "/temporary-path-credentials",
                                     json={"url": url + "/t", "operation": "PATH_READ"})
        assert status == 400 and body["error_code"] == "FAILED_PRECONDITION", body
        assert setting in body["message"], body


async def test_a_path_no_asset_owns_is_refused(ws):
    """Local mode (no external location): a path that no table or volume owns gets nothing."""
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    table = await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": "main", "schema_name": "s",
                                                  "table_type": "MANAGED", "data_source_format": "DELTA",
                                                  "columns": COLS})
    got = await ok(ws, "POST", "/temporary-path-credentials",
                   json={"url": table["storage_location"] + "/part-0", "operation": "PATH_READ"})
    assert got["url"] == table["storage_location"] + "/part-0" and "aws_temp_credentials" not in got
    status, body = await ws.call("POST", "/temporary-path-credentials",
                                 json={"url": "file:///nowhere/owned", "operation": "PATH_READ"})
    assert status == 403 and body["error_code"] == "PERMISSION_DENIED" and "No table, volume" in body["message"]
