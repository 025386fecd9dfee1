"""The Iceberg REST catalog as its spec and pyiceberg expect it (issue 46): every error under an Iceberg base in
Iceberg's ErrorModel and under /delta/v1 in the UC Delta API's (unknown routes, tokens, methods, query strings
and server errors included), and the answers the spec names where shardcat answered otherwise."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from governance_users import grant, user
from pyiceberg.catalog import load_catalog

from shardcat.web.middleware import error_middleware

ICE = "/iceberg/v1"
P = f"{ICE}/catalogs/ice"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
DELTA_TYPES = {  # api/delta.yaml's DeltaErrorType
    "BadRequestException", "InvalidParameterValueException", "UnsupportedTableFormatException",
    "NotAuthorizedException", "PermissionDeniedException", "NotFoundException", "NoSuchCatalogException",
    "NoSuchSchemaException", "NoSuchTableException", "AlreadyExistsException", "CommitVersionConflictException",
    "UpdateRequirementConflictException", "ResourceExhaustedException", "TooManyRequestsException",
    "CommitStateUnknownException", "InternalServerErrorException", "NotImplementedException"}


@pytest.fixture
async def ice(ws):
    for path, body in (("/catalogs", {"name": "ice"}), ("/schemas", {"name": "s", "catalog_name": "ice"})):
        status, out = await ws.call("POST", path, json=body)
        assert status == 200, out
    return ws


def error_model(status: int, body, kind: str | None = None, delta: bool = False) -> dict:
    """The answer is `{"error": {"message", "type", "code"}}` and nothing else, `code` its status."""
    assert isinstance(body, dict) and set(body) == {"error"}, (status, body)
    error = body["error"]
    assert set(error) == {"message", "type", "code"} and error["code"] == status and error["message"], body
    if kind is not None:
        assert error["type"] == kind, body
    if delta:
        assert error["type"] in DELTA_TYPES, body
    return error


async def raw(ws, method: str, path: str, *, token: str | None = None, **kw) -> tuple[int, object]:
    headers = {"Authorization": f"Bearer {token if token is not None else ws.token}"}
    async with ws.session.request(method, ws.api + path, headers=headers, **kw) as r:
        return r.status, await r.json(content_type=None)


async def test_refusals_before_a_handler_are_in_each_protocols_error_model(ice):
    delta = "/delta/v1/catalogs/ice/schemas/s/tables"
    for path, unknown, is_delta in ((f"{P}/namespaces", f"{P}/nothing-here", False),
                                    (f"{ICE}/config", f"{ICE}/nothing/here", False), (delta, f"{delta}/t/x/y", True)):
        status, body = await raw(ice, "GET", path, token="not-a-token")
        assert status == 401
        error_model(status, body, "NotAuthorizedException", delta=is_delta)
        status, body = await raw(ice, "GET", unknown)
        assert status == 404
        error_model(status, body, "NotFoundException", delta=is_delta)
        status, body = await raw(ice, "PATCH", path)
        assert status == 405
        error_model(status, body, delta=is_delta)
        status, body = await raw(ice, "GET", path + "?x=%ff")           # not UTF-8: refused before any handler
        assert status == 400
        error_model(status, body, delta=is_delta)
    status, body = await raw(ice, "GET", "/delta/v1/no/such/route")
    error_model(status, body, "NotFoundException", delta=True)
    status, body = await raw(ice, "GET", f"{P}/namespaces", params={"pageSize": "abc"})
    assert status == 400
    error_model(status, body, "BadRequestException")
    status, body = await raw(ice, "GET", delta, params={"max_results": "abc"})
    assert status == 400
    error_model(status, body, "InvalidParameterValueException", delta=True)
    # Unity Catalog's own API keeps its shape.
    status, body = await raw(ice, "GET", "/no/such/route")
    assert status == 404 and body["error_code"] == "ENDPOINT_NOT_FOUND", body


async def test_a_server_error_is_in_each_protocols_error_model():
    """A handler failing unexpectedly answers 500 in the protocol's model (and Unity Catalog's elsewhere)."""
    async def broken(request):
        raise RuntimeError("a bug")

    app = web.Application(middlewares=[error_middleware(1 << 20)])
    for path in ("/api/2.1/unity-catalog/iceberg/v1/config", "/api/2.1/unity-catalog/iceberg-rest/v1/x",
                 "/api/2.1/unity-catalog/delta/v1/config", "/api/2.1/unity-catalog/catalogs"):
        app.router.add_get(path, broken)
    async with TestClient(TestServer(app)) as client:
        for path, kind in (("/api/2.1/unity-catalog/iceberg/v1/config", "InternalServerError"),
                           ("/api/2.1/unity-catalog/iceberg-rest/v1/x", "InternalServerError"),
                           ("/api/2.1/unity-catalog/delta/v1/config", "InternalServerErrorException")):
            r = await client.get(path)
            error = error_model(r.status, await r.json(), kind, delta="delta" in path)
            assert r.status == 500 and "a bug" not in error["message"]
        r = await client.get("/api/2.1/unity-catalog/catalogs")
        assert r.status == 500 and (await r.json())["error_code"] == "INTERNAL_ERROR"


# ---- answers the spec names --------------------------------------------------------------------------------

VIEW_VERSION = {"version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {}, "default-namespace": ["s"],
                "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}]}


async def test_a_namespace_that_is_not_a_list_is_a_400(ice):
    for namespace in ({"a": 1}, 5, 1.5, True, [5], [""], [{"a": 1}]):
        status, body = await ice.call("POST", f"{P}/namespaces", json={"namespace": namespace})
        error_model(status, body, "BadRequestException")
        status, body = await ice.call("POST", f"{ICE}/namespaces", json={"namespace": namespace})
        error_model(status, body, "BadRequestException")
    await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "t", "schema": SCHEMA})
    for namespace in ({"a": 1}, 7):
        status, body = await ice.call("POST", f"{P}/tables/rename", json={
            "source": {"namespace": ["s"], "name": "t"}, "destination": {"namespace": namespace, "name": "t"}})
        error_model(status, body, "BadRequestException")
        status, body = await ice.call("POST", f"{P}/tables/rename", json={
            "source": {"namespace": namespace, "name": "t"}, "destination": {"namespace": ["s"], "name": "u"}})
        error_model(status, body, "BadRequestException")
        status, body = await ice.call("POST", f"{P}/transactions/commit", json={"table-changes": [
            {"identifier": {"namespace": namespace, "name": "t"}, "requirements": [], "updates": []}]})
        error_model(status, body, "BadRequestException")
        status, body = await ice.call("POST", f"{P}/namespaces/s/views", json={
            "name": "v", "schema": SCHEMA, "view-version": {**VIEW_VERSION, "default-namespace": namespace}})
        error_model(status, body, "BadRequestException")
    status, body = await ice.call("GET", f"{P}/namespaces/s/tables/t")
    assert status == 200, body                # nothing of it changed


async def test_a_view_without_sql_is_a_400_and_nothing_is_made(ice):
    status, body = await ice.call("POST", f"{P}/namespaces/s/views", json={
        "name": "v", "schema": SCHEMA, "view-version": {**VIEW_VERSION, "representations": []}})
    assert "representation" in error_model(status, body, "BadRequestException")["message"]
    status, body = await ice.call("GET", f"{P}/namespaces/s/views/v")
    error_model(status, body, "NoSuchViewException")
    status, body = await ice.call("POST", f"{P}/namespaces/s/views", json={
        "name": "v", "schema": SCHEMA, "view-version": VIEW_VERSION})
    assert status == 200, body
    for update in ({"action": "set-properties", "updates": 5}, {"action": "add-view-version", "view-version": 5},
                   {"action": "add-view-version", "view-version": {**VIEW_VERSION, "representations": []}},
                   {"action": "add-schema", "schema": {**SCHEMA, "fields": [
                       {"id": 1, "name": "id", "type": "long", "required": False, "initial-default": "abc"}]}}):
        status, body = await ice.call("POST", f"{P}/namespaces/s/views/v", json={"updates": [update]})
        error_model(status, body, "BadRequestException")


async def test_exists_operations_answer_204(ice):
    await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "t", "schema": SCHEMA})
    await ice.call("POST", f"{P}/namespaces/s/views", json={"name": "v", "schema": SCHEMA, "view-version": VIEW_VERSION})
    for base in (P, f"/iceberg-rest/v1/catalogs/ice"):
        for path in ("/namespaces/s", "/namespaces/s/tables/t", "/namespaces/s/views/v"):
            async with ice.session.head(ice.api + base + path, headers=ice.headers) as r:
                assert (r.status, await r.read()) == (204, b""), path
        for path in ("/namespaces/nope", "/namespaces/s/tables/nope", "/namespaces/s/views/nope",
                     "/namespaces/s/tables/v", "/namespaces/s/views/t"):
            async with ice.session.head(ice.api + base + path, headers=ice.headers) as r:
                assert r.status == 404, path
    async with ice.session.head(ice.api + f"{ICE}/namespaces/ice\x1fs", headers=ice.headers) as r:
        assert r.status == 204
    status, body = await ice.call("GET", f"{P}/namespaces/s/tables/t")     # the GET still answers the load
    assert status == 200 and body["metadata"]["format-version"] == 2


async def test_a_namespace_comment_update_persists(ice):
    status, body = await ice.call("POST", f"{P}/namespaces", json={"namespace": ["c"], "properties": {
        "comment": "first", "owner-team": "x"}})
    assert status == 200, body
    status, body = await ice.call("POST", f"{P}/namespaces/c/properties", json={"updates": {"comment": "second"}})
    assert (status, body) == (200, {"updated": ["comment"], "removed": [], "missing": []})
    status, body = await ice.call("GET", f"{P}/namespaces/c")
    assert body["properties"] == {"comment": "second", "owner-team": "x"}, body
    status, schema = await ice.call("GET", "/schemas/ice.c")
    assert schema["comment"] == "second" and "comment" not in (schema.get("properties") or {}), schema
    status, body = await ice.call("POST", f"{P}/namespaces/c/properties", json={"removals": ["comment", "nope"]})
    assert (status, body) == (200, {"updated": [], "removed": ["comment"], "missing": ["nope"]})
    status, body = await ice.call("GET", f"{P}/namespaces/c")
    assert body["properties"] == {"owner-team": "x"}, body
    # A location is the schema's storage root: refused, never answered as done and dropped.
    status, body = await ice.call("POST", f"{P}/namespaces/c/properties", json={"updates": {"location": "file:///x"}})
    error_model(status, body, "BadRequestException")


def namespace_round(api: str, token: str, warehouse: dict, namespace) -> list[bool]:
    """pyiceberg's own calls (blocking: run in a thread beside the server's loop)."""
    catalog = load_catalog("t", type="rest", uri=api + "/iceberg", token=token, **warehouse)
    seen = [catalog.namespace_exists(namespace)]
    catalog.create_namespace_if_not_exists(namespace)
    seen.append(catalog.namespace_exists(namespace))
    catalog.create_namespace_if_not_exists(namespace)              # again: no error
    return seen + [catalog.namespace_exists(namespace)]


async def test_pyiceberg_namespace_exists_and_create_if_not_exists(ice):
    for warehouse, namespace in (({"warehouse": "ice"}, "fresh"), ({"warehouse": "ice"}, "my_iceberg_database-abcdefgh"), ({}, ("ice", "fresher")), ({}, "newcat")):
        assert await asyncio.to_thread(namespace_round, ice.api, ice.token, warehouse, namespace) == \
            [False, True, True]


async def test_format_version_3_tables_and_removals_of_unset_properties_over_rest(ice):
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables", json={
        "name": "v3", "schema": SCHEMA, "properties": {"format-version": "3"}})
    assert status == 200 and body["metadata"]["format-version"] == 3 and body["metadata"]["next-row-id"] == 0, body
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "v2", "schema": SCHEMA})
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables/v2", json={"updates": [
        {"action": "remove-properties", "removals": ["never-set"]},
        {"action": "upgrade-format-version", "format-version": 3}]})
    assert status == 200 and body["metadata"]["format-version"] == 3, body
    status, body = await ice.call("GET", f"{P}/namespaces/s/tables/v2")
    assert status == 200 and body["metadata"]["format-version"] == 3, body


def v2_table_with_rows(api: str, token: str) -> None:
    import pyarrow as pa
    catalog = load_catalog("t", type="rest", uri=api + "/iceberg", token=token, warehouse="ice")
    rows = pa.table([pa.nulls(10, pa.int32())], names=["some_field"])
    catalog.create_table("s.upgraded", schema=rows.schema, properties={"format-version": "2"}).append(rows)


def rows_with_a_new_default(api: str, token: str) -> int:
    from pyiceberg.types import BooleanType
    table = load_catalog("t", type="rest", uri=api + "/iceberg", token=token, warehouse="ice").load_table("s.upgraded")
    with table.update_schema() as update:
        update.add_column("so_true", BooleanType(), required=False, default_value=True)
    return len(table.scan().filter("so_true == True").to_arrow())


async def test_a_v2_table_with_snapshots_upgrades_to_format_version_3(ice):
    """pyiceberg's suite (test_reads.py::test_initial_default): Spark's `ALTER TABLE t SET TBLPROPERTIES
    ('format-version'='3')` on a v2 table pyiceberg wrote rows to is one upgrade-format-version update; it was a
    500 (the base's unset next-row-id clashed with the upgrade's). The upgrade starts row lineage at 0, and a
    column added then with a default reads as that default in the rows written before."""
    await asyncio.to_thread(v2_table_with_rows, ice.api, ice.token)
    status, body = await ice.call("POST", f"{P}/namespaces/s/tables/upgraded", json={
        "updates": [{"action": "upgrade-format-version", "format-version": 3}]})
    assert status == 200, body
    assert (body["metadata"]["format-version"], body["metadata"]["next-row-id"]) == (3, 0), body
    assert len(body["metadata"]["snapshots"]) == 1, body
    assert await asyncio.to_thread(rows_with_a_new_default, ice.api, ice.token) == 10


async def test_a_table_or_view_moves_to_another_namespace_of_its_catalog(server, ice):
    await ice.call("POST", f"{P}/namespaces", json={"namespace": ["s2"]})
    status, made = await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "t", "schema": SCHEMA})
    await ice.call("POST", f"{P}/namespaces/s/views", json={"name": "v", "schema": SCHEMA, "view-version": VIEW_VERSION})
    for kind in ("tables", "views"):
        old = "t" if kind == "tables" else "v"
        status, body = await ice.call("POST", f"{P}/{kind}/rename", json={
            "source": {"namespace": ["s"], "name": old}, "destination": {"namespace": ["s2"], "name": old + "2"}})
        assert status == 204, body
        status, body = await ice.call("GET", f"{P}/namespaces/s2/{kind}")
        assert body["identifiers"] == [{"namespace": ["s2"], "name": old + "2"}], body
        status, body = await ice.call("GET", f"{P}/namespaces/s/{kind}")
        assert body["identifiers"] == [], body
    status, body = await ice.call("GET", f"{P}/namespaces/s2/tables/t2")
    assert status == 200 and body["metadata-location"] == made["metadata-location"], body
    status, body = await ice.call("GET", "/tables/ice.s2.t2")
    assert status == 200 and body["schema_name"] == "s2" and body["full_name"] == "ice.s2.t2", body
    # Into another catalog: the spec's 406; over a taken name: 409; into a missing namespace: 404.
    await ice.call("POST", f"{ICE}/namespaces", json={"namespace": ["other"]})
    await ice.call("POST", f"{ICE}/namespaces", json={"namespace": ["other", "x"]})
    status, body = await ice.call("POST", f"{ICE}/tables/rename", json={
        "source": {"namespace": ["ice", "s2"], "name": "t2"}, "destination": {"namespace": ["other", "x"], "name": "t"}})
    error_model(status, body, "UnsupportedOperationException")
    status, body = await ice.call("POST", f"{P}/tables/rename", json={
        "source": {"namespace": ["s2"], "name": "t2"}, "destination": {"namespace": ["s"], "name": "v"}})
    assert status == 404 or status == 204, body        # v moved away: the name in s is free again
    status, body = await ice.call("POST", f"{P}/tables/rename", json={
        "source": {"namespace": ["s"], "name": "v"}, "destination": {"namespace": ["s2"], "name": "v2"}})
    error_model(status, body, "AlreadyExistsException")
    status, body = await ice.call("POST", f"{P}/tables/rename", json={
        "source": {"namespace": ["s"], "name": "v"}, "destination": {"namespace": ["nope"], "name": "v"}})
    error_model(status, body, "NoSuchNamespaceException")


async def test_moving_needs_the_tables_rename_and_a_create_in_the_destination(server, ice):
    """Attacks: a user who may read the table, or own it without CREATE TABLE in the destination, or create
    there without owning it, moves nothing; a table the user may not see answers as missing."""
    await ice.call("POST", f"{P}/namespaces", json={"namespace": ["s2"]})
    await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "t", "schema": SCHEMA})
    mallory = await user(server, ice)
    await grant(ice, "catalog", "ice", mallory.name, "USE_CATALOG")
    move = {"source": {"namespace": ["s"], "name": "t"}, "destination": {"namespace": ["s2"], "name": "t"}}
    status, body = await mallory.call("POST", f"{P}/tables/rename", json=move)
    error_model(status, body, "NoSuchTableException")                    # not even seen
    await grant(ice, "schema", "ice.s", mallory.name, "USE_SCHEMA", "SELECT", "MODIFY")
    await grant(ice, "schema", "ice.s2", mallory.name, "USE_SCHEMA", "CREATE_TABLE")
    status, body = await mallory.call("POST", f"{P}/tables/rename", json=move)
    error_model(status, body, "ForbiddenException")                       # may read and write, not rename
    status, body = await ice.call("PATCH", "/tables/ice.s.t", json={"owner": mallory.name})
    assert status == 200, body
    await grant(ice, "schema", "ice.s2", mallory.name, remove=["CREATE_TABLE"])
    status, body = await mallory.call("POST", f"{P}/tables/rename", json=move)
    error_model(status, body, "ForbiddenException")                       # owns it, may not create in s2
    status, body = await ice.call("GET", f"{P}/namespaces/s/tables/t")
    assert status == 200, body                                           # still where it was
    await grant(ice, "schema", "ice.s2", mallory.name, "CREATE_TABLE")
    status, body = await mallory.call("POST", f"{P}/tables/rename", json=move)
    assert status == 204, body
    # Grants follow the new schema: a reader of s alone no longer reads it, a reader of s2 does.
    eve = await user(server, ice)
    await grant(ice, "catalog", "ice", eve.name, "USE_CATALOG")
    await grant(ice, "schema", "ice.s", eve.name, "USE_SCHEMA", "SELECT")
    status, body = await eve.call("GET", f"{P}/namespaces/s2/tables/t")
    error_model(status, body, "NoSuchTableException")
    await grant(ice, "schema", "ice.s2", eve.name, "USE_SCHEMA", "SELECT")
    status, body = await eve.call("GET", f"{P}/namespaces/s2/tables/t")
    assert status == 200, body


async def test_the_unity_catalog_sdk_reads_an_iceberg_tables_format(ice):
    """`data_source_format: ICEBERG` (outside open-source UC's enum, inside Databricks' and the SDK's: docs/api.md)."""
    from unitycatalog.client import ApiClient, Configuration, TablesApi
    from unitycatalog.client.models import DataSourceFormat

    await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "t", "schema": SCHEMA})
    config = Configuration(host=ice.api)
    async with ApiClient(config, header_name="Authorization", header_value=f"Bearer {ice.token}") as client:
        tables = await TablesApi(client).list_tables(catalog_name="ice", schema_name="s")
        assert [(t.name, t.data_source_format) for t in tables.tables] == [("t", DataSourceFormat.ICEBERG)]
        table = await TablesApi(client).get_table("ice.s.t")
        assert table.data_source_format == DataSourceFormat.ICEBERG and table.columns[0].name == "id"


