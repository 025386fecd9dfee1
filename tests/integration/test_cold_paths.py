"""A cold owner's writes answer their path questions from PostgreSQL (shards/cold_paths.py), exactly.

1. Hypothesis, on real PostgreSQL: random trees of storage paths (tables, volumes, catalogs and
   schemas with managed roots, external locations), changed further while the owner is cold (by its
   own writes and by another writer), asked every ownership and overlap question through cold tries
   (each path loaded by `Store.paths_near` when first asked): every answer equals the full trie's
   built from every path. The whole index is held back throughout.
2. A cold owner whose path index build is held back takes a managed and an external createTable,
   refuses an external table overlapping another (one it read, one it just wrote, one of the same
   group commit) or outside every external location, before the build finishes; once the index is
   in, its tries are a fresh shard's.
3. The byte-ordered index serves a prefix as a range (EXPLAIN), whatever the database's locale.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardcat.auth import Caller
from shardcat.cache.url_trie import UrlTrie
from shardcat.catalog.tree.service import CatalogService
from shardcat.catalog.tree.storage import Credentials, ExternalLocations, list_files
from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError
from shardcat.shards import cold_paths
from shardcat.shards.cold_paths import ColdTrie, PathsNeeded, load_paths
from shardcat.shards.shard import CacheConfig, Shard
from shardcat.shards.state import PathOwner
from shardcat.store.db import Store

ROOT = "file:///w/r"
BUCKETS = ("file:///w", "s3://bk", "s3://other")
SEGMENTS = ("a", "b", "r", "a-b")      # "a-b" sorts between "a" and "a/…" in bytes: a prefix range must not take it
KINDS = ("table", "volume", "schema", "catalog", "external_location")


def _gate_paths(store: Store) -> asyncio.Event:
    """The whole index's read (Store.paths) is held until the event: the owner stays cold."""
    gate, original = asyncio.Event(), store.paths

    async def paths(metastore_id, **kw):      # kw: the build's pace
        read = await original(metastore_id, **kw)
        await gate.wait()
        return read
    paths.__wrapped__ = original
    store.paths = paths
    return gate


def _asset(ms: str, kind: str, path: str, n: int) -> Asset:
    name = f"x{n}" if kind in ("external_location", "catalog") else f"c.s{n}" if kind == "schema" else f"c.s.t{n}"
    return Asset(id=str(uuid.uuid4()), metastore_id=ms, type=kind, namespace=kind if kind != "volume" else "volume",
                 parent_id=ms, name=name.rsplit(".", 1)[-1], full_name=name, storage_path=path, info={})


def _owner(entry):
    """An answer as compared: (url, asset id; "root" for the metastore's storage root)."""
    if entry is None:
        return None
    url, owner = entry
    return url, "root" if owner.type == "metastore" else owner.asset_id


def _answers(trie, locations, url: str) -> tuple:
    """Every question a write asks about `url`; an overlap below it may be any one (UrlTrie's
    contract), so it compares as "one of these"."""
    def overlap(trie, ignore=None):
        hit = _owner(trie.first_overlap(url, ignore=ignore))
        below = {_owner(e) for e in trie.descendants(url) if ignore is None or not ignore(e[1])}
        return ("below", frozenset(below)) if hit in below else hit

    at = trie.get(url)
    return (_owner(trie.owner(url)), overlap(trie), overlap(trie, lambda o: o.is_root),
            sorted(_owner(e) for e in trie.descendants(url)), None if at is None else _owner((url, at)),
            _owner(locations.owner(url)), overlap(locations), len(locations))


async def _ask(shard: Shard, state, question):
    """`question()`, loading what the cold tries need first, as a cold write does."""
    while True:
        try:
            return question()
        except PathsNeeded as need:
            await load_paths(shard.store, state, need, shard.reconcile, shard._paths_whole)


