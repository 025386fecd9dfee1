"""Metastore writes per second with group commit on and off, in-process and over HTTP, and
PostgreSQL's own limit (issue 33).

    python -m benchmarks.bench_writes                  # ~8 min, writes its section of docs/benchmarks.md
    python -m benchmarks.bench_writes --no-docs        # print only
    python -m benchmarks.bench_writes --writers 1 8    # fewer rows

One embedded PostgreSQL and, on it, the same code three ways, each once with group commit on and
once off (`GroupCommitConfig(enabled=...)`, `shardcat serve --no-group-commit`):
- in-process: a `Store` and two `Shard`s in this process, on metastores of their own; writes go
  straight to the shard's catalog operations (no HTTP);
- over HTTP, straight to the shard and through the router: two `shardcat serve --shards 1`
  processes (a router and one shard actor on a Ray of its own each, each on a database of its
  own); each write is a request to the owner shard's front (its URL from `GET /shardcat/routing`,
  as a routing client does) or to the router's front, which forwards it on its fast path.
Two writes, each writer on its own names or its own table: createTable (a managed Delta table with
a new name per request) and an inline catalog-managed Delta commit (`POST /delta/preview/commits`,
`DeltaCommitService.commit` in-process, of version latest + 1 with its actions inline, reporting
latest as published, as a Delta client does). Beside them, PostgreSQL's limit for the same shape:
each connection in a loop of one-row transactions (bump a version row of its own, append a log
row, commit), as many connections as writers up to the pool's size. Windows of the variants
alternate; each row is the median window.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shlex
import statistics
import sys
import time
import uuid
from pathlib import Path

import orjson
import psutil
from yarl import URL

from shardcat.auth import Caller
from shardcat.catalog.protocols.delta_commits import DeltaCommitService
from shardcat.catalog.tree.service import CatalogService
from shardcat.shards.group_commit import GroupCommitConfig
from shardcat.shards.shard import Shard
from shardcat.store.db import Store
from shardcat.web.shard_client import Address, ShardClient

from . import harness as h

HEADING = "## Metastore writes: group commit on and off"
VARIANTS = {"group commit off": False, "group commit on": True}
IN_PROCESS, DIRECT, ROUTER = "in-process", "HTTP, straight to the shard", "HTTP, through the router"
PATHS = (IN_PROCESS, DIRECT, ROUTER)
OPS = ("createTable", "Delta commit")
POOL = 16
FEATURE = "delta.feature.catalogManaged"
_names = itertools.count()


def inline_commit(version: int, latest: int) -> dict:
    """The commit request of `version` with its actions inline (one added file), reporting the one
    before as published, as a Delta client that backfills after each commit does."""
    actions = orjson.dumps({"add": {"path": f"part-{version:05d}-{uuid.uuid4()}.parquet", "partitionValues": {},
                                    "size": 1024, "modificationTime": 1_700_000_000_000 + version,
                                    "dataChange": True}}).decode() + "\n"
    return {"commit_info": {"version": version, "timestamp": 1_700_000_000_000 + version,
                            "file_name": f"{version:020d}.{uuid.uuid4()}.json", "file_size": len(actions.encode()),
                            "file_modification_timestamp": 1_700_000_000_000 + version, "inline_content": actions},
            **({"latest_backfilled_version": latest} if latest > 0 else {})}


class Target:
    """One shard on one metastore of its own, with a schema to write into."""

    def __init__(self, store: Store, group_commit: bool):
        self.store = store
        self.shard = Shard(store, "bench", group_commit=GroupCommitConfig(enabled=group_commit))
        self.catalog = CatalogService(self.shard)
        self.delta = DeltaCommitService(self.shard, max_unpublished=1_000_000)
        self.tables: list[dict] = []
        self.heads: list[int] = []

    async def setup(self, root: str) -> None:
        self.metastore_id = str(uuid.uuid4())
        await self.store.create_metastore(self.metastore_id, f"w-{self.metastore_id[:8]}",
                                          {"storage_root": f"{root}/{self.metastore_id}"})
        self.caller = Caller("admin", 1, True, 1, self.metastore_id)
        await self.catalog.create(self.caller, "catalog", {"name": "c"})
        await self.catalog.create(self.caller, "schema", {"name": "s", "catalog_name": "c"})

    async def managed_tables(self, count: int) -> None:
        while len(self.tables) < count:
            name = f"delta{len(self.tables)}"
            staging = await self.catalog.create_staging_table(self.caller,
                                                            {"name": name, "catalog_name": "c", "schema_name": "s"})
            table = await self.catalog.create(self.caller, "table", {
                "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
                "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}],
                "storage_location": staging["staging_location"],
                "properties": {FEATURE: "supported", "io.unitycatalog.tableId": staging["id"]}})
            self.tables.append(table)
            self.heads.append(0)

    async def create_table(self, writer: int) -> None:
        await self.catalog.create(self.caller, "table", {
            "name": f"t{next(_names)}", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": []})

    async def delta_append(self, writer: int) -> None:
        table, version = self.tables[writer], self.heads[writer] + 1
        await self.delta.commit(self.caller, {"table_id": table["table_id"], "table_uri": table["storage_location"],
                                              **inline_commit(version, version - 1)})
        self.heads[writer] = version

    def op(self, op: str, path: str):
        return self.create_table if op == "createTable" else self.delta_append


class HttpTarget:
    """One `shardcat serve --shards 1` process (router + one shard actor): writes as HTTP requests,
    to the owner shard's front or to the router's, one keep-alive connection per writer and path."""

    def __init__(self, server: h.Server):
        self.server = server
        self.headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
        self.tables: list[dict] = []
        self.heads: list[int] = []
        self.clients: dict[tuple[str, int], ShardClient] = {}
        self.shard_pids: list[int] = []     # the shard actor's process (shard_actor_pids)

    async def setup(self) -> None:
        status, body = await h.call("GET", f"{self.server.api}/shardcat/routing", self.server.token)
        if status != 200:
            raise RuntimeError(f"GET /shardcat/routing: HTTP {status}: {body[:300]!r}")
        shard = URL(orjson.loads(body)["my_shard"])
        if shard.host not in ("127.0.0.1", "localhost", "::1"):
            raise RuntimeError(f"the shard listens on {shard}, not on loopback; this benchmark only uses loopback")
        router = URL(self.server.base)
        self.addresses = {DIRECT: Address(shard.host, shard.port), ROUTER: Address(router.host, router.port)}
        await self._post("/catalogs", {"name": "c"})
        await self._post("/schemas", {"name": "s", "catalog_name": "c"})

    async def _post(self, path: str, body: dict) -> dict:
        status, answer = await h.call("POST", f"{self.server.api}{path}", self.server.token, json=body)
        if status != 200:
            raise RuntimeError(f"POST {path}: HTTP {status}: {answer[:300]!r}")
        return orjson.loads(answer)

    async def managed_tables(self, count: int) -> None:
        while len(self.tables) < count:
            name = f"delta{len(self.tables)}"
            staging = await self._post("/staging-tables", {"name": name, "catalog_name": "c", "schema_name": "s"})
            self.tables.append(await self._post("/tables", {
                "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
                "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG", "type_text": "bigint",
                                                            "type_json": '{"type":"long"}', "position": 0}],
                "storage_location": staging["staging_location"],
                "properties": {FEATURE: "supported", "io.unitycatalog.tableId": staging["id"]}}))
            self.heads.append(0)

    async def _send(self, path: str, writer: int, method: str, raw_path: str, body: dict):
        client = self.clients.get((path, writer))
        if client is None:
            client = self.clients[path, writer] = ShardClient(timeout=h.REQUEST_TIMEOUT)
        return await client.request(self.addresses[path], method, h.PREFIX + raw_path, self.headers,
                                    orjson.dumps(body))

    def op(self, op: str, path: str):
        async def create_table(writer: int) -> None:
            answer = await self._send(path, writer, "POST", "/tables", {
                "name": f"t{next(_names)}", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
                "data_source_format": "DELTA", "columns": []})
            if answer.status != 200:
                raise RuntimeError(f"createTable: HTTP {answer.status}: {answer.body[:200]!r}")

        async def delta_commit(writer: int) -> None:
            table, version = self.tables[writer], self.heads[writer] + 1
            ids = {"table_id": table["table_id"], "table_uri": table["storage_location"]}
            answer = await self._send(path, writer, "POST", "/delta/preview/commits",
                                      {**ids, **inline_commit(version, version - 1)})
            if answer.status == 200:
                self.heads[writer] = version
                return
            # an unknown outcome (503) may have committed: take the table's head from the catalog
            head = await self._send(path, writer, "GET", "/delta/preview/commits", {**ids, "start_version": 0})
            if head.status == 200:
                self.heads[writer] = orjson.loads(head.body)["latest_table_version"]
            raise RuntimeError(f"Delta commit: HTTP {answer.status}: {answer.body[:200]!r}")

        return create_table if op == "createTable" else delta_commit

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds so far of these processes' trees (a server with its Ray workers, PostgreSQL), the
    processes that ended included: PostgreSQL's backends come and go with the pool's connections."""
    return h.tree_cpu_total(pids)


