"""Server-side scan planning on shardcat's Iceberg REST catalog: planTableScan, fetchPlanningResult,
cancelPlanning and fetchScanTasks, synchronous and asynchronous, and pyiceberg reading through them.

The table is written by pyiceberg (file:// managed storage), partitioned by `day` with several files a day,
so a filter on the partition column prunes by partition values and one on `id` by column statistics;
the tasks answered are exactly those pyiceberg's own client-side planning finds. On file:// the plan
vends no credential (none is needed); on S3 (moto's STS with session policies enforced) the credential
a plan vends reads the planned objects and nothing else of the table.
Attacks: another user's plan id and plan tasks, a user without SELECT, a table with a row filter for an
untrusted engine, malformed and incremental requests."""

from __future__ import annotations

import asyncio
import uuid

import boto3
import pyarrow as pa
import pytest
from governance_users import grant, user
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from test_vending import denied, lake, moto, session_policies_enforced, sts  # noqa: F401

from shardcat.auth import Caller
from shardcat.catalog.protocols.iceberg import scan
from shardcat.governance.vending import vend_objects
from shardcat.serving.app import SERVING

P = "/iceberg/v1/catalogs/ice"
T = f"{P}/namespaces/s/tables/events"
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "day", StringType(), required=False))
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="day"))
DAYS = ("mon", "tue", "wed")
FILES_A_DAY = 3


def catalog(ws, **extra):
    return load_catalog("shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token, **extra)


async def run(fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


@pytest.fixture
async def events(ws):
    """ice.s.events: 9 files, 3 a day; file n of day d holds ids d*100 + n*10 .. +9."""
    status, body = await ws.call("POST", "/catalogs", json={"name": "ice"})
    assert status == 200, body
    ice = await run(catalog, ws)
    await run(ice.create_namespace, "s")
    table = await run(ice.create_table, "s.events", SCHEMA, partition_spec=SPEC)
    for n in range(FILES_A_DAY):
        for d, day in enumerate(DAYS):
            ids = list(range(d * 100 + n * 10, d * 100 + n * 10 + 10))
            await run(table.append, pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids)}))
    return await run(ice.load_table, "s.events")


def local_plan(table, row_filter) -> set[str]:
    return {t.file.file_path for t in table.scan(row_filter=row_filter).plan_files()}


async def plan(ws, body: dict, path: str = T):
    return await ws.call("POST", f"{path}/plan", json=body)


def planned(answer: dict) -> set[str]:
    return {t["data-file"]["file-path"] for t in answer.get("file-scan-tasks", [])}


async def test_partition_values_and_column_stats_prune_as_pyiceberg_does(ws, events):
    everything = local_plan(events, EqualTo("day", "tue") | EqualTo("day", "mon") | EqualTo("day", "wed"))
    assert len(everything) == len(DAYS) * FILES_A_DAY
    cases = [
        ({"type": "eq", "term": "day", "value": "tue"}, EqualTo("day", "tue"), FILES_A_DAY),   # partition values
        ({"type": "and", "left": {"type": "gt-eq", "term": "id", "value": 110},
          "right": {"type": "lt", "term": "id", "value": 120}},
         And(GreaterThanOrEqual("id", 110), LessThan("id", 120)), 1),                           # column stats
        ({"type": "eq", "term": "id", "value": 5000}, EqualTo("id", 5000), 0),
    ]
    for json_filter, expression, count in cases:
        status, answer = await plan(ws, {"filter": json_filter})
        assert status == 200 and answer["status"] == "completed", answer
        assert planned(answer) == local_plan(events, expression) and len(planned(answer)) == count
        assert answer["plan-id"] and "storage-credentials" not in answer      # file:// needs none
    status, answer = await plan(ws, {})
    assert planned(answer) == everything
    task = next(t for t in answer["file-scan-tasks"])
    assert task["data-file"]["content"] == "data" and task["data-file"]["file-format"] == "parquet"
    assert task["data-file"]["partition"] in ([d] for d in DAYS) and task["data-file"]["record-count"] == 10
    assert "lower-bounds" not in task["data-file"]                            # stats only when asked
    status, answer = await plan(ws, {"filter": {"type": "eq", "term": "id", "value": 5}, "stats-fields": ["id"]})
    (task,) = answer["file-scan-tasks"]
    assert task["data-file"]["lower-bounds"] == {"keys": [1], "values": [0]}
    assert task["data-file"]["upper-bounds"] == {"keys": [1], "values": [9]}
    # A snapshot of the past: what the table held then.
    first = events.snapshots()[0].snapshot_id
    status, answer = await plan(ws, {"snapshot-id": first})
    assert len(planned(answer)) == 1