async def test_register_from_a_dropped_tables_managed_storage(server, ice):
    """register after drop (no purge), as pyiceberg's and Iceberg's Java suites do: the dropped table's owner
    re-adopts it (MANAGED, its own location); anyone else meets the overlap refusal an unowned path gets."""
    status, made = await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "t", "schema": SCHEMA})
    location = made["metadata-location"]
    status, body = await ice.call("DELETE", f"{P}/namespaces/s/tables/t")
    assert status == 204, body
    status, body = await ice.call("POST", f"{P}/namespaces/s/register", json={"name": "back",
                                                                              "metadata-location": location})
    assert status == 200 and body["metadata-location"] == location, body
    status, table = await ice.call("GET", "/tables/ice.s.back")
    assert table["table_type"] == "MANAGED" and table["storage_location"] == made["metadata"]["location"], table
    status, body = await ice.call("POST", f"{P}/namespaces/s/register", json={"name": "twice",
                                                                              "metadata-location": location})
    assert "overlaps" in error_model(status, body, "BadRequestException")["message"]     # a live table's now


async def test_another_users_dropped_or_live_table_metadata_stays_unreachable(server, ice):
    mallory = await user(server, ice)
    await grant(ice, "catalog", "ice", mallory.name, "USE_CATALOG")
    await grant(ice, "schema", "ice.s", mallory.name, "USE_SCHEMA", "CREATE_TABLE")
    status, dropped = await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "secret", "schema": SCHEMA})
    await ice.call("DELETE", f"{P}/namespaces/s/tables/secret")
    status, live = await ice.call("POST", f"{P}/namespaces/s/tables", json={"name": "live", "schema": SCHEMA})
    root = dropped["metadata"]["location"].rsplit("/", 1)[0]          # the schema's managed tables' folder
    nothing = f"{root}/00000000-0000-4000-8000-000000000000/metadata/00000-x.metadata.json"
    answers = []
    for location in (dropped["metadata-location"], live["metadata-location"], nothing):
        file_path = location.removeprefix("file://")
        for spelled in (location, f"file:{file_path}", location.replace("/metadata/", "/metadata/./"),
                        location.replace("/metadata/", "/x/../metadata/")):
            status, body = await mallory.call("POST", f"{P}/namespaces/s/register",
                                              json={"name": "mine", "metadata-location": spelled})
            error = error_model(status, body)
            answers.append((status, error["type"], error["message"].replace(spelled, "<url>")
                            .replace(location, "<url>")))
    # Every refusal alike: nothing tells a dropped table's metadata from a live one's or from no file at all.
    assert len({(s, t) for s, t, _ in answers}) == 1 and answers[0][0] == 400, answers
    assert answers[:4] == answers[8:], answers          # a dropped table's file answers as no file at all
    status, body = await mallory.call("GET", f"{P}/namespaces/s/tables/mine")
    error_model(status, body, "NoSuchTableException")
    # Her own dropped table she may take back.
    status, own = await mallory.call("POST", f"{P}/namespaces/s/tables", json={"name": "own", "schema": SCHEMA})
    assert status == 200, own
    await mallory.call("DELETE", f"{P}/namespaces/s/tables/own")
    status, body = await mallory.call("POST", f"{P}/namespaces/s/register", json={
        "name": "own_again", "metadata-location": own["metadata-location"]})
    assert status == 200, body