def shard_actor_pids(server_pid: int) -> list[int]:
    """The shard actors' processes in a server's tree: Ray titles an actor's process after its class
    (`ray::ShardActor...`). With `--shards 1`, the one process that owns the metastore."""
    found = []
    for proc in psutil.Process(server_pid).children(recursive=True):
        try:
            if "ray::ShardActor" in " ".join(proc.cmdline()):
                found.append(proc.pid)
        except psutil.Error:
            pass
    return found


def process_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds so far of these processes alone (not their children)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def own_cpu_seconds() -> float:
    """CPU seconds of this process alone (the load, and the in-process shards), not of its children."""
    t = psutil.Process(os.getpid()).cpu_times()
    return t.user + t.system


async def closed_loop(op, writers: int, seconds: float, server_pids: list[int] = (),
                      pg_pids: list[int] = (), shard_pids: list[int] = ()) -> dict:
    cpu0 = (cpu_seconds(list(server_pids)), cpu_seconds(list(pg_pids)), own_cpu_seconds(),
            process_cpu_seconds(list(shard_pids)))
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds

    async def writer(i: int) -> None:
        nonlocal errors
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                await op(i)
            except Exception as e:      # counted, shown; a benchmark run with errors is not a result
                errors += 1
                if errors <= 3:
                    h.log(f"    error: {e!r}")
                continue
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(writer(i) for i in range(writers)))
    wall = time.perf_counter() - started
    cpu1 = (cpu_seconds(list(server_pids)), cpu_seconds(list(pg_pids)), own_cpu_seconds(),
            process_cpu_seconds(list(shard_pids)))
    latencies.sort()
    return {"per_s": len(latencies) / wall, "p50_ms": h.percentile(latencies, 50) * 1e3 if latencies else 0,
            "p99_ms": h.percentile(latencies, 99) * 1e3 if latencies else 0, "errors": errors,
            "server_cores": (cpu1[0] - cpu0[0]) / wall, "pg_cores": (cpu1[1] - cpu0[1]) / wall,
            "own_cores": (cpu1[2] - cpu0[2]) / wall, "shard_cores": (cpu1[3] - cpu0[3]) / wall}


