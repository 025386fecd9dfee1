"""Path queries: `POST /shardcat/query` runs a query (entities/pathquery/, docs/queries.md) over one
snapshot of the caller's metastore, as the caller may see it, a page at a time within a bound on work.

The snapshot is the metastore at one version: the listings the query walks are read at that
version from the shard's multi-version cache, or from PostgreSQL when the cache cannot answer
(a listing read at a later version is the same listing when no change since touched its
parent: the change log says). The grants it tests are the privilege index's at that version,
copied when the snapshot is made. A shard holds a few snapshots (`HELD`, `HELD_ASSETS` in all,
for `HOLD_SECONDS`) with the listings read so far, so that the next pages (their token names the
version) read the same state however the metastore moved on. A listing changed since, or a token whose
snapshot is no longer held, is read from the metastore's history (store/history.py,
docs/versions.md) while the retention window holds the version (a snapshot made again has
today's grants: the history keeps no past grants); past the window a token is a 400
FAILED_PRECONDITION: run the query again.

A run stops where it needs a listing the snapshot and the cache lack (`Unread`): the service reads
it (with the same listing of the next few siblings) and goes on from there. A request reads at most
`MAX_LOADED` assets from PostgreSQL: past it the page ends early, with a token (a cold query over a
large metastore takes a few requests, each of bounded length). What the query reads is not put in
the shard's cache: one query over 100,000 tables must not push out the hot set.

What the caller may see is decided by today's grants (governance/authorize.py, the rule of the
list endpoints): a node it may not list does not exist for the query, at any level and inside
`exists(...)` too; an asset's grants show only where the caller may read the asset (the
permissions API's rule). A request visits at most `max_nodes` nodes (default and most
`MAX_NODES`): past it the page ends at the last node done, with a token to go on; a single node
whose filter alone visits more is a 400.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field


from ...auth import Caller
from ...cache.metastore_cache import MISS
from ...entities.pathquery import OverBudget, Page, Plan, Unread, describe, parse, run, valid_cursor
from ...errors import CatalogError, invalid
from ...governance.authorize import Authz, authorizer
from ...governance.index import privilege_index
from ...shards.shard import RECONCILE_GAP, Shard
from ...store import history
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ...web.paging import decode_token, encode_token, page_size
from .versions import version_asked

MAX_NODES = 100_000      # nodes one request may visit
HELD = 8                 # snapshots a shard holds for the next pages of queries
HELD_ASSETS = 250_000    # ... holding at most this many listed assets in all (the newest is kept whole)
HOLD_SECONDS = 600.0
LOAD_PARALLEL = 8        # listings read from PostgreSQL at once
PREFETCH = 16            # a listing missed, the same listings of that many next siblings are read with it
MAX_LOADED = 20_000      # assets one request reads from PostgreSQL (past it, the page ends early)
MAX_ROUNDS = 2_000       # reads of listings in one request
_TOKEN_KEY = "query_page"


class _Moved(Exception):
    """A listing the snapshot lacks changed in PostgreSQL since the snapshot's version."""


@dataclass
class QuerySnapshot:
    """A metastore at one version, as far as queries have read it."""
    metastore_id: str
    version: int
    grants: dict                                    # securable id -> {principal: privileges}
    listings: dict = field(default_factory=dict)    # (parent id, namespace) -> assets sorted by name
    touched: set = field(default_factory=set)       # parents changed in (version, touched_to]
    touched_to: int = -1
    size: int = 0                                   # assets in its listings
    made: float = 0.0