def server_plans(monkeypatch) -> list:
    """The plan requests pyiceberg sends the catalog from now on (appended as they go)."""
    calls = []
    original = RestCatalog._plan_table_scan

    def counted(self, identifier, request):
        calls.append(request)
        return original(self, identifier, request)

    monkeypatch.setattr(RestCatalog, "_plan_table_scan", counted)
    return calls


async def test_pyiceberg_reads_through_server_side_planning(ws, events, monkeypatch):
    calls = server_plans(monkeypatch)
    ice = await run(catalog, ws, **{"scan-planning-mode": "server"})
    table = await run(ice.load_table, "s.events")
    rows = await run(lambda: table.scan(row_filter="day = 'wed' AND id < 215").to_arrow())
    assert sorted(rows["id"].to_pylist()) == list(range(200, 215))
    assert len(calls) == 1                                      # planned by the catalog


async def test_many_files_come_in_plan_tasks(ws, events, monkeypatch):
    monkeypatch.setattr(scan, "PAGE_TASKS", 4)
    status, answer = await plan(ws, {})
    assert status == 200 and len(answer["file-scan-tasks"]) == 4 and len(answer["plan-tasks"]) == 2
    seen = planned(answer)
    for task in answer["plan-tasks"]:
        status, page = await ws.call("POST", f"{T}/tasks", json={"plan-task": task})
        assert status == 200, page
        seen |= planned(page)
    assert seen == local_plan(events, EqualTo("day", "mon") | EqualTo("day", "tue") | EqualTo("day", "wed"))
    status, body = await ws.call("POST", f"{T}/tasks", json={"plan-task": answer["plan-tasks"][0] + "9"})
    assert status == 404 and body["error"]["type"] == "NoSuchPlanTaskException"
    # pyiceberg follows the plan tasks.
    ice = await run(catalog, ws, **{"scan-planning-mode": "server"})
    table = await run(ice.load_table, "s.events")
    assert len(await run(lambda: table.scan().to_arrow())) == 90


async def test_a_long_plan_is_submitted_fetched_and_cancelled(ws, events, monkeypatch):
    monkeypatch.setenv("SHARDCAT_ICEBERG_PLAN_WAIT_MS", "0")
    status, answer = await plan(ws, {"filter": {"type": "eq", "term": "day", "value": "mon"}})
    assert status == 200 and answer["status"] == "submitted" and set(answer) == {"status", "plan-id"}
    plan_id = answer["plan-id"]
    for _ in range(100):
        status, fetched = await ws.call("GET", f"{T}/plan/{plan_id}")
        assert status == 200, fetched
        if fetched["status"] == "completed":
            break
        await asyncio.sleep(0.05)
    assert len(planned(fetched)) == FILES_A_DAY
    status, _ = await ws.call("DELETE", f"{T}/plan/{plan_id}")
    assert status == 204
    status, fetched = await ws.call("GET", f"{T}/plan/{plan_id}")
    assert (status, fetched) == (200, {"status": "cancelled"})
    status, body = await ws.call("GET", f"{T}/plan/nope")
    assert status == 404 and body["error"]["type"] == "NoSuchPlanIdException"


async def test_bad_and_unsupported_scans(ws, events):
    for body, code in (({"filter": {"type": "bogus"}}, 400), ({"filter": {"type": "eq", "term": "nope", "value": 1}}, 400),
                       ({"select": ["nope"]}, 400), ({"snapshot-id": 12345}, 400), ({"stats-fields": ["nope"]}, 400),
                       ({"start-snapshot-id": 1, "end-snapshot-id": 2}, 406), ({"case-sensitive": "no"}, 400)):
        status, answer = await plan(ws, body)
        assert status == code and answer["error"]["code"] == code, (body, answer)
    status, answer = await ws.call("POST", f"{T}/tasks", json={})
    assert status == 400


