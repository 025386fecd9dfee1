"""Freshness and volume monitors: a table that is late, or whose latest commit wrote far more or far
fewer rows than it usually does, raises an alert.

A monitor is on for a table when `shardcat.monitor.enabled` is true on it or inherited from its schema
or catalog (the nearest setting wins, as for maintenance policies). Its history is the table's
published Delta log: each commit that changed data, with its time and the rows it added (the add
actions' numRecords). The expected cadence is `shardcat.monitor.expected_interval_seconds` if set,
else learned: the median gap between the last MAX_HISTORY data commits (at least MIN_HISTORY of them).

- **late**: no data commit for `lateness_factor` (2) times the expected interval;
- **volume**: the latest commit's rows outside [median / volume_factor, median * volume_factor] of
  the commits before it (volume_factor 10, at least MIN_HISTORY of them).

An alert is raised once per episode (a late table once until it commits again; a commit once) as:
a metastore write touching the table with the change `MONITOR_ALERT`, which the events machinery
(catalog/features/events.py) posts to the metastore's webhooks and streams over SSE as a CloudEvent;
a row of `system.monitoring.alerts`; and the shard's recent alerts, which
`GET /shardcat/monitors/alerts?table=` answers (the explorer shows them on the table's page). Checks
run every CHECK_SECONDS on the metastores this shard serves, and on `POST /shardcat/monitors/check`
(admins); the clock is injectable (`check(..., now=...)`), so tests never sleep.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import json
import logging
import os
import statistics
import uuid

from ...auth import Caller
from ...delta import log as dlog
from ...entities.asset import Asset
from ...entities.values import now_ms
from ...errors import invalid
from ...governance import audit
from ...governance.authorize import authorizer, denied
from ...shards.followers import Ticking
from ...shards.shard import Shard
from ...web.kit import ok
from ...web.routes import Handler, ShardServing
from ..tree.service import CatalogService
from .system import SystemTables, keeper, one_per_shard

log = logging.getLogger(__name__)

PREFIX = "shardcat.monitor."
DEFAULTS = {"enabled": False, "expected_interval_seconds": None, "lateness_factor": 2.0, "volume_factor": 10.0}
MIN_HISTORY = 4
MAX_HISTORY = 20
CHECK_SECONDS = float(os.environ.get("SHARDCAT_MONITOR_CHECK_SECONDS", "60"))
RECENT_ALERTS = 200
ALERT_CHANGE = "MONITOR_ALERT"


def settings(chain: list[dict | None]) -> dict:
    """The monitor settings in force from properties [catalog, schema, table]: the nearest wins; a bad
    value is skipped (the one above applies)."""
    out = dict(DEFAULTS)
    for properties in chain:
        for key in DEFAULTS:
            raw = (properties or {}).get(PREFIX + key)
            if raw is None:
                continue
            if key == "enabled":
                if str(raw).lower() in ("true", "false"):
                    out[key] = str(raw).lower() == "true"
                continue
            try:
                value = float(raw)
            except (TypeError, ValueError):
                continue
            if value > 0:
                out[key] = value
    return out


def history(location: str) -> list[tuple[int, int]]:
    """(time ms, rows added) of each published commit that changed data, oldest first (blocking)."""
    storage = dlog.Storage(location)
    commits, _ = storage.list_log()
    out = []
    for version in sorted(commits)[-(MAX_HISTORY + 1):]:
        actions = dlog.decode_actions(storage.read(dlog.commit_file(version)))
        adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
        if not adds:
            continue
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        when = info.get("inCommitTimestamp") or info.get("timestamp") or storage.mtime_ms(dlog.commit_file(version))
        rows = 0
        for a in adds:
            try:
                rows += int(json.loads(a.get("stats") or "{}").get("numRecords") or 0)
            except (ValueError, TypeError):
                pass
        out.append((int(when), rows))
    return out


def late(commits: list[tuple[int, int]], now: int, config: dict) -> dict | None:
    """A freshness alert's facts, or None when the table is on time (or its cadence is not known yet)."""
    if not commits:
        return None
    expected = config["expected_interval_seconds"]
    if expected is None:
        if len(commits) < MIN_HISTORY:
            return None
        gaps = [b[0] - a[0] for a, b in zip(commits, commits[1:])]
        expected = statistics.median(gaps) / 1000
    last = commits[-1][0]
    overdue = (now - last) / 1000
    if expected <= 0 or overdue <= config["lateness_factor"] * expected:
        return None
    return {"kind": "FRESHNESS", "expected": f"a data commit every {expected:.0f} s",
            "observed": f"none for {overdue:.0f} s", "episode": f"late-after-{last}"}


