"""Federation (issue 50): connections, and foreign catalogs of another Unity Catalog and of an Iceberg
REST catalog (each a second shardcat on loopback: real servers, real clients) mounted, browsed, read,
governed, refreshed, served stale while the foreign system is down and then refused with a 503.

The federating server (`federating`) may call 127.0.0.1 only because its operator allowed that host
(`--webhook-allow-host 127.0.0.1`); the session's server allows nothing, and refuses connections to
loopback, private and metadata addresses in every spelling.
"""

from __future__ import annotations

import asyncio
import uuid

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog import load_catalog

from governance_users import grant, unique, user
from shardcat.cluster.server import ServeConfig, start
from shardcat.entities.urls import local_path
from tests.conftest import new_workspace, serving

federating = serving("federation", webhook_allow_hosts=("127.0.0.1",))
COLUMNS = [{"name": "id", "type_name": "LONG", "position": 0}, {"name": "total", "type_name": "DOUBLE", "position": 1}]


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


async def upstream_uc(server, http, tmp_path):
    """A second shardcat's workspace holding catalog `upstream`, schema `sales`, Delta table `orders` (3 rows)."""
    foreign = await new_workspace(server, http, tmp_path / "foreign")
    await ok(foreign, "POST", "/catalogs", json={"name": "upstream"})
    await ok(foreign, "POST", "/schemas", json={"name": "sales", "catalog_name": "upstream"})
    table = await ok(foreign, "POST", "/tables", json={
        "name": "orders", "catalog_name": "upstream", "schema_name": "sales", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLUMNS})
    write_deltalake(local_path(table["storage_location"]), pa.table({"id": [1, 2, 3], "total": [1.5, 2.5, 3.5]}))
    return foreign


async def mount_uc(ws, foreign, name="mirror", ttl="300", connection=None):
    connection = connection or unique("up")
    await ok(ws, "POST", "/connections", json={"name": connection, "connection_type": "UNITY_CATALOG",
                                               "options": {"url": foreign.url, "bearer_token": foreign.token}})
    catalog = await ok(ws, "POST", "/catalogs", json={"name": name, "connection_name": connection,
                                                      "options": {"catalog": "upstream", "cache_ttl_seconds": ttl}})
    return connection, catalog


async def expire(ws, catalog: str, options: dict) -> None:
    """Shorten a foreign catalog's time-to-live to one second and let it pass: what was fetched is
    then too old, whatever the machine's pace (a test never waits on a short TTL being still fresh)."""
    await ok(ws, "PATCH", f"/catalogs/{catalog}", json={"options": {**options, "cache_ttl_seconds": "1"}})
    await asyncio.sleep(1.1)


@pytest.fixture
async def fws(federating, http, tmp_path):
    return await new_workspace(federating, http, tmp_path / "federating")


# ---- connections ----------------------------------------------------------------------------


