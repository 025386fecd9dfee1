"""Foreign catalogs: a connection's catalog mounted in shardcat, its schemas and tables mirrored as shardcat's own assets.

`POST /catalogs` with `connection_name` and `options` mounts one (containers.py checks it). Its
schemas and tables are answered from the foreign system (foreign_systems.py) and kept as
ordinary assets of the metastore, marked `info.foreign`: so grants, ownership, row filters and masks,
tags, ABAC, audit, lineage, search, path queries and the one-asset-per-path rule govern them exactly
as native ones, and every engine API that reads a table reads them (the shard's multi-version cache
serves them like any asset).

Freshness, per scope (a catalog's schemas, a schema's tables, one table), in this shard's memory:
a scope fetched less than half the catalog's time-to-live ago (`cache_ttl_seconds`, default 300)
is served as it is; older, it is still served while a background task fetches it again; past the
time-to-live a read waits for the fetch, and if the foreign system cannot be reached it fails with
503 naming the connection. So a foreign system that stops is served stale for at most the TTL.
A scope this shard never fetched (after a restart, on another shard) is fetched on first read.
`POST /shardcat/foreign-catalogs/{name}/refresh` fetches a catalog (or one schema) at once.

A fetch writes only what changed, in one metastore write: new schemas and tables, changed ones (a
table keeps shardcat's own governance: owner, row filter, tags and masks of the columns that stay),
and the ones gone upstream deleted with their grants. A foreign table's storage location becomes
its storage path unless another asset owns that path (then it has none, and says why).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref

from ...auth import Caller
from ...entities.asset import Asset
from ...entities.columns import carry_governance
from ...entities.foreign import is_foreign_catalog
from ...entities.names import check_name
from ...entities.types import SCHEMA, TABLE
from ...entities.urls import InvalidUrl, is_within, normalize_url
from ...entities.values import now_ms
from ...errors import CatalogError, invalid
from ...governance.authorize import Authz, authorizer, denied
from ...governance.grants import Subjects
from ...governance.index import privilege_index
from ...shards.locations import location_of
from ...shards.shard import Shard
from ...store.sealing import secret_options
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from .foreign_systems import SYSTEMS, Unreachable

log = logging.getLogger(__name__)

DEFAULT_TTL = 300.0
_BY_SHARD: "weakref.WeakKeyDictionary[Shard, Federation]" = weakref.WeakKeyDictionary()
MIN_TTL, MAX_TTL = 1.0, 86400.0
# What the mirror writes itself; shardcat's own governance of an asset (owner, grants, tags, row
# filter, masks) is never among them.
MIRRORED = ("comment", "properties", "table_type", "data_source_format", "columns", "storage_location",
            "view_definition", "foreign")


def ttl_of(catalog: Asset) -> float:
    try:
        ttl = float((catalog.info.get("options") or {}).get("cache_ttl_seconds", DEFAULT_TTL))
    except ValueError:
        return DEFAULT_TTL
    return min(max(ttl, MIN_TTL), MAX_TTL)


def check_catalog_options(connection_type: str, options: dict) -> dict:
    """A foreign catalog's options for a connection of that type, checked."""
    if connection_type not in SYSTEMS:
        raise CatalogError("FAILED_PRECONDITION",
                           f"Foreign catalogs of {connection_type} connections are not served yet; "
                           f"{', '.join(sorted(SYSTEMS))} are.")
    if connection_type == "UNITY_CATALOG" and not options.get("catalog"):
        raise invalid("A foreign catalog of a UNITY_CATALOG connection needs option 'catalog' (its name there).")
    if "cache_ttl_seconds" in options:
        try:
            ttl = float(options["cache_ttl_seconds"])
        except ValueError:
            ttl = -1
        if not MIN_TTL <= ttl <= MAX_TTL:
            raise invalid(f"Option 'cache_ttl_seconds' must be a number of seconds from {MIN_TTL:g} to {MAX_TTL:g}.")
    return options


def unreachable(connection: str, catalog: str, why: str) -> CatalogError:
    return CatalogError("TEMPORARILY_UNAVAILABLE",
                        f"The foreign system of connection '{connection}' (catalog '{catalog}') cannot be reached "
                        f"({why}); what shardcat kept of it is older than its cache_ttl_seconds.")


def _checked(name) -> str | None:
    try:
        return check_name(name, "foreign")
    except CatalogError:
        return None     # a name shardcat cannot hold (a period, a control character): not mirrored


