"""Server-side scan planning and remote signing on UniForm tables (Delta tables whose Iceberg metadata the catalog
writes): planned as native Iceberg tables are, on the Iceberg metadata of the table's latest Delta version.

The table is written by delta-rs (file:// managed storage), partitioned by `day`, one file a write, so a filter on
`day` prunes by partition values and one on `id` by the column statistics the Delta log carries; the tasks
answered are exactly those pyiceberg's client-side planning finds on the loaded table, and the files Delta
reads. A Delta write after a plan is planned at once (the plan converts it first). pyiceberg reads through the
server's plan. Attacks: a user without SELECT, a stranger under several spellings, another user's plan, a
row-filtered UniForm table for an untrusted engine, a plain Delta table (not served), and a signing request for a
write (a UniForm table is read-only through Iceberg). On file:// a plan vends no credential; on S3 the plan's
credential is vend_objects' (test_iceberg_planning.py), the same code for both kinds of table.
"""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pytest
from governance_users import grant, user
from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from test_iceberg_planning import server_plans
from test_row_filters import _world
from test_uniform import UNIFORM, delta_table, iceberg, main, ordered, rows, run  # noqa: F401

from shardcat.entities.urls import normalize_url

P = "/iceberg/v1/catalogs/main"
T = f"{P}/namespaces/s/tables/events"


async def plan(caller, body: dict, path: str = T):
    return await caller.call("POST", f"{path}/plan", json=body)


def planned(answer: dict) -> set[str]:
    return {normalize_url(t["data-file"]["file-path"]) for t in answer.get("file-scan-tasks", [])}


def client_plan(table, row_filter=None, snapshot_id=None) -> set[str]:
    scan = table.scan(row_filter=row_filter, snapshot_id=snapshot_id) if row_filter is not None else \
        table.scan(snapshot_id=snapshot_id)
    return {normalize_url(t.file.file_path) for t in scan.plan_files()}


def delta_files(location: str, **kw) -> set[str]:
    return {normalize_url(u) for u in deltalake.DeltaTable(location, **kw).file_uris()}


@pytest.fixture
async def events(ws, main):  # noqa: F811
    """main.s.events (UniForm), three Delta versions by delta-rs: day a (ids 1, 2), day b (3), day c (4..6)."""
    table = await delta_table(ws, "events")
    location = table["storage_location"]
    for ids, day in (([1, 2], "a"), ([3], "b"), ([4, 5, 6], "c")):
        deltalake.write_deltalake(location, rows(ids, [day] * len(ids)), mode="append", partition_by=["day"])
    return location


async def test_planning_prunes_a_uniform_table_as_pyiceberg_does(ws, events):
    loaded = await run(lambda: iceberg(ws).load_table("s.events"))
    everything = delta_files(events)
    assert len(everything) == 3
    status, answer = await plan(ws, {})
    assert status == 200 and answer["status"] == "completed", answer
    assert planned(answer) == everything == client_plan(loaded)
    assert "storage-credentials" not in answer                                   # file:// needs none
    cases = [({"type": "eq", "term": "day", "value": "b"}, EqualTo("day", "b"), 1),            # partition values
             ({"type": "gt-eq", "term": "id", "value": 4}, GreaterThanOrEqual("id", 4), 1),    # Delta's column stats
             ({"type": "eq", "term": "id", "value": 99}, EqualTo("id", 99), 0)]
    for json_filter, expression, count in cases:
        status, answer = await plan(ws, {"filter": json_filter, "stats-fields": ["id"]})
        assert status == 200, answer
        assert planned(answer) == client_plan(loaded, expression) and len(planned(answer)) == count, json_filter
    status, answer = await plan(ws, {"filter": {"type": "eq", "term": "day", "value": "c"}, "stats-fields": ["id"]})
    (task,) = answer["file-scan-tasks"]
    assert task["data-file"]["partition"] == ["c"] and task["data-file"]["record-count"] == 3
    assert task["data-file"]["lower-bounds"]["values"] == [4] and task["data-file"]["upper-bounds"]["values"] == [6]
    # A Delta version of the past, by its Iceberg snapshot: the files Delta read then.
    first = next(s.snapshot_id for s in loaded.snapshots() if s.summary["delta-version"] == "0")
    status, answer = await plan(ws, {"snapshot-id": first})
    assert planned(answer) == delta_files(events, version=0)


