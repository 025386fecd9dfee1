"""The supervisor's verdict on a shard: one late ping makes it a suspect, HUNG_STRIKES in a row
make it hung, a dead actor is declared at once (and replaced a little later, on a live node), a
good ping clears the suspicion, a shard whose loop beats late but still sends answers is busy,
not hung, and a check during which the supervisor's own process stalled proves nothing. Shards
found dead in one round are handed to the routing table together; the placement goal spreads
shards evenly over the eligible nodes; a failed start is tried again after a growing backoff."""

from __future__ import annotations

import asyncio
import time

import pytest
import ray

from shardcat.cluster import ray_cluster
from shardcat.cluster.ray_cluster import HUNG_AFTER, HUNG_STRIKES, LoopWatch, RayCluster
from shardcat.router.routing import ShardHandle


class Pings:
    """Stands in for an actor's `ping` method: answers (or raises) from a script, one per call.
    A number is the loop's stall with no new answer sent; a tuple is (stall, answers sent); a
    function is called for the answer when the ping is awaited."""

    def __init__(self, script):
        self.script = list(script)

    def remote(self):
        answer = self.script.pop(0)

        async def reply():
            result = answer() if callable(answer) else answer
            if isinstance(result, BaseException):
                raise result
            return (result, 0) if isinstance(result, (int, float)) else result
        return reply()


class FakeActor:
    def __init__(self, script):
        self.ping = Pings(script)


class FakeRouting:
    def __init__(self):
        self.died: list[str] = []
        self.rounds: list[list[str]] = []
        self.handles: list[ShardHandle] = []

    async def shards_died(self, names):
        self.died.extend(names)
        self.rounds.append(list(names))
        for h in self.handles:
            if h.name in names:
                h.alive = False
        return []

    def live(self):
        return [h for h in self.handles if h.alive]

    def targets(self):
        return [h for h in self.handles if h.alive and not h.retiring]

    def shard_load(self, name):
        return 0.0

    async def rebalance(self):
        return []


@pytest.fixture
def supervisor(monkeypatch):
    monkeypatch.setattr(ray, "kill", lambda *a, **k: None)
    monkeypatch.setattr(ray_cluster, "REPLACE_AFTER", 0.0)
    cluster = RayCluster(FakeRouting(), "postgresql://unused")
    cluster.total = 1
    cluster.nodes = {"node-a": {"ip": "127.0.0.1", "alive": True, "resources": {}}}
    cluster.own_node = "node-a"           # the supervisor's own node: alive while it runs
    added: list[str] = []

    async def add_shard(name, node=None):
        added.append(name)
        cluster.routing.handles.append(ShardHandle(name, "http://y", None, node_id=node))
    monkeypatch.setattr(cluster, "add_shard", add_shard)
    return cluster, added


def check(cluster, handle, times):
    """`times` ping rounds of one shard, then the supervisor's replacement step, run to its end."""
    handle.node_id = handle.node_id or "node-a"
    if handle not in cluster.routing.handles:
        cluster.routing.handles.append(handle)

    async def run():
        for _ in range(times):
            await cluster._check_all([handle])
        cluster._reconcile()
        for task in list(cluster._tasks):
            await task
    asyncio.run(run())


def kinds(cluster):
    return [e["event"] for e in cluster.events]


def test_one_late_ping_is_only_a_suspicion(supervisor):
    cluster, added = supervisor
    handle = ShardHandle("shard-0", "http://x", FakeActor([HUNG_AFTER + 0.5, 0.1, HUNG_AFTER + 0.5, 0.1]))
    check(cluster, handle, 4)
    assert kinds(cluster) == ["shard_suspect", "shard_suspect"]
    assert cluster.routing.died == [] and added == []


def test_stalled_in_a_row_is_hung(supervisor):
    cluster, added = supervisor
    handle = ShardHandle("shard-0", "http://x", FakeActor([HUNG_AFTER + 0.5] * (HUNG_STRIKES - 1) + [asyncio.TimeoutError()]))
    check(cluster, handle, HUNG_STRIKES)
    assert kinds(cluster)[-2:] == ["shard_unresponsive", "metastores_reassigned"]
    assert cluster.routing.died == ["shard-0"] and len(added) == 1 and cluster.strikes == {}


