"""Writes to foreign catalogs (issue 50, item 4; catalog/tree/foreign_writes.py, protocols/iceberg/foreign_tables.py):
creating an Iceberg table in, and committing to an Iceberg table of, a foreign Iceberg REST catalog pass through
(authorized by shardcat's grants and storage rules, committed by the foreign catalog), through shardcat's Iceberg
REST catalog (pyiceberg) and the Unity Catalog API's createTable; every other write to a foreign catalog is refused
with a clear error, and a foreign system that is down answers 503 naming the connection, nothing written.

The foreign Iceberg REST catalog is a second shardcat (the session's server) on loopback; the federating server
may call 127.0.0.1 because its operator allowed that host.
"""

from __future__ import annotations

import asyncio
import uuid

import deltalake
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.types import StringType

from governance_users import grant, unique, user
from test_federation import glue_server  # noqa: F401  (moto's Glue server on loopback, a fixture)
from test_vending import moto, session_policies_enforced, sts  # noqa: F401  (IAM, STS, S3 on loopback)
from shardcat.cluster.server import ServeConfig, start
from tests.conftest import new_workspace, serving

federating = serving("fedwrite", webhook_allow_hosts=("127.0.0.1",))
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
COLUMNS = [{"name": "id", "type_name": "LONG", "position": 0}, {"name": "total", "type_name": "DOUBLE", "position": 1}]
ICEBERG = "/iceberg/v1/catalogs/lake"


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


async def rest_catalog(ws, warehouse: str | None):
    """pyiceberg's REST catalog on a workspace's Iceberg REST API (made off the loop: it calls at once)."""
    extra = {"warehouse": warehouse} if warehouse else {}
    return await asyncio.to_thread(load_catalog, uuid.uuid4().hex, type="rest", uri=f"{ws.api}/iceberg",
                                   token=ws.token, **extra)


async def upstream_iceberg(server, http, tmp_path):
    """A second shardcat's workspace whose catalog `ice` holds namespace `sales` and table `events` (3 rows),
    and pyiceberg on it: the foreign Iceberg REST catalog."""
    foreign = await new_workspace(server, http, tmp_path / "foreign")
    await ok(foreign, "POST", "/catalogs", json={"name": "ice"})
    upstream = await rest_catalog(foreign, "ice")

    def make():
        upstream.create_namespace("sales")
        upstream.create_table(("sales", "events"), schema=ROWS.schema).append(ROWS)
    await asyncio.to_thread(make)
    return foreign, upstream


async def mount(ws, foreign, name: str = "lake") -> str:
    connection = unique("ice")
    made = await ok(ws, "POST", "/connections", json={"name": connection, "connection_type": "ICEBERG_REST",
                                                      "options": {"uri": f"{foreign.api}/iceberg", "token": foreign.token}})
    assert made["read_only"] is False        # its Iceberg tables' creates and commits pass through
    await ok(ws, "POST", "/catalogs", json={"name": name, "connection_name": connection,
                                            "options": {"warehouse": "ice", "cache_ttl_seconds": "600"}})
    await ok(ws, "GET", "/tables/lake.sales.events")
    return connection


def rows_of(catalog, identifier) -> int:
    return catalog.load_table(identifier).scan().to_arrow().num_rows


@pytest.fixture
async def fws(federating, http, tmp_path):
    return await new_workspace(federating, http, tmp_path / "federating")


@pytest.fixture
async def lake(federating, server, http, fws, tmp_path):
    """(the federating workspace, the foreign workspace, pyiceberg on the foreign catalog, the connection)."""
    foreign, upstream = await upstream_iceberg(server, http, tmp_path)
    connection = await mount(fws, foreign)
    return fws, foreign, upstream, connection


