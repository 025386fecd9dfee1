"""Conformance through the official Python SDK (`unitycatalog-client`): volumes, functions,
registered models, model versions and model-version credentials against a real server.

Each returned model is compared field by field with what was sent plus the fields the
server sets (ids, owner, timestamps, storage locations, version numbers, status).
"""

from __future__ import annotations

import time

import pytest
from governance_users import grant, user
from unitycatalog.client import (
    ApiClient,
    Configuration,
    FunctionsApi,
    ModelVersionsApi,
    RegisteredModelsApi,
    TemporaryCredentialsApi,
    VolumesApi,
)
from unitycatalog.client.exceptions import ApiException, BadRequestException, NotFoundException
from unitycatalog.client.models import (
    ColumnTypeName,
    CreateFunction,
    CreateFunctionRequest,
    CreateModelVersion,
    CreateRegisteredModel,
    CreateVolumeRequestContent,
    Dependency,
    DependencyList,
    FinalizeModelVersion,
    FunctionDependency,
    FunctionParameterInfo,
    FunctionParameterInfos,
    GenerateTemporaryModelVersionCredential,
    ModelVersionOperation,
    ModelVersionStatus,
    TableDependency,
    UpdateModelVersion,
    UpdateRegisteredModel,
    UpdateVolumeRequestContent,
    VolumeType,
)

from shardcat.entities.urls import join_url, normalize_url

ADMIN = "admin"


@pytest.fixture
async def client(ws):
    status, _ = await ws.call("POST", "/catalogs", json={"name": "main"})      # with its schema `default`
    assert status == 200
    async with ApiClient(Configuration(host=ws.api), header_name="Authorization",
                         header_value=f"Bearer {ws.token}") as c:
        yield c


def assert_server_fields(info, before_ms: int, id_field: str = "id"):
    now = int(time.time() * 1000)
    assert getattr(info, id_field)
    assert info.created_by == ADMIN and info.updated_by == ADMIN
    assert before_ms <= info.created_at <= info.updated_at <= now


# ---- volumes ---------------------------------------------------------------------


async def test_volumes_managed_and_external(ws, client, tmp_path):
    api = VolumesApi(client)
    t0 = int(time.time() * 1000)
    managed = await api.create_volume(CreateVolumeRequestContent(
        catalog_name="main", schema_name="default", name="Raw", volume_type=VolumeType.MANAGED, comment="landing"))
    assert (managed.catalog_name, managed.schema_name, managed.name, managed.full_name) == \
        ("main", "default", "raw", "main.default.raw")
    assert managed.volume_type == VolumeType.MANAGED and managed.comment == "landing" and managed.owner == ADMIN
    assert_server_fields(managed, t0, "volume_id")
    # Managed storage under the nearest root (here the metastore's), named by the volume's id.
    assert managed.storage_location == join_url(ws.storage_root, "volumes", managed.volume_id)

    external_url = normalize_url(str(tmp_path / "external" / "vol"))
    external = await api.create_volume(CreateVolumeRequestContent(
        catalog_name="main", schema_name="default", name="ext", volume_type=VolumeType.EXTERNAL,
        storage_location=str(tmp_path / "external" / "vol") + "/"))
    assert external.volume_type == VolumeType.EXTERNAL and external.storage_location == external_url
    assert external.comment is None

    assert await api.get_volume("main.default.raw") == managed
    listed = await api.list_volumes("main", "default")
    assert listed.volumes == [external, managed] and listed.next_page_token is None
    page = await api.list_volumes("main", "default", max_results=1)
    assert page.volumes == [external] and page.next_page_token
    assert (await api.list_volumes("main", "default", page_token=page.next_page_token)).volumes == [managed]

    # One asset per path: a second volume inside the external one is refused.
    with pytest.raises(BadRequestException) as e:
        await api.create_volume(CreateVolumeRequestContent(
            catalog_name="main", schema_name="default", name="inner", volume_type=VolumeType.EXTERNAL,
            storage_location=external_url + "/sub"))
    assert "overlaps" in e.value.body and "main.default.ext" in e.value.body

    renamed = await api.update_volume("main.default.raw", UpdateVolumeRequestContent(new_name="bronze", comment="b"))
    assert (renamed.name, renamed.full_name, renamed.comment) == ("bronze", "main.default.bronze", "b")
    assert renamed.volume_id == managed.volume_id and renamed.storage_location == managed.storage_location
    assert renamed.created_at == managed.created_at and renamed.updated_at >= managed.updated_at
    with pytest.raises(NotFoundException):
        await api.get_volume("main.default.raw")

    await api.delete_volume("main.default.ext")
    with pytest.raises(NotFoundException):
        await api.get_volume("main.default.ext")
    # Its path is free again.
    again = await api.create_volume(CreateVolumeRequestContent(
        catalog_name="main", schema_name="default", name="ext2", volume_type=VolumeType.EXTERNAL,
        storage_location=external_url))
    assert again.storage_location == external_url