async def postgres_limit(store: Store, writers: int, seconds: float, pg_pids: list[int] = ()) -> dict:
    """One-row transactions of the write's shape, each connection on a row of its own."""
    async with store.pool.acquire() as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_versions (id int PRIMARY KEY, version bigint NOT NULL)")
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_log (id int, version bigint, at bigint, details jsonb)")
        await conn.execute("INSERT INTO bench_versions SELECT g, 0 FROM generate_series(0, $1) g "
                           "ON CONFLICT DO NOTHING", POOL)

    async def op(i: int) -> None:
        async with store.pool.acquire() as conn, conn.transaction():
            v = await conn.fetchval("UPDATE bench_versions SET version = version + 1 WHERE id = $1 RETURNING version",
                                    i % POOL)
            await conn.execute("INSERT INTO bench_log VALUES ($1, $2, $3, $4)", i % POOL, v, 0, [{"id": i}])

    return await closed_loop(op, writers, seconds, pg_pids=pg_pids)


async def start_servers(tmp: Path, pg: h.Postgres, writers: int) -> dict[str, HttpTarget]:
    """`shardcat serve --shards 1`, group commit on and off, each on a database of its own."""
    servers = {}
    for name, on in VARIANTS.items():
        tag = "on" if on else "off"
        db = await pg.database(f"writes_http_{tag}")
        server = h.start_shardcat(tmp / f"serve-{tag}", db, "--shards", "1",
                                  *([] if on else ["--no-group-commit"]), name=f"shardcat-gc-{tag}")
        servers[name] = HttpTarget(server)
        await servers[name].setup()
        await servers[name].managed_tables(writers)
        servers[name].shard_pids = shard_actor_pids(server.child.pid)
        if len(servers[name].shard_pids) != 1:
            raise RuntimeError(f"shardcat ({name}): expected one shard actor process, found "
                               f"{servers[name].shard_pids}")
    return servers


