"""Bad input and conflicts at the credential, external location, files, temporary credential
and Delta Sharing endpoints: each gets the right error code, a message naming what is wrong,
and changes nothing (same metastore version, same asset rows)."""

from __future__ import annotations

import json
import uuid

import pytest

COLS = [{"name": "id", "type_name": "LONG"}]
ROLE = {"role_arn": "arn:aws:iam::1:role/r"}
PROFILE = json.dumps({"shareCredentialsVersion": 1, "endpoint": "https://x/ds/", "bearerToken": "t"})
INVALID, PRECONDITION, NOT_FOUND, EXISTS = "INVALID_PARAMETER_VALUE", "FAILED_PRECONDITION", "NOT_FOUND", "ALREADY_EXISTS"
STATUS = {INVALID: 400, PRECONDITION: 400, NOT_FOUND: 404, EXISTS: 409, "PERMISSION_DENIED": 403,
          "MALFORMED_REQUEST": 400}


def case(id, method, path, code, *says, **request):
    return pytest.param(method, path, code, says, request, id=id)


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def build(ws) -> dict:
    """cred (STORAGE), svc (SERVICE); loc at s3://b/loc holding table main.s.t, ro (read-only) at
    s3://b/ro; share sh sharing main.s.t; recipients r (TOKEN) and d (DATABRICKS); provider p."""
    await ok(ws, "POST", "/storage-credentials", json={"name": "cred", "aws_iam_role": ROLE})
    await ok(ws, "POST", "/credentials", json={"name": "svc", "purpose": "SERVICE", "aws_iam_role": ROLE})
    await ok(ws, "POST", "/external-locations", json={"name": "loc", "url": "s3://b/loc", "credential_name": "cred"})
    await ok(ws, "POST", "/external-locations", json={"name": "ro", "url": "s3://b/ro", "credential_name": "cred",
                                                      "read_only": True})
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    table = await ok(ws, "POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": "s3://b/loc/t"})
    view = await ok(ws, "POST", "/tables", json={
        "name": "v", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW", "columns": COLS,
        "view_definition": "SELECT 1"})
    await ok(ws, "POST", "/shares", json={"name": "sh"})
    await ok(ws, "PATCH", "/shares/sh", json={"updates": [{"action": "ADD", "data_object": {"name": "main.s.t"}}]})
    await ok(ws, "POST", "/recipients", json={"name": "r", "authentication_type": "TOKEN"})
    await ok(ws, "POST", "/recipients", json={"name": "d", "authentication_type": "DATABRICKS",
                                              "data_recipient_global_metastore_id": "aws:us-east-1:" + str(uuid.uuid4())})
    await ok(ws, "POST", "/providers", json={"name": "p", "authentication_type": "TOKEN",
                                             "recipient_profile_str": PROFILE})
    return {"$TABLE_ID": table["table_id"], "$VIEW_ID": view["table_id"]}


async def snapshot(ws, server) -> tuple:
    ms = uuid.UUID(ws.metastore_id)
    version = await server.store.metastore_version(ws.metastore_id)
    rows = await server.store.pool.fetch("SELECT * FROM assets WHERE metastore_id = $1 ORDER BY id", ms)
    return version, [dict(r) for r in rows]


def fill(value, names: dict):
    text = json.dumps(value)
    for k, v in names.items():
        text = text.replace(k, v)
    return json.loads(text)


@pytest.fixture(scope="module")
async def world(server, http, tmp_path_factory):
    # test_bad_input's helper: a random workspace id, so the `ws` fixture's ids never collide with it.
    from tests.conftest import new_workspace
    ws = await new_workspace(server, http, tmp_path_factory.mktemp("bad"))
    return ws, await build(ws)


def cred(**kw):
    return {"name": "new_c", **kw}


