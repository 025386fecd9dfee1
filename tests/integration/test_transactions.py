"""Multi-asset transactions (`POST /shardcat/transactions`, catalog/protocols/transactions.py) over HTTP:
every operation kind in one write (one metastore version), all or nothing when an operation in
the middle fails (the error names it), each operation authorized as its own endpoint would,
409 naming the asset for a stale read or a raced write, per-asset conflicts (disjoint
transactions that raced both commit) and the per-metastore check on request.
"""

from __future__ import annotations

import asyncio

import pytest
from governance_users import grant, user
from test_delta_commits import info, managed_table, ref
from test_iceberg_rest import SCHEMA, set_property

TX = "/shardcat/transactions"
COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}', "position": 0}]


def table(name: str, schema: str = "s", catalog: str = "main", **more) -> dict:
    return {"name": name, "catalog_name": catalog, "schema_name": schema, "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": COLS, **more}


def create(type_name: str, body: dict) -> dict:
    return {"op": "create", "type": type_name, "body": body}


def update(type_name: str, name: str, body: dict) -> dict:
    return {"op": "update", "type": type_name, "name": name, "body": body}


async def version(server, ws) -> int:
    return (await server.store.get_metastore(ws.metastore_id)).version


async def exists(ws, path: str) -> bool:
    status, body = await ws.call("GET", path)
    assert status in (200, 404), body
    return status == 200


async def setup(ws):
    status, body = await ws.call("POST", TX, json={"operations": [
        create("catalog", {"name": "main"}), create("schema", {"name": "s", "catalog_name": "main"}),
        create("table", table("a")), create("table", table("b"))]})
    assert status == 200, body
    return body


async def test_creates_of_every_level_are_one_write(ws, server):
    before = await version(server, ws)
    status, body = await ws.call("POST", TX, json={"operations": [
        create("catalog", {"name": "main"}),
        create("schema", {"name": "s", "catalog_name": "main"}),
        create("table", table("t", comment="first")),
        create("view", {"name": "v", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW",
                        "columns": COLS, "view_definition": "SELECT id FROM main.s.t",
                        "view_dependencies": {"dependencies": [{"table": {"table_full_name": "main.s.t"}}]}}),
        create("volume", {"name": "vol", "catalog_name": "main", "schema_name": "s", "volume_type": "MANAGED"}),
    ]})
    assert status == 200, body
    assert body["version"] == before + 1 == await version(server, ws)       # one version for all five
    assert [r.get("full_name") for r in body["results"]] == ["main", "main.s", "main.s.t", "main.s.v", "main.s.vol"]
    for path in ("/catalogs/main", "/schemas/main.s", "/tables/main.s.t", "/tables/main.s.v", "/volumes/main.s.vol"):
        assert await exists(ws, path), path
    # the change feed has the one version, naming all five
    status, feed = await ws.call("GET", "/shardcat/changes", params={"since_version": str(before)})
    assert status == 200, feed
    assert [c["version"] for c in feed["changes"]] == [before + 1]
    assert {s["full_name"] for s in feed["changes"][0]["securables"]} >= {"main", "main.s", "main.s.t", "main.s.vol"}


async def test_a_failing_operation_in_the_middle_writes_nothing(ws, server):
    await setup(ws)
    before = await version(server, ws)
    status, body = await ws.call("POST", TX, json={"operations": [
        update("table", "main.s.a", {"comment": "changed"}),
        create("table", table("c")),
        create("table", table("x", schema="nope")),          # its schema does not exist
        {"op": "delete", "type": "table", "name": "main.s.b"},
    ]})
    assert status == 404, body
    assert body["error_code"] == "NOT_FOUND"
    assert body["message"].startswith("operations[2] (create table 'main.nope.x') failed:"), body
    assert "Schema 'main.nope' does not exist" in body["message"]
    assert await version(server, ws) == before
    status, a = await ws.call("GET", "/tables/main.s.a")
    assert a.get("comment") is None
    assert not await exists(ws, "/tables/main.s.c")
    assert await exists(ws, "/tables/main.s.b")
    # an operation's own validation, after earlier ones that wrote: a name taken by an earlier operation
    status, body = await ws.call("POST", TX, json={"operations": [
        create("table", table("d")), update("table", "main.s.a", {"new_name": "d"})]})
    assert status == 409 and body["error_code"] == "ALREADY_EXISTS", body
    assert body["message"].startswith("operations[1] (update table 'main.s.a')"), body
    assert not await exists(ws, "/tables/main.s.d") and await version(server, ws) == before


