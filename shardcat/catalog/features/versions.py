"""Versioned metadata for users: reads at a past version, an asset's history, undrop and purge,
and the retention window with its background purge (docs/versions.md).

Every metastore write keeps the states it replaces or deletes (store/history.py, written in the
write's own transaction). A read endpoint listed in `AT_VERSION_READS` answers as of a version
when asked `?as_of_version=N` or `?as_of_timestamp=<ms>`: `versions_middleware` checks the version
is inside the retention window and says so in the request's session (shards/session.py
`reading_at`, `Session.read_at`); the shard's reads then come
from the history and governance decides with today's grants over the assets as they were. Reads
of the present take none of these paths.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid

from aiohttp import web

from ...auth import Caller
from ...entities.asset import Asset
from ...entities.names import full_name_key
from ...entities.types import TYPES
from ...entities.urls import local_path, url_segments
from ...entities.values import now_ms
from ...errors import CatalogError, already_exists, invalid, not_found
from ...governance.authorize import authorizer, is_metastore_admin, present_table
from ...shards.session import reading_at
from ...shards.shard import MetastoreState, Shard
from ...store import history
from ...store.writes import WriteTx
from ...store.history import PastRead
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ...web.wire import AS_OF_VERSION_HEADER, PREFIX
from ..tree.assets import render

log = logging.getLogger(__name__)

AS_OF_VERSION = "as_of_version"
AS_OF_TIMESTAMP = "as_of_timestamp"
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600
RETENTION_SETTING = "history_retention_seconds"      # in the metastore's info
# The background purge: how often, and at most how many history rows per metastore per round.
PURGE_EVERY_SECONDS = float(os.environ.get("SHARDCAT_HISTORY_PURGE_SECONDS", "60"))
PURGE_BATCH = 5000
# What may be undropped (a view is a table of type VIEW).
UNDROPPABLE = ("catalog", "schema", "table", "volume")

# The reads that answer at a past version: (method, path under the API prefix).
_CRUD_READS = [("GET", f"/{p}") for p in ("catalogs", "schemas", "tables", "volumes", "functions", "models",
                                          "credentials", "storage-credentials", "external-locations")]
_CRUD_READS += [("GET", p) for p in ("/catalogs/{name}", "/schemas/{full_name}", "/tables/{full_name}",
                                     "/volumes/{name}", "/functions/{name}", "/models/{full_name}",
                                     "/credentials/{name}", "/storage-credentials/{name}",
                                     "/external-locations/{name}")]
AT_VERSION_READS = frozenset((m, PREFIX + p) for m, p in [*_CRUD_READS, ("POST", "/resolve"),
                                                          ("GET", "/shardcat/search")])


def retention_ms(info: dict | None) -> int:
    value = (info or {}).get(RETENTION_SETTING)
    return int(value if isinstance(value, int) and value >= 0 else DEFAULT_RETENTION_SECONDS) * 1000


def _int_param(query, name: str) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise invalid(f"Query parameter '{name}' must be an integer, got '{raw:.40}'.") from None
    if not 0 <= value < 1 << 62:
        raise invalid(f"Query parameter '{name}' must be a non-negative integer below 2^62.")
    return value


async def version_asked(shard: Shard, caller: Caller, version: int | None, timestamp: int | None) -> int:
    """The metastore version a read asks for, if the retention window still holds it; else a clear 400."""
    if version is not None and timestamp is not None:
        raise invalid(f"Give either '{AS_OF_VERSION}' or '{AS_OF_TIMESTAMP}', not both.")
    for name, value in ((AS_OF_VERSION, version), (AS_OF_TIMESTAMP, timestamp)):
        if value is not None and not 0 <= value < 1 << 62:
            raise invalid(f"'{name}' must be a non-negative integer below 2^62.")
    ms = caller.metastore()
    meta = await shard.store.get_metastore(ms)
    if meta is None:
        raise not_found(f"Metastore '{ms}' does not exist.")
    window = retention_ms(meta.info)
    now = now_ms()
    if timestamp is not None:
        if timestamp > now:
            raise invalid(f"'{AS_OF_TIMESTAMP}' {timestamp} is in the future (now is {now}).")
        if timestamp < now - window:
            raise invalid(f"'{AS_OF_TIMESTAMP}' {timestamp} is older than the metastore's retention window of "
                          f"{window // 1000} s.")
    bounds = await history.version_bounds(shard.store, ms, version, timestamp)
    version = bounds["version"]
    if version > bounds["current"]:
        raise invalid(f"'{AS_OF_VERSION}' {version} is in the future: the metastore is at version "
                      f"{bounds['current']}.")
    if not bounds["pinned"] and (version < bounds["purged_below"] or
                                 bounds["ended_at"] is not None and bounds["ended_at"] < now - window):
        raise invalid(f"Version {version} is older than the metastore's retention window of {window // 1000} s "
                      "(and no snapshot pins it).")
    return version


def versions_middleware(shard: Shard):
    """Answers a read at a past version: the request's session reads at it (shards/session.py)."""

    @web.middleware
    async def middleware(request: web.Request, handler):
        caller = request.get("caller")
        if caller is None:
            return await handler(request)
        query = request.query
        if AS_OF_VERSION not in query and AS_OF_TIMESTAMP not in query:
            return await handler(request)
        route = request.match_info.route.resource
        key = (request.method, route.canonical if route is not None else request.path)
        if key not in AT_VERSION_READS:
            raise invalid(f"{request.method} {key[1]} is not answered at a past version; "
                          f"'{AS_OF_VERSION}' and '{AS_OF_TIMESTAMP}' are for gets, lists, resolve and search "
                          "(docs/versions.md).")
        version = await version_asked(shard, caller, _int_param(query, AS_OF_VERSION),
                                      _int_param(query, AS_OF_TIMESTAMP))
        with reading_at(PastRead(version)):
            response = await handler(request)
        response.headers[AS_OF_VERSION_HEADER] = str(version)
        return response

    return middleware


