"""A cold owner (shards/state.py): it answers reads by name, by path and writes (their paths from cold
tries, shards/cold_paths.py) before its path index is whole; a metastore past `path_index_max` paths
keeps them in the store for good; and the index it builds aside while another writer goes on answers every ownership and overlap
question exactly as a trie built from scratch does. Idle metastores go cold and are served again correctly."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardcat.cache.metastore_cache import MISS
from shardcat.cache.url_trie import UrlTrie
from shardcat.entities.asset import Asset
from shardcat.serving.metrics import add_caches
from shardcat.shards import shard as shard_module
from shardcat.shards.shard import CacheConfig, Shard
from shardcat.store.memory import MemoryStore
from shardcat.web.metrics import Figures

ROOT = "file:///w/r"
BUCKETS = (ROOT, "s3://bk", "s3://other")
SEGMENTS = ("a", "b", "c")


def _asset(ms: str, i: int, path: str | None, kind: str = "table") -> Asset:
    namespace = "external_location" if kind == "external_location" else "table"
    name = f"x{i}" if kind == "external_location" else f"c.s.t{i}"
    return Asset(id=str(uuid.uuid4()), metastore_id=ms, type=kind, namespace=namespace, parent_id=ms,
                 name=name.rsplit(".", 1)[-1], full_name=name, storage_path=path, info={})


async def _metastore(store: MemoryStore) -> str:
    ms = str(uuid.uuid4())
    await store.create_metastore(ms, f"m-{ms[:8]}", {"storage_root": ROOT, "owner": "admin"})
    return ms


def _gate_first_paths_read(store: MemoryStore) -> asyncio.Event:
    """The first read of every path (the cold owner's) is taken at once and then held until the event."""
    gate, original, calls = asyncio.Event(), store.paths, []

    async def paths(metastore_id, **kw):      # kw: the build's pace
        read = await original(metastore_id, **kw)
        calls.append(metastore_id)
        if len(calls) == 1:
            await gate.wait()
        return read
    store.paths = paths
    return gate


async def _turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def _answers(trie: UrlTrie, urls: list[str]) -> list:
    """Every question the catalog asks a trie, about every url: exact entry, owner, overlaps, descendants."""
    def ids(entry):
        return None if entry is None else (entry[0], entry[1].asset_id)

    def overlap(url, ignore):
        """An overlap at or above `url` is one entry; below it, any one will do (UrlTrie's contract)."""
        hit = ids(trie.first_overlap(url, ignore=ignore))
        below = {ids(e) for e in trie.descendants(url) if ignore is None or not ignore(e[1])}
        if hit is not None and hit in below:
            return "below", len(below)
        return hit

    out = []
    for url in urls:
        out.append((url, ids(trie.owner(url)), overlap(url, None), overlap(url, lambda o: o.is_root),
                    sorted((u, o.asset_id) for u, o in trie.descendants(url)),
                    None if trie.get(url) is None else trie.get(url).asset_id))
    return out


paths = st.builds(lambda b, segs: "/".join((b, *segs)), st.sampled_from(BUCKETS),
                  st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3))
# A later write: ("add", path, is a location), ("drop", index), ("move", index, path).
ops = st.one_of(st.tuples(st.just("add"), paths, st.booleans()),
                st.tuples(st.just("drop"), st.integers(0, 50)),
                st.tuples(st.just("move"), st.integers(0, 50), paths))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.lists(paths, max_size=12, unique=True), later=st.lists(ops, max_size=10),
       gap=st.sampled_from([2, 1000]), observe_each=st.booleans())
def test_the_index_built_aside_answers_as_a_trie_built_from_scratch(initial, later, gap, observe_each):
    async def scenario():
        store = MemoryStore()
        ms = await _metastore(store)
        live: dict[str, Asset] = {}
        used = set()
        async with store.write(ms, await store.metastore_version(ms)) as tx:
            for i, path in enumerate(initial):
                a = _asset(ms, i, path)
                live[a.id] = await tx.put(a, new=True)
                used.add(path)
        gate = _gate_first_paths_read(store)
        shard = Shard(store, "cold")
        shard_module_gap = shard_module.RECONCILE_GAP
        shard_module.RECONCILE_GAP = gap
        try:
            assert await shard.lookup(ms, "catalog", "nothing") is None     # a cold read by name: no wait
            state = shard.states[ms]
            await _turns()
            assert not state.paths_ready.is_set() and state.warming is not None
            assert not state.warming.done()                                 # its read taken, held at the gate
            # Another writer goes on while the cold owner's index is being built.
            for n, op in enumerate(later):
                async with store.write(ms, await store.metastore_version(ms)) as tx:
                    ids = sorted(live)
                    if op[0] == "add" and op[1] not in used:
                        a = _asset(ms, 100 + n, op[1], "external_location" if op[2] else "table")
                        live[a.id] = await tx.put(a, new=True)
                        used.add(op[1])
                    elif op[0] == "drop" and ids:
                        gone = live.pop(ids[op[1] % len(ids)])
                        await tx.delete([gone])
                        used.discard(gone.storage_path)
                    elif op[0] == "move" and ids and op[2] not in used:
                        old = live[ids[op[1] % len(ids)]]
                        used.discard(old.storage_path)
                        live[old.id] = await tx.put(dataclasses.replace(old, storage_path=op[2]))
                        used.add(op[2])
                if observe_each:    # the cold owner reconciles as it goes (its tries are not read yet)
                    await shard.observed(ms, await store.metastore_version(ms))
            gate.set()
            state = await shard.warmed(ms)
            await shard.observed(ms, await store.metastore_version(ms))
            state = await shard.warmed(ms)
        finally:
            shard_module.RECONCILE_GAP = shard_module_gap
        full, locations = UrlTrie(), UrlTrie()
        full.insert(ROOT, None)
        for p in (await store.paths(ms))[1]:
            location = p.type == "external_location"     # a location is a root in its own trie
            (locations if location else full).insert(p.storage_path, _Owner(p.id, location))
        urls = sorted({"/".join((b, *s[:k])) for b in BUCKETS for s in
                       [(x, y, z) for x in SEGMENTS for y in SEGMENTS for z in SEGMENTS] for k in range(4)})
        # The metastore root's entry has no asset id of an asset: compare it by url alone.
        assert _answers(_Strip(state.trie), urls) == _answers(_Strip(full), urls)
        assert _answers(_Strip(state.locations), urls) == _answers(_Strip(locations), urls)
        assert set(state.path_of) | set(state.location_of) == {a.id for a in live.values()}

    asyncio.run(scenario())


