"""Starts shard actors on Ray and supervises them: a dead or hung shard's metastores move at once.

Ray is the control plane only: it places the actors, and carries start/own/drop/ping.
The supervisor pings every shard a few times a second. A shard that is dead (Ray says so
at once), does not answer in time, or whose serving loop has neither run for HUNG_AFTER
seconds nor sent an answer since the last ping, on HUNG_STRIKES pings in a row, is killed,
its metastores are reassigned to the least-loaded survivors (they warm their caches lazily),
and a replacement shard joins for later assignments. A shard that is only busy, its loop
turning with a queue of requests, is left alone: the ping is answered off that loop
(shards/actor.py), and however late its beats on an overloaded machine, answers go out.
Killing it would only pile its load on the survivors.
One late ping is not enough: a virtual machine may stop a process, the supervisor's too, for
a second at a time.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time

import ray

from ..shards.actor import ShardActor
from ..shards.shard import CacheConfig
from ..router.routing import RoutingTable, ShardHandle

log = logging.getLogger(__name__)

PING_INTERVAL = 0.25
PING_TIMEOUT = 1.5
HUNG_AFTER = 1.5        # seconds without a beat of a shard's serving loop: hung, not busy
HUNG_STRIKES = 2        # pings in a row that find a shard stalled or unanswering (a dead actor: at once)


class RayCluster:
    def __init__(self, routing: RoutingTable, db_url: str, *, ray_address: str | None = None,
                 cache: CacheConfig = CacheConfig()):
        self.routing = routing
        self.db_url = db_url
        self.ray_address = ray_address
        self.cache = cache
        self.generation = itertools.count(1)
        self.events: list[dict] = []      # failover timeline: what happened when
        self.strikes: dict[str, int] = {}  # shard -> pings in a row that found it stalled or silent
        self.answered: dict[str, int] = {}  # shard -> answers it had sent at its last ping
        self._supervisor: asyncio.Task | None = None

    async def start(self, shards: int) -> None:
        if not ray.is_initialized():
            ray.init(address=self.ray_address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, ignore_reinit_error=True)
        await self.routing.load_assignments()
        await asyncio.gather(*(self.add_shard(f"shard-{i}") for i in range(shards)))
        self._supervisor = asyncio.create_task(self._supervise())

    async def add_shard(self, name: str) -> ShardHandle:
        actor = ShardActor.options(name=f"shardcat-{name}-{time.time_ns()}").remote(name, self.db_url, self.cache)
        # A local Ray keeps shards on loopback; on a real cluster they listen on their node's address.
        url = await actor.start.remote("127.0.0.1" if self.ray_address is None else None)
        handle = ShardHandle(name, url, actor)
        self.routing.add_shard(handle)
        self._event("shard_started", shard=name, url=url)
        return handle

    async def kill(self, name: str) -> None:
        """Kill a shard's actor outright (chaos experiments); the supervisor notices and recovers."""
        ray.kill(self.routing.shards[name].actor, no_restart=True)
        self._event("shard_killed", shard=name)

    async def stop(self) -> None:
        if self._supervisor:
            self._supervisor.cancel()
        for handle in self.routing.shards.values():
            if handle.alive:
                ray.kill(handle.actor, no_restart=True)

    async def _supervise(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(PING_INTERVAL)
            try:
                await asyncio.gather(*(self._check(h) for h in self.routing.live()))
            except Exception:   # e.g. PostgreSQL down while reassigning: keep supervising, retry next tick
                log.exception("supervisor check failed")
            ticks += 1
            if ticks % 40 == 0:          # every ~10 s: forget old load, move a hot metastore if lopsided
                self.routing.decay()
                moved = await self.routing.rebalance()
                if moved:
                    self._event("rebalanced", metastore=moved)

    async def _check(self, handle: ShardHandle) -> None:
        problem, dead = await self._ping(handle)
        if problem is None:
            self.strikes.pop(handle.name, None)
            return
        strikes = HUNG_STRIKES if dead else self.strikes.get(handle.name, 0) + 1
        if strikes < HUNG_STRIKES:
            self.strikes[handle.name] = strikes
            self._event("shard_suspect", shard=handle.name, error=problem)
            return
        self.strikes.pop(handle.name, None)
        self.answered.pop(handle.name, None)
        self._event("shard_unresponsive", shard=handle.name, error=problem)
        try:
            ray.kill(handle.actor, no_restart=True)
        except Exception:
            pass
        moved = await self.routing.shard_died(handle.name)
        self._event("metastores_reassigned", shard=handle.name, count=len(moved))
        await self.add_shard(f"{handle.name.split('.')[0]}.{next(self.generation)}")

    async def _ping(self, handle: ShardHandle) -> tuple[str | None, bool]:
        """What is wrong with a shard, if anything, and whether it is certainly dead."""
        try:
            stalled, answered = await asyncio.wait_for(handle.actor.ping.remote(), PING_TIMEOUT)
        except ray.exceptions.RayActorError as e:
            return type(e).__name__, True
        except Exception as e:    # no answer in time
            return type(e).__name__, False
        answering = answered != self.answered.get(handle.name, answered)     # first ping: no baseline yet
        self.answered[handle.name] = answered
        if stalled < HUNG_AFTER or answering:
            return None, False
        return f"serving loop stalled {stalled:.1f} s, no answer sent since the last ping", False

    def _event(self, kind: str, **fields) -> None:
        self.events.append({"t": time.time(), "event": kind, **fields})
        log.info("%s %s", kind, fields)
