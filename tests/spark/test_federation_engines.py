"""Federation (issue 50.3): every engine reads a foreign table through shardcat, by its shardcat name, and
every API refuses a caller without SELECT.

The foreign systems (tests/integration/federation_upstreams.py, started once for this module): another
shardcat as a Unity Catalog (`uc_fed`: a Delta table) and as an Iceberg REST catalog (`irc_fed`: an Iceberg
table), moto's Glue server (`glue_fed`) and the Hive standalone metastore (`hive_fed`, marker `hive`),
each of the last two holding a Delta table and an Iceberg table. The APIs: the Unity Catalog REST API with
vended credentials, the batched resolve (`POST /resolve`, Spark's plugin), the UC Delta API (`/delta/v1`:
DuckDB's unity_catalog extension) and the Iceberg REST catalog (pyiceberg, DuckDB's iceberg extension,
Iceberg's Spark runtime). Search, path queries and the one-asset-per-path rule see the foreign tables too.
Spark's tests carry the marker `spark_connectors` (the module's other tests run without Spark).
"""

from __future__ import annotations

import asyncio
import glob
import importlib
import os
import uuid

import pytest
from deltalake import DeltaTable

from shardcat.entities.urls import local_path
from tests.conftest import new_workspace, serving
from tests.integration.federation_upstreams import (EVENT_ROWS, GLUE_REGION, ORDER_ROWS, HiveMetastore, Mounted,
                                                    fill_glue, mount, ok, upstream_iceberg_rest,
                                                    upstream_unity_catalog)
from tests.integration.governance_users import grant, user
from tests.spark.helpers import add_catalog, iceberg_catalog, run

federating = serving("federation-engines", webhook_allow_hosts=("127.0.0.1",))

HIVE = pytest.mark.hive
ALL = ["uc", "irc", "glue", pytest.param("hive", marks=HIVE)]
WITH_DELTA = ["uc", "glue", pytest.param("hive", marks=HIVE)]
WITH_ICEBERG = ["irc", "glue", pytest.param("hive", marks=HIVE)]
DELTA_API = "/delta/v1"


# ---- the foreign systems, mounted once for the module ----------------------------------------------


@pytest.fixture(scope="module")
async def fws(federating, http, tmp_path_factory):
    return await new_workspace(federating, http, tmp_path_factory.mktemp("federating"))


@pytest.fixture(scope="module")
async def uc_fed(fws, server, http, tmp_path_factory):
    upstream = await new_workspace(server, http, tmp_path_factory.mktemp("uc-upstream"))
    await upstream_unity_catalog(upstream)
    mounted = await mount(fws, "uc", "UNITY_CATALOG", {"url": upstream.url, "bearer_token": upstream.token},
                          {"catalog": "upstream"}, delta=True, iceberg=False)
    mounted.extra["upstream"] = upstream
    return mounted


@pytest.fixture(scope="module")
async def irc_fed(fws, server, http, tmp_path_factory):
    upstream = await new_workspace(server, http, tmp_path_factory.mktemp("irc-upstream"))
    await upstream_iceberg_rest(upstream)
    mounted = await mount(fws, "irc", "ICEBERG_REST", {"uri": f"{upstream.api}/iceberg", "token": upstream.token},
                          {"warehouse": "ice"}, delta=False, iceberg=True)
    mounted.extra["upstream"] = upstream
    return mounted


@pytest.fixture(scope="module")
def glue_endpoint():
    from moto.server import ThreadedMotoServer
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    yield f"http://127.0.0.1:{moto._server.server_port}"
    moto.stop()


@pytest.fixture(scope="module")
async def glue_fed(fws, glue_endpoint, tmp_path_factory):
    await asyncio.to_thread(fill_glue, glue_endpoint, tmp_path_factory.mktemp("glue-data"))
    return await mount(fws, "glue", "GLUE", {"region": GLUE_REGION, "endpoint_url": glue_endpoint,
                                             "aws_access_key_id": "testing", "aws_secret_access_key": "testing"},
                       {}, delta=True, iceberg=True)


@pytest.fixture(scope="module")
def hive_metastore(tmp_path_factory):
    hms = HiveMetastore(tmp_path_factory.mktemp("hms"))
    hms.start()
    yield hms
    hms.stop()