async def test_connections_crud_and_secrets_never_shown(federating, server, http, fws, tmp_path):
    foreign = await new_workspace(server, http, tmp_path / "f")
    secret = "tok-" + uuid.uuid4().hex
    made = await ok(fws, "POST", "/connections", json={
        "name": "Up", "connection_type": "UNITY_CATALOG", "comment": "the other one",
        "options": {"url": foreign.url, "bearer_token": secret}})
    assert made["name"] == "up" and made["connection_type"] == "UNITY_CATALOG" and made["options"] == {"url": foreign.url}
    assert made["securable_type"] == "CONNECTION" and made["connection_id"]
    got = await ok(fws, "GET", "/connections/UP")
    listed = await ok(fws, "GET", "/connections")
    assert [c["name"] for c in listed["connections"]] == ["up"]
    for answer in (made, got, listed):
        assert secret not in str(answer)
    row = await federating.store.pool.fetchval(
        "SELECT info::text FROM assets WHERE metastore_id = $1 AND type = 'connection'", uuid.UUID(fws.metastore_id))
    assert secret not in row and "sealed:v1:" in row
    # An update leaving the secret out keeps it (sealed); one naming it replaces it.
    await ok(fws, "PATCH", "/connections/up", json={"options": {"url": foreign.url + "/"}, "comment": "moved"})
    row2 = await federating.store.pool.fetchval(
        "SELECT info::text FROM assets WHERE metastore_id = $1 AND type = 'connection'", uuid.UUID(fws.metastore_id))
    assert "bearer_token" in row2 and secret not in row2
    # A refusal never echoes the secret it was sent.
    status, body = await fws.call("POST", "/connections", json={
        "name": "up", "connection_type": "UNITY_CATALOG", "options": {"url": foreign.url, "bearer_token": secret}})
    assert status == 409 and secret not in str(body)
    status, body = await fws.call("POST", "/connections", json={
        "name": "snow", "connection_type": "SNOWFLAKE", "options": {"host": "x"}})
    assert status == 400 and "SNOWFLAKE" in body["message"] and "UNITY_CATALOG" in body["message"]
    status, body = await fws.call("POST", "/connections", json={"name": "noopt", "connection_type": "ICEBERG_REST",
                                                                 "options": {}})
    assert status == 400 and "'uri'" in body["message"]
    await ok(fws, "DELETE", "/connections/up")
    assert (await fws.call("GET", "/connections/up"))[0] == 404


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{port}", "http://localhost:{port}", "http://2130706433:{port}", "http://0x7f000001:{port}",
    "http://127.1:{port}", "http://[::1]:{port}", "http://[::ffff:127.0.0.1]:{port}", "http://169.254.169.254",
    "http://10.0.0.1", "http://192.168.1.1", "http://0.0.0.0:{port}", "http://LOCALHOST.:{port}",
])
async def test_connections_to_forbidden_addresses_are_refused(server, http, tmp_path, url):
    ws = await new_workspace(server, http, tmp_path)
    port = server.url.rsplit(":", 1)[1]
    for kind, key in (("UNITY_CATALOG", "url"), ("ICEBERG_REST", "uri"), ("GLUE", "endpoint_url")):
        status, body = await ws.call("POST", "/connections", json={
            "name": unique("c"), "connection_type": kind, "options": {key: url.format(port=port)}})
        assert status == 400 and "not an address shardcat calls" in body["message"], (kind, url, body)
    assert (await ok(ws, "GET", "/connections"))["connections"] == []


async def test_the_allowed_host_is_allowed_by_its_name_only(federating, fws):
    port = federating.url.rsplit(":", 1)[1]
    for spelling in ("localhost", "2130706433", "127.1", "[::ffff:127.0.0.1]"):
        status, body = await fws.call("POST", "/connections", json={
            "name": unique("c"), "connection_type": "UNITY_CATALOG", "options": {"url": f"http://{spelling}:{port}"}})
        assert status == 400, (spelling, body)


async def test_connection_privileges(federating, server, http, fws, tmp_path):
    foreign = await upstream_uc(server, http, tmp_path)
    connection, _ = await mount_uc(fws, foreign)
    bob = await user(federating, fws)
    await grant(fws, "metastore", fws.metastore_id, bob.name, "CREATE CATALOG")
    # Without a privilege on it, bob cannot see the connection, nor mount through it, nor refresh.
    assert (await bob.call("GET", f"/connections/{connection}"))[0] == 404
    assert (await ok(bob, "GET", "/connections"))["connections"] == []
    status, body = await bob.call("POST", "/catalogs", json={"name": "bobs", "connection_name": connection,
                                                             "options": {"catalog": "upstream"}})
    assert status in (403, 404), body
    await grant(fws, "catalog", "mirror", bob.name, "USE CATALOG")
    status, body = await bob.call("POST", "/shardcat/foreign-catalogs/mirror/refresh")
    assert status == 403 and "USE CONNECTION" in body["message"]
    # USE CONNECTION lets bob see it and refresh; mounting still needs CREATE FOREIGN CATALOG.
    await grant(fws, "connection", connection, bob.name, "USE CONNECTION")
    assert (await ok(bob, "GET", f"/connections/{connection}"))["name"] == connection
    await ok(bob, "POST", "/shardcat/foreign-catalogs/mirror/refresh")
    status, body = await bob.call("POST", "/catalogs", json={"name": "bobs", "connection_name": connection,
                                                             "options": {"catalog": "upstream"}})
    assert status == 403 and "CREATE FOREIGN CATALOG" in body["message"]
    await grant(fws, "connection", connection, bob.name, "CREATE FOREIGN CATALOG")
    made = await ok(bob, "POST", "/catalogs", json={"name": "bobs", "connection_name": connection,
                                                    "options": {"catalog": "upstream"}})
    assert made["catalog_type"] == "FOREIGN_CATALOG" and made["owner"] == bob.name
    # A connection in use is not deleted without force.
    status, body = await fws.call("DELETE", f"/connections/{connection}")
    assert status == 400 and "mirror" in body["message"] or "bobs" in body["message"]


