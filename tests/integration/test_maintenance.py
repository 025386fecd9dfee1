"""Maintenance decided by the catalog (catalog/features/maintenance.py): policies set on a catalog, schema
or table, inherited and overridden; runs started by hand (MODIFY) or by the signals of commits and the
schedule (an injected clock), each a Ray task, audited, in system.maintenance.runs and on /metrics."""

from __future__ import annotations

import asyncio

import deltalake
import pyarrow as pa
import pytest

from governance_users import grant, user
from shardcat.catalog.features import maintenance as feature
from shardcat.delta.client import DeltaCatalogClient
from shardcat.entities.values import now_ms

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture(autouse=True)
def no_background_ticks(monkeypatch):
    """The tests drive the ticks themselves (an injected clock): the shard's own loop stays asleep."""
    monkeypatch.setattr(feature, "TICK_SECONDS", 1e6)


async def tables(ws, *names: str, appends: int = 4) -> None:
    """main.s.<name> for each name: catalog-managed Delta, `appends` one-row commits each."""
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"})):
        assert (await ws.call("POST", path, json=body))[0] == 200
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        for name in names:
            table = await client.create_table(f"main.s.{name}", SCHEMA)
            for i in range(appends):
                await client.append(table, pa.table({"id": [i]}))


async def set_policy(ws, kind: str, name: str, policy: dict, caller=None):
    return await (caller or ws).call("PUT", "/shardcat/maintenance/policies",
                                     json={"securable_type": kind, "full_name": name, "policy": policy})


def service(server) -> feature.Maintenance:
    [found] = [m for m in feature._SERVICES.values() if m.api_url == server.url]
    return found


async def test_a_policy_is_inherited_and_overridden(ws, server):
    await tables(ws, "t1", "t2")
    assert (await set_policy(ws, "CATALOG", "main", {"enabled": True, "compact_min_small_files": 3}))[0] == 200
    assert (await set_policy(ws, "SCHEMA", "main.s", {"compact_min_small_files": 5}))[0] == 200
    assert (await set_policy(ws, "TABLE", "main.s.t2", {"enabled": False}))[0] == 200
    status, t1 = await ws.call("GET", "/shardcat/maintenance/policies", params={"table": "main.s.t1"})
    assert status == 200
    assert t1["policy"]["enabled"] is True and t1["set_by"]["enabled"] == "catalog main"
    assert t1["policy"]["compact_min_small_files"] == 5 and t1["set_by"]["compact_min_small_files"] == "schema main.s"
    assert t1["set_by"]["vacuum_retention_hours"] == "default"
    status, t2 = await ws.call("GET", "/shardcat/maintenance/policies", params={"table": "main.s.t2"})
    assert t2["policy"]["enabled"] is False and t2["set_by"]["enabled"] == "table main.s.t2"
    # null removes a setting: the schema's value applies again
    assert (await set_policy(ws, "TABLE", "main.s.t2", {"enabled": None}))[0] == 200
    status, t2 = await ws.call("GET", "/shardcat/maintenance/policies", params={"table": "main.s.t2"})
    assert t2["policy"]["enabled"] is True and t2["set_by"]["enabled"] == "catalog main"


async def test_bad_policies_and_callers_are_refused(ws, server):
    await tables(ws, "t", appends=1)
    for policy in ({"enabled": "yes"}, {"compact_min_small_files": 1}, {"nope": 1}, {}, "x",
                   {"schedule_seconds": -5}, {"vacuum_retention_hours": True}):
        status, body = await set_policy(ws, "TABLE", "main.s.t", policy)
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (policy, body)
    for kind in ("VOLUME", "metastore", None):
        status, body = await set_policy(ws, kind, "main.s.t", {"enabled": True})
        assert status == 400, body
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    for kind, name in (("CATALOG", "main"), ("SCHEMA", "main.s"), ("TABLE", "main.s.t"), ("TABLE", "MAIN.S.T")):
        status, body = await set_policy(ws, kind, name, {"enabled": True}, caller=reader)
        assert status == 403, body
    status, body = await reader.call("POST", "/shardcat/maintenance/runs", json={"table": "main.s.t"})
    assert status == 403, body                      # SELECT is not MODIFY
    stranger = await user(server, ws)
    for name in ("main.s.t", "main.s.missing"):     # what it may not see answers as missing
        status, body = await stranger.call("POST", "/shardcat/maintenance/runs", json={"table": name})
        assert status == 404, body
        status, body = await stranger.call("GET", "/shardcat/maintenance/policies", params={"table": name})
        assert status == 404, body
    status, body = await ws.call("POST", "/shardcat/maintenance/runs", json={"table": "main.s.t",
                                                                            "actions": ["expire_snapshots"]})
    assert status == 400, body                      # an Iceberg job on a Delta table
    await ws.call("POST", "/shardcat/system-tables")
    status, body = await ws.call("POST", "/shardcat/maintenance/runs", json={"table": "system.access.audit"})
    assert status == 403, body                      # the system tables are the catalog's own