def pyiceberg_round(api: str, token: str) -> dict:
    """What pyiceberg's own integration suite (tools/pyiceberg_suite.py) asks of a REST catalog, in pyiceberg's own
    calls: a name no namespace can have, namespace properties, format version 3, register after drop, a move."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    catalog = load_catalog("t", type="rest", uri=api + "/iceberg", token=token, warehouse="ice")
    seen = {"TEST NS": catalog.namespace_exists("TEST NS")}
    catalog.create_namespace("ns1", {"comment": "one", "team": "a"})
    catalog.update_namespace_properties("ns1", removals={"team"}, updates={"comment": "two"})
    seen["properties"] = catalog.load_namespace_properties("ns1")
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    v3 = catalog.create_table("ns1.v3", schema, properties={"format-version": "3"})
    seen["v3"] = catalog.load_table("ns1.v3").metadata.format_version
    catalog.drop_table("ns1.v3")
    catalog.register_table("ns1.again", v3.metadata_location)
    seen["registered"] = catalog.load_table("ns1.again").metadata_location == v3.metadata_location
    catalog.create_namespace("ns2")
    catalog.rename_table("ns1.again", "ns2.moved")
    seen["moved"] = [catalog.table_exists("ns2.moved"), catalog.table_exists("ns1.again")]
    try:
        catalog.load_table("ns1.again")
    except NoSuchTableError:
        seen["gone"] = True
    return seen


async def test_pyicebergs_suite_behaviours_through_pyiceberg(ice):
    seen = await asyncio.to_thread(pyiceberg_round, ice.api, ice.token)
    assert seen == {"TEST NS": False, "properties": {"comment": "two"}, "v3": 3, "registered": True,
                    "moved": [True, False], "gone": True}, seen