def federation_of(shard: Shard) -> "Federation":
    """The shard's one Federation, whichever API reads (the UC API, the batched resolve, the Iceberg
    REST catalog, the UC Delta API): one record of what was fetched when, one fetch under way per
    scope, one set of allowed hosts. A service of its own per API would fetch again, without them."""
    federation = _BY_SHARD.get(shard)
    if federation is None:
        federation = _BY_SHARD[shard] = Federation(shard)
    return federation


class Federation:
    """The foreign catalogs of the metastores a shard owns: what was fetched when, the fetches under
    way, a client per connection. `allowed`: hosts reached although not public (web/destinations.py)."""

    def __init__(self, shard: Shard, allowed=frozenset()):
        self.shard = shard
        self.allowed = allowed
        self.fetched: dict[tuple, float] = {}      # (metastore, catalog id, scope) -> monotonic time
        self.running: dict[tuple, asyncio.Task] = {}
        self.systems: dict[tuple, object] = {}
        self.stats = {"fetches": 0, "failures": 0, "background": 0, "written": 0}
        self.subjects = Subjects(shard.store)       # who a foreign catalog's owner is (its storage rule)

    # ---- the read path's hook (tree/crud.py) --------------------------------------------------

    async def before_read(self, caller: Caller, type_name: str, key: str, listing: bool) -> None:
        """Make sure what a read of `key` (a schema or table, or the parent a list names) needs is
        fresh enough, if it lies in a foreign catalog the caller may see."""
        parts = key.split(".")
        ms = caller.metastore()
        catalog = await self.shard.lookup(ms, "catalog", parts[0], caller.min_version)
        if not is_foreign_catalog(catalog):
            return
        if not (await authorizer(self.shard, caller)).sees("catalog", catalog):
            return      # the read itself answers as for a missing catalog; nothing is fetched for it
        scopes = [("schemas",)]
        if type_name == "table" and len(parts) >= 2:
            scopes.append(("tables", parts[1]) if listing else ("table", parts[1], parts[2]))
        for scope in scopes:
            await self.fresh(ms, catalog, scope)

    async def fresh(self, ms: str, catalog: Asset, scope: tuple) -> None:
        key = (ms, catalog.id, scope)
        ttl = ttl_of(catalog)
        at = self.fetched.get(key)
        age = time.monotonic() - at if at is not None else None
        if age is not None and age < ttl / 2:
            return
        if age is not None and age < ttl:
            if key not in self.running:
                self.stats["background"] += 1
                self._start(key, ms, catalog, scope).add_done_callback(_quietly)
            return
        await self._wait(key, ms, catalog, scope)

    def _start(self, key, ms, catalog, scope) -> asyncio.Task:
        task = self.running.get(key)
        if task is None:
            task = asyncio.create_task(self._fetch(ms, catalog, scope))
            self.running[key] = task
            task.add_done_callback(lambda _: self.running.pop(key, None))
        return task

    async def _wait(self, key, ms, catalog, scope) -> None:
        try:
            await asyncio.shield(self._start(key, ms, catalog, scope))
        except Unreachable as e:
            raise unreachable(catalog.info.get("connection_name"), catalog.name, str(e)) from None

    # ---- fetching ---------------------------------------------------------------------------

    async def _connection(self, ms: str, catalog: Asset) -> Asset:
        name = catalog.info.get("connection_name")
        connection = await self.shard.lookup(ms, "connection", name or "")
        if connection is None:
            raise CatalogError("FAILED_PRECONDITION",
                               f"The connection '{name}' of foreign catalog '{catalog.name}' does not exist.")
        return connection

    def _system(self, connection: Asset, catalog: Asset):
        key = (connection.id, connection.written_at, catalog.id, catalog.written_at)
        system = self.systems.get(key)
        if system is None:
            options = dict(connection.info.get("options") or {})
            box = self.shard.store.secrets
            for k in secret_options(options):
                options[k] = box.open(options[k])
            kind = SYSTEMS.get(connection.info.get("connection_type"))
            if kind is None:
                raise CatalogError("FAILED_PRECONDITION", f"{connection.info.get('connection_type')} connections "
                                                          "are not read through yet.")
            system = kind(options, catalog.info.get("options") or {}, self.allowed)
            for old in [k for k in self.systems if k[2] == catalog.id]:
                asyncio.ensure_future(self.systems.pop(old).close())
            self.systems[key] = system
        return system

    async def _fetch(self, ms: str, catalog: Asset, scope: tuple) -> dict:
        """Fetch one scope from the foreign system and mirror it; counts of what it holds."""
        self.stats["fetches"] += 1
        connection = await self._connection(ms, catalog)
        system = self._system(connection, catalog)
        kind = scope[0]
        try:
            if kind == "schemas":
                found = await system.schemas()
                counted = await self._mirror_schemas(ms, catalog, connection, found)
            else:
                schema = await self.shard.lookup(ms, "schema", f"{catalog.name}.{scope[1]}")
                if schema is None:
                    counted = {"tables": 0}
                else:
                    remote = schema.info["foreign"]["name"]
                    if kind == "tables":
                        found = await system.tables(remote)
                    else:
                        one = await system.table(remote, scope[2])
                        found = [one] if one is not None else []
                    counted = await self._mirror_tables(ms, catalog, connection, schema, found,
                                                        only=scope[2] if kind == "table" else None)
        except Unreachable:
            self.stats["failures"] += 1
            raise
        now = time.monotonic()
        self.fetched[(ms, catalog.id, scope)] = now
        for name in counted.pop("complete", ()):
            self.fetched[(ms, catalog.id, ("table", scope[1], name))] = now
        return counted

    def _base(self, catalog: Asset, connection: Asset, remote: str, old: Asset | None) -> dict:
        now = now_ms()
        kept = {k: v for k, v in (old.info if old else {}).items() if k not in MIRRORED}
        by = f"connection:{connection.name}"
        return {"owner": catalog.info.get("owner"), "created_at": now, "created_by": by, **kept,
                "updated_at": now, "updated_by": by,
                "foreign": {"connection": connection.name, "name": remote}}

    async def _mirror_schemas(self, ms: str, catalog: Asset, connection: Asset, found: list[dict]) -> dict:
        have = {a.name: a for a in await self._children(ms, catalog.id, "schema")}
        want = {}
        for s in found:
            name = _checked(s.get("name"))
            if name is not None and name not in want:
                want[name] = s
        puts, news = [], []
        for name, s in want.items():
            old = have.get(name)
            info = {**self._base(catalog, connection, s["name"], old), "comment": s.get("comment"),
                    "properties": s.get("properties") or {}}
            info = {k: v for k, v in info.items() if v is not None}
            if old is not None and _same(old.info, info):
                continue
            asset = Asset(id=old.id if old else str(uuid.uuid4()), metastore_id=ms, type="schema",
                          namespace=SCHEMA.namespace, parent_id=catalog.id, name=name,
                          full_name=f"{catalog.name}.{name}", storage_path=None, info=info)
            (puts if old else news).append(asset)
        gone = [a for name, a in have.items() if name not in want]
        await self._write(ms, puts, news, gone, below=True)
        return {"schemas": len(want)}

    async def _mirror_tables(self, ms: str, catalog: Asset, connection: Asset, schema: Asset, found: list[dict],
                             only: str | None) -> dict:
        if only is not None:
            old = await self.shard.lookup(ms, "table", f"{schema.full_name}.{only}")
            have = {only: old} if old is not None else {}
        else:
            have = {a.name: a for a in await self._children(ms, schema.id, "table")}
        owner = await self._owner_of(ms, catalog)
        want, complete, paths = {}, [], []
        for t in found:
            name = _checked(t.get("name"))
            if name is None or name in want or (only is not None and name != only):
                continue
            want[name] = t
        # Their paths loaded on a cold owner (shards/path_waits.py); asked below with no await between.
        state = await self.shard.with_paths(ms, 0, sorted({p for t in want.values() if not t.get("partial")
                                                           and (p := _url_or_none(t.get("storage_location")))}),
                                           below=True, locations=True)
        puts, news = [], []
        for name, t in want.items():
            old = have.get(name)
            if t.get("partial"):
                if old is not None:
                    continue        # known in full already: its own scope refreshes it
                info = {**self._base(catalog, connection, t["name"], None), "table_type": "EXTERNAL",
                        "columns": []}
                info["foreign"]["partial"] = True
                path = None
            else:
                complete.append(name)
                info, path = self._table_info(catalog, connection, t, old, state, paths, owner)
            asset_id = old.id if old else str(uuid.uuid4())
            if old is not None and _same(old.info, info) and old.storage_path == path:
                continue
            asset = Asset(id=asset_id, metastore_id=ms, type="table", namespace=TABLE.namespace,
                          parent_id=schema.id, name=name, full_name=f"{schema.full_name}.{name}",
                          storage_path=path, info=info)
            (puts if old else news).append(asset)
        gone = [a for name, a in have.items() if name not in want]
        await self._write(ms, puts, news, gone, below=False)
        return {"tables": len(want), "complete": complete}

    async def _owner_of(self, ms: str, catalog: Asset) -> Authz:
        """The foreign catalog's owner's view of the metastore: a foreign table's storage is served only where
        its owner could register a native external table (by path as by name, docs/security.md)."""
        name = catalog.info.get("owner") or ""
        principals, is_admin = await self.subjects.of(name)
        index = None if is_admin else await privilege_index(self.shard, ms)
        who = Caller(name, 0, is_admin, 0, ms, groups=principals - {name})
        return Authz(who, index, principals, is_account_admin=is_admin, subject=name)

    def _table_info(self, catalog, connection, t: dict, old: Asset | None, state, paths: list,
                    owner: Authz) -> tuple[dict, str | None]:
        info = self._base(catalog, connection, t["name"], old)
        old_columns = (old.info.get("columns") or []) if old else []
        replaced = carry_governance(old_columns, t.get("columns") or [], (old.info.get("row_filter") if old else None))
        info.update({"table_type": t.get("table_type") or "EXTERNAL", "columns": replaced.columns,
                     "properties": t.get("properties") or {}})
        if replaced.row_filter is not None:
            info["row_filter"] = replaced.row_filter
        else:
            info.pop("row_filter", None)
        for k in ("data_source_format", "comment", "view_definition"):
            if t.get(k):
                info[k] = t[k]
        path = None
        location = t.get("storage_location")
        if location and info["table_type"] not in ("VIEW", "MATERIALIZED_VIEW"):
            try:
                path = normalize_url(location)
            except InvalidUrl:
                info["foreign"]["storage"] = "its storage location is not a URL shardcat reads"
            if path is not None:
                info["storage_location"] = path
                own = old.id if old else None
                hit = state.trie.first_overlap(path, ignore=lambda o: o.asset_id == own)
                if hit is None and any(is_within(path, p) or is_within(p, path) for p in paths):
                    hit = (path, None)
                why = _unusable(state, owner, path) if hit is None else None
                if hit is not None:
                    where = f"{hit[1].type} '{hit[1].full_name}'" if hit[1] is not None else "another foreign table"
                    info["foreign"]["storage"] = f"its storage location overlaps the storage of {where}: not served"
                    path = None
                elif why is not None:
                    info["foreign"]["storage"] = why
                    path = None
                else:
                    paths.append(path)
        # The catalog reads an Iceberg table's metadata file itself: only one inside the storage it serves.
        metadata = info["properties"].get(METADATA_LOCATION)
        if metadata is not None and not _inside(metadata, path):
            info["properties"] = {k: v for k, v in info["properties"].items() if k != METADATA_LOCATION}
            info["foreign"]["metadata"] = "its metadata_location lies outside its served storage: not read"
        return info, path

    async def _children(self, ms: str, parent_id: str, namespace: str) -> list[Asset]:
        out, after = [], ""
        while True:
            page = await self.shard.children(ms, parent_id, namespace, after=after, limit=5000)
            out += page
            if len(page) < 5000:
                return out
            after = page[-1].name

    async def _write(self, ms: str, puts: list[Asset], news: list[Asset], gone: list[Asset], *, below: bool) -> None:
        if not (puts or news or gone):
            return

        async def write(tx, state):
            doomed = list(gone)
            if below:
                for a in gone:
                    doomed += await tx.descendants(a.id)
            if doomed:
                await tx.delete(doomed)
            for a in puts:
                await tx.put(a)
            if news:
                await tx.insert_new(news)

        try:
            await self.shard.write(ms, write)
        except KeyError:
            # A name taken meanwhile (another shard mirrored it first): the next fetch sees it.
            log.info("foreign catalog mirror of %s: a name was taken meanwhile; fetched again next time", ms)
            return
        self.stats["written"] += len(puts) + len(news) + len(gone)

    # ---- refresh -----------------------------------------------------------------------------

    async def refresh(self, caller: Caller, name: str, body: dict) -> dict:
        """Fetch a foreign catalog (or one schema: `schema_name`) now: its schemas and their tables."""
        ms = caller.metastore()
        key = check_name(name, "catalog")
        catalog = await self.shard.lookup(ms, "catalog", key, caller.min_version)
        authz = await authorizer(self.shard, caller)
        missing = CatalogError("NOT_FOUND", f"Catalog '{key}' does not exist.")
        if catalog is None or not authz.sees("catalog", catalog):
            raise missing
        if not is_foreign_catalog(catalog):
            raise invalid(f"Catalog '{key}' is not a foreign catalog.")
        connection = await self._connection(ms, catalog)
        if not (authz.decide("catalog", "update", catalog).allowed
                or authz.decide("connection", "read_data", connection).allowed):
            raise denied(f"Principal '{caller.name}' may not refresh foreign catalog '{key}': that needs "
                         f"USE CONNECTION on connection '{connection.name}' or ownership of the catalog.")
        only = body.get("schema_name")
        if only is not None and not isinstance(only, str):
            raise invalid("Field 'schema_name' must be a string.")
        counted = {"schemas": 0, "tables": 0}
        try:
            counted["schemas"] = (await self._now(ms, catalog, ("schemas",)))["schemas"]
            schemas = [check_name(only, "schema")] if only else \
                [a.name for a in await self._children(ms, catalog.id, "schema")]
            for schema in schemas:
                counted["tables"] += (await self._now(ms, catalog, ("tables", schema)))["tables"]
        except Unreachable as e:
            raise unreachable(connection.name, catalog.name, str(e)) from None
        return {"catalog_name": catalog.name, "connection_name": connection.name, **counted}

    async def _now(self, ms, catalog, scope) -> dict:
        key = (ms, catalog.id, scope)
        task = self.running.get(key)
        if task is not None:
            await asyncio.shield(task)      # one under way may have started before a change upstream
        return await self._start(key, ms, catalog, scope)

    # ---- for the writes that pass through to a foreign system (foreign_writes.py) --------------------

    async def connection_of(self, ms: str, catalog: Asset) -> Asset:
        """The connection a foreign catalog is mounted through (FAILED_PRECONDITION when it is gone)."""
        return await self._connection(ms, catalog)

    def client_of(self, connection: Asset, catalog: Asset):
        """The foreign system's client for a catalog, with the connection's secrets opened."""
        return self._system(connection, catalog)

    async def fetch_table(self, ms: str, catalog: Asset, schema: str, name: str) -> None:
        """Fetch one table now, after a write to it. If the foreign system cannot be reached, when the
        table was last fetched is forgotten instead, so the next read fetches it (or says it cannot)."""
        scope = ("table", schema, name)
        try:
            await self._now(ms, catalog, scope)
        except Unreachable:
            self.fetched.pop((ms, catalog.id, scope), None)