async def test_plans_are_their_callers_own(ws, server, events, monkeypatch):
    monkeypatch.setattr(scan, "PAGE_TASKS", 4)
    status, mine = await plan(ws, {})
    reader = await user(server, ws)
    await grant(ws, "catalog", "ice", reader.name, "USE_CATALOG")
    await grant(ws, "schema", "ice.s", reader.name, "USE_SCHEMA", "SELECT")
    status, theirs = await plan(reader, {"filter": {"type": "eq", "term": "day", "value": "tue"}})
    assert status == 200 and len(planned(theirs)) == FILES_A_DAY          # SELECT: they may plan their own
    for method, path, body in (("GET", f"{T}/plan/{mine['plan-id']}", None),
                               ("DELETE", f"{T}/plan/{mine['plan-id']}", None),
                               ("POST", f"{T}/tasks", {"plan-task": mine["plan-tasks"][0]})):
        status, answer = await reader.call(method, path, json=body)
        assert status == 404, (path, answer)
    status, page = await ws.call("POST", f"{T}/tasks", json={"plan-task": mine["plan-tasks"][0]})
    assert status == 200 and page["file-scan-tasks"]                     # not cancelled by the attempt
    # Another table's path with my plan id: missing too.
    ice = await run(catalog, ws)
    await run(ice.create_table, "s.other", SCHEMA)
    status, _ = await ws.call("GET", f"{P}/namespaces/s/tables/other/plan/{mine['plan-id']}")
    assert status == 404


async def test_who_may_not_read_may_not_plan(ws, server, events):
    stranger = await user(server, ws)
    for path in (T, f"{P}/namespaces/S/tables/EVENTS", f"{P}/namespaces/s/tables/ev%65nts"):
        status, body = await plan(stranger, {}, path)
        assert status == 404 and body["error"]["type"] == "NoSuchTableException", (path, body)
    seer = await user(server, ws)
    await grant(ws, "catalog", "ice", seer.name, "USE_CATALOG")
    await grant(ws, "schema", "ice.s", seer.name, "USE_SCHEMA")
    await grant(ws, "table", "ice.s.events", seer.name, "APPLY_TAG")          # sees the table; no SELECT
    status, body = await plan(seer, {})
    assert status == 403 and "file-scan-tasks" not in body


async def test_a_row_filtered_table_is_planned_for_trusted_engines_only(ws, server, events):
    status, body = await ws.call("POST", "/functions", json={"function_info": {
        "name": "only_mon", "catalog_name": "ice", "schema_name": "s", "input_params": {"parameters": [
            {"name": "d", "type_text": "string", "type_json": '"string"', "type_name": "STRING", "position": 0}]},
        "data_type": "BOOLEAN", "full_data_type": "boolean", "return_params": {"parameters": []},
        "routine_body": "SQL", "routine_definition": "d = 'mon'", "parameter_style": "S", "is_deterministic": True,
        "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER",
        "specific_name": "only_mon"}})
    assert status == 200, body
    status, body = await ws.call("PATCH", "/tables/ice.s.events", json={
        "row_filter": {"function_name": "ice.s.only_mon", "input_column_names": ["day"]}})
    assert status == 200, body
    reader = await user(server, ws)
    engine = await user(server, ws, trusted=True)
    for who in (reader, engine):
        await grant(ws, "catalog", "ice", who.name, "USE_CATALOG")
        await grant(ws, "schema", "ice.s", who.name, "USE_SCHEMA", "SELECT")
    status, body = await plan(reader, {})
    assert status == 403 and "row filter" in body["error"]["message"]
    status, body = await plan(engine, {})
    assert status == 200 and len(planned(body)) == len(DAYS) * FILES_A_DAY


