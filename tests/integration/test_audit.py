"""The audit log: every request recorded with who, what, which securable, allowed or why not;
the admin-only endpoint with filters and paging; the writer loses nothing on a normal
shutdown and never holds up or fails a request when the database is slow or down."""

from __future__ import annotations

import asyncio
import base64
import json
import contextlib
import math
import time
import types
import uuid

import pytest
from aiohttp import web

from shardcat.auth import hash_token, new_token
from shardcat.governance import audit
from shardcat.governance.audit import APP_KEY, MAX_COPY_ROWS, AccessDecision, AuditLog, action_of
from shardcat.web.wire import REQUEST_ID_HEADER
from shardcat.router.forward import make_router_app
from shardcat.router.routing import RoutingTable, ShardHandle
from shardcat.store.db import Store
from tests.conftest import PREFIX

AUDIT = "/shardcat/audit"


async def events(ws, **params) -> list[dict]:
    status, body = await ws.call("GET", AUDIT, params={"metastore_id": ws.metastore_id, **params})
    assert status == 200, body
    return body["events"]


async def user_token(server, ws, name: str) -> str:
    principal = await server.store.create_principal(name, "user")
    token = new_token()
    await server.store.add_token(principal.id, hash_token(token), ws.workspace_id)
    return token


def test_action_names():
    assert action_of("GET", "/tables/{full_name}") == "getTable"
    assert action_of("GET", "/tables") == "listTables"
    assert action_of("POST", "/catalogs") == "createCatalog"
    assert action_of("PATCH", "/external-locations/{name}") == "updateExternalLocation"
    assert action_of("DELETE", "/schemas/{full_name}") == "deleteSchema"
    assert action_of("GET", "/models/{full_name}/versions/{version}") == "getModelVersion"
    assert action_of("POST", "/temporary-table-credentials") == "generateTemporaryTableCredentials"


async def test_requests_are_recorded_with_their_fields(ws, server, http):
    t0 = int(time.time() * 1000)
    status, catalog = await ws.call("POST", "/catalogs", json={"name": "main"})
    assert status == 200
    await ws.call("GET", "/catalogs/main")
    await ws.call("PATCH", "/catalogs/main", json={"comment": "c"})
    status, _ = await ws.call("GET", "/catalogs/nope")
    assert status == 404
    status, _ = await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "nope"})
    assert status == 404

    got = await events(ws, securable="main")
    by_action = {e["action"]: e for e in got}
    assert set(by_action) == {"createCatalog", "getCatalog", "updateCatalog"}
    created = by_action["createCatalog"]
    assert created["principal"] == "admin" and created["workspace_id"] == ws.workspace_id
    assert created["metastore_id"] == ws.metastore_id
    assert created["securable_type"] == "CATALOG" and created["securable_full_name"] == "main"
    assert created["securable_id"] == catalog["id"]
    assert created["allowed"] is True and created["status"] == 200 and "error_code" not in created
    assert created["route"] == "POST /catalogs" and t0 <= created["at"] <= int(time.time() * 1000)
    assert by_action["getCatalog"]["route"] == "GET /catalogs/{name}"

    missing = (await events(ws, securable="nope", action="getCatalog"))[0]
    assert missing["status"] == 404 and missing["error_code"] == "NOT_FOUND" and missing["allowed"] is True
    assert "nope" in missing["message"]
    refused_create = (await events(ws, securable="nope.s"))[0]   # a failed create names what it tried
    assert refused_create["action"] == "createSchema" and refused_create["status"] == 404