METADATA_LOCATION = "metadata_location"      # iceberg/metadata.py's name for the pointer


def _unusable(state, owner: Authz, path: str) -> str | None:
    """Why a foreign table's storage is not served though no asset holds it: outside every external location
    of a metastore that has some, or in one where the catalog's owner may not create external tables."""
    if len(state.locations) and location_of(state, path) is None:
        return "its storage location lies in no external location: not served"
    probe = Asset(id="", metastore_id=state.id, type="table", namespace=TABLE.namespace, parent_id="", name="",
                  full_name="", storage_path=path, info={"table_type": "EXTERNAL"})
    try:
        owner.require_storage(state, probe)
    except CatalogError:
        return ("the catalog's owner may not create external tables at its storage location (CREATE EXTERNAL "
                "TABLE on its external location): not served")
    return None


def _url_or_none(location) -> str | None:
    try:
        return normalize_url(location) if location and isinstance(location, str) else None
    except InvalidUrl:
        return None


def _inside(url: str, path: str | None) -> bool:
    try:
        return path is not None and is_within(normalize_url(url), path)
    except InvalidUrl:
        return False


def _same(old: dict, new: dict) -> bool:
    skip = ("updated_at", "updated_by", "created_at", "created_by")
    return {k: v for k, v in old.items() if k not in skip} == {k: v for k, v in new.items() if k not in skip}


def _quietly(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.info("a background fetch of a foreign catalog failed: %s", type(task.exception()).__name__)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handler in the shard app by operationId (web/registry.py declares its path)."""
    federation = serving.catalogs.federation
    federation.allowed = serving.webhook_allow_hosts     # the hosts reached although not public

    async def refresh(request):
        body = await json_body(request) if request.can_read_body else {}
        return ok(await federation.refresh(request["caller"], request.match_info["name"], body))

    return {"refreshForeignCatalog": refresh}