async def test_credentials_are_asked_for_the_planned_files_only(ws, events, monkeypatch):
    """What the plan asks vending for (the S3 credential's session policy, vend_objects): the planned files
    of the table's location, not its prefix (file:// then needs none; S3: test_iceberg_planning.py)."""
    from shardcat.catalog.protocols.iceberg import planning

    asked = []
    original = planning.vend_objects

    async def recorded(shard, caller, location, urls):
        asked.append((location, [normalize_url(u) for u in urls]))
        return await original(shard, caller, location, urls)

    monkeypatch.setattr(planning, "vend_objects", recorded)
    status, answer = await plan(ws, {"filter": {"type": "eq", "term": "day", "value": "b"}})
    assert status == 200 and len(planned(answer)) == 1, answer
    [(location, urls)] = asked
    assert normalize_url(location) == events and set(urls) == planned(answer) and len(urls) == 1


async def test_a_delta_write_is_planned_at_once(ws, events):
    status, answer = await plan(ws, {})
    assert len(planned(answer)) == 3
    deltalake.write_deltalake(events, rows([7], ["d"]), mode="overwrite", partition_by=["day"])
    status, answer = await plan(ws, {})                   # converted first: Delta version 3, one live file
    assert status == 200 and planned(answer) == delta_files(events) and len(planned(answer)) == 1
    status, row = await ws.call("GET", "/tables/main.s.events")
    assert row["uniform"]["iceberg"]["converted_delta_version"] == 3


async def test_pyiceberg_reads_a_uniform_table_through_server_side_planning(ws, events, monkeypatch):
    calls = server_plans(monkeypatch)
    ice = await run(load_catalog, "shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse="main", token=ws.token,
                    **{"scan-planning-mode": "server"})
    table = await run(ice.load_table, "s.events")
    assert ordered(await run(lambda: table.scan(row_filter="day = 'c' AND id < 6").to_arrow())) == \
        [(4, "c"), (5, "c")]
    assert ordered(await run(lambda: table.scan().to_arrow())) == \
        ordered(deltalake.DeltaTable(events).to_pyarrow_table().select(["id", "day"]))
    assert len(calls) == 2                                 # both planned by the catalog


async def test_who_may_not_read_a_uniform_table_may_not_plan_it(ws, server, events):
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG", "USE SCHEMA")
    for path in (T, f"{P}/namespaces/S/tables/EVENTS", f"{P}/namespaces/s/tables/ev%65nts"):
        status, body = await plan(reader, {}, path)            # no privilege on it: a missing table, however spelled
        assert status == 404 and body["error"]["type"] == "NoSuchTableException", (path, body)
    await grant(ws, "table", "main.s.events", reader.name, "MODIFY")
    status, body = await plan(reader, {})
    assert status == 403 and "SELECT" in body["error"]["message"], body
    # Another caller's plan is a missing one, even once they may read the table.
    status, mine = await plan(ws, {})
    await grant(ws, "table", "main.s.events", reader.name, "SELECT")
    status, body = await reader.call("GET", f"{T}/plan/{mine['plan-id']}")
    assert status == 404 and body["error"]["type"] == "NoSuchPlanIdException", body
    status, theirs = await plan(reader, {})
    assert status == 200 and planned(theirs) == planned(mine)


async def test_plain_delta_tables_are_not_planned(ws, main):  # noqa: F811
    table = await delta_table(ws, "plain", properties=None)
    deltalake.write_deltalake(table["storage_location"], rows([1], ["a"]))
    status, body = await plan(ws, {}, f"{P}/namespaces/s/tables/plain")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException", body


async def test_a_row_filtered_uniform_table_is_planned_for_trusted_engines_only(ws, server):
    c, _ = await _world(ws)
    status, table = await ws.call("PATCH", f"/tables/{c}.s.people", json={"properties": UNIFORM})
    assert status == 200, table
    deltalake.write_deltalake(table["storage_location"], pa.table({"region": ["EU", "US"], "ssn": ["1", "2"]}))
    path = f"/iceberg/v1/catalogs/{c}/namespaces/s/tables/people"
    status, body = await plan(ws, {}, path)                          # ws's admin: an untrusted engine
    assert status == 403 and "trusted engine" in body["error"]["message"], body
    engine = await user(server, ws, trusted=True, admin=True)
    status, body = await plan(engine, {}, path)
    assert status == 200 and len(planned(body)) == 1, body


async def test_signing_a_uniform_table_is_for_reads_only(ws, events):
    """Refused for a write before anything else (read-only through Iceberg); a read passes that check and
    is refused only because this table is not on S3."""
    uri = "http://127.0.0.1:1/bucket/x"
    for method in ("PUT", "DELETE", "POST"):
        status, body = await ws.call("POST", f"{T}/sign", json={"region": "us-east-1", "uri": uri, "method": method,
                                                                 "headers": {}})
        assert status == 403 and "read-only" in body["error"]["message"], (method, body)
    status, body = await ws.call("POST", f"{T}/sign", json={"region": "us-east-1", "uri": uri, "method": "GET",
                                                             "headers": {}})
    assert status == 400 and "not on S3" in body["error"]["message"], body