class _CallerTree:
    """The caller's view of a snapshot (entities/pathquery/'s Tree); a listing neither the snapshot
    nor the shard's cache has at the snapshot's version raises `Unread`."""

    def __init__(self, snap: QuerySnapshot, cache, authz: Authz, kinds: dict[str, str]):
        self.snap, self.cache, self.authz, self.kinds = snap, cache, authz, kinds
        self._seen: dict[tuple[str, str], list] = {}

    def children(self, parent, namespace: str) -> list:
        key = (parent.id if parent is not None else self.snap.metastore_id, namespace)
        seen = self._seen.get(key)
        if seen is not None:
            return seen
        listed = self.snap.listings.get(key)
        if listed is None:
            listed = _from_cache(self.snap, self.cache, key)
        if listed is None:
            raise Unread(parent, namespace)
        visible = self.authz.visible_under_id(namespace, None if parent is None else parent.id)
        if visible is not None:
            find = self.authz.index.find
            listed = [a for a in listed if (n := find(a.id)) is not None and n in visible]
        self._seen[key] = listed
        return listed

    def grants(self, asset) -> dict:
        return self.snap.grants.get(asset.id, {}) if self.authz.may_read_known(asset) else {}

    def owner_kind(self, principal: str | None) -> str | None:
        return None if principal is None else self.kinds.get(principal, "user")


def _from_cache(snap: QuerySnapshot, cache, key: tuple[str, str]) -> list | None:
    """A listing at the snapshot's version from the shard's cache (kept in the snapshot), or None."""
    if cache is None:
        return None
    hit = cache.children(key[0], key[1], snap.version)
    if hit is MISS:
        return None
    listed = snap.listings[key] = sorted(hit, key=lambda a: a.name)
    snap.size += len(listed)
    return listed


def _digest(plan: Plan) -> str:
    return hashlib.sha256(plan.text.encode()).hexdigest()[:16]


def _decode(token, plan: Plan) -> tuple[int, list]:
    if not isinstance(token, str):
        raise invalid("Field 'page_token' must be a string: the next_page_token of a previous answer.")
    value = decode_token(token, _TOKEN_KEY, lambda v: isinstance(v, dict) and type(v.get("v")) is int
                         and isinstance(v.get("q"), str) and valid_cursor(v.get("after"), plan))
    if value["q"] != _digest(plan):
        raise invalid("The page_token belongs to another query: send the same query with it.")
    return value["v"], value["after"]


def _max_nodes(value) -> int:
    if value is None:
        return MAX_NODES
    if type(value) is not int or not 1 <= value <= MAX_NODES:
        raise invalid(f"Field 'max_nodes' must be an integer from 1 to {MAX_NODES}, got {value!r:.40}.")
    return value