def off_volume(commits: list[tuple[int, int]], config: dict) -> dict | None:
    """A volume alert's facts for the latest commit, or None when its rows are in the usual range."""
    if len(commits) < MIN_HISTORY + 1:
        return None
    usual = statistics.median(rows for _, rows in commits[:-1])
    when, rows = commits[-1]
    factor = config["volume_factor"]
    low, high = usual / factor, usual * factor
    if low <= rows <= high:
        return None
    return {"kind": "VOLUME", "expected": f"{low:g} to {high:g} rows (median {usual:g})",
            "observed": f"{rows} rows", "episode": f"commit-at-{when}"}


class Monitors(Ticking):
    def __init__(self, shard: Shard, catalogs: CatalogService, system: SystemTables):
        super().__init__(shard, "monitors", PREFIX + "enabled")
        self.catalogs = catalogs
        self.system = system
        self.raised: set[tuple[str, str]] = set()        # (table id, episode) already alerted
        self.recent: dict[str, collections.deque] = {}   # metastore -> recent alerts

    def period(self) -> float:
        return CHECK_SECONDS

    async def tick(self, metastore_id: str) -> None:
        await self.check(metastore_id)

    async def _settings(self, metastore_id: str, table: Asset) -> dict:
        schema = await self.shard.lookup_id(metastore_id, table.parent_id)
        catalog = await self.shard.lookup_id(metastore_id, schema.parent_id) if schema else None
        return settings([a.info.get("properties") if a else None for a in (catalog, schema, table)])

    async def check(self, metastore_id: str, *, now: int | None = None) -> list[dict]:
        """Look at every monitored table of the metastore; the alerts raised now."""
        now = now if now is not None else now_ms()
        raised = []
        for table in await self.switched_tables(metastore_id):
            if not table.storage_path or (table.info.get("data_source_format") or "DELTA").upper() != "DELTA" \
                    or table.full_name.lower().startswith("system."):
                continue
            config = await self._settings(metastore_id, table)
            if not config["enabled"]:
                continue
            try:
                commits = await asyncio.to_thread(history, table.storage_path)
            except (OSError, ValueError, KeyError):
                continue
            for found in (late(commits, now, config), off_volume(commits, config)):
                if found is not None and (table.id, found["episode"]) not in self.raised:
                    self.raised.add((table.id, found["episode"]))
                    raised.append(await self._raise(metastore_id, table, found, now))
        return raised

    async def _raise(self, metastore_id: str, table: Asset, found: dict, now: int) -> dict:
        alert = {"alert_id": str(uuid.uuid4()), "table_name": table.full_name, "table_id": table.id,
                 "kind": found["kind"], "raised": datetime.datetime.fromtimestamp(now / 1000, datetime.timezone.utc),
                 "expected": found["expected"], "observed": found["observed"],
                 "detail": f"{table.full_name}: {found['kind'].lower()} alert, expected {found['expected']}, "
                           f"observed {found['observed']}"}

        async def write(tx, state):     # the change the events machinery posts and streams as a CloudEvent
            tx.touch(table.id, ALERT_CHANGE, "table", table.full_name)

        try:
            await self.shard.write(metastore_id, write)
        except Exception as e:       # noqa: BLE001 -- the alert is still kept below
            log.warning("monitors: the alert on %s made no event: %r", table.full_name, e)
        self.recent.setdefault(metastore_id, collections.deque(maxlen=RECENT_ALERTS)).append(alert)
        try:
            await self.system.append_journal(metastore_id, "monitoring", "alerts", [alert])
        except Exception:       # noqa: BLE001 -- kept in memory and sent as an event
            log.exception("monitors: the alert on %s could not be added to system.monitoring.alerts", table.full_name)
        return _shown(alert)

    async def alerts(self, caller: Caller, query) -> dict:
        name = query.get("table")
        if not name:
            raise invalid("Query parameter 'table' (a table's full name) is required.")
        table = await self.catalogs.find(caller, "table", name)       # the caller may read it, or 404
        audit.annotate("TABLE", table.full_name, table.id)
        return {"alerts": [_shown(a) for a in self.recent.get(caller.metastore(), ()) if a["table_id"] == table.id]}

    async def check_now(self, caller: Caller) -> dict:
        if not (await authorizer(self.shard, caller)).admin:
            raise denied("Only account admins and metastore admins may run the monitors' check.")
        return {"alerts": await self.check(caller.metastore())}


def _shown(alert: dict) -> dict:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in alert.items()}


_SERVICES: dict[int, Monitors] = {}


def service(shard: Shard, catalogs: CatalogService) -> Monitors:
    return one_per_shard(_SERVICES, shard, lambda: Monitors(shard, catalogs, keeper(shard, catalogs)))


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    monitors = service(serving.shard, serving.catalogs)

    async def alerts(request):
        return ok(await monitors.alerts(request["caller"], request.query))

    async def check(request):
        return ok(await monitors.check_now(request["caller"]))

    return {"listMonitorAlerts": alerts, "checkMonitors": check}