@dataclasses.dataclass(frozen=True)
class _Owner:
    asset_id: str
    is_root: bool


class _Strip:
    """A trie whose values read as `_Owner` (the metastore root's as None): only what the answers compare."""

    def __init__(self, trie: UrlTrie):
        self.trie = trie

    @staticmethod
    def _v(value):
        if value is None or getattr(value, "type", None) == "metastore":
            return _Owner("root", True)
        return _Owner(value.asset_id, value.is_root)

    def _e(self, entry):
        return None if entry is None else (entry[0], self._v(entry[1]))

    def owner(self, url):
        return self._e(self.trie.owner(url))

    def first_overlap(self, url, ignore=None):
        return self._e(self.trie.first_overlap(url, ignore=None if ignore is None else
                                               (lambda v: ignore(self._v(v)))))

    def descendants(self, url):
        return [self._e(e) for e in self.trie.descendants(url)]

    def get(self, url):
        v = self.trie.get(url)
        return None if v is None and url not in self.trie else self._v(v)


def test_a_cold_owner_answers_by_name_by_path_and_writes_at_once():
    async def scenario():
        store = MemoryStore()
        ms = await _metastore(store)
        async with store.write(ms, 0) as tx:
            table = await tx.put(_asset(ms, 1, f"{ROOT}/a/b"), new=True)
        gate = _gate_first_paths_read(store)
        shard = Shard(store, "cold")
        found = await shard.lookup(ms, "table", table.full_name)
        assert found is not None and found.id == table.id                 # answered with the index held back
        state = shard.states[ms]
        assert not state.paths_ready.is_set()

        async def body(tx, state):
            hit = state.trie.first_overlap(f"{ROOT}/a/b/c")                 # what a create checks
            return None if hit is None else hit[1].asset_id

        # The write asks its cold tries, which load that path from the store: the table's, exactly.
        assert await asyncio.wait_for(shard.write(ms, body), 5) == table.id
        assert shard.stats["cold_path_loads"] == 1 and not state.paths_ready.is_set()
        # A read by path answers from them too: the path loaded already, and one not loaded yet.
        snap = await asyncio.wait_for(shard.snapshot(ms, [], [f"{ROOT}/a/b/c", f"{ROOT}/elsewhere"]), 5)
        assert snap.by_path[f"{ROOT}/a/b/c"][0].asset_id == table.id
        assert snap.by_path[f"{ROOT}/a/b/c"][1].id == table.id
        assert snap.by_path[f"{ROOT}/elsewhere"][0].is_root               # managed storage, no table's
        assert shard.stats["cold_path_loads"] == 2 and not state.paths_ready.is_set()
        gate.set()
        await shard.warmed(ms)
        again = await shard.snapshot(ms, [], [f"{ROOT}/a/b/c", f"{ROOT}/elsewhere"])
        assert again.by_path == snap.by_path                                # the whole index answers the same

    asyncio.run(scenario())