CASES = [
    # ---- credentials, both namings ----
    case("no kind", "POST", "/credentials", INVALID, "exactly one of", json=cred()),
    case("two kinds", "POST", "/storage-credentials", INVALID, "exactly one of", "aws_iam_role",
         "gcp_service_account_key", json=cred(aws_iam_role=ROLE, gcp_service_account_key={
             "email": "e", "private_key_id": "k", "private_key": "p"})),
    case("missing role_arn", "POST", "/credentials", INVALID, "aws_iam_role.role_arn", json=cred(aws_iam_role={})),
    case("role not an arn", "POST", "/credentials", INVALID, "must be an ARN",
         json=cred(aws_iam_role={"role_arn": "my-role"})),
    case("kind not an object", "POST", "/credentials", INVALID, "aws_iam_role", "object",
         json=cred(aws_iam_role="arn:aws:iam::1:role/r")),
    case("azure missing secret", "POST", "/storage-credentials", INVALID, "client_secret",
         json=cred(azure_service_principal={"directory_id": "d", "application_id": "a"})),
    case("gcp key not a string", "POST", "/storage-credentials", INVALID, "private_key",
         json=cred(gcp_service_account_key={"email": "e", "private_key_id": "k", "private_key": 5})),
    case("bad purpose", "POST", "/credentials", INVALID, "purpose", "MAGIC", json=cred(purpose="MAGIC", aws_iam_role=ROLE)),
    case("service via 2.1", "POST", "/storage-credentials", INVALID, "STORAGE",
         json=cred(purpose="SERVICE", aws_iam_role=ROLE)),
    case("no name", "POST", "/credentials", INVALID, "'name'", json={"aws_iam_role": ROLE}),
    case("bad name", "POST", "/credentials", INVALID, "invalid character", json=cred(name="a.b", aws_iam_role=ROLE)),
    case("taken name", "POST", "/storage-credentials", EXISTS, "'cred'", json=cred(name="CRED", aws_iam_role=ROLE)),
    case("taken by service", "POST", "/storage-credentials", EXISTS, "'svc'", json=cred(name="svc", aws_iam_role=ROLE)),
    case("get missing", "GET", "/credentials/nope", NOT_FOUND, "'nope'"),
    case("2.1 hides service", "GET", "/storage-credentials/svc", NOT_FOUND, "Storage credential 'svc'"),
    case("update two kinds", "PATCH", "/credentials/cred", INVALID, "exactly one kind",
         json={"aws_iam_role": ROLE, "azure_managed_identity": {"access_connector_id": "x"}}),
    case("switch kind incomplete", "PATCH", "/credentials/cred", INVALID, "directory_id",
         json={"azure_service_principal": {"client_secret": "s"}}),
    case("rename onto another", "PATCH", "/storage-credentials/cred", EXISTS, "'svc'", json={"new_name": "svc"}),
    case("update missing", "PATCH", "/credentials/nope", NOT_FOUND, "'nope'", json={"comment": "x"}),
    case("delete in use", "DELETE", "/credentials/cred", PRECONDITION, "loc", "force=true"),
    case("delete in use 2.1", "DELETE", "/storage-credentials/cred", PRECONDITION, "external location"),
    case("delete missing", "DELETE", "/credentials/nope", NOT_FOUND, "'nope'"),
    case("bad list purpose", "GET", "/credentials", INVALID, "purpose", params={"purpose": "X"}),
    case("bad page token", "GET", "/storage-credentials", INVALID, "page_token", params={"page_token": "zz"}),
    case("bad max_results", "GET", "/credentials", INVALID, "max_results", params={"max_results": "-1"}),
    # ---- external locations ----
    case("location no url", "POST", "/external-locations", INVALID, "'url'", json={"name": "x", "credential_name": "cred"}),
    case("location no credential", "POST", "/external-locations", INVALID, "'credential_name'",
         json={"name": "x", "url": "s3://b/x"}),
    case("location bad url", "POST", "/external-locations", INVALID, "Invalid url", "query",
         json={"name": "x", "url": "s3://b/x?v=1", "credential_name": "cred"}),
    case("location unknown credential", "POST", "/external-locations", NOT_FOUND, "Credential 'ghost'",
         json={"name": "x", "url": "s3://b/x", "credential_name": "ghost"}),
    case("location inside another", "POST", "/external-locations", INVALID, "overlaps external location 'loc'",
         json={"name": "x", "url": "s3://b/loc/sub", "credential_name": "cred"}),
    case("location around another", "POST", "/external-locations", INVALID, "overlaps external location",
         json={"name": "x", "url": "s3://b", "credential_name": "cred"}),
    case("location same url", "POST", "/external-locations", INVALID, "overlaps external location 'ro'",
         json={"name": "x", "url": "s3a://B/ro/", "credential_name": "cred"}),
    case("location inside a table", "POST", "/external-locations", INVALID, "inside the storage of table 'main.s.t'",
         json={"name": "x", "url": "s3://b/loc/t/part", "credential_name": "cred"}),
    case("location taken name", "POST", "/external-locations", EXISTS, "'loc'",
         json={"name": "LOC", "url": "s3://c/x", "credential_name": "cred"}),
    case("location read_only not bool", "POST", "/external-locations", INVALID, "read_only",
         json={"name": "x", "url": "s3://c/x", "credential_name": "cred", "read_only": "yes"}),
    case("move onto another", "PATCH", "/external-locations/ro", INVALID, "overlaps external location 'loc'",
         json={"url": "s3://b/loc/x"}),
    case("move away from its table", "PATCH", "/external-locations/loc", PRECONDITION, "main.s.t", "force=true",
         json={"url": "s3://b/elsewhere"}),
    case("update unknown credential", "PATCH", "/external-locations/loc", NOT_FOUND, "Credential 'ghost'",
         json={"credential_name": "ghost"}),
    case("rename location onto another", "PATCH", "/external-locations/loc", EXISTS, "'ro'", json={"new_name": "ro"}),
    case("delete location with table", "DELETE", "/external-locations/loc", PRECONDITION, "main.s.t", "force=true"),
    case("delete missing location", "DELETE", "/external-locations/nope", NOT_FOUND, "'nope'"),
    case("table outside locations", "POST", "/tables", INVALID, "not inside any external location", json={
        "name": "t2", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": "s3://b/free/t2"}),
    case("table moved outside", "PATCH", "/tables/main.s.t", INVALID, "not inside any external location",
         json={"storage_location": "s3://b/free/t"}),
    # ---- files ----
    case("files no url", "GET", "/files", INVALID, "'url'"),
    case("files bad url", "GET", "/files", INVALID, "Invalid url", params={"url": "ftp://x/y"}),
    case("files outside", "GET", "/files", INVALID, "not inside any external location", params={"url": "s3://b/free"}),
    case("files bad token", "GET", "/files", INVALID, "page_token", params={"url": "s3://b/loc", "page_token": "??"}),
    # ---- temporary credentials ----
    case("table creds no id", "POST", "/temporary-table-credentials", INVALID, "'table_id'", json={"operation": "READ"}),
    case("table creds bad id", "POST", "/temporary-table-credentials", INVALID, "UUID",
         json={"table_id": "main.s.t", "operation": "READ"}),
    case("table creds bad op", "POST", "/temporary-table-credentials", INVALID, "operation", "WRITE",
         json={"table_id": "$TABLE_ID", "operation": "WRITE"}),
    case("table creds unknown", "POST", "/temporary-table-credentials", NOT_FOUND, "Table with id",
         json={"table_id": "00000000-0000-0000-0000-000000000000", "operation": "READ"}),
    case("table creds of a view", "POST", "/temporary-table-credentials", INVALID, "no storage",
         json={"table_id": "$VIEW_ID", "operation": "READ"}),
    case("table creds on s3", "POST", "/temporary-table-credentials", PRECONDITION, "does not vend s3://",
         json={"table_id": "$TABLE_ID", "operation": "READ"}),
    case("volume creds unknown", "POST", "/temporary-volume-credentials", NOT_FOUND, "Volume with id",
         json={"volume_id": "00000000-0000-0000-0000-000000000000", "operation": "READ_VOLUME"}),
    case("volume creds bad op", "POST", "/temporary-volume-credentials", INVALID, "operation",
         json={"volume_id": "00000000-0000-0000-0000-000000000000", "operation": "READ"}),
    case("path creds no url", "POST", "/temporary-path-credentials", INVALID, "'url'", json={"operation": "PATH_READ"}),
    case("path creds outside", "POST", "/temporary-path-credentials", INVALID, "not inside any external location",
         json={"url": "s3://b/free", "operation": "PATH_READ"}),
    case("path creds over a table", "POST", "/temporary-path-credentials", INVALID, "table 'main.s.t'",
         json={"url": "s3://b/loc/t", "operation": "PATH_CREATE_TABLE"}),
    case("path creds write read-only", "POST", "/temporary-path-credentials", "PERMISSION_DENIED", "read-only",
         json={"url": "s3://b/ro/x", "operation": "PATH_READ_WRITE"}),
    case("path creds bad body", "POST", "/temporary-path-credentials", "MALFORMED_REQUEST", "JSON", data="[1]"),
    # ---- shares ----
    case("share taken", "POST", "/shares", EXISTS, "'sh'", json={"name": "SH"}),
    case("share add twice", "PATCH", "/shares/sh", EXISTS, "main.s.t",
         json={"updates": [{"action": "ADD", "data_object": {"name": "main.s.t"}}]}),
    case("share add missing table", "PATCH", "/shares/sh", NOT_FOUND, "main.s.ghost",
         json={"updates": [{"action": "ADD", "data_object": {"name": "main.s.ghost"}}]}),
    case("share add 2-part table", "PATCH", "/shares/sh", INVALID, "3 parts",
         json={"updates": [{"action": "ADD", "data_object": {"name": "s.t"}}]}),
    case("share bad action", "PATCH", "/shares/sh", INVALID, "ADD, REMOVE or UPDATE",
         json={"updates": [{"action": "MERGE", "data_object": {"name": "main.s.t"}}]}),
    case("share remove absent", "PATCH", "/shares/sh", NOT_FOUND, "not in share",
         json={"updates": [{"action": "REMOVE", "data_object": {"name": "main.s.v"}}]}),
    case("share bad type", "PATCH", "/shares/sh", INVALID, "data_object_type",
         json={"updates": [{"action": "ADD", "data_object": {"name": "main.s.v", "data_object_type": "BLOB"}}]}),
    case("share dup shared_as", "PATCH", "/shares/sh", INVALID, "shared_as must be unique",
         json={"updates": [{"action": "ADD", "data_object": {"name": "main.s.v", "shared_as": "s.t"}}]}),
    case("share bad partition op", "PATCH", "/shares/sh", INVALID, "EQUAL or LIKE",
         json={"updates": [{"action": "UPDATE", "data_object": {"name": "main.s.t", "partitions": [
             {"values": [{"name": "id", "op": "GT", "value": "1"}]}]}}]}),
    case("share dup partition column", "PATCH", "/shares/sh", INVALID, "appears twice",
         json={"updates": [{"action": "UPDATE", "data_object": {"name": "main.s.t", "partitions": [
             {"values": [{"name": "id", "value": "1"}, {"name": "id", "value": "2"}]}]}}]}),
    case("share negative start_version", "PATCH", "/shares/sh", INVALID, "start_version",
         json={"updates": [{"action": "UPDATE", "data_object": {"name": "main.s.t", "start_version": -1}}]}),
    case("share updates not a list", "PATCH", "/shares/sh", INVALID, "'updates'", json={"updates": {}}),
    case("share missing", "GET", "/shares/nope", NOT_FOUND, "Share 'nope'"),
    case("perms unknown recipient", "PATCH", "/shares/sh/permissions", NOT_FOUND, "Recipient 'ghost'",
         json={"changes": [{"principal": "ghost", "add": ["SELECT"]}]}),
    case("perms bad privilege", "PATCH", "/shares/sh/permissions", INVALID, "SELECT",
         json={"changes": [{"principal": "r", "add": ["MODIFY"]}]}),
    case("perms no changes", "PATCH", "/shares/sh/permissions", INVALID, "'changes'", json={}),
    case("perms missing share", "GET", "/shares/nope/permissions", NOT_FOUND, "Share 'nope'"),
    # ---- recipients ----
    case("recipient bad auth", "POST", "/recipients", INVALID, "authentication_type",
         json={"name": "x", "authentication_type": "PASSWORD"}),
    case("recipient no auth", "POST", "/recipients", INVALID, "'authentication_type'", json={"name": "x"}),
    case("recipient bad ip", "POST", "/recipients", INVALID, "not an IP address",
         json={"name": "x", "authentication_type": "TOKEN", "ip_access_list": {"allowed_ip_addresses": ["999.1.1.1"]}}),
    case("recipient too many ips", "POST", "/recipients", INVALID, "limit is 100",
         json={"name": "x", "authentication_type": "TOKEN",
               "ip_access_list": {"allowed_ip_addresses": [f"10.0.0.{i}" for i in range(101)]}}),
    case("recipient databricks no id", "POST", "/recipients", INVALID, "data_recipient_global_metastore_id",
         json={"name": "x", "authentication_type": "DATABRICKS"}),
    case("recipient ip list on databricks", "PATCH", "/recipients/d", INVALID, "TOKEN recipients only",
         json={"ip_access_list": {"allowed_ip_addresses": []}}),
    case("recipient taken", "POST", "/recipients", EXISTS, "'r'", json={"name": "R", "authentication_type": "TOKEN"}),
    case("rotate negative", "POST", "/recipients/r/rotate-token", INVALID, "non-negative",
         json={"existing_token_expire_in_seconds": -1}),
    case("rotate missing field", "POST", "/recipients/r/rotate-token", INVALID, "existing_token_expire_in_seconds",
         json={}),
    case("rotate databricks", "POST", "/recipients/d/rotate-token", INVALID, "TOKEN",
         json={"existing_token_expire_in_seconds": 0}),
    case("rotate missing", "POST", "/recipients/nope/rotate-token", NOT_FOUND, "Recipient 'nope'",
         json={"existing_token_expire_in_seconds": 0}),
    case("share perms missing recipient", "GET", "/recipients/nope/share-permissions", NOT_FOUND, "'nope'"),
    # ---- providers ----
    case("provider no profile", "POST", "/providers", INVALID, "recipient_profile_str",
         json={"name": "x", "authentication_type": "TOKEN"}),
    case("provider bad profile", "POST", "/providers", INVALID, "profile", "JSON",
         json={"name": "x", "authentication_type": "TOKEN", "recipient_profile_str": "not json"}),
    case("provider profile no token", "POST", "/providers", INVALID, "bearerToken",
         json={"name": "x", "authentication_type": "TOKEN", "recipient_profile_str": '{"endpoint": "https://x"}'}),
    case("provider bad auth", "POST", "/providers", INVALID, "authentication_type",
         json={"name": "x", "authentication_type": "OAUTH"}),
    case("provider taken", "POST", "/providers", EXISTS, "'p'",
         json={"name": "p", "authentication_type": "TOKEN", "recipient_profile_str": PROFILE}),
    case("provider bad update", "PATCH", "/providers/p", INVALID, "profile", json={"recipient_profile_str": "{"}),
    case("provider shares missing", "GET", "/providers/nope/shares", NOT_FOUND, "Provider 'nope'"),
]


@pytest.mark.parametrize("method, path, code, says, request_", CASES)
async def test_refused_and_nothing_changed(world, server, method, path, code, says, request_):
    ws, names = world
    request_ = {k: fill(v, names) if k in ("json", "params") else v for k, v in request_.items()}
    if "data" in request_:
        request_["headers"] = {"Content-Type": "application/json"}
    before = await snapshot(ws, server)
    status, body = await ws.call(method, path, **request_)
    assert isinstance(body, dict) and body.get("error_code") == code, body
    assert status == STATUS[code]
    for fragment in says:
        assert fragment in body["message"], (fragment, body["message"])
    assert await snapshot(ws, server) == before


async def test_forced_deletes_leave_dependents(ws, server):
    await build(ws)
    await ok(ws, "DELETE", "/credentials/cred", params={"force": "true"})
    loc = await ok(ws, "GET", "/external-locations/loc")
    assert loc["credential_name"] == "cred"   # dangling until repointed; forced on purpose
    status, body = await ws.call("GET", "/credentials/cred")
    assert status == 404
    await ok(ws, "PATCH", "/external-locations/loc", json={"url": "s3://b/elsewhere", "force": True})
    assert (await ok(ws, "GET", "/external-locations/loc"))["url"] == "s3://b/elsewhere"
    # With the location moved, the old path is outside every location: the table can't move within it.
    status, body = await ws.call("PATCH", "/tables/main.s.t", json={"storage_location": "s3://b/loc/t2"})
    assert status == 400 and "not inside any external location" in body["message"]