def _full_tries(store_paths, meta_id: str) -> tuple[UrlTrie, UrlTrie]:
    trie, locations = UrlTrie(), UrlTrie()
    trie.insert(ROOT, PathOwner(meta_id, "metastore", "m", True))
    for p in store_paths:
        if p.type == "external_location":
            locations.insert(p.storage_path, PathOwner(p.id, p.type, p.full_name, True))
        else:
            trie.insert(p.storage_path, PathOwner(p.id, p.type, p.full_name, p.type in ("catalog", "schema")))
    return trie, locations


paths = st.builds(lambda b, segs: "/".join((b, *segs)), st.sampled_from(BUCKETS),
                  st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3))
entries = st.tuples(st.sampled_from(KINDS), paths)
# A later write: ("add", kind, path), ("drop", index), ("move", index, path); by the cold owner or by another writer.
ops = st.tuples(st.one_of(st.tuples(st.just("add"), st.sampled_from(KINDS), paths),
                          st.tuples(st.just("drop"), st.integers(0, 50)),
                          st.tuples(st.just("move"), st.integers(0, 50), paths)), st.booleans())
QUESTIONS = sorted({"/".join((b, *s[:k])) for b in BUCKETS for s in
                    [(x, y, z) for x in SEGMENTS for y in SEGMENTS for z in SEGMENTS] for k in range(4)})


def test_cold_tries_answer_every_path_question_as_the_full_trie(pg_url):
    async def setup():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        await store.migrate()
        await store.close()
    asyncio.run(setup())

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])
    @given(initial=st.lists(entries, max_size=14), later=st.lists(ops, max_size=8),
           order=st.permutations(range(len(QUESTIONS))), early=st.lists(st.sampled_from(QUESTIONS), max_size=6))
    def check(initial, later, order, early):
        asyncio.run(_scenario(pg_url, initial, later, [QUESTIONS[i] for i in order], early))

    check()


def test_paths_kept_in_postgresql_answer_every_path_question_as_the_full_trie(pg_url, monkeypatch):
    """A metastore past `path_index_max` never builds its whole index: its cold tries stay, bounded
    (here to 3 entries, so they start over all the time), and answer as the full trie."""
    starts = []
    forget = cold_paths.forget_loaded
    monkeypatch.setattr(cold_paths, "COLD_PATHS_MAX", 3)
    monkeypatch.setattr(cold_paths, "forget_loaded", lambda state: (starts.append(1), forget(state))[1])

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])
    @given(initial=st.lists(entries, max_size=14), later=st.lists(ops, max_size=8),
           order=st.permutations(range(len(QUESTIONS))), early=st.lists(st.sampled_from(QUESTIONS), max_size=6))
    def check(initial, later, order, early):
        asyncio.run(_scenario(pg_url, initial, later, [QUESTIONS[i] for i in order], early, in_db=True))

    check()
    assert starts, "the bound never started a cold trie over"