@pytest.fixture(scope="module")
async def hive_fed(fws, hive_metastore, tmp_path_factory):
    await asyncio.to_thread(hive_metastore.fill, tmp_path_factory.mktemp("hive-data"))
    return await mount(fws, "hive", "HIVE_METASTORE", {"host": "127.0.0.1", "port": str(hive_metastore.port)},
                       {}, delta=True, iceberg=True)


@pytest.fixture
def foreign(request) -> Mounted:
    """The foreign catalog a test is parametrized with (indirectly): its module fixture, started on first use."""
    return request.getfixturevalue(f"{request.param}_fed")


async def reader(federating, fws, foreign: Mounted):
    """A user who may use the foreign catalog and its schema, but holds SELECT on none of its tables."""
    bob = await user(federating, fws)
    await grant(fws, "catalog", foreign.catalog, bob.name, "USE CATALOG")
    await grant(fws, "schema", f"{foreign.catalog}.sales", bob.name, "USE SCHEMA")
    return bob


def rows_of(arrow, columns) -> list[tuple]:
    return sorted(zip(*(arrow.column(c).to_pylist() for c in columns)))


def expected(table: str) -> list[tuple]:
    return ORDER_ROWS if table == "orders" else EVENT_ROWS


def read_files(table: str, url: str, info: dict) -> list[tuple]:
    """The rows of a table read straight from its files at the vended URL (file:// here)."""
    if table == "orders":
        return rows_of(DeltaTable(local_path(url)).to_pyarrow_table(), ["id", "total"])
    from pyiceberg.table import StaticTable
    metadata = info["properties"]["metadata_location"]
    assert metadata.startswith(url), (metadata, url)
    return rows_of(StaticTable.from_metadata(metadata).scan().to_arrow(), ["id", "name"])


def duckdb_with(*packages: str):
    """DuckDB with extensions loaded from their pip packages' files (no network)."""
    import duckdb
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    for package in packages:
        module = importlib.import_module(f"duckdb_extension_{package}")
        [path] = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "*", "*.duckdb_extension"))
        con.execute(f"LOAD '{path}'")
    return con


# ---- the Unity Catalog REST API and the batched resolve ------------------------------------------------


@pytest.mark.parametrize("foreign", ALL, indirect=True)
async def test_uc_api_reads_each_foreign_table_with_vended_credentials(federating, fws, foreign):
    bob = await reader(federating, fws, foreign)
    for t in foreign.tables:
        name = f"{foreign.catalog}.sales.{t}"
        table = await ok(fws, "GET", f"/tables/{name}")
        assert table["data_source_format"] == ("DELTA" if t == "orders" else "ICEBERG"), table
        creds = await ok(fws, "POST", "/temporary-table-credentials",
                         json={"table_id": table["table_id"], "operation": "READ"})
        assert await run(read_files, t, creds["url"], table) == expected(t)
        # Without SELECT: the table is not seen, nor are its files vended.
        assert (await bob.call("GET", f"/tables/{name}"))[0] == 404
        status, body = await bob.call("POST", "/temporary-table-credentials",
                                      json={"table_id": table["table_id"], "operation": "READ"})
        assert status in (403, 404), body
        await grant(fws, "table", name, bob.name, "SELECT")
        creds = await ok(bob, "POST", "/temporary-table-credentials",
                         json={"table_id": table["table_id"], "operation": "READ"})
        assert await run(read_files, t, creds["url"], table) == expected(t)


@pytest.mark.parametrize("foreign", ALL, indirect=True)
async def test_batched_resolve_answers_each_foreign_table_in_one_call(federating, fws, foreign):
    names = [f"{foreign.catalog}.sales.{t}" for t in foreign.tables]
    out = await ok(fws, "POST", "/resolve", json={"items": [{"name": n} for n in names]})
    for t, item in zip(foreign.tables, out["items"]):
        assert "error" not in item, item
        assert [c["name"] for c in item["table"]["columns"]][0] == "id"
        url = item["temporary_credentials"]["url"]
        assert url == item["table"]["storage_location"]
        assert await run(read_files, t, url, item["table"]) == expected(t)
    bob = await reader(federating, fws, foreign)
    out = await ok(bob, "POST", "/resolve", json={"items": [{"name": n} for n in names]})
    for item in out["items"]:
        assert item.get("error", {}).get("error_code") in ("NOT_FOUND", "PERMISSION_DENIED"), item
        assert "temporary_credentials" not in item