async def test_volume_shares_no_namespace_with_tables(ws, client):
    """Volumes have their own namespace, as in the open-source server: a table may share the name."""
    status, _ = await ws.call("POST", "/tables", json={
        "name": "events", "catalog_name": "main", "schema_name": "default", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200
    vol = await VolumesApi(client).create_volume(CreateVolumeRequestContent(
        catalog_name="main", schema_name="default", name="events", volume_type=VolumeType.MANAGED))
    assert vol.full_name == "main.default.events"


# ---- functions ---------------------------------------------------------------------


def _param(name: str, position: int, type_name=ColumnTypeName.INT, text="int", json_type="integer"):
    return FunctionParameterInfo(
        name=name, type_text=text, type_json=f'{{"name":"{name}","type":"{json_type}","nullable":true,"metadata":{{}}}}',
        type_name=type_name, position=position, comment=f"the {name}")


async def test_functions_sql_and_python(client):
    api = FunctionsApi(client)
    t0 = int(time.time() * 1000)
    sql = CreateFunction(
        name="add_one", catalog_name="main", schema_name="default",
        input_params=FunctionParameterInfos(parameters=[_param("x", 0)]),
        data_type=ColumnTypeName.INT, full_data_type="INT", routine_body="SQL", routine_definition="x + 1",
        routine_dependencies=DependencyList(dependencies=[
            Dependency(table=TableDependency(table_full_name="main.default.t")),
            Dependency(function=FunctionDependency(function_full_name="main.default.helper"))]),
        parameter_style="S", is_deterministic=True, sql_data_access="CONTAINS_SQL", is_null_call=False,
        security_type="DEFINER", specific_name="add_one", comment="adds one", properties='{"team": "ml"}')
    created = await api.create_function(CreateFunctionRequest(function_info=sql))
    sent = sql.to_dict()
    got = created.to_dict()
    for key, value in sent.items():
        assert got[key] == value, key
    assert created.full_name == "main.default.add_one" and created.owner == ADMIN
    assert_server_fields(created, t0, "function_id")

    python = CreateFunction(
        name="concat", catalog_name="main", schema_name="default",
        input_params=FunctionParameterInfos(parameters=[
            _param("b", 1, ColumnTypeName.STRING, "string", "string"),
            _param("a", 0, ColumnTypeName.STRING, "string", "string")]),
        data_type=ColumnTypeName.STRING, full_data_type="STRING", routine_body="EXTERNAL",
        routine_definition="return a + b", external_language="PYTHON", parameter_style="S",
        is_deterministic=True, sql_data_access="NO_SQL", is_null_call=False, security_type="DEFINER",
        specific_name="concat")
    py = await api.create_function(CreateFunctionRequest(function_info=python))
    # Parameters come back in position order.
    assert [p.name for p in py.input_params.parameters] == ["a", "b"]
    assert py.external_language == "PYTHON" and py.routine_body == "EXTERNAL"

    assert await api.get_function("main.default.add_one") == created
    listed = await api.list_functions("main", "default")
    assert listed.functions == [created, py]
    page = await api.list_functions("main", "default", max_results=1)
    assert page.functions == [created]
    assert (await api.list_functions("main", "default", page_token=page.next_page_token)).functions == [py]

    with pytest.raises(ApiException) as e:
        await api.create_function(CreateFunctionRequest(function_info=sql))
    assert e.value.status == 409 and "ALREADY_EXISTS" in e.value.body
    await api.delete_function("main.default.add_one")
    with pytest.raises(NotFoundException):
        await api.get_function("main.default.add_one")
    assert (await api.list_functions("main", "default")).functions == [py]


async def test_update_function_changes_only_its_owner(ws, server, client):
    """The 2.1 API's PATCH /functions/{name}: the owner changes, every other field is ignored; it
    needs ownership or MANAGE (on the function or above it), and a function the caller may not see
    answers as a missing one."""
    info = {"name": "twice", "catalog_name": "main", "schema_name": "default", "data_type": "INT",
            "full_data_type": "INT", "input_params": {"parameters": []}, "routine_body": "SQL",
            "routine_definition": "2", "parameter_style": "S", "is_deterministic": True,
            "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER",
            "specific_name": "twice"}
    status, created = await ws.call("POST", "/functions", json={"function_info": info})
    assert status == 200, created
    alice = await user(server, ws)
    status, updated = await ws.call("PATCH", "/functions/main.default.twice",
                                    json={"owner": alice.name, "routine_definition": "3", "comment": "no"})
    assert status == 200, updated
    assert updated["owner"] == alice.name and updated["updated_by"] == ADMIN
    assert {k: v for k, v in updated.items() if k not in ("owner", "updated_at", "updated_by")} == \
        {k: v for k, v in created.items() if k not in ("owner", "updated_at", "updated_by")}
    assert (await ws.call("GET", "/functions/main.default.twice"))[1] == updated

    bob = await user(server, ws)
    status, body = await bob.call("PATCH", "/functions/main.default.twice", json={"owner": bob.name})
    assert (status, body["error_code"]) == (404, "NOT_FOUND"), body      # bob may not see it
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG")
    await grant(ws, "schema", "main.default", bob.name, "USE SCHEMA")
    await grant(ws, "function", "main.default.twice", bob.name, "EXECUTE")
    status, body = await bob.call("PATCH", "/functions/main.default.twice", json={"owner": bob.name})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body
    await grant(ws, "catalog", "main", alice.name, "USE CATALOG")
    await grant(ws, "schema", "main.default", alice.name, "USE SCHEMA")
    status, body = await alice.call("PATCH", "/functions/main.default.twice", json={"owner": bob.name})
    assert status == 200 and body["owner"] == bob.name, body     # the owner hands it on

    status, body = await ws.call("PATCH", "/functions/main.default.nope", json={"owner": ADMIN})
    assert (status, body["error_code"]) == (404, "NOT_FOUND"), body
    status, body = await ws.call("PATCH", "/functions/twice", json={"owner": ADMIN})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body
    status, body = await ws.call("PATCH", "/functions/main.default.twice", json={"owner": 7})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body


# ---- registered models and versions -----------------------------------------------


async def test_models_versions_and_credentials(ws, client):
    models, versions = RegisteredModelsApi(client), ModelVersionsApi(client)
    t0 = int(time.time() * 1000)
    model = await models.create_registered_model(CreateRegisteredModel(
        name="Churn", catalog_name="main", schema_name="default", comment="churn model"))
    assert (model.name, model.catalog_name, model.schema_name, model.full_name, model.comment, model.owner) == \
        ("churn", "main", "default", "main.default.churn", "churn model", ADMIN)
    assert_server_fields(model, t0)
    assert model.storage_location == join_url(ws.storage_root, "models", model.id)
    assert await models.get_registered_model("main.default.churn") == model

    created = []
    for run in ("r1", "r2", "r3"):
        v = await versions.create_model_version(CreateModelVersion(
            model_name="churn", catalog_name="main", schema_name="default", source=f"file:///runs/{run}/model",
            run_id=run, comment=f"from {run}"))
        created.append(v)
    assert [v.version for v in created] == [1, 2, 3]
    for v, run in zip(created, ("r1", "r2", "r3")):
        assert (v.model_name, v.catalog_name, v.schema_name, v.run_id, v.comment, v.source) == \
            ("churn", "main", "default", run, f"from {run}", f"file:///runs/{run}/model")
        assert v.status == ModelVersionStatus.PENDING_REGISTRATION
        assert v.storage_location == join_url(model.storage_location, "versions", v.id)
        assert_server_fields(v, t0)

    creds = await TemporaryCredentialsApi(client).generate_temporary_model_version_credentials(
        GenerateTemporaryModelVersionCredential(catalog_name="main", schema_name="default", model_name="churn",
                                                version=1, operation=ModelVersionOperation.READ_WRITE_MODEL_VERSION))
    assert creds.url == created[0].storage_location and creds.expiration_time > t0
    assert creds.aws_temp_credentials is None and creds.azure_user_delegation_sas is None

    ready = await versions.finalize_model_version("main.default.churn", 1,
                                                  FinalizeModelVersion(full_name="main.default.churn", version=1))
    assert ready.status == ModelVersionStatus.READY
    assert ready.model_copy(update={"status": None, "updated_at": None}) == \
        created[0].model_copy(update={"status": None, "updated_at": None})
    # A finalized version's files are read-only, and it cannot be finalized twice.
    with pytest.raises(BadRequestException):
        await TemporaryCredentialsApi(client).generate_temporary_model_version_credentials(
            GenerateTemporaryModelVersionCredential(
                catalog_name="main", schema_name="default", model_name="churn", version=1,
                operation=ModelVersionOperation.READ_WRITE_MODEL_VERSION))
    with pytest.raises(BadRequestException) as e:
        await versions.finalize_model_version("main.default.churn", 1,
                                              FinalizeModelVersion(full_name="main.default.churn", version=1))
    assert "PENDING_REGISTRATION" in e.value.body

    updated = await versions.update_model_version("main.default.churn", 2, UpdateModelVersion(comment="better"))
    assert updated.comment == "better" and updated.version == 2
    assert await versions.get_model_version("main.default.churn", 2) == updated

    listed = await versions.list_model_versions("main.default.churn")
    assert [v.version for v in listed.model_versions] == [1, 2, 3]
    assert listed.model_versions[0] == ready
    page = await versions.list_model_versions("main.default.churn", max_results=2)
    assert [v.version for v in page.model_versions] == [1, 2]
    rest = await versions.list_model_versions("main.default.churn", page_token=page.next_page_token)
    assert [v.version for v in rest.model_versions] == [3] and rest.next_page_token is None

    # Numbers are never reused after a delete.
    await versions.delete_model_version("main.default.churn", 3)
    with pytest.raises(NotFoundException):
        await versions.get_model_version("main.default.churn", 3)
    v4 = await versions.create_model_version(CreateModelVersion(
        model_name="churn", catalog_name="main", schema_name="default", source="file:///runs/r4/model"))
    assert v4.version == 4

    # A model with versions is not deleted without force.
    with pytest.raises(BadRequestException) as e:
        await models.delete_registered_model("main.default.churn")
    assert "FAILED_PRECONDITION" in e.value.body

    # Rename carries the versions along.
    renamed = await models.update_registered_model("main.default.churn", UpdateRegisteredModel(
        new_name="attrition", comment="renamed"))
    assert (renamed.full_name, renamed.comment, renamed.id) == ("main.default.attrition", "renamed", model.id)
    moved = await versions.get_model_version("main.default.attrition", 2)
    assert (moved.model_name, moved.id) == ("attrition", updated.id)
    with pytest.raises(NotFoundException):
        await versions.get_model_version("main.default.churn", 2)

    await models.delete_registered_model("main.default.attrition", force=True)
    with pytest.raises(NotFoundException):
        await models.get_registered_model("main.default.attrition")
    with pytest.raises(NotFoundException):
        await versions.list_model_versions("main.default.attrition")


async def test_list_models_across_schemas(ws, client):
    await ws.call("POST", "/schemas", json={"name": "other", "catalog_name": "main"})
    await ws.call("POST", "/catalogs", json={"name": "second"})
    await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "second"})
    api = RegisteredModelsApi(client)
    made = {}
    for catalog, schema, name in (("main", "default", "b"), ("main", "other", "a"), ("second", "s", "c")):
        made[f"{catalog}.{schema}.{name}"] = await api.create_registered_model(
            CreateRegisteredModel(name=name, catalog_name=catalog, schema_name=schema))
    everything = await api.list_registered_models()
    assert [m.full_name for m in everything.registered_models] == ["main.default.b", "main.other.a", "second.s.c"]
    assert everything.registered_models == list(made.values())
    in_main = await api.list_registered_models(catalog_name="main")
    assert [m.full_name for m in in_main.registered_models] == ["main.default.b", "main.other.a"]
    one = await api.list_registered_models(catalog_name="main", schema_name="other")
    assert [m.full_name for m in one.registered_models] == ["main.other.a"]
    first = await api.list_registered_models(max_results=2)
    assert len(first.registered_models) == 2 and first.next_page_token
    second = await api.list_registered_models(max_results=2, page_token=first.next_page_token)
    assert [m.full_name for m in second.registered_models] == ["second.s.c"] and second.next_page_token is None


async def test_schema_delete_cascades_to_new_assets(ws, client):
    await VolumesApi(client).create_volume(CreateVolumeRequestContent(
        catalog_name="main", schema_name="default", name="v", volume_type=VolumeType.MANAGED))
    await RegisteredModelsApi(client).create_registered_model(
        CreateRegisteredModel(name="m", catalog_name="main", schema_name="default"))
    await ModelVersionsApi(client).create_model_version(CreateModelVersion(
        model_name="m", catalog_name="main", schema_name="default", source="file:///x"))
    status, body = await ws.call("DELETE", "/schemas/main.default")
    assert status == 400 and body["error_code"] == "FAILED_PRECONDITION"
    assert (await VolumesApi(client).get_volume("main.default.v")).name == "v"
    status, _ = await ws.call("DELETE", "/schemas/main.default", params={"force": "true"})
    assert status == 200
    await ws.call("POST", "/schemas", json={"name": "default", "catalog_name": "main"})
    for path in ("/volumes/main.default.v", "/models/main.default.m", "/models/main.default.m/versions/1"):
        status, body = await ws.call("GET", path)
        assert status == 404 and body["error_code"] == "NOT_FOUND", path
