"""System tables: the catalog's own record (audit, lineage, information_schema, maintenance runs,
monitor alerts) as Delta tables of a `system` catalog that every engine reads by name.

An admin enables them per metastore (`POST /shardcat/system-tables`): the catalog then creates
`system` and its schemas and tables (owned by "System user", read-only for everyone else:
governance/system_catalog.py) as managed Delta tables in the metastore's storage, and keeps them:

- appended ones (system.access.*) take the PostgreSQL rows after a cursor, which is kept in the
  table's own Delta log (an app transaction), so a copy is never made twice or skipped;
- snapshots (system.information_schema.*) are replaced whole by the present state: one row per
  (securable, principal that may see it), under the row filter `visible_to_caller(visible_to)`;
- journals (system.maintenance.runs, system.monitoring.alerts) are appended by the jobs that make them.

A refresh runs every REFRESH_SECONDS for each metastore this shard owns that has them enabled, and on
`POST /shardcat/system-tables/refresh`. The files are written by delta-rs in a worker thread: the
shard's serving loop only awaits it.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os

import deltalake
import pyarrow as pa

from ...auth import Caller
from ...errors import CatalogError
from ...governance.authorize import Authz, authorizer, denied
from ...governance.grants import Subjects
from ...governance.index import privilege_index
from ...governance.system_catalog import SYSTEM_CATALOG, SYSTEM_PRINCIPAL, system_caller
from ...iceberg.uniform import ENABLED_FORMATS
from ...shards.shard import Shard
from ...store.errors import is_db_unavailable
from ...store.system_rows import rows_after
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ..tree.service import CatalogService
from .system_tables import (APPENDED, FILTER_FUNCTION, INFORMATION_SCHEMA, JOURNAL, TABLES,
                            filter_function, uc_columns)

log = logging.getLogger(__name__)

REFRESH_SECONDS = float(os.environ.get("SHARDCAT_SYSTEM_REFRESH_SECONDS", "10"))
BATCH = 50_000                 # rows copied per table per refresh at most (the next refresh takes the rest)
APP_ID = "shardcat-system-tables"
MAX_PRINCIPALS = 2_000         # information_schema materializes rows for at most this many principals
# UniForm: the catalog serves each system table's Iceberg metadata too (catalog/features/uniform.py),
# so Iceberg engines (pyiceberg) read them by name through the Iceberg REST catalog.
UNIFORM = {ENABLED_FORMATS: "iceberg"}


def _ts(ms) -> datetime.datetime | None:
    return None if ms is None else datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def _exists(location: str) -> bool:
    return deltalake.DeltaTable.is_deltatable(location)


def _cursor(location: str) -> int:
    version = deltalake.DeltaTable(location).transaction_version(APP_ID)
    return version if version is not None else 0


def _append(location: str, data: pa.Table, cursor: int | None = None) -> None:
    props = None
    if cursor is not None:
        props = deltalake.CommitProperties(app_transactions=[deltalake.Transaction(APP_ID, cursor)])
    deltalake.write_deltalake(location, data, mode="append", commit_properties=props)


def _replace(location: str, data: pa.Table) -> None:
    deltalake.write_deltalake(location, data, mode="overwrite")


class SystemTables:
    """One shard's keeper of its metastores' system tables."""

    def __init__(self, shard: Shard, catalogs: CatalogService):
        self.shard = shard
        self.catalogs = catalogs
        self.subjects = Subjects(shard.store)
        self.locks: dict[str, asyncio.Lock] = {}
        self.loops: dict[str, asyncio.Task] = {}
        self.refreshed: dict[str, dict] = {}         # metastore id -> what the last refresh did
        shard.follow(self)

    # -- follower: a write to a metastore with system tables starts its refresh loop ----------
    def applied(self, state, tx) -> None:
        self._watch(state.id)

    async def reconciled(self, state, changes) -> None:
        self._watch(state.id)

    def rebuilt(self, state, version: int) -> None:
        self._watch(state.id)

    def _watch(self, metastore_id: str) -> None:
        task = self.loops.get(metastore_id)
        if task is None or task.done():
            self.loops[metastore_id] = asyncio.get_running_loop().create_task(self._loop(metastore_id))

    async def _loop(self, metastore_id: str) -> None:
        while self.shard.owns(metastore_id):
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                if await self._enabled(metastore_id):
                    await self.refresh(metastore_id)
            except asyncio.CancelledError:
                raise
            except Exception as e:       # noqa: BLE001 -- the next round tries again
                if is_db_unavailable(e):    # the store closed or down: the next write starts the loop again
                    log.warning("system tables of %s: the database is unavailable; refreshes stop until the "
                                "next write", metastore_id)
                    return
                log.warning("system tables of %s: refresh failed: %r", metastore_id, e)

    async def _enabled(self, metastore_id: str) -> bool:
        return await self.shard.lookup(metastore_id, "catalog", SYSTEM_CATALOG) is not None

    async def location(self, metastore_id: str, schema: str, table: str) -> str:
        asset = await self.shard.lookup(metastore_id, "table", f"{SYSTEM_CATALOG}.{schema}.{table}")
        if asset is None:
            raise CatalogError("NOT_FOUND", f"System table '{SYSTEM_CATALOG}.{schema}.{table}' is not enabled.")
        return asset.storage_path

    # -- enabling ---------------------------------------------------------------------------
    async def enable(self, caller: Caller) -> dict:
        if not (await authorizer(self.shard, caller)).admin:
            raise denied("Only account admins and metastore admins may enable the system tables.")
        ms = caller.metastore()
        me = system_caller(ms)
        existing = await self.shard.lookup(ms, "catalog", SYSTEM_CATALOG)
        if existing is not None and existing.info.get("owner") != SYSTEM_PRINCIPAL:
            raise CatalogError("FAILED_PRECONDITION", "A catalog named 'system' that the catalog did not make "
                                                      "exists (made before the name was reserved): rename it first.")
        await self._create(me, "catalog", {"name": SYSTEM_CATALOG, "comment": "The catalog's own record: "
                                           "read-only system tables (docs/system-tables.md)."}, SYSTEM_CATALOG)
        for schema, tables in TABLES.items():
            await self._create(me, "schema", {"name": schema, "catalog_name": SYSTEM_CATALOG},
                               f"{SYSTEM_CATALOG}.{schema}")
            if schema == INFORMATION_SCHEMA:
                await self._create(me, "function", filter_function()["function_info"], FILTER_FUNCTION)
            for name, (_, arrow_schema, comment) in tables.items():
                body = {"name": name, "catalog_name": SYSTEM_CATALOG, "schema_name": schema,
                        "table_type": "MANAGED", "data_source_format": "DELTA", "comment": comment,
                        "columns": uc_columns(arrow_schema), "properties": dict(UNIFORM)}
                if schema == INFORMATION_SCHEMA:
                    body["row_filter"] = {"function_name": FILTER_FUNCTION, "input_column_names": ["visible_to"]}
                await self._create(me, "table", body, f"{SYSTEM_CATALOG}.{schema}.{name}")
                await self._uniform(me, f"{SYSTEM_CATALOG}.{schema}.{name}")
                location = await self.location(ms, schema, name)
                if not await asyncio.to_thread(_exists, location):
                    await asyncio.to_thread(_append, location, arrow_schema.empty_table())
        self._watch(ms)
        return await self.refresh(ms)

    async def _uniform(self, me: Caller, full_name: str) -> None:
        """UniForm on a system table made before the tables had it: Iceberg engines read them too."""
        table = await self.shard.lookup(me.metastore(), "table", full_name)
        properties = table.info.get("properties") or {}
        if properties.get(ENABLED_FORMATS) != UNIFORM[ENABLED_FORMATS]:
            await self.catalogs.update(me, "table", full_name, {"properties": {**properties, **UNIFORM}})

    async def _create(self, me: Caller, kind: str, body: dict, full_name: str) -> None:
        namespace = "function" if kind == "function" else kind
        if await self.shard.lookup(me.metastore(), namespace, full_name) is None:
            try:
                await self.catalogs.create(me, kind, body)
            except CatalogError as e:
                if e.code != "ALREADY_EXISTS":     # another shard or request made it meanwhile
                    raise

    # -- refreshing ---------------------------------------------------------------------------
    async def refresh(self, metastore_id: str) -> dict:
        """Bring every system table of the metastore up to date; what was written, per table."""
        lock = self.locks.setdefault(metastore_id, asyncio.Lock())
        async with lock:
            done: dict[str, int] = {}
            for schema, tables in TABLES.items():
                for name, (how, arrow_schema, _) in tables.items():
                    if how == JOURNAL:
                        continue
                    location = await self.location(metastore_id, schema, name)
                    if how == APPENDED:
                        done[f"{schema}.{name}"] = await self._copy(metastore_id, name, location, arrow_schema)
            snapshot = await self._information_rows(metastore_id)
            for name, rows in snapshot.items():
                location = await self.location(metastore_id, INFORMATION_SCHEMA, name)
                schema = TABLES[INFORMATION_SCHEMA][name][1]
                await asyncio.to_thread(_replace, location, pa.Table.from_pylist(rows, schema=schema))
                done[f"{INFORMATION_SCHEMA}.{name}"] = len(rows)
            self.refreshed[metastore_id] = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                            "rows": done}
            return {"refreshed": done}

    async def _copy(self, metastore_id: str, kind: str, location: str, schema: pa.Schema) -> int:
        cursor = await asyncio.to_thread(_cursor, location)
        rows = await rows_after(self.shard.store, kind, metastore_id, cursor, BATCH)
        if not rows:
            return 0
        for r in rows:
            r["event_time"] = _ts(r.pop("at"))
        await asyncio.to_thread(_append, location, pa.Table.from_pylist(rows, schema=schema), rows[-1]["id"])
        return len(rows)

    async def append_journal(self, metastore_id: str, schema: str, table: str, rows: list[dict]) -> None:
        """Rows of a journal table (maintenance runs, monitor alerts); nothing when the tables are off."""
        if not rows or not await self._enabled(metastore_id):
            return
        location = await self.location(metastore_id, schema, table)
        await asyncio.to_thread(_append, location, pa.Table.from_pylist(rows, schema=TABLES[schema][table][1]))

    async def _readers(self, metastore_id: str, index) -> list[str]:
        """The principals information_schema has rows for: every owner and grantee of the metastore, and
        the members of those that are groups (transitively), at most MAX_PRINCIPALS."""
        named = {o for o in index.owner.values() if o} | {p for g in index.grants.values() for p in g}
        if index.root_owner:
            named.add(index.root_owner)
        named.discard(SYSTEM_PRINCIPAL)
        principals = self.shard.store.principals
        seen, todo, out = set(), sorted(named), []
        while todo and len(out) < MAX_PRINCIPALS:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            info = await principals.get_by_name(name)
            if info is None:
                continue
            if info.kind == "group":
                todo.extend(m.name for m in (await principals.members([info.id])).get(info.id, []))
            else:
                out.append(name)
        return sorted(out)

    async def _information_rows(self, metastore_id: str) -> dict[str, list[dict]]:
        store = self.shard.store
        index = await privilege_index(self.shard, metastore_id)
        kinds = {k: [a for a in await store.assets_of_type(metastore_id, k)] for k in
                 ("catalog", "schema", "table", "volume")}
        out: dict[str, list[dict]] = {name: [] for name in TABLES[INFORMATION_SCHEMA]}
        for reader in await self._readers(metastore_id, index):
            principals, is_admin = await self.subjects.of(reader)
            who = Caller(reader, 0, is_admin, 0, metastore_id, groups=principals - {reader}, trusted_engine=True)
            authz = Authz(who, index, principals, is_account_admin=is_admin, subject=reader)
            seen = {k: [a for a in assets if authz.sees(k, a)] for k, assets in kinds.items()}
            for a in seen["catalog"]:
                out["catalogs"].append({"visible_to": reader, "catalog_name": a.full_name,
                                        "catalog_owner": a.info.get("owner"), "comment": a.info.get("comment"),
                                        "created": _ts(a.info.get("created_at"))})
            for a in seen["schema"]:
                catalog, schema = a.full_name.split(".")
                out["schemata"].append({"visible_to": reader, "catalog_name": catalog, "schema_name": schema,
                                        "schema_owner": a.info.get("owner"), "comment": a.info.get("comment"),
                                        "created": _ts(a.info.get("created_at"))})
            for a in seen["table"]:
                catalog, schema, name = a.full_name.split(".")
                where = {"visible_to": reader, "table_catalog": catalog, "table_schema": schema, "table_name": name}
                out["tables"].append({**where, "table_type": a.info.get("table_type"),
                                      "data_source_format": a.info.get("data_source_format"),
                                      "table_owner": a.info.get("owner"), "comment": a.info.get("comment"),
                                      "created": _ts(a.info.get("created_at"))})
                for i, c in enumerate(a.info.get("columns") or []):
                    out["columns"].append({**where, "column_name": c.get("name"),
                                           "ordinal_position": c.get("position", i),
                                           "data_type": c.get("type_text") or c.get("type_name"),
                                           "is_nullable": "NO" if c.get("nullable") is False else "YES",
                                           "comment": c.get("comment")})
                if a.info.get("view_definition"):
                    out["views"].append({**where, "view_definition": a.info["view_definition"]})
            for a in seen["volume"]:
                catalog, schema, name = a.full_name.split(".")
                out["volumes"].append({"visible_to": reader, "volume_catalog": catalog, "volume_schema": schema,
                                       "volume_name": name, "volume_type": a.info.get("volume_type"),
                                       "volume_owner": a.info.get("owner"),
                                       "storage_location": a.info.get("storage_location"),
                                       "comment": a.info.get("comment")})
            for kind, assets in seen.items():
                for a in assets:
                    n = index.find(a.id)
                    for grantee, privileges in sorted((index.grants.get(n) or {}).items()):
                        out["privileges"].extend({"visible_to": reader, "grantee": grantee,
                                                  "securable_type": kind.upper(), "securable_name": a.full_name,
                                                  "privilege_type": p} for p in sorted(privileges))
        return out

    async def status(self, caller: Caller) -> dict:
        if not (await authorizer(self.shard, caller)).admin:
            raise denied("Only account admins and metastore admins may see the system tables' state.")
        ms = caller.metastore()
        return {"enabled": await self._enabled(ms), "refresh_seconds": REFRESH_SECONDS,
                "last_refresh": self.refreshed.get(ms)}

    async def refresh_now(self, caller: Caller) -> dict:
        if not (await authorizer(self.shard, caller)).admin:
            raise denied("Only account admins and metastore admins may refresh the system tables.")
        ms = caller.metastore()
        if not await self._enabled(ms):
            raise CatalogError("FAILED_PRECONDITION", "The system tables are not enabled in this metastore: "
                                                      "POST /shardcat/system-tables first.")
        return await self.refresh(ms)


def one_per_shard(services: dict, shard: Shard, make):
    """The shard's one service of a kind (kept in `services`, made by `make()` the first time): the
    system tables' keeper, maintenance and monitors each run once per shard, whichever app asks."""
    found = services.get(id(shard))
    if found is None or found.shard is not shard:
        found = services[id(shard)] = make()
    return found


_KEEPERS: dict[int, SystemTables] = {}


def keeper(shard: Shard, catalogs: CatalogService) -> SystemTables:
    """The shard's one keeper (maintenance and monitors append to it too)."""
    return one_per_shard(_KEEPERS, shard, lambda: SystemTables(shard, catalogs))


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    tables = keeper(serving.shard, serving.catalogs)

    async def enable(request):
        await json_body(request)         # {} or nothing: a malformed body is still a 400
        return ok(await tables.enable(request["caller"]))

    async def refresh(request):
        return ok(await tables.refresh_now(request["caller"]))

    async def status(request):
        return ok(await tables.status(request["caller"]))

    return {"enableSystemTables": enable, "refreshSystemTables": refresh, "getSystemTables": status}