async def test_alters_drops_and_grants_together(ws, server):
    await setup(ws)
    status, body = await ws.call("POST", TX, json={"operations": [
        update("table", "main.s.a", {"comment": "new", "properties": {"k": "v"}}),
        update("schema", "main.s", {"comment": "schema"}),
        {"op": "delete", "type": "table", "name": "main.s.b"},
        {"op": "grant", "securable_type": "table", "name": "main.s.a",
         "changes": [{"principal": "alice", "add": ["SELECT", "MODIFY"]}]},
        update("table", "main.s.a", {"new_name": "a2"}),          # later operations see earlier ones
        create("table", table("b")),                             # the dropped name, free again
    ]})
    assert status == 200, body
    assert body["results"][3] == {"privilege_assignments": [{"principal": "alice", "privileges": ["MODIFY", "SELECT"]}]}
    status, a2 = await ws.call("GET", "/tables/main.s.a2")
    assert status == 200 and a2["comment"] == "new" and a2["properties"] == {"k": "v"}
    status, perms = await ws.call("GET", "/permissions/table/main.s.a2")
    assert perms["privilege_assignments"] == [{"principal": "alice", "privileges": ["MODIFY", "SELECT"]}]
    assert (await ws.call("GET", "/schemas/main.s"))[1]["comment"] == "schema"
    status, b = await ws.call("GET", "/tables/main.s.b")
    assert status == 200 and b["table_id"] == body["results"][5]["table_id"]


async def test_drops_of_every_kind_together(ws, server):
    await setup(ws)
    status, body = await ws.call("POST", TX, json={"operations": [
        create("catalog", {"name": "other"}), create("schema", {"name": "x", "catalog_name": "other"}),
        create("table", table("t", schema="x", catalog="other")),
        create("view", {"name": "v", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW",
                        "columns": COLS, "view_definition": "SELECT 1"}),
        create("volume", {"name": "vol", "catalog_name": "main", "schema_name": "s", "volume_type": "MANAGED"})]})
    assert status == 200, body
    before = await version(server, ws)
    # a non-empty schema without force: refused as its endpoint refuses it, nothing dropped
    drops = [{"op": "delete", "type": "view", "name": "main.s.v"}, {"op": "delete", "type": "volume", "name": "main.s.vol"},
             {"op": "delete", "type": "schema", "name": "other.x"}]
    status, body = await ws.call("POST", TX, json={"operations": drops})
    assert status == 400 and body["error_code"] == "FAILED_PRECONDITION", body
    assert body["message"].startswith("operations[2] (delete schema 'other.x') failed: Schema 'other.x' is not empty")
    assert await exists(ws, "/tables/main.s.v") and await version(server, ws) == before
    drops[2]["force"] = True
    status, body = await ws.call("POST", TX, json={"operations": [
        *drops, {"op": "delete", "type": "catalog", "name": "other"}]})
    assert status == 200, body
    assert body["version"] == before + 1
    for path in ("/tables/main.s.v", "/volumes/main.s.vol", "/schemas/other.x", "/tables/other.x.t", "/catalogs/other"):
        assert not await exists(ws, path), path


