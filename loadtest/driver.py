"""A light asyncio load loop that checks what it sees: the engine of the chaos experiments and tests.

Each `LoadClient` is one client session: it draws requests from workload.py, and keeps a
ledger of its own acknowledged writes: creates, alters, drops of tables it owns in each
metastore's `load` schema; grants and revokes of SELECT on seeded tables (shared with other
clients, so each is kept with the metastore version it was acknowledged at: the highest one
decides); Delta commits it got ratified (version and commit file name). On every answer it
checks session consistency: a read never reflects a metastore version older than a write it
saw acknowledged, a table it created (acknowledged) is there, one it dropped is gone, its last
acknowledged comment shows, an acknowledged grant change shows in the answered permissions,
and no commit version is acknowledged to it twice. Writes whose outcome is unknown (503,
timeout, lost connection) leave the ledger; a Delta commit refused as already taken (409) is
expected: the client reads the latest version and proposes the next one later.

Every loop is bounded in time and in request count. Loopback only: the callers pass a
server URL they started.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from .workload import CATALOG, LOAD_SCHEMA, PREFIX, WRITES, Chooser, Metastore, Request, alter_request, \
    commit_request, create_request, drop_request, get_commits_request, grant_request, grant_target, read_request

VERSION_HEADER = "X-Shardcat-Version"
MIN_VERSION_HEADER = "X-Shardcat-Min-Version"
REQUEST_TIMEOUT = 10.0


@dataclass
class Sample:
    start: float          # seconds since the run began
    latency: float        # seconds
    op: str
    status: int           # 0: no HTTP answer (timeout, connection lost)
    error: str            # error_code or exception name; "" on success
    metastore: str


@dataclass
class Budget:
    """Shared bounds of a run: a deadline and a request count. With `enough`, the run goes on past
    the deadline (up to `hard_deadline`) until `enough()` holds: on a slow machine a fixed time
    may not give a check enough acknowledged writes to look at."""
    deadline: float       # time.monotonic()
    max_requests: int
    used: int = 0
    stopped: bool = False
    hard_deadline: float | None = None
    enough: Callable[[], bool] | None = None

    def open(self) -> bool:
        """Whether the run's time is still on (the request count aside)."""
        if self.stopped:
            return False
        now = time.monotonic()
        return now < self.deadline or not (self.enough is None or self.enough()
                                            or now >= (self.hard_deadline or self.deadline))

    def take(self) -> bool:
        if self.used >= self.max_requests or not self.open():
            return False
        self.used += 1
        return True


@dataclass
class Owned:
    present: bool
    comment: str | None = None


@dataclass
class Ledger:
    """One client's acknowledged writes and what it therefore must see."""
    tables: dict[tuple[str, str], Owned] = field(default_factory=dict)      # (metastore, full name)
    unknown: set[tuple[str, str]] = field(default_factory=set)
    seen_version: dict[str, int] = field(default_factory=dict)             # metastore -> acked write version
    # (metastore, table, principal) -> (acked metastore version, SELECT granted) of the newest acked change
    grants: dict[tuple[str, str, str], tuple[int, bool]] = field(default_factory=dict)
    grants_unknown: set[tuple[str, str, str]] = field(default_factory=set)
    # (metastore, Delta table id, version) -> commit file name, for every commit ratified for this client
    commits: dict[tuple[str, str, int], str] = field(default_factory=dict)
    acked_writes: int = 0
    violations: list[str] = field(default_factory=list)


