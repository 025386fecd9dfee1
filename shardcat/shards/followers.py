"""Followers: what a shard keeps current beside each metastore's state, told of every change it applies.

The shard core knows no feature. Anything that mirrors a metastore in memory (the asset
cache; governance's privilege index) is a follower: told of this shard's own writes as
they are applied (`applied`, no I/O, under the state's reconcile lock), of others' writes
read back from the change log (`reconciled`), and of a rebuild from scratch (`rebuilt`).
A follower keeps its data on the metastore's state (`MetastoreState.cache`, `.privileges`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from ..cache.metastore_cache import MetastoreCache
from ..entities.asset import Asset
from ..store.errors import is_db_unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reconciled:
    """Others' writes, read back from the change log: up to `version`, the ids they changed (`touched`:
    the metastore's own id included; `changed`: assets only), the parents whose children changed, and
    the changed assets as they are now (deleted ones absent)."""
    store: object
    version: int
    touched: list[str]
    changed: list[str]
    parents: set[str]
    assets: list[Asset]


class Follower(Protocol):
    def applied(self, state, tx) -> None:
        """This shard's own write `tx` (store/writes.py WriteTx), applied: no I/O."""

    async def reconciled(self, state, changes: Reconciled) -> None:
        """Others' writes, replayed from the change log."""

    def rebuilt(self, state, version: int) -> None:
        """The state was loaded afresh at `version`: start over."""


class CacheFollower:
    """Keeps each metastore's asset cache (cache/metastore_cache.py) at the state's version; a rebuild
    starts an empty one (none when caching is off). All of a shard's caches share one `budget`
    (cache/budget.py): `--cache-mb` bounds the shard, not each metastore."""

    def __init__(self, config, budget=None):
        self.config = config
        self.budget = budget
        # The lookups of caches given up, so the shard's totals never go down (they are Prometheus counters).
        self.given_up = {"hits": 0, "misses": 0, "evictions": 0}

    def applied(self, state, tx) -> None:
        if state.cache is not None:
            state.cache.apply_write(tx.version, tx.written.values(), tx.deleted.keys(), created=tx.created)

    async def reconciled(self, state, changes: Reconciled) -> None:
        if state.cache is not None:
            state.cache.advance(changes.version, changes.changed, changes.parents)

    def rebuilt(self, state, version: int) -> None:
        c = self.config
        self.release(state)
        if c.enabled:
            state.cache = MetastoreCache(version, max_bytes=c.max_bytes, version_timeout=c.version_timeout,
                                         budget=self.budget)

    def release(self, state) -> None:
        """The state's cache is given up (rebuilt, gone cold, moved away): its bytes leave the budget,
        its counts stay in the shard's totals."""
        if state.cache is None:
            return
        counts = state.cache.stats()
        for key in self.given_up:
            self.given_up[key] += counts[key]
        if self.budget is not None:
            self.budget.forget(state.cache)


class Ticking:
    """A follower that looks now and then at the tables a policy switch (`switch`, a property key set on a
    catalog, schema or table) may have turned on: the first write it sees starts the metastore's loop,
    which calls `tick(metastore_id)` every `period()` seconds while this shard owns it. Which assets hold
    the switch is read once from the store and kept current from the writes after, so a metastore of a
    million tables and no policy costs a tick nothing. A failed tick is logged; the next looks again."""

    def __init__(self, shard, name: str, switch: str):
        self.shard = shard
        self.name = name
        self.switch = switch
        self.loops: dict[str, asyncio.Task] = {}
        self.holders: dict[str, dict[str, str]] = {}      # metastore -> holder id -> its type
        self.loading: dict[str, dict[str, Asset | None]] = {}   # writes seen while holders load
        self.load_lock = asyncio.Lock()
        shard.follow(self)

    def period(self) -> float:
        raise NotImplementedError

    async def tick(self, metastore_id: str):
        raise NotImplementedError

    def noticed(self, state, tx) -> None:
        """This shard's write `tx` to `state`, before the loop is (re)started: no I/O."""

    async def switched_tables(self, metastore_id: str) -> list[Asset]:
        """The tables a holder of the switch covers (their effective setting is the caller's to decide)."""
        async with self.load_lock:
            holders = self.holders.get(metastore_id)
            if holders is None:
                self.loading[metastore_id] = {}
                try:
                    found = {a.id: a.type for a in await self.shard.store.assets_with_property(metastore_id, self.switch)}
                    for asset_id, asset in self.loading[metastore_id].items():
                        self._hold(found, asset_id, asset)
                finally:
                    del self.loading[metastore_id]
                holders = self.holders[metastore_id] = found
        return await self.shard.store.tables_under(metastore_id, list(holders)) if holders else []

    def _seen(self, metastore_id: str, asset_id: str, asset: Asset | None) -> None:
        if metastore_id in self.holders:
            self._hold(self.holders[metastore_id], asset_id, asset)
        elif metastore_id in self.loading:
            self.loading[metastore_id][asset_id] = asset

    def _hold(self, holders: dict[str, str], asset_id: str, asset: Asset | None) -> None:
        if asset is not None and self.switch in (asset.info.get("properties") or {}):
            holders[asset_id] = asset.type
        else:
            holders.pop(asset_id, None)

    def applied(self, state, tx) -> None:
        for asset in tx.written.values():
            self._seen(state.id, asset.id, asset)
        for asset_id in tx.deleted:
            self._seen(state.id, asset_id, None)
        self.noticed(state, tx)
        task = self.loops.get(state.id)
        if task is None or task.done():
            self.loops[state.id] = asyncio.get_running_loop().create_task(self._loop(state.id))

    async def reconciled(self, state, changes: Reconciled) -> None:
        now = {a.id: a for a in changes.assets}
        for asset_id in changes.changed:
            self._seen(state.id, asset_id, now.get(asset_id))

    def rebuilt(self, state, version: int) -> None:
        self.holders.pop(state.id, None)

    async def _loop(self, metastore_id: str) -> None:
        while self.shard.owns(metastore_id):
            await asyncio.sleep(self.period())
            try:
                await self.tick(metastore_id)
            except asyncio.CancelledError:
                raise
            except Exception as e:       # noqa: BLE001 -- the next tick looks again
                if is_db_unavailable(e):    # the store closed or down: the next write starts the loop again
                    log.warning("%s of %s: the database is unavailable; ticks stop until the next write",
                                self.name, metastore_id)
                    return
                log.exception("%s of %s: a tick failed", self.name, metastore_id)