async def test_pyiceberg_and_the_uc_api_create_append_and_evolve_through_to_the_foreign_catalog(lake):
    fws, foreign, upstream, _ = lake
    mine = await rest_catalog(fws, "lake")
    # A create passes through: the foreign catalog makes it, shardcat mirrors it, owned by its creator.
    await asyncio.to_thread(mine.create_table, ("sales", "made"), schema=ROWS.schema)
    there = await asyncio.to_thread(upstream.load_table, ("sales", "made"))
    here = await ok(fws, "GET", "/tables/lake.sales.made")
    assert here["data_source_format"] == "ICEBERG" and here["owner"] == "admin"
    assert here["storage_location"] == there.metadata.location.rstrip("/")
    # An append and a schema change: committed by the foreign catalog, seen at once through shardcat.
    await asyncio.to_thread(lambda: mine.load_table(("sales", "made")).append(ROWS))
    await asyncio.to_thread(lambda: mine.load_table(("sales", "events")).append(ROWS))
    assert await asyncio.to_thread(rows_of, upstream, ("sales", "made")) == 3
    assert await asyncio.to_thread(rows_of, upstream, ("sales", "events")) == 6
    assert await asyncio.to_thread(rows_of, mine, ("sales", "events")) == 6

    def evolve():
        with mine.load_table(("sales", "events")).update_schema() as update:
            update.add_column("note", StringType())
    await asyncio.to_thread(evolve)
    assert "note" in [f.name for f in (await asyncio.to_thread(upstream.load_table, ("sales", "events"))).schema().fields]
    assert [c["name"] for c in (await ok(fws, "GET", "/tables/lake.sales.events"))["columns"]] == ["id", "name", "note"]
    # The Unity Catalog API's createTable maps where it can: an Iceberg table, MANAGED (placed by the foreign catalog).
    made = await ok(fws, "POST", "/tables", json={"name": "from_uc", "catalog_name": "lake", "schema_name": "sales",
                                                  "table_type": "MANAGED", "data_source_format": "ICEBERG",
                                                  "columns": COLUMNS})
    assert made["full_name"] == "lake.sales.from_uc" and [c["name"] for c in made["columns"]] == ["id", "total"]
    there = await asyncio.to_thread(upstream.load_table, ("sales", "from_uc"))
    assert [f.name for f in there.schema().fields] == ["id", "total"]
    status, body = await fws.call("POST", "/tables", json={"name": "d", "catalog_name": "lake", "schema_name": "sales",
                                                           "table_type": "MANAGED", "data_source_format": "DELTA",
                                                           "columns": COLUMNS})
    assert status == 400 and "only Iceberg tables" in body["message"], body
    # Everything else stays the foreign catalog's: a namespace, a drop, a rename, a register, a view.
    refusals = {
        "namespace": lambda: mine.create_namespace("hr"),
        "drop": lambda: mine.drop_table(("sales", "made")),
        "rename": lambda: mine.rename_table(("sales", "made"), ("sales", "renamed")),
        "register": lambda: mine.register_table(("sales", "again"), there.metadata_location),
        "stage": lambda: mine.create_table_transaction(("sales", "staged"), schema=ROWS.schema),
    }
    for what, call in refusals.items():
        with pytest.raises(Exception, match="foreign catalog") as e:
            await asyncio.to_thread(call)
        assert "foreign catalog" in str(e.value), what
    for method, path, body in (("PATCH", "/tables/lake.sales.made", {"comment": "mine"}),
                               ("DELETE", "/tables/lake.sales.made", None),
                               ("POST", "/schemas", {"name": "hr", "catalog_name": "lake"})):
        status, answer = await fws.call(method, path, json=body)
        assert status == 400 and "foreign catalog" in answer["message"], (method, path, answer)
    names = await asyncio.to_thread(upstream.list_tables, "sales")
    assert sorted(n[-1] for n in names) == ["events", "from_uc", "made"]