async def test_a_plan_vends_exactly_its_files(ws, server, sts):
    """vend_objects, the credentials a plan answers: the planned keys readable, the table's others not."""
    b = sts["bucket"]
    await lake(ws, sts)                      # an external location over s3://<b>/data with the role
    role = boto3.client("sts", endpoint_url=sts["url"], region_name="us-east-1",
                        aws_access_key_id=sts["key"]["AccessKeyId"],
                        aws_secret_access_key=sts["key"]["SecretAccessKey"]).assume_role(
        RoleArn=sts["role"], RoleSessionName="setup")["Credentials"]
    admin = boto3.client("s3", endpoint_url=sts["url"], region_name="us-east-1", aws_access_key_id=role["AccessKeyId"],
                         aws_secret_access_key=role["SecretAccessKey"], aws_session_token=role["SessionToken"])
    for name in ("a", "b", "c"):
        admin.put_object(Bucket=b, Key=f"data/t/data/{name}.parquet", Body=name.encode())
    shard = server.runner.app[SERVING].shard
    caller = Caller("admin", 0, True, ws.workspace_id, ws.metastore_id)
    granted = await vend_objects(shard, caller, f"s3://{b}/data/t",
                                 [f"s3://{b}/data/t/data/a.parquet", f"s3://{b}/data/t/data/b.parquet",
                                  f"s3://{b}/elsewhere/x", "file:///etc/passwd"])
    (one,) = granted
    assert one["urls"] == [f"s3://{b}/data/t/data/a.parquet", f"s3://{b}/data/t/data/b.parquet"]
    c = one["answer"]["aws_temp_credentials"]
    theirs = boto3.client("s3", endpoint_url=sts["url"], region_name="us-east-1", aws_access_key_id=c["access_key_id"],
                          aws_secret_access_key=c["secret_access_key"], aws_session_token=c["session_token"])
    assert theirs.get_object(Bucket=b, Key="data/t/data/a.parquet")["Body"].read() == b"a"
    assert theirs.get_object(Bucket=b, Key="data/t/data/b.parquet")["Body"].read() == b"b"
    assert denied(lambda: theirs.get_object(Bucket=b, Key="data/t/data/c.parquet"))
    assert denied(lambda: theirs.list_objects_v2(Bucket=b, Prefix="data"))     # no listing at all
    assert denied(lambda: theirs.put_object(Bucket=b, Key="data/t/data/a.parquet", Body=b"x"))


async def test_duckdb_iceberg_extension_plans_on_the_client(ws, events, monkeypatch):
    """DuckDB 1.5.5's iceberg extension reads the table through the catalog and plans the scan itself: it
    carries the spec's planning objects but no ATTACH option that sends a scan to /plan (docs/engines.md)."""
    from test_engine_pyiceberg import _duckdb

    from shardcat.catalog.protocols.iceberg.planning import Planning

    planned_here = []
    original = Planning.plan_scan

    async def counted(self, *args, **kwargs):
        planned_here.append(args)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Planning, "plan_scan", counted)

    def query():
        con = _duckdb()
        con.execute(f"CREATE SECRET shardcat (TYPE ICEBERG, TOKEN '{ws.token}')")
        con.execute(f"ATTACH 'ice' AS lake (TYPE ICEBERG, ENDPOINT '{ws.api}/iceberg', SECRET shardcat)")
        return con.execute("SELECT count(*), min(id) FROM lake.s.events WHERE day = 'tue'").fetchall()

    assert await run(query) == [(30, 100)]
    assert planned_here == []


