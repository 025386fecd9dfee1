"""Azure Data Lake Storage (issue 49): azure_storage_key credentials, abfss:// locations, SAS vending.

Azurite (azurite.py) is the storage account, with a key made for this run that only the credential
holds: whatever reads or writes here does so with a SAS shardcat signed, and Azurite checks each
SAS's signature, resource, permissions and expiry itself. Azurite has no hierarchical namespace, so
the credential says `hierarchical_namespace: false` and the SAS reaches the asset's container (not
just its directory: Blob storage has no prefix-scoped SAS); the directory SAS vended on ADLS Gen2
accounts, which Azurite cannot check, is checked for its scope fields below.
"""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import parse_qs

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient

from azurite import Azurite, EntraId, InstanceMetadata, az  # noqa: F401  (az: the session's Azurite)
from governance_users import grant, user
from shardcat.governance import vending_azure
from test_vending import ok

pytestmark = pytest.mark.azurite

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '"long"', "position": 0}]


def adls(az, path: str = "", container: str = "lake") -> str:
    return f"abfss://{container}@{az.account}.dfs.core.windows.net" + (f"/{path}" if path else "")


def credential(az, **extra) -> dict:
    return {"account_name": az.account, "account_key": az.key, "endpoint_url": az.endpoint,
            "hierarchical_namespace": False, **extra}


