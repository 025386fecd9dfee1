"""Tests for a cached asset's one record (cache/chains.py) and what it saves the cache (issue #48)."""

from __future__ import annotations

import gc
import tracemalloc

from shardcat.cache.chains import Record
from shardcat.cache.compact import share_asset
from shardcat.cache.metastore_cache import MISS, MetastoreCache
from shardcat.entities.asset import Asset


def mk(asset_id, full_name, at, *, parent="s1"):
    return Asset(id=asset_id, metastore_id="m", type="table", namespace="table", parent_id=parent,
                 name=full_name.rsplit(".", 1)[-1], full_name=full_name, storage_path=None,
                 info={"full_name": full_name}, written_at=at)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_record_keeps_its_newest_state_inline_and_older_ones_until_pruned():
    a1, a2, a3 = mk("a", "c.s.a", 1), mk("a", "c.s.b", 4), mk("a", "c.s.b", 6)
    rec = Record(1, a1, 10)
    assert rec.older is None and rec.count == 1 and rec.total == 10 and rec.find(0) is None
    rec.push(4, a2, 20, now=100.0)
    rec.push(6, a3, 30, now=200.0)
    assert [s.value for s in rec.states()] == [a1, a2, a3] and rec.oldest_at == 1
    assert rec.find(3).value is a1 and rec.find(5).value is a2 and rec.find(9) is rec
    assert rec.count == 3 and rec.total == 60
    assert rec.prune(150.0) == (1, 10)         # retired at 100: gone; retired at 200: kept
    assert rec.find(3) is None and rec.find(4).value is a2 and rec.oldest_at == 4
    assert rec.prune(1e9) == (1, 20) and rec.older is None and rec.count == 1 and rec.total == 30


def test_a_record_names_one_key_without_a_container_and_more_in_a_list():
    rec = Record(1, mk("a", "c.s.a", 1), 10)
    assert rec.name_keys() == ()
    rec.add_name(("table", "c.s.a"))
    rec.add_name(("table", "c.s.a"))
    assert rec.names == ("table", "c.s.a") and rec.name_keys() == (("table", "c.s.a"),)
    rec.add_name(("table", "c.s.b"))
    rec.add_name(("table", "c.s.a"))
    assert rec.name_keys() == (("table", "c.s.a"), ("table", "c.s.b"))


def test_a_name_leaves_its_holder_record_for_a_chain_and_older_snapshots_still_answer():
    """A name held by one cached asset points at its record; a rename, a drop and a new holder give
    it a chain of holders, and each snapshot still reads who held it then."""
    clock = Clock()
    cache = MetastoreCache(1, clock=clock)
    a = mk("a", "c.s.x", 1)
    cache.fill([a], 1)
    assert cache.get_by_name("table", "c.s.x", 1) == a
    renamed = mk("a", "c.s.y", 2)
    cache.apply_write(2, [renamed], [])
    b = mk("b", "c.s.x", 3)
    cache.apply_write(3, [b], [], created=["b"])
    cache._audit()
    assert cache.get_by_name("table", "c.s.x", 1) == a          # a's older state, still kept
    assert cache.get_by_name("table", "c.s.x", 2) is None        # free between the two
    assert cache.get_by_name("table", "c.s.x", 3) == b
    assert cache.get_by_name("table", "c.s.y", 2) == renamed
    assert cache.get_by_name("table", "c.s.y", 1) is MISS        # who held it then is unknown
    cache.apply_write(4, [], ["b"])
    assert cache.get_by_name("table", "c.s.x", 4) is None and cache.get_by_name("table", "c.s.x", 3) == b
    # Past the timeout the old states go; a name down to one holder points at its record again.
    clock.now += 100
    c = mk("c", "c.s.x", 5)
    cache.apply_write(5, [c], [], created=["c"])
    assert cache.get_by_name("table", "c.s.x", 5) == c and cache.get_by_name("table", "c.s.x", 3) is MISS
    clock.now += 100
    assert cache.get_by_name("table", "c.s.x", 5) == c
    assert cache._names[("table", "c.s.x")] is cache._ids["c"]
    cache._audit()
    # Evicting a holder takes its names with it; the others still answer.
    cache.advance(5, ["c"])
    assert cache.get_by_name("table", "c.s.x", 5) is MISS and cache.get_by_name("table", "c.s.y", 5) == renamed
    cache._audit()


def test_the_cache_keeps_one_small_record_per_asset():
    """What the cache itself adds to a cached asset (its record, its place in the id map and the
    name index), apart from the asset: one record, no chain, list or entry objects of its own.
    Three records per asset took ~690 B here."""
    tables = [mk(f"id-{i:08d}", f"c.s.t{i}", 1) for i in range(4000)]
    for t in tables:
        share_asset(t)          # the asset's own objects are made before the count
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = MetastoreCache(1, max_bytes=1 << 40)
        cache.fill(tables, 1)
        gc.collect()
        per_asset = (tracemalloc.get_traced_memory()[0] - before) / len(tables)
    finally:
        tracemalloc.stop()
    assert per_asset <= 320, per_asset
    assert all(cache.get_by_name("table", t.full_name, 1) is t for t in tables[:50])
    cache._audit()