def _securable(securable_type: str):
    t = TYPES.get(securable_type.lower())
    if t is None or t.name == "staging_table":
        raise invalid(f"Unknown securable type '{securable_type:.40}'.")
    return t


def _last_current(state: dict) -> int:
    """The last version at which a kept state of an asset was current."""
    return state["asset"].written_at if state["replaced_at"] is None else state["replaced_at"] - 1


def _shown(caller: Caller, asset: Asset) -> dict:
    out = render(asset)
    return present_table(caller, out) if asset.type == "table" else out


class VersionService:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    # ---- history of one asset ---------------------------------------------------------------

    async def history(self, caller: Caller, securable_type: str, full_name: str) -> dict:
        """Every kept state of the assets that had this name, oldest first, with who wrote it and
        when: of each asset the caller may read as of when it was last current (`_readable`); the
        others are left out, as if they never had the name."""
        t = _securable(securable_type)
        key = full_name_key(full_name, t.name_parts, t.name)
        ms = caller.metastore()
        await self.shard.state(ms, caller.min_version, paths=False)     # caught up; no path asked
        states = await history.asset_states(self.store, ms, t.namespace, key)
        missing = not_found(f"{t.name.replace('_', ' ').capitalize()} '{full_name}' has no history.")
        states = [s for s in states if s["asset"].type == t.name or t.name == "table"]
        if states:
            readable = await self._readable(caller, states)
            states = [s for s in states if s["asset"].id in readable]
        if not states:
            raise missing
        versions = []
        for s in states:
            a = s["asset"]
            entry = {"version": a.written_at, "id": a.id, "changed_by": s["principal"], "changed_at": s["at"],
                     "asset": _shown(caller, a)}
            if s["replaced_at"] is not None:
                entry["replaced_at_version"] = s["replaced_at"]
                if s["dropped"]:
                    entry["dropped"] = True
                    entry["dropped_by"] = s["ended_by"]
                    entry["dropped_at"] = s["ended_at"]
            versions.append(entry)
        return {"securable_type": t.name.upper(), "full_name": key, "versions": versions}

    async def _readable(self, caller: Caller, states: list[dict]) -> set[str]:
        """The ids of the assets among `states` (a name's history, oldest first) that the caller may
        read as of when each was last current: today's grants and owners over the asset and its
        ancestors as they were then, the rule of every read at a past version. A name reused by
        someone else thus shows no one the dropped asset they could not read (its owner, comment,
        properties); an asset under a schema dropped and made again gains nothing from the new
        schema's owner. The newest asset, if the caller sees it but may not read it, is a 403, as a
        read of it is; one it may not see is left out as the others are."""
        lasts = list({s["asset"].id: s for s in states}.values())[::-1]     # each asset's last state, newest first
        newest = states[-1]["asset"]
        past = PastRead(_last_current(states[-1]))
        for s in lasts:       # each asset's ancestors as they were then, in one set the decisions read
            await history.with_ancestors(self.store, caller.metastore(), PastRead(_last_current(s), past.seen),
                                         [s["asset"]])
        with reading_at(past):
            authz = await authorizer(self.shard, caller)
            readable = {s["asset"].id for s in lasts if authz.decide(s["asset"].type, "read", s["asset"]).allowed}
            if newest.id not in readable and authz.sees(newest.type, newest):
                authz.require(newest.type, "read", newest)
        return readable

    # ---- the retention window -----------------------------------------------------------------

    async def settings(self, caller: Caller) -> dict:
        meta = await self.store.get_metastore(caller.metastore())
        if meta is None:
            raise not_found(f"Metastore '{caller.metastore()}' does not exist.")
        return {"retention_seconds": retention_ms(meta.info) // 1000}

    async def update_settings(self, caller: Caller, body: dict) -> dict:
        seconds = body.get("retention_seconds")
        if not isinstance(seconds, int) or isinstance(seconds, bool) or not 0 <= seconds <= 10 * 365 * 86400:
            raise invalid("Field 'retention_seconds' must be an integer from 0 to 315360000 (ten years).")
        await self._require_admin(caller)

        async def write(tx: WriteTx, state: MetastoreState):
            name, info = await history.metastore_record(tx)
            await tx.update_metastore({**info, RETENTION_SETTING: seconds}, name)

        await self.shard.write(caller.metastore(), write)
        return {"retention_seconds": seconds}

    async def _require_admin(self, caller: Caller) -> None:
        if caller.is_account_admin:
            return
        meta = await self.store.get_metastore(caller.metastore())
        if meta is None or not is_metastore_admin(caller, meta):
            raise CatalogError("PERMISSION_DENIED", f"Principal '{caller.name}' is not a metastore admin.")

    async def _window_start(self, ms: str) -> int:
        """The first version whose write is inside the retention window."""
        meta = await self.store.get_metastore(ms)
        return await history.first_version_since(self.store, ms, now_ms() - retention_ms(meta.info if meta else None))

    # ---- dropped assets -------------------------------------------------------------------------

    async def list_dropped(self, caller: Caller, securable_type: str | None) -> dict:
        """Dropped assets still recoverable (inside the window), newest drop first: admins see all,
        others those they owned."""
        types = [_securable(securable_type).name] if securable_type else list(UNDROPPABLE)
        if any(t not in UNDROPPABLE for t in types):
            raise invalid(f"Only {', '.join(t.upper() for t in UNDROPPABLE)} can be undropped.")
        ms = caller.metastore()
        await self.shard.state(ms, caller.min_version, paths=False)     # caught up; no path asked
        since = await self._window_start(ms)
        found = await history.dropped(self.store, ms, types, since=since)
        admin = await self._is_admin(caller)
        return {"dropped": [self._dropped(caller, d) for d in found
                            if admin or d["asset"].info.get("owner") in caller.principals]}

    def _dropped(self, caller: Caller, d: dict) -> dict:
        a = d["asset"]
        return {"id": a.id, "securable_type": a.type.upper(), "full_name": a.full_name,
                "dropped_at_version": d["dropped_at_version"], "dropped_by": d["dropped_by"],
                "dropped_at": d["dropped_at"], "asset": _shown(caller, a)}

    async def _is_admin(self, caller: Caller) -> bool:
        try:
            await self._require_admin(caller)
            return True
        except CatalogError:
            return False

    async def _find_dropped(self, caller: Caller, asset_id: str) -> dict:
        try:
            asset_id = str(uuid.UUID(asset_id))
        except ValueError:
            raise not_found(f"No dropped asset with id '{asset_id:.40}'.") from None
        ms = caller.metastore()
        await self.shard.state(ms, caller.min_version, paths=False)     # caught up (undrop asks paths in its write)
        found = await history.dropped(self.store, ms, list(UNDROPPABLE), since=0, asset_id=asset_id)
        if not found or not (await self._is_admin(caller) or found[0]["asset"].info.get("owner") in caller.principals):
            raise not_found(f"No dropped asset with id '{asset_id}'.")
        return found[0]

    async def undrop(self, caller: Caller, asset_id: str) -> dict:
        """Put a dropped asset back as it was, with its grants, and (a schema or catalog) what the
        same drop deleted below it; in one metastore write. Its names must be free (else 409) and
        its parent must exist."""
        d = await self._find_dropped(caller, asset_id)
        asset = d["asset"]
        if d["dropped_at_version"] < await self._window_start(caller.metastore()):
            raise invalid(f"{asset.type.capitalize()} '{asset.full_name}' was dropped at version "
                          f"{d['dropped_at_version']}, before the retention window: it can no longer be undropped.")

        async def write(tx: WriteTx, state: MetastoreState):
            if await tx.get_by_id(asset.id) is not None:
                raise already_exists(f"{asset.type.capitalize()} '{asset.full_name}' exists already.")
            if asset.parent_id != state.id and await tx.get_by_id(asset.parent_id) is None:
                raise CatalogError("FAILED_PRECONDITION", f"The container of '{asset.full_name}' does not exist "
                                                          "now: undrop it first.")
            below = await history.dropped_with(tx, state.id, d["dropped_at_version"], [asset.id])
            items = [{"asset": asset, "grants": d["grants"]}, *below]
            for item in items:
                a = item["asset"]
                if await tx.get(a.namespace, a.full_name) is not None:
                    raise already_exists(f"Cannot undrop: {a.type.replace('_', ' ')} '{a.full_name}' exists now.")
                if a.storage_path and a.type != "external_location":
                    managed = a.type in ("catalog", "schema") or "MANAGED" in (
                        a.info.get("table_type"), a.info.get("volume_type")) or a.type == "staging_table"
                    hit = state.trie.first_overlap(a.storage_path, ignore=(lambda o: o.is_root) if managed else None)
                    if hit is not None:
                        raise already_exists(f"Cannot undrop '{a.full_name}': its storage '{a.storage_path}' overlaps "
                                             f"{hit[1].type} '{hit[1].full_name}'.")
            for item in items:
                await tx.put(item["asset"])
                await history.restore_grants(tx, item["asset"], item["grants"])
            return len(items)

        restored = await self.shard.write(caller.metastore(), write)
        return {"id": asset.id, "securable_type": asset.type.upper(), "full_name": asset.full_name,
                "restored": restored}

    async def purge(self, caller: Caller, asset_id: str) -> dict:
        """Forget a dropped asset now: its history (and what the same drop deleted below it), its
        Delta commits, and the files of managed storage no shallow clone still references."""
        d = await self._find_dropped(caller, asset_id)
        ms = caller.metastore()
        gone = await history.purge_dropped(self.store, ms, d["asset"].id, d["dropped_at_version"])
        deleted, kept = await delete_storage(self.store, gone, managed=True)
        return {"id": d["asset"].id, "purged": len(gone), "storage_deleted": deleted,
                "storage_kept_for_clones": kept}


def catalog_allocated(a: Asset) -> bool:
    """Whether a table's or volume's storage is what the catalog allocated for it: MANAGED, at
    `<managed root>/tables/<its id>` (`volumes/` for a volume). The only storage ever deleted:
    an EXTERNAL asset's folder is someone's data, however it was dropped."""
    kind = a.info.get("table_type") if a.type == "table" else a.info.get("volume_type")
    return kind == "MANAGED" and bool(a.storage_path) and url_segments(a.storage_path)[-2:] == (f"{a.type}s", a.id)


async def delete_storage(store, assets: list[Asset], *, managed: bool) -> tuple[list[str], list[str]]:
    """Delete the local files of purged assets whose storage the catalog allocated: every one with
    `managed` (an explicit purge), else those whose drop asked for it (Iceberg's purgeRequested);
    never while a shallow clone references it, never an external one. Returns (deleted urls, urls
    kept for clones)."""
    doomed = {}
    for a in assets:
        if a.type in ("table", "volume") and catalog_allocated(a) and (managed or a.info.get("purge_requested")):
            doomed[a.id] = a.storage_path
    if not doomed:
        return [], []
    referenced = await history.clone_references(store, assets[0].metastore_id, list(doomed))
    deleted, kept = [], []
    for asset_id, url in doomed.items():
        if asset_id in referenced:
            kept.append(url)
            continue
        if url.startswith("file:"):
            await asyncio.to_thread(shutil.rmtree, local_path(url), True)
            deleted.append(url)
    return deleted, kept


async def purge_round(shard: Shard) -> int:
    """One round of the background purge over the metastores this shard serves: at most
    PURGE_BATCH history rows each, older than its window and pinned by no snapshot."""
    total = 0
    for ms in list(shard.states):
        try:
            meta = await shard.store.get_metastore(ms)
            if meta is None:
                continue
            count, gone = await history.purge_expired(shard.store, ms, now_ms() - retention_ms(meta.info), PURGE_BATCH)
            total += count
            await delete_storage(shard.store, [g["asset"] for g in gone], managed=False)
        except Exception:       # the next round tries again; one metastore must not stop the others
            log.exception("history purge of metastore %s failed", ms)
    return total


def start_purging(shard: Shard):
    """The background purge as an app's startup and cleanup hooks."""
    task: list[asyncio.Task] = []

    async def loop():
        while True:
            await asyncio.sleep(PURGE_EVERY_SECONDS)
            await purge_round(shard)

    async def start(app):
        task.append(asyncio.create_task(loop()))

    async def stop(app):
        for t in task:
            t.cancel()

    return start, stop


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = VersionService(shard)

    async def get_history(request):
        return ok(await service.history(request["caller"], request.match_info["securable_type"],
                                        request.match_info["full_name"]))

    async def get_settings(request):
        return ok(await service.settings(request["caller"]))

    async def update_settings(request):
        return ok(await service.update_settings(request["caller"], await json_body(request)))

    async def list_dropped(request):
        return ok(await service.list_dropped(request["caller"], request.query.get("securable_type")))

    async def undrop(request):
        return ok(await service.undrop(request["caller"], request.match_info["id"]))

    async def purge(request):
        return ok(await service.purge(request["caller"], request.match_info["id"]))

    return {"getAssetHistory": get_history, "getVersionSettings": get_settings,
            "updateVersionSettings": update_settings, "listDroppedAssets": list_dropped, "undropAsset": undrop,
            "purgeDroppedAsset": purge}
