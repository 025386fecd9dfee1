"""Conformance through the official Python SDK (`unitycatalog-client`): catalogs, schemas,
tables, staging tables and the metastore summary, driven against a real shardcat server.

Every model the SDK returns is compared field by field with what was sent, between
create, get and list, and with the model parsed from the raw HTTP JSON of the same GET.

Note: the SDK's OpenAPI document declares no security scheme, so `Configuration(access_token=...)`
is never sent; the bearer token has to travel as a default header of the ApiClient.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass

import pytest
from unitycatalog.client import (
    ApiClient,
    CatalogsApi,
    Configuration,
    MetastoresApi,
    SchemasApi,
    TablesApi,
)
from unitycatalog.client.exceptions import (
    ApiException,
    BadRequestException,
    NotFoundException,
    UnauthorizedException,
)
from unitycatalog.client.models import (
    CatalogInfo,
    ColumnInfo,
    ColumnTypeName,
    CreateCatalog,
    CreateSchema,
    CreateStagingTable,
    CreateTable,
    DataSourceFormat,
    Dependency,
    DependencyList,
    GetMetastoreSummaryResponse,
    SchemaInfo,
    StagingTableInfo,
    TableDependency,
    TableInfo,
    TableType,
    UpdateCatalog,
    UpdateSchema,
)

from shardcat.entities.urls import join_url, normalize_url

ADMIN = "admin"   # the principal of the ws fixture's token


@dataclass
class UC:
    ws: object
    catalogs: CatalogsApi
    schemas: SchemasApi
    tables: TablesApi
    metastores: MetastoresApi


def sdk_client(ws, token: str | None = "ws") -> ApiClient:
    token = ws.token if token == "ws" else token
    if token is None:
        return ApiClient(Configuration(host=ws.api))
    return ApiClient(Configuration(host=ws.api, access_token=token),
                     header_name="Authorization", header_value=f"Bearer {token}")


@pytest.fixture
async def uc(ws):
    async with sdk_client(ws) as client:
        yield UC(ws, CatalogsApi(client), SchemasApi(client), TablesApi(client), MetastoresApi(client))


# ---- helpers ---------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def assert_uuid(value) -> None:
    assert isinstance(value, str) and str(uuid.UUID(value)) == value, value


def assert_audit(info, t0: int, t1: int, *, fresh: bool = True) -> None:
    """owner/created_by/updated_by are the caller; timestamps fall in [t0, t1]."""
    assert info.owner == ADMIN
    assert info.created_by == ADMIN
    assert info.updated_by == ADMIN
    assert isinstance(info.created_at, int) and isinstance(info.updated_at, int)
    if fresh:
        assert t0 - 5 <= info.created_at <= t1 + 5
        assert info.updated_at == info.created_at
    else:
        assert info.created_at <= info.updated_at


async def raw_get(uc: UC, path: str) -> dict:
    status, body = await uc.ws.call("GET", path)
    assert status == 200, body
    return body


async def assert_raw_matches(uc: UC, path: str, model_cls, sdk_model) -> dict:
    """The SDK model of a GET equals the model parsed from the raw JSON of the same GET, and
    every field the model knows is on the wire exactly as the model holds it."""
    raw = await raw_get(uc, path)
    assert model_cls.from_dict(raw) == sdk_model
    known = set(model_cls.model_fields)
    on_wire = {k: v for k, v in raw.items() if k in known and v is not None}
    assert sdk_model.to_dict() == on_wire
    return raw


def error_code(e: ApiException) -> str:
    return json.loads(e.body)["error_code"]


async def drain(call, key: str, page: int, **kw) -> tuple[list, list[int]]:
    """Every item of a paged list: follow next_page_token until it is absent."""
    items, sizes, token, seen_tokens = [], [], None, set()
    for _ in range(1000):
        resp = await call(max_results=page, page_token=token, **kw)
        batch = getattr(resp, key) or []
        assert len(batch) <= page
        items += batch
        sizes.append(len(batch))
        token = resp.next_page_token
        if not token:
            return items, sizes
        assert token not in seen_tokens, "a page token repeated: the listing loops"
        seen_tokens.add(token)
    raise AssertionError("paging never ended")


def columns_sent() -> list[ColumnInfo]:
    return [
        ColumnInfo(name="id", type_name=ColumnTypeName.LONG, type_text="bigint",
                   type_json=json.dumps({"name": "id", "type": "long", "nullable": False, "metadata": {}}),
                   position=0, nullable=False, comment="primary key"),
        ColumnInfo(name="amount", type_name=ColumnTypeName.DECIMAL, type_text="decimal(12,2)",
                   type_json=json.dumps({"name": "amount", "type": "decimal(12,2)", "nullable": True, "metadata": {}}),
                   type_precision=12, type_scale=2, position=1, nullable=True),
        ColumnInfo(name="tags", type_name=ColumnTypeName.ARRAY, type_text="array<string>",
                   type_json=json.dumps({"name": "tags", "type": {"type": "array", "elementType": "string",
                                                                  "containsNull": True},
                                         "nullable": True, "metadata": {}}),
                   position=2),
        ColumnInfo(name="ds", type_name=ColumnTypeName.DATE, type_text="date",
                   type_json=json.dumps({"name": "ds", "type": "date", "nullable": True, "metadata": {}}),
                   position=3, partition_index=0),
        ColumnInfo(name="region", type_name=ColumnTypeName.STRING, type_text="string",
                   type_json=json.dumps({"name": "region", "type": "string", "nullable": True, "metadata": {}}),
                   position=4, partition_index=1),
    ]


def assert_columns_equal(sent: list[ColumnInfo], got: list[ColumnInfo]) -> None:
    assert [c.name for c in got] == [c.name for c in sent]
    for s, g in zip(sent, got):
        for field_name, value in s.to_dict().items():
            assert getattr(g, field_name) == getattr(s, field_name), (s.name, field_name, value)


async def make_catalog(uc: UC, name: str = "c", **kw) -> CatalogInfo:
    return await uc.catalogs.create_catalog(CreateCatalog(name=name, **kw))


async def make_schema(uc: UC, catalog: str = "c", name: str = "s", **kw) -> SchemaInfo:
    return await uc.schemas.create_schema(CreateSchema(name=name, catalog_name=catalog, **kw))


async def make_managed(uc: UC, catalog: str, schema: str, name: str, **kw) -> TableInfo:
    body = dict(name=name, catalog_name=catalog, schema_name=schema, table_type=TableType.MANAGED,
                data_source_format=DataSourceFormat.DELTA,
                columns=[ColumnInfo(name="id", type_name=ColumnTypeName.LONG)])
    body.update(kw)
    return await uc.tables.create_table(CreateTable(**body))


# ---- authentication ------------------------------------------------------------------


async def test_sdk_without_bearer_header_is_unauthenticated(ws):
    async with sdk_client(ws, token=None) as client:
        with pytest.raises(UnauthorizedException) as e:
            await CatalogsApi(client).list_catalogs()
    assert e.value.status == 401 and error_code(e.value) == "UNAUTHENTICATED"
    async with sdk_client(ws, token="scat_not-a-real-token") as client:
        with pytest.raises(UnauthorizedException) as e:
            await CatalogsApi(client).list_catalogs()
    assert e.value.status == 401 and error_code(e.value) == "UNAUTHENTICATED"


# ---- metastore summary ----------------------------------------------------------------


async def test_metastore_summary(uc):
    summary = await uc.metastores.summary()
    assert isinstance(summary, GetMetastoreSummaryResponse)
    assert summary.metastore_id == uc.ws.metastore_id
    raw = await assert_raw_matches(uc, "/metastore_summary", GetMetastoreSummaryResponse, summary)
    assert raw["storage_root"] == uc.ws.storage_root


# ---- catalogs --------------------------------------------------------------------------


async def test_catalog_create_get_list_round_trip(uc, tmp_path):
    root = normalize_url(str(tmp_path / "catalog-root"))
    t0 = now_ms()
    created = await make_catalog(uc, "Sales", comment="all sales", properties={"team": "fin", "tier": "1"},
                                 storage_root=root)
    t1 = now_ms()
    assert isinstance(created, CatalogInfo)
    assert created.name == "sales"   # names are case-insensitive, stored lower-case
    assert created.comment == "all sales"
    assert created.properties == {"team": "fin", "tier": "1"}
    assert created.storage_root == root
    assert_uuid(created.id)
    assert created.storage_location == join_url(root, "__unitystorage", "catalogs", created.id)
    assert_audit(created, t0, t1)

    got = await uc.catalogs.get_catalog("sales")
    assert got == created
    assert await uc.catalogs.get_catalog("SALES") == created
    await assert_raw_matches(uc, "/catalogs/sales", CatalogInfo, got)

    plain = await make_catalog(uc, "plain")
    assert plain.storage_root is None and plain.storage_location is None
    assert plain.comment is None and plain.properties is None
    assert plain.id != created.id

    listed = await uc.catalogs.list_catalogs()
    assert listed.next_page_token is None
    assert {c.name: c for c in listed.catalogs} == {"sales": created, "plain": plain}


async def test_catalog_update_and_rename(uc):
    created = await make_catalog(uc, "c", comment="one", properties={"a": "1"})
    await make_schema(uc, "c", "s")
    table = await make_managed(uc, "c", "s", "t")

    updated = await uc.catalogs.update_catalog("c", UpdateCatalog(comment="two"))
    assert updated.comment == "two"
    assert updated.properties == {"a": "1"}          # untouched fields stay
    assert updated.id == created.id and updated.created_at == created.created_at
    assert updated.created_by == ADMIN and updated.updated_by == ADMIN
    assert updated.updated_at >= created.updated_at
    assert await uc.catalogs.get_catalog("c") == updated

    updated = await uc.catalogs.update_catalog("c", UpdateCatalog(properties={"b": "2"}))
    assert updated.properties == {"b": "2"} and updated.comment == "two"

    renamed = await uc.catalogs.update_catalog("c", UpdateCatalog(new_name="c2", comment="three"))
    assert renamed.name == "c2" and renamed.comment == "three"
    assert renamed.id == created.id and renamed.created_at == created.created_at
    assert await uc.catalogs.get_catalog("c2") == renamed
    await assert_raw_matches(uc, "/catalogs/c2", CatalogInfo, renamed)
    with pytest.raises(NotFoundException):
        await uc.catalogs.get_catalog("c")
    assert [c.name for c in (await uc.catalogs.list_catalogs()).catalogs] == ["c2"]

    # Children follow the rename: same ids under the new names.
    schema = await uc.schemas.get_schema("c2.s")
    assert schema.catalog_name == "c2" and schema.full_name == "c2.s"
    moved = await uc.tables.get_table("c2.s.t")
    assert moved.table_id == table.table_id and moved.catalog_name == "c2"
    assert moved.storage_location == table.storage_location
    with pytest.raises(NotFoundException):
        await uc.tables.get_table("c.s.t")
    # The old name is free again, for a new and empty catalog.
    reborn = await make_catalog(uc, "c")
    assert reborn.id != created.id
    assert [s.name for s in (await uc.schemas.list_schemas("c")).schemas] == ["default"]    # its own, new
    with pytest.raises(NotFoundException):
        await uc.schemas.get_schema("c.s")
    await uc.catalogs.delete_catalog("c")

    # Renaming onto an existing catalog is refused and changes nothing.
    await make_catalog(uc, "other")
    with pytest.raises(ApiException) as e:
        await uc.catalogs.update_catalog("c2", UpdateCatalog(new_name="other"))
    assert e.value.status == 409 and error_code(e.value) == "ALREADY_EXISTS"
    assert (await uc.catalogs.get_catalog("c2")).id == created.id

    with pytest.raises(NotFoundException) as e:
        await uc.catalogs.update_catalog("missing", UpdateCatalog(comment="x"))
    assert e.value.status == 404 and error_code(e.value) == "NOT_FOUND"


@pytest.mark.parametrize("count, page", [(7, 3), (6, 3), (4, 1)])
async def test_catalog_list_paging(uc, count, page):
    names = [f"cat_{i:02d}" for i in range(count)]
    created = {}
    for name in reversed(names):
        created[name] = await make_catalog(uc, name, comment=name)
    items, sizes = await drain(uc.catalogs.list_catalogs, "catalogs", page)
    assert [c.name for c in items] == sorted(names)            # no duplicates, none missing
    assert {c.name: c for c in items} == created               # list items equal the created models
    assert len(sizes) == math.ceil(count / page)               # no trailing empty page
    everything = await uc.catalogs.list_catalogs(max_results=0)  # 0: the server's page size
    assert len(everything.catalogs) == count and everything.next_page_token is None


async def test_catalog_list_rejects_bad_paging(uc):
    await make_catalog(uc, "c")
    with pytest.raises(BadRequestException) as e:
        await uc.catalogs.list_catalogs(page_token="not-a-token")
    assert e.value.status == 400 and error_code(e.value) == "INVALID_PARAMETER_VALUE"
    with pytest.raises(BadRequestException) as e:
        await uc.catalogs.list_catalogs(max_results=-1)
    assert error_code(e.value) == "INVALID_PARAMETER_VALUE"


async def test_catalog_delete_with_and_without_force(uc):
    await make_catalog(uc, "empty")
    assert await uc.catalogs.delete_catalog("empty") == {}
    with pytest.raises(NotFoundException):
        await uc.catalogs.get_catalog("empty")
    with pytest.raises(NotFoundException) as e:
        await uc.catalogs.delete_catalog("empty")
    assert e.value.status == 404 and error_code(e.value) == "NOT_FOUND"

    full = await make_catalog(uc, "full")
    await make_schema(uc, "full", "s")
    await make_managed(uc, "full", "s", "t")
    with pytest.raises(BadRequestException) as e:
        await uc.catalogs.delete_catalog("full")
    assert error_code(e.value) == "FAILED_PRECONDITION"
    with pytest.raises(BadRequestException):
        await uc.catalogs.delete_catalog("full", force=False)
    assert await uc.catalogs.get_catalog("full") == full        # nothing was deleted
    assert (await uc.tables.get_table("full.s.t")).name == "t"

    await uc.catalogs.delete_catalog("full", force=True)
    for get, name in ((uc.catalogs.get_catalog, "full"), (uc.schemas.get_schema, "full.s"),
                      (uc.tables.get_table, "full.s.t")):
        with pytest.raises(NotFoundException):
            await get(name)
    again = await make_catalog(uc, "full")                      # the name is free, and the new one is empty
    assert again.id != full.id
    assert [s.name for s in (await uc.schemas.list_schemas("full")).schemas] == ["default"]


# ---- schemas ---------------------------------------------------------------------------


async def test_schema_create_get_list_round_trip(uc, tmp_path):
    await make_catalog(uc, "c")
    root = normalize_url(str(tmp_path / "schema-root"))
    t0 = now_ms()
    created = await make_schema(uc, "c", "Bronze", comment="raw data", properties={"k": "v"}, storage_root=root)
    t1 = now_ms()
    assert isinstance(created, SchemaInfo)
    assert (created.name, created.catalog_name, created.full_name) == ("bronze", "c", "c.bronze")
    assert created.comment == "raw data" and created.properties == {"k": "v"}
    assert created.storage_root == root
    assert_uuid(created.schema_id)
    assert created.storage_location == join_url(root, "__unitystorage", "schemas", created.schema_id)
    assert_audit(created, t0, t1)

    got = await uc.schemas.get_schema("c.bronze")
    assert got == created
    await assert_raw_matches(uc, "/schemas/c.bronze", SchemaInfo, got)

    plain = await make_schema(uc, "c", "silver")
    assert plain.storage_root is None and plain.storage_location is None
    listed = await uc.schemas.list_schemas("c")
    assert listed.next_page_token is None
    assert {s.full_name: s for s in listed.schemas if s.name != "default"} == {"c.bronze": created, "c.silver": plain}

    # A schema in another catalog is not listed under this one.
    await make_catalog(uc, "d")
    await make_schema(uc, "d", "bronze")
    assert [s.full_name for s in (await uc.schemas.list_schemas("c")).schemas] == ["c.bronze", "c.default", "c.silver"]
    assert [s.full_name for s in (await uc.schemas.list_schemas("d")).schemas] == ["d.bronze", "d.default"]


async def test_schema_needs_its_catalog(uc):
    with pytest.raises(NotFoundException) as e:
        await make_schema(uc, "nope", "s")
    assert error_code(e.value) == "NOT_FOUND"
    with pytest.raises(NotFoundException):
        await uc.schemas.list_schemas("nope")
    status, body = await uc.ws.call("GET", "/schemas")   # catalog_name is required
    assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE"


async def test_schema_update_and_rename(uc):
    await make_catalog(uc, "c")
    created = await make_schema(uc, "c", "s", comment="one", properties={"a": "1"})
    table = await make_managed(uc, "c", "s", "t")

    updated = await uc.schemas.update_schema("c.s", UpdateSchema(comment="two", properties={"b": "2"}))
    assert (updated.comment, updated.properties) == ("two", {"b": "2"})
    assert updated.schema_id == created.schema_id and updated.created_at == created.created_at
    assert updated.updated_at >= created.updated_at and updated.updated_by == ADMIN
    assert await uc.schemas.get_schema("c.s") == updated

    renamed = await uc.schemas.update_schema("c.s", UpdateSchema(new_name="s2"))
    assert (renamed.name, renamed.full_name, renamed.catalog_name) == ("s2", "c.s2", "c")
    assert renamed.schema_id == created.schema_id and renamed.comment == "two"
    assert await uc.schemas.get_schema("c.s2") == renamed
    await assert_raw_matches(uc, "/schemas/c.s2", SchemaInfo, renamed)
    with pytest.raises(NotFoundException):
        await uc.schemas.get_schema("c.s")
    moved = await uc.tables.get_table("c.s2.t")
    assert moved.table_id == table.table_id and moved.schema_name == "s2"
    assert [t.name for t in (await uc.tables.list_tables("c", "s2")).tables] == ["t"]

    await make_schema(uc, "c", "taken")
    with pytest.raises(ApiException) as e:
        await uc.schemas.update_schema("c.s2", UpdateSchema(new_name="taken"))
    assert e.value.status == 409 and error_code(e.value) == "ALREADY_EXISTS"
    with pytest.raises(NotFoundException):
        await uc.schemas.update_schema("c.missing", UpdateSchema(comment="x"))


@pytest.mark.parametrize("count, page", [(5, 2), (4, 2)])
async def test_schema_list_paging(uc, count, page):
    await make_catalog(uc, "c")
    names = [f"s{i}" for i in range(count)]
    created = {n: await make_schema(uc, "c", n) for n in reversed(names)}
    items, sizes = await drain(uc.schemas.list_schemas, "schemas", page, catalog_name="c")
    assert [s.name for s in items] == sorted(["default", *names])          # with the catalog's own default
    assert {s.name: s for s in items if s.name != "default"} == created
    assert len(sizes) == math.ceil((count + 1) / page)


async def test_schema_delete_with_and_without_force(uc):
    await make_catalog(uc, "c")
    await make_schema(uc, "c", "empty")
    await uc.schemas.delete_schema("c.empty")
    with pytest.raises(NotFoundException):
        await uc.schemas.get_schema("c.empty")
    with pytest.raises(NotFoundException):
        await uc.schemas.delete_schema("c.empty")

    full = await make_schema(uc, "c", "full")
    await make_managed(uc, "c", "full", "t1")
    await make_managed(uc, "c", "full", "t2")
    with pytest.raises(BadRequestException) as e:
        await uc.schemas.delete_schema("c.full")
    assert error_code(e.value) == "FAILED_PRECONDITION"
    assert await uc.schemas.get_schema("c.full") == full
    await uc.schemas.delete_schema("c.full", force=True)
    with pytest.raises(NotFoundException):
        await uc.schemas.get_schema("c.full")
    with pytest.raises(NotFoundException):
        await uc.tables.get_table("c.full.t1")
    await make_schema(uc, "c", "full")
    assert (await uc.tables.list_tables("c", "full")).tables == []
    # Once its schemas are gone the catalog is empty again: a plain delete works.
    await uc.schemas.delete_schema("c.full")
    await uc.catalogs.delete_catalog("c")
    with pytest.raises(NotFoundException):
        await uc.catalogs.get_catalog("c")


# ---- tables ----------------------------------------------------------------------------


@pytest.fixture
async def schema(uc):
    await make_catalog(uc, "c")
    await make_schema(uc, "c", "s")
    return "c", "s"


async def test_managed_table_round_trip(uc, schema):
    cols = columns_sent()
    t0 = now_ms()
    created = await uc.tables.create_table(CreateTable(
        name="Orders", catalog_name="c", schema_name="s", table_type=TableType.MANAGED,
        data_source_format=DataSourceFormat.DELTA, columns=cols, comment="orders",
        properties={"delta.appendOnly": "true"}))
    t1 = now_ms()
    assert isinstance(created, TableInfo)
    assert (created.name, created.catalog_name, created.schema_name) == ("orders", "c", "s")
    assert created.table_type == TableType.MANAGED
    assert created.data_source_format == DataSourceFormat.DELTA
    assert created.comment == "orders" and created.properties == {"delta.appendOnly": "true"}
    assert_uuid(created.table_id)
    assert created.storage_location == join_url(uc.ws.storage_root, "tables", created.table_id)
    assert created.view_definition is None
    assert_audit(created, t0, t1)
    assert_columns_equal(cols, created.columns)
    amount = created.columns[1]
    assert (amount.type_name, amount.type_precision, amount.type_scale) == (ColumnTypeName.DECIMAL, 12, 2)
    assert [c.partition_index for c in created.columns] == [None, None, None, 0, 1]

    got = await uc.tables.get_table("c.s.orders")
    assert got == created
    raw = await assert_raw_matches(uc, "/tables/c.s.orders", TableInfo, got)
    assert raw["full_name"] == "c.s.orders"
    listed = await uc.tables.list_tables("c", "s")
    assert listed.tables == [created] and listed.next_page_token is None


async def test_column_defaults_filled_in(uc, schema):
    cols = [ColumnInfo(name="id", type_name=ColumnTypeName.INT),
            ColumnInfo(name="price", type_name=ColumnTypeName.DECIMAL, type_precision=5, type_scale=3),
            ColumnInfo(name="flag", type_name=ColumnTypeName.BOOLEAN, nullable=False)]
    created = await make_managed(uc, "c", "s", "t", columns=cols)
    got = await uc.tables.get_table("c.s.t")
    assert got == created
    assert [c.position for c in got.columns] == [0, 1, 2]
    assert [c.type_text for c in got.columns] == ["int", "decimal(5,3)", "boolean"]
    assert [c.nullable for c in got.columns] == [True, True, False]
    types = [json.loads(c.type_json) for c in got.columns]
    assert [t["name"] for t in types] == ["id", "price", "flag"]
    assert [t["type"] for t in types] == ["integer", "decimal(5,3)", "boolean"]
    assert types[2]["nullable"] is False


async def test_external_table_round_trip(uc, schema, tmp_path):
    location = normalize_url(str(tmp_path / "ext" / "events"))
    cols = columns_sent()
    created = await uc.tables.create_table(CreateTable(
        name="events", catalog_name="c", schema_name="s", table_type=TableType.EXTERNAL,
        data_source_format=DataSourceFormat.PARQUET, columns=cols, storage_location=location))
    assert created.table_type == TableType.EXTERNAL
    assert created.data_source_format == DataSourceFormat.PARQUET
    assert created.storage_location == location
    assert_columns_equal(cols, created.columns)
    got = await uc.tables.get_table("c.s.events")
    assert got == created
    await assert_raw_matches(uc, "/tables/c.s.events", TableInfo, got)

    # One asset per path: a table inside another table's location is refused.
    with pytest.raises(BadRequestException) as e:
        await uc.tables.create_table(CreateTable(
            name="inner", catalog_name="c", schema_name="s", table_type=TableType.EXTERNAL,
            data_source_format=DataSourceFormat.PARQUET, columns=[], storage_location=location + "/part"))
    assert error_code(e.value) == "INVALID_PARAMETER_VALUE"
    with pytest.raises(BadRequestException) as e:   # nor inside the metastore's managed storage
        await uc.tables.create_table(CreateTable(
            name="sneaky", catalog_name="c", schema_name="s", table_type=TableType.EXTERNAL,
            data_source_format=DataSourceFormat.PARQUET, columns=[],
            storage_location=join_url(uc.ws.storage_root, "tables", "mine")))
    assert error_code(e.value) == "INVALID_PARAMETER_VALUE"
    with pytest.raises(BadRequestException):   # EXTERNAL needs a storage_location
        await uc.tables.create_table(CreateTable(
            name="nowhere", catalog_name="c", schema_name="s", table_type=TableType.EXTERNAL,
            data_source_format=DataSourceFormat.PARQUET, columns=[]))


async def test_view_round_trip(uc, schema):
    await make_managed(uc, "c", "s", "base")
    cols = [ColumnInfo(name="id", type_name=ColumnTypeName.LONG, type_text="bigint",
                       type_json=json.dumps({"name": "id", "type": "long", "nullable": True, "metadata": {}}),
                       position=0)]
    deps = DependencyList(dependencies=[Dependency(table=TableDependency(table_full_name="c.s.base"))])
    created = await uc.tables.create_table(CreateTable(
        name="v", catalog_name="c", schema_name="s", table_type=TableType.VIEW, columns=cols,
        view_definition="SELECT id FROM c.s.base", view_dependencies=deps, comment="a view"))
    assert created.table_type == TableType.VIEW
    assert created.view_definition == "SELECT id FROM c.s.base"
    assert created.view_dependencies == deps
    assert created.storage_location is None and created.data_source_format is None
    assert created.comment == "a view"
    assert_columns_equal(cols, created.columns)
    got = await uc.tables.get_table("c.s.v")
    assert got == created
    await assert_raw_matches(uc, "/tables/c.s.v", TableInfo, got)
    listed = await uc.tables.list_tables("c", "s")
    assert {t.name: t.table_type for t in listed.tables} == {"base": TableType.MANAGED, "v": TableType.VIEW}

    with pytest.raises(BadRequestException):   # a view needs its definition
        await uc.tables.create_table(CreateTable(
            name="v2", catalog_name="c", schema_name="s", table_type=TableType.VIEW, columns=cols))


@pytest.mark.parametrize("count, page", [(7, 3), (6, 2)])
async def test_table_list_paging(uc, schema, count, page):
    created = {}
    for i in reversed(range(count)):
        created[f"t{i}"] = await make_managed(uc, "c", "s", f"t{i}")
    items, sizes = await drain(uc.tables.list_tables, "tables", page, catalog_name="c", schema_name="s")
    assert [t.name for t in items] == sorted(created)
    assert {t.name: t for t in items} == created
    assert len(sizes) == math.ceil(count / page)
    with pytest.raises(NotFoundException):
        await uc.tables.list_tables("c", "missing")


async def test_table_delete(uc, schema):
    first = await make_managed(uc, "c", "s", "t")
    await uc.tables.delete_table("c.s.t")
    with pytest.raises(NotFoundException):
        await uc.tables.get_table("c.s.t")
    with pytest.raises(NotFoundException) as e:
        await uc.tables.delete_table("c.s.t")
    assert e.value.status == 404 and error_code(e.value) == "NOT_FOUND"
    assert (await uc.tables.list_tables("c", "s")).tables == []
    second = await make_managed(uc, "c", "s", "t")
    assert second.table_id != first.table_id
    assert second.storage_location != first.storage_location


async def test_staging_table_then_managed_table(uc, schema):
    staged = await uc.tables.create_staging_table(CreateStagingTable(name="T", catalog_name="c", schema_name="s"))
    assert isinstance(staged, StagingTableInfo)
    assert (staged.name, staged.catalog_name, staged.schema_name) == ("t", "c", "s")
    assert_uuid(staged.id)
    assert staged.staging_location == join_url(uc.ws.storage_root, "tables", staged.id)
    # A staging table is not a table yet.
    assert (await uc.tables.list_tables("c", "s")).tables == []
    with pytest.raises(NotFoundException):
        await uc.tables.get_table("c.s.t")
    with pytest.raises(ApiException) as e:
        await uc.tables.create_staging_table(CreateStagingTable(name="t", catalog_name="c", schema_name="s"))
    assert e.value.status == 409 and error_code(e.value) == "ALREADY_EXISTS"

    cols = columns_sent()
    table = await uc.tables.create_table(CreateTable(
        name="t", catalog_name="c", schema_name="s", table_type=TableType.MANAGED,
        data_source_format=DataSourceFormat.DELTA, columns=cols, storage_location=staged.staging_location))
    assert table.table_id == staged.id
    assert table.storage_location == staged.staging_location
    assert_columns_equal(cols, table.columns)
    got = await uc.tables.get_table("c.s.t")
    assert got == table
    await assert_raw_matches(uc, "/tables/c.s.t", TableInfo, got)

    # The table now holds the name: staging it again is refused.
    with pytest.raises(ApiException) as e:
        await uc.tables.create_staging_table(CreateStagingTable(name="t", catalog_name="c", schema_name="s"))
    assert e.value.status == 409 and error_code(e.value) == "ALREADY_EXISTS"


async def test_managed_table_location_must_be_its_staging_location(uc, schema, tmp_path):
    staged = await uc.tables.create_staging_table(CreateStagingTable(name="a", catalog_name="c", schema_name="s"))
    with pytest.raises(BadRequestException):       # another name's staging location
        await make_managed(uc, "c", "s", "b", storage_location=staged.staging_location)
    with pytest.raises(BadRequestException):       # a location nobody staged
        await make_managed(uc, "c", "s", "a", storage_location=normalize_url(str(tmp_path / "elsewhere")))
    table = await make_managed(uc, "c", "s", "a", storage_location=staged.staging_location)
    assert table.table_id == staged.id
    with pytest.raises(NotFoundException):
        await uc.tables.create_staging_table(CreateStagingTable(name="x", catalog_name="c", schema_name="nope"))


async def test_managed_storage_comes_from_schema_then_catalog_then_metastore(uc, tmp_path):
    cat_root = normalize_url(str(tmp_path / "cat"))
    sch_root = normalize_url(str(tmp_path / "sch"))
    cat = await make_catalog(uc, "rooted", storage_root=cat_root)
    await make_catalog(uc, "bare")
    sch = await make_schema(uc, "rooted", "own", storage_root=sch_root)
    await make_schema(uc, "rooted", "inherits")
    await make_schema(uc, "bare", "s")
    t_own = await make_managed(uc, "rooted", "own", "t")
    t_cat = await make_managed(uc, "rooted", "inherits", "t")
    t_ms = await make_managed(uc, "bare", "s", "t")
    assert t_own.storage_location == join_url(sch.storage_location, "tables", t_own.table_id)
    assert t_cat.storage_location == join_url(cat.storage_location, "tables", t_cat.table_id)
    assert t_ms.storage_location == join_url(uc.ws.storage_root, "tables", t_ms.table_id)
    staged = await uc.tables.create_staging_table(CreateStagingTable(name="x", catalog_name="rooted",
                                                                     schema_name="inherits"))
    assert staged.staging_location == join_url(cat.storage_location, "tables", staged.id)


async def test_staging_table_survives_parent_rename(uc, schema):
    staged = await uc.tables.create_staging_table(CreateStagingTable(name="t", catalog_name="c", schema_name="s"))
    await uc.catalogs.update_catalog("c", UpdateCatalog(new_name="c2"))
    await uc.schemas.update_schema("c2.s", UpdateSchema(new_name="s2"))
    table = await make_managed(uc, "c2", "s2", "t", storage_location=staged.staging_location)
    assert table.table_id == staged.id
    assert (table.catalog_name, table.schema_name) == ("c2", "s2")
    assert (await uc.tables.get_table("c2.s2.t")).table_id == staged.id


# ---- errors ----------------------------------------------------------------------------


async def test_not_found_maps_to_404(uc, schema):
    calls = [
        uc.catalogs.get_catalog("nope"),
        uc.schemas.get_schema("c.nope"),
        uc.schemas.get_schema("nope.s"),
        uc.tables.get_table("c.s.nope"),
        uc.tables.get_table("c.nope.t"),
        uc.schemas.delete_schema("c.nope"),
        make_managed(uc, "c", "nope", "t"),
    ]
    for call in calls:
        with pytest.raises(NotFoundException) as e:
            await call
        assert e.value.status == 404
        body = json.loads(e.value.body)
        assert body["error_code"] == "NOT_FOUND" and body["message"]


async def test_already_exists_maps_to_409(uc, schema):
    await make_managed(uc, "c", "s", "t")
    calls = [
        lambda: make_catalog(uc, "c"),
        lambda: make_catalog(uc, "C"),
        lambda: make_schema(uc, "c", "s"),
        lambda: make_managed(uc, "c", "s", "t"),
        lambda: uc.tables.create_table(CreateTable(
            name="t", catalog_name="c", schema_name="s", table_type=TableType.VIEW, columns=[],
            view_definition="SELECT 1")),  # tables and views share one namespace
    ]
    for call in calls:
        with pytest.raises(ApiException) as e:
            await call()
        assert e.value.status == 409
        assert error_code(e.value) == "ALREADY_EXISTS"


async def test_invalid_names_are_400(uc):
    for bad in ("a.b", "a b", "a/b", "x" * 256):
        with pytest.raises(BadRequestException) as e:
            await make_catalog(uc, bad)
        assert error_code(e.value) == "INVALID_PARAMETER_VALUE"
