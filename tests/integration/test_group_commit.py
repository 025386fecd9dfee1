"""Group commit (issue 33): writes queued behind one in flight commit together, each as itself.

A write whose body waits on an event holds the metastore's transaction open; the writes that
arrive meanwhile form the next group. Checked: one failing write (even after it wrote rows)
fails alone and leaves nothing behind, the others commit with one version each in arrival
order; conflicts go to the first; a later write validates against the earlier ones' rows and
storage paths; groups are bounded; a lone writer waits for nothing; a transaction lost
mid-group fails every write of it and leaves the shard's state as it was; Delta commits in one
group are decided in arrival order like any write. A group runs without savepoints first and
again with them only when a write fails after changing rows or on a database error.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from shardcat.auth import Caller
from shardcat.catalog.protocols.delta_commits import DeltaCommitService
from shardcat.catalog.protocols.iceberg import IcebergCatalog
from shardcat.governance.grants import PermissionsService
from shardcat.catalog.tree.service import CatalogService
from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError
from shardcat.shards.group_commit import GroupCommitConfig
from shardcat.shards import state as state_module
from shardcat.shards.session import Session
from shardcat.shards.shard import Shard
from shardcat.store.db import Store


async def _setup(pg_url: str, root: str, config: GroupCommitConfig = GroupCommitConfig()):
    store = await Store.open(pg_url, min_size=1, max_size=4)
    await store.migrate()
    metastore_id = str(uuid.uuid4())
    await store.create_metastore(metastore_id, f"g-{metastore_id[:8]}", {"storage_root": f"{root}/{metastore_id}"})
    shard = Shard(store, "g", group_commit=config)
    service = CatalogService(shard)
    caller = Caller("admin", 1, True, 1, metastore_id)
    await service.create(caller, "catalog", {"name": "c"})
    await service.create(caller, "schema", {"name": "s", "catalog_name": "c"})
    return store, metastore_id, shard, service, caller


async def _hold(shard: Shard, metastore_id: str):
    """Start a write that keeps its transaction open until the returned event is set."""
    release, started = asyncio.Event(), asyncio.Event()

    async def body(tx, state):
        started.set()
        await release.wait()
        return "held"

    task = asyncio.create_task(shard.write(metastore_id, body))
    await started.wait()
    return release, task


async def _outcome(coro):
    try:
        return await coro
    except CatalogError as e:
        return e.code


async def _in_one_group(shard: Shard, metastore_id: str, writes: list) -> list:
    """The outcomes of `writes` (coroutines, not started), queued behind a held write so that they
    commit as one group."""
    release, held = await _hold(shard, metastore_id)
    queued = [asyncio.create_task(_outcome(w)) for w in writes]
    await asyncio.sleep(0)
    all_queued = len(shard.states[metastore_id].pending) == len(writes)
    release.set()           # before asserting: a failure must not leave the held write open
    await held
    assert all_queued
    return await asyncio.gather(*queued)


def _table(name: str, **more) -> dict:
    return {"name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [], **more}


async def _with_version(coro):
    """The write's outcome, and the version its answer would report (its session's `written_version`)."""
    with Session() as session:
        outcome = await _outcome(coro)
    return outcome, session.written_version


async def _log(store: Store, metastore_id: str, after: int):
    return [c.version for c in await store.changes(metastore_id, after, 1000)]


def test_a_failing_write_in_the_middle_of_a_group_fails_alone(pg_url, tmp_path):
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            before = shard.version_of(ms)
            release, held = await _hold(shard, ms)

            async def writes_then_fails(tx, state):
                catalog = await tx.get("catalog", "c")
                await tx.put(Asset(str(uuid.uuid4()), ms, "schema", "schema", catalog.id, "half", "c.half", None, {}))
                raise CatalogError("INVALID_PARAMETER_VALUE", "this write fails after writing a row")

            queued = [
                asyncio.create_task(_with_version(service.create(caller, "table", _table("t1")))),
                asyncio.create_task(_outcome(shard.write(ms, writes_then_fails))),
                asyncio.create_task(_outcome(service.create(caller, "catalog", {"name": "c"}))),  # exists
                asyncio.create_task(_with_version(service.create(caller, "table", _table("t2")))),
            ]
            await asyncio.sleep(0)          # all four queue behind the held transaction
            assert len(shard.states[ms].pending) == 4
            release.set()
            assert await held == "held"
            t1, failed, duplicate, t2 = await asyncio.gather(*queued)
            assert failed == "INVALID_PARAMETER_VALUE" and duplicate == "ALREADY_EXISTS"
            (t1, t1_version), (t2, t2_version) = t1, t2
            assert t1["name"] == "t1" and t2["name"] == "t2"
            # each answer names the version its own write made, not the group's last
            assert (t1_version, t2_version) == (before + 2, before + 3)
            # One version per write that went through, in arrival order, nothing of the failed ones.
            assert await _log(store, ms, before) == [before + 1, before + 2, before + 3]
            assert shard.version_of(ms) == before + 3
            assert await service.get(caller, "table", "c.s.t1") and await service.get(caller, "table", "c.s.t2")
            assert (await store.get_asset(ms, "schema", "c.half"))[1] is None
            # catalog, schema and the held write alone; the four queued behind it in one group
            assert shard.stats["lone_writes"] == 3
            assert shard.stats["groups"] == 1 and shard.stats["grouped_writes"] == 4
            assert shard.stats["group_replays"] == 1      # the failing write had written a row: with savepoints
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_write_the_database_refuses_fails_alone_and_a_taken_name_is_answered_first(pg_url, tmp_path):
    """A group first runs without savepoints. A write refused before it changed anything (a check
    in Python) fails alone there; one the database refuses (a name taken outside what the group
    has read: the unique constraint decides it, no read first) rolls the group back, and the group
    runs again with savepoints: that write fails alone, the others commit, one version each.
    A taken name is answered "already exists" before any other refusal, alone and in a group."""
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            await service.create(caller, "table", _table("taken"))
            no_location = {"table_type": "EXTERNAL"}        # refused: an EXTERNAL table needs one
            assert await _outcome(service.create(caller, "table", _table("taken", **no_location))) == "ALREADY_EXISTS"
            assert await _outcome(service.create(caller, "table", _table("free", **no_location))) \
                == "INVALID_PARAMETER_VALUE"
            before = shard.version_of(ms)

            # Refused in Python before any row changed: fails alone, no replay.
            release, held = await _hold(shard, ms)
            queued = [asyncio.create_task(_with_version(service.create(caller, "table", _table("a1")))),
                      asyncio.create_task(_outcome(service.create(caller, "table", _table("free", **no_location)))),
                      asyncio.create_task(_outcome(service.create(caller, "table", _table("taken", **no_location)))),
                      asyncio.create_task(_with_version(service.create(caller, "table", _table("a2"))))]
            await asyncio.sleep(0)
            release.set()
            await held
            (a1, v1), invalid, taken, (a2, v2) = await asyncio.gather(*queued)
            assert invalid == "INVALID_PARAMETER_VALUE" and taken == "ALREADY_EXISTS"
            assert a1["name"] == "a1" and a2["name"] == "a2" and (v1, v2) == (before + 2, before + 3)
            assert shard.stats["group_replays"] == 0

            # Refused by the database (unique violation): the group runs again with savepoints.
            before = shard.version_of(ms)
            release, held = await _hold(shard, ms)
            queued = [asyncio.create_task(_with_version(service.create(caller, "table", _table("b1")))),
                      asyncio.create_task(_outcome(service.create(caller, "table", _table("taken", comment="2nd")))),
                      asyncio.create_task(_with_version(service.create(caller, "table", _table("b2"))))]
            await asyncio.sleep(0)
            release.set()
            await held
            (b1, v1), duplicate, (b2, v2) = await asyncio.gather(*queued)
            assert duplicate == "ALREADY_EXISTS"
            assert b1["name"] == "b1" and b2["name"] == "b2" and (v1, v2) == (before + 2, before + 3)
            assert shard.stats["group_replays"] == 1
            assert await _log(store, ms, before) == [before + 1, before + 2, before + 3]
            assert shard.version_of(ms) == before + 3
            assert "comment" not in (await service.get(caller, "table", "c.s.taken"))
            changes = await store.changes(ms, before, 10)
            created = {(await store.get_asset(ms, "table", f"c.s.{n}"))[1].id for n in ("b1", "b2")}
            assert {i for c in changes for i in c.changed} == created
        finally:
            await store.close()

    asyncio.run(scenario())


def test_conflicts_go_to_the_first_arrival_and_later_writes_see_earlier_ones(pg_url, tmp_path):
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            release, held = await _hold(shard, ms)
            loc = f"file://{tmp_path}/ext/a"
            queued = [asyncio.create_task(_outcome(c)) for c in [
                service.create(caller, "table", _table("same", comment="first")),
                service.create(caller, "table", _table("same", comment="second")),
                service.create(caller, "schema", {"name": "s2", "catalog_name": "c"}),
                service.create(caller, "table", {**_table("in_s2"), "schema_name": "s2"}),   # needs the one before
                service.create(caller, "table", {**_table("ext1"), "table_type": "EXTERNAL", "storage_location": loc}),
                service.create(caller, "table", {**_table("ext2"), "table_type": "EXTERNAL",
                                                 "storage_location": loc + "/inside"}),       # overlaps the one before
            ]]
            await asyncio.sleep(0)
            release.set()
            await held
            first, second, s2, in_s2, ext1, ext2 = await asyncio.gather(*queued)
            assert first["comment"] == "first" and second == "ALREADY_EXISTS"
            assert s2["name"] == "s2" and in_s2["full_name"] == "c.s2.in_s2"
            assert isinstance(ext1, dict), ext1
            assert isinstance(ext2, str), ext2          # refused: its path lies inside ext1's
            assert (await service.get(caller, "table", "c.s.same"))["comment"] == "first"
        finally:
            await store.close()

    asyncio.run(scenario())


def test_groups_are_bounded_and_a_lone_writer_waits_for_nothing(pg_url, tmp_path):
    async def scenario():
        # max_wait an hour: a lone write that waited would never finish here.
        store, ms, shard, service, caller = await _setup(
            pg_url, f"file://{tmp_path}", GroupCommitConfig(max_batch=2, max_wait=3600))
        try:
            lone, groups = shard.stats["lone_writes"], shard.stats["groups"]
            await asyncio.wait_for(service.create(caller, "table", _table("alone")), 60)
            assert shard.stats["lone_writes"] == lone + 1 and shard.stats["groups"] == groups
        finally:
            await store.close()
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}", GroupCommitConfig(max_batch=2))
        try:
            lone, groups, grouped = shard.stats["lone_writes"], shard.stats["groups"], shard.stats["grouped_writes"]
            release, held = await _hold(shard, ms)
            queued = [asyncio.create_task(service.create(caller, "table", _table(f"b{i}"))) for i in range(5)]
            await asyncio.sleep(0)
            release.set()
            await held
            names = [t["name"] for t in await asyncio.gather(*queued)]
            assert names == [f"b{i}" for i in range(5)]
            # the held write alone, then groups of at most two: 2, 2, and the last write alone
            assert shard.stats["groups"] == groups + 2 and shard.stats["grouped_writes"] == grouped + 4
            assert shard.stats["lone_writes"] == lone + 2
        finally:
            await store.close()

    asyncio.run(scenario())


def test_after_a_group_the_tries_hold_what_a_rebuild_would_even_if_one_came_in_between(pg_url, tmp_path):
    """A group's storage paths are in the state's tries from speculation on, and its commit does not
    put them there again; what the tries hold afterwards is what a fresh shard reads from the
    database. Also when two writes of the group move one table's path, and when the state is
    rebuilt in the middle of the group (the tries replaced: the writes' paths go in again)."""
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            def ext(name: str, where: str) -> dict:
                return {**_table(name), "table_type": "EXTERNAL", "storage_location": f"file://{tmp_path}/ext/{where}"}

            async def rebuild_midway(tx, state):
                await shard._rebuild(state)         # as a reconcile past RECONCILE_GAP does
                return "rebuilt"

            for rebuild in (False, True):
                tag = "r" if rebuild else "p"
                writes = [service.create(caller, "table", ext(f"{tag}a", f"{tag}a")),
                          service.create(caller, "table", ext(f"{tag}b", f"{tag}b")),
                          service.update(caller, "table", f"c.s.{tag}a", {"storage_location":
                                                                         f"file://{tmp_path}/ext/{tag}a2"}),
                          *([shard.write(ms, rebuild_midway)] if rebuild else []),
                          service.delete(caller, "table", f"c.s.{tag}b"),
                          service.create(caller, "table", ext(f"{tag}c", f"{tag}c")),
                          service.update(caller, "table", f"c.s.{tag}c", {"storage_location":
                                                                         f"file://{tmp_path}/ext/{tag}c2"})]
                outcomes = await _in_one_group(shard, ms, writes)
                assert not [o for o in outcomes if isinstance(o, str) and o != "rebuilt"], outcomes
                state = shard.states[ms]
                fresh = Shard(store, "fresh")
                truth = await fresh.state(ms)
                assert state.urls() == truth.urls()
                for asset_id, url in truth.urls()[0].items():
                    assert state.trie.owner(url)[1].asset_id == asset_id
                assert state.trie.owner(f"file://{tmp_path}/ext/{tag}a") is None      # moved away from
                assert state.trie.owner(f"file://{tmp_path}/ext/{tag}b") is None      # dropped
                assert state.trie.owner(f"file://{tmp_path}/ext/{tag}c2")[1].full_name == f"c.s.{tag}c"
        finally:
            await store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("read_after,install_after", [(0.0, 0.0), (0.003, 0.0), (0.01, 0.05), (0.01, 0.3), (0.05, 0.01)])
def test_the_whole_index_arriving_at_any_moment_of_a_group_leaves_no_uncommitted_path(pg_url, tmp_path, monkeypatch,
                                                                                       read_after, install_after):
    """The first groups of a metastore run on cold tries while its whole index builds aside; it is
    swapped in at some moment of a group (the delays move that moment), the group goes again, and
    what the tries hold after is what a fresh shard reads. A write's body once put its table's
    path into the new tries, where no undo took it out: the next create of that path was refused."""
    build = state_module.build_paths

    async def slowed(store, metastore_id, batch):
        await asyncio.sleep(read_after)
        index = await build(store, metastore_id, batch)
        await asyncio.sleep(install_after)
        return index
    monkeypatch.setattr(state_module, "build_paths", slowed)
    test_after_a_group_the_tries_hold_what_a_rebuild_would_even_if_one_came_in_between(pg_url, tmp_path)


def test_a_group_whose_transaction_is_lost_fails_every_write_and_leaves_nothing(pg_url, tmp_path):
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            before = shard.version_of(ms)
            state = shard.states[ms]
            paths_before = state.urls()[0]
            release, held = await _hold(shard, ms)

            async def connection_dies(tx, state):
                await tx.conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

            loc = f"file://{tmp_path}/ext/lost"
            queued = [asyncio.create_task(_outcome(c)) for c in [
                service.create(caller, "table", {**_table("lost"), "table_type": "EXTERNAL", "storage_location": loc}),
                shard.write(ms, connection_dies),
            ]]
            await asyncio.sleep(0)
            release.set()
            await held
            outcomes = await asyncio.gather(*queued, return_exceptions=True)
            assert all(not isinstance(o, dict) for o in outcomes), outcomes   # none acknowledged
            assert shard.version_of(ms) == before + 1                         # the held write only
            assert await _log(store, ms, before) == [before + 1]
            assert (await store.get_asset(ms, "table", "c.s.lost"))[1] is None
            assert state.urls()[0] == paths_before and state.trie.owner(loc) is None or \
                state.trie.owner(loc)[1].type != "table"
            # the shard goes on: the next write commits
            assert (await service.create(caller, "table", _table("after")))["name"] == "after"
        finally:
            await store.close()

    asyncio.run(scenario())


def test_delta_commits_in_one_group_are_decided_in_arrival_order(pg_url, tmp_path):
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            delta = DeltaCommitService(shard)
            staging = await service.create_staging_table(caller, {"name": "d", "catalog_name": "c",
                                                                  "schema_name": "s"})
            table = await service.create(caller, "table", {
                **_table("d"), "columns": [{"name": "id", "type_name": "LONG"}],
                "storage_location": staging["staging_location"],
                "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": staging["id"]}})
            ref = {"table_id": table["table_id"], "table_uri": table["storage_location"]}

            def proposal(version: int) -> dict:
                return {**ref, "commit_info": {"version": version, "timestamp": 1, "file_size": 1,
                                               "file_name": f"{version:020d}.{uuid.uuid4()}.json",
                                               "file_modification_timestamp": 1}}

            release, held = await _hold(shard, ms)
            queued = [asyncio.create_task(_outcome(delta.commit(caller, p)))
                      for p in (proposal(1), proposal(1), {**proposal(2), "latest_backfilled_version": 1})]
            await asyncio.sleep(0)
            assert len(shard.states[ms].pending) == 3
            release.set()
            await held
            first, second, third = await asyncio.gather(*queued)
            assert first == {} and second == "RESOURCE_CONFLICT" and third == {}   # v2 saw v1 of the same group
            got = await delta.get_commits(caller, {**ref, "start_version": 0})
            assert [c["version"] for c in got["commits"]] == [2]    # v1 reported published by v2's proposal
            assert shard.stats["group_replays"] == 0        # the conflict was decided before any row changed
            # v2's report that v1 is published went with it (one statement): v1 only is marked
            async with (await store.home(ms)).acquire() as conn:
                rows = await conn.fetch("SELECT version, published FROM delta_commits WHERE table_id = $1 "
                                        "ORDER BY version", uuid.UUID(table["table_id"]))
            assert [(r["version"], r["published"]) for r in rows] == [(1, True), (2, False)]
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_groups_delta_commits_read_ahead_and_sent_together_survive_a_replay(pg_url, tmp_path):
    """A group reads its Delta commits' tables and heads in one statement and sends the commits
    together (WriteBatch.lock, `defer_commit`); what a write of the group ratified is what the
    next one sees, and a write that spoils the group (it failed after ratifying a commit) takes none
    of the others with it, and leaves nothing of its own: the group runs again with savepoints,
    where what the failed write read and ratified is forgotten with its savepoint."""
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            delta = DeltaCommitService(shard)
            refs = []
            for name in ("d1", "d2"):
                staging = await service.create_staging_table(caller, {"name": name, "catalog_name": "c",
                                                                      "schema_name": "s"})
                table = await service.create(caller, "table", {
                    **_table(name), "columns": [{"name": "id", "type_name": "LONG"}],
                    "storage_location": staging["staging_location"],
                    "properties": {"delta.feature.catalogManaged": "supported",
                                   "io.unitycatalog.tableId": staging["id"]}})
                refs.append({"table_id": table["table_id"], "table_uri": table["storage_location"]})

            def proposal(ref: dict, version: int, **more) -> dict:
                return {**ref, "commit_info": {"version": version, "timestamp": 1, "file_size": 1,
                                               "file_name": f"{version:020d}.{uuid.uuid4()}.json",
                                               "file_modification_timestamp": 1}, **more}

            d1, d2 = refs

            async def ratifies_then_fails(tx, state):
                """Ratifies d1's version 4 (as the group's last write will) and fails: none of it stays."""
                _, latest, _ = await tx.table_with_delta_head(d1["table_id"])
                assert latest == 3
                await tx.add_delta_commit(d1["table_id"], 4, f"{4:020d}.{uuid.uuid4()}.json", 1, 1, 1, None)
                raise CatalogError("INVALID_PARAMETER_VALUE", "this write fails after writing a row")

            for replay in (False, True):
                base = 2 if replay else 0
                writes = [delta.commit(caller, proposal(d1, base + 1)),
                          delta.commit(caller, proposal(d2, base // 2 + 1)),
                          delta.commit(caller, proposal(d1, base + 1)),      # taken by the first, in this group
                          delta.commit(caller, proposal(d1, base + 2, latest_backfilled_version=base + 1))]
                if replay:
                    writes.insert(2, shard.write(ms, ratifies_then_fails))
                outcomes = await _in_one_group(shard, ms, writes)
                expected = [{}, {}, "RESOURCE_CONFLICT", {}]
                if replay:
                    expected.insert(2, "INVALID_PARAMETER_VALUE")
                assert outcomes == expected
                assert shard.stats["group_replays"] == (1 if replay else 0)
            async with (await store.home(ms)).acquire() as conn:
                rows = await conn.fetch("SELECT table_id, version, published FROM delta_commits "
                                        "WHERE table_id = ANY($1::uuid[]) ORDER BY table_id, version",
                                        [uuid.UUID(r["table_id"]) for r in refs])
            got = {(str(r["table_id"]), r["version"]): r["published"] for r in rows}
            assert got == {(d1["table_id"], 1): True, (d1["table_id"], 2): True, (d1["table_id"], 3): True,
                           (d1["table_id"], 4): False, (d2["table_id"], 1): False, (d2["table_id"], 2): False}
        finally:
            await store.close()

    asyncio.run(scenario())


def test_grants_iceberg_commits_delta_commits_and_creates_commit_in_one_group(pg_url, tmp_path):
    """Every kind of metastore write gains the same way: queued behind one in flight, a grant, an
    Iceberg commit, a Delta commit and a create go in one transaction, each with a version of its own."""
    async def scenario():
        store, ms, shard, service, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            grantee = f"g-{uuid.uuid4().hex[:8]}"
            await store.create_principal(grantee, "user")
            permissions, iceberg, delta = PermissionsService(shard), IcebergCatalog(shard), DeltaCommitService(shard)
            await service.create(caller, "table", _table("t"))
            await iceberg.create_table(caller, "c", "s", {"name": "ice", "schema": {
                "type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}})
            staging = await service.create_staging_table(caller, {"name": "d", "catalog_name": "c", "schema_name": "s"})
            table = await service.create(caller, "table", {
                **_table("d"), "columns": [{"name": "id", "type_name": "LONG"}],
                "storage_location": staging["staging_location"],
                "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": staging["id"]}})
            before, groups = shard.version_of(ms), shard.stats["groups"]
            release, held = await _hold(shard, ms)
            state = shard.states[ms]
            # The four below queue behind the held write (the Iceberg commit writes its metadata file
            # first) and form the next group.
            queued = [
                asyncio.create_task(_outcome(permissions.update(caller, "table", "c.s.t",
                                                                {"changes": [{"principal": grantee, "add": ["SELECT"]}]}))),
                asyncio.create_task(_outcome(iceberg.commit(caller, "c.s.ice", {"requirements": [], "updates": [
                    {"action": "set-properties", "updates": {"team": "sales"}}]}))),
                asyncio.create_task(_outcome(delta.commit(caller, {
                    "table_id": table["table_id"], "table_uri": table["storage_location"],
                    "commit_info": {"version": 1, "timestamp": 1, "file_size": 1, "file_modification_timestamp": 1,
                                    "file_name": f"{1:020d}.{uuid.uuid4()}.json"}}))),
                asyncio.create_task(_outcome(service.create(caller, "table", _table("t2")))),
            ]
            for _ in range(500):
                if len(state.pending) == len(queued):
                    break
                await asyncio.sleep(0.01)
            all_queued = len(state.pending) == len(queued)
            release.set()           # before asserting: a failure must not leave the held write open
            await held
            assert all_queued
            granted, committed, ratified, created = await asyncio.gather(*queued)
            assert not any(isinstance(o, str) for o in (granted, committed, ratified, created)), \
                (granted, committed, ratified, created)
            assert shard.stats["groups"] == groups + 1      # the held write alone, then the four in one transaction
            assert await _log(store, ms, before) == [before + i for i in range(1, 6)]
            got = await permissions.get(caller, "table", "c.s.t", grantee)
            assert got["privilege_assignments"][0]["privileges"] == ["SELECT"]
            assert (await iceberg.load_table(caller, "c.s.ice"))["metadata"]["properties"]["team"] == "sales"
            assert ratified == {} and created["name"] == "t2"
        finally:
            await store.close()

    asyncio.run(scenario())


def test_two_owners_writing_in_groups_lose_nothing_and_share_no_version(pg_url, tmp_path):
    """Two shards own the metastore (a move in progress) and each groups its writers: their groups
    conflict on the metastore's version and run again on fresh state. Every acknowledged write is
    there, each has a version of its own, and a refused one left nothing behind."""
    async def scenario():
        store, ms, a, service_a, caller = await _setup(pg_url, f"file://{tmp_path}")
        try:
            b = Shard(store, "b")
            service_b = CatalogService(b)
            before = a.version_of(ms)
            loc = f"file://{tmp_path}/ext2"
            # t0 first: it holds the path that every sixth write below names, which is then refused.
            outcomes = [await service_a.create(caller, "table", {
                **_table("t0"), "table_type": "EXTERNAL", "storage_location": f"{loc}/t0"})]
            writes = []
            for i in range(1, 24):
                service = (service_a, service_b)[i % 2]
                if i % 6 == 5:
                    body = {**_table(f"x{i}"), "table_type": "EXTERNAL", "storage_location": f"{loc}/t0/inside{i}"}
                else:
                    body = _table(f"t{i}")
                writes.append(_outcome(service.create(caller, "table", body)))
            outcomes += await asyncio.gather(*writes)
            acknowledged = [o["name"] for o in outcomes if isinstance(o, dict)]
            refused = [o for o in outcomes if not isinstance(o, dict)]
            assert len(acknowledged) == 20 and len(refused) == 4, outcomes
            versions = await _log(store, ms, before)
            assert versions == list(range(before + 1, before + 21))      # one each, none shared, none lost
            for name in acknowledged:
                assert (await store.get_asset(ms, "table", f"c.s.{name}"))[1] is not None
            for i in range(5, 24, 6):
                assert (await store.get_asset(ms, "table", f"c.s.x{i}"))[1] is None
            assert a.stats["groups"] + b.stats["groups"] > 0
        finally:
            await store.close()

    asyncio.run(scenario())
