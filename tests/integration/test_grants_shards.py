"""Grants through the change log: two shards own one metastore; grants made through one take
effect through the other on the next request (the router sends the newest acknowledged version),
for children created later too (inheritance), and revocation likewise; lists are filtered."""

from __future__ import annotations

import uuid

import pytest

from shardcat.auth import Caller
from shardcat.errors import CatalogError
from shardcat.governance.grants import PermissionsService
from shardcat.catalog.tree.service import CatalogService
from shardcat.shards.shard import Shard
from shardcat.store.db import Store

TABLE = {"catalog_name": "c", "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
         "columns": []}


@pytest.fixture
async def two_shards(pg_url, tmp_path):
    store = await Store.open(pg_url, min_size=1, max_size=4)
    await store.migrate()
    metastore_id = str(uuid.uuid4())
    await store.create_metastore(metastore_id, f"g-{metastore_id[:8]}",
                                 {"storage_root": f"file://{tmp_path}/{metastore_id}", "owner": "root"})
    yield store, metastore_id, Shard(store, "a"), Shard(store, "b")
    await store.close()


async def test_grant_and_revoke_reach_the_other_shard(two_shards):
    store, ms, a, b = two_shards
    cat_a, cat_b = CatalogService(a), CatalogService(b)
    perms_a = PermissionsService(a)
    seen = 0

    def admin() -> Caller:
        return Caller("admin", 1, True, 1, ms, min_version=seen)

    def bob() -> Caller:
        return Caller("bob", 2, False, 1, ms, min_version=seen, groups=frozenset({"analysts"}))

    def ack(shard) -> None:
        nonlocal seen
        seen = max(seen, shard.version_of(ms))

    await cat_a.create(admin(), "catalog", {"name": "c"})
    await cat_a.create(admin(), "schema", {"name": "s", "catalog_name": "c"})
    await cat_a.create(admin(), "table", {"name": "t", **TABLE})
    ack(a)
    with pytest.raises(CatalogError) as e:          # b loads its index now: nothing granted yet
        await cat_b.get(bob(), "table", "c.s.t")
    assert e.value.code == "NOT_FOUND"      # a table bob may not see answers as a missing one

    await perms_a.update(admin(), "catalog", "c", {"changes": [
        {"principal": "analysts", "add": ["USE CATALOG", "USE SCHEMA", "SELECT"]}]})
    ack(a)
    assert (await cat_b.get(bob(), "table", "c.s.t"))["name"] == "t"
    # A table created later, through a, inherits the catalog's grant on b.
    await cat_a.create(admin(), "table", {"name": "t2", **TABLE})
    ack(a)
    assert (await cat_b.get(bob(), "table", "c.s.t2"))["name"] == "t2"
    listed = await cat_b.list(bob(), "table", "c.s")
    assert [t["name"] for t in listed["tables"]] == ["t", "t2"]
    # So does a schema created later, and a table in it.
    await cat_a.create(admin(), "schema", {"name": "later", "catalog_name": "c"})
    await cat_a.create(admin(), "table", {"name": "t3", **TABLE, "schema_name": "later"})
    ack(a)
    assert (await cat_b.get(bob(), "table", "c.later.t3"))["name"] == "t3"
    assert [s["name"] for s in (await cat_b.list(bob(), "schema", "c"))["schemas"]] == ["default", "later", "s"]
    assert b.states[ms].privileges is not None and b.stats["rebuilds"] == 1   # kept current, not reloaded

    # Revoke through a: the next request through b is refused, and lists are filtered.
    await perms_a.update(admin(), "catalog", "c", {"changes": [{"principal": "analysts", "remove": ["SELECT"]}]})
    ack(a)
    with pytest.raises(CatalogError) as e:
        await cat_b.get(bob(), "table", "c.s.t2")
    assert e.value.code == "NOT_FOUND"      # no longer visible to bob: as if missing
    assert (await cat_b.list(bob(), "table", "c.s"))["tables"] == []
    # A direct grant on one table shows that one only.
    await perms_a.update(admin(), "table", "c.s.t", {"changes": [{"principal": "bob", "add": ["SELECT"]}]})
    ack(a)
    assert [t["name"] for t in (await cat_b.list(bob(), "table", "c.s"))["tables"]] == ["t"]
    # Ownership moves through the change log too: bob owns t2 and may read and delete it.
    await cat_a.update(admin(), "table", "c.s.t2", {"owner": "bob"})
    ack(a)
    assert [t["name"] for t in (await cat_b.list(bob(), "table", "c.s"))["tables"]] == ["t", "t2"]
    await cat_b.delete(bob(), "table", "c.s.t2")
    ack(b)
    with pytest.raises(CatalogError) as e:      # but not the schema above it
        await cat_a.delete(bob(), "schema", "c.s", force=True)
    assert e.value.code == "PERMISSION_DENIED"
    # Dropping the catalog drops its grants with it (the rows cascade; the index forgets them).
    await cat_a.delete(admin(), "catalog", "c", force=True)
    ack(a)
    assert await store.pool.fetchval("SELECT count(*) FROM grants WHERE metastore_id = $1::uuid", ms) == 0
    await cat_b.list(bob(), "catalog", None)
    assert len(b.states[ms].privileges.grants) == 0


async def test_metastore_admin_is_the_owner_group(two_shards):
    store, ms, a, b = two_shards
    root = Caller("root", 3, False, 1, ms)                         # the metastore's owner
    ops = Caller("ops", 4, False, 1, ms, groups=frozenset({"platform"}))
    await CatalogService(a).create(root, "catalog", {"name": "c"})
    with pytest.raises(CatalogError):
        await CatalogService(a).create(ops, "catalog", {"name": "d"})
    # Hand the metastore to a group: its members become admins, on the other shard too.
    from shardcat.catalog.tree.metastores import MetastoreService
    await MetastoreService(a).update(root, ms, {"owner": "platform"})
    version = a.version_of(ms)
    ops = Caller("ops", 4, False, 1, ms, min_version=version, groups=frozenset({"platform"}))
    assert (await CatalogService(b).create(ops, "catalog", {"name": "d"}))["owner"] == "ops"
    assert (await CatalogService(a).create(ops, "catalog", {"name": "e"}))["name"] == "e"
    with pytest.raises(CatalogError):
        await CatalogService(a).create(Caller("root", 3, False, 1, ms, min_version=version), "catalog", {"name": "f"})
