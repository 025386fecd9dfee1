"""Freshness and volume monitors (catalog/features/monitors.py) on real Delta tables whose commit history
is hours long (the commits' times set in their logs), checked with an injected clock: an alert on a late
table, none on a punctual one, one on a commit far outside the usual row count; each alert once, as a
CloudEvent on the SSE stream (webhooks share it), a row of system.monitoring.alerts, and on the API."""

from __future__ import annotations

import asyncio
import json
import os

import deltalake
import pyarrow as pa

from governance_users import user
from shardcat.catalog.features import monitors as feature
from tests.integration.test_explorer import browser, sign_in, wait  # noqa: F401 -- fixtures
from tests.integration.test_explorer_pages import card, open_page

HOUR = 3600_000


async def delta_table(ws, name: str, batches: list[int], start_ms: int) -> str:
    """main.s.<name>: one commit per batch (that many rows), an hour apart from start_ms."""
    status, table = await ws.call("POST", "/tables", json={
        "name": name, "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200, table
    location = table["storage_location"]
    for rows in batches:
        deltalake.write_deltalake(location, pa.table({"id": pa.array(range(rows), pa.int64())}), mode="append")
    log_dir = os.path.join(location.removeprefix("file://"), "_delta_log")
    for version in range(len(batches)):        # the history as if written hourly
        path = os.path.join(log_dir, f"{version:020d}.json")
        lines = [json.loads(line) for line in open(path) if line.strip()]
        for line in lines:
            if "commitInfo" in line:
                line["commitInfo"]["timestamp"] = start_ms + version * HOUR
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(line) for line in lines) + "\n")
    return location


def service(server) -> feature.Monitors:
    [found] = [m for m in feature._SERVICES.values() if m.shard.store is server.store]
    return found


def alerts_card(driver, url, token, name: str) -> str:
    """The table page's "Monitor alerts" card, once it shows an alert."""
    sign_in(driver, url, token)
    open_page(driver, url, f"table/{name}", name)
    wait(driver, lambda d: "FRESHNESS" in card(d, "Monitor alerts"))
    return card(driver, "Monitor alerts")


async def test_late_and_off_volume_tables_alert_once_punctual_ones_stay_quiet(ws, server, monkeypatch, browser):
    monkeypatch.setattr(feature, "CHECK_SECONDS", 1e6)        # the test drives the checks
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main",
                                                                       "properties": {"shardcat.monitor.enabled": "true"}})):
        assert (await ws.call("POST", path, json=body))[0] == 200
    await ws.call("POST", "/shardcat/system-tables")
    start = 1_700_000_000_000
    await delta_table(ws, "hourly", [100] * 6, start)                 # last commit at start + 5 h
    await delta_table(ws, "spiky", [100] * 5 + [100_000], start)      # the last one 1,000 times the usual
    await delta_table(ws, "quiet", [100] * 6, start)
    status, _ = await ws.call("PATCH", "/tables/main.s.quiet", json={"properties": {"shardcat.monitor.enabled": "false"}})
    assert status == 200
    monitors = service(server)
    status, changes = await ws.call("GET", "/shardcat/changes")
    since = changes["versions"][-1]["version"] if changes.get("versions") else 0

    punctual = await monitors.check(ws.metastore_id, now=start + 5 * HOUR + HOUR // 2)
    assert [(a["table_name"], a["kind"]) for a in punctual] == [("main.s.spiky", "VOLUME")]
    later = await monitors.check(ws.metastore_id, now=start + 5 * HOUR + 3 * HOUR)
    assert sorted((a["table_name"], a["kind"]) for a in later) == [("main.s.hourly", "FRESHNESS"),
                                                                   ("main.s.spiky", "FRESHNESS")]
    assert "every 3600 s" in later[0]["expected"]
    assert await monitors.check(ws.metastore_id, now=start + 9 * HOUR) == []      # once per episode

    # the events machinery: a CloudEvent per alert on the SSE stream (and so to webhooks)
    async with ws.session.get(ws.api + "/shardcat/events", params={"since_version": str(since), "wait_seconds": "0"},
                              headers=ws.headers) as r:
        stream = await r.text()
    events = [json.loads(line[len("data: "):]) for line in stream.splitlines() if line.startswith("data: ")]
    alerted = [s["full_name"] for e in events for s in e["data"]["securables"] if s["change"] == "MONITOR_ALERT"]
    assert sorted(alerted) == ["main.s.hourly", "main.s.spiky", "main.s.spiky"]
    assert all(e["type"] == "io.shardcat.metastore.change" for e in events)

    # system.monitoring.alerts and the API the explorer reads
    status, alerts_table = await ws.call("GET", "/tables/system.monitoring.alerts")
    rows = deltalake.DeltaTable(alerts_table["storage_location"]).to_pyarrow_table().to_pylist()
    assert sorted((r["table_name"], r["kind"]) for r in rows) == [
        ("main.s.hourly", "FRESHNESS"), ("main.s.spiky", "FRESHNESS"), ("main.s.spiky", "VOLUME")]
    status, body = await ws.call("GET", "/shardcat/monitors/alerts", params={"table": "main.s.spiky"})
    assert status == 200 and [a["kind"] for a in body["alerts"]] == ["VOLUME", "FRESHNESS"]
    shown = await asyncio.to_thread(alerts_card, browser, server.url, ws.token, "main.s.spiky")    # the explorer
    assert "VOLUME" in shown and "100000 rows" in shown and "FRESHNESS" in shown
    stranger = await user(server, ws)
    status, body = await stranger.call("GET", "/shardcat/monitors/alerts", params={"table": "main.s.spiky"})
    assert status == 404, body
    status, body = await stranger.call("POST", "/shardcat/monitors/check")
    assert status == 403, body


async def test_a_set_cadence_overrides_the_learned_one(ws, server, monkeypatch):
    monkeypatch.setattr(feature, "CHECK_SECONDS", 1e6)
    for path, body in (("/catalogs", {"name": "main", "properties": {"shardcat.monitor.enabled": "true"}}),
                       ("/schemas", {"name": "s", "catalog_name": "main"})):
        assert (await ws.call("POST", path, json=body))[0] == 200
    start = 1_700_000_000_000
    await delta_table(ws, "daily", [10, 10], start)         # two commits: too few to learn a cadence
    monitors = service(server)
    assert await monitors.check(ws.metastore_id, now=start + 30 * HOUR) == []
    status, _ = await ws.call("PATCH", "/tables/main.s.daily",
                              json={"properties": {"shardcat.monitor.expected_interval_seconds": "86400"}})
    assert status == 200
    assert await monitors.check(ws.metastore_id, now=start + 30 * HOUR) == []      # 29 h < 2 days
    [alert] = await monitors.check(ws.metastore_id, now=start + 60 * HOUR)
    assert alert["kind"] == "FRESHNESS" and "every 86400 s" in alert["expected"]