def test_an_idle_metastore_goes_cold_and_is_served_again_correctly():
    async def scenario():
        store = MemoryStore()
        now = [1000.0]
        shard = Shard(store, "idle", cache=CacheConfig(idle_timeout=60), clock=lambda: now[0])
        hot, idle = await _metastore(store), await _metastore(store)
        tables = {}
        for ms in (hot, idle):
            async with store.write(ms, 0) as tx:
                tables[ms] = await tx.put(_asset(ms, 1, f"{ROOT}/t"), new=True)
            assert (await shard.lookup(ms, "table", "c.s.t1")).id == tables[ms].id
            await shard.warmed(ms)
        assert shard.states[idle].cache.get(tables[idle].id, shard.states[idle].version) is not MISS

        now[0] += 30
        await shard.lookup(hot, "table", "c.s.t1")
        assert shard.evict_idle() == 0                                     # not idle long enough yet
        now[0] += 45                                                       # idle 75 s, hot 45 s
        await shard.lookup(hot, "table", "c.s.t1")                         # a request sweeps on its way in
        cold = shard.states[idle]
        assert shard.stats["idle_evictions"] == 1 and shard.owns(idle)
        assert cold.version == -1 and cold.cache is None and len(cold.trie) == 0 and cold.privileges is None
        assert shard.states[hot].version >= 0 and shard.states[hot].cache is not None

        # Meanwhile another writer renames the table and adds one; the cold metastore serves the present.
        async with store.write(idle, await store.metastore_version(idle)) as tx:
            await tx.put(dataclasses.replace(tables[idle], name="u1", full_name="c.s.u1"))
            added = await tx.put(_asset(idle, 2, f"{ROOT}/t2"), new=True)
        assert await shard.lookup(idle, "table", "c.s.t1") is None
        assert (await shard.lookup(idle, "table", "c.s.u1")).id == tables[idle].id
        state = await shard.warmed(idle)
        assert state.trie.get(f"{ROOT}/t2").asset_id == added.id
        assert state.trie.get(f"{ROOT}/t").asset_id == tables[idle].id

    asyncio.run(scenario())


def test_a_busy_metastore_is_not_evicted():
    async def scenario():
        store = MemoryStore()
        now = [0.0]
        shard = Shard(store, "busy", cache=CacheConfig(idle_timeout=1), clock=lambda: now[0])
        ms = await _metastore(store)
        await shard.warmed(ms)
        state = shard.states[ms]
        now[0] += 10
        async with state.write_lock:                                       # a write in progress
            assert shard.evict_idle() == 0
        assert shard.evict_idle() == 1

    asyncio.run(scenario())


def test_the_cache_counts_on_metrics_never_go_down_when_a_cache_is_given_up():
    """/metrics's cache counters are Prometheus counters: a metastore gone cold or moved away keeps
    its hits and misses in the shard's totals (a scrape before and after once read -3,596 hits)."""
    def counts(shard):
        figures = Figures()
        add_caches(figures, shard)
        return figures.counters

    async def scenario():
        store = MemoryStore()
        now = [0.0]
        shard = Shard(store, "counts", cache=CacheConfig(idle_timeout=60), clock=lambda: now[0])
        idle, moved = await _metastore(store), await _metastore(store)
        for ms in (idle, moved):
            async with store.write(ms, 0) as tx:
                await tx.put(_asset(ms, 1, f"{ROOT}/t"), new=True)
            for _ in range(3):
                await shard.lookup(ms, "table", "c.s.t1")
            await shard.warmed(ms)
        seen = counts(shard)
        assert seen["cache_hits"] >= 4 and seen["cache_misses"] >= 2
        now[0] += 120
        assert shard.evict_idle() == 2
        assert counts(shard) == seen                                   # both gone cold: nothing lost
        await shard.lookup(moved, "table", "c.s.t1")                   # warm again, then moved away
        shard.drop(moved)
        after = counts(shard)
        assert after["cache_misses"] > seen["cache_misses"]
        assert all(after[k] >= seen[k] for k in seen)

    asyncio.run(scenario())


def test_paths_kept_in_the_store_answer_and_a_request_asking_too_many_is_refused(monkeypatch):
    from shardcat.errors import CatalogError
    from shardcat.shards import path_waits

    async def scenario():
        store = MemoryStore()
        ms = await _metastore(store)
        async with store.write(ms, 0) as tx:
            tables = [await tx.put(_asset(ms, i, f"{ROOT}/t{i}"), new=True) for i in range(4)]
        shard = Shard(store, "big", cache=CacheConfig(path_index_max=3))     # 4 paths: too many for a whole index
        state = await shard.warmed(ms)
        assert state.paths_in_db and not state.paths_ready.is_set()
        snap = await shard.snapshot(ms, [], [f"{ROOT}/t{i}/part" for i in range(4)])     # one read for all four
        assert [snap.by_path[f"{ROOT}/t{i}/part"][1].id for i in range(4)] == [t.id for t in tables]
        assert shard.stats["cold_path_loads"] == 1

        monkeypatch.setattr(path_waits, "COLD_LOADS_IN_DB", 2)

        async def one_by_one(state):        # a question asking its paths in turn: a load each
            return [state.trie.first_overlap(f"{ROOT}/u{i}") for i in range(3)]
        try:
            await shard.asking_paths(ms, 0, one_by_one)
            raise AssertionError("three loads were taken")
        except CatalogError as e:
            assert e.code == "RESOURCE_EXHAUSTED", e
        answers = await shard.asking_paths(ms, 0, one_by_one)     # two loaded by the refused one: answered now
        assert [(url, owner.type) for url, owner in answers] == [(ROOT, "metastore")] * 3

    asyncio.run(scenario())