def test_a_dead_actor_is_declared_at_once(supervisor):
    cluster, added = supervisor
    handle = ShardHandle("shard-0", "http://x", FakeActor([ray.exceptions.RayActorError()]))
    check(cluster, handle, 1)
    assert kinds(cluster) == ["shard_unresponsive", "metastores_reassigned"]
    assert cluster.routing.died == ["shard-0"] and len(added) == 1


def test_the_replacement_starts_after_the_survivors_had_their_head_start(supervisor, monkeypatch):
    """The check returns once the metastores moved; the replacement's start waits REPLACE_AFTER."""
    cluster, added = supervisor
    monkeypatch.setattr(ray_cluster, "REPLACE_AFTER", 0.3)
    handle = ShardHandle("shard-0", "http://x", FakeActor([ray.exceptions.RayActorError()]))

    cluster.routing.handles.append(handle)

    async def run():
        started = time.monotonic()
        await cluster._check_all([handle])
        cluster._reconcile()
        assert cluster.routing.died == ["shard-0"] and added == [] and time.monotonic() - started < 0.3
        await asyncio.sleep(0.5)
        cluster._reconcile()
        for task in list(cluster._tasks):
            await task
        assert len(added) == 1 and cluster.routing.handles[-1].node_id == "node-a"
    asyncio.run(run())


def test_answers_in_time_are_left_alone(supervisor):
    cluster, added = supervisor
    handle = ShardHandle("shard-0", "http://x", FakeActor([0.1, HUNG_AFTER - 0.01, 0.0]))
    check(cluster, handle, 3)
    assert cluster.events == [] and cluster.routing.died == [] and added == []


def test_a_loop_late_but_still_answering_is_busy_not_hung(supervisor):
    cluster, added = supervisor
    late = HUNG_AFTER + 1.0
    handle = ShardHandle("shard-0", "http://x", FakeActor([(0.1, 5)] + [(late, n) for n in (10, 25, 40, 41)]
                                                           + [(late, 41)] * HUNG_STRIKES))
    check(cluster, handle, 5)
    assert cluster.events == [] and cluster.routing.died == [] and added == []
    check(cluster, handle, HUNG_STRIKES)        # the answers stop while the loop stays stalled: hung
    assert kinds(cluster)[-2:] == ["shard_unresponsive", "metastores_reassigned"]
    assert cluster.routing.died == ["shard-0"] and cluster.answered == {}


def test_the_loop_watch_sees_its_own_process_stall():
    async def run():
        watch = LoopWatch()
        watch.start()
        await asyncio.sleep(0.2)
        before = time.monotonic()
        time.sleep(0.8)                         # the loop cannot run, as when the machine stops the process
        assert watch.stalled_since(before) >= 0.6   # seen at once, before the watch itself has run again
        await asyncio.sleep(0.2)
        assert watch.stalled_since(before) >= 0.6   # and remembered after
        assert watch.stalled_since(time.monotonic() + 1) == 0
        watch.stop()
    asyncio.run(run())


def stalls_with_the_machine(seconds, answer):
    """A ping during which the supervisor's process stops too (here: its loop is blocked)."""
    def ping():
        time.sleep(seconds)
        return answer
    return ping


def test_silence_the_supervisor_shared_is_no_evidence(supervisor):
    cluster, added = supervisor
    # The shard's loop stalled 2 s / the ping went unanswered, but the supervisor was stopped for
    # 0.8 s of it: what it saw of the silence is under the limit.
    shared = [stalls_with_the_machine(0.8, HUNG_AFTER + 0.5), stalls_with_the_machine(0.8, asyncio.TimeoutError())]
    handle = ShardHandle("shard-0", "http://x", FakeActor(shared * HUNG_STRIKES))

    async def run():
        cluster.own_loop.start()
        for _ in range(2 * HUNG_STRIKES):
            await cluster._check_all([handle])
        cluster.own_loop.stop()
    asyncio.run(run())
    assert kinds(cluster) == ["shard_check_inconclusive"] * (2 * HUNG_STRIKES)
    assert cluster.routing.died == [] and cluster.strikes == {} and added == []