async def _scenario(pg_url: str, initial, later, questions: list[str], early: list[str], in_db: bool = False
                    ) -> None:
    store = await Store.open(pg_url, min_size=1, max_size=3)
    try:
        ms = str(uuid.uuid4())
        await store.create_metastore(ms, f"cp-{ms[:8]}", {"storage_root": ROOT})
        live: dict[str, Asset] = {}
        used: set[tuple[bool, str]] = set()     # (is a location, path): one entry per path in each trie

        def free(kind: str, path: str) -> bool:     # (the metastore's root is its own, as the catalog keeps it)
            return (kind == "external_location", path) not in used and (path != ROOT or kind == "external_location")

        async with store.write(ms, await store.metastore_version(ms)) as tx:
            for n, (kind, path) in enumerate(initial):
                if free(kind, path):
                    live_asset = await tx.put(_asset(ms, kind, path, n), new=True)
                    live[live_asset.id] = live_asset
                    used.add((kind == "external_location", path))
        gate = _gate_paths(store)
        # in_db: every metastore's paths are too many for a whole index (-1: even none)
        shard = Shard(store, "cold", cache=CacheConfig(path_index_max=-1) if in_db else CacheConfig())
        try:
            await shard.lookup(ms, "table", "c.s.nothing")            # cold: its index is built aside, held
            state = shard.states[ms]
            if in_db:
                assert await shard.warmed(ms) is state and state.paths_in_db
            assert isinstance(state.trie, ColdTrie) and not state.paths_ready.is_set()
            for n, url in enumerate(early):     # some paths loaded before the writes: some whole, some their owners only
                if n % 2:
                    await _ask(shard, state, lambda url=url: state.trie.owner(url))
                else:
                    await _ask(shard, state, lambda url=url: _answers(state.trie, state.locations, url))
            for n, (op, by_owner) in enumerate(later):
                async def body(tx, state, op=op, n=n):
                    ids = sorted(live, key=lambda i: (live[i].storage_path, live[i].type))   # not by random ids
                    if op[0] == "add" and free(op[1], op[2]):
                        added = await tx.put(_asset(ms, op[1], op[2], 100 + n), new=True)
                        live[added.id] = added
                        used.add((op[1] == "external_location", op[2]))
                    elif op[0] == "drop" and ids:
                        gone = live.pop(ids[op[1] % len(ids)])
                        await tx.delete([gone])
                        used.discard((gone.type == "external_location", gone.storage_path))
                    elif op[0] == "move" and ids and free(live[ids[op[1] % len(ids)]].type, op[2]):
                        old = live[ids[op[1] % len(ids)]]
                        used.discard((old.type == "external_location", old.storage_path))
                        live[old.id] = await tx.put(dataclasses.replace(old, storage_path=op[2]))
                        used.add((old.type == "external_location", op[2]))
                if by_owner:
                    await shard.write(ms, body)                        # applied to its cold tries
                else:
                    async with store.write(ms, await store.metastore_version(ms)) as tx:
                        await body(tx, state)
                    await shard.observed(ms, await store.metastore_version(ms))   # reconciled into them
            truth, truth_locations = _full_tries((await store.paths.__wrapped__(ms))[1], ms)
            for url in questions:
                cold = await _ask(shard, state, lambda url=url: _answers(state.trie, state.locations, url))
                expected = _answers(truth, truth_locations, url)
                assert cold == expected, (url, cold, expected)
            assert not state.paths_ready.is_set() and isinstance(state.trie, ColdTrie)   # all of it while cold
            if in_db:
                return
            gate.set()
            whole = await shard.warmed(ms)
            for url in questions:
                expected = _answers(truth, truth_locations, url)
                assert _answers(whole.trie, whole.locations, url) == expected, (url, expected)
        finally:
            gate.set()
            for task in [s.warming for s in shard.states.values() if s.warming is not None]:
                await asyncio.wait([task])
    finally:
        await store.close()


def _table(name: str, location: str | None = None) -> dict:
    kind = {"table_type": "EXTERNAL", "storage_location": location} if location else {"table_type": "MANAGED"}
    return {"name": name, "catalog_name": "c", "schema_name": "s", "data_source_format": "DELTA",
            "columns": [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}',
                         "position": 0, "nullable": True}], **kind}


async def _until(condition, seconds: float = 30) -> bool:
    """Whether `condition()` came true within `seconds` (a loaded machine may take long to get there)."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


async def _lake_world(pg_url: str, lake: str, root: str):
    """A metastore with catalog c, schema c.s, a storage credential and external location `lake`:
    (store, metastore id, an admin caller, a warm writer's CatalogService)."""
    store = await Store.open(pg_url, min_size=1, max_size=4)
    await store.migrate()
    ms = str(uuid.uuid4())
    await store.create_metastore(ms, f"cw-{ms[:8]}", {"storage_root": root})
    admin = Caller("admin", 1, True, 1, ms)
    warm = CatalogService(Shard(store, "before"))
    await warm.create(admin, "catalog", {"name": "c"})
    await warm.create(admin, "schema", {"name": "s", "catalog_name": "c"})
    writer = Shard(store, "before")
    await Credentials(writer, "STORAGE", "Storage credential").create(
        admin, {"name": "cred", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}})
    await ExternalLocations(writer).create(admin, {"name": "lake", "url": lake, "credential_name": "cred"})
    return store, ms, admin, warm