async def run(args, tmp, pg: h.Postgres) -> dict:
    url = await pg.database("writes")
    store = await Store.open(url, min_size=2, max_size=POOL)
    paths = [{"in-process": IN_PROCESS, "shard": DIRECT, "router": ROUTER}[p] for p in args.paths]
    rows: dict[tuple[str, str, str, int], list[dict]] = {}
    servers: dict[str, HttpTarget] = {}
    pg_pids = [pg.pid] if pg.pid else []
    try:
        await store.migrate()
        targets = {}
        for name, on in VARIANTS.items():
            targets[name] = Target(store, on)
            await targets[name].setup(f"file://{tmp}")
            await targets[name].managed_tables(max(args.writers))
        if DIRECT in paths or ROUTER in paths:
            servers = await start_servers(tmp, pg, max(args.writers))
        for round_ in range(args.rounds):
            for writers in args.writers:
                for op in OPS:
                    for path in paths:
                        for name in VARIANTS:
                            target = targets[name] if path == IN_PROCESS else servers[name]
                            server_pids = [] if path == IN_PROCESS else [target.server.child.pid]
                            shard_pids = [] if path == IN_PROCESS else target.shard_pids
                            fn = target.op(op, path)
                            await closed_loop(fn, writers, args.warmup)
                            w = await closed_loop(fn, writers, args.seconds, server_pids, pg_pids, shard_pids)
                            rows.setdefault((op, path, name, writers), []).append(w)
                            h.log(f"  round {round_ + 1} {op} {path} {name} x{writers}: {w['per_s']:,.0f}/s "
                                  f"p50 {w['p50_ms']:.1f} ms p99 {w['p99_ms']:.1f} ms errors {w['errors']} "
                                  f"(cores: server {w['server_cores']:.2f}, shard actor {w['shard_cores']:.2f}, "
                                  f"PostgreSQL {w['pg_cores']:.2f}, "
                                  f"this process {w['own_cores']:.2f})")
                await postgres_limit(store, writers, args.warmup)
                w = await postgres_limit(store, writers, args.seconds, pg_pids)
                rows.setdefault(("PostgreSQL limit", "asyncpg in this process", "one-row transactions", writers),
                                []).append(w)
                h.log(f"  round {round_ + 1} PostgreSQL x{writers}: {w['per_s']:,.0f}/s")
        for name, server in servers.items():
            if server.server.child.proc.poll() is not None:
                raise RuntimeError(f"shardcat ({name}) exited during the run")
        stats = {name: dict(t.shard.stats) for name, t in targets.items()}
    finally:
        for server in servers.values():
            server.close()
        await store.close()
    median = {k: {key: statistics.median(w[key] for w in ws) for key in ws[0]} for k, ws in rows.items()}
    return {"rows": [[*k, v] for k, v in median.items()], "stats": stats, "postgres": getattr(pg, "version", None)}