# ---- the UC Delta API (/delta/v1) and DuckDB's unity_catalog extension on it ---------------------------


def duckdb_uc_rows(fws, token: str, catalog: str) -> list[tuple]:
    con = duckdb_with("httpfs", "delta", "unity_catalog")
    con.execute(f"CREATE SECRET (TYPE UC, TOKEN '{token}', ENDPOINT '{fws.url}')")
    con.execute(f"ATTACH '{catalog}' AS m (TYPE UC_CATALOG, DEFAULT_SCHEMA 'sales')")
    return con.execute("SELECT id, total FROM m.sales.orders ORDER BY id").fetchall()


@pytest.mark.parametrize("foreign", WITH_DELTA, indirect=True)
async def test_uc_delta_api_and_duckdb_read_a_foreign_delta_table(federating, fws, foreign):
    base = f"{DELTA_API}/catalogs/{foreign.catalog}/schemas/sales/tables"
    listed = await ok(fws, "GET", base)
    assert [i["name"] for i in listed["identifiers"]] == ["orders"]        # Delta tables only
    loaded = await ok(fws, "GET", f"{base}/orders")
    location = loaded["metadata"]["location"]
    assert [f["name"] for f in loaded["metadata"]["columns"]["fields"]] == ["id", "total"], loaded
    creds = await ok(fws, "GET", f"{base}/orders/credentials", params={"operation": "READ"})
    assert creds["storage-credentials"][0]["prefix"] == location
    assert await run(read_files, "orders", location, {}) == ORDER_ROWS
    status, body = await fws.call("GET", f"{base}/orders/credentials", params={"operation": "READ_WRITE"})
    assert status == 403 and "foreign catalog" in body["error"]["message"], body     # its system writes it
    assert await run(duckdb_uc_rows, fws, fws.token, foreign.catalog) == ORDER_ROWS
    # Without SELECT: nothing vended, and DuckDB reads nothing.
    bob = await reader(federating, fws, foreign)
    status, body = await bob.call("GET", f"{base}/orders/credentials", params={"operation": "READ"})
    assert status in (403, 404), body
    with pytest.raises(Exception):
        await run(duckdb_uc_rows, fws, bob.token, foreign.catalog)
    await grant(fws, "table", f"{foreign.catalog}.sales.orders", bob.name, "SELECT")
    assert await run(duckdb_uc_rows, fws, bob.token, foreign.catalog) == ORDER_ROWS


# ---- the Iceberg REST catalog: pyiceberg and DuckDB's iceberg extension ---------------------------------


def pyiceberg_rows(caller, catalog: str, table: str = "events") -> list[tuple]:
    from pyiceberg.catalog import load_catalog
    rest = load_catalog(uuid.uuid4().hex, type="rest", uri=f"{caller.api}/iceberg", warehouse=catalog,
                        token=caller.token)
    return rows_of(rest.load_table(("sales", table)).scan().to_arrow(), ["id", "name"])


def pyiceberg_listed(caller, catalog: str) -> list[str]:
    from pyiceberg.catalog import load_catalog
    rest = load_catalog(uuid.uuid4().hex, type="rest", uri=f"{caller.api}/iceberg", warehouse=catalog,
                        token=caller.token)
    return sorted(ident[-1] for ident in rest.list_tables(("sales",)))


def duckdb_iceberg_rows(caller, catalog: str) -> list[tuple]:
    con = duckdb_with("httpfs", "avro", "iceberg")
    con.execute(f"CREATE SECRET shardcat (TYPE ICEBERG, TOKEN '{caller.token}')")
    con.execute(f"ATTACH '{catalog}' AS lake (TYPE ICEBERG, ENDPOINT '{caller.api}/iceberg', SECRET shardcat)")
    return con.execute("SELECT id, name FROM lake.sales.events ORDER BY id").fetchall()


@pytest.mark.parametrize("foreign", WITH_ICEBERG, indirect=True)
async def test_iceberg_rest_pyiceberg_and_duckdb_read_a_foreign_iceberg_table(federating, fws, foreign):
    assert "events" in await run(pyiceberg_listed, fws, foreign.catalog)
    assert await run(pyiceberg_rows, fws, foreign.catalog) == EVENT_ROWS
    assert await run(duckdb_iceberg_rows, fws, foreign.catalog) == EVENT_ROWS
    # Without SELECT: pyiceberg and DuckDB are refused (the table answers as missing to who cannot see it).
    bob = await reader(federating, fws, foreign)
    with pytest.raises(Exception, match="NoSuchTable|does not exist|Forbidden|403"):
        await run(pyiceberg_rows, bob, foreign.catalog)
    with pytest.raises(Exception, match="does not exist|403"):
        await run(duckdb_iceberg_rows, bob, foreign.catalog)
    await grant(fws, "table", f"{foreign.catalog}.sales.events", bob.name, "SELECT")
    assert await run(pyiceberg_rows, bob, foreign.catalog) == EVENT_ROWS


