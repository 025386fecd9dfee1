"""Credentials, external locations and temporary credentials through the official SDK
(`unitycatalog-client`: CredentialsApi, ExternalLocationsApi, TemporaryCredentialsApi),
models compared field by field between create, get, list, update and the raw JSON."""

from __future__ import annotations

import time
import uuid

import pytest
from unitycatalog.client import (
    ApiClient,
    Configuration,
    CredentialsApi,
    ExternalLocationsApi,
    TablesApi,
    TemporaryCredentialsApi,
)
from unitycatalog.client.exceptions import ApiException
from unitycatalog.client.models import (
    AwsIamRoleRequest,
    CreateCredentialRequest,
    CreateExternalLocation,
    CredentialInfo,
    CredentialPurpose,
    ExternalLocationInfo,
    GenerateTemporaryPathCredential,
    GenerateTemporaryTableCredential,
    GenerateTemporaryVolumeCredential,
    PathOperation,
    TableOperation,
    UpdateCredentialRequest,
    UpdateExternalLocation,
    VolumeOperation,
)

from shardcat.entities.urls import join_url, normalize_url
from shardcat.catalog.tree.storage import UC_IAM_ARN

ADMIN = "admin"
ROLE = "arn:aws:iam::123456789012:role/uc-access"


@pytest.fixture
async def api(ws):
    async with ApiClient(Configuration(host=ws.api), header_name="Authorization",
                         header_value=f"Bearer {ws.token}") as client:
        yield CredentialsApi(client), ExternalLocationsApi(client), TemporaryCredentialsApi(client), TablesApi(client)


def now_ms() -> int:
    return int(time.time() * 1000)


def code_of(e: ApiException) -> str:
    import json
    return json.loads(e.body)["error_code"]


async def make_credential(creds, name="cred", role=ROLE, comment="c") -> CredentialInfo:
    return await creds.create_credential(CreateCredentialRequest(
        name=name, comment=comment, aws_iam_role=AwsIamRoleRequest(role_arn=role), purpose=CredentialPurpose.STORAGE))


async def test_credential_round_trip(ws, api):
    creds, *_ = api
    t0 = now_ms()
    made = await make_credential(creds, name="Cred")
    t1 = now_ms()
    assert made.name == "cred" and made.full_name == "cred" and made.comment == "c"
    assert str(uuid.UUID(made.id)) == made.id
    assert made.purpose == CredentialPurpose.STORAGE
    assert made.aws_iam_role.role_arn == ROLE
    assert made.aws_iam_role.unity_catalog_iam_arn == UC_IAM_ARN
    assert str(uuid.UUID(made.aws_iam_role.external_id)) == made.aws_iam_role.external_id
    assert made.owner == made.created_by == made.updated_by == ADMIN
    assert t0 - 5 <= made.created_at == made.updated_at <= t1 + 5

    got = await creds.get_credential("CRED")
    assert got == made
    status, raw = await ws.call("GET", "/credentials/cred")
    assert status == 200 and CredentialInfo.from_dict(raw) == got
    assert raw["metastore_id"] == ws.metastore_id
    listed = await creds.list_credentials()
    assert listed.credentials == [made] and listed.next_page_token is None

    # The 2.1 naming sees the same object.
    status, raw21 = await ws.call("GET", "/storage-credentials/cred")
    assert status == 200 and CredentialInfo.from_dict(raw21) == got

    new_role = "arn:aws:iam::123456789012:role/other"
    updated = await creds.update_credential("cred", UpdateCredentialRequest(
        comment="new", aws_iam_role=AwsIamRoleRequest(role_arn=new_role), new_name="cred2"))
    assert updated.name == "cred2" and updated.id == made.id and updated.comment == "new"
    assert updated.aws_iam_role.role_arn == new_role
    assert updated.aws_iam_role.external_id == made.aws_iam_role.external_id   # stable for the credential's life
    assert updated.created_at == made.created_at <= updated.updated_at
    assert await creds.get_credential("cred2") == updated
    with pytest.raises(ApiException) as e:
        await creds.get_credential("cred")
    assert e.value.status == 404 and code_of(e.value) == "NOT_FOUND"

    await creds.delete_credential("cred2")
    assert (await creds.list_credentials()).credentials in (None, [])