# ---- a foreign Unity Catalog --------------------------------------------------------------------


async def test_unity_catalog_mounted_browsed_read_and_governed(federating, server, http, fws, tmp_path):
    foreign = await upstream_uc(server, http, tmp_path)
    connection, catalog = await mount_uc(fws, foreign)
    assert catalog["catalog_type"] == "FOREIGN_CATALOG" and catalog["connection_name"] == connection
    schemas = await ok(fws, "GET", "/schemas", params={"catalog_name": "mirror"})
    assert [s["name"] for s in schemas["schemas"] if s["name"] != "default"] == ["sales"]   # `default`: if made
    tables = await ok(fws, "GET", "/tables", params={"catalog_name": "mirror", "schema_name": "sales"})
    assert [t["name"] for t in tables["tables"]] == ["orders"]
    table = await ok(fws, "GET", "/tables/mirror.sales.orders")
    upstream = await ok(foreign, "GET", "/tables/upstream.sales.orders")
    assert [c["name"] for c in table["columns"]] == ["id", "total"]
    assert table["storage_location"] == upstream["storage_location"] and table["data_source_format"] == "DELTA"
    assert table["table_id"] != upstream["table_id"]       # shardcat's own asset, governed here
    # Read through shardcat's credentials: the table's storage as vended for it.
    creds = await ok(fws, "POST", "/temporary-table-credentials", json={"table_id": table["table_id"], "operation": "READ"})
    assert DeltaTable(local_path(creds["url"])).to_pyarrow_table().num_rows == 3
    # Governed as a native table: bob sees nothing until granted, then reads with SELECT.
    bob = await user(federating, fws)
    assert (await bob.call("GET", "/tables/mirror.sales.orders"))[0] == 404
    assert (await bob.call("POST", "/temporary-table-credentials",
                           json={"table_id": table["table_id"], "operation": "READ"}))[0] in (403, 404)
    await grant(fws, "catalog", "mirror", bob.name, "USE CATALOG", "USE SCHEMA")
    assert (await ok(bob, "GET", "/tables", params={"catalog_name": "mirror", "schema_name": "sales"}))["tables"] == []
    await grant(fws, "table", "mirror.sales.orders", bob.name, "SELECT")
    assert (await ok(bob, "GET", "/tables/mirror.sales.orders"))["name"] == "orders"
    # Governance set in shardcat survives a refresh: a tag on a column, the owner.
    await ok(fws, "PATCH", "/tables/mirror.sales.orders", json={"owner": bob.name})
    await ok(fws, "POST", "/shardcat/foreign-catalogs/mirror/refresh")
    assert (await ok(fws, "GET", "/tables/mirror.sales.orders"))["owner"] == bob.name
    assert (await ok(bob, "GET", "/tables/mirror.sales.orders"))["name"] == "orders"
    # Search finds it like any table.
    found = await ok(fws, "GET", "/shardcat/search", params={"query": "orders"})
    assert "mirror.sales.orders" in str(found)


