"""Which shard serves each metastore: a persisted, load-aware, best-effort assignment.

Like Slicer, the assignment is advisory: it is written to PostgreSQL and pushed to
the shards over Ray, but correctness never depends on it (metastore versions keep two
owners safe). A metastore's load is a decaying count of its requests, a write counting
WRITE_COST requests (a write is a PostgreSQL transaction; a read is mostly served from the
cache), plus one for being assigned at all. New or orphaned metastores go to the least-loaded
live shard; `rebalance` evens the shards' loads out a few moves at a time (bounded churn),
and a metastore hotter than a fair share of the whole load keeps its shard to itself: the
other metastores move off its shard, not it. Each shard's node is recorded beside it
(cluster/ray_cluster.py places the shards), so the table says which machine serves what.
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

WRITE_COST = 4.0          # a write's weight in a metastore's load, in reads (docs/cluster.md)
MAX_MOVES = 1             # metastores `rebalance` moves at most per round (one round per ~10 s): churn stays bounded
BALANCED_WITHIN = 0.25    # a shard within this fraction above the fair share is left alone


@dataclass
class ShardHandle:
    name: str
    url: str
    actor: Any                 # the Ray actor handle (control calls only)
    alive: bool = True
    local_socket: str | None = None     # a Unix socket the shard also listens on, on the router's host
    node_id: str | None = None          # the Ray node it runs on
    node_ip: str | None = None
    pid: int | None = None              # its process, on that node
    retiring: bool = False              # being emptied before it stops (a drained node, a shard too many)

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
    moving: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The supervisor's view of the cluster's nodes and its shard count goal (cluster/ray_cluster.py),
    # published with the table; empty for a table no supervisor keeps.
    placement: dict = field(default_factory=dict)

    async def load_assignments(self) -> None:
        self.owner = await self.store.shard_assignments()

    def add_shard(self, handle: ShardHandle) -> None:
        self.shards[handle.name] = handle

    def live(self) -> list[ShardHandle]:
        return [h for h in self.shards.values() if h.alive]

    def shard_load(self, name: str) -> float:
        return sum(self.weight(m) for m, s in self.owner.items() if s == name)

    def weight(self, metastore_id: str) -> float:
        """A metastore's load: its decayed request count (writes weigh WRITE_COST), plus one."""
        return self.load.get(metastore_id, 0.0) + 1.0

    def least_loaded(self, load: dict[str, float]) -> str:
        """The shard of `load` (shard name -> its load) with the least; ties (empty shards above all)
        to the one whose node carries the least of `load`, so that metastores spread over machines
        and a joined node's new shard is preferred to an empty one beside busy shards; then the first."""
        per_node: dict[str | None, float] = {}
        for name, value in load.items():
            node = self.shards[name].node_id
            per_node[node] = per_node.get(node, 0.0) + value
        return min(load, key=lambda name: (load[name], per_node[self.shards[name].node_id]))

    def targets(self) -> list[ShardHandle]:
        """The shards that may take metastores: live and not being emptied."""
        return [h for h in self.shards.values() if h.alive and not h.retiring]

    def assigned(self, metastore_id: str, cost: float = 1.0) -> ShardHandle | None:
        """The live shard serving a metastore, counting the request (`cost`) against its load; None
        if it has none (`shard_for` assigns one)."""
        if cost:
            self.load[metastore_id] = self.load.get(metastore_id, 0.0) + cost
        handle = self.shards.get(self.owner.get(metastore_id, ""))
        return handle if handle is not None and handle.alive else None

    async def shard_for(self, metastore_id: str, cost: float = 1.0) -> ShardHandle:
        """The live shard serving a metastore, assigning one if it has none."""
        handle = self.assigned(metastore_id, cost)
        if handle is not None:
            return handle
        async with self.lock:
            handle = self.shards.get(self.owner.get(metastore_id, ""))
            if handle is not None and handle.alive:
                return handle
            tried: set[str] = set()
            while True:
                live = [h for h in self.targets() if h.name not in tried] or \
                       [h for h in self.live() if h.name not in tried]
                if not live:
                    raise LookupError("no live shard")
                target = self.shards[self.least_loaded({h.name: self.shard_load(h.name) for h in live})]
                try:
                    await self._assign(metastore_id, target)
                    return target
                except Exception as e:      # died meanwhile: the supervisor will say so; try another
                    log.warning("could not assign %s to %s: %s", metastore_id, target.name, e)
                    tried.add(target.name)

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
        async with self.moving:     # one planned move at a time (a failover does not wait for it)
            target = self.shards[shard_name]
            await target.actor.own.remote([metastore_id], True)
            async with self.lock:
                if not target.alive:
                    raise LookupError(f"{shard_name} died while taking {metastore_id}")
                await self._assign(metastore_id, target)

    async def reassert(self, metastore_id: str) -> None:
        """The assigned shard said it does not serve the metastore: tell it again."""
        async with self.lock:
            handle = self.shards.get(self.owner.get(metastore_id, ""))
            if handle is not None and handle.alive:
                await self._assign(metastore_id, handle)

    async def shard_died(self, name: str) -> list[str]:
        """One shard died: `shards_died` of it alone."""
        return await self.shards_died([name])

    async def shards_died(self, names: list[str]) -> list[str]:
        """Mark shards dead and hand every metastore of a dead shard (these and any earlier one whose
        hand-over failed) to the least-loaded survivors at once: one database write and one call per
        survivor, however many metastores move (failover time). A survivor that dies while taking
        its share is marked dead too, and its share and its own metastores are planned again over the
        rest: no plan ever names a shard known dead. Returns the metastores that moved."""
        async with self.lock:
            for name in names:
                if name in self.shards:
                    self.shards[name].alive = False
            moved: list[str] = []
            for _ in range(len(self.shards) + 1):       # each round marks one more shard dead, or ends
                dead = {n for n, h in self.shards.items() if not h.alive}
                orphans = [m for m, s in self.owner.items() if s in dead]
                live = self.targets() or self.live()
                if not orphans or not live:
                    return moved
                load = {h.name: self.shard_load(h.name) for h in live}
                plan: dict[str, list[str]] = {}
                for metastore_id in sorted(orphans, key=lambda m: -self.weight(m)):   # hottest first
                    target = self.least_loaded(load)
                    load[target] += self.weight(metastore_id)
                    plan.setdefault(target, []).append(metastore_id)
                # The database first, as any assignment: a shard told to own a metastore that the
                # database still gives the dead shard would take a foreign write for a move away.
                await self.store.assign_shards({m: t for t, ms in plan.items() for m in ms})
                answers = await asyncio.gather(*(self.shards[t].actor.own.remote(ms) for t, ms in plan.items()),
                                               return_exceptions=True)
                taken = {t: ms for (t, ms), a in zip(plan.items(), answers) if not isinstance(a, BaseException)}
                for (t, ms), a in zip(plan.items(), answers):
                    if isinstance(a, BaseException):
                        log.warning("%s could not take metastores (%s): marked dead", t, type(a).__name__)
                        self.shards[t].alive = False
                    self.owner.update(dict.fromkeys(ms, t))     # a dead target's share: planned again below
                for ms in taken.values():
                    moved.extend(ms)
                log.info("%s died: %d metastores moved to %s", sorted(names), sum(map(len, taken.values())),
                         {t: len(ms) for t, ms in taken.items()})
                if len(taken) == len(plan):
                    return moved
            return moved

    def orphaned(self) -> bool:
        """Whether some metastore is still assigned to a shard known dead (a hand-over that failed)."""
        return any(s in self.shards and not self.shards[s].alive for s in self.owner.values())

    def decay(self, factor: float = 0.5) -> None:
        self.load = {m: v * factor for m, v in self.load.items() if v * factor > 0.01}

    def balance_plan(self, max_moves: int = MAX_MOVES) -> list[tuple[str, str]]:
        """Up to `max_moves` (metastore, to shard) moves that even the loads out. Each move takes a
        metastore from the busiest shard to the idlest, the one whose move leaves the two closest;
        only from a shard more than BALANCED_WITHIN above the fair share (total / shards) that holds
        more than one metastore. A metastore hotter than the fair share itself moves only when all
        its neighbours are as hot: otherwise it stays and they leave, until it has its shard to itself."""
        live = self.targets()
        if len(live) < 2:
            return []
        owned = {h.name: [m for m, s in self.owner.items() if s == h.name] for h in live}
        load = {name: sum(self.weight(m) for m in ms) for name, ms in owned.items()}
        fair = sum(load.values()) / len(load)
        moves: list[tuple[str, str]] = []
        for _ in range(max_moves):
            busiest, idlest = max(load, key=load.get), self.least_loaded(load)
            gap = load[busiest] - load[idlest]
            if load[busiest] <= fair * (1 + BALANCED_WITHIN) or gap <= 1.0:
                break
            if len(owned[busiest]) < 2:         # a lone metastore has its shard to itself already
                break
            fits = [m for m in owned[busiest] if self.weight(m) < gap]
            movable = [m for m in fits if self.weight(m) <= fair] or fits     # the hot one stays if it can
            if not movable:
                break
            best = min(movable, key=lambda m: abs(gap - 2 * self.weight(m)))
            owned[busiest].remove(best)
            owned[idlest].append(best)
            load[busiest] -= self.weight(best)
            load[idlest] += self.weight(best)
            moves.append((best, idlest))
        return moves

    async def rebalance(self, max_moves: int = MAX_MOVES) -> list[str]:
        """Carry out `balance_plan`, each move warmed before the switch (`move`); returns what moved."""
        moved = []
        for metastore_id, target in self.balance_plan(max_moves):
            try:
                await self.move(metastore_id, target)
                moved.append(metastore_id)
            except Exception as e:     # the target died meanwhile: the failover handles it
                log.warning("rebalancing %s to %s failed: %s", metastore_id, target, e)
        return moved

    async def empty(self, names: set[str]) -> list[str]:
        """Move every metastore off these shards (marked retiring: nothing new goes to them), each
        warmed on its new owner before the switch; returns the metastores moved."""
        for name in names:
            self.shards[name].retiring = True
        moved = []
        for metastore_id in sorted((m for m, s in self.owner.items() if s in names), key=lambda m: -self.weight(m)):
            live = self.targets()
            if not live:
                raise LookupError("no shard left to take the metastores")
            target = self.least_loaded({h.name: self.shard_load(h.name) for h in live})
            await self.move(metastore_id, target)
            moved.append(metastore_id)
        return moved

    def snapshot(self) -> dict:
        return {
            "shards": {h.name: {"url": h.url, "alive": h.alive, "node_id": h.node_id, "node_ip": h.node_ip,
                                **({"retiring": True} if h.retiring else {})}
                       for h in self.shards.values()},
            "metastores": dict(self.owner),
            **({"placement": self.placement} if self.placement else {}),
        }