async def test_a_plan_on_s3_answers_credentials_for_exactly_its_files(ws, server, sts, monkeypatch, tmp_path):
    """End to end on moto (STS session policies enforced): a table registered on S3 whose manifest lists
    three data files (written here with pyiceberg's own manifest writers, then put with boto3: pyarrow's S3
    writes fail on moto), a filter its column bounds narrow to one file: the plan answers that file and a
    credential whose prefix is that file, which reads it and nothing else of the table."""
    import json as jsonlib
    import time

    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import (DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus,
                                    write_manifest, write_manifest_list)
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.typedef import Record

    monkeypatch.setenv("SHARDCAT_S3_ENDPOINT", sts["url"])
    b = sts["bucket"]
    await lake(ws, sts)                                  # catalog main, schema s, location s3://<b>/data (a role)
    role = boto3.client("sts", endpoint_url=sts["url"], region_name="us-east-1",
                        aws_access_key_id=sts["key"]["AccessKeyId"],
                        aws_secret_access_key=sts["key"]["SecretAccessKey"]).assume_role(
        RoleArn=sts["role"], RoleSessionName="setup")["Credentials"]
    s3 = boto3.client("s3", endpoint_url=sts["url"], region_name="us-east-1", aws_access_key_id=role["AccessKeyId"],
                      aws_secret_access_key=role["SecretAccessKey"], aws_session_token=role["SessionToken"])
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    location = f"s3://{b}/data/planned"

    class Staged:
        """An output file named by its S3 URL, written locally first (put to moto below)."""

        def __init__(self, key: str):
            self.key, self.location, self.path = key, f"s3://{b}/{key}", tmp_path / key.replace("/", "_")

        def create(self, overwrite: bool = False):
            return open(self.path, "wb")

        def __len__(self) -> int:
            return self.path.stat().st_size

        def put(self):
            s3.put_object(Bucket=b, Key=self.key, Body=self.path.read_bytes())

    files = []
    for n in range(3):
        key = f"data/planned/data/{n}.parquet"
        s3.put_object(Bucket=b, Key=key, Body=f"file {n}".encode())
        bound = to_bytes(LongType(), n * 10)
        files.append(DataFile.from_args(content=DataFileContent.DATA, file_path=f"s3://{b}/{key}",
                                        file_format=FileFormat.PARQUET, partition=Record(), record_count=10,
                                        file_size_in_bytes=6, lower_bounds={1: bound},
                                        upper_bounds={1: to_bytes(LongType(), n * 10 + 9)}, spec_id=0))
    manifest_out = Staged("data/planned/metadata/m0.avro")
    with write_manifest(2, UNPARTITIONED_PARTITION_SPEC, schema, manifest_out, 1, "null") as writer:
        for f in files:
            writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, data_file=f))
    manifest = writer.to_manifest_file()
    manifest_out.put()
    list_out = Staged("data/planned/metadata/snap-1.avro")
    with write_manifest_list(2, list_out, 1, None, 1, "null") as writer:
        writer.add_manifests([manifest])
    list_out.put()
    metadata = jsonlib.loads(new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER,
                                                location).model_dump_json(by_alias=True))
    metadata.update({"current-snapshot-id": 1, "last-sequence-number": 1, "refs": {"main": {"snapshot-id": 1,
                                                                                         "type": "branch"}},
                     "snapshots": [{"snapshot-id": 1, "sequence-number": 1, "timestamp-ms": int(time.time() * 1000),
                                    "manifest-list": list_out.location, "summary": {"operation": "append"},
                                    "schema-id": 0}]})
    s3.put_object(Bucket=b, Key="data/planned/metadata/00001-a.metadata.json", Body=jsonlib.dumps(metadata).encode())
    status, body = await ws.call("POST", "/iceberg/v1/catalogs/main/namespaces/s/register", json={
        "name": "planned", "metadata-location": f"{location}/metadata/00001-a.metadata.json"})
    assert status == 200, body

    key = {"Idempotency-Key": str(uuid.uuid4())}
    status, answer = await ws.call("POST", "/iceberg/v1/catalogs/main/namespaces/s/tables/planned/plan",
                                   json={"filter": {"type": "eq", "term": "id", "value": 15}}, headers=key)
    assert status == 200 and answer["status"] == "completed", answer
    # Its replay (the key kept in PostgreSQL) keeps no vended key: none in the database, none answered.
    kept = await server.store.pool.fetchval(
        "SELECT body::text FROM iceberg_idempotency WHERE metastore_id = $1 AND key = $2",
        uuid.UUID(ws.metastore_id), uuid.UUID(key["Idempotency-Key"]))
    assert '"plan-id"' in kept and "session-token" not in kept and "secret-access-key" not in kept
    status, again = await ws.call("POST", "/iceberg/v1/catalogs/main/namespaces/s/tables/planned/plan",
                                  json={"filter": {"type": "eq", "term": "id", "value": 15}}, headers=key)
    assert status == 200 and again["plan-id"] == answer["plan-id"] and again["storage-credentials"] == []
    assert planned(answer) == {f"s3://{b}/data/planned/data/1.parquet"}
    (credential,) = answer["storage-credentials"]
    assert credential["prefix"] == f"s3://{b}/data/planned/data/1.parquet"
    c = credential["config"]
    theirs = boto3.client("s3", endpoint_url=sts["url"], region_name="us-east-1", aws_access_key_id=c["s3.access-key-id"],
                          aws_secret_access_key=c["s3.secret-access-key"], aws_session_token=c["s3.session-token"])
    assert theirs.get_object(Bucket=b, Key="data/planned/data/1.parquet")["Body"].read() == b"file 1"
    assert denied(lambda: theirs.get_object(Bucket=b, Key="data/planned/data/0.parquet"))
    assert denied(lambda: theirs.get_object(Bucket=b, Key="data/planned/metadata/m0.avro"))
