"""Table maintenance, decided and recorded by the catalog, run as Ray tasks (shardcat/maintenance/).

Policies (`PUT /shardcat/maintenance/policies`) are set on a catalog, schema or table as that
securable's properties (`shardcat.maintenance.*`), by whoever may change it (its owner, MANAGE, an
admin), and inherited: the nearest setting wins (`GET /shardcat/maintenance/policies?table=...`
shows the one in force and where each value comes from). On a table whose policy is enabled,
a commit (a Delta commit, an Iceberg metadata update) marks it for a look, and every TICK_SECONDS
the shard looks at the marked tables and at those whose schedule is due: the commit signals (small
files, log length since the last checkpoint, an Iceberg table's manifest count) or the schedule
decide which jobs run.
`POST /shardcat/maintenance/runs` runs them now (the table's MODIFY, or an admin).

Every job is a Ray task (never on this loop), with a token minted for the run for the principal
`System maintenance` (an account admin; the token expires with RUN_TOKEN_SECONDS and is revoked
when the run ends), through the catalog's own API: a compaction is a commit like any other. Each
run is retried on failure (maintenance/runner.py), audited (`runMaintenance`), written to
`system.maintenance.runs` and counted on /metrics (`shardcat_maintenance_runs`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import uuid

from ...auth import Caller, hash_token, new_token
from ...delta import clone as delta_clone
from ...delta import log as dlog
from ...delta.commits import is_catalog_managed
from ...entities.asset import Asset
from ...entities.foreign import is_mirrored
from ...entities.names import full_name_key
from ...entities.values import now_ms
from ...errors import CatalogError, invalid, not_found
from ...governance import audit
from ...governance.authorize import authorizer
from ...maintenance import policy as rules
from ...maintenance import iceberg_jobs, runner
from ...shards.followers import Ticking
from ...shards.shard import Shard
from ...store import history
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ..tree.service import CatalogService
from .system import SystemTables, keeper, one_per_shard

log = logging.getLogger(__name__)

TICK_SECONDS = float(os.environ.get("SHARDCAT_MAINTENANCE_TICK_SECONDS", "30"))
RUN_TOKEN_SECONDS = 1800
RECENT_RUNS = 200
MAINTENANCE_PRINCIPAL = "System maintenance"
DELTA_ACTIONS = ("compact", "checkpoint", "vacuum")
ICEBERG_ACTIONS = ("compact", "rewrite_manifests", "expire_snapshots", "remove_orphan_files")
_TYPES = {"CATALOG": "catalog", "SCHEMA": "schema", "TABLE": "table"}

_API_URLS: dict[int, str] = {}        # id(shard) -> where the server serving it answers


def set_api_url(shard: Shard, url: str) -> None:
    """Where the Ray tasks of `shard`'s maintenance reach the catalog's API (the server says so once it
    listens). Elsewhere (a shard actor of --shards) SHARDCAT_API_URL says it."""
    _API_URLS[id(shard)] = url.rstrip("/")


def _format(table: Asset) -> str:
    if table.info.get("data_source_format", "").upper() == "ICEBERG" or \
            table.info.get("properties", {}).get("metadata_location"):
        return "ICEBERG"
    return "DELTA"


class Maintenance(Ticking):
    def __init__(self, shard: Shard, catalogs: CatalogService, system: SystemTables):
        super().__init__(shard, "maintenance", rules.PREFIX + "enabled")
        self.catalogs = catalogs
        self.system = system
        self.marked: dict[str, set[str]] = {}          # metastore -> table ids a commit touched
        self.last_run: dict[str, int] = {}             # table id -> when its last run ended (ms)
        self.running: set[str] = set()                 # table ids with a run in flight
        self.recent: dict[str, collections.deque] = {}  # metastore -> its last RECENT_RUNS runs' rows
        self.tasks: set[asyncio.Task] = set()           # runs started by hand, still going

    @property
    def api_url(self) -> str | None:
        return _API_URLS.get(id(self.shard)) or os.environ.get("SHARDCAT_API_URL")

    # -- follower: commits mark their tables; the first write starts the metastore's loop -----
    def period(self) -> float:
        return TICK_SECONDS

    def noticed(self, state, tx) -> None:
        for touched in tx.touched.values():
            if touched.get("type") == "table" and touched.get("change") in ("DELTA_COMMIT", "UPDATE"):
                self.marked.setdefault(state.id, set()).add(touched["id"])

    async def tick(self, metastore_id: str, *, now: int | None = None) -> list[dict]:
        """Look at the marked tables and the enabled ones: run what their signals or schedule ask for."""
        now = now if now is not None else now_ms()
        marked = self.marked.pop(metastore_id, set())
        runs = []
        for table in await self.switched_tables(metastore_id):
            # Not the system tables (the catalog's own), nor a foreign table (its files are the foreign system's).
            if table.id in self.running or not table.storage_path or table.full_name.startswith("system.") \
                    or is_mirrored(table):
                continue
            effective = await self.policy_of(metastore_id, table)
            if not effective.values["enabled"]:
                continue
            signals = await asyncio.to_thread(_signals, table, effective.values["small_file_bytes"]) \
                if table.id in marked or _format(table) == "DELTA" else {}
            reasons = rules.due(effective.values, **signals, last_run_ms=self.last_run.get(table.id), now_ms=now)
            if not reasons:
                continue
            actions = _actions_for(_format(table), reasons)
            runs.extend(await self.run(metastore_id, table, actions, trigger=",".join(reasons),
                                       policy=effective.values))
        return runs

    # -- policies -----------------------------------------------------------------------------
    async def _chain(self, metastore_id: str, table: Asset) -> list[tuple[str, str, dict | None]]:
        schema = await self.shard.lookup_id(metastore_id, table.parent_id)
        catalog = await self.shard.lookup_id(metastore_id, schema.parent_id) if schema else None
        return [(lv, a.full_name, a.info.get("properties")) for lv, a in
                (("catalog", catalog), ("schema", schema), ("table", table)) if a is not None]

    async def policy_of(self, metastore_id: str, table: Asset) -> rules.Effective:
        return rules.effective(await self._chain(metastore_id, table))

    async def get_policy(self, caller: Caller, query) -> dict:
        name = query.get("table")
        if not name:
            raise invalid("Query parameter 'table' (a table's full name) is required.")
        table = await self._visible_table(caller, name)
        return {"table": table.full_name, **(await self.policy_of(caller.metastore(), table)).json()}

    async def _visible_table(self, caller: Caller, name: str) -> Asset:
        """The table, if the caller may know it exists (any privilege on it will do: MODIFY alone too)."""
        table = await self.shard.lookup(caller.metastore(), "table", full_name_key(name, 3, "table"),
                                        caller.min_version)
        if table is None or not (await authorizer(self.shard, caller)).sees("table", table):
            raise not_found(f"Table '{name}' does not exist.")
        audit.annotate("TABLE", table.full_name, table.id)
        return table

    async def set_policy(self, caller: Caller, body: dict) -> dict:
        kind = _TYPES.get(str(body.get("securable_type", "")).upper())
        if kind is None:
            raise invalid("Field 'securable_type' must be CATALOG, SCHEMA or TABLE.")
        name = body.get("full_name")
        if not isinstance(name, str) or not name:
            raise invalid("Field 'full_name' must be the securable's full name.")
        try:
            changes = rules.check(body.get("policy"))
        except rules.PolicyError as e:
            raise invalid(str(e)) from None
        asset = await self.catalogs.find(caller, kind, name)
        properties = {k: v for k, v in {**(asset.info.get("properties") or {}), **changes}.items() if v is not None}
        # The securable's own update rule decides (owner, MANAGE, admin), as for any property change.
        await self.catalogs.update(caller, kind, asset.full_name, {"properties": properties})
        return {"securable_type": kind.upper(), "full_name": asset.full_name,
                "policy": {k[len(rules.PREFIX):]: v for k, v in properties.items() if k.startswith(rules.PREFIX)}}

    # -- runs ---------------------------------------------------------------------------------
    async def run_now(self, caller: Caller, body: dict) -> dict:
        name = body.get("table")
        if not isinstance(name, str) or not name:
            raise invalid("Field 'table' (a table's full name) is required.")
        ms = caller.metastore()
        key = full_name_key(name, 3, "table")
        table = await self.shard.lookup(ms, "table", key, caller.min_version)
        missing = not_found(f"Table '{name}' does not exist.")
        if table is None:
            raise missing
        authz = await authorizer(self.shard, caller)
        authz.require_data(table, write=True, missing=missing)      # MODIFY (or owner, or admin)
        audit.annotate("TABLE", table.full_name, table.id)
        fmt = _format(table)
        allowed = DELTA_ACTIONS if fmt == "DELTA" else ICEBERG_ACTIONS
        actions = body.get("actions") or list(allowed)
        if not isinstance(actions, list) or not all(a in allowed for a in actions):
            raise invalid(f"Field 'actions' must be a list of {', '.join(allowed)} for a {fmt} table.")
        if table.id in self.running:
            raise CatalogError("RESOURCE_CONFLICT", f"A maintenance run of '{table.full_name}' is in progress.")
        effective = await self.policy_of(ms, table)
        if self.api_url is None:
            raise CatalogError("FAILED_PRECONDITION", "This server has not said where its API answers "
                                                      "(SHARDCAT_API_URL): maintenance tasks cannot reach it.")
        # Answered at once: a run may take longer than a request may wait (Ray's start, big tables).
        # Its rows say PENDING here and are followed by GET /shardcat/maintenance/runs.
        rows = [self._row(table, action, "manual") for action in actions]
        self.running.add(table.id)
        self.tasks.add(task := asyncio.get_running_loop().create_task(
            self.run(ms, table, actions, trigger="manual", policy=effective.values, rows=rows)))
        task.add_done_callback(self.tasks.discard)
        return {"runs": [_shown(r) for r in rows]}

    async def list_runs(self, caller: Caller, query) -> dict:
        """This shard's recent runs of a table (the caller may read it), newest last; older ones:
        system.maintenance.runs."""
        name = query.get("table")
        if not name:
            raise invalid("Query parameter 'table' (a table's full name) is required.")
        table = await self._visible_table(caller, name)
        return {"runs": [_shown(r) for r in self.recent.get(caller.metastore(), ()) if r["table_id"] == table.id]}

    def _row(self, table: Asset, action: str, trigger: str) -> dict:
        row = {"run_id": str(uuid.uuid4()), "table_name": table.full_name, "table_id": table.id,
               "format": _format(table), "action": action, "trigger": trigger, "status": "PENDING"}
        self.recent.setdefault(table.metastore_id, collections.deque(maxlen=RECENT_RUNS)).append(row)
        return row

    async def run(self, metastore_id: str, table: Asset, actions: list[str], *, trigger: str, policy: dict,
                  rows: list[dict] | None = None) -> list[dict]:
        """Run `actions` on `table`, one Ray task each, in order; record every run."""
        rows = rows or [self._row(table, action, trigger) for action in actions]
        self.running.add(table.id)
        token_id = None
        try:
            if self.api_url is None:
                raise CatalogError("FAILED_PRECONDITION", "This server has not said where its API answers "
                                                          "(SHARDCAT_API_URL): maintenance tasks cannot reach it.")
            token, token_id = await self._mint(metastore_id)
            for row in rows:
                await self._one(metastore_id, table, row, policy, token)
            return [_shown(r) for r in rows]
        except CatalogError as e:
            for row in rows:
                if row["status"] == "PENDING":
                    row.update(status="FAILED", detail=e.message)
            return [_shown(r) for r in rows]
        finally:
            self.running.discard(table.id)
            self.last_run[table.id] = now_ms()
            if token_id is not None:
                await self.shard.store.principals.revoke_token(token_id)

    async def _mint(self, metastore_id: str) -> tuple[str, int]:
        store = self.shard.store
        workspaces = await store.workspaces_of(metastore_id)
        if not workspaces:
            raise CatalogError("FAILED_PRECONDITION", "The metastore is assigned to no workspace: a maintenance "
                                                      "token has nowhere to act.")
        principal = await store.create_principal(MAINTENANCE_PRINCIPAL, "service_principal", is_account_admin=True)
        token = new_token()
        token_id = await store.add_token(principal.id, hash_token(token), workspaces[0], "maintenance run",
                                         expires_at=now_ms() + RUN_TOKEN_SECONDS * 1000)
        return token, token_id

    async def _spec(self, metastore_id: str, table: Asset, action: str, policy: dict, token: str) -> tuple[str, dict]:
        location = table.storage_path
        if _format(table) == "ICEBERG":
            catalog, schema, name = table.full_name.split(".")
            common = {"api_url": self.api_url + "/api/2.1/unity-catalog", "token": token, "warehouse": catalog,
                      "identifier": f"{schema}.{name}"}
            if action == "expire_snapshots":
                common["older_than_ms"] = now_ms() - int(policy["snapshot_retention_hours"] * 3600_000)
            if action == "remove_orphan_files":
                common["older_than_ms"] = now_ms() - int(policy["orphan_min_age_hours"] * 3600_000)
            if action == "rewrite_manifests":
                common["target_bytes"] = int(policy["manifest_target_bytes"])
            return f"iceberg.{action}", common
        if action == "vacuum":
            return "delta.vacuum", {"location": location, "keep": sorted(await self._kept_for_clones(metastore_id, table)),
                                    "older_than_ms": now_ms() - int(policy["vacuum_retention_hours"] * 3600_000)}
        spec = {"api_url": self.api_url + "/api/2.1/unity-catalog", "token": token, "full_name": table.full_name,
                "location": location, "catalog_managed": is_catalog_managed(table.info.get("properties"))}
        if action == "compact":
            spec["small_file_bytes"] = policy["small_file_bytes"]
        return f"delta.{action}", spec

    async def _kept_for_clones(self, metastore_id: str, table: Asset) -> set[str]:
        """The files shallow clones of the table reference (catalog/features/snapshots.py's rule)."""
        keep: set[str] = set()
        refs = await history.clone_references(self.shard.store, metastore_id, [table.id])
        for clone_id in refs.get(table.id, []):
            clone = await self.shard.lookup_id(metastore_id, clone_id)
            if clone is not None and clone.storage_path:
                keep |= await asyncio.to_thread(delta_clone.referenced, clone.storage_path)
        return keep

    async def _one(self, metastore_id: str, table: Asset, row: dict, policy: dict, token: str) -> dict:
        action, trigger = row["action"], row["trigger"]
        row.update(status="RUNNING", started=_ts(now_ms()))
        try:
            job, spec = await self._spec(metastore_id, table, action, policy, token)
            result = await runner.run(job, spec)
            row.update(status="SUCCEEDED", attempt=result.pop("attempt"), node=result.pop("node"),
                       files_before=result.get("files_before"), files_after=result.get("files_after"),
                       detail=_detail(result))
        except runner.JobFailed as e:
            row.update(status="FAILED", attempt=e.attempts, detail=str(e))
        except Exception as e:  # noqa: BLE001 -- recorded as a failed run, never lost
            row.update(status="FAILED", attempt=0, detail=f"{type(e).__name__}: {e}"[:1000])
        row["finished"] = _ts(now_ms())
        runner.RUNS[(f"{row['format'].lower()}.{action}", row["status"].lower())] += 1
        audit.record_all(Caller(MAINTENANCE_PRINCIPAL, 0, True, 0, metastore_id), [audit.AccessDecision(
            "maintenanceRun", "TABLE", table.full_name, row["status"] == "SUCCEEDED", table.id,
            None if row["status"] == "SUCCEEDED" else "MAINTENANCE_FAILED", f"{action} ({trigger}): {row['detail']}")],
            store=self.shard.store)
        try:
            await self.system.append_journal(metastore_id, "maintenance", "runs", [row])
        except Exception:       # noqa: BLE001 -- the audit row above has it
            log.exception("maintenance: the run of %s could not be added to system.maintenance.runs", table.full_name)
        return row


def _shown(row: dict) -> dict:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}