async def test_refusals_are_recorded_with_their_reason(ws, server, http):
    # A bad token: refused before anyone is known.
    async with http.get(ws.api + "/catalogs", headers={"Authorization": "Bearer scat_not-a-token"}) as r:
        assert r.status == 401
        request_id = r.headers[REQUEST_ID_HEADER]
    (bad,) = await events(ws, request_id=request_id, metastore_id="")
    assert bad["allowed"] is False and bad["status"] == 401 and bad["error_code"] == "UNAUTHENTICATED"
    assert "principal" not in bad and "not valid" in bad["message"] and bad["action"] == "listCatalogs"

    # A known user who may not read the audit log: PERMISSION_DENIED, with the why.
    token = await user_token(server, ws, f"bob-{uuid.uuid4().hex[:6]}")
    async with http.get(ws.api + AUDIT, headers={"Authorization": f"Bearer {token}"}) as r:
        body = await r.json()
        assert r.status == 403 and body["error_code"] == "PERMISSION_DENIED"
        request_id = r.headers[REQUEST_ID_HEADER]
    (denied,) = await events(ws, request_id=request_id)
    assert denied["allowed"] is False and denied["status"] == 403 and denied["error_code"] == "PERMISSION_DENIED"
    assert denied["principal"].startswith("bob-") and "admins" in denied["message"]
    assert denied["action"] == "listAuditEvents"
    # ... and the refusals are what allowed=false finds.
    refused = await events(ws, allowed="false")
    assert request_id in {e["request_id"] for e in refused}
    assert all(e["allowed"] is False for e in refused)


async def test_filters_and_paging(ws):
    await ws.call("POST", "/catalogs", json={"name": "main"})
    await asyncio.sleep(0.005)
    t0 = int(time.time() * 1000)
    for i in range(5):
        status, _ = await ws.call("POST", "/schemas", json={"name": f"s{i}", "catalog_name": "main"})
        assert status == 200
    await asyncio.sleep(0.005)
    t1 = int(time.time() * 1000)
    await asyncio.sleep(0.005)
    await ws.call("GET", "/schemas/main.s0")

    seen, token = [], None
    for _ in range(5):
        status, page = await ws.call("GET", AUDIT, params={
            "metastore_id": ws.metastore_id, "action": "createSchema", "max_results": 2,
            **({"page_token": token} if token else {})})
        assert status == 200 and len(page["events"]) <= 2
        seen += page["events"]
        token = page.get("next_page_token")
        if not token:
            break
    assert [e["securable_full_name"] for e in seen] == [f"main.s{i}" for i in (4, 3, 2, 1, 0)]   # newest first
    assert len({e["id"] for e in seen}) == 5

    assert {e["action"] for e in await events(ws, since=t0, until=t1)} == {"createSchema"}
    assert [e["action"] for e in await events(ws, securable="main.s0")] == ["getSchema", "createSchema"]
    assert await events(ws, principal="nobody-at-all") == []
    assert {e["securable_type"] for e in await events(ws, securable_type="schema")} == {"SCHEMA"}
    past_bigint = base64.urlsafe_b64encode(json.dumps({"before": 1 << 70}).encode()).decode()
    for bad in ({"allowed": "maybe"}, {"since": "yesterday"}, {"page_token": "zzz"}, {"metastore_id": "x"},
                {"since": "9" * 30}, {"until": "\u00b2"}, {"page_token": past_bigint}):
        status, body = await ws.call("GET", AUDIT, params=bad)
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", bad


async def test_non_admins_are_refused(ws, server, http):
    token = await user_token(server, ws, f"carol-{uuid.uuid4().hex[:6]}")
    for params in ({}, {"principal": "admin"}, {"metastore_id": ws.metastore_id}):
        async with http.get(ws.api + AUDIT, params=params, headers={"Authorization": f"Bearer {token}"}) as r:
            body = await r.json()
            assert r.status == 403 and body["error_code"] == "PERMISSION_DENIED" and "events" not in body


async def test_router_records_its_own_requests_and_not_forwarded_ones(ws, server, http):
    """Account routes served by the router are recorded there; forwarded ones only by the shard."""
    routing = RoutingTable(server.store, shards={"s0": ShardHandle("s0", server.url, None)},
                           owner={ws.metastore_id: "s0"})
    app = make_router_app(server.store, routing)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}{PREFIX}"
    router_log = app[APP_KEY]
    try:
        async with http.get(base + "/metastores", headers=ws.headers) as r:
            assert r.status == 200
            own_id = r.headers[REQUEST_ID_HEADER]
        before = router_log.stats["recorded"]
        async with http.get(base + "/catalogs", headers=ws.headers) as r:
            assert r.status == 200
        assert router_log.stats["recorded"] == before       # forwarded: the shard records it
        await router_log.flush()
        (own,) = await events(ws, request_id=own_id)
        assert own["action"] == "listMetastores" and own["principal"] == "admin" and own["status"] == 200
        assert len(await events(ws, action="listCatalogs")) == 1
    finally:
        await runner.cleanup()


