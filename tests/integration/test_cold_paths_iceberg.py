"""A cold owner's Iceberg REST creates go on before its path index is built (shards/path_waits.py).

The owner's whole path index is held back (as in test_cold_paths.py). Meanwhile, through the Iceberg
REST catalog's handlers (in the process, as the shard serves them) on real PostgreSQL: a managed and
an external createTable are taken and their metadata files written; a createTable, a stage-create,
a create transaction's commit and a registerTable overlapping another table's storage (one the owner
read, one it just made) are refused, and so is one outside every external location; a stage-create
at a free location is answered and its commit (assert-create) creates the table; vending finds a
path's credential; path credentials to create a table are refused over another table and given
where free. The checks made before a create writes its metadata file answer from cold tries as the
write does, so nothing there waits for the whole index. Once the index is in, it is a fresh
shard's. A question asking more paths than a write may load waits for the whole index instead,
and answers as it does.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from shardcat.auth import Caller
from shardcat.catalog.protocols.iceberg.catalog import IcebergCatalog
from shardcat.catalog.protocols.iceberg.errors import IcebergError
from shardcat.catalog.features.credentials import TemporaryCredentials
from shardcat.catalog.tree.service import CatalogService
from shardcat.catalog.tree.storage import Credentials, ExternalLocations
from shardcat.errors import CatalogError
from shardcat.governance.vending import covering_credential, vend
from shardcat.shards.cold_paths import ColdTrie
from shardcat.shards.path_waits import COLD_LOADS
from shardcat.shards.shard import Shard
from shardcat.store.db import Store
from tests.integration.test_cold_paths import _gate_paths

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _local(url: str) -> str:
    return url.removeprefix("file://")


async def _refused(coro) -> str:
    try:
        await asyncio.wait_for(coro, 30)
    except IcebergError as e:
        assert e.status == 400 and e.kind == "BadRequestException", (e.status, e.kind, e.message)
        return e.message
    except CatalogError as e:       # the catalog's own refusal (answered as 400 by the Iceberg routes)
        assert e.code == "INVALID_PARAMETER_VALUE", e
        return e.message
    raise AssertionError("the request was taken")


def test_a_cold_owner_serves_iceberg_creates_before_its_index_is_built(pg_url, tmp_path):
    lake, root = f"file://{tmp_path}/lake", f"file://{tmp_path}/managed"

    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=4)
        await store.migrate()
        ms = str(uuid.uuid4())
        await store.create_metastore(ms, f"ci-{ms[:8]}", {"storage_root": root})
        caller = Caller("admin", 1, True, 1, ms)
        before = Shard(store, "before")
        await CatalogService(before).create(caller, "catalog", {"name": "c"})
        await CatalogService(before).create(caller, "schema", {"name": "s", "catalog_name": "c"})
        await Credentials(before, "STORAGE", "Storage credential").create(
            caller, {"name": "cred", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}})
        await ExternalLocations(before).create(caller, {"name": "lake", "url": lake, "credential_name": "cred"})
        await IcebergCatalog(before).create_table(caller, "c", "s", {"name": "old", "schema": SCHEMA,
                                                                     "location": f"{lake}/old"})

        gate = _gate_paths(store)                 # the new owner's whole index: read, then held
        shard = Shard(store, "after-failover")
        iceberg = IcebergCatalog(shard)
        try:
            made = await asyncio.wait_for(iceberg.create_table(caller, "c", "s", {"name": "m1", "schema": SCHEMA}), 30)
            location = made["metadata"]["location"]
            assert location.startswith(f"{root}/") and os.path.exists(_local(made["metadata-location"]))
            ext = await asyncio.wait_for(iceberg.create_table(
                caller, "c", "s", {"name": "e1", "schema": SCHEMA, "location": f"{lake}/e1"}), 30)
            assert ext["metadata"]["location"] == f"{lake}/e1"
            state = shard.states[ms]
            assert not state.paths_ready.is_set() and isinstance(state.trie, ColdTrie)
            assert shard.stats["cold_path_loads"] >= 2
            # Overlaps refused before any metadata file is written: below a table it read, below and
            # above one it made, inside a managed table; and outside every external location.
            for name, where in (("x1", f"{lake}/old/sub"), ("x2", f"{lake}/e1/sub"), ("x3", lake),
                                ("x4", f"{location}/part")):
                assert "overlaps" in await _refused(iceberg.create_table(
                    caller, "c", "s", {"name": name, "schema": SCHEMA, "location": where}))
                assert not os.path.exists(f"{_local(where)}/metadata")       # no metadata file written
            assert "external location" in await _refused(iceberg.create_table(
                caller, "c", "s", {"name": "x5", "schema": SCHEMA, "location": f"file://{tmp_path}/elsewhere/t"}))
            assert not os.path.exists(f"{tmp_path}/elsewhere")
            # stage-create: refused over another table, answered at a free location.
            assert "overlaps" in await _refused(iceberg.create_table(
                caller, "c", "s", {"name": "x6", "schema": SCHEMA, "location": f"{lake}/e1", "stage-create": True}))
            staged = await asyncio.wait_for(iceberg.create_table(
                caller, "c", "s", {"name": "st", "schema": SCHEMA, "location": f"{lake}/st", "stage-create": True}), 30)
            assert staged["metadata"]["location"] == f"{lake}/st"
            # Its create transaction's commit (assert-create): taken where staged, refused over another table.
            base = [{"action": "assign-uuid", "uuid": staged["metadata"]["table-uuid"]},
                    {"action": "upgrade-format-version", "format-version": 2},
                    {"action": "add-schema", "schema": SCHEMA}, {"action": "set-current-schema", "schema-id": -1},
                    {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
                    {"action": "set-default-spec", "spec-id": -1},
                    {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
                    {"action": "set-default-sort-order", "sort-order-id": -1}]
            assert "overlaps" in await _refused(iceberg.commit(caller, "c.s.st", {
                "requirements": [{"type": "assert-create"}],
                "updates": base + [{"action": "set-location", "location": f"{lake}/old/st"}]}))
            committed = await asyncio.wait_for(iceberg.commit(caller, "c.s.st", {
                "requirements": [{"type": "assert-create"}],
                "updates": base + [{"action": "set-location", "location": f"{lake}/st"}]}), 30)
            assert committed["metadata"]["location"] == f"{lake}/st"
            assert (await shard.lookup(ms, "table", "c.s.st")).storage_path == f"{lake}/st"
            # registerTable of a file in another table's storage: refused (its metadata-location overlaps).
            assert "overlaps" in await _refused(iceberg.register_table(
                caller, "c", "s", {"name": "x7", "metadata-location": ext["metadata-location"]}))
            assert await shard.lookup(ms, "table", "c.s.x7") is None
            # Vending (the metadata IO of a create on object storage) finds its location the same way.
            credential, _ = await asyncio.wait_for(covering_credential(shard, ms, 0, f"{lake}/new"), 30)
            assert credential.name == "cred"
            assert await covering_credential(shard, ms, 0, f"file://{tmp_path}/elsewhere") == (
                None, "no external location covers it")
            assert (await asyncio.wait_for(vend(shard, caller, f"{lake}/new", write=True), 30))["url"] == f"{lake}/new"
            # Temporary path credentials to create a table: refused over another table, given where free.
            paths = TemporaryCredentials(shard)
            assert "overlaps" in await _refused(paths.for_path(
                caller, {"url": f"{lake}/old/sub", "operation": "PATH_CREATE_TABLE"}))
            given = await asyncio.wait_for(paths.for_path(
                caller, {"url": f"{lake}/fresh", "operation": "PATH_CREATE_TABLE"}), 30)
            assert given["url"] == f"{lake}/fresh"
            assert not state.paths_ready.is_set() and isinstance(state.trie, ColdTrie)   # all before the build
        finally:
            gate.set()
        whole = await shard.warmed(ms)
        truth = await Shard(store, "fresh").warmed(ms)
        assert whole.urls() == truth.urls()
        assert {o.full_name for _, o in whole.trie.descendants(lake)} == {"c.s.old", "c.s.e1", "c.s.st"}
        await store.close()

    asyncio.run(scenario())


def test_a_question_past_its_loads_waits_for_the_whole_index_and_answers_as_it(pg_url, tmp_path):
    """`Shard.asking_paths` loads at most COLD_LOADS paths for one question, then waits for the whole
    index (held back here until the loads are spent) and answers from it, as the whole index does."""
    lake = f"file://{tmp_path}/lake"

    async def scenario():
        store = await Store.open(pg_url, min_size=1, max_size=4)
        await store.migrate()
        ms = str(uuid.uuid4())
        await store.create_metastore(ms, f"cq-{ms[:8]}", {"storage_root": f"file://{tmp_path}/managed"})
        caller = Caller("admin", 1, True, 1, ms)
        before = Shard(store, "before")
        await CatalogService(before).create(caller, "catalog", {"name": "c"})
        await CatalogService(before).create(caller, "schema", {"name": "s", "catalog_name": "c"})
        iceberg = IcebergCatalog(before)
        for n in range(0, COLD_LOADS + 4, 2):      # every other path holds a table
            await iceberg.create_table(caller, "c", "s", {"name": f"t{n}", "schema": SCHEMA,
                                                          "location": f"{lake}/p{n}"})
        asked = [f"{lake}/p{n}/data" for n in range(COLD_LOADS + 4)]

        gate = _gate_paths(store)
        shard = Shard(store, "after-failover")

        async def owners(state):
            return [(o[0], o[1].full_name) if (o := state.trie.owner(url)) else None for url in asked]
        try:
            question = asyncio.create_task(shard.asking_paths(ms, 0, owners))
            while shard.stats["cold_path_loads"] < COLD_LOADS and not question.done():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            assert not question.done()              # past its loads: waiting for the (held) whole index
            assert shard.stats["cold_path_loads"] == COLD_LOADS
        finally:
            gate.set()
        answer = await asyncio.wait_for(question, 30)
        assert shard.states[ms].paths_ready.is_set()
        assert answer == [(f"{lake}/p{n}", f"c.s.t{n}") if n % 2 == 0 else None for n in range(COLD_LOADS + 4)]
        assert answer == await owners(await Shard(store, "fresh").warmed(ms))
        await store.close()

    asyncio.run(scenario())
