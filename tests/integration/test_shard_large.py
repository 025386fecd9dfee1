"""Large metastores: a rebuild that does not stall the shard, listings too long to cache."""

from __future__ import annotations

import asyncio
import uuid

from shardcat.auth import Caller
from shardcat.shards import shard as shard_module
from shardcat.shards.cold_paths import ColdTrie
from shardcat.catalog.tree.service import CatalogService
from shardcat.shards.shard import Shard
from shardcat.store.db import Store

TABLE = {"catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "CSV",
         "columns": []}


async def _metastore_with_tables(store: Store, root: str, count: int) -> tuple[str, Caller]:
    await store.migrate()
    metastore_id = str(uuid.uuid4())
    await store.create_metastore(metastore_id, f"l-{metastore_id[:8]}", {"storage_root": f"{root}/root"})
    caller = Caller("admin", 1, True, 1, metastore_id)
    service = CatalogService(Shard(store, "writer"))
    await service.create(caller, "catalog", {"name": "c"})
    await service.create(caller, "schema", {"name": "s", "catalog_name": "c"})
    for i in range(count):
        await service.create(caller, "table", {**TABLE, "name": f"t{i:02}", "storage_location": f"{root}/ext/t{i}"})
    return metastore_id, caller


def test_a_rebuild_yields_and_swaps_its_tries_in_whole(pg_url, tmp_path, monkeypatch):
    monkeypatch.setattr(shard_module, "REBUILD_BATCH", 2)

    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        try:
            metastore_id, caller = await _metastore_with_tables(store, f"file://{tmp_path}", 8)
            shard = Shard(store, "fresh")
            shard.own(metastore_id)
            state = shard.states[metastore_id]
            remembered, seen = [], []
            remember = shard_module.MetastoreState.remember
            monkeypatch.setattr(shard_module.MetastoreState, "remember",
                                lambda self, path: (remembered.append(path), remember(self, path)))

            async def watch():      # runs while the rebuild yields: the live trie is either empty or whole
                while not state.paths_ready.is_set():   # (cold meanwhile: what its writes loaded, here nothing)
                    live = state.trie.known if isinstance(state.trie, ColdTrie) else state.trie
                    seen.append((len(remembered), len(list(live.descendants(f"file://{tmp_path}/ext")))))
                    await asyncio.sleep(0)

            watcher = asyncio.create_task(watch())
            await shard.state(metastore_id)
            await watcher
            assert any(0 < built < 8 for built, _ in seen), seen    # it ran in the middle of the build...
            assert {live for _, live in seen} == {0}, seen           # ...and never saw half a trie
            assert len(list(state.trie.descendants(f"file://{tmp_path}/ext"))) == 8
            got = await CatalogService(shard).get(caller, "table", "c.s.t03")
            assert got["storage_location"] == f"file://{tmp_path}/ext/t3"
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_listing_too_long_to_cache_pages_from_the_database(pg_url, tmp_path, monkeypatch):
    monkeypatch.setattr(shard_module, "MAX_CACHED_LISTING", 3)

    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=2)
        try:
            metastore_id, caller = await _metastore_with_tables(store, f"file://{tmp_path}", 5)
            shard = Shard(store, "lister")
            service = CatalogService(shard)
            names, token = [], None
            while True:
                page = await service.list(caller, "table", "c.s", 2, token)
                names += [t["name"] for t in page["tables"]]
                token = page.get("next_page_token")
                if not token:
                    break
            assert names == [f"t{i:02}" for i in range(5)]
            assert shard.states[metastore_id].cache.stats()["listings"] == 0     # not cached whole
            schemas = await service.list(caller, "schema", "c")                     # a short one is
            assert [s["name"] for s in schemas["schemas"]] == ["default", "s"]      # default: every catalog's
            assert shard.states[metastore_id].cache.stats()["listings"] == 1
        finally:
            await store.close()

    asyncio.run(scenario())