async def test_foreign_writes_need_shardcat_grants_by_every_spelling_and_api(federating, lake):
    fws, foreign, upstream, _ = lake
    bob = await user(federating, fws)
    await grant(fws, "catalog", "lake", bob.name, "USE CATALOG", "USE SCHEMA")
    await grant(fws, "table", "lake.sales.events", bob.name, "SELECT")
    before = (await asyncio.to_thread(upstream.load_table, ("sales", "events"))).metadata_location
    warehoused, bare = await rest_catalog(bob, "lake"), await rest_catalog(bob, None)
    # pyiceberg: an append (bob reads the table, may not modify it) and a create (no CREATE TABLE), any spelling.
    for catalog, namespace in ((warehoused, "sales"), (warehoused, "SALES"), (bare, "lake.sales"), (bare, "Lake.Sales")):
        identifier = (*namespace.split("."), "Events" if namespace.isupper() else "events")
        with pytest.raises(Exception, match="Forbidden|MODIFY|403"):
            await asyncio.to_thread(lambda: catalog.load_table(identifier).append(ROWS))
        with pytest.raises(Exception, match="Forbidden|CREATE TABLE|403"):
            await asyncio.to_thread(catalog.create_table, (*namespace.split("."), "bobs"), schema=ROWS.schema)
    # The wire itself: a commit and a create under each base and spelling.
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"owner": "bob"}}]}
    for path in (f"{ICEBERG}/namespaces/sales/tables/events", f"{ICEBERG}/namespaces/SALES/tables/EVENTS",
                 "/iceberg/v1/namespaces/lake%1Fsales/tables/events",
                 "/iceberg-rest/v1/catalogs/lake/namespaces/Sales/tables/events"):
        status, body = await bob.call("POST", path, json=commit)
        assert status == 403, (path, body)
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    for path in (f"{ICEBERG}/namespaces/sales/tables", "/iceberg/v1/namespaces/LAKE%1FSALES/tables"):
        status, body = await bob.call("POST", path, json={"name": "bobs", "schema": schema})
        assert status == 403, (path, body)
    # The Unity Catalog API's createTable, by each spelling of the names.
    for catalog_name, schema_name in (("lake", "sales"), ("LAKE", "Sales")):
        status, body = await bob.call("POST", "/tables", json={
            "name": "bobs", "catalog_name": catalog_name, "schema_name": schema_name, "table_type": "MANAGED",
            "data_source_format": "ICEBERG", "columns": COLUMNS})
        assert status == 403 and "CREATE TABLE" in body["message"], body
    # Nothing reached the foreign catalog.
    assert (await asyncio.to_thread(upstream.load_table, ("sales", "events"))).metadata_location == before
    assert sorted(n[-1] for n in await asyncio.to_thread(upstream.list_tables, "sales")) == ["events"]
    # Who may not even see the catalog hears it does not exist, on both APIs.
    eve = await user(federating, fws)
    status, body = await eve.call("POST", f"{ICEBERG}/namespaces/sales/tables/events", json=commit)
    assert status == 404, body
    status, body = await eve.call("POST", "/tables", json={"name": "eves", "catalog_name": "lake", "schema_name": "sales",
                                                           "table_type": "MANAGED", "data_source_format": "ICEBERG",
                                                           "columns": COLUMNS})
    assert status == 404 and "connection" not in body["message"], body
    # Granted MODIFY and CREATE TABLE, bob writes through, and owns what he made.
    await grant(fws, "table", "lake.sales.events", bob.name, "MODIFY")
    await grant(fws, "schema", "lake.sales", bob.name, "CREATE TABLE")
    await asyncio.to_thread(lambda: warehoused.load_table(("sales", "events")).append(ROWS))
    await asyncio.to_thread(warehoused.create_table, ("sales", "bobs"), schema=ROWS.schema)
    assert await asyncio.to_thread(rows_of, upstream, ("sales", "events")) == 6
    assert (await ok(fws, "GET", "/tables/lake.sales.bobs"))["owner"] == bob.name