class LoadClient:
    def __init__(self, name: str, url: str, metastores: list[Metastore], session: aiohttp.ClientSession,
                 budget: Budget, samples: list[Sample], t0: float, *, seed: int = 0, own_reads: float = 0.2,
                 write_share: float | None = None, min_version_header: bool = False):
        self.name = name
        self.url = url
        self.session = session
        self.budget = budget
        self.samples = samples
        self.t0 = t0
        self.chooser = Chooser(metastores, random.Random(seed))
        self.rng = self.chooser.rng
        self.own_reads = own_reads          # share of getTable that reads back the client's own tables
        self.write_share = write_share      # override the mix's write share (tests want more writes)
        self.ledger = Ledger()
        self.seq = 0
        self.delta_latest: dict[str, int] = {}   # metastore -> latest Delta table version this client knows
        # A routing-aware client talking to shards directly sends the newest version it saw acknowledged
        # (the router does that for clients that go through it).
        self.min_version_header = min_version_header

    async def run(self) -> None:
        while self.budget.take():
            ms = self.chooser.metastore()
            op = self.chooser.op()
            if self.write_share is not None:
                op = self.rng.choice(sorted(WRITES)) if self.rng.random() < self.write_share else \
                    (op if op not in WRITES else "getTable")
            if op in WRITES:
                await self.write(ms, op)
            else:
                await self.read(ms, op)

    # ---- one request ------------------------------------------------------

    async def send(self, ms: Metastore, req: Request, base: str | None = None, min_version: int | None = None,
                   expect: tuple[int, ...] = ()):
        """(status, body, version) of one request; status 0 if no answer came."""
        headers = {"Authorization": f"Bearer {ms.token}"}
        if min_version is None and self.min_version_header:
            min_version = self.ledger.seen_version.get(ms.id)
        if min_version:
            headers[MIN_VERSION_HEADER] = str(min_version)
        start = time.monotonic()
        status, body, version, error = 0, None, 0, ""
        try:
            async with self.session.request(req.method, (base or self.url) + req.path, params=req.params,
                                            json=req.json, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)) as r:
                status = r.status
                body = await r.json(content_type=None)
                version = int(r.headers.get(VERSION_HEADER, "0") or 0)
                if status >= 400 and status not in expect:
                    error = (body or {}).get("error_code", str(status)) if isinstance(body, dict) else str(status)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            error = type(e).__name__
            if isinstance(e, aiohttp.ClientConnectionError):
                await asyncio.sleep(0.01)   # a dead server must not turn this client into a busy loop
        self.samples.append(Sample(start - self.t0, time.monotonic() - start, req.op, status, error, ms.id))
        return status, body, version

    # ---- reads ------------------------------------------------------------

    async def read(self, ms: Metastore, op: str) -> None:
        mine = [k for k in self.ledger.tables if k[0] == ms.id]
        if op == "getTable" and mine and self.rng.random() < self.own_reads:
            key = self.rng.choice(mine)
            req = Request("getTable", "GET", f"{PREFIX}/tables/{key[1]}", table=key[1])
            gone = () if self.ledger.tables[key].present else (404,)     # a dropped table's 404 is no error
            status, body, version = await self.send(ms, req, expect=gone)
            self.check_own(key, status, body, "router")
        else:
            req = read_request(op, ms, self.chooser)
            status, body, version = await self.send(ms, req)
            if op in ("getTable", "getPermissions") and status == 404:
                self.violation(f"{op}: seeded table {req.table} in {ms.id} answered 404")
        if status == 200:
            self.check_version(ms.id, version, op)

    def check_own(self, key, status: int, body, via: str) -> None:
        owned = self.ledger.tables.get(key)
        if owned is None or status not in (200, 404):
            return
        if owned.present and status == 404:
            self.violation(f"{via}: acknowledged table {key[1]} in {key[0]} is missing")
        elif not owned.present and status == 200:
            self.violation(f"{via}: acknowledged drop of {key[1]} in {key[0]} not visible")
        elif owned.present and body.get("comment") != owned.comment:
            self.violation(f"{via}: {key[1]} in {key[0]} has comment {body.get('comment')!r}, "
                           f"acknowledged {owned.comment!r}")

    def check_version(self, metastore_id: str, version: int, op: str) -> None:
        seen = self.ledger.seen_version.get(metastore_id, 0)
        if version < seen:
            self.violation(f"{op} in {metastore_id} reflected version {version} after an acknowledged write at {seen}")

    def violation(self, message: str) -> None:
        if len(self.ledger.violations) < 100:
            self.ledger.violations.append(f"{self.name}: {message}")

    # ---- writes -----------------------------------------------------------

    def acked(self, ms: Metastore, req: Request, version: int, what: str) -> None:
        self.ledger.acked_writes += 1
        self.ledger.seen_version[ms.id] = max(self.ledger.seen_version.get(ms.id, 0), version)
        if version == 0:
            self.violation(f"{req.op} of {what} acknowledged without {VERSION_HEADER}")

    async def write(self, ms: Metastore, op: str) -> None:
        if op == "updatePermissions":
            return await self.update_permissions(ms)
        if op == "deltaCommit":
            if ms.delta_table_id:
                return await self.delta_commit(ms)
            op = "createTable"      # a population seeded without a Delta table
        present = [k for k, o in self.ledger.tables.items() if k[0] == ms.id and o.present]
        if op == "createTable" or not present:
            self.seq += 1
            name = f"{self.name}_{self.seq:06d}"
            req = create_request(name)
            key = (ms.id, f"{CATALOG}.{LOAD_SCHEMA}.{name}")
            outcome = Owned(True, None)
        elif op == "alterTable":
            key = self.rng.choice(present)
            self.seq += 1
            outcome = Owned(True, f"{self.name}-{self.seq}")
            req = alter_request(key[1], outcome.comment)
        else:
            key = self.rng.choice(present)
            req = drop_request(key[1])
            outcome = Owned(False)
        status, body, version = await self.send(ms, req)
        if status == 200:
            self.ledger.tables[key] = outcome
            self.acked(ms, req, version, key[1])
        elif status == 404 and op != "createTable":
            self.violation(f"{req.op} of acknowledged table {key[1]} in {ms.id} answered 404")
            self.forget(key)
        else:                     # outcome unknown: it may or may not have happened
            self.forget(key)

    def forget(self, key) -> None:
        self.ledger.tables.pop(key, None)
        self.ledger.unknown.add(key)

    async def update_permissions(self, ms: Metastore) -> None:
        full, principal, grant = grant_target(ms, self.chooser)
        key = (ms.id, full, principal)
        req = grant_request(full, principal, grant)
        status, body, version = await self.send(ms, req)
        if status != 200:           # outcome unknown (a seeded table is never missing)
            self.ledger.grants_unknown.add(key)
            return
        self.acked(ms, req, version, f"SELECT on {full} to {principal}")
        if version > self.ledger.grants.get(key, (-1, False))[0]:
            self.ledger.grants[key] = (version, grant)
        held = {a["principal"]: a["privileges"] for a in (body or {}).get("privilege_assignments", [])}
        if ("SELECT" in held.get(principal, [])) != grant:
            self.violation(f"{'grant' if grant else 'revoke'} of SELECT on {full} to {principal} in {ms.id} "
                           f"acknowledged, but the answer shows {held.get(principal)}")

    async def refresh_delta(self, ms: Metastore) -> None:
        """Learn the Delta table's latest version (after a conflict, or before the first commit)."""
        req = get_commits_request(ms, self.delta_latest.get(ms.id, 0) + 1)
        status, body, version = await self.send(ms, req)
        if status == 200:
            self.check_version(ms.id, version, req.op)
            latest = body["latest_table_version"]
            mine = max((v for (m, _, v) in self.ledger.commits if m == ms.id), default=0)
            if latest < mine:
                self.violation(f"Delta table of {ms.id}: latest version {latest} after this client's "
                               f"acknowledged commit {mine}")
            self.delta_latest[ms.id] = latest

    async def delta_commit(self, ms: Metastore) -> None:
        if ms.id not in self.delta_latest:
            await self.refresh_delta(ms)
            if ms.id not in self.delta_latest:
                return
        version = self.delta_latest[ms.id] + 1
        req = commit_request(ms, version, self.name)
        status, body, ack_version = await self.send(ms, req, expect=(409,))
        name = req.json["commit_info"]["file_name"]
        key = (ms.id, ms.delta_table_id, version)
        if status == 200:
            self.acked(ms, req, ack_version, f"version {version}")
            if key in self.ledger.commits:
                self.violation(f"Delta version {version} in {ms.id} acknowledged twice: "
                               f"{self.ledger.commits[key]} and {name}")
            self.ledger.commits.setdefault(key, name)
            self.delta_latest[ms.id] = version
        elif status == 409:         # another writer took the version: rebase on the latest
            await self.refresh_delta(ms)
        else:                       # outcome unknown: ask again before the next proposal
            self.delta_latest.pop(ms.id, None)