async def test_no_event_lost_on_normal_shutdown(server):
    marker = f"test.shutdown.{uuid.uuid4().hex[:8]}"
    log = AuditLog(server.store, batch=100, interval=10.0)   # long interval: shutdown must flush
    await log.start()
    for i in range(1234):
        log.submit({"at": i, "action": marker, "allowed": True, "status": 200})
    await asyncio.sleep(0.2)
    await log.stop(timeout=30)        # this machine may be slow; the default 5 s guards a hung database
    count = await server.store.pool.fetchval("SELECT count(*) FROM audit_log WHERE action = $1", marker)
    assert count == 1234 and log.stats["written"] == 1234 and log.stats["dropped"] == 0
    assert await server.store.pool.fetchval(
        "SELECT sum(at) FROM audit_log WHERE action = $1", marker) == sum(range(1234))


async def test_slow_database_does_not_hold_up_requests(ws, server):
    """The audit table locked (a slow database): requests answer at once; the events follow later."""
    await ws.call("POST", "/catalogs", json={"name": "main"})
    live = server.runner.app[APP_KEY]
    conn = await server.store.pool.acquire()
    tx = conn.transaction()
    await tx.start()
    await conn.execute("LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE")
    try:
        await asyncio.sleep(0.3)          # the writer is now stuck on the lock
        written, recorded = live.stats["written"], live.stats["recorded"]
        started = time.monotonic()
        for _ in range(20):
            status, _ = await ws.call("GET", "/catalogs/main")
            assert status == 200
        assert time.monotonic() - started < 5.0
        await asyncio.sleep(0.3)
        # All recorded, none written meanwhile (buffered, or in a batch stuck on the lock).
        assert live.stats["recorded"] - recorded == 20 and live.stats["written"] == written
    finally:
        await tx.rollback()
        await server.store.pool.release(conn)
    assert len(await events(ws, action="getCatalog", securable="main")) == 20


async def test_flush_waits_for_a_batch_already_on_its_way(server):
    """A batch the background writer took from the buffer is not pending any more, but not written
    yet either: flush (and so the audit endpoint's read-your-own-writes) must wait for it."""
    marker = f"test.inflight.{uuid.uuid4().hex[:8]}"
    log = AuditLog(server.store, batch=100, interval=0.05)
    conn = await server.store.pool.acquire()
    tx = conn.transaction()
    await tx.start()
    await conn.execute("LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE")
    await log.start()
    try:
        for i in range(5):
            log.submit({"at": i, "action": marker, "allowed": True, "status": 200})
        await eventually(lambda: not log.pending)        # taken by the writer, stuck on the lock
        flushing = asyncio.ensure_future(log.flush())
        await asyncio.sleep(0.3)
        assert not flushing.done()                       # before the fix it returned at once
    finally:
        await tx.rollback()
        await server.store.pool.release(conn)
    await asyncio.wait_for(flushing, 30)
    assert await server.store.pool.fetchval("SELECT count(*) FROM audit_log WHERE action = $1", marker) == 5
    await log.stop()


async def test_shutdown_never_writes_a_batch_twice(server):
    """Shutdown while PostgreSQL has taken a batch but not yet answered: cancelling the writer
    then would put the batch back in the buffer and write it again."""
    marker = f"test.twice.{uuid.uuid4().hex[:8]}"
    taken = asyncio.Event()

    class SlowAnswer:          # a connection whose COPY lands at once but is acknowledged late
        def __init__(self, conn):
            self.conn = conn

        async def copy_records_to_table(self, *args, **kwargs):
            await self.conn.copy_records_to_table(*args, **kwargs)
            taken.set()
            await asyncio.sleep(0.5)

    class SlowAnswerPool:
        def __init__(self, pool):
            self.pool = pool

        @contextlib.asynccontextmanager
        async def acquire(self):
            async with self.pool.acquire() as conn:
                yield SlowAnswer(conn)

    class SlowAnswerStore:
        pool = SlowAnswerPool(server.store.pool)

    log = AuditLog(SlowAnswerStore(), batch=100, interval=10.0)
    await log.start()
    for i in range(100):
        log.submit({"at": i, "action": marker, "allowed": True, "status": 200})
    await asyncio.wait_for(taken.wait(), 30)
    await log.stop(timeout=30)
    assert await server.store.pool.fetchval("SELECT count(*) FROM audit_log WHERE action = $1", marker) == 100
    assert log.stats["written"] == 100 and log.stats["dropped"] == 0


