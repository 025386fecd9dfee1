"""Federation (issue 50) with a Hive metastore: the Hive standalone metastore from Maven Central
(org.apache.hive:hive-standalone-metastore-server 4.0.1, jvm/hive-metastore), on Derby, started on
loopback for this module; tables made in it with the Thrift client shardcat reads it with
(hmsclient, PyPI). Mount, browse, read, refresh, and the metastore stopped: stale, then 503.
Marker `hive` (-m 'not hive' leaves it out)."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from federation_upstreams import HiveMetastore
from governance_users import unique
from shardcat.entities.urls import local_path
from tests.conftest import new_workspace
from test_federation import expire, ok
from test_federation import federating      # noqa: F401  (this module's own federating server)

pytestmark = pytest.mark.hive


class Metastore(HiveMetastore):
    """The standalone metastore (federation_upstreams.py) with a Thrift client for making tables in it."""

    def client(self):
        from hmsclient import hmsclient
        return hmsclient.HMSClient(host="127.0.0.1", port=self.port)


@pytest.fixture(scope="module")
def metastore(tmp_path_factory):
    hms = Metastore(tmp_path_factory.mktemp("hms"))
    hms.start()
    yield hms
    hms.stop()


def _make(hms: Metastore, data) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import (Database, FieldSchema, SerDeInfo, StorageDescriptor,
                                                           Table)
    with hms.client() as c:
        c.create_database(Database(name="sales", description="sales data", locationUri=f"file://{hms.home}/sales",
                                   parameters={}))
        for name in ("orders",):
            sd = StorageDescriptor(
                cols=[FieldSchema("id", "bigint", None), FieldSchema("amount", "decimal(10,2)", "the total")],
                location=f"file://{data}",
                inputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                outputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                                    parameters={}))
            c.create_table(Table(tableName=name, dbName="sales", owner="hive", sd=sd, partitionKeys=[],
                                 tableType="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE"}))


def _drop(hms: Metastore, table: str) -> None:
    with hms.client() as c:
        c.drop_table("sales", table, False)


async def test_hive_metastore_mounted_browsed_read_refreshed_and_stopped(federating, http, metastore,  # noqa: F811
                                                                         tmp_path):
    ws = await new_workspace(federating, http, tmp_path)
    data = tmp_path / "orders"
    data.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), data / "part-0.parquet")
    await asyncio.to_thread(_make, metastore, data)
    connection = unique("hms")
    await ok(ws, "POST", "/connections", json={"name": connection, "connection_type": "HIVE_METASTORE",
                                               "options": {"host": "127.0.0.1", "port": str(metastore.port)}})
    await ok(ws, "POST", "/catalogs", json={"name": "hive", "connection_name": connection,
                                            "options": {"cache_ttl_seconds": "600"}})
    schemas = [s["name"] for s in (await ok(ws, "GET", "/schemas", params={"catalog_name": "hive"}))["schemas"]]
    assert "sales" in schemas
    table = await ok(ws, "GET", "/tables/hive.sales.orders")
    assert table["data_source_format"] == "PARQUET" and table["storage_location"] == f"file://{data}"
    assert [(c["name"], c["type_name"]) for c in table["columns"]] == [("id", "LONG"), ("amount", "DECIMAL")]
    creds = await ok(ws, "POST", "/temporary-table-credentials", json={"table_id": table["table_id"], "operation": "READ"})
    assert pq.read_table(local_path(creds["url"])).column("id").to_pylist() == [1, 2]
    # Read-only: a create by either API and a data write are refused, saying why; the metastore is untouched.
    status, body = await ws.call("POST", "/tables", json={
        "name": "made", "catalog_name": "hive", "schema_name": "sales", "table_type": "MANAGED",
        "data_source_format": "ICEBERG", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 400 and "HIVE_METASTORE" in body["message"] and "read-only" in body["message"], body
    status, body = await ws.call("POST", "/iceberg/v1/catalogs/hive/namespaces/sales/tables", json={
        "name": "made", "schema": {"type": "struct", "schema-id": 0,
                                   "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}})
    assert status == 400 and "read-only" in body["error"]["message"], body
    status, body = await ws.call("POST", "/temporary-table-credentials",
                                 json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert status == 403 and "foreign catalog" in body["message"], body
    with metastore.client() as c:
        assert c.get_all_tables("sales") == ["orders"]
    # Dropped in the metastore: gone after refresh.
    await asyncio.to_thread(_drop, metastore, "orders")
    await ok(ws, "POST", "/shardcat/foreign-catalogs/hive/refresh")
    assert (await ws.call("GET", "/tables/hive.sales.orders"))[0] == 404
    # Stopped (killed: at once): the schemas are served within the TTL, then 503.
    metastore.child.kill()
    metastore.child.wait(30)
    assert "sales" in [s["name"] for s in (await ok(ws, "GET", "/schemas", params={"catalog_name": "hive"}))["schemas"]]
    await expire(ws, "hive", {})
    status, body = await ws.call("GET", "/schemas", params={"catalog_name": "hive"})
    assert status == 503 and connection in body["message"]