def _signals(table: Asset, small_bytes: int) -> dict:
    """What the table's files show its policy (rules.due's signals): small live files, and commits since
    the last checkpoint from the published Delta log, or an Iceberg table's data manifests."""
    if _format(table) != "DELTA":
        location = (table.info.get("properties") or {}).get("metadata_location")
        try:
            return iceberg_jobs.signals(location, small_bytes) if location else {}
        except (OSError, ValueError) as e:      # unreadable metadata: no signal (the schedule still runs)
            log.warning("maintenance: the signals of %s could not be read: %r", table.full_name, e)
            return {}
    storage = dlog.Storage(table.storage_path)
    commits, checkpoints = storage.list_log()
    if not commits:
        return {}
    from ...delta.vacuum import log_history
    try:
        live, _ = log_history(storage)
    except ValueError:
        return {}
    small = 0
    for path in live:
        try:
            info = storage.fs.get_file_info(storage.path(path))
            small += (info.size or 0) < small_bytes
        except OSError:
            continue
    return {"small_files": small, "log_length": len([c for c in commits if c > max(checkpoints, default=-1)])}


def _actions_for(fmt: str, reasons: list[str]) -> list[str]:
    if "schedule" in reasons:
        return list(DELTA_ACTIONS if fmt == "DELTA" else ICEBERG_ACTIONS)
    if fmt != "DELTA":
        return [a for a in ("compact", "rewrite_manifests") if a in reasons]
    return [a for a in ("compact", "checkpoint") if a in reasons]


def _detail(result: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(result.items()) if k not in ("files_before", "files_after"))[:1000]


def _ts(ms: int):
    import datetime
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


_SERVICES: dict[int, Maintenance] = {}


def service(shard: Shard, catalogs: CatalogService) -> Maintenance:
    return one_per_shard(_SERVICES, shard, lambda: Maintenance(shard, catalogs, keeper(shard, catalogs)))


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    maintenance = service(serving.shard, serving.catalogs)

    async def get_policy(request):
        return ok(await maintenance.get_policy(request["caller"], request.query))

    async def set_policy(request):
        return ok(await maintenance.set_policy(request["caller"], await json_body(request)))

    async def run(request):
        return ok(await maintenance.run_now(request["caller"], await json_body(request)))

    async def runs(request):
        return ok(await maintenance.list_runs(request["caller"], request.query))

    return {"getMaintenancePolicy": get_policy, "setMaintenancePolicy": set_policy, "runMaintenance": run,
            "listMaintenanceRuns": runs}
