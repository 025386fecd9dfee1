"""Places shard actors over a Ray cluster's nodes and supervises them: a dead or hung shard's
metastores move at once, replacements go to live nodes, and nodes joining, leaving or drained
change where shards run.

Ray is the control plane only: it places the actors, and carries start/own/drop/ping.

Placement. Each shard is pinned to a node (Ray's node affinity, not its SPREAD strategy, which
left 6 actors 3/2/1 on three nodes: docs/cluster.md). The goal is `--shards N` spread evenly over
the eligible nodes, capped at `--shards-per-node K` per node (K per node alone: K on every node).
Eligible: alive, not drained, and, if any node offers the custom resource `shardcat_shards`,
only those that do (ray-config/ keeps shards off the head that way). A node that went silent
(its shards stopped answering pings while Ray still lists it: Ray takes 10-15 s to declare a
node dead) gets no new shard for NODE_QUARANTINE seconds unless a shard there still answers. A
goal the nodes cannot meet is reported (`placement` in the routing table, /metrics).

Supervision. Every PING_INTERVAL the supervisor pings every shard. A shard that is dead (Ray says
so at once), does not answer in time, or whose serving loop has neither run for HUNG_AFTER
seconds nor sent an answer since the last ping, on HUNG_STRIKES pings in a row, is declared
dead, as is every shard on a node Ray declares dead. All shards declared in one round are
handled together: their metastores go to the least-loaded survivors in one plan that names no
shard known dead (router/routing.py `shards_died`). A shard that is only busy, its loop turning
with a queue of requests, is left alone: the ping is answered off that loop (serving/actor.py),
and however late its beats on an overloaded machine, answers go out. One late ping is not
enough: a virtual machine may stop a process, the supervisor's too, for a second at a time; a
shard's silence counts only as far as the supervisor's own process was running meanwhile.

Replacement. REPLACE_AFTER seconds after the last death (the survivors first rebuild the moved
metastores), the supervisor starts shards where the goal is not met, on live nodes only; a
start that fails or does not finish in START_TIMEOUT is tried again, on that node after a
backoff doubling up to BACKOFF_MAX, until the goal is met again.

Node change. A node that joins raises its goal: shards start there, and each takes at once up to
a fair share (metastores / shards) of moves toward an even load; a node over its goal retires its
least-loaded surplus (emptied by warm moves, then stopped). Otherwise `rebalance` moves at most
routing.MAX_MOVES metastore per ~10 s round toward a fair share of the load. `drain(node)`
takes a node out of the goal: its shards are replaced elsewhere, emptied by warm moves (the new
owner builds the state before requests switch), and stopped RETIRE_GRACE seconds after their last
metastore left, so no request fails.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import time

import psutil
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..serving.actor import ShardActor
from ..shards.group_commit import GroupCommitConfig
from ..shards.shard import CacheConfig
from ..router.routing import RoutingTable, ShardHandle

# What a shard on a joined cluster's node must see as this process does: the addresses the catalog may call.
PASSED_SETTINGS = ("SHARDCAT_S3_COMPATIBLE_ENDPOINTS", "SHARDCAT_AZURE_STORAGE_ENDPOINTS", "SHARDCAT_S3_ENDPOINT")

log = logging.getLogger(__name__)

PING_INTERVAL = 0.25
PING_TIMEOUT = 1.5
LOCAL_START_ATTEMPTS = 3    # a local start that failed half-way is tried again, from a clean machine
HUNG_AFTER = 1.5        # seconds without a beat of a shard's serving loop: hung, not busy
HUNG_STRIKES = 2        # pings in a row that find a shard stalled or unanswering (a dead actor: at once)
REPLACE_AFTER = 3.0     # seconds from a failover to its replacement shard's start: starting a Python process
                        # would take CPU from the survivors rebuilding the moved metastores
START_TIMEOUT = 90.0    # a shard not started in this long is stopped and tried again (10-40 s seen on a shared machine)
BACKOFF_FIRST, BACKOFF_MAX = 2.0, 30.0     # seconds before a node is tried again after a failed start
NODE_QUARANTINE = 30.0  # seconds a node whose shards went silent gets no new shard (Ray declares it dead in 10-15 s)
NODE_POLL_TICKS = 4     # ping rounds between looks at Ray's node table (~1 s)
REBALANCE_TICKS = 40    # ping rounds between rebalancing rounds (~10 s); the load halves at each
RETIRE_GRACE = 2.0      # seconds from a retiring shard's last metastore leaving to its stop: requests in flight end
DRAIN_TIMEOUT = 300.0
SHARD_RESOURCE = "shardcat_shards"    # a node offering this custom resource is meant for shards (ray-config/)
OK, SUSPECT, DEAD, UNREACHABLE, UNSURE = "ok", "suspect", "dead", "unreachable", "unsure"     # a ping's verdicts


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
            # "local": a Ray of our own, never one that another process on this machine started
            # and left in /tmp/ray/ray_current_cluster (ray.init(None) would join that one).
            ray.init(address=address or "local", include_dashboard=False, log_to_driver=False, configure_logging=False,
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


def placement_goal(nodes: list[str], total: int | None, per_node: int | None,
                   current: dict[str, int], last: str | None = None) -> dict[str, int]:
    """How many shards each eligible node should run: `total` spread evenly (the odd ones on the
    nodes that already run most, so that nothing moves for nothing, and on `last`, the router's
    own node, only after the others), at most `per_node` on a node; `per_node` on every node when
    no total is asked."""
    if not nodes:
        return {}
    if total is None:
        return {n: per_node or 0 for n in nodes}
    base, extra = divmod(total, len(nodes))
    order = sorted(nodes, key=lambda n: (-current.get(n, 0), n == last, n))
    goal = {n: base + (1 if i < extra else 0) for i, n in enumerate(order)}
    return {n: min(g, per_node) for n, g in goal.items()} if per_node else goal


class RayCluster:
    def __init__(self, routing: RoutingTable, db_url: str, *, ray_address: str | None = None,
                 cache: CacheConfig = CacheConfig(), event_loop: str = "uvloop", secret_keys: list[bytes] = (),
                 oidc=None, group_commit: GroupCommitConfig = GroupCommitConfig(), shards_per_node: int | None = None,
                 webhook_allow_hosts: tuple[str, ...] = ()):
        self.routing = routing
        self.webhook_allow_hosts = webhook_allow_hosts     # each shard delivers webhooks
        self.oidc = oidc        # the identity provider's settings, for the shards' authenticators
        # The keys sealing credential secrets (store/sealing.py): each shard writes credentials. They
        # reach the actors as arguments, through Ray's control plane: keep a Ray cluster private.
        self.secret_keys = list(secret_keys)
        self.db_url = db_url
        self.ray_address = ray_address
        self.event_loop = event_loop
        self.cache = cache
        self.group_commit = group_commit
        self.total: int | None = None           # --shards: the cluster's shard count goal (None: per node only)
        self.api_url: str | None = None         # the router's public address, told to every shard (maintenance)
        self.per_node = shards_per_node          # --shards-per-node
        self.names = itertools.count()
        self.events: list[dict] = []      # failover timeline: what happened when
        self.event_counts: dict[str, int] = {}    # events by kind, for the router's /metrics
        self.strikes: dict[str, int] = {}  # shard -> pings in a row that found it stalled or silent
        self.answered: dict[str, int] = {}  # shard -> answers it had sent at its last ping
        self.own_loop = LoopWatch()
        self.nodes: dict[str, dict] = {}          # Ray node id -> {"ip", "alive", "resources"}, as last polled
        self.draining: set[str] = set()
        self.quarantined: dict[str, float] = {}   # node id -> when its shards went silent
        self.joined: set[str] = set()             # nodes that joined after the start
        self.backoff: dict[str, tuple[float, float]] = {}   # node id -> (next start allowed at, delay)
        self.starting: dict[str, int] = {}        # node id -> shard starts under way
        self.last_death = float("-inf")
        self.own_node: str | None = None          # the node this supervisor runs on
        self._supervisor: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()    # starts, retirements, rebalancing rounds
        self._retiring_task: asyncio.Task | None = None
        self._rebalancing: asyncio.Task | None = None

    async def start(self, shards: int) -> None:
        if not ray.is_initialized():
            init_ray(self.ray_address)
        self.total = shards or None
        self.own_node = ray.get_runtime_context().get_node_id()
        if self.total is None and not self.per_node:
            raise ValueError("a cluster needs --shards, --shards-per-node or both")
        await self.routing.load_assignments()
        await self._poll_nodes()
        goal = self.goal()
        if not goal:
            raise RuntimeError("no Ray node is eligible for shards")
        await asyncio.gather(*(self.add_shard(f"shard-{next(self.names)}", node)
                               for node, count in sorted(goal.items()) for _ in range(count)))
        self._publish()
        self.own_loop.start()
        self._supervisor = asyncio.create_task(self._supervise())

    # ---- placement --------------------------------------------------------

    def eligible_nodes(self) -> list[str]:
        now = time.monotonic()
        alive = {n: info for n, info in self.nodes.items() if info["alive"]}
        meant = {n for n, info in alive.items() if info["resources"].get(SHARD_RESOURCE)}
        return sorted(n for n in (meant or alive) if n not in self.draining
                      and now - self.quarantined.get(n, float("-inf")) > NODE_QUARANTINE)

    def shards_on(self, node: str) -> list[ShardHandle]:
        return [h for h in self.routing.live() if h.node_id == node]

    def goal(self) -> dict[str, int]:
        current = {n: sum(1 for h in self.routing.targets() if h.node_id == n) for n in self.nodes}
        return placement_goal(self.eligible_nodes(), self.total, self.per_node, current, self.own_node)

    async def _poll_nodes(self) -> None:
        """Ray's node table, as of now (a node Ray forgot counts as dead)."""
        found = await asyncio.wait_for(asyncio.to_thread(ray.nodes), 10.0)
        nodes = {n["NodeID"]: {"ip": n.get("NodeManagerAddress"), "alive": bool(n.get("Alive")),
                               "resources": n.get("Resources") or {}} for n in found}
        for node, info in nodes.items():
            before = self.nodes.get(node)
            if info["alive"] and before is None and self.nodes:
                self.joined.add(node)
                self._event("node_joined", node=node, ip=info["ip"])
            elif not info["alive"] and before is not None and before["alive"]:
                self._event("node_dead", node=node, ip=info["ip"])
        for node in set(self.nodes) - set(nodes):
            nodes[node] = {**self.nodes[node], "alive": False}
        self.nodes = nodes

    def _publish(self) -> None:
        """The placement as the routing table shows it (GET /shardcat/routing) and /metrics count it."""
        goal = self.goal()
        live = self.routing.live()
        self.routing.placement = {
            "shards_wanted": self.total if self.total is not None else sum(goal.values()),
            "shards_per_node": self.per_node,
            "shards_possible": sum(goal.values()),
            "shards_live": len(live),
            "nodes": {node: {"ip": info["ip"], "alive": info["alive"], "draining": node in self.draining,
                             "quarantined": node in self.quarantined and node not in self.eligible_nodes()
                             and info["alive"] and node not in self.draining,
                             "goal": goal.get(node, 0), "shards": sorted(h.name for h in live if h.node_id == node)}
                      for node, info in sorted(self.nodes.items())},
        }

    async def add_shard(self, name: str, node: str | None = None) -> ShardHandle:
        """Start a shard actor (on `node` if given) and add it to the routing table."""
        options = {"name": f"shardcat-{name}-{time.time_ns()}"}
        if node is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        env = {}
        if self.event_loop == "asyncio":
            # Ray gives async actors uvloop unless their own environment says otherwise; the workers
            # of a joined cluster do not inherit this process's.
            env["RAY_USE_UVLOOP"] = "0"
        if self.ray_address is not None:     # nor the operator's allow-lists of store endpoints
            env.update({name: os.environ[name] for name in PASSED_SETTINGS if os.environ.get(name)})
        if env:
            options["runtime_env"] = {"env_vars": env}
        actor = ShardActor.options(**options).remote(name, self.db_url, self.cache, self.secret_keys, self.oidc,
                                                     self.group_commit, self.webhook_allow_hosts)
        try:
            # A local Ray keeps shards on loopback; on a real cluster they listen on their node's address.
            url, local_socket = await self._unless_node_dies(
                actor.start.remote("127.0.0.1" if self.ray_address is None else None), node)
            node_id, node_ip, pid = await actor.where.remote()
        except BaseException:
            ray.kill(actor, no_restart=True)
            raise
        handle = ShardHandle(name, url, actor, local_socket=local_socket, node_id=node_id, node_ip=node_ip, pid=pid)
        self.routing.add_shard(handle)
        if self.api_url:        # a shard started after the router listens (a replacement) learns it here
            await actor.set_api_url.remote(self.api_url)
        self._event("shard_started", shard=name, url=url, node=node_id)
        return handle

    async def announce_api_url(self, url: str) -> None:
        """Tell every shard where the router answers: its maintenance tasks call the catalog there."""
        self.api_url = url
        await asyncio.gather(*(h.actor.set_api_url.remote(url) for h in self.routing.live()))

    async def _unless_node_dies(self, ref, node: str | None):
        """`ref`'s result; a ConnectionError if `node` is declared dead first (an actor pinned to a
        dead node may wait for it for good)."""
        async def result():
            return await ref
        waiting = asyncio.ensure_future(result())
        while True:
            done, _ = await asyncio.wait([waiting], timeout=0.5)
            if done:
                return waiting.result()
            if node is not None and not self.nodes.get(node, {}).get("alive", True):
                waiting.cancel()
                raise ConnectionError(f"node {node} died before the shard started")

    async def kill(self, name: str) -> None:
        """Kill a shard's actor outright (chaos experiments); the supervisor notices and recovers."""
        ray.kill(self.routing.shards[name].actor, no_restart=True)
        self._event("shard_killed", shard=name)

    async def drain(self, node: str) -> dict:
        """Move every metastore off a node and stop its shards (replaced elsewhere first), without a
        failed request; the node then gets no shard until the server restarts. `node`: its Ray
        node id (or a unique prefix of it). Raises LookupError for an unknown node, ValueError
        when no other node could take its shards."""
        matches = [n for n in self.nodes if n.startswith(node)] if node else []
        if len(matches) != 1:
            raise LookupError(f"No Ray node {node!r} (GET /shardcat/routing lists them).")
        node = matches[0]
        if node not in self.draining:
            others = [n for n in self.eligible_nodes() if n != node]
            if not others:
                raise ValueError(f"Node {node} is the only node that can run shards; it cannot be drained.")
            self.draining.add(node)
            self._event("node_draining", node=node)
        began, shards = time.monotonic(), sorted(h.name for h in self.shards_on(node))
        moved_before = self.event_counts.get("metastore_moved_off", 0)
        while self.shards_on(node):
            if time.monotonic() - began > DRAIN_TIMEOUT:
                raise TimeoutError(f"node {node} still runs {len(self.shards_on(node))} shard(s)")
            await asyncio.sleep(0.1)
        self._event("node_drained", node=node)
        self._publish()
        return {"node_id": node, "shards_stopped": shards, "seconds": round(time.monotonic() - began, 2),
                "metastores_moved": self.event_counts.get("metastore_moved_off", 0) - moved_before}

    async def stop(self) -> None:
        if self._supervisor:
            self._supervisor.cancel()
        for task in list(self._tasks):
            task.cancel()
        self.own_loop.stop()
        for handle in self.routing.shards.values():
            if handle.alive:
                ray.kill(handle.actor, no_restart=True)

    # ---- supervision ------------------------------------------------------

    async def _supervise(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(PING_INTERVAL)
            try:
                if ticks % NODE_POLL_TICKS == 0:
                    await self._poll_nodes()
                await self._check_all(self.routing.live())
                if self.routing.orphaned():       # a hand-over that failed (PostgreSQL down...): again
                    moved = await self.routing.shards_died([])
                    if moved:
                        self._event("metastores_reassigned", shards=[], count=len(moved))
                self._reconcile()
                self._publish()
            except Exception:   # e.g. PostgreSQL down while reassigning: keep supervising, retry next tick
                log.exception("supervisor check failed")
            ticks += 1
            if ticks % REBALANCE_TICKS == 0:      # forget old load, then even out what is left
                self.routing.decay()
                self._rebalance_soon()

    async def _check_all(self, handles: list[ShardHandle]) -> list[str]:
        """Ping these shards; declare dead, together, those found dead and every shard on a node Ray
        says is dead. Returns the names declared."""
        verdicts = await asyncio.gather(*(self._check(h) for h in handles))
        dead = [h for h, is_dead in zip(handles, verdicts) if is_dead]
        gone = {n for n, info in self.nodes.items() if not info["alive"]}
        for h in handles:
            if h.node_id in gone and h not in dead:
                self._event("shard_unresponsive", shard=h.name, error="its node is dead")
                dead.append(h)
        if not dead:
            return []
        for h in dead:
            try:
                ray.kill(h.actor, no_restart=True)
            except Exception:
                pass
        self.last_death = time.monotonic()
        names = [h.name for h in dead]
        moved = await self.routing.shards_died(names)
        self._event("metastores_reassigned", shard=names[0] if len(names) == 1 else None, shards=names,
                    count=len(moved))
        return names

    async def _check(self, handle: ShardHandle) -> bool:
        """Whether this ping round finds the shard dead (hung counts as dead)."""
        verdict, problem = await self._ping(handle)
        if verdict == OK:
            self.strikes.pop(handle.name, None)
            if handle.node_id in self.quarantined:      # its node answers after all
                self.quarantined.pop(handle.node_id, None)
            return False
        if verdict == UNSURE:
            self._event("shard_check_inconclusive", shard=handle.name, error=problem)
            return False
        strikes = HUNG_STRIKES if verdict in (DEAD, UNREACHABLE) else self.strikes.get(handle.name, 0) + 1
        if strikes < HUNG_STRIKES:
            self.strikes[handle.name] = strikes
            self._event("shard_suspect", shard=handle.name, error=problem)
            return False
        self.strikes.pop(handle.name, None)
        self.answered.pop(handle.name, None)
        if verdict != DEAD and handle.node_id not in (None, self.own_node):
            # Silence or a lost connection, not a death Ray reported: the whole node may be gone,
            # and Ray says so only 10-15 s later; a replacement placed there meanwhile would never
            # start. (Not this process's own node: it is alive, this runs on it.)
            self.quarantined[handle.node_id] = time.monotonic()
        self._event("shard_unresponsive", shard=handle.name, error=problem, node=handle.node_id)
        return True

    # ---- replacement and node change ---------------------------------------

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _reconcile(self) -> None:
        """Start shards where the goal is not met; once it is met everywhere, retire the surplus."""
        now = time.monotonic()
        if now - self.last_death < REPLACE_AFTER:      # the survivors first rebuild what moved to them
            return
        goal = self.goal()
        short = False
        for node, want in goal.items():
            have = sum(1 for h in self.routing.targets() if h.node_id == node) + self.starting.get(node, 0)
            if have < want:
                short = True
                if now >= self.backoff.get(node, (0.0, 0.0))[0]:
                    for _ in range(want - have):
                        self.starting[node] = self.starting.get(node, 0) + 1
                        self._spawn(self._start_on(node))
        if short or any(self.starting.values()) or (self._retiring_task and not self._retiring_task.done()):
            return
        surplus = []
        for node in {h.node_id for h in self.routing.targets()}:
            mine = sorted((h for h in self.routing.targets() if h.node_id == node),
                          key=lambda h: self.routing.shard_load(h.name))
            surplus += mine[:max(0, len(mine) - goal.get(node, 0))]
        if surplus and len(self.routing.targets()) > len(surplus):
            self._retiring_task = self._spawn(self._retire(surplus))

    async def _start_on(self, node: str) -> None:
        name = f"shard-{next(self.names)}"
        try:
            await asyncio.wait_for(self.add_shard(name, node), START_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            delay = min(self.backoff.get(node, (0.0, BACKOFF_FIRST / 2))[1] * 2, BACKOFF_MAX)
            self.backoff[node] = (time.monotonic() + delay, delay)
            self._event("shard_start_failed", shard=name, node=node, error=type(e).__name__, retry_in=delay)
        else:
            self.backoff.pop(node, None)
            if node in self.joined:     # a new node's shard takes its fair share at once
                self._spawn(self._fill())
        finally:
            self.starting[node] -= 1

    async def _retire(self, shards: list[ShardHandle]) -> None:
        """Empty these shards by warm moves, then stop them once requests in flight had time to end."""
        names = {h.name for h in shards}
        self._event("shards_retiring", shards=sorted(names))
        try:
            moved = await self.routing.empty(names)
        except Exception as e:        # a target died meanwhile: keep the shards, try again next round
            log.warning("retiring %s: %s", sorted(names), e)
            for h in shards:
                h.retiring = False
            return
        for _ in moved:
            self._event_count("metastore_moved_off")
        await asyncio.sleep(RETIRE_GRACE)
        for h in shards:
            await self.routing.shards_died([h.name])     # owns nothing now: nothing moves
            try:
                ray.kill(h.actor, no_restart=True)
            except Exception:
                pass
            self._event("shard_retired", shard=h.name, node=h.node_id, moved=len(moved))

    async def _fill(self) -> None:
        """Rebalancing moves, at most a fair share by count (metastores / shards), right away: a
        joined node's shard gets its share without waiting for the ~10 s rounds, and no more moves
        than that share (bounded churn)."""
        share = -(-len(self.routing.owner) // max(1, len(self.routing.targets())))
        moved = await self.routing.rebalance(max_moves=share)
        if moved:
            self._event("rebalanced", metastores=moved, count=len(moved))

    def _rebalance_soon(self) -> None:
        if self._rebalancing is None or self._rebalancing.done():
            self._rebalancing = self._spawn(self._rebalance())

    async def _rebalance(self) -> None:
        moved = await self.routing.rebalance()
        if moved:
            self._event("rebalanced", metastores=moved, count=len(moved))

    async def _ping(self, handle: ShardHandle) -> tuple[str, str | None]:
        """The verdict on a shard (OK, SUSPECT, DEAD, UNREACHABLE or UNSURE) and what is wrong with it."""
        asked = time.monotonic()
        try:
            stalled, answered = await asyncio.wait_for(handle.actor.ping.remote(), PING_TIMEOUT)
        except ray.exceptions.ActorUnavailableError as e:     # its process or its node is gone
            return UNREACHABLE, type(e).__name__
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
        self._event_count(kind)
        log.info("%s %s", kind, fields)

    def _event_count(self, kind: str) -> None:
        self.event_counts[kind] = self.event_counts.get(kind, 0) + 1