def test_a_hang_longer_than_the_supervisors_own_stall_is_still_a_hang(supervisor):
    cluster, added = supervisor
    # A minute's hang: longer than anything this test's own process could be stopped for, even on a
    # host that holds the machine back for seconds (which the supervisor rightly counts as shared).
    handle = ShardHandle("shard-0", "http://x", FakeActor([stalls_with_the_machine(0.8, 60.0)] * HUNG_STRIKES))

    cluster.routing.handles.append(handle)

    async def run():
        cluster.own_loop.start()
        for _ in range(HUNG_STRIKES):
            await cluster._check_all([handle])
        cluster.own_loop.stop()
    asyncio.run(run())
    assert kinds(cluster)[-2:] == ["shard_unresponsive", "metastores_reassigned"]
    assert cluster.routing.died == ["shard-0"]


def two_nodes(cluster):
    cluster.total = 4
    cluster.nodes = {n: {"ip": "127.0.0.1", "alive": True, "resources": {}} for n in ("node-a", "node-b")}


def test_shards_dead_in_one_round_are_handed_over_together(supervisor):
    """Two deaths at once (a whole node) make one plan, never a plan naming the other dead shard."""
    cluster, added = supervisor
    two_nodes(cluster)
    a0 = ShardHandle("shard-0", "http://x", FakeActor([ray.exceptions.RayActorError()]), node_id="node-a")
    a1 = ShardHandle("shard-1", "http://x", FakeActor([ray.exceptions.RayActorError()]), node_id="node-a")
    b2 = ShardHandle("shard-2", "http://x", FakeActor([0.0]), node_id="node-b")
    cluster.routing.handles += [a0, a1, b2]
    asyncio.run(cluster._check_all([a0, a1, b2]))
    assert cluster.routing.rounds == [["shard-0", "shard-1"]]
    assert kinds(cluster) == ["shard_unresponsive", "shard_unresponsive", "metastores_reassigned"]


def test_every_shard_on_a_node_ray_declares_dead_is_declared(supervisor):
    cluster, added = supervisor
    two_nodes(cluster)
    cluster.nodes["node-a"]["alive"] = False
    a0 = ShardHandle("shard-0", "http://x", FakeActor([0.0]), node_id="node-a")      # still answers
    b1 = ShardHandle("shard-1", "http://x", FakeActor([0.0]), node_id="node-b")
    cluster.routing.handles += [a0, b1]
    asyncio.run(cluster._check_all([a0, b1]))
    assert cluster.routing.rounds == [["shard-0"]]


def test_replacements_go_to_live_nodes_only_and_a_silent_node_is_avoided(supervisor):
    cluster, added = supervisor
    two_nodes(cluster)
    # Both shards of node-b go silent (the node is gone, Ray has not said so yet); node-a's answer.
    a = [ShardHandle(f"shard-{i}", "http://x", FakeActor([asyncio.TimeoutError()] * HUNG_STRIKES), node_id="node-b")
         for i in (0, 1)]
    b = [ShardHandle(f"shard-{i}", "http://x", FakeActor([0.0] * HUNG_STRIKES), node_id="node-a") for i in (2, 3)]
    cluster.routing.handles += a + b

    async def run():
        for _ in range(HUNG_STRIKES):
            await cluster._check_all(cluster.routing.live())
        cluster._reconcile()
        for task in list(cluster._tasks):
            await task
    asyncio.run(run())
    assert cluster.routing.rounds == [["shard-0", "shard-1"]]
    assert "node-b" not in cluster.eligible_nodes()
    assert [h.node_id for h in cluster.routing.live()] == ["node-a"] * 4 and len(added) == 2