async def test_a_run_is_recorded_everywhere(ws, server):
    await tables(ws, "busy", appends=6)
    await ws.call("POST", "/shardcat/system-tables")
    writer = await user(server, ws)
    await grant(ws, "catalog", "main", writer.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "main.s.busy", writer.name, "MODIFY")
    status, body = await writer.call("POST", "/shardcat/maintenance/runs",
                                     json={"table": "main.s.busy", "actions": ["compact", "checkpoint"]})
    assert status == 200, body
    assert [(r["action"], r["status"]) for r in body["runs"]] == [("compact", "PENDING"), ("checkpoint", "PENDING")]
    status, again = await writer.call("POST", "/shardcat/maintenance/runs", json={"table": "main.s.busy"})
    assert status == 409 and again["error_code"] == "RESOURCE_CONFLICT"        # one run of a table at a time
    for _ in range(300):        # Ray may be starting on a loaded machine
        status, body = await writer.call("GET", "/shardcat/maintenance/runs", params={"table": "main.s.busy"})
        if all(r["status"] in ("SUCCEEDED", "FAILED") for r in body["runs"]):
            break
        await asyncio.sleep(0.5)
    compact, checkpoint = body["runs"]
    assert compact["status"] == "SUCCEEDED" and (compact["files_before"], compact["files_after"]) == (6, 1)
    assert compact["node"] and compact["attempt"] == 1 and compact["trigger"] == "manual"
    assert checkpoint["status"] == "SUCCEEDED"
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        assert sorted(r["id"] for r in (await client.read("main.s.busy")).to_pylist()) == list(range(6))
    # system.maintenance.runs
    status, runs = await ws.call("GET", "/tables/system.maintenance.runs")
    rows = deltalake.DeltaTable(runs["storage_location"]).to_pyarrow_table().to_pylist()
    assert {(r["table_name"], r["action"], r["status"]) for r in rows} == {
        ("main.s.busy", "compact", "SUCCEEDED"), ("main.s.busy", "checkpoint", "SUCCEEDED")}
    # /metrics
    async with ws.session.get(ws.url + "/metrics", headers=ws.headers) as r:
        text = await r.text()
    assert 'shardcat_maintenance_runs_total{run="delta.compact:succeeded"}' in text
    # the audit log
    for _ in range(20):
        status, audit = await ws.call("GET", "/shardcat/audit", params={"action": "maintenanceRun",
                                                                        "principal": "System maintenance"})
        if len(audit.get("events", [])) >= 2:
            break
        await asyncio.sleep(0.2)
    mine = [e for e in audit["events"] if e.get("metastore_id") == ws.metastore_id]
    assert len(mine) == 2 and {e["securable_full_name"] for e in mine} == {"main.s.busy"}
    assert all(e["allowed"] for e in mine)


async def test_signals_and_schedule_start_runs_on_enabled_tables_only(ws, server):
    await tables(ws, "many", "few", "off", appends=4)
    await set_policy(ws, "SCHEMA", "main.s", {"enabled": True, "compact_min_small_files": 4,
                                              "checkpoint_log_length": 100, "schedule_seconds": 3600})
    await set_policy(ws, "TABLE", "main.s.few", {"compact_min_small_files": 10})
    await set_policy(ws, "TABLE", "main.s.off", {"enabled": False})
    maintenance = service(server)
    now = now_ms()
    for name in ("many", "few", "off"):          # all ran recently: the schedule is not due
        status, t = await ws.call("GET", f"/tables/main.s.{name}")
        maintenance.last_run[t["table_id"]] = now
    runs = await maintenance.tick(ws.metastore_id, now=now + 1000)
    assert [(r["table_name"], r["action"], r["trigger"]) for r in runs] == [("main.s.many", "compact", "compact")]
    assert runs[0]["files_after"] == 1
    # an hour later the schedule wants every job on both enabled tables; the disabled one stays quiet
    runs = await maintenance.tick(ws.metastore_id, now=now + 3601_000)
    assert {r["table_name"] for r in runs} == {"main.s.many", "main.s.few"}
    assert {r["action"] for r in runs if r["table_name"] == "main.s.few"} == {"compact", "checkpoint", "vacuum"}
    assert all(r["status"] == "SUCCEEDED" and r["trigger"] == "schedule" for r in runs)


async def test_an_iceberg_table_is_compacted_through_the_api(ws, server):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    assert (await ws.call("POST", "/catalogs", json={"name": "ice"}))[0] == 200

    def make():
        catalog = load_catalog("t", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=ws.token)
        catalog.create_namespace("s")
        table = catalog.create_table("s.events", Schema(NestedField(1, "id", LongType(), required=False)))
        for i in range(4):
            table.append(pa.table({"id": pa.array([i], pa.int64())}))
        return catalog

    catalog = await asyncio.to_thread(make)
    status, body = await ws.call("POST", "/shardcat/maintenance/runs", json={"table": "ice.s.events",
                                                                            "actions": ["compact"]})
    assert status == 200, body
    for _ in range(300):
        status, body = await ws.call("GET", "/shardcat/maintenance/runs", params={"table": "ice.s.events"})
        if body["runs"][-1]["status"] in ("SUCCEEDED", "FAILED"):
            break
        await asyncio.sleep(0.5)
    [run] = body["runs"]
    assert run["status"] == "SUCCEEDED" and run["format"] == "ICEBERG", run
    assert (run["files_before"], run["files_after"]) == (4, 1)
    ids = await asyncio.to_thread(lambda: sorted(catalog.load_table("s.events").scan().to_arrow()["id"].to_pylist()))
    assert ids == [0, 1, 2, 3]