async def test_credential_listing_pages(ws, api):
    creds, *_ = api
    for i in range(5):
        await make_credential(creds, name=f"c{i}")
    names, token = [], None
    for _ in range(10):
        page = await creds.list_credentials(max_results=2, page_token=token)
        assert len(page.credentials) <= 2
        names += [c.name for c in page.credentials]
        token = page.next_page_token
        if not token:
            break
    assert names == [f"c{i}" for i in range(5)]
    filtered = await creds.list_credentials(purpose=CredentialPurpose.STORAGE)
    assert [c.name for c in filtered.credentials] == names


async def test_external_location_round_trip(ws, api, tmp_path):
    creds, locations, *_ = api
    cred = await make_credential(creds)
    url = normalize_url(str(tmp_path / "ext"))
    t0 = now_ms()
    made = await locations.create_external_location(CreateExternalLocation(
        name="Loc", url=str(tmp_path / "ext") + "/", credential_name="CRED", comment="x"))
    t1 = now_ms()
    assert made.name == "loc" and made.url == url and made.credential_name == "cred"
    assert made.credential_id == cred.id and made.comment == "x" and made.owner == ADMIN
    assert t0 - 5 <= made.created_at == made.updated_at <= t1 + 5
    assert await locations.get_external_location("loc") == made
    status, raw = await ws.call("GET", "/external-locations/loc")
    assert status == 200 and ExternalLocationInfo.from_dict(raw) == made and raw["read_only"] is False
    assert (await locations.list_external_locations()).external_locations == [made]

    # Renaming the credential carries the location's credential_name along.
    await creds.update_credential("cred", UpdateCredentialRequest(new_name="cred_b"))
    assert (await locations.get_external_location("loc")).credential_name == "cred_b"

    moved = normalize_url(str(tmp_path / "ext2"))
    updated = await locations.update_external_location("loc", UpdateExternalLocation(
        url=moved, comment="y", new_name="loc2"))
    assert (updated.name, updated.url, updated.comment, updated.id) == ("loc2", moved, "y", made.id)
    assert await locations.get_external_location("loc2") == updated

    # A credential in use cannot go without force.
    with pytest.raises(ApiException) as e:
        await creds.delete_credential("cred_b")
    assert code_of(e.value) == "FAILED_PRECONDITION" and "loc2" in e.value.body
    await locations.delete_external_location("loc2")
    await creds.delete_credential("cred_b")
    assert (await locations.list_external_locations()).external_locations in (None, [])


async def test_external_tables_must_lie_in_a_location_once_one_exists(ws, api, tmp_path):
    creds, locations, _, _ = api
    for body in ({"name": "main"}, ):
        assert (await ws.call("POST", "/catalogs", json=body))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "main"}))[0] == 200
    table = {"catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "DELTA",
             "columns": [{"name": "id", "type_name": "LONG"}]}
    # Local mode: no external location yet, any path will do.
    status, _ = await ws.call("POST", "/tables", json={**table, "name": "free", "storage_location": "s3://b/free"})
    assert status == 200
    await make_credential(creds)
    await locations.create_external_location(CreateExternalLocation(name="loc", url="s3://b/governed",
                                                                     credential_name="cred"))
    status, body = await ws.call("POST", "/tables", json={**table, "name": "out", "storage_location": "s3://b/other"})
    assert status == 400 and "not inside any external location" in body["message"]
    status, body = await ws.call("POST", "/tables", json={**table, "name": "inside",
                                                          "storage_location": "s3://b/governed/t"})
    assert status == 200, body
    # The location now holds a table: no delete without force; with force it goes, the table stays.
    with pytest.raises(ApiException) as e:
        await locations.delete_external_location("loc")
    assert code_of(e.value) == "FAILED_PRECONDITION" and "main.s.inside" in e.value.body
    await locations.delete_external_location("loc", force=True)
    assert (await ws.call("GET", "/tables/main.s.inside"))[0] == 200