def _ms(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def report(run_info: dict) -> str:
    m = run_info["machine"]
    lines = [HEADING, "",
             f"- **Reproduce:** `{run_info['command']}`; run on {run_info['date']}.",
             f"- **Machine:** {h.machine_line(m, run_info['postgres'])}. The load generator, the servers and "
             "PostgreSQL share these cores; the variants alternate window by window, so their ratio is the "
             "finding, and the cores columns show where the CPU went.",
             f"- **What:** one embedded PostgreSQL; on it the same code three ways, each with group commit on "
             f"and off. *in-process*: one `Store` (pool of {POOL}) and two `Shard`s in the benchmark's process "
             "(`GroupCommitConfig(enabled=...)`), writes straight to the catalog operations (no HTTP). *HTTP*: two "
             "`shardcat serve --shards 1` processes (router and one shard actor on a Ray of its own each, each on a "
             "database of its own; one with `--no-group-commit`), each write a request from a closed-loop asyncio "
             "client (one keep-alive `ShardClient` connection per writer) either *straight to the shard* (the "
             "owner's front, its URL from `GET /shardcat/routing`) or *through the router* (its front's fast "
             "path). createTable: a managed Delta table with a new name per write. Delta commit: an inline "
             "catalog-managed commit (`POST /delta/preview/commits`, its actions in `inline_content`) of version "
             "latest + 1 on the writer's own table, reporting latest as published. PostgreSQL limit: a loop per "
             "connection of one-row transactions (bump a version row of its own, append a log row, commit) from "
             f"as many connections as writers, at most {POOL}. {run_info['rounds']} alternating windows of "
             f"{run_info['seconds']:g} s per row (after {run_info.get('warmup', 1):g} s of warm-up each); the "
             "median window. Cores: CPU seconds per second of the server process tree (router, shard actor, "
             "Ray) and, in brackets, of the shard actor's process alone (the one process that owns the "
             "metastore), of PostgreSQL (all its backends) and of the benchmark's own process (the client; "
             "in-process rows: the shards too).",
             "",
             "| write | path | variant | writers | writes/s | p50 ms | p99 ms | errors | cores: server (shard actor) "
             "/ PostgreSQL / benchmark |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for op, path, name, writers, r in run_info["rows"]:
        server = (f"{r['server_cores']:.2f} ({r['shard_cores']:.2f})" if path != IN_PROCESS and "shard_cores" in r
                  else "–" if path == IN_PROCESS else f"{r['server_cores']:.2f}")
        cores = (f"{server} / {r['pg_cores']:.2f} / {r['own_cores']:.2f}" if "pg_cores" in r else "–")
        lines.append(f"| {op} | {path} | {name} | {writers} | {r['per_s']:,.0f} | {_ms(r['p50_ms'])} | "
                     f"{_ms(r['p99_ms'])} | {r['errors']:.0f} | {cores} |")
    by = {(op, path, name, writers): r for op, path, name, writers, r in run_info["rows"]}
    writer_counts = sorted({writers for _, _, _, writers, _ in run_info["rows"]})
    paths = [p for p in PATHS if any(k[1] == p for k in by)]
    lines += ["", "Group commit on against off, and the on variant against PostgreSQL's limit at the same "
              "number of connections:", "",
              "| writers | path | createTable on/off | Delta commit on/off | createTable / PostgreSQL limit "
              "| Delta commit / PostgreSQL limit |", "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for writers in writer_counts:
        limit = by.get(("PostgreSQL limit", "asyncpg in this process", "one-row transactions", writers), {}).get("per_s")
        for path in paths:
            cells = []
            for op in OPS:
                on_, off = by.get((op, path, "group commit on", writers)), by.get((op, path, "group commit off", writers))
                cells.append(f"{on_['per_s'] / off['per_s']:.2f}×" if on_ and off and off["per_s"] else "–")
            for op in OPS:
                on_ = by.get((op, path, "group commit on", writers))
                cells.append(f"{on_['per_s'] / limit:.0%}" if on_ and limit else "–")
            lines.append(f"| {writers} | {path} | " + " | ".join(cells) + " |")
    one = [(path, by.get(("createTable", path, "group commit on", 1))) for path in paths]
    if all(r for _, r in one):
        lines += ["", "One writer's createTable p50 with group commit on (issue 33's table, in-process before group "
                  "commit: 1.5 ms): " + ", ".join(f"{path} {_ms(r['p50_ms'])} ms" for path, r in one) + "."]
    if any(k[3] == 32 for k in by):
        lines += ["", "Issue 33's targets at 32 writers, group commit on (createTable ≥ 3,000/s and Delta commits "
                  "≥ 3,000/s, p99 < 25 ms):", "",
                  "| path | createTable/s | p99 ms | Delta commits/s | p99 ms | targets | cores: server / "
                  "PostgreSQL / benchmark (createTable) |", "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
        for path in paths:
            ct, dc = by.get(("createTable", path, "group commit on", 32)), by.get(("Delta commit", path, "group commit on", 32))
            if not (ct and dc):
                continue
            met = all(r["per_s"] >= 3000 and r["p99_ms"] < 25 for r in (ct, dc))
            lines.append(f"| {path} | {ct['per_s']:,.0f} | {_ms(ct['p99_ms'])} | {dc['per_s']:,.0f} | "
                         f"{_ms(dc['p99_ms'])} | {'met' if met else 'not met'} | {ct['server_cores']:.2f} / "
                         f"{ct['pg_cores']:.2f} / {ct['own_cores']:.2f} |")
        limit32 = by.get(("PostgreSQL limit", "asyncpg in this process", "one-row transactions", 32))
        if limit32:
            lines += ["", f"PostgreSQL's own limit here at 32 writers ({POOL} connections): "
                      f"{limit32['per_s']:,.0f} one-row transactions/s, p99 {_ms(limit32['p99_ms'])} ms."]
        busy = []
        for path in paths:
            for op in OPS:
                r = by.get((op, path, "group commit on", 32))
                if r and "pg_cores" in r:
                    used = r["server_cores"] + r["pg_cores"] + r["own_cores"]
                    busy.append(f"{op} {path} {used:.2f} ({used / m['cores']:.0%}; CPU µs per write: server "
                                f"{r['server_cores'] / r['per_s'] * 1e6:,.0f}, PostgreSQL "
                                f"{r['pg_cores'] / r['per_s'] * 1e6:,.0f}, benchmark "
                                f"{r['own_cores'] / r['per_s'] * 1e6:,.0f})" if r["per_s"] else f"{op} {path} –")
        if busy:
            lines += ["", f"Cores busy at 32 writers, group commit on, of the machine's {m['cores']} (server + "
                      "PostgreSQL + benchmark process): " + "; ".join(busy) + "."]
        ceiling = []
        for writers in (32, 128):
            for path in paths:
                for op in OPS:
                    r = by.get((op, path, "group commit on", writers))
                    if not r or not r["per_s"]:
                        continue
                    cores = r["own_cores"] if path == IN_PROCESS else r.get("shard_cores")
                    if not cores:
                        continue
                    ceiling.append(f"| {op} | {path} | {writers} | {r['per_s']:,.0f} | {cores:.2f} | "
                                   f"{cores / r['per_s'] * 1e6:,.0f} | {r['per_s'] / cores:,.0f} |")
        if ceiling:
            lines += ["", "Where the ceiling is: the one process that owns the metastore (the shard actor; "
                      "in-process, the benchmark's process, which also runs the writers), its cores, its CPU per "
                      "write, and the writes per second it would make at one full core (1 / its CPU per write: "
                      "its Python is serial, one event loop, one owner per metastore by design):", "",
                      "| write | path | writers | writes/s | owner process cores | its CPU µs per write | "
                      "bound at 1.0 core, writes/s |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
                      *ceiling]
    on = run_info["stats"].get("group commit on", {})
    if on.get("groups"):
        lines += ["", f"With group commit on, the in-process shard wrote {on.get('lone_writes', 0):,} writes in "
                  "transactions of their own (nothing else queued when their committer started) and "
                  f"{on['grouped_writes']:,} queued ones in {on['groups']:,} transactions ({on['grouped_writes'] / on['groups']:.1f} per transaction on "
                  "average over the whole run, warm-ups and setup included)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = h.alternating_windows_parser(__doc__.splitlines()[0], rounds=2)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--paths", nargs="+", choices=("in-process", "shard", "router"),
                        default=["in-process", "shard", "router"],
                        help="in-process shards, and/or HTTP straight to the shard or through the router")
    args = parser.parse_args()
    info, date = h.machine(), h.now_utc()
    outcome = h.run_with_postgres("shardcat-bench-writes-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        raise SystemExit(130)
    command = shlex.join(["python", "-m", "benchmarks.bench_writes", *sys.argv[1:]])
    run_info = {"date": date, "command": command, "machine": info, "seconds": args.seconds, "rounds": args.rounds,
                "warmup": args.warmup, **outcome}
    h.publish("bench_writes", run_info, report, h.DOCS, HEADING, to_docs=not args.no_docs)


def republish(raw_json: str) -> None:
    """Write the docs section again from a saved run (`python -c 'from benchmarks.bench_writes import
    republish; republish("PATH")'`): the report's wording changed, the numbers did not."""
    import json
    run_info = json.loads(open(raw_json).read())
    run_info["rows"] = [row if len(row) == 5 else [row[0], IN_PROCESS, *row[1:]] for row in run_info["rows"]]
    h.write_section(h.DOCS, HEADING, report(run_info))


if __name__ == "__main__":
    main()