async def eventually(condition, timeout: float = 30.0) -> None:
    """Wait until `condition()` holds: timers here may fire late on a busy machine, so no fixed sleeps."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_database_down_never_fails_a_request(ws, server, pg_url):
    """The writer's database gone: requests still answer; a full buffer drops and counts."""
    live = server.runner.app[APP_KEY]
    broken = await Store.open(pg_url, min_size=1, max_size=1)
    await broken.close()                  # every write now fails at once
    live.store = broken
    try:
        for _ in range(10):
            status, _ = await ws.call("GET", "/catalogs")
            assert status == 200
        await eventually(lambda: live.stats["write_failures"] >= 1)    # the writer tried and failed
        assert len(live.pending) >= 10
    finally:
        live.store = server.store
    await live.flush()                    # back up: the buffered events are written after all
    assert len(await events(ws, action="listCatalogs")) == 10

    full = AuditLog(broken, max_pending=10)
    await full.start()
    started = time.monotonic()
    for i in range(25):
        full.submit({"at": i, "action": "test.full", "allowed": True})
    assert time.monotonic() - started < 5.0      # no waiting on the database (generous: a busy machine)
    assert full.stats["dropped"] == 15 and len(full.pending) == 10
    with pytest.raises(Exception):
        await full.flush()
    assert len(full.pending) == 10        # a failed write keeps its events
    await full.stop(timeout=1.0)          # shutdown with the database down: dropped, counted, no error
    assert full.stats["dropped"] == 25 and not full.pending


async def test_record_all_adds_decisions_to_the_current_request(server, http):
    """`audit.record_all` (per-item decisions, e.g. a batched resolve) inside a request: one row per
    decision, sharing the request's id, besides the request's own row."""
    marker = f"test.record.{uuid.uuid4().hex[:8]}"
    log = AuditLog(server.store)

    async def handler(request):
        audit.record_all(None, [
            AccessDecision(marker, "TABLE", "c.s.t1", True),
            AccessDecision(marker, "TABLE", "c.s.t2", False, error_code="PERMISSION_DENIED",
                           message="no SELECT on table 'c.s.t2'")])
        return web.json_response({})

    app = web.Application(middlewares=[audit.middleware(log)])
    app.add_routes([web.post(PREFIX + "/resolve", handler)])
    app.on_startup.append(log.start)
    app.on_cleanup.append(log.stop)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        async with http.post(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}{PREFIX}/resolve") as r:
            assert r.status == 200
            request_id = r.headers[REQUEST_ID_HEADER]
    finally:
        await runner.cleanup()            # flushes
    rows = await server.store.pool.fetch("SELECT * FROM audit_log WHERE request_id = $1 ORDER BY id", request_id)
    assert [(r["action"], r["securable_name"], r["allowed"], r["status"], r["error_code"]) for r in rows] == [
        (marker, "c.s.t1", True, None, None), (marker, "c.s.t2", False, None, "PERMISSION_DENIED"),
        ("resolve", None, True, 200, None)]
    assert rows[1]["route"] == "POST /resolve"


async def test_a_request_row_carries_its_path_text_storable_and_cut(ws):
    """A request's own row: a NUL from the path is stored replaced, a long name cut (the fast path)."""
    nul_status, _ = await ws.call("GET", "/catalogs/a%00b")
    assert nul_status in (400, 404)
    status, _ = await ws.call("GET", f"/catalogs/{'x' * 1500}")
    assert status in (400, 404)
    [with_nul] = await events(ws, securable="a\\0b", action="getCatalog")
    assert with_nul["securable_type"] == "CATALOG" and with_nul["status"] == nul_status
    [cut] = await events(ws, securable="x" * 1000 + "...", action="getCatalog")
    assert cut["route"] == "GET /catalogs/{name}" and cut["allowed"] is True


