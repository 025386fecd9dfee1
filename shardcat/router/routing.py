"""Which shard serves each metastore: a persisted, load-aware, best-effort assignment.

Like Slicer, the assignment is advisory: it is written to PostgreSQL and pushed to
the shards over Ray, but correctness never depends on it (metastore versions keep two
owners safe). New or orphaned metastores go to the least-loaded live shard, where
load is a decaying count of requests per metastore; `rebalance` moves the hottest
metastore off an overloaded shard.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from ..store.db import Store
from ..web.shard_client import Address

log = logging.getLogger(__name__)


@dataclass
class ShardHandle:
    name: str
    url: str
    actor: Any                 # the Ray actor handle (control calls only)
    alive: bool = True
    local_socket: str | None = None     # a Unix socket the shard also listens on, on the router's host

    @functools.cached_property
    def address(self) -> Address:
        """Where the router's requests to this shard go."""
        url = URL(self.url)
        return Address(url.host, url.port, self.local_socket)


@dataclass
class RoutingTable:
    store: Store
    shards: dict[str, ShardHandle] = field(default_factory=dict)
    owner: dict[str, str] = field(default_factory=dict)        # metastore id -> shard name
    load: dict[str, float] = field(default_factory=dict)       # metastore id -> decayed request count
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def load_assignments(self) -> None:
        self.owner = await self.store.shard_assignments()

    def add_shard(self, handle: ShardHandle) -> None:
        self.shards[handle.name] = handle

    def live(self) -> list[ShardHandle]:
        return [h for h in self.shards.values() if h.alive]

    def shard_load(self, name: str) -> float:
        return sum(self.load.get(m, 0.0) + 1.0 for m, s in self.owner.items() if s == name)

    def assigned(self, metastore_id: str) -> ShardHandle | None:
        """The live shard serving a metastore, counting the request against its load; None if it
        has none (`shard_for` assigns one)."""
        self.load[metastore_id] = self.load.get(metastore_id, 0.0) + 1.0
        handle = self.shards.get(self.owner.get(metastore_id, ""))
        return handle if handle is not None and handle.alive else None

    async def shard_for(self, metastore_id: str) -> ShardHandle:
        """The live shard serving a metastore, assigning one if it has none."""
        handle = self.assigned(metastore_id)
        if handle is not None:
            return handle
        async with self.lock:
            handle = self.shards.get(self.owner.get(metastore_id, ""))
            if handle is not None and handle.alive:
                return handle
            live = self.live()
            if not live:
                raise LookupError("no live shard")
            target = min(live, key=lambda h: self.shard_load(h.name))
            await self._assign(metastore_id, target)
            return target

    async def _assign(self, metastore_id: str, target: ShardHandle) -> None:
        previous = self.shards.get(self.owner.get(metastore_id, ""))
        await self.store.assign_shard(metastore_id, target.name)
        await target.actor.own.remote([metastore_id])
        self.owner[metastore_id] = target.name
        if previous is not None and previous is not target and previous.alive:
            try:
                await previous.actor.drop.remote([metastore_id])
            except Exception:   # a dying previous owner drops everything anyway
                log.warning("could not tell %s to drop %s", previous.name, metastore_id)
        log.info("metastore %s -> %s", metastore_id, target.name)

    async def move(self, metastore_id: str, shard_name: str) -> None:
        """A planned move: the new owner builds the metastore's state first, while the old one still
        serves (a large metastore takes seconds), then requests switch. The warm-up runs outside the
        lock so that a failover never waits behind it."""
        target = self.shards[shard_name]
        await target.actor.own.remote([metastore_id], True)
        async with self.lock:
            await self._assign(metastore_id, target)

    async def reassert(self, metastore_id: str) -> None:
        """The assigned shard said it does not serve the metastore: tell it again."""
        async with self.lock:
            handle = self.shards.get(self.owner.get(metastore_id, ""))
            if handle is not None and handle.alive:
                await self._assign(metastore_id, handle)

    async def shard_died(self, name: str) -> list[str]:
        """Mark a shard dead and hand its metastores to the least-loaded survivors at once: one
        database write and one call per survivor, however many metastores move (failover time)."""
        async with self.lock:
            self.shards[name].alive = False
            orphans = [m for m, s in self.owner.items() if s == name]
            live = self.live()
            if not orphans or not live:
                return orphans
            load = {h.name: self.shard_load(h.name) for h in live}
            plan: dict[str, list[str]] = {}
            for metastore_id in sorted(orphans, key=lambda m: -self.load.get(m, 0.0)):   # hottest first
                target = min(load, key=load.get)
                load[target] += self.load.get(metastore_id, 0.0) + 1.0
                plan.setdefault(target, []).append(metastore_id)
            await self.store.assign_shards({m: target for target, ms in plan.items() for m in ms})
            await asyncio.gather(*(self.shards[target].actor.own.remote(ms) for target, ms in plan.items()))
            for target, ms in plan.items():
                self.owner.update(dict.fromkeys(ms, target))
            log.info("%s died: %d metastores moved to %s", name, len(orphans),
                     {t: len(ms) for t, ms in plan.items()})
            return orphans

    def decay(self, factor: float = 0.5) -> None:
        self.load = {m: v * factor for m, v in self.load.items() if v * factor > 0.01}

    async def rebalance(self, ratio: float = 2.0) -> str | None:
        """Move the hottest metastore from the busiest to the idlest shard if one carries `ratio`x the other."""
        live = self.live()
        if len(live) < 2:
            return None
        busiest = max(live, key=lambda h: self.shard_load(h.name))
        idlest = min(live, key=lambda h: self.shard_load(h.name))
        mine = [m for m, s in self.owner.items() if s == busiest.name]
        if len(mine) < 2 or self.shard_load(busiest.name) < ratio * self.shard_load(idlest.name):
            return None
        hottest = max(mine, key=lambda m: self.load.get(m, 0.0))
        await self.move(hottest, idlest.name)
        return hottest

    def snapshot(self) -> dict:
        return {
            "shards": {h.name: {"url": h.url, "alive": h.alive} for h in self.shards.values()},
            "metastores": dict(self.owner),
        }
