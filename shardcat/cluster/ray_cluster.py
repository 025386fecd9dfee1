"""Starts shard actors on Ray and supervises them: a dead or hung shard's metastores move at once.

Ray is the control plane only: it places the actors, and carries start/own/drop/ping.
The supervisor pings every shard a few times a second. A shard that is dead (Ray says so
at once), does not answer in time, or whose serving loop has neither run for HUNG_AFTER
seconds nor sent an answer since the last ping, on HUNG_STRIKES pings in a row, is killed,
its metastores are reassigned to the least-loaded survivors (they warm their caches lazily),
and a few seconds later, once they had the CPU to do so, a replacement shard joins for later
assignments. A shard that is only busy, its loop turning with a queue of requests, is left
alone: the ping is answered off that loop (serving/actor.py), and however late its beats on
an overloaded machine, answers go out. Killing it would only pile its load on the survivors.
One late ping is not enough: a virtual machine may stop a process, the supervisor's too, for
a second at a time. For the same reason a shard's silence (a stalled loop, an unanswered ping)
counts only as far as the supervisor's own process was running meanwhile: when the machine
stops every process at once, every shard looks hung, and killing a healthy one only turns a
pause into failed requests.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time

import psutil
import ray

from ..serving.actor import ShardActor
from ..shards.group_commit import GroupCommitConfig
from ..shards.shard import CacheConfig
from ..router.routing import RoutingTable, ShardHandle

log = logging.getLogger(__name__)

PING_INTERVAL = 0.25
PING_TIMEOUT = 1.5
LOCAL_START_ATTEMPTS = 3    # a local start that failed half-way is tried again, from a clean machine
HUNG_AFTER = 1.5        # seconds without a beat of a shard's serving loop: hung, not busy
HUNG_STRIKES = 2        # pings in a row that find a shard stalled or unanswering (a dead actor: at once)
REPLACE_AFTER = 3.0     # seconds from a failover to its replacement shard's start: starting a Python process
                        # would take CPU from the survivors rebuilding the moved metastores
OK, SUSPECT, DEAD, UNSURE = "ok", "suspect", "dead", "unsure"     # a ping's verdicts


class LoopWatch:
    """Watches this process's own event loop: for how long, lately, was it stopped (not busy)?"""

    TICK = 0.1

    def __init__(self):
        self.last_tick: float | None = None     # None: not watching
        self.last_cpu = 0.0                     # the loop thread's CPU time at the last tick
        self.stalls: collections.deque[tuple[float, float]] = collections.deque(maxlen=256)  # (ended, seconds)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self.last_tick, self.last_cpu = time.monotonic(), time.thread_time()
        self._task = asyncio.create_task(self._watch())

    def stop(self) -> None:
        if self._task:
            self._task.cancel()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.TICK)
            now, stopped = time.monotonic(), self._stopped_since_tick()
            if stopped > self.TICK:
                self.stalls.append((now, stopped))
            self.last_tick, self.last_cpu = now, time.thread_time()

    def _stopped_since_tick(self) -> float:
        # Late while running other work is a busy loop, which stalls no shard; late without using
        # the CPU is a process the machine stopped.
        return time.monotonic() - self.last_tick - self.TICK - (time.thread_time() - self.last_cpu)

    def stalled_since(self, moment: float) -> float:
        """Seconds after `moment` that the loop could not run (the stall ending just now included)."""
        if self.last_tick is None:
            return 0.0
        now, stalls, ongoing = time.monotonic(), list(self.stalls), self._stopped_since_tick()
        if ongoing > self.TICK:       # not yet recorded: the watch has not run since
            stalls.append((now, ongoing))
        return sum(min(seconds, ended - moment) for ended, seconds in stalls if ended > moment)


def init_ray(address: str | None, *, local_attempts: int = LOCAL_START_ATTEMPTS) -> None:
    """Connect to Ray at `address`, or start a local one. A local start that fails half-way (its
    raylet never came up, say) leaves its GCS server and helpers running, and Ray, never having
    finished, will not stop them: they are stopped here, and the start is tried again from a clean
    machine (Ray waits a fixed 30 s for its raylet, which a heavily shared machine can miss)."""
    attempts = local_attempts if address is None else 1
    for attempt in range(1, attempts + 1):
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        try:
            # Ray starts its workers at niceness 15, below the router, the clients and PostgreSQL on
            # the same machine: a shard then waits for the CPU behind all of them (docs/benchmarks.md).
            # A joined cluster has its own config: ray-config/README.md starts it the same way.
            local = {"_system_config": {"worker_niceness": 0}} if address is None else {}
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                     ignore_reinit_error=True, **local)
            return
        except BaseException as e:
            _stop_processes([p for p in psutil.Process().children(recursive=True) if p.pid not in before])
            if attempt == attempts or not isinstance(e, Exception):
                raise
            log.warning("local Ray failed to start (attempt %d of %d): %s; trying again", attempt, attempts, e)
            ray.shutdown()


