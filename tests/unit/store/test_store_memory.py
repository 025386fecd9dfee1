"""The in-memory store (store/memory.py) keeps the `CatalogStore` contract (store/protocol.py) the
shard core relies on: a group commit's writes fail alone and commit together, a put records what
`WriteTx.put` records, and principals answer governance's questions."""

import asyncio
import uuid

import pytest

from shardcat.auth import Caller
from shardcat.catalog.tree.service import CatalogService
from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError
from shardcat.governance.authorize import is_admin_now
from shardcat.shards.group_commit import GroupCommitConfig
from shardcat.shards.shard import Shard
from shardcat.store.errors import VersionConflict
from shardcat.store.memory import MemoryStore


async def _metastore(store: MemoryStore, owner: str = "admin") -> str:
    metastore_id = str(uuid.uuid4())
    await store.create_metastore(metastore_id, "m", {"storage_root": f"file:///w/{metastore_id}", "owner": owner})
    return metastore_id


def _catalog(metastore_id: str, name: str) -> Asset:
    return Asset(id=str(uuid.uuid4()), metastore_id=metastore_id, type="catalog", namespace="catalog",
                 parent_id=metastore_id, name=name, full_name=name, storage_path=None, info={})


async def test_a_group_commits_its_writes_together_and_a_failing_one_alone():
    store = MemoryStore()
    ms = await _metastore(store)
    async with store.write_batch(ms, 0) as group:
        async with group.write() as tx:
            first = await tx.put(_catalog(ms, "a"))
        with pytest.raises(KeyError):
            async with group.write() as tx:
                await tx.put(_catalog(ms, "b"))
                await tx.put(_catalog(ms, "a"))      # a name taken: this write fails, and alone
        async with group.write() as tx:
            assert tx.earlier and await tx.get("catalog", "a") == first     # sees the group's earlier write
            await tx.put(_catalog(ms, "c"))
        assert (await store.get_asset(ms, "catalog", "a"))[1] is None       # nothing visible before the commit
    assert await store.metastore_version(ms) == 2
    assert [c.version for c in await store.changes(ms, 0, 10)] == [1, 2]
    names = {a.name for a in (await store.list_children(ms, ms, "catalog"))[1]}
    assert names == {"a", "c"}


async def test_a_group_conflicts_when_another_write_committed_meanwhile():
    store = MemoryStore()
    ms = await _metastore(store)
    with pytest.raises(VersionConflict):
        async with store.write_batch(ms, 0) as group:
            async with group.write() as tx:
                await tx.put(_catalog(ms, "a"))
            async with store.write(ms, 0) as other:
                await other.put(_catalog(ms, "b"))
    assert [a.name for a in (await store.list_children(ms, ms, "catalog"))[1]] == ["b"]


async def test_a_put_records_as_the_database_write_does():
    """`WriteTx.recorded_put`, inherited: created, then updated in the same write, stays created;
    deleted and put back, it is an update."""
    store = MemoryStore()
    ms = await _metastore(store)
    async with store.write(ms, 0) as tx:
        made = await tx.put(_catalog(ms, "a"))
        await tx.put(made)
    assert made.written_at == 1 and tx.created == {made.id} and tx.details()[0]["change"] == "CREATE"
    async with store.write(ms, 1) as tx:
        await tx.delete([made])
        await tx.put(made)
    assert tx.created == set() and tx.details()[0]["change"] == "UPDATE" and tx.written[made.id].written_at == 2


async def test_a_shard_groups_concurrent_writes_over_the_memory_store():
    store = MemoryStore()
    ms = await _metastore(store)
    shard = Shard(store, "a", group_commit=GroupCommitConfig(max_batch=8))
    service = CatalogService(shard)
    admin = Caller("admin", 1, True, 1, ms)
    made = await asyncio.gather(*(service.create(admin, "catalog", {"name": f"c{i}"}) for i in range(6)),
                                service.create(admin, "catalog", {"name": "c0"}), return_exceptions=True)
    refused = [m for m in made if isinstance(m, CatalogError)]
    assert len(refused) == 1 and refused[0].code == "ALREADY_EXISTS"
    assert shard.stats["groups"] >= 1 and await store.metastore_version(ms) == 6
    assert sorted(c["name"] for c in (await service.list(admin, "catalog", None))["catalogs"]) == \
        [f"c{i}" for i in range(6)]


async def test_is_admin_now_asks_the_memory_principals():
    store = MemoryStore()
    ms = await _metastore(store, owner="admins")
    meta = await store.get_metastore(ms)
    store.principals.add("ann", groups=("admins",))
    store.principals.add("bob")
    store.principals.add("root", is_account_admin=True)
    store.principals.add("gone", groups=("admins",), active=False)
    assert await is_admin_now(store, "ann", meta) and await is_admin_now(store, "root", meta)
    assert not await is_admin_now(store, "bob", meta)
    assert not await is_admin_now(store, "gone", meta) and not await is_admin_now(store, "nobody", meta)