async def _refused(coro) -> str:
    try:
        await coro
    except CatalogError as e:
        assert e.code == "INVALID_PARAMETER_VALUE", e
        return e.message
    raise AssertionError("the write was taken")


@pytest.mark.parametrize("in_db", [False, True], ids=["index built aside", "paths kept in PostgreSQL"])
def test_a_cold_owner_creates_tables_and_refuses_overlaps_before_its_index_is_built(pg_url, tmp_path, in_db,
                                                                                      monkeypatch):
    """in_db: the owner never builds the whole index, and its cold trie starts over past 2 entries."""
    lake, root = f"file://{tmp_path}/lake", f"file://{tmp_path}/managed"
    monkeypatch.setattr(cold_paths, "COLD_PATHS_MAX", 2)

    async def scenario():
        store, ms, caller, warm = await _lake_world(pg_url, lake, root)
        old = await warm.create(caller, "table", _table("old", f"{lake}/old"))
        managed_old = await warm.create(caller, "table", _table("managed_old"))

        gate = _gate_paths(store)                 # the new owner's whole index: read, then held
        shard = Shard(store, "after-failover", cache=CacheConfig(path_index_max=-1 if in_db else 250_000))
        service = CatalogService(shard)
        try:
            # Managed and external creates are taken while the index is held back.
            made = await asyncio.wait_for(service.create(caller, "table", _table("m1")), 30)
            assert made["storage_location"].startswith(f"{root}/") and made["table_id"] in made["storage_location"]
            ext = await asyncio.wait_for(service.create(caller, "table", _table("e1", f"{lake}/e1")), 30)
            assert ext["storage_location"] == f"{lake}/e1"
            state = shard.states[ms]
            assert not state.paths_ready.is_set() and isinstance(state.trie, ColdTrie)
            assert shard.stats["cold_path_loads"] >= 2
            # Overlaps are refused: below a table it read, at and above one it wrote, inside a managed table.
            assert "overlaps" in await _refused(service.create(caller, "table", _table("x1", f"{lake}/old/sub")))
            assert "overlaps" in await _refused(service.create(caller, "table", _table("x2", f"{lake}/e1")))
            assert "overlaps" in await _refused(service.create(caller, "table", _table("x3", lake)))
            assert "overlaps" in await _refused(service.create(
                caller, "table", _table("x4", f"{managed_old['storage_location']}/part")))
            assert "external location" in await _refused(service.create(
                caller, "table", _table("x5", f"file://{tmp_path}/elsewhere/t")))
            # Two writes of one group commit claim one new path: the first has it, the second is refused.
            release, held = asyncio.Event(), None

            async def hold(tx, state):
                await release.wait()
            held = asyncio.create_task(shard.write(ms, hold))
            await _until(lambda: state.write_lock.locked() and not state.pending)      # the held write runs
            group = [asyncio.create_task(service.create(caller, "table", _table(n, f"{lake}/same/{p}")))
                     for n, p in (("g1", "x"), ("g2", "x/y"))]
            both_queued = await _until(lambda: len(state.pending) == 2)
            release.set()           # before asserting: a failure must not leave the held write open
            await held
            assert both_queued
            first, second = await asyncio.gather(*group, return_exceptions=True)
            assert first["storage_location"] == f"{lake}/same/x"
            assert isinstance(second, CatalogError) and "overlaps" in second.message
            assert not state.paths_ready.is_set()              # all of it before the build finished
        finally:
            gate.set()
        whole = await shard.warmed(ms)
        if in_db:
            assert whole.paths_in_db and isinstance(whole.trie, ColdTrie) and not whole.paths_ready.is_set()
            await store.close()
            return
        truth = await Shard(store, "fresh").warmed(ms)
        assert whole.urls() == truth.urls()
        names = {o.full_name for _, o in whole.trie.descendants(lake)}
        assert names == {"c.s.old", "c.s.e1", "c.s.g1"} and old["name"] == "old"
        await store.close()

    asyncio.run(scenario())


