"""Catalog operations over the in-memory store: the shard core, the composed type rules and the
followers, without PostgreSQL (store/memory.py keeps the store's contract)."""

import uuid

import pytest

from shardcat.auth import Caller
from shardcat.catalog.tree.service import CatalogService
from shardcat.catalog.features.sharing import Shares
from shardcat.errors import CatalogError
from shardcat.shards.shard import Shard
from shardcat.store.memory import MemoryStore

TABLE = {"catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "PARQUET",
         "columns": [{"name": "id", "type_name": "INT", "type_text": "int", "type_json": "{}", "position": 0}]}


async def _world(root="file:///warehouse"):
    store = MemoryStore()
    metastore_id = str(uuid.uuid4())
    await store.create_metastore(metastore_id, "m", {"storage_root": f"{root}/{metastore_id}"})
    admin = Caller("admin", 1, True, 1, metastore_id)
    service = CatalogService(Shard(store, "a"))
    await service.create(admin, "catalog", {"name": "c"})
    await service.create(admin, "schema", {"name": "s", "catalog_name": "c"})
    return store, admin, service


async def test_create_get_list_update_delete_a_table():
    _, admin, service = await _world()
    made = await service.create(admin, "table", {**TABLE, "name": "t", "storage_location": "file:///ext/t"})
    assert made["full_name"] == "c.s.t" and made["storage_location"] == "file:///ext/t"
    await service.update(admin, "table", "c.s.t", {"comment": "hello"})
    assert (await service.get(admin, "table", "c.s.t"))["comment"] == "hello"
    assert [t["name"] for t in (await service.list(admin, "table", "c.s"))["tables"]] == ["t"]
    await service.delete(admin, "table", "c.s.t")
    with pytest.raises(CatalogError) as e:
        await service.get(admin, "table", "c.s.t")
    assert e.value.code == "NOT_FOUND"


async def test_one_asset_per_name_and_per_storage_path():
    _, admin, service = await _world()
    await service.create(admin, "table", {**TABLE, "name": "t", "storage_location": "file:///ext/t"})
    with pytest.raises(CatalogError) as e:
        await service.create(admin, "table", {**TABLE, "name": "t", "storage_location": "file:///ext/other"})
    assert e.value.code == "ALREADY_EXISTS"
    with pytest.raises(CatalogError) as e:
        await service.create(admin, "table", {**TABLE, "name": "u", "storage_location": "file:///ext/t/inside"})
    assert "file:///ext/t" in str(e.value)


async def test_a_managed_volume_gets_storage_under_the_root():
    """The volume rule, composed in catalog/tree/service.py."""
    store, admin, service = await _world()
    volume = await service.create(admin, "volume", {"name": "v", "catalog_name": "c", "schema_name": "s",
                                                    "volume_type": "MANAGED"})
    root = (await store.get_metastore(admin.metastore_id)).info["storage_root"]
    assert volume["storage_location"].startswith(root) and volume["volume_id"] in volume["storage_location"]


async def test_table_rules_run_in_their_composed_order():
    """Delta's catalog-managed flag and the row-filter check are both part of creating a table."""
    _, admin, service = await _world()
    managed = await service.create(admin, "table", {**TABLE, "name": "d", "table_type": "MANAGED",
                                                    "data_source_format": "DELTA",
                                                    "properties": {"delta.feature.catalogManaged": "supported"}})
    assert managed["properties"]["io.unitycatalog.tableId"] == managed["table_id"]
    with pytest.raises(CatalogError) as e:
        await service.create(admin, "table", {**TABLE, "name": "f", "storage_location": "file:///ext/f",
                                              "row_filter": {"function_name": "c.s.nope", "input_column_names": ["id"]}})
    assert "does not exist" in str(e.value)