async def test_iceberg_rest_lists_and_loads_a_foreign_table_no_other_api_read(fws, irc_fed):
    """A table added upstream: after a refresh the Iceberg REST catalog lists it (the foreign listing
    names it only), and loading it fetches it, though no other API read it before."""
    upstream = irc_fed.extra["upstream"]
    from pyiceberg.catalog import load_catalog
    from tests.integration.federation_upstreams import EVENTS

    def make():
        rest = load_catalog(uuid.uuid4().hex, type="rest", uri=f"{upstream.api}/iceberg", warehouse="ice",
                            token=upstream.token)
        rest.create_table(("sales", "clicks"), schema=EVENTS.schema).append(EVENTS)
    await run(make)
    await ok(fws, "POST", f"/shardcat/foreign-catalogs/{irc_fed.catalog}/refresh")
    assert "clicks" in await run(pyiceberg_listed, fws, irc_fed.catalog)
    assert await run(pyiceberg_rows, fws, irc_fed.catalog, "clicks") == EVENT_ROWS


# ---- Spark: shardcat's plugin (the batched resolve) and Iceberg's Spark runtime --------------------------


def plugin_rows(spark, caller, catalog: str) -> list[tuple]:
    session = spark.newSession()
    session.conf.set("spark.databricks.delta.snapshotPartitions", "2")
    add_catalog(session, catalog, "shardcat.spark.ShardcatCatalog", {"uri": caller.url, "token": caller.token})
    return [tuple(r) for r in session.sql(f"SELECT id, total FROM {catalog}.sales.orders ORDER BY id").collect()]


@pytest.mark.spark_connectors
@pytest.mark.timeout(600)       # the module's first Spark query loads Delta and the plugin: minutes on a loaded machine
@pytest.mark.parametrize("foreign", WITH_DELTA, indirect=True)
async def test_spark_plugin_reads_a_foreign_delta_table(federating, fws, foreign, spark):
    # (shardcat.spark's Python wrapper reads catalog-managed Delta tables only: no foreign one, by design.)
    assert await run(plugin_rows, spark, fws, foreign.catalog) == ORDER_ROWS
    bob = await reader(federating, fws, foreign)
    with pytest.raises(Exception, match="PERMISSION_DENIED|NOT_FOUND"):
        await run(plugin_rows, spark, bob, foreign.catalog)


@pytest.mark.spark_connectors
@pytest.mark.parametrize("foreign", WITH_ICEBERG, indirect=True)
async def test_spark_iceberg_runtime_reads_a_foreign_iceberg_table(federating, fws, foreign, spark):
    def rows(caller):
        name = iceberg_catalog(spark, caller, foreign.catalog)
        return [tuple(r) for r in spark.sql(f"SELECT id, name FROM {name}.sales.events ORDER BY id").collect()]
    assert await run(rows, fws) == EVENT_ROWS
    bob = await reader(federating, fws, foreign)
    with pytest.raises(Exception, match="NoSuchTable|not found|cannot be found|403|Forbidden"):
        await run(rows, bob)


# ---- search, path queries, one asset per path -------------------------------------------------------------