async def test_delta_and_iceberg_commits_on_several_tables(ws, server):
    await setup(ws)
    # catalog-managed Delta tables (the helpers create them under main.s)
    t1, t2 = await managed_table(ws, "m1"), await managed_table(ws, "m2")
    # an Iceberg table, through the Iceberg REST catalog
    status, created = await ws.call("POST", "/iceberg/v1/catalogs/main/namespaces/s/tables",
                                    json={"name": "ice", "schema": SCHEMA})
    assert status == 200, created
    before = await version(server, ws)
    status, body = await ws.call("POST", TX, json={"operations": [
        {"op": "delta_commit", "body": {**ref(t1), "commit_info": info(1)}},
        {"op": "delta_commit", "body": {**ref(t2), "commit_info": info(1)}},
        {"op": "iceberg_commit", "name": "main.s.ice", "updates": [set_property("owner.team", "x")]},
        update("table", "main.s.a", {"comment": "alongside"}),
    ]})
    assert status == 200, body
    assert body["version"] == before + 1
    for t in (t1, t2):
        status, got = await ws.call("GET", "/delta/preview/commits", json={**ref(t), "start_version": 0})
        assert status == 200 and [c["version"] for c in got["commits"]] == [1], got
    status, loaded = await ws.call("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/ice")
    assert loaded["metadata"]["properties"]["owner.team"] == "x"
    # a refused Delta commit (version 3 is not next) after an Iceberg commit: neither lands
    status, body = await ws.call("POST", TX, json={"operations": [
        {"op": "iceberg_commit", "name": "main.s.ice", "updates": [set_property("owner.team", "y")]},
        {"op": "delta_commit", "body": {**ref(t1), "commit_info": info(3)}},
    ]})
    assert status >= 400 and body["message"].startswith("operations[1] (delta_commit on table "), body
    status, loaded = await ws.call("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/ice")
    assert loaded["metadata"]["properties"]["owner.team"] == "x"
    # an Iceberg requirement that fails: 409 naming the operation
    status, body = await ws.call("POST", TX, json={"operations": [
        update("table", "main.s.a", {"comment": "not this"}),
        {"op": "iceberg_commit", "name": "main.s.ice",
         "requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}],
         "updates": [set_property("k", "v")]},
    ]})
    assert status == 409 and body["message"].startswith("operations[1] (iceberg_commit 'main.s.ice')"), body
    assert (await ws.call("GET", "/tables/main.s.a"))[1]["comment"] == "alongside"