async def test_unity_catalog_writes_refused(federating, server, http, fws, tmp_path):
    foreign = await upstream_uc(server, http, tmp_path)
    await mount_uc(fws, foreign)
    await ok(fws, "GET", "/tables/mirror.sales.orders")
    refusals = [
        ("POST", "/schemas", {"name": "new", "catalog_name": "mirror"}),
        ("POST", "/tables", {"name": "t", "catalog_name": "mirror", "schema_name": "sales", "table_type": "EXTERNAL",
                             "data_source_format": "DELTA", "columns": COLUMNS, "storage_location": "file:///tmp/x"}),
        ("POST", "/volumes", {"name": "v", "catalog_name": "mirror", "schema_name": "sales", "volume_type": "MANAGED"}),
        ("PATCH", "/tables/mirror.sales.orders", {"comment": "mine now"}),
        ("PATCH", "/schemas/mirror.sales", {"new_name": "renamed"}),
        ("DELETE", "/tables/mirror.sales.orders", None),
        ("DELETE", "/schemas/mirror.sales", None),
    ]
    for method, path, body in refusals:
        status, answer = await fws.call(method, path, json=body)
        assert status == 400 and "foreign catalog" in answer["message"], (method, path, answer)
    assert (await ok(fws, "GET", "/tables/mirror.sales.orders"))["name"] == "orders"
    assert (await ok(foreign, "GET", "/tables/upstream.sales.orders"))["name"] == "orders"
    # Deleting the foreign catalog drops shardcat's mirror only.
    await ok(fws, "DELETE", "/catalogs/mirror")
    assert (await fws.call("GET", "/tables/mirror.sales.orders"))[0] == 404
    assert (await ok(foreign, "GET", "/tables/upstream.sales.orders"))["name"] == "orders"


async def test_unity_catalog_changes_upstream_seen_after_refresh(federating, server, http, fws, tmp_path):
    foreign = await upstream_uc(server, http, tmp_path)
    await mount_uc(fws, foreign)
    assert [t["name"] for t in (await ok(fws, "GET", "/tables", params={
        "catalog_name": "mirror", "schema_name": "sales"}))["tables"]] == ["orders"]
    await ok(foreign, "POST", "/tables", json={"name": "returns", "catalog_name": "upstream", "schema_name": "sales",
                                               "table_type": "MANAGED", "data_source_format": "DELTA", "columns": COLUMNS})
    await ok(foreign, "DELETE", "/tables/upstream.sales.orders")
    await ok(foreign, "POST", "/schemas", json={"name": "hr", "catalog_name": "upstream"})
    has_default = (await foreign.call("GET", "/schemas/upstream.default"))[0] == 200
    counted = await ok(fws, "POST", "/shardcat/foreign-catalogs/mirror/refresh")
    assert counted["schemas"] - has_default == 2 and counted["tables"] == 1
    assert [t["name"] for t in (await ok(fws, "GET", "/tables", params={
        "catalog_name": "mirror", "schema_name": "sales"}))["tables"]] == ["returns"]
    assert (await fws.call("GET", "/tables/mirror.sales.orders"))[0] == 404
    assert sorted(s["name"] for s in (await ok(fws, "GET", "/schemas", params={"catalog_name": "mirror"}))["schemas"]
                  if s["name"] != "default") == ["hr", "sales"]


async def test_foreign_system_stopped_served_stale_then_503(federating, http, fws, pg_url, tmp_path):
    other = await start(ServeConfig(port=0, data_dir=tmp_path / "other", db=pg_url))
    try:
        foreign = await upstream_uc(other, http, tmp_path)
        connection, _ = await mount_uc(fws, foreign, ttl="600")
        assert (await ok(fws, "GET", "/tables/mirror.sales.orders"))["name"] == "orders"
    finally:
        await other.stop()
    # Down: within the time-to-live the mirror answers.
    assert (await ok(fws, "GET", "/tables/mirror.sales.orders"))["name"] == "orders"
    await expire(fws, "mirror", {"catalog": "upstream"})
    status, body = await fws.call("GET", "/tables/mirror.sales.orders")
    assert status == 503 and body["error_code"] == "TEMPORARILY_UNAVAILABLE"
    assert f"connection '{connection}'" in body["message"] and foreign.token not in body["message"]
    status, body = await fws.call("POST", "/shardcat/foreign-catalogs/mirror/refresh")
    assert status == 503 and connection in body["message"]


# ---- a foreign Iceberg REST catalog ---------------------------------------------------------------


