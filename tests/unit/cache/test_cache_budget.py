"""One bound over all of a shard's metastore caches (cache/budget.py): it is never exceeded, whatever
the caches do; the cache of the metastore used least recently gives first; a shard's caches share it."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from shardcat.cache.budget import CacheBudget
from shardcat.cache.metastore_cache import MISS, MetastoreCache, asset_size
from shardcat.entities.asset import Asset
from shardcat.shards.shard import CacheConfig, Shard
from shardcat.store.memory import MemoryStore

PARENT = str(uuid.uuid4())


def _table(i: int, pad: int, at: int) -> Asset:
    return Asset(id=f"00000000-0000-0000-0000-{i:012d}", metastore_id="m", type="table", namespace="table",
                 parent_id=PARENT, name=f"t{i}", full_name=f"c.s.t{i}", storage_path=None,
                 info={"comment": "x" * pad}, written_at=at)


ops = st.lists(st.tuples(st.sampled_from(["fill", "get", "write", "list", "clear", "forget"]),
                         st.integers(0, 3), st.integers(0, 40), st.integers(0, 3000)), max_size=60)


@settings(max_examples=80, deadline=None)
@given(ops=ops, bound=st.integers(0, 40_000))
def test_the_caches_together_never_pass_the_bound(ops, bound):
    budget = CacheBudget(bound)
    caches = [MetastoreCache(0, max_bytes=1 << 30, budget=budget) for _ in range(4)]
    live = set(range(4))
    for op, k, i, pad in ops:
        cache = caches[k]
        if op == "fill":
            cache.fill([_table(i, pad, cache.version)], cache.version)
        elif op == "get":
            cache.get(_table(i, 0, 0).id, cache.version)
        elif op == "write":
            cache.apply_write(cache.version + 1, [_table(i, pad, cache.version + 1)], [])
        elif op == "list":
            cache.fill_children(PARENT, "table", [_table(j, pad, cache.version) for j in range(i % 5)], cache.version)
        elif op == "clear":
            cache.clear(cache.version + 1)
        elif op == "forget":
            budget.forget(cache)
            live.discard(k)
            caches[k] = MetastoreCache(cache.version, max_bytes=1 << 30, budget=budget)
            live.add(k)
        assert budget.used <= bound
        assert budget.used >= sum(caches[j].bytes for j in live)      # reads may only shrink a cache
        for c in caches:
            c._audit()
    for c in caches:
        c._shrink()             # settles what reads freed
    assert budget.used == sum(c.bytes for c in caches) <= bound


def test_the_least_recently_used_metastore_gives_first():
    one = asset_size(_table(0, 100, 0))
    budget = CacheBudget(6 * one)
    idle, busy, new = (MetastoreCache(0, budget=budget) for _ in range(3))
    idle.fill([_table(i, 100, 0) for i in range(3)], 0)
    busy.fill([_table(i, 100, 0) for i in range(10, 13)], 0)
    assert budget.used == 6 * one and idle.stats()["entries"] == 3
    busy.get(_table(10, 0, 0).id, 0)                   # busy is used after idle
    new.fill([_table(20, 100, 0), _table(21, 100, 0)], 0)
    assert idle.stats()["entries"] == 1 and busy.stats()["entries"] == 3 and new.stats()["entries"] == 2
    assert idle.get(_table(2, 0, 0).id, 0) is not MISS   # its own least recently used went first
    assert budget.used == 6 * one and budget.evictions == 2


def test_a_shard_bounds_all_its_metastores_caches_together():
    async def scenario():
        store = MemoryStore()
        table = _table(0, 500, 0)
        bound = 5 * asset_size(table)
        shard = Shard(store, "bounded", cache=CacheConfig(max_bytes=bound))
        metastores = []
        for n in range(4):
            ms = str(uuid.uuid4())
            await store.create_metastore(ms, f"m{n}", {"storage_root": f"file:///w/{n}", "owner": "admin"})
            async with store.write(ms, 0) as tx:
                for i in range(4):
                    await tx.put(Asset(id=str(uuid.uuid4()), metastore_id=ms, type="table", namespace="table",
                                       parent_id=ms, name=f"t{i}", full_name=f"c.s.t{i}", storage_path=None,
                                       info={"comment": "x" * 500}), new=True)
            metastores.append(ms)
        for _ in range(3):
            for ms in metastores:
                for i in range(4):
                    found = await shard.lookup(ms, "table", f"c.s.t{i}")
                    assert found is not None and found.full_name == f"c.s.t{i}"      # answers stay right
                    assert shard.budget.used <= bound
        caches = [shard.states[ms].cache for ms in metastores]
        assert shard.budget.used == sum(c.bytes for c in caches)
        assert sum(c.stats()["evictions"] for c in caches) > 0
        shard.drop(metastores[0])                          # moved away: its bytes leave the bound
        assert shard.budget.used == sum(c.bytes for c in caches[1:])

    asyncio.run(scenario())


def test_metrics_show_the_hit_ratio_the_bound_and_each_metastores_bytes_and_idle_evictions():
    from shardcat.serving.metrics import add_caches
    from shardcat.web.metrics import Figures, exposition

    async def scenario():
        store = MemoryStore()
        now = [0.0]
        shard = Shard(store, "figures", cache=CacheConfig(max_bytes=1 << 20, idle_timeout=60), clock=lambda: now[0])
        hot, idle = str(uuid.uuid4()), str(uuid.uuid4())
        for n, ms in enumerate((hot, idle)):
            await store.create_metastore(ms, f"m{n}", {"storage_root": f"file:///w/{n}", "owner": "admin"})
            async with store.write(ms, 0) as tx:
                await tx.put(Asset(id=str(uuid.uuid4()), metastore_id=ms, type="table", namespace="table",
                                   parent_id=ms, name="t", full_name="c.s.t", storage_path=None, info={}), new=True)
            for _ in range(3):
                await shard.lookup(ms, "table", "c.s.t")        # a miss, then two hits
            await shard.warmed(ms)
        figures = Figures()
        add_caches(figures, shard)
        assert figures.gauges["cache_hit_ratio"] == 4 / 6 and figures.gauges["cache_bound_bytes"] == 1 << 20
        assert figures.labelled["cache_metastore_bytes"] == {ms: shard.states[ms].cache.bytes for ms in (hot, idle)}
        assert figures.gauges["metastores_warm"] == 2 and figures.gauges["metastores_paths_in_db"] == 0
        big = Shard(store, "big", cache=CacheConfig(path_index_max=0))    # any path is too many for a whole index
        async with store.write(hot, await store.metastore_version(hot)) as tx:
            await tx.put(Asset(id=str(uuid.uuid4()), metastore_id=hot, type="table", namespace="table", parent_id=hot,
                               name="p", full_name="c.s.p", storage_path="file:///w/0/p", info={}), new=True)
        await big.warmed(hot)
        in_db = Figures()
        add_caches(in_db, big)
        assert in_db.gauges["metastores_paths_in_db"] == 1
        now[0] += 100
        assert shard.evict_idle(keep={hot}) == 1
        figures = Figures()
        add_caches(figures, shard)
        figures.counters["idle_evictions"] = shard.stats["idle_evictions"]
        assert set(figures.labelled["cache_metastore_bytes"]) == {hot} and figures.gauges["metastores_warm"] == 1
        text = exposition([({}, figures)]).decode()
        assert f'shardcat_cache_metastore_bytes{{metastore="{hot}"}}' in text and idle not in text
        assert "shardcat_idle_evictions_total 1.0" in text and "shardcat_cache_hit_ratio" in text

    asyncio.run(scenario())