async def test_each_operation_is_authorized_as_its_endpoint(ws, server):
    await setup(ws)
    assert (await ws.call("POST", "/schemas", json={"name": "other", "catalog_name": "main"}))[0] == 200
    bob = await user(server, ws)
    await grant(ws, "catalog", "main", bob.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", bob.name, "USE_SCHEMA", "CREATE_TABLE")
    await grant(ws, "schema", "main.other", bob.name, "USE_SCHEMA")
    before = await version(server, ws)
    status, body = await bob.call("POST", TX, json={"operations": [
        create("table", table("mine")),                          # allowed: CREATE TABLE on main.s
        update("table", "main.s.mine", {"comment": "owner"}),     # allowed: bob owns what he just created
        create("table", table("theirs", schema="other")),         # refused: no CREATE TABLE on main.other
    ]})
    assert status == 403 and body["error_code"] == "PERMISSION_DENIED", body
    assert body["message"].startswith("operations[2] (create table 'main.other.theirs')"), body
    assert await version(server, ws) == before and not await exists(ws, "/tables/main.s.mine")
    # a table bob may not see answers as missing, as GET would
    status, body = await bob.call("POST", TX, json={"operations": [update("table", "main.s.a", {"comment": "x"})]})
    assert status in (403, 404) and body["message"].startswith("operations[0]"), body
    # a grant needs MANAGE or ownership: bob may not grant on a table he does not own
    status, body = await bob.call("POST", TX, json={"operations": [
        create("table", table("mine")),
        {"op": "grant", "securable_type": "table", "name": "main.s.mine",
         "changes": [{"principal": "carol", "add": ["SELECT"]}]},
        {"op": "grant", "securable_type": "table", "name": "main.s.b",
         "changes": [{"principal": "carol", "add": ["SELECT"]}]}]})
    assert status in (403, 404) and body["message"].startswith("operations[2] (grant table 'main.s.b')"), body
    status, body = await bob.call("POST", TX, json={"operations": [
        create("table", table("mine")),
        {"op": "grant", "securable_type": "table", "name": "main.s.mine",
         "changes": [{"principal": "carol", "add": ["SELECT"]}]}]})
    assert status == 200, body


async def test_a_stale_read_is_a_409_naming_the_asset(ws, server):
    await setup(ws)
    read_at = await version(server, ws)
    status, body = await ws.call("PATCH", "/tables/main.s.a", json={"comment": "someone else"})
    assert status == 200
    # read A and B at read_at, write B: A changed since, so nothing is written
    status, body = await ws.call("POST", TX, json={
        "read_versions": {"main.s.a": read_at, "main.s.b": read_at},
        "operations": [update("table", "main.s.b", {"comment": "from a stale read"})]})
    assert status == 409 and body["error_code"] == "RESOURCE_CONFLICT", body
    assert "Conflict on 'main.s.a'" in body["message"] and f"version {read_at + 1}" in body["message"], body
    assert (await ws.call("GET", "/tables/main.s.b"))[1].get("comment") is None
    # by id too; a read of an unchanged asset passes, and so does a read at the version the change made
    a_id = (await ws.call("GET", "/tables/main.s.a"))[1]["table_id"]
    status, body = await ws.call("POST", TX, json={
        "read_versions": {a_id: read_at + 1, "main.s.b": read_at, "main": read_at},
        "operations": [update("table", "main.s.b", {"comment": "fresh"})]})
    assert status == 200, body
    # a dropped asset that was read
    assert (await ws.call("DELETE", "/tables/main.s.a"))[0] == 200
    status, body = await ws.call("POST", TX, json={
        "read_versions": {"main.s.a": read_at + 1},
        "operations": [update("table", "main.s.b", {"comment": "again"})]})
    assert status == 409 and "Conflict on 'main.s.a'" in body["message"], body


async def test_write_skew_is_refused(ws, server):
    """Two transactions each read A and B and write one of them (the classic write skew): sent at once,
    exactly one commits; the other is a 409 naming the asset the first wrote."""
    await setup(ws)
    read_at = await version(server, ws)
    reads = {"main.s.a": read_at, "main.s.b": read_at}
    answers = await asyncio.gather(*[ws.call("POST", TX, json={
        "read_versions": reads, "operations": [update("table", f"main.s.{name}", {"comment": "on call"})]})
        for name in ("a", "b")])
    assert sorted(s for s, _ in answers) == [200, 409], answers
    winner = next(n for (s, _), n in zip(answers, "ab") if s == 200)
    message = next(b["message"] for s, b in answers if s == 409)
    assert f"Conflict on 'main.s.{winner}'" in message, message
    comments = [(await ws.call("GET", f"/tables/main.s.{n}"))[1].get("comment") for n in "ab"]
    assert sorted(comments, key=str) == sorted([None, "on call"], key=str)


async def test_raced_writes_of_the_same_asset_one_wins(ws, server):
    await setup(ws)
    read_at = await version(server, ws)
    bodies = [{"read_at": read_at, "operations": [update("table", "main.s.a", {"comment": f"writer {i}"}),
                                                   update("table", f"main.s.{'b' if i else 'a'}", {})]}
              for i in range(2)]
    first = await ws.call("POST", TX, json=bodies[0])
    second = await ws.call("POST", TX, json=bodies[1])
    assert first[0] == 200, first
    assert second[0] == 409, second
    assert "Conflict on table 'main.s.a' (written by operations[0] (update table 'main.s.a'))" in second[1]["message"]
    assert (await ws.call("GET", "/tables/main.s.a"))[1]["comment"] == "writer 0"


async def test_disjoint_transactions_that_raced_both_commit(ws, server):
    await setup(ws)
    names = [f"t{i}" for i in range(8)]
    status, body = await ws.call("POST", TX, json={"operations": [create("table", table(n)) for n in names]})
    assert status == 200
    read_at = body["version"]
    # eight transactions read at the same version, each writing its own table, sent at once
    answers = await asyncio.gather(*[ws.call("POST", TX, json={
        "read_at": read_at, "read_versions": {f"main.s.{n}": read_at},
        "operations": [update("table", f"main.s.{n}", {"comment": "mine"})]}) for n in names])
    assert [s for s, _ in answers] == [200] * 8, answers
    assert sorted(b["version"] for _, b in answers) == list(range(read_at + 1, read_at + 9))
    # the same eight with the per-metastore check: only one may win (the others saw the metastore move)
    read_at += 8
    answers = await asyncio.gather(*[ws.call("POST", TX, json={
        "read_at": read_at, "isolation": "metastore",
        "operations": [update("table", f"main.s.{n}", {"comment": "again"})]}) for n in names])
    statuses = sorted(s for s, _ in answers)
    assert statuses == [200] + [409] * 7, answers
    assert all("Conflict on the metastore" in b["message"] for s, b in answers if s == 409)


@pytest.mark.parametrize("body, says", [
    ({}, "'operations' must be a non-empty list"),
    ({"operations": [{"op": "explode"}]}, "operations[0].op must be one of"),
    ({"operations": [{"op": "create", "type": "share", "body": {}}]}, "operations[0].type must be one of"),
    ({"operations": [{"op": "update", "type": "table", "body": {}}]}, "operations[0].name must be"),
    ({"operations": [{"op": "delta_commit"}]}, "operations[0].body must be an object"),
    ({"operations": [create("catalog", {"name": "x"})], "read_versions": {"x": "1"}}, "non-negative integer"),
    ({"operations": [create("catalog", {"name": "x"})], "read_versions": {"a.b.c.d.e": 1}}, "neither an asset id"),
    ({"operations": [create("catalog", {"name": "x"})], "isolation": "none"}, "'isolation' must be"),
    ({"operations": [create("catalog", {"name": "x"})], "read_at": 10 ** 9}, "is not a version of this metastore"),
    ({"operations": [create("catalog", {"name": "x"})] * 101}, "at most 100 operations"),
])
async def test_bad_requests_are_400_and_write_nothing(ws, server, body, says):
    before = await version(server, ws)
    status, answer = await ws.call("POST", TX, json=body)
    assert status == 400 and answer["error_code"] == "INVALID_PARAMETER_VALUE", answer
    assert says in answer["message"], answer
    assert await version(server, ws) == before


async def test_a_transaction_behind_another_owner_is_rebased_per_asset(pg_url, tmp_path):
    """Two shards own the metastore (docs/design.md invariant 5): the second one's transaction runs
    against a version it knows, meets the first one's writes as a VersionConflict, catches up and runs
    again. Written assets disjoint: it commits, one version after them; a write of the same asset
    after its read_at: 409 naming it; with the per-metastore check: 409 either way."""
    import uuid

    from shardcat.auth import Caller
    from shardcat.catalog.tree.service import CatalogService
    from shardcat.catalog.protocols.transactions import TransactionService
    from shardcat.errors import CatalogError
    from shardcat.shards.shard import Shard
    from shardcat.store.db import Store

    store = await Store.open(pg_url, min_size=1, max_size=4)
    try:
        await store.migrate()
        ms = str(uuid.uuid4())
        await store.create_metastore(ms, f"rebase-{ms[:8]}", {"storage_root": f"file://{tmp_path}/{ms}"})
        caller = Caller("admin", 1, True, 1, ms)
        first, second = Shard(store, "first"), Shard(store, "second")
        await TransactionService(first).apply(caller, {"operations": [
            create("catalog", {"name": "main"}), create("schema", {"name": "s", "catalog_name": "main"}),
            create("table", table("a")), create("table", table("b"))]})
        read_at = (await second.state(ms)).version          # the second shard knows this version
        conflicts = second.stats["write_conflicts"]
        await CatalogService(first).update(caller, "table", "main.s.a", {"comment": "first shard"})
        await CatalogService(first).create(caller, "table", table("c"))
        assert second.version_of(ms) == read_at               # it has not seen them
        done = await TransactionService(second).apply(caller, {
            "read_at": read_at, "read_versions": {"main.s.b": read_at},
            "operations": [update("table", "main.s.b", {"comment": "second shard"}), create("table", table("d"))]})
        assert second.stats["write_conflicts"] == conflicts + 1      # it met the other owner's writes, then rebased
        assert done["version"] == read_at + 3
        got = await CatalogService(second).get(caller, "table", "main.s.b")
        assert got["comment"] == "second shard"
        for body, says in (
                ({"read_at": read_at, "operations": [update("table", "main.s.a", {"comment": "lost?"})]},
                 "Conflict on table 'main.s.a'"),
                ({"read_versions": {"main.s.a": read_at}, "operations": [update("table", "main.s.b", {})]},
                 "Conflict on 'main.s.a'"),
                ({"read_at": read_at + 2, "isolation": "metastore", "operations": [update("table", "main.s.b", {})]},
                 "Conflict on the metastore")):
            try:
                await TransactionService(second).apply(caller, body)
                raise AssertionError(f"committed: {body}")
            except CatalogError as e:
                assert e.code == "RESOURCE_CONFLICT" and says in e.message, e.message
        assert (await CatalogService(first).get(caller, "table", "main.s.a"))["comment"] == "first shard"
    finally:
        await store.close()


async def test_transactions_in_one_group_commit_conflict_per_asset(pg_url, tmp_path):
    """Transactions queued behind a write in flight commit together in one group (shards/group_commit.py);
    a later one of the group that writes an asset an earlier one of the group wrote (after its
    read_at) is refused alone, though that write is not in the change log until the group commits;
    the disjoint ones of the group commit."""
    import uuid

    from shardcat.auth import Caller
    from shardcat.catalog.protocols.transactions import TransactionService
    from shardcat.errors import CatalogError
    from shardcat.shards.shard import Shard
    from shardcat.store.db import Store

    store = await Store.open(pg_url, min_size=1, max_size=4)
    try:
        await store.migrate()
        ms = str(uuid.uuid4())
        await store.create_metastore(ms, f"group-{ms[:8]}", {"storage_root": f"file://{tmp_path}/{ms}"})
        caller = Caller("admin", 1, True, 1, ms)
        shard = Shard(store, "g")
        service = TransactionService(shard)
        await service.apply(caller, {"operations": [
            create("catalog", {"name": "main"}), create("schema", {"name": "s", "catalog_name": "main"}),
            *[create("table", table(n)) for n in "abc"]]})
        read_at = shard.version_of(ms)
        release, started = asyncio.Event(), asyncio.Event()

        async def hold(tx, state):
            started.set()
            await release.wait()

        held = asyncio.create_task(shard.write(ms, hold))
        await started.wait()
        groups = shard.stats["groups"]

        async def outcome(name: str, comment: str):
            try:
                return (await service.apply(caller, {"read_at": read_at, "operations": [
                    update("table", f"main.s.{name}", {"comment": comment})]}))["version"]
            except CatalogError as e:
                return e.message

        queued = [asyncio.create_task(outcome(n, c)) for n, c in (("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"))]
        await asyncio.sleep(0)              # all four queue behind the held write
        assert len(shard.states[ms].pending) == 4
        release.set()
        await held
        first, second, third, fourth = await asyncio.gather(*queued)
        assert shard.stats["groups"] == groups + 1             # the four in one group
        assert (first, second, fourth) == (read_at + 2, read_at + 3, read_at + 4), (first, second, third, fourth)
        assert isinstance(third, str) and "Conflict on table 'main.s.a'" in third, third
        assert f"at version {read_at + 2}" in third, third
    finally:
        await store.close()