async def rest_catalog(ws, warehouse: str):
    """pyiceberg's REST catalog on a workspace's Iceberg REST API (made off the loop: it calls at once)."""
    return await asyncio.to_thread(load_catalog, uuid.uuid4().hex, type="rest", uri=f"{ws.api}/iceberg",
                                   warehouse=warehouse, token=ws.token)


async def test_iceberg_rest_mounted_browsed_and_read_by_pyiceberg(federating, server, http, fws, tmp_path):
    foreign = await new_workspace(server, http, tmp_path / "foreign")
    await ok(foreign, "POST", "/catalogs", json={"name": "ice"})
    upstream = await rest_catalog(foreign, "ice")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})

    def make():
        upstream.create_namespace("sales")
        upstream.create_table(("sales", "events"), schema=rows.schema).append(rows)
    await asyncio.to_thread(make)
    connection = unique("ice")
    await ok(fws, "POST", "/connections", json={"name": connection, "connection_type": "ICEBERG_REST", "options": {
        "uri": f"{foreign.api}/iceberg", "token": foreign.token}})
    await ok(fws, "POST", "/catalogs", json={"name": "lake", "connection_name": connection,
                                             "options": {"warehouse": "ice"}})
    schemas = [s["name"] for s in (await ok(fws, "GET", "/schemas", params={"catalog_name": "lake"}))["schemas"]]
    assert "sales" in schemas and set(schemas) <= {"sales", "default"}     # a new catalog's own schema, if it has one
    listed = await ok(fws, "GET", "/tables", params={"catalog_name": "lake", "schema_name": "sales"})
    assert [t["name"] for t in listed["tables"]] == ["events"]
    table = await ok(fws, "GET", "/tables/lake.sales.events")
    assert table["data_source_format"] == "ICEBERG" and [c["name"] for c in table["columns"]] == ["id", "name"]
    assert table["properties"]["metadata_location"].startswith(table["storage_location"])
    # pyiceberg reads it by its shardcat name through shardcat's own Iceberg REST catalog.
    mine = await rest_catalog(fws, "lake")
    read = await asyncio.to_thread(lambda: mine.load_table(("sales", "events")).scan().to_arrow())
    assert sorted(read.column("id").to_pylist()) == [1, 2, 3]
    # An append through shardcat's Iceberg REST catalog passes through: the foreign catalog commits it
    # (the writes' own tests: test_federation_writes.py).
    await asyncio.to_thread(lambda: mine.load_table(("sales", "events")).append(rows))
    assert (await asyncio.to_thread(lambda: upstream.load_table(("sales", "events")).scan().to_arrow())).num_rows == 6
    # A table added upstream is seen after refresh; grants decide who reads it.
    await asyncio.to_thread(lambda: upstream.create_table(("sales", "clicks"), schema=rows.schema))
    await ok(fws, "POST", "/shardcat/foreign-catalogs/lake/refresh")
    assert sorted(t["name"] for t in (await ok(fws, "GET", "/tables", params={
        "catalog_name": "lake", "schema_name": "sales"}))["tables"]) == ["clicks", "events"]
    bob = await user(federating, fws)
    with pytest.raises(Exception, match="404|NoSuch"):        # bob may not see the catalog
        await rest_catalog(bob, "lake")
    await grant(fws, "catalog", "lake", bob.name, "USE CATALOG", "USE SCHEMA")
    bobs = await rest_catalog(bob, "lake")
    with pytest.raises(Exception, match="NoSuchTable|does not exist"):
        await asyncio.to_thread(lambda: bobs.load_table(("sales", "events")))
    await grant(fws, "table", "lake.sales.events", bob.name, "SELECT")
    read = await asyncio.to_thread(lambda: bobs.load_table(("sales", "events")).scan().to_arrow())
    assert read.num_rows == 6