@dataclass
class Probe:
    metastore: str
    start: float
    end: float
    ok: bool


class Prober:
    """Asks every metastore, one request at a time each, whether it is served (GET its catalog)."""

    def __init__(self, url: str, metastores: list[Metastore], session: aiohttp.ClientSession, budget: Budget,
                 t0: float, interval: float = 0.05):
        self.url, self.metastores, self.session, self.budget, self.t0 = url, metastores, session, budget, t0
        self.interval = interval
        self.probes: list[Probe] = []

    async def run(self) -> None:
        await asyncio.gather(*(self._probe(ms) for ms in self.metastores))

    async def _probe(self, ms: Metastore) -> None:
        headers = {"Authorization": f"Bearer {ms.token}"}
        while self.budget.open():
            start = time.monotonic()
            ok = False
            try:
                async with self.session.get(f"{self.url}{PREFIX}/catalogs/{CATALOG}", headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)) as r:
                    await r.read()
                    ok = r.status == 200
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass
            if len(self.probes) < 1_000_000:
                self.probes.append(Probe(ms.id, start - self.t0, time.monotonic() - self.t0, ok))
            await asyncio.sleep(self.interval)

    def served_again(self, fault_at: float, sent_after: float) -> tuple[float | None, dict[str, float]]:
        """Seconds from the fault until every metastore answered a request sent after `sent_after`
        (the fault, or its end when it lasts a while); None: one never did."""
        first: dict[str, float] = {}
        for p in self.probes:
            if p.ok and p.start >= sent_after:
                first[p.metastore] = min(first.get(p.metastore, p.end - fault_at), p.end - fault_at)
        if len(first) < len(self.metastores):
            return None, first
        return max(first.values()), first
