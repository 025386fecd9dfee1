"""The supervisor's verdict on a shard: one late ping makes it a suspect, HUNG_STRIKES in a row
make it hung, a dead actor is replaced at once, a good ping clears the suspicion, and a shard
whose loop beats late but still sends answers is busy, not hung."""

from __future__ import annotations

import asyncio

import pytest
import ray

from shardcat.cluster.ray_cluster import HUNG_AFTER, HUNG_STRIKES, RayCluster
from shardcat.router.routing import ShardHandle


class Pings:
    """Stands in for an actor's `ping` method: answers (or raises) from a script, one per call.
    A number is the loop's stall with no new answer sent; a tuple is (stall, answers sent)."""

    def __init__(self, script):
        self.script = list(script)

    def remote(self):
        answer = self.script.pop(0)
        if isinstance(answer, (int, float)):
            answer = (answer, 0)

        async def reply():
            if isinstance(answer, BaseException):
                raise answer
            return answer
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


def test_a_dead_actor_is_replaced_at_once(supervisor):
    cluster, added = supervisor
    handle = ShardHandle("shard-0", "http://x", FakeActor([ray.exceptions.RayActorError()]))
    check(cluster, handle, 1)
    assert kinds(cluster) == ["shard_unresponsive", "metastores_reassigned"]
    assert cluster.routing.died == ["shard-0"] and len(added) == 1


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
