"""The supervisor's verdict on a shard: one late ping makes it a suspect, HUNG_STRIKES in a row
make it hung, a dead actor is declared at once (and replaced a little later), a good ping
clears the suspicion, a shard whose loop beats late but still sends answers is busy, not hung,
and a check during which the supervisor's own process stalled proves nothing."""

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

    async def shard_died(self, name):
        self.died.append(name)
        return []


@pytest.fixture
def supervisor(monkeypatch):
    monkeypatch.setattr(ray, "kill", lambda *a, **k: None)
    monkeypatch.setattr(ray_cluster, "REPLACE_AFTER", 0.0)
    cluster = RayCluster(FakeRouting(), "postgresql://unused")
    added: list[str] = []

    async def add_shard(name):
        added.append(name)
    monkeypatch.setattr(cluster, "add_shard", add_shard)
    return cluster, added


def check(cluster, handle, times):
    async def run():
        for _ in range(times):
            await cluster._check(handle)
        for replacement in list(cluster._replacements):
            await replacement
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

    async def run():
        started = time.monotonic()
        await cluster._check(handle)
        assert cluster.routing.died == ["shard-0"] and added == [] and time.monotonic() - started < 0.3
        await asyncio.sleep(0.5)
        assert added == ["shard-0.1"]
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
            await cluster._check(handle)
        cluster.own_loop.stop()
    asyncio.run(run())
    assert kinds(cluster) == ["shard_check_inconclusive"] * (2 * HUNG_STRIKES)
    assert cluster.routing.died == [] and cluster.strikes == {} and added == []


def test_a_hang_longer_than_the_supervisors_own_stall_is_still_a_hang(supervisor):
    cluster, added = supervisor
    # A minute's hang: longer than anything this test's own process could be stopped for, even on a
    # host that holds the machine back for seconds (which the supervisor rightly counts as shared).
    handle = ShardHandle("shard-0", "http://x", FakeActor([stalls_with_the_machine(0.8, 60.0)] * HUNG_STRIKES))

    async def run():
        cluster.own_loop.start()
        for _ in range(HUNG_STRIKES):
            await cluster._check(handle)
        cluster.own_loop.stop()
        for replacement in list(cluster._replacements):
            await replacement
    asyncio.run(run())
    assert kinds(cluster)[-2:] == ["shard_unresponsive", "metastores_reassigned"]
    assert cluster.routing.died == ["shard-0"] and len(added) == 1