class QueryService:
    def __init__(self, shard: Shard, clock=time.monotonic):
        self.shard = shard
        self.clock = clock
        self._held: OrderedDict[tuple[str, int], QuerySnapshot] = OrderedDict()

    # ---- snapshots ---------------------------------------------------------------------

    def _get_held(self, metastore_id: str, version: int) -> QuerySnapshot | None:
        now = self.clock()
        for key in [k for k, s in self._held.items() if now - s.made > HOLD_SECONDS]:
            del self._held[key]
        snap = self._held.get((metastore_id, version))
        if snap is not None:
            self._held.move_to_end((metastore_id, version))
        return snap

    def _hold(self, snap: QuerySnapshot) -> QuerySnapshot:
        self._held[(snap.metastore_id, snap.version)] = snap
        self._trim()
        return snap

    def _trim(self) -> None:
        """Drop the least recently used snapshots past HELD of them or HELD_ASSETS assets in all (a
        token of one dropped reads the history instead); the newest stays whatever its size."""
        while len(self._held) > HELD or (len(self._held) > 1 and
                                         sum(s.size for s in self._held.values()) > HELD_ASSETS):
            self._held.popitem(last=False)

    async def _snapshot(self, metastore_id: str, min_version: int) -> QuerySnapshot:
        """A snapshot at the shard's version of the metastore (a held one if there is)."""
        for _ in range(3):
            state = await self.shard.state(metastore_id, min_version, paths=False)   # no path asked
            index = await privilege_index(self.shard, metastore_id, min_version)
            async with state.reconcile_lock:     # the index and the version move together under it
                if state.privileges is not index:
                    continue
                held = self._get_held(metastore_id, state.version)
                if held is not None:
                    return held
                snap = QuerySnapshot(metastore_id, state.version, made=self.clock(),
                                     grants={index.key(n): g for n, g in index.grants.items()})
            return self._hold(snap)
        raise CatalogError("RESOURCE_CONFLICT", "The metastore is changing too fast; try the query again.")

    async def _unchanged_since(self, snap: QuerySnapshot, parent_id: str, version: int) -> bool:
        """Whether no change in (snap.version, version] touched `parent_id`'s children."""
        store = self.shard.store
        while snap.touched_to < version:
            start = max(snap.touched_to, snap.version)
            changes = await store.changes(snap.metastore_id, start, RECONCILE_GAP)
            if not changes:
                snap.touched_to = version
                break
            for c in changes:
                snap.touched.update(c.parents)
                snap.touched.update(c.changed)
            snap.touched_to = changes[-1].version
            if len(changes) >= RECONCILE_GAP:
                return False        # too much changed to tell cheaply
        return parent_id not in snap.touched

    async def _load(self, caller: Caller, snap: QuerySnapshot, missing: list[tuple[str, str]]) -> int:
        """Read the listings a run lacked from PostgreSQL, as they were at the snapshot's version:
        the present listing when nothing under its parent changed since, else the history's. Not
        put in the shard's cache: one query over a large metastore must not push out its hot set.
        Returns how many assets it read."""
        store, ms = self.shard.store, snap.metastore_id
        limit = asyncio.Semaphore(LOAD_PARALLEL)

        async def one(key: tuple[str, str]) -> None:
            parent_id, namespace = key
            async with limit:
                version, listed = await store.list_children(ms, parent_id, namespace)
            if version != snap.version:
                await self.shard.observed(ms, version)
                if not await self._unchanged_since(snap, parent_id, version):
                    async with limit:
                        listed = await self._listing_at(caller, snap, parent_id, namespace)
                    version = None
            snap.listings[key] = sorted(listed, key=lambda a: a.name)
            snap.size += len(listed)
            return len(listed)

        return sum(await asyncio.gather(*(one(k) for k in missing)))

    def _to_read(self, snap: QuerySnapshot, cache, unread: Unread) -> list[tuple[str, str]]:
        """The listing a run missed, and the same listing of its parent's next siblings (the next
        nodes the walk goes to) that neither the snapshot nor the cache has."""
        parent, namespace = unread.parent, unread.namespace
        keys = [(parent.id if parent is not None else snap.metastore_id, namespace)]
        siblings = snap.listings.get((parent.parent_id, parent.namespace)) if parent is not None else None
        if siblings:
            at = bisect.bisect_right(siblings, parent.name, key=lambda a: a.name)
            for sibling in siblings[at:]:
                if len(keys) >= PREFETCH:
                    break
                key = (sibling.id, namespace)
                if key not in snap.listings and _from_cache(snap, cache, key) is None:
                    keys.append(key)
        return keys

    async def _listing_at(self, caller: Caller, snap: QuerySnapshot, parent_id: str, namespace: str) -> list:
        """A listing as it was at the snapshot's version, from the metastore's history (docs/versions.md),
        while the retention window holds that version."""
        try:
            await version_asked(self.shard, caller, snap.version, None)
            return await history.children_at(self.shard.store, snap.metastore_id, snap.version, parent_id,
                                             namespace, after="", limit=None)
        except (CatalogError, AttributeError):      # past the window (or a store without history)
            raise _Moved((parent_id, namespace)) from None

    async def _again(self, caller: Caller, version: int) -> QuerySnapshot:
        """A token's snapshot that is no longer held, made again from the history while the retention
        window holds its version (its grants are today's: the history keeps no past grants)."""
        ms = caller.metastore()
        try:
            await version_asked(self.shard, caller, version, None)
        except CatalogError:
            raise _expired(version) from None
        index = await privilege_index(self.shard, ms, caller.min_version)
        snap = QuerySnapshot(ms, version, made=self.clock(),
                             grants={index.key(n): g for n, g in index.grants.items()})
        return self._hold(snap)

    async def _principal_kinds(self) -> dict[str, str]:
        """Group and service principal names -> their kind (every other owner is a user)."""
        principals = getattr(self.shard.store, "principals", None)
        if principals is None:
            return {}
        out = {}
        for kind in ("group", "service_principal"):
            out.update({p.name: kind for p in await principals.list(kind)})
        return out

    # ---- the endpoint ----------------------------------------------------------------------

    async def query(self, caller: Caller, body: dict) -> dict:
        plan = parse(body.get("query"))
        limit = page_size(body.get("max_results"))
        budget = _max_nodes(body.get("max_nodes"))
        token = body.get("page_token")
        ms = caller.metastore()
        version, after = _decode(token, plan) if token is not None else (None, None)
        authz = await authorizer(self.shard, caller)
        if authz.index is None:         # an account admin: the index all the same (its grants are data here)
            authz.index = await privilege_index(self.shard, ms, caller.min_version)
        kinds = await self._principal_kinds() if "owner_kind" in plan.uses else {}
        for _ in range(3):
            if version is None:
                snap = await self._snapshot(ms, caller.min_version)
            else:
                snap = self._get_held(ms, version) or await self._again(caller, version)
            try:
                page = await self._run(caller, snap, plan, authz, kinds, after, limit, budget)
                break
            except _Moved:
                self._held.pop((ms, snap.version), None)
                if token is not None:
                    raise _expired(snap.version) from None
        else:
            raise CatalogError("RESOURCE_CONFLICT", "The metastore is changing too fast; try the query again.")
        self._trim()
        out = {"results": [describe(n) for n in page.results], "version": snap.version,
               "nodes_visited": page.visited}
        if page.after is not None:
            out["next_page_token"] = encode_token({"v": snap.version, "q": _digest(plan), "after": page.after},
                                                  _TOKEN_KEY)
            out["work_bound_reached"] = page.stopped == "work_bound"
        return out

    async def _run(self, caller: Caller, snap: QuerySnapshot, plan: Plan, authz: Authz, kinds: dict, after,
                   limit: int, budget: int) -> Page:
        """One page: runs of the plan, each going on where the last stopped for a listing it had to
        read first; past MAX_LOADED assets read, the page ends early (once it got somewhere)."""
        results, visited, loaded, cursor = [], 0, 0, after
        for _ in range(MAX_ROUNDS):
            state = self.shard.states.get(snap.metastore_id)
            cache = state.cache if state is not None else None
            tree = _CallerTree(snap, cache, authz, kinds)
            try:
                page = run(plan, tree, after=cursor, limit=limit - len(results), budget=max(1, budget - visited),
                           hard=MAX_NODES)
            except OverBudget:
                raise invalid(f"The query visits more than {MAX_NODES:,} nodes to decide a single node of its "
                              "path (its filter's exists(...) reaches too far, or its like compares a pattern "
                              "with a text too long for it): narrow the path above it or the filter.") from None
            results += page.results
            visited += page.visited
            cursor = page.after
            if page.stopped != "unread":
                return Page(results, cursor, visited, page.stopped)
            if loaded >= MAX_LOADED and cursor != after:
                return Page(results, cursor, visited, "work_bound")
            loaded += await self._load(caller, snap, self._to_read(snap, cache, page.unread))
        raise CatalogError("RESOURCE_CONFLICT", "The query's snapshot could not be read in time; try it again.")


def _expired(version: int) -> CatalogError:
    return CatalogError("FAILED_PRECONDITION", f"The page token's metastore version {version} is older than the "
                                               "retention window: run the query again without a page_token.")


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = QueryService(shard)

    async def query(request):
        return ok(await service.query(request["caller"], await json_body(request)))

    return {"queryPaths": query}