async def test_commits_and_creates_pointing_outside_allowed_storage_are_refused(lake, tmp_path):
    fws, foreign, upstream, _ = lake
    table = await ok(fws, "GET", "/tables/lake.sales.events")
    location = table["storage_location"]
    elsewhere = f"file://{tmp_path}/elsewhere"
    snapshot = {"snapshot-id": 4242, "timestamp-ms": 1700000000000, "sequence-number": 2, "schema-id": 0,
                "manifest-list": f"{elsewhere}/snap-4242.avro", "summary": {"operation": "append"}}
    for update in ({"action": "set-location", "location": elsewhere},
                   {"action": "set-properties", "updates": {"write.data.path": elsewhere}},
                   {"action": "set-properties", "updates": {"write.metadata.path": f"{location}/../../x"}},
                   {"action": "add-snapshot", "snapshot": snapshot}):
        status, body = await fws.call("POST", f"{ICEBERG}/namespaces/sales/tables/events",
                                      json={"requirements": [], "updates": [update]})
        assert status == 400 and "outside the table's storage" in body["error"]["message"], (update, body)
    there = await asyncio.to_thread(upstream.load_table, ("sales", "events"))
    assert there.metadata_location == table["properties"]["metadata_location"]
    # A new table where another asset's storage lies (the federating metastore's managed storage, another
    # foreign table), or with a path property outside its location, is refused before the foreign catalog hears.
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    for body, said in (({"name": "a", "schema": schema, "location": f"{location}/inner"}, "overlaps"),
                       ({"name": "b", "schema": schema, "location": f"{fws.storage_root}/x"}, "overlaps"),
                       ({"name": "c", "schema": schema, "location": f"{elsewhere}/c",
                         "properties": {"write.data.path": f"{tmp_path}/other"}}, "outside")):
        status, answer = await fws.call("POST", f"{ICEBERG}/namespaces/sales/tables", json=body)
        assert status == 400 and said in answer["error"]["message"], (body, answer)
    assert sorted(n[-1] for n in await asyncio.to_thread(upstream.list_tables, "sales")) == ["events"]
    # An EXTERNAL table at a free location passes.
    made = await ok(fws, "POST", "/tables", json={"name": "ext", "catalog_name": "lake", "schema_name": "sales",
                                                  "table_type": "EXTERNAL", "data_source_format": "ICEBERG",
                                                  "storage_location": f"{elsewhere}/ext", "columns": COLUMNS})
    assert made["storage_location"] == f"{elsewhere}/ext"
    # Once the metastore has external locations, a foreign table's storage must lie in one, as a native
    # external table's must: a commit to a table outside them, and a create outside them, are refused.
    await ok(fws, "POST", "/storage-credentials", json={"name": "cred", "aws_iam_role": {"role_arn": "arn:x"}})
    (tmp_path / "ext").mkdir()
    await ok(fws, "POST", "/external-locations", json={"name": "ext", "url": (tmp_path / "ext").as_uri(),
                                                       "credential_name": "cred"})
    status, body = await fws.call("POST", f"{ICEBERG}/namespaces/sales/tables/events", json={
        "requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]})
    assert status == 400 and "external location" in body["error"]["message"], body
    status, body = await fws.call("POST", f"{ICEBERG}/namespaces/sales/tables", json={
        "name": "d", "schema": schema, "location": f"{elsewhere}/d"})
    assert status == 400 and "external location" in body["error"]["message"], body
    inside = await ok(fws, "POST", f"{ICEBERG}/namespaces/sales/tables", json={
        "name": "e", "schema": schema, "location": f"{(tmp_path / 'ext').as_uri()}/e"})
    assert inside["metadata"]["location"].startswith((tmp_path / "ext").as_uri())
    assert "k" not in (await asyncio.to_thread(upstream.load_table, ("sales", "events"))).properties


async def test_foreign_system_down_writes_answer_503_naming_the_connection(federating, http, fws, pg_url, tmp_path):
    other = await start(ServeConfig(port=0, data_dir=tmp_path / "other", db=pg_url))
    try:
        foreign, upstream = await upstream_iceberg(other, http, tmp_path)
        connection = await mount(fws, foreign)
    finally:
        await other.stop()
    before = await ok(fws, "GET", "/tables/lake.sales.events")
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    for method, path, body in (("POST", f"{ICEBERG}/namespaces/sales/tables/events", commit),
                               ("POST", f"{ICEBERG}/namespaces/sales/tables", {"name": "new", "schema": schema}),
                               ("POST", "/tables", {"name": "new", "catalog_name": "lake", "schema_name": "sales",
                                                    "table_type": "MANAGED", "data_source_format": "ICEBERG",
                                                    "columns": COLUMNS})):
        status, answer = await fws.call(method, path, json=body)
        message = answer["error"]["message"] if "error" in answer else answer["message"]
        assert status == 503 and f"connection '{connection}'" in message and "nothing was written" in message, answer
        assert foreign.token not in message
    after = await ok(fws, "GET", "/tables/lake.sales.events")
    assert after["properties"] == before["properties"] and after["updated_at"] == before["updated_at"]
    made = await federating.store.pool.fetchval("SELECT count(*) FROM assets WHERE metastore_id = $1 AND name = 'new'",
                                                uuid.UUID(fws.metastore_id))
    assert made == 0


async def test_writes_to_unity_catalog_glue_and_hive_foreign_catalogs_are_refused(federating, server, http, fws,
                                                                                  glue_server, tmp_path):
    from test_federation import _glue, mount_uc, upstream_uc
    foreign = await upstream_uc(server, http, tmp_path)
    await mount_uc(fws, foreign, name="mirror")
    moto, endpoint = glue_server
    client = _glue(endpoint)
    await asyncio.to_thread(client.create_database, DatabaseInput={"Name": "sales"})
    glue = unique("glue")
    made = await ok(fws, "POST", "/connections", json={"name": glue, "connection_type": "GLUE", "options": {
        "region": "us-east-1", "endpoint_url": endpoint, "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing"}})
    assert made["read_only"] is True
    await ok(fws, "POST", "/catalogs", json={"name": "glued", "connection_name": glue})
    # A Hive metastore: refused by its connection's type, before anything is asked of it (none listens here).
    hive = unique("hive")
    await ok(fws, "POST", "/connections", json={"name": hive, "connection_type": "HIVE_METASTORE",
                                                "options": {"host": "127.0.0.1", "port": "9"}})
    await ok(fws, "POST", "/catalogs", json={"name": "hived", "connection_name": hive})
    for catalog, kind in (("mirror", "UNITY_CATALOG"), ("glued", "GLUE"), ("hived", "HIVE_METASTORE")):
        status, body = await fws.call("POST", "/tables", json={
            "name": "t", "catalog_name": catalog, "schema_name": "sales", "table_type": "MANAGED",
            "data_source_format": "ICEBERG", "columns": COLUMNS})
        assert status == 400 and kind in body["message"] and "read-only" in body["message"], (catalog, body)
        pyice = await rest_catalog(fws, catalog)
        with pytest.raises(Exception, match="read-only"):
            await asyncio.to_thread(pyice.create_table, ("sales", "t"), schema=ROWS.schema)
    assert (await fws.call("GET", "/tables/mirror.sales.t"))[0] == 404
    assert (await foreign.call("GET", "/tables/upstream.sales.t"))[0] == 404


async def test_a_foreign_tables_read_and_write_in_the_audit_log_system_tables_and_lineage(lake):
    fws, foreign, upstream, _ = lake
    mine = await rest_catalog(fws, "lake")
    await asyncio.to_thread(mine.create_table, ("sales", "daily"), schema=ROWS.schema)

    def read_and_write():
        rows = mine.load_table(("sales", "events")).scan().to_arrow()
        mine.load_table(("sales", "daily")).append(rows)
    await asyncio.to_thread(read_and_write)
    report = await ok(fws, "POST", "/shardcat/lineage", json={"target": "lake.sales.daily",
                                                               "sources": [{"name": "lake.sales.events"}], "job": "j"})
    assert report["target"]["full_name"] == "lake.sales.daily"
    edges = await ok(fws, "GET", "/shardcat/lineage", params={"name": "lake.sales.events", "direction": "downstream"})
    assert "lake.sales.daily" in str(edges)

    async def audited() -> set:
        seen = set()
        for action in ("icebergLoadTable", "icebergUpdateTable"):
            status, body = await fws.call("GET", "/shardcat/audit", params={"metastore_id": fws.metastore_id,
                                                                            "action": action})
            assert status == 200, body
            seen |= {(e["action"], e["securable_full_name"]) for e in body["events"] if e["allowed"]}
        return seen

    for _ in range(30):
        seen = await audited()
        if {("icebergLoadTable", "lake.sales.events"), ("icebergUpdateTable", "lake.sales.daily")} <= seen:
            break
        await asyncio.sleep(0.2)
    assert ("icebergLoadTable", "lake.sales.events") in seen and ("icebergUpdateTable", "lake.sales.daily") in seen
    # The system tables say the same: system.access.audit and system.access.table_lineage.
    await ok(fws, "POST", "/shardcat/system-tables")
    audit_at = (await ok(fws, "GET", "/tables/system.access.audit"))["storage_location"]
    lineage_at = (await ok(fws, "GET", "/tables/system.access.table_lineage"))["storage_location"]
    for _ in range(30):
        await ok(fws, "POST", "/shardcat/system-tables/refresh")
        rows = deltalake.DeltaTable(audit_at).to_pyarrow_table(columns=["action", "securable_name"]).to_pylist()
        pairs = {(r["action"], r["securable_name"]) for r in rows}
        if {("icebergLoadTable", "lake.sales.events"), ("icebergUpdateTable", "lake.sales.daily")} <= pairs:
            break
        await asyncio.sleep(0.3)
    assert ("icebergUpdateTable", "lake.sales.daily") in pairs and ("icebergLoadTable", "lake.sales.events") in pairs
    lineage = deltalake.DeltaTable(lineage_at).to_pyarrow_table(columns=["source_name", "target_name"]).to_pylist()
    assert {"source_name": "lake.sales.events", "target_name": "lake.sales.daily"} in lineage


async def test_s3_credentials_of_a_foreign_table_are_read_write_for_modify_and_its_prefix_only(
        federating, server, http, fws, sts, monkeypatch, tmp_path):
    """moto plays IAM, STS and S3 (tests/integration/test_vending.py). The foreign catalog (a second shardcat)
    holds an Iceberg table at s3://<bucket>/data/reg; loaded through shardcat, its vended keys reach that prefix
    only: read-write with MODIFY (a writer puts data files, then commits through shardcat), read-only with
    SELECT; the Unity Catalog API still vends no write of a foreign table's data."""
    import boto3
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import LongType, NestedField
    from test_vending import denied, lake as s3_lake

    monkeypatch.setenv("SHARDCAT_S3_ENDPOINT", sts["url"])
    b = sts["bucket"]
    foreign = await new_workspace(server, http, tmp_path / "foreign")
    await s3_lake(foreign, sts)          # catalog main, schema s, external location s3://<b>/data (the role)
    await s3_lake(fws, sts)              # the same external location here: the foreign table's storage is served
    location, key = f"s3://{b}/data/reg", "data/reg/metadata/00000-1.metadata.json"
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location)
    role = boto3.client("sts", endpoint_url=sts["url"], region_name="us-east-1",
                        aws_access_key_id=sts["key"]["AccessKeyId"],
                        aws_secret_access_key=sts["key"]["SecretAccessKey"]).assume_role(
        RoleArn=sts["role"], RoleSessionName="setup")["Credentials"]
    s3_of(sts, role["AccessKeyId"], role["SecretAccessKey"], role["SessionToken"]).put_object(
        Bucket=b, Key=key, Body=metadata.model_dump_json().encode())
    await ok(foreign, "POST", "/iceberg/v1/catalogs/main/namespaces/s/register",
             json={"name": "reg", "metadata-location": f"s3://{b}/{key}"})
    connection = unique("ice")
    await ok(fws, "POST", "/connections", json={"name": connection, "connection_type": "ICEBERG_REST", "options": {
        "uri": f"{foreign.api}/iceberg", "token": foreign.token}})
    await ok(fws, "POST", "/catalogs", json={"name": "lake", "connection_name": connection,
                                             "options": {"warehouse": "main"}})
    table = await ok(fws, "GET", "/tables/lake.s.reg")
    assert table["storage_location"] == location, table
    writer, reader = await user(federating, fws), await user(federating, fws)
    await grant(fws, "catalog", "lake", writer.name, "USE CATALOG", "USE SCHEMA", "SELECT", "MODIFY")
    await grant(fws, "catalog", "lake", reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    loaded = await ok(writer, "GET", "/iceberg/v1/catalogs/lake/namespaces/s/tables/reg")
    (credential,) = loaded["storage-credentials"]
    config = credential["config"]
    assert credential["prefix"] == location
    mine = s3_of(sts, config["s3.access-key-id"], config["s3.secret-access-key"], config["s3.session-token"])
    mine.put_object(Bucket=b, Key="data/reg/data/x.parquet", Body=b"x")      # MODIFY: read-write, its prefix
    assert mine.get_object(Bucket=b, Key=key)["Body"].read()
    assert denied(lambda: mine.put_object(Bucket=b, Key="data/t1/x", Body=b"x"))
    assert denied(lambda: mine.get_object(Bucket=b, Key="data/t1/part-0.parquet"))
    loaded = await ok(reader, "GET", "/iceberg/v1/catalogs/lake/namespaces/s/tables/reg")
    config = loaded["config"]
    theirs = s3_of(sts, config["s3.access-key-id"], config["s3.secret-access-key"], config["s3.session-token"])
    assert theirs.get_object(Bucket=b, Key=key)["Body"].read()
    assert denied(lambda: theirs.put_object(Bucket=b, Key="data/reg/data/y.parquet", Body=b"y"))
    status, body = await writer.call("POST", "/temporary-table-credentials",
                                     json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert status == 403 and "foreign catalog" in body["message"], body


def s3_of(fake_aws, key_id: str, secret: str, token: str):
    import boto3
    return boto3.client("s3", endpoint_url=fake_aws["url"], region_name="us-east-1", aws_access_key_id=key_id,
                        aws_secret_access_key=secret, aws_session_token=token)