async def test_foreign_tables_take_shardcat_governance_and_no_data_writes(federating, server, http, fws, tmp_path):
    from test_enforcement_matrix import function
    foreign = await upstream_uc(server, http, tmp_path)
    await mount_uc(fws, foreign)
    table = await ok(fws, "GET", "/tables/mirror.sales.orders")
    # Tags on the table and a column, a row filter with a native function: set here, kept by refreshes.
    await ok(fws, "POST", "/entity-tag-assignments", json={"entity_type": "tables", "entity_name": "mirror.sales.orders",
                                                           "tag_key": "domain", "tag_value": "sales"})
    await ok(fws, "POST", "/entity-tag-assignments", json={"entity_type": "columns",
                                                           "entity_name": "mirror.sales.orders.total", "tag_key": "pii"})
    await ok(fws, "POST", "/catalogs", json={"name": "gov"})
    await ok(fws, "POST", "/schemas", json={"name": "s", "catalog_name": "gov"})
    await ok(fws, "POST", "/functions", json=function("gov", "only_small"))
    row_filter = {"function_name": "gov.s.only_small", "input_column_names": ["id"]}
    await ok(fws, "PATCH", "/tables/mirror.sales.orders", json={"row_filter": row_filter})
    await ok(foreign, "PATCH", "/tables/upstream.sales.orders", json={"comment": "changed upstream"})
    await ok(fws, "POST", "/shardcat/foreign-catalogs/mirror/refresh")
    engine = await user(federating, fws, trusted=True)
    await grant(fws, "catalog", "mirror", engine.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    seen = await ok(engine, "GET", "/tables/mirror.sales.orders")
    assert seen["comment"] == "changed upstream" and seen["tags"] == {"domain": "sales"}
    assert seen["row_filter"] == row_filter and seen["columns"][1]["tags"] == {"pii": None}
    # An untrusted reader with SELECT is refused the data of a filtered table, as for a native one.
    reader = await user(federating, fws)
    await grant(fws, "catalog", "mirror", reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    status, body = await reader.call("POST", "/temporary-table-credentials",
                                     json={"table_id": table["table_id"], "operation": "READ"})
    assert status == 403 and "trusted engine" in body["message"]
    # Nobody writes the foreign system's data through shardcat, admins included, by any API.
    status, body = await fws.call("POST", "/temporary-table-credentials",
                                  json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert status == 403 and "foreign catalog" in body["message"]
    status, body = await fws.call("POST", "/temporary-path-credentials",
                                  json={"url": table["storage_location"], "operation": "PATH_READ_WRITE"})
    assert status in (400, 403), body
    status, body = await fws.call("POST", "/delta/preview/commits", json={
        "table_id": table["table_id"], "table_uri": table["storage_location"],
        "commit_info": {"version": 1, "timestamp": 1, "file_name": "x.json", "file_size": 1,
                        "file_modification_timestamp": 1}})
    assert status in (400, 403), body


async def test_duckdb_reads_a_foreign_delta_table_by_its_shardcat_name(federating, server, http, fws, tmp_path):
    from test_engine_duckdb import EXTENSIONS, extension_file
    import duckdb
    foreign = await upstream_uc(server, http, tmp_path)
    await mount_uc(fws, foreign)

    def run(token):
        con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                     "autoload_known_extensions": "false"})
        for package in EXTENSIONS:
            con.execute(f"LOAD '{extension_file(package)}'")
        con.execute(f"CREATE SECRET (TYPE UC, TOKEN '{token}', ENDPOINT '{fws.url}')")
        con.execute("ATTACH 'mirror' AS m (TYPE UC_CATALOG, DEFAULT_SCHEMA 'sales')")
        return con.execute("SELECT id, total FROM m.sales.orders ORDER BY id").fetchall()

    assert await asyncio.to_thread(run, fws.token) == [(1, 1.5), (2, 2.5), (3, 3.5)]
    bob = await user(federating, fws)
    await grant(fws, "catalog", "mirror", bob.name, "USE CATALOG", "USE SCHEMA")
    with pytest.raises(Exception):
        await asyncio.to_thread(run, bob.token)


async def test_resolve_and_iceberg_rest_load_fetch_a_table_not_read_before(federating, server, http, fws, tmp_path):
    foreign = await upstream_uc(server, http, tmp_path)
    await mount_uc(fws, foreign)
    out = await ok(fws, "POST", "/resolve", json={"items": [{"name": "mirror.sales.orders"}]})
    assert "error" not in out["items"][0] and out["items"][0]["table"]["columns"][0]["name"] == "id", out


# ---- AWS Glue (moto's server on loopback, boto3 on both sides) ------------------------------------


@pytest.fixture
def glue_server():
    """moto's Glue on loopback. Its state is one per process, whichever server answers: the databases a
    test made are dropped after it, so the next test's Glue starts as this one's did."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.glue.models import glue_backends
    from moto.server import ThreadedMotoServer
    databases = glue_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].databases   # the process's (a test may stop the server)
    before = set(databases)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    yield moto, f"http://127.0.0.1:{moto._server.server_port}"
    for name in set(databases) - before:
        del databases[name]
    moto.stop()


def _glue(endpoint: str):
    import boto3
    return boto3.client("glue", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def _glue_table(name: str, location: str) -> dict:
    return {"Name": name, "Parameters": {"classification": "parquet"}, "StorageDescriptor": {
        "Columns": [{"Name": "id", "Type": "bigint"}, {"Name": "price", "Type": "decimal(10,2)"},
                    {"Name": "tags", "Type": "array<string>"}],
        "Location": location, "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"}}


async def test_glue_mounted_browsed_read_refreshed_and_stopped(federating, fws, glue_server, tmp_path):
    import pyarrow.parquet as pq
    moto, endpoint = glue_server
    glue = _glue(endpoint)
    data = tmp_path / "glue" / "orders"
    data.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([7, 8], pa.int64())}), data / "part-0.parquet")
    await asyncio.to_thread(glue.create_database, DatabaseInput={"Name": "sales"})
    await asyncio.to_thread(glue.create_table, DatabaseName="sales", TableInput=_glue_table("orders", f"file://{data}"))
    connection = unique("glue")
    secret = "glue-secret-" + uuid.uuid4().hex
    made = await ok(fws, "POST", "/connections", json={"name": connection, "connection_type": "GLUE", "options": {
        "region": "us-east-1", "endpoint_url": endpoint, "aws_access_key_id": "testing",
        "aws_secret_access_key": secret}})
    assert secret not in str(made) and "aws_secret_access_key" not in made["options"]
    await ok(fws, "POST", "/catalogs", json={"name": "glued", "connection_name": connection,
                                             "options": {"cache_ttl_seconds": "600"}})
    assert [s["name"] for s in (await ok(fws, "GET", "/schemas", params={"catalog_name": "glued"}))["schemas"]] \
        == ["sales"]
    table = await ok(fws, "GET", "/tables/glued.sales.orders")
    assert table["data_source_format"] == "PARQUET"
    assert [(c["name"], c["type_name"]) for c in table["columns"]] == [("id", "LONG"), ("price", "DECIMAL"),
                                                                        ("tags", "ARRAY")]
    creds = await ok(fws, "POST", "/temporary-table-credentials", json={"table_id": table["table_id"], "operation": "READ"})
    assert pq.read_table(local_path(creds["url"])).column("id").to_pylist() == [7, 8]
    # Added and dropped in Glue: seen after refresh.
    await asyncio.to_thread(glue.create_table, DatabaseName="sales",
                            TableInput=_glue_table("returns", f"file://{tmp_path}/glue/returns"))
    await asyncio.to_thread(glue.delete_table, DatabaseName="sales", Name="orders")
    await ok(fws, "POST", "/shardcat/foreign-catalogs/glued/refresh")
    assert [t["name"] for t in (await ok(fws, "GET", "/tables", params={
        "catalog_name": "glued", "schema_name": "sales"}))["tables"]] == ["returns"]
    # Glue stopped: served within the time-to-live, then 503 naming the connection.
    moto.stop()
    assert (await ok(fws, "GET", "/tables/glued.sales.returns"))["name"] == "returns"
    await expire(fws, "glued", {})
    status, body = await fws.call("GET", "/tables/glued.sales.returns")
    assert status == 503 and connection in body["message"] and secret not in body["message"]
    moto.start()        # for the fixture's stop