@pytest.mark.parametrize("foreign", ALL, indirect=True)
async def test_search_and_path_queries_find_foreign_tables(federating, fws, foreign):
    for t in foreign.tables:
        found = await ok(fws, "GET", "/shardcat/search", params={"query": t, "securable_types": "TABLE"})
        assert f"{foreign.catalog}.sales.{t}" in [r["full_name"] for r in found["results"]], found
    query = f'/catalog[name = "{foreign.catalog}"]/schema[name = "sales"]/table'
    answer = await ok(fws, "POST", "/shardcat/query", json={"query": query})
    assert set(foreign.tables) <= {r["name"] for r in answer["results"]}, answer
    if foreign.delta:
        answer = await ok(fws, "POST", "/shardcat/query", json={
            "query": f'/catalog[name = "{foreign.catalog}"]/schema[name = "sales"]/table[format = "DELTA" and '
                     'storage like "file:%"]'})
        assert [r["name"] for r in answer["results"]] == ["orders"], answer
    # Only what the caller may see: nothing of the catalog's tables without a privilege on them.
    bob = await reader(federating, fws, foreign)
    assert (await ok(bob, "POST", "/shardcat/query", json={"query": query}))["results"] == []
    found = await ok(bob, "GET", "/shardcat/search", params={"query": foreign.tables[0]})
    assert not [r for r in found["results"] if r["full_name"].startswith(foreign.catalog + ".")], found


@pytest.mark.parametrize("foreign", ALL, indirect=True)
async def test_one_asset_per_path_includes_foreign_tables_locations(federating, fws, foreign):
    native = f"native_{foreign.system}"
    await ok(fws, "POST", "/catalogs", json={"name": native})
    await ok(fws, "POST", "/schemas", json={"name": "s", "catalog_name": native})
    bob = await reader(federating, fws, foreign)
    for t in foreign.tables:
        table = await ok(fws, "GET", f"/tables/{foreign.catalog}.sales.{t}")
        location = table["storage_location"]
        # A native table at, or inside, a foreign table's location is refused: the path has its owner.
        for where in (location, location.rstrip("/") + "/inner"):
            status, body = await fws.call("POST", "/tables", json={
                "name": f"{t}_copy", "catalog_name": native, "schema_name": "s", "table_type": "EXTERNAL",
                "data_source_format": "DELTA", "storage_location": where,
                "columns": [{"name": "id", "type_name": "LONG", "position": 0}]})
            assert status in (400, 409) and "overlap" in body["message"].lower(), (where, body)
        # By path, the foreign table decides: its SELECT reads, nothing writes, and the resolve names it.
        await ok(fws, "POST", "/temporary-path-credentials", json={"url": location, "operation": "PATH_READ"})
        status, body = await fws.call("POST", "/temporary-path-credentials",
                                      json={"url": location, "operation": "PATH_READ_WRITE"})
        assert status in (400, 403), body
        status, body = await bob.call("POST", "/temporary-path-credentials",
                                      json={"url": location, "operation": "PATH_READ"})
        assert status in (403, 404), body
        out = await ok(fws, "POST", "/resolve", json={"items": [{"path": location}]})
        assert out["items"][0]["name"] == f"{foreign.catalog}.sales.{t}" and "table" in out["items"][0], out


async def test_a_foreign_table_on_a_native_tables_storage_is_not_served(fws, glue_fed, glue_endpoint, tmp_path):
    """The rule the other way round: a table Glue places at (inside) a native table's storage is
    mirrored without storage (it says why), so neither its id nor its path reaches the native data."""
    from tests.integration.federation_upstreams import glue_client, glue_table, write_delta
    native = write_delta(tmp_path / "native")
    await ok(fws, "POST", "/catalogs", json={"name": "native_owner"})
    await ok(fws, "POST", "/schemas", json={"name": "s", "catalog_name": "native_owner"})
    await ok(fws, "POST", "/tables", json={
        "name": "t", "catalog_name": "native_owner", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "storage_location": native,
        "columns": [{"name": "id", "type_name": "LONG", "position": 0}]})

    def shadow():
        glue = glue_client(glue_endpoint)
        glue.create_database(DatabaseInput={"Name": "clash"})
        glue.create_table(DatabaseName="clash", TableInput=glue_table(
            "orders", native, {"spark.sql.sources.provider": "delta"}))
    await run(shadow)
    await ok(fws, "POST", f"/shardcat/foreign-catalogs/{glue_fed.catalog}/refresh")
    table = await ok(fws, "GET", f"/tables/{glue_fed.catalog}.clash.orders")
    assert "overlaps the storage of table 'native_owner.s.t'" in table["foreign"]["storage"], table
    status, body = await fws.call("POST", "/temporary-table-credentials",
                                  json={"table_id": table["table_id"], "operation": "READ"})
    assert status in (400, 403, 404) and "native_owner.s.t" not in str(body), body
    out = await ok(fws, "POST", "/resolve", json={"items": [{"path": native}]})
    assert out["items"][0]["name"] == "native_owner.s.t", out      # the path is still the native table's