async def test_temporary_credentials_for_file_storage(ws, api, tmp_path):
    creds, locations, temp, tables = api
    await ws.call("POST", "/catalogs", json={"name": "main"})
    await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    status, table = await ws.call("POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200
    t0 = now_ms()
    for op in (TableOperation.READ, TableOperation.READ_WRITE):
        got = await temp.generate_temporary_table_credentials(
            GenerateTemporaryTableCredential(table_id=table["table_id"], operation=op))
        assert got.url == table["storage_location"]
        assert got.aws_temp_credentials is None and got.azure_user_delegation_sas is None \
            and got.gcp_oauth_token is None
        assert t0 + 3_500_000 <= got.expiration_time <= now_ms() + 3_600_000

    with pytest.raises(ApiException) as e:
        await temp.generate_temporary_table_credentials(
            GenerateTemporaryTableCredential(table_id=str(uuid.uuid4()), operation=TableOperation.READ))
    assert e.value.status == 404 and code_of(e.value) == "NOT_FOUND"
    with pytest.raises(ApiException) as e:
        await temp.generate_temporary_volume_credentials(
            GenerateTemporaryVolumeCredential(volume_id=str(uuid.uuid4()), operation=VolumeOperation.READ_VOLUME))
    assert e.value.status == 404

    await make_credential(creds)
    base = join_url(normalize_url(str(tmp_path)), "data")
    await locations.create_external_location(CreateExternalLocation(name="loc", url=base, credential_name="cred"))
    path = join_url(base, "new_table")
    for op in (PathOperation.PATH_READ, PathOperation.PATH_READ_WRITE, PathOperation.PATH_CREATE_TABLE):
        got = await temp.generate_temporary_path_credentials(GenerateTemporaryPathCredential(url=path, operation=op))
        assert got.url == path and got.expiration_time > t0
    # Outside every external location, and in managed storage: refused.
    with pytest.raises(ApiException) as e:
        await temp.generate_temporary_path_credentials(GenerateTemporaryPathCredential(
            url=normalize_url(str(tmp_path / "elsewhere")), operation=PathOperation.PATH_READ))
    assert code_of(e.value) == "INVALID_PARAMETER_VALUE" and "not inside any external location" in e.value.body
    # A read-only location hands out no write credentials.
    await locations.update_external_location("loc", UpdateExternalLocation())
    status, _ = await ws.call("PATCH", "/external-locations/loc", json={"read_only": True})
    assert status == 200
    with pytest.raises(ApiException) as e:
        await temp.generate_temporary_path_credentials(
            GenerateTemporaryPathCredential(url=path, operation=PathOperation.PATH_READ_WRITE))
    assert e.value.status == 403 and "read-only" in e.value.body
    got = await temp.generate_temporary_path_credentials(
        GenerateTemporaryPathCredential(url=path, operation=PathOperation.PATH_READ))
    assert got.url == path


async def test_cloud_paths_get_a_clear_error(ws, api):
    creds, locations, temp, _ = api
    await make_credential(creds)
    await locations.create_external_location(CreateExternalLocation(name="loc", url="s3://bucket/x",
                                                                     credential_name="cred"))
    with pytest.raises(ApiException) as e:
        await temp.generate_temporary_path_credentials(
            GenerateTemporaryPathCredential(url="s3://bucket/x/t", operation=PathOperation.PATH_READ))
    assert code_of(e.value) == "FAILED_PRECONDITION" and "does not vend s3://" in e.value.body


async def test_temporary_volume_credentials(ws, api):
    _, _, temp, _ = api
    await ws.call("POST", "/catalogs", json={"name": "main"})
    await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    status, volume = await ws.call("POST", "/volumes", json={"name": "v", "catalog_name": "main", "schema_name": "s",
                                                              "volume_type": "MANAGED"})
    assert status == 200, volume
    for op in (VolumeOperation.READ_VOLUME, VolumeOperation.WRITE_VOLUME):
        got = await temp.generate_temporary_volume_credentials(
            GenerateTemporaryVolumeCredential(volume_id=volume["volume_id"], operation=op))
        assert got.url == volume["storage_location"] and got.expiration_time > now_ms()
        assert got.aws_temp_credentials is None
    # A table's id is not a volume's.
    status, table = await ws.call("POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    with pytest.raises(ApiException) as e:
        await temp.generate_temporary_volume_credentials(
            GenerateTemporaryVolumeCredential(volume_id=table["table_id"], operation=VolumeOperation.READ_VOLUME))
    assert e.value.status == 404