def test_a_prefix_is_a_range_of_the_byte_ordered_paths_index(pg_url):
    """The query `Store.paths_near` sends for "below a path" is an index range (not a scan), and takes
    nothing that merely starts with the same characters ("a-b" beside "a/…")."""
    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        await store.migrate()
        ms = str(uuid.uuid4())
        await store.create_metastore(ms, f"px-{ms[:8]}", {"storage_root": ROOT})
        async with store.write(ms, await store.metastore_version(ms)) as tx:
            for n, path in enumerate(["s3://bk/a", "s3://bk/a/b", "s3://bk/a-b", "s3://bk/a.b/c", "s3://bk/aa"]):
                await tx.put(_asset(ms, "table", path, n), new=True)
        _, found = await store.paths_near(ms, ["s3://bk", "s3://bk/a"], ["s3://bk/a/"], False)
        assert sorted(p.storage_path for p in found) == ["s3://bk/a", "s3://bk/a/b"]
        await store.close()
        conn = await asyncpg.connect(pg_url)
        try:
            assert await conn.fetchval("SELECT collation_name FROM information_schema.columns "
                                       "WHERE table_name = 'assets' AND column_name = 'storage_path'") == "C"
            await conn.execute("SET enable_seqscan = off")       # a small table: ask whether the index can serve it
            plan = "\n".join(r[0] for r in await conn.fetch(
                "EXPLAIN SELECT id FROM assets WHERE metastore_id = $1 AND storage_path >= $2 AND storage_path < $3",
                uuid.UUID(ms), "s3://bk/a/", "s3://bk/a0"))
            assert "assets_paths" in plan and "Index Cond" in plan and "storage_path >=" in plan, plan
        finally:
            await conn.close()

    asyncio.run(scenario())


def test_a_cold_owner_reads_by_path_before_its_index_is_built(pg_url, tmp_path):
    """Listing files by path, governed by the table that owns the path, answers from the cold tries."""
    lake, root = f"file://{tmp_path}/lake", f"file://{tmp_path}/managed"
    (tmp_path / "lake" / "old").mkdir(parents=True)
    (tmp_path / "lake" / "old" / "part-0.parquet").write_bytes(b"x")

    async def scenario():
        store, ms, admin, warm = await _lake_world(pg_url, lake, root)
        bob = Caller("bob", 2, False, 1, ms)
        await warm.create(admin, "table", _table("old", f"{lake}/old"))

        gate = _gate_paths(store)
        shard = Shard(store, "cold-reader")
        try:
            listed = await asyncio.wait_for(list_files(shard, admin, f"{lake}/old"), 30)
            assert [f["name"] for f in listed["files"]] == ["part-0.parquet"]
            try:        # bob may not read the table owning the path: refused as by name
                await asyncio.wait_for(list_files(shard, bob, f"{lake}/old"), 30)
                raise AssertionError("bob listed a table's files")
            except CatalogError as e:
                assert e.code == "PERMISSION_DENIED" and "may not see" in e.message, e
            try:
                await asyncio.wait_for(list_files(shard, admin, f"file://{tmp_path}/elsewhere"), 30)
                raise AssertionError("listed outside every external location")
            except CatalogError as e:
                assert e.code in ("PERMISSION_DENIED", "INVALID_PARAMETER_VALUE"), e
            try:        # nor the location's root, and nothing below it is read for a caller refused there
                await asyncio.wait_for(list_files(shard, bob, lake), 30)
                raise AssertionError("bob listed the location")
            except CatalogError as e:
                assert e.code in ("PERMISSION_DENIED", "INVALID_PARAMETER_VALUE"), e
            state = shard.states[ms]
            assert not state.paths_ready.is_set() and shard.stats["cold_path_loads"] >= 1
            assert lake not in state.trie.covered and lake in state.trie.above
        finally:
            gate.set()
        await shard.warmed(ms)
        assert await list_files(shard, admin, f"{lake}/old") == listed
        await store.close()

    asyncio.run(scenario())
