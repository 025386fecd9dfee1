"""The foreign systems a federating shardcat mounts in the engine tests, each holding the same small tables:
another shardcat as a Unity Catalog (a Delta table) and as an Iceberg REST catalog (an Iceberg table), moto's
Glue server and the Hive standalone metastore (each a Delta table and an Iceberg table, both written to local
files here and registered as Databricks and Iceberg register theirs: `spark.sql.sources.provider` delta,
`table_type` ICEBERG with its `metadata_location`). Real servers on 127.0.0.1, real clients.

Importable from tests/integration and tests/spark alike (only `tests.` and library imports).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from shardcat.entities.urls import local_path

# What every foreign table holds: Delta tables `orders`, Iceberg tables `events`.
ORDERS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "total": pa.array([1.5, 2.5, 3.5], pa.float64())})
EVENTS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"], pa.string())})
ORDER_ROWS = [(1, 1.5), (2, 2.5), (3, 3.5)]
EVENT_ROWS = [(1, "a"), (2, "b"), (3, "c")]
HIVE_COLUMNS = {"orders": [("id", "bigint"), ("total", "double")], "events": [("id", "bigint"), ("name", "string")]}


@dataclass
class Mounted:
    """A foreign catalog mounted in the federating workspace: its shardcat name, its connection, the
    schema holding its tables, and which tables it has (`orders`: Delta, `events`: Iceberg)."""
    system: str
    catalog: str
    connection: str
    delta: bool
    iceberg: bool
    schema: str = "sales"
    extra: dict = field(default_factory=dict)

    @property
    def tables(self) -> list[str]:
        return [t for t, has in (("orders", self.delta), ("events", self.iceberg)) if has]


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


async def mount(ws, system: str, connection_type: str, options: dict, catalog_options: dict, *, delta: bool,
                iceberg: bool) -> Mounted:
    """A connection and a foreign catalog `<system>_fed` on it (a long TTL: the tests read, nothing stops)."""
    connection = f"{system}_{uuid.uuid4().hex[:8]}"
    await ok(ws, "POST", "/connections", json={"name": connection, "connection_type": connection_type,
                                               "options": options})
    catalog = f"{system}_fed"
    await ok(ws, "POST", "/catalogs", json={"name": catalog, "connection_name": connection,
                                            "options": {**catalog_options, "cache_ttl_seconds": "3600"}})
    return Mounted(system, catalog, connection, delta, iceberg)


# ---- the tables' files --------------------------------------------------------------------------


def write_delta(directory: Path) -> str:
    """A plain Delta table (delta-rs) of ORDERS in `directory`; its file:// URL."""
    directory.mkdir(parents=True, exist_ok=True)
    write_deltalake(str(directory), ORDERS)
    return f"file://{directory}"


def write_iceberg(directory: Path) -> tuple[str, str]:
    """An Iceberg table of EVENTS written by pyiceberg's own SQL catalog (SQLite) in `directory`, as
    another catalog would have written it: (its location, its metadata file) to register elsewhere."""
    from pyiceberg.catalog.sql import SqlCatalog
    directory.mkdir(parents=True, exist_ok=True)
    local = SqlCatalog("local", uri=f"sqlite:///{directory}/catalog.db", warehouse=f"file://{directory}")
    local.create_namespace("sales")
    table = local.create_table(("sales", "events"), schema=EVENTS.schema, location=f"file://{directory}/events")
    table.append(EVENTS)
    table = local.load_table(("sales", "events"))
    return table.location(), table.metadata_location


# ---- another shardcat: a Unity Catalog, an Iceberg REST catalog ------------------------------------


async def upstream_unity_catalog(foreign) -> None:
    """Catalog `upstream`, schema `sales`, Delta table `orders` (ORDERS) in another shardcat's workspace."""
    await ok(foreign, "POST", "/catalogs", json={"name": "upstream"})
    await ok(foreign, "POST", "/schemas", json={"name": "sales", "catalog_name": "upstream"})
    table = await ok(foreign, "POST", "/tables", json={
        "name": "orders", "catalog_name": "upstream", "schema_name": "sales", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG", "position": 0},
                                                   {"name": "total", "type_name": "DOUBLE", "position": 1}]})
    await asyncio.to_thread(write_deltalake, local_path(table["storage_location"]), ORDERS)


