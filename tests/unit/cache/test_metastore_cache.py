"""Tests for the multi-version metastore cache and the TTL cache."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from shardcat.auth import Caller
from shardcat.entities.asset import Asset
from shardcat.cache.metastore_cache import (
    ASSET_OVERHEAD, JSON_EXPANSION, MISS, MetastoreCache, StaleCache, asset_size,
)
from shardcat.cache.ttl import TtlCache
from shardcat.catalog.tree.assets import present


class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def mk(asset_id, full_name, at, *, parent="s1", ns="table", comment="", type_="table"):
    return Asset(id=asset_id, metastore_id="m", type=type_, namespace=ns, parent_id=parent,
                 name=full_name.rsplit(".", 1)[-1], full_name=full_name, storage_path=None,
                 info={"full_name": full_name, "comment": comment}, written_at=at)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def cache(clock):
    c = MetastoreCache(10, clock=clock)
    yield c
    c._audit()


# ---- sentinel, basics -----------------------------------------------------

def test_miss_has_no_truth_value():
    assert repr(MISS) == "MISS"
    with pytest.raises(TypeError):
        bool(MISS)


def test_unknown_ids_names_and_listings_miss(cache):
    assert cache.get("x", 10) is MISS
    assert cache.get_by_name("table", "c.s.t", 10) is MISS
    assert cache.children("s1", "table", 10) is MISS
    assert cache.stats()["misses"] == 3 and cache.stats()["hits"] == 0


def test_fill_answers_from_written_at_on(cache):
    a = mk("a", "c.s.a", 7)
    assert cache.fill([a], 10) is True
    assert cache.get("a", 10) == a
    assert cache.get("a", 7) == a          # unchanged since it was written at 7
    assert cache.get("a", 6) is MISS       # what it was before 7 is unknown
    assert cache.get_by_name("table", "c.s.a", 8) == a
    assert cache.get_by_name("table", "c.s.a", 6) is MISS
    assert cache.get("a", 11) is MISS      # a snapshot the cache has not reached
    s = cache.stats()
    assert s["entries"] == 1 and s["versions"] == 1 and s["hits"] == 3
    assert s["bytes"] >= asset_size(a)


def test_fill_at_another_version_is_ignored(cache):
    assert cache.fill([mk("a", "c.s.a", 7)], 9) is False
    assert cache.fill([mk("a", "c.s.a", 7)], 11) is False
    assert cache.fill_children("s1", "table", [mk("a", "c.s.a", 7)], 9) is False
    assert cache.get("a", 10) is MISS
    assert cache.children("s1", "table", 10) is MISS
    assert cache.stats()["entries"] == 0


def test_fill_rejects_states_from_the_future(cache):
    with pytest.raises(ValueError):
        cache.fill([mk("a", "c.s.a", 11)], 10)


def test_fill_keeps_the_cached_history(cache):
    cache.fill([mk("a", "c.s.a", 7)], 10)
    cache.apply_write(11, [mk("a", "c.s.a", 11, comment="new")], [])
    cache.fill([mk("a", "c.s.a", 11, comment="new")], 11)
    assert cache.get("a", 8).info["comment"] == ""   # the old state survives the refill
    assert cache.stats()["versions"] == 2


def test_fill_children_rejects_foreign_children(cache):
    with pytest.raises(ValueError):
        cache.fill_children("s1", "table", [mk("a", "c.s2.a", 7, parent="s2")], 10)


# ---- writes and snapshots -------------------------------------------------

def test_apply_write_must_follow_the_version(cache):
    with pytest.raises(StaleCache):
        cache.apply_write(12, [mk("a", "c.s.a", 12)], [])
    with pytest.raises(StaleCache):
        cache.apply_write(10, [mk("a", "c.s.a", 10)], [])
    with pytest.raises(ValueError):
        cache.apply_write(11, [mk("a", "c.s.a", 9)], [])
    assert cache.version == 10 and cache.get("a", 10) is MISS


def test_snapshot_isolation_across_an_update(cache):
    old, new = mk("a", "c.s.a", 7, comment="old"), mk("a", "c.s.a", 11, comment="new")
    cache.fill([old], 10)
    cache.apply_write(11, [new], [])
    assert cache.version == 11
    assert cache.get("a", 10) == old       # the reader at 10 keeps its view
    assert cache.get("a", 7) == old
    assert cache.get("a", 11) == new       # the writer's snapshot sees its write
    assert cache.get_by_name("table", "c.s.a", 10) == old
    assert cache.get_by_name("table", "c.s.a", 11) == new


def test_created_assets_are_known_absent_before(cache):
    cache.apply_write(11, [mk("a", "c.s.a", 11), mk("b", "c.s.b", 11)], [], created=["a"])
    assert cache.get("a", 10) is None and cache.get("a", 3) is None
    assert cache.get("b", 10) is MISS      # not declared created: it may have existed
    assert cache.get("b", 11).id == "b"


def test_delete_leaves_a_tombstone(cache):
    a = mk("a", "c.s.a", 7)
    cache.fill([a], 10)
    cache.apply_write(11, [], ["a", "ghost"])
    assert cache.get("a", 11) is None
    assert cache.get("a", 10) == a
    assert cache.get_by_name("table", "c.s.a", 11) is None
    assert cache.get_by_name("table", "c.s.a", 10) == a
    assert cache.get("ghost", 11) is None   # deleted without ever being cached
    assert cache.get("ghost", 10) is MISS


def test_rename_is_snapshot_correct(cache):
    a = mk("a", "c.s.a", 7)
    renamed = mk("a", "c.s.b", 11)
    cache.fill([a], 10)
    cache.apply_write(11, [renamed], [])
    assert cache.get_by_name("table", "c.s.a", 10) == a
    assert cache.get_by_name("table", "c.s.a", 11) is None     # the old name is free now
    assert cache.get_by_name("table", "c.s.b", 11) == renamed
    assert cache.get_by_name("table", "c.s.b", 10) is MISS     # who had "b" at 10 is unknown
    cache.apply_write(12, [mk("a", "c.s.a", 12)], [])          # and back
    assert cache.get_by_name("table", "c.s.a", 12).written_at == 12
    assert cache.get_by_name("table", "c.s.a", 11) is None
    assert cache.get_by_name("table", "c.s.b", 12) is None
    assert cache.get_by_name("table", "c.s.b", 11) == renamed


def test_drop_and_recreate_same_name(cache):
    x = mk("x", "c.s.t", 7)
    y = mk("y", "c.s.t", 12)
    cache.fill([x], 10)
    cache.apply_write(11, [], ["x"])
    cache.apply_write(12, [y], [], created=["y"])
    assert cache.get_by_name("table", "c.s.t", 10) == x
    assert cache.get_by_name("table", "c.s.t", 11) is None
    assert cache.get_by_name("table", "c.s.t", 12) == y
    assert cache.get("y", 11) is None and cache.get("x", 12) is None


def test_drop_and_recreate_in_one_write(cache):
    x, y = mk("x", "c.s.t", 7), mk("y", "c.s.t", 11)
    cache.fill([x], 10)
    cache.apply_write(11, [y], ["x"], created=["y"])
    assert cache.get_by_name("table", "c.s.t", 10) == x
    assert cache.get_by_name("table", "c.s.t", 11) == y


def test_swap_names_in_one_write(cache):
    a, b = mk("a", "c.s.a", 7), mk("b", "c.s.b", 7)
    cache.fill([a, b], 10)
    a2, b2 = mk("a", "c.s.b", 11), mk("b", "c.s.a", 11)
    cache.apply_write(11, [a2, b2], [])
    assert cache.get_by_name("table", "c.s.a", 11) == b2
    assert cache.get_by_name("table", "c.s.b", 11) == a2
    assert cache.get_by_name("table", "c.s.a", 10) == a


def test_namespaces_are_separate(cache):
    t = mk("t", "c.s.f", 7)
    f = mk("f", "c.s.f", 7, ns="function", type_="function")
    cache.fill([t, f], 10)
    assert cache.get_by_name("table", "c.s.f", 10) == t
    assert cache.get_by_name("function", "c.s.f", 10) == f


# ---- reconciliation -------------------------------------------------------

def test_advance_evicts_changed_ids_and_their_listings(cache):
    a, b = mk("a", "c.s.a", 7), mk("b", "c.s.b", 7)
    other = mk("o", "c.s2.o", 7, parent="s2")
    cache.fill_children("s1", "table", [a, b], 10)
    cache.fill_children("s2", "table", [other], 10)
    cache.fill_children("s3", "table", [], 10)
    cache.apply_write(11, [mk("a", "c.s.a", 11, comment="v2")], [])
    cache.advance(14, ["a"], touched_parents=["s3"])
    assert cache.version == 14
    for at in (10, 11, 14):
        assert cache.get("a", at) is MISS       # every version of it
    assert cache.get_by_name("table", "c.s.a", 14) is MISS
    assert cache.children("s1", "table", 14) is MISS   # listing held "a"
    assert cache.children("s3", "table", 14) is MISS   # a new child may have arrived there
    assert cache.get("b", 14) == b                      # untouched assets stay
    assert cache.children("s2", "table", 14) == [other]
    assert cache.stats()["invalidations"] == 1
    with pytest.raises(StaleCache):
        cache.apply_write(12, [mk("a", "c.s.a", 12)], [])


def test_advance_forgets_free_names(cache):
    cache.fill([mk("x", "c.s.t", 7)], 10)
    cache.apply_write(11, [], ["x"])
    assert cache.get_by_name("table", "c.s.t", 11) is None
    # Elsewhere someone created "c.s.t" as an id this cache never saw.
    cache.advance(12, ["new"], ["s1"])
    assert cache.get_by_name("table", "c.s.t", 12) is MISS


def test_advance_cannot_go_back(cache):
    with pytest.raises(ValueError):
        cache.advance(9, [])


def test_clear_forgets_everything(cache):
    cache.fill_children("s1", "table", [mk("a", "c.s.a", 7)], 10)
    cache.clear(20)
    assert cache.version == 20
    assert cache.get("a", 20) is MISS and cache.get("a", 10) is MISS
    assert cache.children("s1", "table", 20) is MISS
    s = cache.stats()
    assert s["entries"] == 0 and s["bytes"] == 0 and s["versions"] == 0


# ---- eviction ---------------------------------------------------------------

def test_superseded_states_expire_lazily_after_the_timeout(clock):
    cache = MetastoreCache(10, version_timeout=30, clock=clock)
    cache.fill([mk("a", "c.s.a", 7, comment="old")], 10)
    cache.apply_write(11, [mk("a", "c.s.a", 11, comment="new")], [])
    clock.now += 29
    assert cache.get("a", 10).info["comment"] == "old"
    clock.now += 2                             # superseded 31 s ago now
    assert cache.stats()["versions"] == 2      # lazy: nothing dropped until the asset is touched
    assert cache.get("a", 10) is MISS
    assert cache.get_by_name("table", "c.s.a", 10) is MISS
    assert cache.stats()["versions"] == 1 and cache.stats()["pruned"] == 1
    clock.now += 10_000                        # the newest state never times out
    assert cache.get("a", 11).info["comment"] == "new"
    cache._audit()


def test_timeout_drops_tombstoned_children_from_listings(clock):
    cache = MetastoreCache(10, version_timeout=30, clock=clock)
    a, b = mk("a", "c.s.a", 7), mk("b", "c.s.b", 7)
    cache.fill_children("s1", "table", [a, b], 10)
    cache.apply_write(11, [], ["a"])
    assert cache.children("s1", "table", 10) == [a, b]
    clock.now += 31
    assert cache.children("s1", "table", 11) == [b]
    assert cache.children("s1", "table", 10) is MISS   # a's state at 10 is gone
    assert cache.stats()["bytes"] > 0
    cache._audit()


def test_lru_evicts_whole_assets_under_max_bytes(clock):
    per_asset = asset_size(mk("a0", "c.s.a0", 7))
    cache = MetastoreCache(10, max_bytes=3 * per_asset, clock=clock)
    cache.fill([mk(f"a{i}", f"c.s.a{i}", 7) for i in range(3)], 10)
    assert cache.stats()["entries"] == 3
    assert cache.get("a0", 10) is not MISS             # a0 becomes the most recent
    cache.fill([mk("a3", "c.s.a3", 7)], 10)            # one too many
    s = cache.stats()
    assert s["entries"] == 3 and s["evictions"] == 1 and s["bytes"] <= 3 * per_asset
    assert cache.get("a1", 10) is MISS                 # least recently used went
    assert cache.get_by_name("table", "c.s.a1", 10) is MISS
    assert cache.get("a0", 10) is not MISS and cache.get("a3", 10) is not MISS
    cache._audit()


def test_lru_eviction_of_a_member_drops_its_listing(clock):
    per_asset = asset_size(mk("a0", "c.s.a0", 7))
    cache = MetastoreCache(10, max_bytes=4 * per_asset + 200, clock=clock)   # 4 assets and a listing
    cache.fill_children("s1", "table", [mk("a0", "c.s.a0", 7), mk("a1", "c.s.a1", 7)], 10)
    cache.fill([mk("b0", "c.s2.b0", 7, parent="s2")], 10)
    assert cache.children("s1", "table", 10) is not MISS   # refreshes the listing and its members
    cache.fill([mk("b1", "c.s2.b1", 7, parent="s2"), mk("b2", "c.s2.b2", 7, parent="s2")], 10)
    assert cache.get("b0", 10) is MISS                      # the older, unused one went first
    assert cache.children("s1", "table", 10) is not MISS
    cache.get("b1", 10), cache.get("b2", 10)                # now a member is the least recently used
    cache.fill([mk("b3", "c.s2.b3", 7, parent="s2")], 10)
    assert [cache.get("a0", 10) is MISS, cache.get("a1", 10) is MISS].count(True) == 1
    assert cache.children("s1", "table", 10) is MISS        # it lost a member
    assert cache.stats()["evictions"] == 2 and cache.stats()["listings"] == 0
    cache._audit()


def test_far_from_the_bound_a_listing_hit_leaves_its_members_where_they_are(clock):
    """Touching every member costs a page of a large listing O(members); far from `max_bytes` it is
    skipped, so members age by their own use until the cache nears the bound."""
    per_asset = asset_size(mk("a0", "c.s.a0", 7))
    cache = MetastoreCache(10, max_bytes=100 * per_asset, clock=clock)
    cache.fill_children("s1", "table", [mk("a0", "c.s.a0", 7), mk("a1", "c.s.a1", 7)], 10)
    cache.fill([mk("b0", "c.s2.b0", 7, parent="s2")], 10)
    assert cache.children("s1", "table", 10) is not MISS     # far from the bound: members not refreshed
    cache.max_bytes = 3 * per_asset + 200                      # now one asset must go: the oldest, a member
    cache.fill([mk("b1", "c.s2.b1", 7, parent="s2")], 10)
    assert cache.get("a0", 10) is MISS and cache.get("b0", 10) is not MISS
    assert cache.children("s1", "table", 10) is MISS         # it lost a member
    cache._audit()


# ---- child listings ---------------------------------------------------------

def test_listings_are_versioned(cache):
    a, b = mk("a", "c.s.a", 7), mk("b", "c.s.b", 7)
    cache.fill_children("s1", "table", [b, a], 10)
    c = mk("c", "c.s.c", 11)
    cache.apply_write(11, [c], [], created=["c"])
    cache.apply_write(12, [], ["a"])
    z = mk("b", "c.s.z", 13)
    cache.apply_write(13, [z], [])
    assert cache.children("s1", "table", 10) == [a, b]
    assert cache.children("s1", "table", 11) == [a, b, c]
    assert cache.children("s1", "table", 12) == [b, c]
    assert cache.children("s1", "table", 13) == [c, z]
    assert cache.children("s1", "table", 9) is MISS     # before the listing was read
    assert cache.children("s1", "function", 13) is MISS


def test_a_listing_read_at_the_current_version_is_kept_until_a_member_changes(cache):
    a, b = mk("a", "c.s.a", 7), mk("b", "c.s.b", 7)
    cache.fill_children("s1", "table", [b, a], 10)
    first = cache.children("s1", "table", 10)
    cache.apply_write(11, [mk("x", "c.s2.x", 11, parent="s2")], [], created=["x"])   # elsewhere
    assert cache.children("s1", "table", 11) is first       # kept, not read and sorted again
    assert cache.children("s1", "table", 10) is first
    a2 = mk("a", "c.s.a", 12, comment="new")
    cache.apply_write(12, [a2], [])                          # a member changes
    assert cache.children("s1", "table", 12) == [a2, b]
    assert cache.children("s1", "table", 11) == [a, b]       # older snapshots keep their view
    c = mk("c", "c.s.c", 13)
    cache.apply_write(13, [c], [], created=["c"])            # a newcomer
    assert cache.children("s1", "table", 13) == [a2, b, c]
    cache.apply_write(14, [], ["b"])                         # a member goes
    assert cache.children("s1", "table", 14) == [a2, c]
    cache.apply_write(15, [mk("c", "c.s2.c", 15, parent="s2")], [])   # a member moves away
    assert cache.children("s1", "table", 15) == [a2]
    assert cache.children("s1", "table", 13) == [a2, b, c]


def test_listing_of_a_child_created_without_history_misses_before_it(cache):
    cache.fill_children("s1", "table", [], 10)
    cache.apply_write(11, [mk("c", "c.s.c", 11)], [])   # not declared created
    assert cache.children("s1", "table", 11) == [mk("c", "c.s.c", 11)]
    assert cache.children("s1", "table", 10) is MISS


def test_moving_between_parents_updates_both_listings(cache):
    a = mk("a", "c.s.a", 7)
    cache.fill_children("s1", "table", [a], 10)
    cache.fill_children("s2", "table", [], 10)
    moved = mk("a", "c.s2.a", 11, parent="s2")
    cache.apply_write(11, [moved], [])
    assert cache.children("s1", "table", 10) == [a]
    assert cache.children("s1", "table", 11) == []
    assert cache.children("s2", "table", 10) == []
    assert cache.children("s2", "table", 11) == [moved]



def test_a_listing_a_member_left_outlives_that_members_eviction(cache):
    """Found by the model test: a foreign write to a table that had moved out of s1 dropped s1's
    listing with it; the listing still answers from the move on."""
    a, b = mk("a", "c.s.a", 7), mk("b", "c.s.b", 7)
    cache.fill_children("s1", "table", [a, b], 10)
    cache.apply_write(11, [mk("a", "c.s2.a", 11, parent="s2")], [])      # a moves to s2
    cache.advance(13, ["a"], touched_parents=["s2"])                     # then changes elsewhere
    assert cache.get("a", 13) is MISS
    assert cache.children("s1", "table", 13) == [b]
    assert cache.children("s1", "table", 11) == [b]
    assert cache.children("s1", "table", 10) is MISS     # a was a child then: its state is gone
    cache._audit()

# ---- TTL cache --------------------------------------------------------------

def test_ttl_cache_expires_and_invalidates():
    clock = FakeClock()
    ttl = TtlCache(maxsize=2, ttl=10, timer=clock)
    ttl.put("cred", "secret")
    assert ttl.get("cred") == "secret" and "cred" in ttl
    clock.now += 11
    assert ttl.get("cred") is None and ttl.get("cred", "dflt") == "dflt"
    assert len(ttl) == 0
    ttl.put("g1", {"admins"})
    ttl.invalidate("g1")
    ttl.invalidate("missing")
    assert ttl.get("g1") is None
    for k in ("a", "b", "c"):
        ttl.put(k, k)
    assert len(ttl) == 2 and ttl.get("c") == "c"


# ---- model-based test -------------------------------------------------------

PARENTS = ("p1", "p2")
NAMESPACES = ("table", "function")
LEAVES = ("x", "y")
SMALL = 3 * (ASSET_OVERHEAD + JSON_EXPANSION * 60)
BIG = 1 << 30


class CacheMachine(RuleBasedStateMachine):
    """The cache against a model: the full metastore state at every version."""

    @initialize(data=st.data(), small=st.booleans(), prehistory=st.integers(0, 4))
    def setup(self, data, small, prehistory):
        self.clock = FakeClock()
        self.ids = itertools.count(1)
        self.comments = itertools.count(1)
        self.states: list[dict[str, Asset]] = [{}]   # index = version
        self.seen: set[str] = {"never"}
        for _ in range(prehistory):
            self._write(data)
        self.small = small
        self.cache = MetastoreCache(self.version, max_bytes=SMALL if small else BIG,
                                    version_timeout=30, clock=self.clock)
        # What a big cache must answer at the current version (nothing evicts it but advance/clear).
        self.cached_ids: set[str] = set()
        self.listed: set[tuple[str, str]] = set()

    @property
    def version(self) -> int:
        return len(self.states) - 1

    @property
    def now(self) -> dict[str, Asset]:
        return self.states[-1]

    # -- the model ---------------------------------------------------------

    def _asset(self, asset_id, ns, parent, leaf, version):
        full_name = f"{parent}.{leaf}"
        return Asset(asset_id, "m", ns, ns, parent, leaf, full_name, None,
                     {"full_name": full_name, "comment": next(self.comments)}, version)

    def _holder(self, state, ns, full_name):
        return next((a for a in state.values() if a.name_key == (ns, full_name)), None)

    def _free_slots(self, state, ns):
        return [(p, leaf) for p in PARENTS for leaf in LEAVES if self._holder(state, ns, f"{p}.{leaf}") is None]

    def _write(self, data):
        """Make one random write in the model; returns (changed, deleted, created, parents)."""
        state, v = dict(self.now), self.version + 1
        kinds = ["create"] + (["update", "rename", "delete", "recreate", "swap"] if state else [])
        kind = data.draw(st.sampled_from(kinds), label="kind")
        changed, deleted, created = [], [], set()
        ids = sorted(state)
        if kind == "create":
            ns = data.draw(st.sampled_from(NAMESPACES), label="ns")
            slots = self._free_slots(state, ns)
            if not slots:
                kind = "update"
            else:
                parent, leaf = data.draw(st.sampled_from(slots), label="slot")
                new_id = f"a{next(self.ids)}"
                changed.append(self._asset(new_id, ns, parent, leaf, v))
                created.add(new_id)
        if kind == "update":
            old = state[data.draw(st.sampled_from(ids), label="id")]
            changed.append(self._asset(old.id, old.namespace, old.parent_id, old.full_name.split(".")[1], v))
        elif kind == "rename":
            old = state[data.draw(st.sampled_from(ids), label="id")]
            slots = self._free_slots(state, old.namespace)
            if slots:
                parent, leaf = data.draw(st.sampled_from(slots), label="slot")
                changed.append(self._asset(old.id, old.namespace, parent, leaf, v))
            else:
                deleted.append(old.id)
        elif kind == "delete":
            deleted.append(data.draw(st.sampled_from(ids), label="id"))
        elif kind == "recreate":
            old = state[data.draw(st.sampled_from(ids), label="id")]
            new_id = f"a{next(self.ids)}"
            deleted.append(old.id)
            changed.append(self._asset(new_id, old.namespace, old.parent_id, old.full_name.split(".")[1], v))
            created.add(new_id)
        elif kind == "swap":
            a = state[data.draw(st.sampled_from(ids), label="id")]
            same_ns = [i for i in ids if state[i].namespace == a.namespace and i != a.id]
            if not same_ns:
                deleted.append(a.id)
            else:
                b = state[data.draw(st.sampled_from(same_ns), label="other")]
                changed.append(self._asset(a.id, a.namespace, b.parent_id, b.full_name.split(".")[1], v))
                changed.append(self._asset(b.id, b.namespace, a.parent_id, a.full_name.split(".")[1], v))
        parents = set()
        for i in deleted:
            parents.add(state.pop(i).parent_id)
        for asset in changed:
            if asset.id in state:
                parents.add(state[asset.id].parent_id)
            parents.add(asset.parent_id)
            state[asset.id] = asset
        self.states.append(state)
        self.seen.update(a.id for a in changed)
        return changed, deleted, created, parents

    # -- rules: writes -----------------------------------------------------

    @rule(data=st.data(), declare_created=st.booleans())
    def own_write(self, data, declare_created):
        changed, deleted, created, _ = self._write(data)
        self.cache.apply_write(self.version, changed, deleted, created=created if declare_created else ())
        self.cached_ids.update(a.id for a in changed)
        self.cached_ids.update(deleted)
        if not self.small:   # no stale read right after a write
            for asset in changed:
                assert self.cache.get(asset.id, self.version) == asset
                assert self.cache.get_by_name(asset.namespace, asset.full_name, self.version) == asset
            for asset_id in deleted:
                assert self.cache.get(asset_id, self.version) is None

    @rule(data=st.data(), count=st.integers(1, 3))
    def foreign_write(self, data, count):
        changed_ids, parents = set(), set()
        for _ in range(count):
            changed, deleted, _, touched = self._write(data)
            changed_ids.update(a.id for a in changed)
            changed_ids.update(deleted)
            parents |= touched
        self.cache.advance(self.version, changed_ids, parents)
        self.cached_ids -= changed_ids
        self.listed = {key for key in self.listed if key[0] not in parents}
        self._sweep(self.version)   # nothing the cache kept may contradict the foreign writes

    @rule(data=st.data())
    def fill(self, data):
        ids = data.draw(st.lists(st.sampled_from(sorted(self.now)), unique=True) if self.now else st.just([]))
        assets = [self.now[i] for i in ids]
        assert self.cache.fill(assets, self.version - 1) is False
        assert self.cache.fill(assets, self.version) is True
        self.cached_ids.update(ids)
        if not self.small:
            for asset in assets:
                assert self.cache.get(asset.id, self.version) == asset

    @rule(parent=st.sampled_from(PARENTS), ns=st.sampled_from(NAMESPACES))
    def fill_children(self, parent, ns):
        kids = self._children(self.now, parent, ns)
        assert self.cache.fill_children(parent, ns, kids, self.version) is True
        self.cached_ids.update(a.id for a in kids)
        self.listed.add((parent, ns))
        if not self.small:
            assert self.cache.children(parent, ns, self.version) == kids

    @rule(seconds=st.sampled_from([0, 1, 10, 29, 31, 100]))
    def tick(self, seconds):
        self.clock.now += seconds

    @precondition(lambda self: self.version % 5 == 0)
    @rule()
    def clear(self):
        self.cache.clear(self.version)
        self.cached_ids.clear()
        self.listed.clear()

    # -- rules: reads ------------------------------------------------------

    def _children(self, state, parent, ns):
        return sorted((a for a in state.values() if a.parent_id == parent and a.namespace == ns),
                      key=lambda a: a.full_name)

    def _snapshot(self, data):
        return data.draw(st.integers(0, self.version + 1), label="at")

    def _sweep(self, at):
        """Every id, name and listing at `at`: what the cache answers must be the model's answer."""
        state = self.states[at]
        for asset_id in sorted(self.seen):
            got = self.cache.get(asset_id, at)
            assert got is MISS or got == state.get(asset_id), (asset_id, at)
        for ns in NAMESPACES:
            for parent in PARENTS:
                got = self.cache.children(parent, ns, at)
                assert got is MISS or got == self._children(state, parent, ns), (parent, ns, at)
                for leaf in LEAVES:
                    got = self.cache.get_by_name(ns, f"{parent}.{leaf}", at)
                    assert got is MISS or got == self._holder(state, ns, f"{parent}.{leaf}"), (ns, leaf, at)

    @rule(data=st.data())
    def sweep(self, data):
        self._sweep(data.draw(st.integers(0, self.version), label="at"))

    @rule(data=st.data())
    def read_by_id(self, data):
        at = self._snapshot(data)
        asset_id = data.draw(st.sampled_from(sorted(self.seen)), label="id")
        got = self.cache.get(asset_id, at)
        if at > self.version:
            assert got is MISS
        elif got is not MISS:
            assert got == self.states[at].get(asset_id)
        elif at == self.version and not self.small:
            assert asset_id not in self.cached_ids, "cached asset missed at the current version"

    @rule(data=st.data(), ns=st.sampled_from(NAMESPACES), parent=st.sampled_from(PARENTS),
          leaf=st.sampled_from(LEAVES))
    def read_by_name(self, data, ns, parent, leaf):
        at = self._snapshot(data)
        full_name = f"{parent}.{leaf}"
        got = self.cache.get_by_name(ns, full_name, at)
        if at > self.version:
            assert got is MISS
            return
        expected = self._holder(self.states[at], ns, full_name)
        if got is not MISS:
            assert got == expected
        elif at == self.version and not self.small:
            assert expected is None or expected.id not in self.cached_ids, "cached name missed"

    @rule(data=st.data())
    def read_many_by_name(self, data):
        """A batch of names (repeats allowed) at one snapshot, as batched resolve asks: each answer is
        the model's, and a name left out is one the cache could not answer alone either."""
        at = self._snapshot(data)
        keys = data.draw(st.lists(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(
            [f"{p}.{leaf}" for p in PARENTS for leaf in LEAVES])), min_size=1, max_size=12), label="keys")
        before = self.cache.stats()
        got = self.cache.get_many_by_name(keys, at)
        after = self.cache.stats()
        assert after["hits"] - before["hits"] + after["misses"] - before["misses"] == len(keys)
        if at > self.version:
            assert got == {}
            return
        for key in keys:
            if key in got:
                assert got[key] == self._holder(self.states[at], *key)
            else:
                assert self.cache.get_by_name(*key, at) is MISS

    @rule(data=st.data(), ns=st.sampled_from(NAMESPACES), parent=st.sampled_from(PARENTS))
    def read_children(self, data, ns, parent):
        at = self._snapshot(data)
        got = self.cache.children(parent, ns, at)
        if at > self.version:
            assert got is MISS
        elif got is not MISS:
            assert got == self._children(self.states[at], parent, ns)
        elif at == self.version and not self.small:
            assert (parent, ns) not in self.listed, "cached listing missed at the current version"

    @invariant()
    def consistent(self):
        if not hasattr(self, "cache"):
            return
        assert self.cache.version == self.version
        assert self.cache.stats()["bytes"] <= self.cache.max_bytes
        self.cache._audit()


CacheMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCacheModel = CacheMachine.TestCase


@pytest.mark.parametrize("columns_alike", [True, False], ids=["columns alike", "columns all different"])
def test_the_memory_bound_counts_what_cached_tables_really_take(columns_alike, monkeypatch):
    """The LRU bound is only as good as the size estimate: compare it with the Python heap, for
    tables whose columns are alike (shared among them: cache/compact.py) and all different."""
    import gc
    import json as _json
    import tracemalloc
    from collections import OrderedDict

    from shardcat.cache import compact
    from shardcat.entities import shared_strings

    # A fresh shard's pools: what earlier tests left in these per-process pools (or a pool starting
    # over in the middle of the fill) changes what is shared, and the suite failed on it once.
    monkeypatch.setattr(shared_strings, "_pool", {})
    monkeypatch.setattr(compact.COLUMNS, "_pool", OrderedDict())

    def table(i):
        columns = [{"name": f"c{k}", "type_name": "STRING", "type_text": "string", "position": k, "nullable": True,
                    "type_json": _json.dumps({"name": f"c{k}", "type": "string", "nullable": True, "metadata": {}}),
                    "comment": "what this column holds" + ("" if columns_alike else f" in table {i}")}
                   for k in range(8)]
        info = {"table_type": "EXTERNAL", "data_source_format": "DELTA", "columns": columns, "owner": "admin",
                "storage_location": f"s3://bucket/t/{i}", "comment": "a table", "properties": {"k": "v"}}
        info = _json.loads(_json.dumps(info))          # fresh objects, as decoding a database row makes
        return Asset(f"id{i}", "m", "table", "table", "p", f"t{i}", f"c.s.t{i}", f"s3://bucket/t/{i}", info, 1)

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = MetastoreCache(1, max_bytes=1 << 40)
        tables = [table(i) for i in range(2000)]
        cache.fill(tables, 1)
        gc.collect()            # garbage not yet collected is not what the cache holds
        filled = tracemalloc.get_traced_memory()[0] - before
        for t in tables:          # served: each keeps its encoded answer (Asset.memo)
            present(t, Caller("alice", 2, False, 1, "m"))
        gc.collect()
        served = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    estimate = cache.stats()["bytes"]
    # Served is the state the bound must hold for (and what a kept encoding really costs: orjson's
    # own result would hold its whole working buffer, several times the answer; 0.89 here).
    assert 0.95 <= estimate / served <= 1.5, (estimate, served)
    # Before it is served a table has no answer yet (its memo not even a dict), and shares what it
    # can: the bound overcounts it then, but within reason (~2.7x with columns alike, ~1.8x without).
    assert 0.8 <= estimate / filled <= 3.0, (estimate, filled)