def test_a_failed_start_is_tried_again_after_a_growing_backoff(supervisor, monkeypatch):
    cluster, added = supervisor
    monkeypatch.setattr(ray_cluster, "BACKOFF_FIRST", 0.2)
    tries = []

    async def failing(name, node=None):
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise ConnectionError("node went away")
        cluster.routing.handles.append(ShardHandle(name, "http://y", None, node_id=node))
    monkeypatch.setattr(cluster, "add_shard", failing)

    async def run():
        deadline = time.monotonic() + 5
        while not cluster.routing.live():
            assert time.monotonic() < deadline
            cluster._reconcile()
            await asyncio.sleep(0.02)
    asyncio.run(run())
    assert len(tries) == 3 and kinds(cluster).count("shard_start_failed") == 2
    assert tries[1] - tries[0] >= 0.2 and tries[2] - tries[1] >= 0.4      # doubling
    assert "node-a" not in cluster.backoff                                   # cleared by the success


def test_the_goal_spreads_shards_evenly_and_caps_them_per_node():
    goal = ray_cluster.placement_goal
    assert goal(["a", "b", "c"], 6, None, {}) == {"a": 2, "b": 2, "c": 2}
    # the odd shard stays where shards already run: nothing moves for nothing
    assert goal(["a", "b", "c"], 4, None, {"c": 2, "a": 1, "b": 1}) == {"a": 1, "b": 1, "c": 2}
    assert goal(["a", "b", "c"], 4, None, {}, last="a") == {"a": 1, "b": 2, "c": 1}   # the router's node last
    assert goal(["a", "b"], 6, 2, {}) == {"a": 2, "b": 2}            # capped: 4 of 6 possible
    assert goal(["a", "b"], None, 3, {}) == {"a": 3, "b": 3}         # per node alone
    assert goal([], 4, None, {}) == {}


def test_nodes_offering_the_shard_resource_are_the_only_ones_eligible(supervisor):
    """ray-config/ starts the workers with `shardcat_shards`: then the head (no resource) gets none."""
    cluster, _ = supervisor
    cluster.nodes = {"head": {"ip": "10.0.0.1", "alive": True, "resources": {"CPU": 8.0}},
                     "w1": {"ip": "10.0.0.2", "alive": True, "resources": {"CPU": 8.0, ray_cluster.SHARD_RESOURCE: 1.0}},
                     "w2": {"ip": "10.0.0.3", "alive": False, "resources": {ray_cluster.SHARD_RESOURCE: 1.0}}}
    assert cluster.eligible_nodes() == ["w1"]
    cluster.nodes["w1"]["resources"] = {"CPU": 8.0}         # nobody offers it: every live node
    assert cluster.eligible_nodes() == ["head", "w1"]
    cluster.draining.add("w1")
    assert cluster.eligible_nodes() == ["head"]


def balance(owner: dict[str, str], load: dict[str, float], shards=("a", "b", "c"), max_moves=4):
    from shardcat.router.routing import RoutingTable
    routing = RoutingTable(None)
    for name in shards:
        routing.add_shard(ShardHandle(name, f"http://{name}", None))
    routing.owner, routing.load = dict(owner), dict(load)
    return routing.balance_plan(max_moves)


def test_rebalancing_evens_load_in_bounded_moves_and_isolates_a_hot_metastore():
    # Shard a: one hot metastore and three cold ones; b and c empty. The cold ones leave, the hot stays.
    plan = balance({"hot": "a", "c1": "a", "c2": "a", "c3": "a"}, {"hot": 90.0, "c1": 3.0, "c2": 3.0, "c3": 3.0})
    assert "hot" not in [m for m, _ in plan] and sorted(m for m, _ in plan) == ["c1", "c2", "c3"]
    assert {t for _, t in plan} <= {"b", "c"}
    # Bounded: at most max_moves, however lopsided.
    many = {f"m{i}": "a" for i in range(20)}
    assert len(balance(many, {}, max_moves=3)) == 3
    # Two equally hot metastores on one shard, an empty shard beside: one of them moves.
    assert len(balance({"h1": "a", "h2": "a", "x": "b"}, {"h1": 50.0, "h2": 50.0, "x": 50.0}, max_moves=1)) == 1
    # Balanced within BALANCED_WITHIN: nothing moves; a lone metastore never moves.
    assert balance({"m1": "a", "m2": "b", "m3": "c"}, {"m1": 10.0, "m2": 9.0, "m3": 11.0}) == []
    assert balance({"m1": "a"}, {"m1": 100.0}) == []