async def test_text_postgres_cannot_store_is_made_storable(server):
    """Paths and messages may carry NULs or unpaired surrogates: stored replaced, never a stuck batch."""
    marker = f"test.text.{uuid.uuid4().hex[:8]}"
    log = AuditLog(server.store)
    log.submit({"at": 1, "action": marker, "securable_name": "a\udc00b", "message": "x\x00y", "allowed": True})
    await log.flush()
    row = await server.store.pool.fetchrow("SELECT * FROM audit_log WHERE action = $1", marker)
    assert row["securable_name"] == "a?b" and row["message"] == "x\\0y"
    assert log.stats["written"] == 1 and not log.pending


async def test_a_burst_is_kept_whole_and_written_in_few_copies(server):
    """A batched resolve adds a hundred events at once: a burst of 50,000 fits the buffer, and the
    writer takes what is pending in one COPY (up to MAX_COPY_ROWS), not 500 at a time, so how fast
    it writes does not hang on the loop turns of many small COPYs."""
    class CountingPool:
        def __init__(self, pool):
            self.pool, self.acquired = pool, 0

        def acquire(self):
            self.acquired += 1
            return self.pool.acquire()

    marker = f"test.burst.{uuid.uuid4().hex[:8]}"
    pool = CountingPool(server.store.pool)
    log = AuditLog(types.SimpleNamespace(pool=pool), interval=10.0)
    for i in range(50_000):
        log.submit({"at": i, "action": marker, "allowed": True, "status": 200})
    await log.flush()
    assert log.stats["dropped"] == 0 and log.stats["written"] == 50_000
    assert pool.acquired == math.ceil(50_000 / MAX_COPY_ROWS)
    assert await server.store.pool.fetchval("SELECT count(*) FROM audit_log WHERE action = $1", marker) == 50_000
    await server.store.pool.execute("DELETE FROM audit_log WHERE action = $1", marker)


async def test_a_steady_stream_is_written_in_copies_of_a_batch(server):
    """Requests answered one after another (a few events per loop turn): the background writer
    waits for `batch` events before each COPY instead of writing whatever arrived while the last
    COPY ran (a stream of COPYs of a few rows each, whose own cost was paid every few requests)."""
    sizes = []

    class Sizing:
        def __init__(self, conn):
            self.conn = conn

        async def copy_records_to_table(self, *args, records, **kwargs):
            sizes.append(len(records))
            await self.conn.copy_records_to_table(*args, records=records, **kwargs)

    class SizingPool:
        @contextlib.asynccontextmanager
        async def acquire(self):
            async with server.store.pool.acquire() as conn:
                yield Sizing(conn)

    marker = f"test.stream.{uuid.uuid4().hex[:8]}"
    log = AuditLog(types.SimpleNamespace(pool=SizingPool()), batch=100, interval=10.0)
    await log.start()
    for i in range(1000):
        log.submit({"at": i, "action": marker, "allowed": True, "status": 200})
        await asyncio.sleep(0.001)          # a request's time: COPYs end while events still come
    await log.stop(timeout=30)
    assert log.stats["written"] == 1000 and sum(sizes) == 1000
    assert len(sizes) <= 1000 // 100 + 1 and min(sizes[:-1]) >= 100, sizes
    await server.store.pool.execute("DELETE FROM audit_log WHERE action = $1", marker)


def test_dropped_events_are_counted_and_warned_of_at_most_every_few_seconds(server, caplog):
    log = AuditLog(server.store, max_pending=2)
    with caplog.at_level("WARNING", logger="shardcat.governance.audit"):
        for i in range(10):
            log.submit({"at": i, "action": "test.drop", "allowed": True, "status": 200})
    assert log.stats["dropped"] == 8 and len(log.pending) == 2
    warnings = [r for r in caplog.records if "buffer is full" in r.getMessage()]
    assert len(warnings) == 1 and "1 event(s) dropped so far" in warnings[0].getMessage()