def _stop_processes(procs: list[psutil.Process], grace: float = 5.0) -> None:
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace)


class RayCluster:
    def __init__(self, routing: RoutingTable, db_url: str, *, ray_address: str | None = None,
                 cache: CacheConfig = CacheConfig(), event_loop: str = "uvloop", secret_keys: list[bytes] = (),
                 oidc=None, group_commit: GroupCommitConfig = GroupCommitConfig()):
        self.routing = routing
        self.oidc = oidc        # the identity provider's settings, for the shards' authenticators
        # The keys sealing credential secrets (store/sealing.py): each shard writes credentials. They
        # reach the actors as arguments, through Ray's control plane: keep a Ray cluster private.
        self.secret_keys = list(secret_keys)
        self.db_url = db_url
        self.ray_address = ray_address
        self.event_loop = event_loop
        self.cache = cache
        self.group_commit = group_commit
        self.generation = itertools.count(1)
        self.events: list[dict] = []      # failover timeline: what happened when
        self.event_counts: dict[str, int] = {}    # events by kind, for the router's /metrics
        self.strikes: dict[str, int] = {}  # shard -> pings in a row that found it stalled or silent
        self.answered: dict[str, int] = {}  # shard -> answers it had sent at its last ping
        self.own_loop = LoopWatch()
        self._supervisor: asyncio.Task | None = None
        self._replacements: set[asyncio.Task] = set()

    async def start(self, shards: int) -> None:
        if not ray.is_initialized():
            init_ray(self.ray_address)
        await self.routing.load_assignments()
        await asyncio.gather(*(self.add_shard(f"shard-{i}") for i in range(shards)))
        self.own_loop.start()
        self._supervisor = asyncio.create_task(self._supervise())

    async def add_shard(self, name: str) -> ShardHandle:
        options = {"name": f"shardcat-{name}-{time.time_ns()}"}
        if self.event_loop == "asyncio":
            # Ray gives async actors uvloop unless their own environment says otherwise; the workers
            # of a joined cluster do not inherit this process's.
            options["runtime_env"] = {"env_vars": {"RAY_USE_UVLOOP": "0"}}
        actor = ShardActor.options(**options).remote(name, self.db_url, self.cache, self.secret_keys, self.oidc,
                                                     self.group_commit)
        # A local Ray keeps shards on loopback; on a real cluster they listen on their node's address.
        url, local_socket = await actor.start.remote("127.0.0.1" if self.ray_address is None else None)
        handle = ShardHandle(name, url, actor, local_socket=local_socket)
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
        for task in self._replacements:
            task.cancel()
        self.own_loop.stop()
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
        verdict, problem = await self._ping(handle)
        if verdict == OK:
            self.strikes.pop(handle.name, None)
            return
        if verdict == UNSURE:
            self._event("shard_check_inconclusive", shard=handle.name, error=problem)
            return
        strikes = HUNG_STRIKES if verdict == DEAD else self.strikes.get(handle.name, 0) + 1
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
        # In the background: supervision goes on meanwhile (another shard may fail too).
        task = asyncio.create_task(self._replace(f"{handle.name.split('.')[0]}.{next(self.generation)}"))
        self._replacements.add(task)
        task.add_done_callback(self._replacements.discard)

    async def _replace(self, name: str) -> None:
        await asyncio.sleep(REPLACE_AFTER)
        try:
            await self.add_shard(name)
        except Exception:
            log.exception("replacement shard %s did not start", name)

    async def _ping(self, handle: ShardHandle) -> tuple[str, str | None]:
        """The verdict on a shard (OK, SUSPECT, DEAD or UNSURE) and what is wrong with it."""
        asked = time.monotonic()
        try:
            stalled, answered = await asyncio.wait_for(handle.actor.ping.remote(), PING_TIMEOUT)
        except ray.exceptions.RayActorError as e:
            return DEAD, type(e).__name__
        except Exception as e:    # no answer in time
            silent, limit, problem = max(time.monotonic() - asked, PING_TIMEOUT), PING_TIMEOUT, type(e).__name__
        else:
            answering = answered != self.answered.get(handle.name, answered)     # first ping: no baseline yet
            self.answered[handle.name] = answered
            if stalled < HUNG_AFTER or answering:
                return OK, None
            silent, limit = stalled, HUNG_AFTER
            problem = f"serving loop stalled {stalled:.1f} s, no answer sent since the last ping"
        # Only the part of the shard's silence that this process spent running is evidence.
        own_stall = self.own_loop.stalled_since(time.monotonic() - silent)
        if silent - own_stall < limit:
            return UNSURE, f"{problem}; the supervisor itself could not run for {own_stall:.1f} s of it"
        return SUSPECT, problem

    def _event(self, kind: str, **fields) -> None:
        self.events.append({"t": time.time(), "event": kind, **fields})
        self.event_counts[kind] = self.event_counts.get(kind, 0) + 1
        log.info("%s %s", kind, fields)