class Owning:
    """Stands in for a shard actor's `own` and `drop`: records what it was told."""

    def __init__(self):
        self.owned: list[str] = []

    @property
    def own(self):
        return self

    @property
    def drop(self):
        return self

    def remote(self, metastores, warm=False):
        self.owned.extend(metastores)

        async def done():
            return None
        return done()


class AssignmentsKept:
    """Stands in for the Store's assignment writes (the routing table writes them before it tells a shard)."""

    async def assign_shard(self, metastore_id, shard):
        pass

    async def assign_shards(self, plan):
        pass


async def test_a_hot_metastore_ends_with_a_shard_of_its_own_and_new_or_orphaned_ones_go_elsewhere():
    """docs/cluster.md "Load, and a hot metastore's own shard": round after round (at most MAX_MOVES
    moves each, as `rebalance` makes them every ~10 s), the hot metastore's neighbours leave and it
    stays, until it has its shard to itself; that shard, though far above the fair share, is then
    left alone; a new metastore and a dead shard's metastores go to the least-loaded shards, not to it."""
    from shardcat.router.routing import MAX_MOVES, RoutingTable
    routing = RoutingTable(AssignmentsKept())
    for name in ("a", "b", "c"):
        routing.add_shard(ShardHandle(name, f"http://{name}", Owning()))
    routing.owner = {"hot": "a", "c1": "a", "c2": "a", "c3": "a", "c4": "b", "c5": "c"}
    routing.load = {"hot": 90.0, **{f"c{i}": 3.0 for i in range(1, 6)}}
    rounds = []
    while plan := routing.balance_plan():
        assert len(plan) <= MAX_MOVES and "hot" not in [m for m, _ in plan], plan
        for metastore, target in plan:
            routing.owner[metastore] = target
        rounds.append(plan)
        assert len(rounds) < 10, rounds
    assert len(rounds) == 3                                 # c1, c2, c3: one a round
    assert routing.owner["hot"] == "a" and [m for m, s in routing.owner.items() if s == "a"] == ["hot"]
    assert routing.shard_load("a") > 2 * sum(map(routing.shard_load, "abc")) / 3     # far above the fair share
    assert routing.balance_plan(max_moves=10) == []         # and yet nothing more moves: it is alone
    # A new metastore goes to the least-loaded shard, never to the hot one's.
    target = await routing.shard_for("new", cost=0)
    assert target.name != "a" and routing.owner["new"] == target.name
    # A shard dies: its metastores go to the least-loaded survivor, none to the hot one's shard.
    other = "b" if target.name == "c" else "c"
    orphans = sorted(m for m, s in routing.owner.items() if s == other)
    moved = await routing.shards_died([other])
    assert sorted(moved) == orphans and {routing.owner[m] for m in orphans} == {target.name}
    assert [m for m, s in routing.owner.items() if s == "a"] == ["hot"]


def test_ties_go_to_the_shard_whose_node_carries_the_least_so_a_joined_node_gets_metastores():
    """An empty replacement beside busy shards and a joined node's new, empty shard: the new one takes
    the move (a node that joins gets metastores; the issue's multinode run once gave it none)."""
    from shardcat.router.routing import RoutingTable
    routing = RoutingTable(None)
    for name, node in (("a", "n1"), ("replacement", "n1"), ("b", "n2"), ("new", "n3")):
        routing.add_shard(ShardHandle(name, f"http://{name}", None, node_id=node))
    assert routing.least_loaded({"a": 5.0, "replacement": 0.0, "b": 9.0, "new": 0.0}) == "new"
    assert routing.least_loaded({"a": 5.0, "replacement": 0.0, "b": 0.0}) == "b"        # n2 carries nothing
    assert routing.least_loaded({"a": 5.0, "replacement": 0.0, "b": 9.0}) == "replacement"
    assert routing.least_loaded({"a": 1.0, "b": 2.0}) == "a"                                    # no tie: the least
    routing.owner = {"m1": "a", "m2": "a", "m3": "b"}
    routing.load = {"m1": 4.0, "m2": 4.0, "m3": 4.0}
    assert routing.balance_plan(max_moves=1) == [("m1", "new")]       # not to the replacement beside a
