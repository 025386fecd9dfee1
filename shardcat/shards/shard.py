"""A shard: owns a set of metastores and keeps each one's known version and storage-path trie.

Reads go to the store and report the metastore version they saw; if it moved past the
version this shard knows, the shard reconciles first (docs/design.md invariant 3): it replays
the change log since its version, or rebuilds the metastore's state when the gap is large.
Writes run the store's `write` conditioned on the known version; on a conflict the shard
reconciles and runs the write again, so validation always happens against fresh state.
What mirrors a metastore beside its state (the cache, governance's privilege index) follows
each applied change through the followers hook (followers.py): the core knows no feature.
Of the request being answered the shard knows its session (session.py), and only this: a read
answers as of `Session.read_at` when the session says so (from the history, not the cache), a
write names `Session.writer` in the change log and leaves the version it made in
`Session.written_version` for the answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

from ..cache.budget import CacheBudget
from ..cache.metastore_cache import MISS, page_after
from ..entities.asset import Asset
from ..errors import CatalogError
from ..store import history
from ..store.errors import GroupSpoiled, MetastoreGone, VersionConflict, is_db_unavailable
from ..store.protocol import CatalogStore
from ..store.writes import WriteTx
from .cold_paths import ColdTrie, PathsNeeded, TriesChanged, cold_tries, same_tries
from .followers import CacheFollower, Follower, Reconciled
from .group_commit import GroupCommitConfig, PendingWrite, speculate, tries_of, undo_speculation
from .session import current, past_read
from .path_waits import PathWaits
from .state import CacheConfig, MetastoreState, PathOwner, warm_paths

__all__ = ["CacheConfig", "MetastoreState", "PathOwner", "Shard", "Snapshot"]   # the state types live in state.py

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 8
# Past this many change-log rows it is cheaper to rebuild a metastore's state than to replay.
RECONCILE_GAP = 1000
# Building a path index yields to the event loop after this many storage paths (a few ms: a cold
# owner's writes go on meanwhile).
REBUILD_BATCH = 250
# Idle metastores are looked for at most this often (seconds), on a request's way in.
IDLE_SWEEP = 30.0
# Child lists longer than this are paged from the database instead of cached whole.
MAX_CACHED_LISTING = 20_000
# A filtered listing asks for 4x more children per batch, up to this many, until its page fills.
MAX_LISTING_BATCH = 4096


@dataclass(frozen=True)
class Snapshot:
    """Lookups answered at one metastore version; a path maps to (its owner in the trie, the owner's asset)."""
    version: int
    by_name: dict[tuple[str, str], Asset | None]
    by_path: dict[str, tuple[PathOwner, Asset | None] | None]


def _known(state: MetastoreState):
    """Whether today's privilege index (if loaded) holds an id: a read at a past version fetches
    no ancestor it holds (store/history.py `with_ancestors`)."""
    index = state.privileges
    return index.__contains__ if index is not None else None


def _written_by(writer: str | None, body):
    """`body`, its transaction naming `writer` (the caller, for the history): a group's transactions
    are made in its committer's task, not in each writer's."""
    if writer is None:
        return body

    async def written(tx, state):
        tx.principal = writer
        return await body(tx, state)
    return written


@dataclass(frozen=True)
class _Made:
    """What a write in a transaction of its own left of its tx: the version it made."""
    version: int


class Shard(PathWaits):
    """`claim_on_demand`: serve any metastore asked for (one shard in-process); otherwise only
    those the router assigned, answering NOT_OWNER for the rest."""

    def __init__(self, store: CatalogStore, name: str = "shard-0", *, claim_on_demand: bool = True,
                 cache: CacheConfig = CacheConfig(), group_commit: GroupCommitConfig = GroupCommitConfig(),
                 clock=time.monotonic):
        self.store = store
        self.group_commit = group_commit
        self.name = name
        self.claim_on_demand = claim_on_demand
        self.cache_config = cache
        self.states: dict[str, MetastoreState] = {}
        self._clock = clock       # idle eviction's (tests pass their own)
        self._swept = self._clock()
        self.stats = {"idle_evictions": 0, "reconciles": 0, "rebuilds": 0, "writes": 0, "write_conflicts": 0, "dual_owner_drops": 0,
                      "lone_writes": 0, "groups": 0, "grouped_writes": 0, "group_replays": 0, "cold_path_loads": 0,
                      "privilege_chain_loads": 0}
        # Kept current with every change this shard applies (followers.py): the cache first; features
        # that mirror a metastore (governance's privilege index) join with `follow`.
        self.budget = CacheBudget(cache.max_bytes)      # --cache-mb: all this shard's caches together
        self.caches = CacheFollower(cache, self.budget)
        self.followers: list[Follower] = [self.caches]

    def follow(self, follower: Follower) -> None:
        """Keep `follower` current from now on (once, however often asked)."""
        if follower not in self.followers:
            self.followers.append(follower)

    # ---- ownership --------------------------------------------------------

    def owns(self, metastore_id: str) -> bool:
        return metastore_id in self.states

    def own(self, metastore_id: str) -> None:
        """Start serving a metastore; its state warms lazily on first use."""
        self.states.setdefault(metastore_id, MetastoreState(metastore_id))

    def drop(self, metastore_id: str) -> None:
        state = self.states.pop(metastore_id, None)
        if state is not None:
            self.caches.release(state)
            if state.warming is not None:
                state.warming.cancel()

    def version_of(self, metastore_id: str) -> int | None:
        state = self.states.get(metastore_id)
        return state.version if state is not None and state.version >= 0 else None

    async def state(self, metastore_id: str, min_version: int = 0, *, paths: bool = True) -> MetastoreState:
        """The metastore's state, at least as new as `min_version` (a version the client saw acknowledged).

        `paths`: with its path index whole (waiting for it on a cold owner). Requests pass False: by
        path they ask through `asking_paths`/`with_paths` (a cold owner answers from the paths it loads)."""
        state = self.states.get(metastore_id)
        if state is None:
            if not self.claim_on_demand:
                raise CatalogError("NOT_OWNER", f"{self.name} does not serve metastore {metastore_id}; "
                                                "refresh the routing table.")
            self.own(metastore_id)
            state = self.states[metastore_id]
        now = self._clock()
        if now - self._swept > IDLE_SWEEP:
            self._swept = now
            self.evict_idle(now, keep={metastore_id})
        state.last_used = now
        if state.version < 0:
            async with state.reconcile_lock:
                if state.version < 0:
                    await self._rebuild(state)
        if state.version < min_version:
            await self.reconcile(state)
        if paths:
            await self._paths_whole(state)
        return state

    def evict_idle(self, now: float | None = None, keep=()) -> int:
        """Let metastores unused for the cache's `idle_timeout` go cold: their state, path index, cache and
        privilege index are freed (ownership stays; the next request warms them again). Returns how many."""
        now = self._clock() if now is None else now
        idle = [ms for ms, s in self.states.items() if ms not in keep and s.version >= 0 and not s.busy()
                and now - s.last_used > self.cache_config.idle_timeout]
        for ms in idle:
            self.caches.release(self.states[ms])
            self.states[ms] = MetastoreState(ms)
        self.stats["idle_evictions"] += len(idle)
        return len(idle)

    def _start_warming(self, state: MetastoreState) -> asyncio.Task:
        if state.warming is not None:
            state.warming.cancel()
        state.paths_ready.clear()
        task = state.warming = asyncio.create_task(warm_paths(self.store, state, REBUILD_BATCH, RECONCILE_GAP,
                                                              self.cache_config.path_index_max))
        # A failure is read by whoever waits; with nobody waiting, it must not be logged as never retrieved.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    # ---- reconciliation ---------------------------------------------------

    async def observed(self, metastore_id: str, version: int) -> None:
        """A read saw `version`; catch up if this shard is behind it."""
        state = await self.state(metastore_id, paths=False)
        if version > state.version:
            await self.reconcile(state)

    async def reconcile(self, state: MetastoreState) -> None:
        async with state.reconcile_lock:
            changes = await self.store.changes(state.id, state.version, RECONCILE_GAP)
            if not changes:
                return
            await self._check_still_owner(state.id)
            if len(changes) >= RECONCILE_GAP or changes[0].version != state.version + 1:
                await self._rebuild(state)
                return
            self.stats["reconciles"] += 1
            touched = sorted({i for c in changes for i in c.changed})   # the metastore's own id included
            changed = [i for i in touched if i != state.id]
            parents = {p for c in changes for p in c.parents}
            _, assets = await self.store.get_assets_by_ids(state.id, changed)
            if state.id in touched:
                meta = await self.store.get_metastore(state.id)
                state.storage_root = meta.info.get("storage_root") if meta else state.storage_root
            for asset_id in changed:
                state.forget(asset_id)
            for asset in assets:
                state.remember(asset)
            reconciled = Reconciled(self.store, changes[-1].version, touched, changed, parents, assets)
            for follower in self.followers:
                await follower.reconciled(state, reconciled)
            state.version = changes[-1].version

    async def _check_still_owner(self, metastore_id: str) -> None:
        """Someone else wrote this metastore: if the router assigned it elsewhere, this shard is stale."""
        if self.claim_on_demand:
            return
        owner = await self.store.shard_of(metastore_id)
        if owner is not None and owner != self.name:
            self.drop(metastore_id)
            self.stats["dual_owner_drops"] += 1
            log.warning("%s: metastore %s is assigned to %s; dropping it", self.name, metastore_id, owner)
            raise CatalogError("NOT_OWNER", f"Metastore {metastore_id} moved to {owner}; refresh the routing table.")

    async def _rebuild(self, state: MetastoreState) -> None:
        """Start the metastore's state afresh: its version and storage root now (two small reads),
        an empty cache at that version, and its path index built aside (state.py `warm_paths`). Reads and
        writes go on at once (by path, on cold tries meanwhile: cold_paths.py, path_waits.py)."""
        self.stats["rebuilds"] += 1
        version = await self.store.metastore_version(state.id)
        meta = await self.store.get_metastore(state.id)
        state.storage_root = meta.info.get("storage_root") if meta else None
        if state.version < 0 or isinstance(state.trie, ColdTrie):    # a warm state's writes wait as its reads do
            cold_tries(state, PathOwner(meta.id, "metastore", meta.name, is_root=True) if meta else None)
        self._start_warming(state)
        for follower in self.followers:
            follower.rebuilt(state, version)
        state.version = version

    # ---- reads and writes -------------------------------------------------

    async def read(self, metastore_id: str, versioned_result):
        """Await a store read returning (version, result); reconcile if needed; return the result."""
        if past_read() is not None:
            versioned_result.close()
            raise CatalogError("INVALID_PARAMETER_VALUE", "This read is not answered at a past version.")
        version, result = await versioned_result
        await self.observed(metastore_id, version)
        return result

    async def lookup(self, metastore_id: str, namespace: str, full_name: str, min_version: int = 0) -> Asset | None:
        """The asset with that name, from the cache at the known version, else from the database;
        as it was at the session's past version when the request reads at one (`Session.read_at`)."""
        state = await self.state(metastore_id, min_version, paths=False)
        if (past := past_read()) is not None:
            found = await history.assets_at(self.store, metastore_id, past.version, [(namespace, full_name)], [])
            await history.with_ancestors(self.store, metastore_id, past, found, _known(state))
            return (await self._governed_today(state, found))[0] if found else None
        if state.cache is not None:
            hit = state.cache.get_by_name(namespace, full_name, state.version)
            if hit is not MISS:
                return hit
        return await self._read_through(state, self.store.get_asset(metastore_id, namespace, full_name))

    async def lookup_id(self, metastore_id: str, asset_id: str, min_version: int = 0) -> Asset | None:
        """The asset with that id, from the cache at the known version, else from the database;
        None for an id that is not a UUID (no asset has one)."""
        try:
            asset_id = str(uuid.UUID(asset_id))
        except (TypeError, ValueError):
            return None
        state = await self.state(metastore_id, min_version, paths=False)
        if (past := past_read()) is not None:
            found = await history.assets_at(self.store, metastore_id, past.version, [], [asset_id])
            await history.with_ancestors(self.store, metastore_id, past, found, _known(state))
            return (await self._governed_today(state, found))[0] if found else None
        if state.cache is not None:
            hit = state.cache.get(asset_id, state.version)
            if hit is not MISS:
                return hit
        return await self._read_through(state, self.store.get_asset_by_id(metastore_id, asset_id))

    async def _read_through(self, state: MetastoreState, versioned_read) -> Asset | None:
        """The asset of a store read returning (version, asset), once caught up to that version; cached."""
        version, asset = await versioned_read
        await self.observed(state.id, version)
        if state.cache is not None and asset is not None:
            state.cache.fill([asset], version)
        return asset

    async def governed_today(self, metastore_id: str, assets: list[Asset], min_version: int = 0) -> list[Asset]:
        """Assets read at a past version, each governed as its asset is today (store/history.py
        `governed_as_today`). The shard's reads at a version answer so already."""
        return await self._governed_today(await self.state(metastore_id, min_version, paths=False), assets)

    async def _governed_today(self, state: MetastoreState, assets: list[Asset]) -> list[Asset]:
        """Today's states from the cache, the rest in one statement (only reads at a version come here)."""
        if not assets:
            return assets
        today: dict[str, Asset | None] = {}
        if state.cache is not None:
            for a in assets:
                hit = state.cache.get(a.id, state.version)
                if hit is not MISS:
                    today[a.id] = hit
        missing = [a.id for a in assets if a.id not in today]
        if missing:
            _, found = await self.store.get_assets_by_keys(state.id, [], missing)
            today.update((a.id, a) for a in found)
        return [history.governed_as_today(a, today.get(a.id)) for a in assets]

    async def snapshot(self, metastore_id: str, names: list[tuple[str, str]], paths: list[str],
                       min_version: int = 0) -> Snapshot:
        """Many lookups answered at one metastore version: assets by (namespace, full name), and
        the owner of each storage path (from the trie) with its asset. Cache first; the misses
        in one database statement; if the database had moved on, catch up and start over."""
        if (past := past_read()) is not None:
            return await self._snapshot_at(metastore_id, past, names, paths, min_version)
        for _ in range(WRITE_ATTEMPTS):
            state = await self.with_paths(metastore_id, min_version, paths, below=False)    # a cold owner loads them
            version = state.version
            owners = {p: state.trie.owner(p) for p in paths}
            ids = sorted({o[1].asset_id for o in owners.values() if o is not None and not o[1].is_root})
            by_name: dict[tuple[str, str], Asset | None] = {}
            by_id: dict[str, Asset] = {}
            if state.cache is not None:
                by_name = state.cache.get_many_by_name(names, version)
                for asset_id in ids:
                    hit = state.cache.get(asset_id, version)
                    if hit is not MISS and hit is not None:
                        by_id[asset_id] = hit
            missing_names = [k for k in names if k not in by_name]
            missing_ids = [i for i in ids if i not in by_id]
            if missing_names or missing_ids:
                db_version, assets = await self.store.get_assets_by_keys(metastore_id, missing_names, missing_ids)
                if db_version != version:
                    await self.observed(metastore_id, db_version)
                    continue
                if state.cache is not None:
                    state.cache.fill(assets, db_version)
                found = {(a.namespace, a.full_name): a for a in assets}
                by_name.update({k: found.get(k) for k in missing_names})
                by_id.update({a.id: a for a in assets})
            paths_out = {p: (o[1], by_id.get(o[1].asset_id)) if o is not None else None for p, o in owners.items()}
            return Snapshot(version, by_name, paths_out)
        raise CatalogError("RESOURCE_CONFLICT", "The metastore is changing too fast; try the request again.")

    async def _snapshot_at(self, metastore_id: str, past, names: list[tuple[str, str]], paths: list[str],
                           min_version: int) -> Snapshot:
        """`snapshot` at a past version (store/history.py). A path answers with the asset owning it
        now, as it was then (the trie holds the present's paths)."""
        state = await self.with_paths(metastore_id, min_version, paths, below=False)
        owners = {p: state.trie.owner(p) for p in paths}
        ids = sorted({o[1].asset_id for o in owners.values() if o is not None and not o[1].is_root})
        assets = await history.with_ancestors(self.store, metastore_id, past, await history.assets_at(
            self.store, metastore_id, past.version, names, ids), _known(state))
        assets = await self._governed_today(state, assets)
        found = {(a.namespace, a.full_name): a for a in assets}
        by_id = {a.id: a for a in assets}
        return Snapshot(past.version, {k: found.get(k) for k in names},
                        {p: (o[1], by_id.get(o[1].asset_id)) if o is not None else None for p, o in owners.items()})

    async def children(self, metastore_id: str, parent_id: str, namespace: str, *, after: str, limit: int,
                       min_version: int = 0) -> list[Asset]:
        """Up to `limit` children named after `after`, in name order."""
        state = await self.state(metastore_id, min_version, paths=False)
        if (past := past_read()) is not None:
            return await self._governed_today(state, await history.with_ancestors(
                self.store, metastore_id, past, await history.children_at(
                    self.store, metastore_id, past.version, parent_id, namespace, after=after, limit=limit),
                _known(state)))
        if state.cache is not None:
            listed = state.cache.children(parent_id, namespace, state.version)
            if listed is MISS:
                # Too long to cache whole: page it from the database without loading it all first. A
                # listing once found too long is not counted again (a keyset page then costs the same
                # wherever it starts); were it to shrink, paging it from the database stays right.
                listed, key = None, (parent_id, namespace)
                if key not in state.long_listings and await self.store.count_children(
                        metastore_id, parent_id, namespace, MAX_CACHED_LISTING + 1) <= MAX_CACHED_LISTING:
                    version, listed = await self.store.list_children(metastore_id, parent_id, namespace,
                                                                     limit=MAX_CACHED_LISTING + 1)
                    await self.observed(metastore_id, version)
                    if len(listed) > MAX_CACHED_LISTING:     # it grew in between
                        listed = None
                    else:
                        state.cache.fill_children(parent_id, namespace, listed, version)
                if listed is None:
                    state.long_listings.add(key)
            if listed is not None:
                return page_after(listed, after, limit)
        return await self.read(metastore_id, self.store.list_children(
            metastore_id, parent_id, namespace, after=after, limit=limit))

    async def children_where(self, metastore_id: str, parent_id: str, namespace: str, keep, *, after: str,
                             limit: int, min_version: int = 0) -> list[Asset]:
        """Up to `limit` children named after `after`, in name order, that `keep(asset)` accepts
        (None: all). When the filter drops most of them (a caller who may see 1% of a schema),
        each batch asks for four times more than the last: a few batches fill a page."""
        found: list[Asset] = []
        want = limit
        while True:
            batch = await self.children(metastore_id, parent_id, namespace, after=after, limit=want,
                                        min_version=min_version)
            found += batch if keep is None else [a for a in batch if keep(a)]
            if len(batch) < want or len(found) >= limit:
                return found[:limit]
            after = batch[-1].name
            want = min(want * 4, MAX_LISTING_BATCH)

    async def write(self, metastore_id: str, body, *, prefetch: tuple[tuple, ...] = ()):
        """`write_made`, its result alone."""
        return (await self.write_made(metastore_id, body, prefetch=prefetch))[0]

    async def write_made(self, metastore_id: str, body, *,
                         prefetch: tuple[tuple, ...] = ()) -> tuple[object, int | None]:
        """Run `body(tx, state)` as one metastore write, retrying on version conflicts: (its
        result, the version it made).

        `body` validates against the transaction's reads and the state's trie, then
        writes through `tx`. A CatalogError from it rolls the whole write back.
        The request's session (session.py) names the writer and is told the version made.
        Writes that queue behind one in flight commit together (group_commit.py); `prefetch`
        names what the body will read first (`WriteBatch.lock`), which a group reads for all
        its writes as it locks the metastore.
        """
        state = await self.state(metastore_id, paths=False)   # a cold owner's writes go on (cold_paths.py)
        session = current()     # the request's (shards/session.py): its writer in, the version made out
        body = _written_by(session.writer if session is not None else None, body)
        if not self.group_commit.enabled:
            result, version = await self._write_alone(state, body)
            if session is not None:
                session.written_version = version
            return result, version
        # Every write queues, a lone one too: its committer starts one loop turn later, after the
        # writers already woken (the answered writers of the last group, say) have queued beside it.
        pending = PendingWrite(body, asyncio.get_running_loop().create_future(), prefetch)
        # Its writer may have stopped waiting (cancelled): the outcome is then nobody's to read.
        pending.done.add_done_callback(lambda done: done.cancelled() or done.exception())
        state.pending.append(pending)
        if state.committer is None or state.committer.done():
            # A task of its own: a writer that gives up (its client went away) cancels only its wait.
            state.committer = asyncio.create_task(self._commit_groups(state))
        result = await asyncio.shield(pending.done)
        version = pending.tx.version if pending.tx is not None else None
        if session is not None:
            session.written_version = version
        return result, version

    async def _write_alone(self, state: MetastoreState, body) -> tuple[object, int]:
        """The write in a transaction of its own: its result, and the version it made."""
        metastore_id = state.id
        async with state.write_lock:   # this shard's own writes queue here instead of conflicting
            attempts = loads = 0
            while (attempts := attempts + 1) <= WRITE_ATTEMPTS + loads:    # a cold path's load is not an attempt
                tries = await self._write_tries(state)
                try:
                    async with self.store.write(metastore_id, state.version) as tx:
                        result = await body(tx, state)
                        same_tries(state, tries)
                except (PathsNeeded, TriesChanged) as again:    # rolled back: load the path, or go again
                    await self._cold_again(state, again, loads := loads + 1)
                    continue
                except VersionConflict:
                    self.stats["write_conflicts"] += 1
                    await self.reconcile(state)
                    continue
                except MetastoreGone:
                    self.drop(metastore_id)
                    raise CatalogError("NOT_FOUND", f"Metastore '{metastore_id}' does not exist.") from None
                async with state.reconcile_lock:
                    self._applied(state, tx)
                self.stats["writes"] += 1
                return result, tx.version
        raise CatalogError("RESOURCE_CONFLICT", "The metastore is changing too fast; try the request again.")

    async def _commit_groups(self, state: MetastoreState) -> None:
        """Commit the metastore's queued writes, a bounded group per transaction, until none is left."""
        config = self.group_commit
        while state.pending:
            if config.max_wait > 0 and 1 < len(state.pending) < config.max_batch:
                await asyncio.sleep(config.max_wait)
            batch = state.pending[:config.max_batch]
            del state.pending[:config.max_batch]
            try:
                await self._commit_group(state, batch)
            except BaseException as e:      # cancelled (the shard stops): nobody is left waiting
                for pending in [*batch, *state.pending]:
                    pending.settle(e if not isinstance(e, asyncio.CancelledError) else CatalogError(
                        "TEMPORARILY_UNAVAILABLE", "The shard stopped; the write's outcome is unknown."))
                state.pending.clear()
                raise
            for pending in batch:
                pending.settle()

    async def _commit_group(self, state: MetastoreState, batch: list[PendingWrite]) -> None:
        """One group in one transaction: each write in arrival order, first without savepoints
        (a write that fails before it changed anything fails alone all the same); if one fails
        after it changed rows or on a database error, the group is rolled back and runs again with
        a savepoint per write, so that one fails alone and the others commit (Store.write_batch).
        A VersionConflict (another owner wrote) retries the whole group on fresh state; a failure
        of the transaction itself (the database went away, the commit failed) fails every write.
        A group of one is a plain write: no savepoint, nothing deferred, as without group commit."""
        if len(batch) == 1:
            pending = batch[0]
            try:
                pending.result, version = await self._write_alone(state, pending.body)
                pending.tx = _Made(version)
            except Exception as e:
                pending.error = e
            self.stats["lone_writes"] += 1
            return
        savepoints = False      # optimistic first: a write that cannot fail alone spoils the group
        async with state.write_lock:
            attempts = loads = 0
            while (attempts := attempts + 1) <= WRITE_ATTEMPTS + loads:    # a cold path's load is not an attempt
                tries = await self._write_tries(state)
                for pending in batch:
                    pending.reset()
                try:
                    async with self.store.write_batch(state.id, state.version, savepoints=savepoints,
                                                      prefetch=[k for p in batch for k in p.prefetch]) as group:
                        for pending in batch:
                            await self._write_in_group(state, group, pending)
                            same_tries(state, tries)    # its later writes must see the earlier ones' paths
                except (PathsNeeded, TriesChanged) as again:     # rolled back whole: load the path, or go again
                    undo_speculation(state, batch)
                    await self._cold_again(state, again, loads := loads + 1)
                    continue
                except GroupSpoiled:
                    # Rolled back whole: again with a savepoint per write, so the failing one fails alone.
                    undo_speculation(state, batch)
                    self.stats["group_replays"] += 1
                    savepoints = True
                    continue
                except VersionConflict:
                    undo_speculation(state, batch)
                    self.stats["write_conflicts"] += 1
                    await self.reconcile(state)
                    continue
                except MetastoreGone:
                    undo_speculation(state, batch)
                    self.drop(state.id)
                    gone = CatalogError("NOT_FOUND", f"Metastore '{state.id}' does not exist.")
                    for pending in batch:
                        pending.error = gone
                    return
                except Exception as e:      # nothing of the group is acknowledged
                    undo_speculation(state, batch)
                    for pending in batch:
                        pending.error = e
                    return
                async with state.reconcile_lock:
                    in_place = True         # once one is not (rebuilt meanwhile), the later ones go again too
                    for pending in batch:
                        if pending.tx is not None:
                            in_place = in_place and pending.speculated_in(state)
                            self._applied(state, pending.tx, paths_in_place=in_place)
                self.stats["writes"] += sum(1 for pending in batch if pending.tx is not None)
                self.stats["groups"] += 1
                self.stats["grouped_writes"] += len(batch)
                return
        conflict = CatalogError("RESOURCE_CONFLICT", "The metastore is changing too fast; try the request again.")
        for pending in batch:
            pending.error = conflict

    async def _write_in_group(self, state: MetastoreState, group, pending: PendingWrite) -> None:
        try:
            async with group.write() as tx:
                pending.result = await pending.body(tx, state)
        except (VersionConflict, MetastoreGone, GroupSpoiled):
            raise
        except Exception as e:
            if is_db_unavailable(e) or group.lost():
                raise                       # the transaction is lost, not just this write
            pending.error = e               # rolled back to its savepoint: it fails alone
            return
        pending.tx = tx
        pending.undo = speculate(state, tx)
        pending.tries = tries_of(state)

    def _applied(self, state: MetastoreState, tx: WriteTx, *, paths_in_place: bool = False) -> None:
        """`paths_in_place`: the write's storage paths are in the state's tries already (a group's
        write, speculated; the group's later writes' paths after it, applied in turn)."""
        if state.version >= tx.version:
            return      # a reconcile already read this write back from the database
        if not paths_in_place:
            for asset_id in tx.deleted:
                state.forget(asset_id)
            for asset in tx.written.values():
                state.remember(asset)
        for follower in self.followers:
            follower.applied(state, tx)
        state.version = tx.version