async def lake(ws, az, **extra) -> dict:
    """Catalog, schema, the credential, a location over lake/data, external tables t and u."""
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "az", "azure_storage_key": credential(az, **extra)})
    await ok(ws, "POST", "/external-locations", json={"name": "data", "url": adls(az, "data"), "credential_name": "az"})
    await ok(ws, "POST", "/tables", json={
        "name": "u", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": adls(az, "data/u")})
    return await ok(ws, "POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": adls(az, "data/t")})


def sas_of(answer: dict) -> str:
    return answer["azure_user_delegation_sas"]["sas_token"]


def container(az, answer: dict, name: str = "lake") -> ContainerClient:
    """What an engine builds from a vended answer: a client at the vended endpoint with the SAS."""
    return ContainerClient(answer["endpoint_url"], name, credential=sas_of(answer))


def refused(call) -> str | None:
    """Azurite's error code when it refuses `call`, None when it allows it."""
    try:
        call()
    except HttpResponseError as e:
        return e.error_code or str(e.status_code)
    return None


def read(client: ContainerClient, name: str) -> bytes:
    return client.download_blob(name).readall()


async def test_the_credential_keeps_its_key(ws, server, az):
    made = await ok(ws, "POST", "/credentials", json={"name": "az", "azure_storage_key": credential(az)})
    assert made["azure_storage_key"] == {"account_name": az.account, "endpoint_url": az.endpoint,
                                         "hierarchical_namespace": False}
    shown = [made, await ok(ws, "GET", "/credentials/az"), await ok(ws, "GET", "/storage-credentials/az"),
             await ok(ws, "GET", "/credentials"), await ok(ws, "GET", "/storage-credentials"),
             await ok(ws, "PATCH", "/credentials/az", json={"azure_storage_key": {"hierarchical_namespace": True}})]
    assert all(az.key not in json.dumps(v) and "account_key" not in json.dumps(v) for v in shown)
    assert shown[-1]["azure_storage_key"]["hierarchical_namespace"] is True     # the update kept the other fields
    stored = json.loads(await server.store.pool.fetchval(
        "SELECT info::text FROM assets WHERE metastore_id = $1 AND type = 'credential' AND name = 'az'",
        uuid.UUID(ws.metastore_id)))["azure_storage_key"]["account_key"]
    assert stored.startswith("sealed:v1:") and az.key not in stored
    assert server.store.secrets.open(stored) == az.key


@pytest.mark.parametrize("fields, word", [
    ({"account_name": "Not-An-Account"}, "account_name"),
    ({"account_name": "ab"}, "account_name"),
    ({"account_key": None}, "account_key"),
    ({"endpoint_url": "ftp://127.0.0.1:1/acct"}, "endpoint_url"),
    ({"endpoint_url": "http://127.0.0.1:1/acct?sig=x"}, "endpoint_url"),
    ({"hierarchical_namespace": "yes"}, "true or false"),
])
async def test_bad_credentials_are_refused(ws, az, fields, word):
    body = {k: v for k, v in {**credential(az), **fields}.items() if v is not None}
    status, answer = await ws.call("POST", "/storage-credentials", json={"name": "bad", "azure_storage_key": body})
    assert (status, answer["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), answer
    assert word in answer["message"] and az.key not in answer["message"], answer
    assert (await ws.call("GET", "/storage-credentials/bad"))[0] == 404


async def test_a_read_sas_reads_the_asset_and_nothing_it_may_not(ws, az):
    table = await lake(ws, az)
    before = time.time()
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ"})
    assert answer["url"] == adls(az, "data/t") and answer["endpoint_url"] == az.endpoint
    assert set(answer) == {"azure_user_delegation_sas", "expiration_time", "url", "endpoint_url"}
    assert before + 3500 <= answer["expiration_time"] / 1000 <= time.time() + 3601
    fields = parse_qs(sas_of(answer))
    assert fields["sp"] == ["rl"] and fields["sr"] == ["c"]
    lake_client = container(az, answer)
    assert read(lake_client, "data/t/part-0.parquet") == b"content of data/t/part-0.parquet"
    assert "data/t/_delta_log/0.json" in [b.name for b in lake_client.list_blobs(name_starts_with="data/t/")]
    # Writing, deleting, and another container: Azurite refuses.
    assert refused(lambda: lake_client.upload_blob("data/t/new.parquet", b"x")) == "AuthorizationPermissionMismatch"
    assert refused(lambda: lake_client.delete_blob("data/t/part-0.parquet")) == "AuthorizationPermissionMismatch"
    assert refused(lambda: read(container(az, answer, "other"), "x.csv")) == "AuthorizationFailure"
    # Widening the permissions in the token breaks its signature.
    forged = {**answer, "azure_user_delegation_sas": {"sas_token": sas_of(answer).replace("sp=rl", "sp=racwdl")}}
    assert refused(lambda: container(az, forged).upload_blob("data/t/new.parquet", b"x")) == "AuthorizationFailure"


async def test_a_read_write_sas_writes_and_deletes(ws, az):
    table = await lake(ws, az)
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert parse_qs(sas_of(answer))["sp"] == ["racwdl"]
    client = container(az, answer)
    client.upload_blob("data/t/written.parquet", b"new", overwrite=True)
    assert read(client, "data/t/written.parquet") == b"new"
    client.delete_blob("data/t/written.parquet")
    assert refused(lambda: read(container(az, answer, "other"), "x.csv")) == "AuthorizationFailure"


async def test_grants_decide_who_gets_a_sas(ws, server, az):
    table = await lake(ws, az)
    nobody = await user(server, ws)
    for body in ({"table_id": table["table_id"], "operation": "READ"},):
        status, answer = await nobody.call("POST", "/temporary-table-credentials", json=body)
        assert status in (403, 404) and "azure_user_delegation_sas" not in answer, answer
    # A location the caller holds nothing on answers as no location at all (docs/security.md).
    status, answer = await nobody.call("POST", "/temporary-path-credentials",
                                       json={"url": adls(az, "data/free"), "operation": "PATH_READ"})
    assert status == 400 and "not inside any external location" in answer["message"], answer
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.t", reader.name, "SELECT")
    got = await ok(reader, "POST", "/temporary-table-credentials",
                   json={"table_id": table["table_id"], "operation": "READ"})
    assert read(container(az, got), "data/t/part-0.parquet")
    status, answer = await reader.call("POST", "/temporary-table-credentials",
                                       json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert status == 403 and "sas_token" not in json.dumps(answer), answer
    # By path, the owning table decides: SELECT reads t's directory, nothing in u's or the location's.
    got = await ok(reader, "POST", "/temporary-path-credentials",
                   json={"url": adls(az, "data/t/_delta_log"), "operation": "PATH_READ"})
    assert got["url"] == adls(az, "data/t/_delta_log")
    for url, status_wanted in ((adls(az, "data/u"), 403), (adls(az, "data/free"), 400)):
        status, answer = await reader.call("POST", "/temporary-path-credentials",
                                           json={"url": url, "operation": "PATH_READ"})
        assert status == status_wanted and "sas_token" not in json.dumps(answer), (url, answer)


@pytest.mark.parametrize("spelling", [
    "abfs://lake@{a}.dfs.core.windows.net/data/t",
    "ABFSS://LAKE@{A}.DFS.CORE.WINDOWS.NET/data/t/",
    "abfss://lake@{a}.dfs.core.windows.net/data//x/../t/.",
    "abfss://lake@{a}.dfs.core.windows.net/data/%74",
])
async def test_spellings_of_the_table_path_reach_the_same_decision(ws, server, az, spelling):
    await lake(ws, az)
    url = spelling.format(a=az.account, A=az.account.upper())
    answer = await ok(ws, "POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
    assert answer["url"] == adls(az, "data/t")
    # A user with SELECT on u only is refused t, however it is spelled.
    other = await user(server, ws)
    await grant(ws, "catalog", "main", other.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", other.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.u", other.name, "SELECT")
    status, body = await other.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
    assert status == 403 and "sas_token" not in json.dumps(body), body


@pytest.mark.parametrize("spelling, code", [
    ("wasbs://lake@{a}.blob.core.windows.net/data/t", 400),
    ("abfss://lake@{a}.blob.core.windows.net/data/t", 400),
    ("abfss://lake@{a}.dfs.core.windows.net/data%2Ft", 400),
    ("abfss://lake@{a}.dfs.core.windows.net/outside", 400),      # in no external location
    ("abfss://other@{a}.dfs.core.windows.net/x.csv", 400),
])
async def test_spellings_that_are_refused(ws, az, spelling, code):
    await lake(ws, az)
    status, body = await ws.call("POST", "/temporary-path-credentials",
                                 json={"url": spelling.format(a=az.account), "operation": "PATH_READ"})
    assert status == code and "sas_token" not in json.dumps(body), body


async def test_a_read_only_location_vends_no_write_sas(ws, az):
    table = await lake(ws, az)
    await ok(ws, "PATCH", "/external-locations/data", json={"read_only": True})
    status, body = await ws.call("POST", "/temporary-table-credentials",
                                 json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert status == 403 and "read-only" in body["message"], body


async def test_a_credential_of_another_account_vends_nothing(ws, az):
    await lake(ws, az, account_name="someoneelse")
    status, body = await ws.call("POST", "/temporary-path-credentials",
                                 json={"url": adls(az, "data/t"), "operation": "PATH_READ"})
    assert status == 400 and "someoneelse" in body["message"], body


async def test_the_sas_expires_with_the_answer(ws, az, monkeypatch):
    table = await lake(ws, az)
    monkeypatch.setattr(vending_azure, "MIN_SECONDS", 1)       # Azure takes any lifetime; the bound is shardcat's
    monkeypatch.setenv("SHARDCAT_CREDENTIAL_SECONDS", "2")
    vending_azure.AZURE.cache.clear()                           # earlier tests' hour-long answers for data/t
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ"})
    assert answer["expiration_time"] / 1000 - time.time() <= 2.1
    assert read(container(az, answer), "data/t/part-0.parquet")
    time.sleep(max(0.0, answer["expiration_time"] / 1000 - time.time()) + 1.5)
    assert refused(lambda: read(container(az, answer), "data/t/part-0.parquet")) == "AuthorizationFailure"
    again = await ok(ws, "POST", "/temporary-table-credentials",
                     json={"table_id": table["table_id"], "operation": "READ"})
    assert sas_of(again) != sas_of(answer)                     # not served from the cache once expired


async def test_unexpired_answers_are_reused(ws, az):
    table = await lake(ws, az)
    body = {"table_id": table["table_id"], "operation": "READ"}
    first = await ok(ws, "POST", "/temporary-table-credentials", json=body)
    hits = vending_azure.AZURE.stats["cache_hits"]
    assert await ok(ws, "POST", "/temporary-table-credentials", json=body) == first
    assert vending_azure.AZURE.stats["cache_hits"] == hits + 1
    write = await ok(ws, "POST", "/temporary-table-credentials", json={**body, "operation": "READ_WRITE"})
    assert sas_of(write) != sas_of(first)


def test_an_adls_gen2_sas_is_scoped_to_the_directory():
    """Hierarchical namespace: a directory SAS on exactly the asset's directory (Azurite cannot serve these)."""
    from datetime import datetime, timedelta, timezone
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)
    token = vending_azure.sign_sas("acct", "lake", "data/t", write=False, expiry=expiry, account_key="a2V5")
    fields = parse_qs(token)
    assert (fields["sr"], fields["sdd"], fields["sp"], fields["spr"]) == (["d"], ["2"], ["rl"], ["https"])
    token = vending_azure.sign_sas("acct", "lake", "data/t/p=1", write=True, expiry=expiry, account_key="a2V5")
    assert parse_qs(token)["sdd"] == ["3"] and parse_qs(token)["sp"] == ["racwdl"]
    root = parse_qs(vending_azure.sign_sas("acct", "lake", "", write=False, expiry=expiry, account_key="a2V5"))
    assert root["sr"] == ["c"]         # the asset is the whole container


async def test_volumes_and_batched_resolve_vend_the_same_way(ws, server, az):
    await lake(ws, az)
    volume = await ok(ws, "POST", "/volumes", json={"name": "v", "catalog_name": "main", "schema_name": "s",
                                                    "volume_type": "EXTERNAL", "storage_location": adls(az, "data/free")})
    answer = await ok(ws, "POST", "/temporary-volume-credentials",
                      json={"volume_id": volume["volume_id"], "operation": "READ_VOLUME"})
    assert answer["url"] == adls(az, "data/free") and parse_qs(sas_of(answer))["sp"] == ["rl"]
    assert read(container(az, answer), "data/free/f.csv") == b"content of data/free/f.csv"
    written = await ok(ws, "POST", "/temporary-volume-credentials",
                       json={"volume_id": volume["volume_id"], "operation": "WRITE_VOLUME"})
    container(az, written).upload_blob("data/free/g.csv", b"g", overwrite=True)
    # A user with READ VOLUME only gets no write SAS; one without it none at all.
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")
    await grant(ws, "volume", "main.s.v", reader.name, "READ VOLUME")
    assert read(container(az, await ok(reader, "POST", "/temporary-volume-credentials", json={
        "volume_id": volume["volume_id"], "operation": "READ_VOLUME"})), "data/free/g.csv") == b"g"
    status, body = await reader.call("POST", "/temporary-volume-credentials",
                                     json={"volume_id": volume["volume_id"], "operation": "WRITE_VOLUME"})
    assert status == 403 and "sas_token" not in json.dumps(body), body
    # Batched resolve attaches the same answer to each table it may read, and none to the others.
    await grant(ws, "table", "main.s.t", reader.name, "SELECT")
    out = await ok(reader, "POST", "/resolve", json={"items": [{"name": "main.s.t"}, {"name": "main.s.u"}]})
    t, u = out["items"]
    assert read(container(az, t["temporary_credentials"]), "data/t/part-0.parquet")
    assert "temporary_credentials" not in u and "sas_token" not in json.dumps(u)


@pytest.fixture(scope="module")
def az_oauth():
    """Azurite over HTTPS with Entra ID tokens accepted, and the Entra ID stand-in with one service principal."""
    emulator = Azurite(oauth=True)
    entra = EntraId(emulator.cert, emulator.cert.with_name("key.pem"), str(uuid.uuid4()),
                    {"lake-reader-app": "app-secret-" + uuid.uuid4().hex})
    service = ContainerClient(emulator.endpoint, "lake", credential={"account_name": emulator.account,
                                                                     "account_key": emulator.key},
                              connection_verify=str(emulator.cert))
    service.create_container()
    service.upload_blob("data/t/part-0.parquet", b"over TLS")
    yield emulator, entra
    entra.stop()
    emulator.stop()


async def test_a_service_principal_vends_a_user_delegation_sas(ws, az_oauth, monkeypatch):
    """azure_service_principal: shardcat signs in to Entra ID (the stand-in), asks Azurite for a user delegation
    key with that token, and signs the SAS with it; Azurite checks the SAS against the key it derived."""
    emulator, entra = az_oauth
    monkeypatch.setenv("SHARDCAT_AZURE_AUTHORITY_HOST", entra.url)
    monkeypatch.setenv("SHARDCAT_AZURE_STORAGE_ENDPOINTS", emulator.endpoint)   # tokens may go to Azurite
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(emulator.cert))         # the loopback certificate, for both
    [(app, secret)] = entra.apps.items()
    principal = {"directory_id": entra.tenant, "application_id": app, "client_secret": secret,
                 "endpoint_url": emulator.endpoint, "hierarchical_namespace": False}
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "sp", "azure_service_principal": principal})
    await ok(ws, "POST", "/external-locations", json={"name": "data", "url": adls(emulator, "data"),
                                                      "credential_name": "sp"})
    table = await ok(ws, "POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": adls(emulator, "data/t")})
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ"})
    signed = parse_qs(sas_of(answer))
    assert signed["skoid"] == [entra.object_ids[app]] and signed["sktid"] == [entra.tenant] and signed["sp"] == ["rl"]
    assert entra.issued == [app]
    client = ContainerClient(emulator.endpoint, "lake", credential=sas_of(answer), connection_verify=str(emulator.cert))
    assert read(client, "data/t/part-0.parquet") == b"over TLS"
    assert refused(lambda: client.upload_blob("data/t/x", b"x")) == "AuthorizationPermissionMismatch"
    # Another path's SAS is signed with the same user delegation key: no second sign-in.
    inner = await ok(ws, "POST", "/temporary-path-credentials",
                     json={"url": adls(emulator, "data/t/_delta_log"), "operation": "PATH_READ"})
    assert entra.issued == [app]        # (a container SAS: the same for both paths within one second)
    assert read(ContainerClient(emulator.endpoint, "lake", credential=sas_of(inner), connection_verify=str(emulator.cert)),
                "data/t/part-0.parquet") == b"over TLS"
    # A secret Entra ID does not know: no token, so no key and no SAS.
    await ok(ws, "PATCH", "/storage-credentials/sp", json={"azure_service_principal": {"client_secret": "wrong"}})
    vending_azure.AZURE.cache.clear()
    vending_azure.AZURE.delegation_keys.clear()
    status, body = await ws.call("POST", "/temporary-table-credentials",
                                 json={"table_id": table["table_id"], "operation": "READ"})
    assert status == 400 and "Entra ID refused" in body["message"] and "sas_token" not in json.dumps(body), body
    assert entra.issued == [app]


async def test_a_managed_identity_vends_a_user_delegation_sas(ws, az_oauth, monkeypatch):
    """azure_managed_identity: the machine's instance metadata service (the stand-in) gives shardcat a token for
    the user-assigned identity the credential names, Azurite a user delegation key for it; the SAS it signs
    reads inside the container, writes only when asked to, reaches no other container, and expires."""
    emulator, entra = az_oauth
    assigned = ("/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/lake/providers/"
                "Microsoft.ManagedIdentity/userAssignedIdentities/lake-reader")
    imds = InstanceMetadata(entra.tenant, {assigned: str(uuid.uuid4())}, system=str(uuid.uuid4()))
    monkeypatch.setenv("SHARDCAT_AZURE_AUTHORITY_HOST", entra.url)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", imds.url)      # the SDK's own setting for IMDS
    monkeypatch.setenv("SHARDCAT_AZURE_STORAGE_ENDPOINTS", emulator.endpoint)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(emulator.cert))
    vending_azure.AZURE.cache.clear()
    vending_azure.AZURE.delegation_keys.clear()
    verify = {"connection_verify": str(emulator.cert)}
    admin = ContainerClient(emulator.endpoint, "mi-other", credential={"account_name": emulator.account,
                                                                       "account_key": emulator.key}, **verify)
    admin.create_container()
    admin.upload_blob("x.csv", b"not for the identity")
    try:
        identity = {"access_connector_id": "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/lake/"
                                           "providers/Microsoft.Databricks/accessConnectors/lake",
                    "managed_identity_id": assigned, "endpoint_url": emulator.endpoint, "hierarchical_namespace": False}
        await ok(ws, "POST", "/catalogs", json={"name": "main"})
        await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
        await ok(ws, "POST", "/storage-credentials", json={"name": "mi", "azure_managed_identity": identity})
        await ok(ws, "POST", "/external-locations", json={"name": "data", "url": adls(emulator, "data"),
                                                          "credential_name": "mi"})
        table = await ok(ws, "POST", "/tables", json={
            "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
            "data_source_format": "PARQUET", "columns": COLS, "storage_location": adls(emulator, "data/t")})
        body = {"table_id": table["table_id"], "operation": "READ"}
        answer = await ok(ws, "POST", "/temporary-table-credentials", json=body)
        signed = parse_qs(sas_of(answer))
        assert signed["skoid"] == [imds.assigned[assigned]] and signed["sktid"] == [entra.tenant], signed
        assert signed["sp"] == ["rl"] and imds.issued == [imds.assigned[assigned]]
        client = ContainerClient(emulator.endpoint, "lake", credential=sas_of(answer), **verify)
        assert read(client, "data/t/part-0.parquet") == b"over TLS"
        assert refused(lambda: client.upload_blob("data/t/x", b"x")) == "AuthorizationPermissionMismatch"
        other = ContainerClient(emulator.endpoint, "mi-other", credential=sas_of(answer), **verify)
        assert refused(lambda: read(other, "x.csv")) == "AuthorizationFailure"
        forged = sas_of(answer).replace("sp=rl", "sp=racwdl")
        assert refused(lambda: ContainerClient(emulator.endpoint, "lake", credential=forged, **verify)
                       .upload_blob("data/t/x", b"x")) == "AuthorizationFailure"
        write = await ok(ws, "POST", "/temporary-table-credentials", json={**body, "operation": "READ_WRITE"})
        ContainerClient(emulator.endpoint, "lake", credential=sas_of(write), **verify).upload_blob(
            "data/t/mi.parquet", b"mi", overwrite=True)
        assert imds.issued == [imds.assigned[assigned]]       # one token, one delegation key, two SAS
        # A SAS dies with its answer.
        monkeypatch.setattr(vending_azure, "MIN_SECONDS", 1)       # Azure takes any lifetime; the bound is shardcat's
        monkeypatch.setenv("SHARDCAT_CREDENTIAL_SECONDS", "3")
        vending_azure.AZURE.cache.clear()
        short = await ok(ws, "POST", "/temporary-table-credentials", json=body)
        assert short["expiration_time"] / 1000 - time.time() <= 3.1
        client = ContainerClient(emulator.endpoint, "lake", credential=sas_of(short), **verify)
        assert read(client, "data/t/part-0.parquet") == b"over TLS"
        time.sleep(max(0.0, short["expiration_time"] / 1000 - time.time()) + 1.5)
        assert refused(lambda: read(client, "data/t/part-0.parquet")) == "AuthorizationFailure"
        # An identity the machine does not hold: IMDS refuses, nothing is signed.
        await ok(ws, "PATCH", "/storage-credentials/mi", json={"azure_managed_identity": {
            "managed_identity_id": assigned.replace("lake-reader", "someone-else")}})
        vending_azure.AZURE.cache.clear()
        vending_azure.AZURE.delegation_keys.clear()
        status, refusal = await ws.call("POST", "/temporary-table-credentials", json=body)
        assert status == 400 and "instance metadata service" in refusal["message"], refusal
        assert "sas_token" not in json.dumps(refusal) and imds.issued == [imds.assigned[assigned]]
    finally:
        imds.stop()
        admin.delete_container()


@pytest.mark.parametrize("spelling", [
    "abfs://lake@{a}.dfs.core.windows.net/data/inner",          # the non-TLS spelling of the same place
    "ABFSS://LAKE@{A}.DFS.CORE.WINDOWS.NET/data",
    "abfss://lake@{a}.dfs.core.windows.net/x/../data/t",
])
async def test_another_location_cannot_overlap_by_spelling(ws, server, az, spelling):
    """A second credential's location over the first one's storage, spelled otherwise: refused, so no
    second key reaches those files."""
    await lake(ws, az)
    await ok(ws, "POST", "/storage-credentials", json={"name": "az2", "azure_storage_key": credential(az)})
    url = spelling.format(a=az.account, A=az.account.upper())
    status, body = await ws.call("POST", "/external-locations", json={"name": "again", "url": url,
                                                                     "credential_name": "az2"})
    assert status == 400 and ("overlaps" in body["message"] or "inside the storage" in body["message"]), body