async def test_a_second_shard_catches_up_through_the_change_log():
    store, admin, service = await _world()
    other = CatalogService(Shard(store, "b"))
    assert (await other.list(admin, "table", "c.s"))["tables"] == []
    await service.create(admin, "table", {**TABLE, "name": "t", "storage_location": "file:///ext/t"})
    # b's cache is at the old version; a read that sees the newer version makes it reconcile first
    await other.shard.observed(admin.metastore_id, await store.metastore_version(admin.metastore_id))
    assert [t["name"] for t in (await other.list(admin, "table", "c.s"))["tables"]] == ["t"]
    assert other.shard.stats["reconciles"] == 1


async def test_a_failed_write_changes_nothing():
    store, admin, service = await _world()
    before = await store.metastore_version(admin.metastore_id)
    with pytest.raises(CatalogError):
        await service.create(admin, "table", {**TABLE, "name": "bad", "columns": "not a list"})
    assert await store.metastore_version(admin.metastore_id) == before


async def test_a_follower_hears_every_applied_write_reconcile_and_rebuild():
    """The shard core's followers hook: what mirrors a metastore joins with `follow` (no feature in the core)."""
    store, admin, service = await _world()

    class Recorder:
        def __init__(self):
            self.heard = []

        def applied(self, state, tx):
            self.heard.append(("applied", tx.version, sorted(a.name for a in tx.written.values())))

        async def reconciled(self, state, changes):
            self.heard.append(("reconciled", changes.version, len(changes.changed)))

        def rebuilt(self, state, version):
            self.heard.append(("rebuilt", version))

    other = CatalogService(Shard(store, "b"))
    recorder = Recorder()
    other.shard.follow(recorder)
    other.shard.follow(recorder)        # once, however often asked
    await other.list(admin, "schema", "c")                      # first use: a rebuild
    await other.create(admin, "table", {**TABLE, "name": "t", "storage_location": "file:///ext/t"})
    await service.create(admin, "table", {**TABLE, "name": "u", "storage_location": "file:///ext/u"})
    await other.shard.observed(admin.metastore_id, await store.metastore_version(admin.metastore_id))
    assert recorder.heard == [("rebuilt", 2), ("applied", 3, ["t"]), ("reconciled", 4, 1)]


async def test_a_rename_carries_what_lies_below():
    """The generic service's default on_rename: a schema's tables follow its new name; the old name is gone."""
    _, admin, service = await _world()
    await service.create(admin, "table", {**TABLE, "name": "t", "storage_location": "file:///ext/t"})
    renamed = await service.update(admin, "schema", "c.s", {"new_name": "s2"})
    assert renamed["full_name"] == "c.s2"
    assert (await service.get(admin, "table", "c.s2.t"))["full_name"] == "c.s2.t"
    with pytest.raises(CatalogError) as e:
        await service.get(admin, "table", "c.s.t")
    assert (e.value.code, e.value.message) == ("NOT_FOUND", "Table 'c.s.t' does not exist.")
    with pytest.raises(CatalogError) as e:
        await service.delete(admin, "schema", "c.s2")           # not empty: refused without force
    assert e.value.code == "FAILED_PRECONDITION" and "c.s2.t" in str(e.value)


async def test_a_metastore_level_type_is_the_same_service():
    """Shares (catalog/features/sharing.py) through the one generic service: one plain name, a rename by
    `name`, their own hooks and messages."""
    store, admin, service = await _world()
    shares = Shares(service.shard)
    made = await shares.create(admin, {"name": "Sales"})
    assert (made["name"], made["objects"]) == ("sales", [])      # on_create and output hooks
    await shares.update(admin, "sales", {"name": "sales2", "comment": "q3"})
    assert [s["name"] for s in (await shares.list(admin))["shares"]] == ["sales2"]
    with pytest.raises(CatalogError) as e:
        await shares.get(admin, "sales")
    assert e.value.message == "Share 'sales' does not exist."
    with pytest.raises(CatalogError) as e:
        await shares.get(admin, "c.s")        # a plain name: a period is refused, not split
    assert e.value.code == "INVALID_PARAMETER_VALUE" and "invalid character '.'" in e.value.message
    await shares.delete(admin, "sales2")
    assert (await shares.list(admin))["shares"] == []