async def upstream_iceberg_rest(foreign) -> None:
    """Catalog (warehouse) `ice`, namespace `sales`, Iceberg table `events` (EVENTS) made by pyiceberg
    through another shardcat's Iceberg REST catalog."""
    from pyiceberg.catalog import load_catalog
    await ok(foreign, "POST", "/catalogs", json={"name": "ice"})

    def make():
        rest = load_catalog(uuid.uuid4().hex, type="rest", uri=f"{foreign.api}/iceberg", warehouse="ice",
                            token=foreign.token)
        rest.create_namespace("sales")
        rest.create_table(("sales", "events"), schema=EVENTS.schema).append(EVENTS)
    await asyncio.to_thread(make)


# ---- AWS Glue (moto's server) ----------------------------------------------------------------------


# moto keeps its Glue data per process (every moto server of the test process shares it), by account and
# region: a region of this module's own, so another module's `sales` database is not in the way.
GLUE_REGION = "eu-north-1"


def glue_client(endpoint: str):
    import boto3
    return boto3.client("glue", region_name=GLUE_REGION, endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def glue_table(name: str, location: str, parameters: dict) -> dict:
    return {"Name": name, "TableType": "EXTERNAL_TABLE", "Parameters": {"EXTERNAL": "TRUE", **parameters},
            "StorageDescriptor": {"Columns": [{"Name": n, "Type": t} for n, t in HIVE_COLUMNS[name]],
                                  "Location": location}}


def fill_glue(endpoint: str, directory: Path) -> None:
    """Database `sales` in Glue: `orders` (Delta), `events` (Iceberg), their files in `directory`."""
    glue = glue_client(endpoint)
    for name in [d["Name"] for d in glue.get_databases()["DatabaseList"]]:
        glue.delete_database(Name=name)         # left by an earlier module of this process
    glue.create_database(DatabaseInput={"Name": "sales"})
    orders = write_delta(directory / "orders")
    glue.create_table(DatabaseName="sales", TableInput=glue_table(
        "orders", orders, {"spark.sql.sources.provider": "delta"}))
    location, metadata = write_iceberg(directory / "iceberg")
    glue.create_table(DatabaseName="sales", TableInput=glue_table(
        "events", location, {"table_type": "ICEBERG", "metadata_location": metadata}))


# ---- the Hive standalone metastore ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HiveMetastore:
    """org.apache.hive:hive-standalone-metastore-server (jvm/hive-metastore) on Derby in `home`, on a free
    port of 127.0.0.1; its tables made by DataNucleus on first start (the schema tool's scripts ship only
    in the binary tarball)."""

    def __init__(self, home: Path):
        self.home = home
        self.port = _free_port()
        self.child = None

    def start(self) -> None:
        from tests.jvm import classpath, java
        conf = [f"-Dmetastore.thrift.port={self.port}",
                f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={self.home}/db;create=true",
                "-Dmetastore.schema.verification=false", "-Ddatanucleus.schema.autoCreateAll=true",
                f"-Dmetastore.warehouse.dir=file://{self.home}/warehouse", "-Dmetastore.thrift.bind.host=127.0.0.1"]
        log = open(self.home / "metastore.log", "ab")
        self.child = subprocess.Popen([java(), *conf, "-cp", classpath("hive-metastore"),
                                       "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port)],
                                      stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300       # ~50 s on a busy 2-core machine
        while time.monotonic() < deadline:
            if self.child.poll() is not None:
                raise RuntimeError(f"the metastore exited: {(self.home / 'metastore.log').read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.5)
        raise RuntimeError("the metastore did not listen within 300 s")

    def stop(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            self.child.wait(30)

    def fill(self, directory: Path) -> None:
        """Database `sales`: `orders` (Delta), `events` (Iceberg), their files in `directory`."""
        from hmsclient import hmsclient
        from hmsclient.genthrift.hive_metastore.ttypes import (Database, FieldSchema, SerDeInfo, StorageDescriptor,
                                                               Table)
        orders = write_delta(directory / "orders")
        location, metadata = write_iceberg(directory / "iceberg")
        with hmsclient.HMSClient(host="127.0.0.1", port=self.port) as c:
            c.create_database(Database(name="sales", description="sales data",
                                       locationUri=f"file://{self.home}/sales", parameters={}))
            for name, where, parameters in (("orders", orders, {"spark.sql.sources.provider": "delta"}),
                                            ("events", location, {"table_type": "ICEBERG",
                                                                  "metadata_location": metadata})):
                sd = StorageDescriptor(cols=[FieldSchema(n, t, None) for n, t in HIVE_COLUMNS[name]], location=where,
                                       serdeInfo=SerDeInfo(parameters={}))
                c.create_table(Table(tableName=name, dbName="sales", owner="hive", sd=sd, partitionKeys=[],
                                     tableType="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE", **parameters}))
