"""shardcat beside the open-source Unity Catalog server (UC OSS 0.6.0): getTable, listTables,
createTable and Delta commits, same machine, same data, one run (issue 45).

    python -m benchmarks.bench_uc_oss [--quick] [--no-docs]

Four targets, one after the other (each alone on the machine while measured): UC OSS on its
default embedded H2 and on PostgreSQL (benchmarks/uc_oss.py: built from its v0.6.0 sources,
authorization off, its Armeria port straight), `shardcat serve` (one in-process shard) and
`shardcat serve --shards 1` measured through its router. Each gets the same data through the API:
a schema of 1,000 external Delta tables of 8 columns (getTable asks for a random one) and a schema
of 120 (listTables asks for all of them in one page: UC OSS issue 781's case). createTable makes
an external Delta table of 8 columns with a new name per request; a Delta commit is
`POST /delta/preview/commits` of version latest + 1 of the writer's own catalog-managed table,
reporting the one before as backfilled (as a Delta client that publishes each commit does; UC
OSS keeps at most 10 unbackfilled). At 1 and 32 closed-loop clients; req/s, p50 and p99.
Writes its section of docs/benchmarks.md, the picture docs/img/bench_uc_oss.png, raw numbers
under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shlex
import sys
import time
import uuid
from pathlib import Path

from shardcat.web.shard_client import Address, ShardClient

from . import harness as h
from . import uc_oss

SECTION = "## Beside the open-source Unity Catalog server (UC OSS 0.6.0)"
PICTURE = h.ROOT / "docs" / "img" / "bench_uc_oss.png"
CATALOG, GET_SCHEMA, LIST_SCHEMA, WRITE_SCHEMA = "bench", "s", "l", "w"
LIST_TABLES = 120
# listTables last: UC OSS goes on with requests its clients gave up on (10 s), which would slow the next rows
OPS = ("getTable", "createTable", "Delta commit", "listTables")
TARGETS = ("UC OSS, H2", "UC OSS, PostgreSQL", "shardcat, in-process", "shardcat, router (--shards 1)")


def column(c: dict, position: int) -> dict:
    """harness.COLUMNS with the type_text and type_json UC OSS requires (both servers get the same)."""
    spark = {"LONG": "long", "TIMESTAMP": "timestamp", "STRING": "string", "BOOLEAN": "boolean", "DATE": "date",
             "DECIMAL": f"decimal({c.get('type_precision', 10)},{c.get('type_scale', 0)})"}[c["type_name"]]
    text = "bigint" if spark == "long" else spark
    meta = {"comment": c["comment"]} if "comment" in c else {}
    return {**c, "position": position, "type_text": text, "nullable": c.get("nullable", True),
            "type_json": json.dumps({"name": c["name"], "type": spark, "nullable": c.get("nullable", True),
                                     "metadata": meta})}


COLUMNS = [column(c, i) for i, c in enumerate(h.COLUMNS)]


def table_body(schema: str, name: str, root: str) -> dict:
    return {"name": name, "catalog_name": CATALOG, "schema_name": schema, "table_type": "EXTERNAL",
            "data_source_format": "DELTA", "columns": COLUMNS, "storage_location": f"{root}/{schema}/{name}",
            "comment": f"benchmark table {name}", "properties": {"owner_team": "benchmarks"}}


class Target:
    """One running server and what the run learnt on it."""

    def __init__(self, name: str, base: str, token: str | None, pids: list[int], root: str):
        self.name, self.base, self.token, self.pids, self.root = name, base, token, pids, root
        self.api = base + h.PREFIX
        self.headers = {"Content-Type": "application/json",
                        **({"Authorization": f"Bearer {token}"} if token else {})}
        self.delta_tables: list[dict] = []
        self.heads: list[int] = []

    async def post(self, path: str, body: dict) -> dict:
        status, raw = await h.call("POST", self.api + path, self.token, json=body)
        if status != 200:
            raise RuntimeError(f"{self.name}: POST {path}: HTTP {status}: {raw[:300]!r}")
        return json.loads(raw)

    async def seed(self, tables: int) -> float:
        """The catalog, three schemas, `tables` + LIST_TABLES tables, 32 catalog-managed Delta tables."""
        start = time.perf_counter()
        await self.post("/catalogs", {"name": CATALOG, "storage_root": f"{self.root}/managed"})
        for schema in (GET_SCHEMA, LIST_SCHEMA, WRITE_SCHEMA):
            await self.post("/schemas", {"name": schema, "catalog_name": CATALOG})
        todo = iter([(GET_SCHEMA, h.table_name(i)) for i in range(tables)] +
                    [(LIST_SCHEMA, h.table_name(i)) for i in range(LIST_TABLES)])

        async def worker():
            for schema, name in todo:
                await self.post("/tables", table_body(schema, name, self.root))
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(32))), 120 + tables * 0.5)
        for i in range(32):
            name = f"delta{i}"
            staging = await self.post("/staging-tables", {"name": name, "catalog_name": CATALOG,
                                                          "schema_name": WRITE_SCHEMA})
            table = await self.post("/tables", {
                "name": name, "catalog_name": CATALOG, "schema_name": WRITE_SCHEMA, "table_type": "MANAGED",
                "data_source_format": "DELTA", "columns": COLUMNS[:1], "storage_location": staging["staging_location"],
                "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": staging["id"]}})
            self.delta_tables.append(table)
            self.heads.append(0)
        return time.perf_counter() - start

    def reads(self, op: str, tables: int) -> list[h.Request]:
        if op == "getTable":
            return h.get_requests(self.base, CATALOG, GET_SCHEMA, tables)
        return h.requests(self.base, [f"{h.PREFIX}/tables?catalog_name={CATALOG}&schema_name={LIST_SCHEMA}"
                                      f"&max_results={LIST_TABLES + 80}"])

    def write(self, op: str, writer: int, names) -> tuple[str, bytes]:
        """(path, body) of this writer's next write."""
        if op == "createTable":
            return "/tables", json.dumps(table_body(WRITE_SCHEMA, f"c{next(names)}", self.root)).encode()
        table, version = self.delta_tables[writer], self.heads[writer] + 1
        self.heads[writer] = version
        return "/delta/preview/commits", json.dumps({
            "table_id": table["table_id"], "table_uri": table["storage_location"],
            "commit_info": {"version": version, "timestamp": 1_700_000_000_000 + version,
                            "file_name": f"{version:020d}.{uuid.uuid4()}.json", "file_size": 1024,
                            "file_modification_timestamp": 1_700_000_000_000 + version},
            **({"latest_backfilled_version": version - 1} if version > 1 else {})}).encode()


async def write_window(target: Target, op: str, concurrency: int, seconds: float, names) -> tuple:
    """A closed loop of `concurrency` writers, each with its own keep-alive connection, each on its
    own names or its own Delta table. Returns (latencies s of the 200s, errors, samples, wall s)."""
    address = Address("127.0.0.1", int(target.base.rsplit(":", 1)[1]))
    clients = [ShardClient(timeout=h.REQUEST_TIMEOUT) for _ in range(concurrency)]
    latencies, errors, samples = [], [0], []
    start = time.perf_counter()
    deadline = start + seconds

    async def writer(i: int):
        for _ in range(h.MAX_REQUESTS):
            t0 = time.perf_counter()
            if t0 >= deadline:
                return
            path, body = target.write(op, i, names)
            try:
                r = await clients[i].request(address, "POST", h.PREFIX + path, target.headers, body)
            except OSError as e:
                errors[0] += 1
                samples.append(str(e)[:200])
                if op == "Delta commit":   # an unanswered commit leaves the version unknown: resync
                    target.heads[i] = await latest_version(target, i)
                await asyncio.sleep(0.01)
                continue
            if r.status == 200:
                latencies.append(time.perf_counter() - t0)
            else:
                errors[0] += 1
                if len(samples) < 5:
                    samples.append(f"HTTP {r.status}: {bytes(r.body)[:200]!r}")
                if op == "Delta commit":
                    target.heads[i] = await latest_version(target, i)
    try:
        await asyncio.wait_for(asyncio.gather(*(writer(i) for i in range(concurrency))),
                               seconds + h.REQUEST_TIMEOUT + 5)
    finally:
        for c in clients:
            c.close()
    return latencies, errors[0], samples[:5], time.perf_counter() - start


async def latest_version(target: Target, writer: int) -> int:
    table = target.delta_tables[writer]
    status, raw = await h.call("GET", target.api + "/delta/preview/commits", target.token,
                               json={"table_id": table["table_id"], "table_uri": table["storage_location"],
                                     "start_version": 0})
    return json.loads(raw).get("latest_table_version", 0) if status == 200 else target.heads[writer]


async def measure_writes(target: Target, op: str, concurrency: int, cfg: h.LoadConfig, names,
                         pg_pids: list[int]) -> h.Result:
    label = {"target": target.name, "operation": op}
    h.log(f"  {target.name} {op} c={concurrency}")
    await write_window(target, op, concurrency, cfg.warmup, names)
    cpu0 = (h.tree_cpu(target.pids), h.tree_cpu(pg_pids), h.machine_busy())
    lat, errors, samples, wall = await write_window(target, op, concurrency, cfg.duration, names)
    cpu1 = (h.tree_cpu(target.pids), h.tree_cpu(pg_pids), h.machine_busy())
    ms = sorted(x * 1000 for x in lat)
    server, pg = h.cpu_used(cpu0[0], cpu1[0]) / wall, h.cpu_used(cpu0[1], cpu1[1]) / wall
    busy = (cpu1[2] - cpu0[2]) / wall
    r = h.Result(label=label, concurrency=concurrency, duration_s=round(wall, 3), ok=len(ms), errors=errors,
                 rps=len(ms) / wall, p50_ms=h.percentile(ms, 50), p90_ms=h.percentile(ms, 90),
                 p99_ms=h.percentile(ms, 99), max_ms=ms[-1] if ms else None, server_cpu=server, postgres_cpu=pg,
                 client_cpu=0.0, other_cpu=max(0.0, busy - server - pg), error_samples=samples)
    h.log(f"    -> {r.rps:8.0f} req/s  p50 {h.fmt_ms(r.p50_ms)} ms  p99 {h.fmt_ms(r.p99_ms)} ms  errors {errors}"
          f"  (cores: server {server:.2f}, postgres {pg:.2f})")
    for s in samples:
        h.log(f"       error: {s}")
    return r


async def start_target(name: str, tmp: Path, pg: h.Postgres) -> tuple[Target, object]:
    root = f"file://{tmp}/data-{len(name)}-{uuid.uuid4().hex[:6]}"
    if name.startswith("UC OSS"):
        db = await pg.database("bench_uc_oss_pg") if "PostgreSQL" in name else None
        server = uc_oss.start(tmp / f"uc-{uuid.uuid4().hex[:6]}", postgres_url=db, heap="4g")
        return Target(name, server.base, None, [server.child.pid], root), server.stop
    db = await pg.database(f"bench_uc_oss_{'router' if 'router' in name else 'single'}")
    extra = ("--shards", "1") if "router" in name else ()
    server = h.start_shardcat(tmp / f"shardcat-{len(extra)}", db, *extra)
    return Target(name, server.base, server.token, [server.child.pid], root), lambda: h.stop(server.child)


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    cfg = h.LoadConfig(args.warmup, args.duration, args.quiet_wait)
    progress = h.Progress(len(args.targets) * 2 * len(args.concurrency), args.warmup + args.duration)
    pg_pids = [pg.pid] if pg.pid else []
    names = itertools.count()
    results, seeds = [], {}
    for name in args.targets:
        h.log(f"== {name}")
        target, stop = await start_target(name, tmp, pg)
        try:
            seeds[name] = round(await target.seed(args.tables), 1)
            h.log(f"  seeded in {seeds[name]} s")
            for op in OPS:
                for c in args.concurrency:
                    if op in ("getTable", "listTables"):
                        results.append(await h.measure({"target": name, "operation": op}, target.reads(op, args.tables),
                                                       target.token, c, cfg, progress, target.pids, pg_pids))
                    else:
                        results.append(await measure_writes(target, op, c, cfg, names, pg_pids))
        finally:
            stop()
    return {"results": results, "seed_seconds": seeds, "postgres_version": getattr(pg, "version", None)}


def picture(run: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results = run["results"]
    concurrency = sorted({r.concurrency for r in results})
    targets = [t for t in TARGETS if any(r.label["target"] == t for r in results)]
    fig, axes = plt.subplots(1, len(concurrency), figsize=(6 * len(concurrency), 4.2), squeeze=False)
    width = 0.8 / max(1, len(targets))
    for ax, c in zip(axes[0], concurrency):
        for i, t in enumerate(targets):
            rps = [next((r.rps for r in results if r.label == {"target": t, "operation": op}
                         and r.concurrency == c), 0) for op in OPS]
            ax.bar([x + i * width for x in range(len(OPS))], rps, width, label=t)
        ax.set_xticks([x + width * (len(targets) - 1) / 2 for x in range(len(OPS))], OPS)
        ax.set_yscale("log")
        ax.set_ylabel("requests per second (log)")
        ax.set_title(f"{c} client{'s' if c > 1 else ''}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("shardcat and UC OSS 0.6.0, same machine, same data")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def markdown(run: dict) -> str:
    results = run["results"]
    by = {(r.label["target"], r.label["operation"], r.concurrency): r for r in results}
    lines = [
        SECTION, "", *h.quick_banner(run["quick"]),
        f"- **Reproduce:** `{run['command']}` (about {run['wall_minutes']:.1f} min); run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        "- **Servers**, one at a time, each alone while measured: UC OSS 0.6.0 (built from its sources by "
        "`jvm/uc-oss`, started by `benchmarks/uc_oss.py`: Java 17, `-Xmx4g`, authorization off, its Armeria port "
        "straight, not the URL-transcoding proxy in front of it) on its default embedded H2 and on the embedded "
        "PostgreSQL; `shardcat serve` (one in-process shard) and `shardcat serve --shards 1` through its router.",
        f"- **Data**, created through each server's API: {run['tables']:,} external Delta tables of "
        f"{len(COLUMNS)} columns (getTable: a random one), a schema of {LIST_TABLES} (listTables: all in one "
        "page, UC OSS issue 781's case), 32 catalog-managed Delta tables (a Delta commit: `POST "
        "/delta/preview/commits` of version latest + 1 of the writer's own table, the one before reported "
        "backfilled); createTable: an external Delta table of 8 columns, a new name each.",
        f"- **Load:** closed loop of N clients in one process, each with its own keep-alive connection; "
        f"{run['warmup_s']:g} s warm-up then {run['duration_s']:g} s measured per row.",
        "",
        "| operation | clients | " + " | ".join(f"{t} req/s (p50 / p99 ms)" for t in TARGETS) + " | shardcat ahead |",
        "| --- | ---: | " + " | ".join("---:" for _ in TARGETS) + " | --- |",
    ]
    for op in OPS:
        for c in sorted({r.concurrency for r in results}):
            cells = []
            for t in TARGETS:
                r = by.get((t, op, c))
                rps = "-" if r is None else (f"{r.rps:.1f}" + (" ⚠" if r.noisy else "") if r.rps < 10 else h.fmt_rps(r))
                cells.append("-" if r is None else f"{rps} ({h.fmt_ms(r.p50_ms)} / {h.fmt_ms(r.p99_ms)})"
                             + (f", {r.errors} errors" if r.errors else ""))
            uc = max((by[(t, op, c)].rps for t in TARGETS[:2] if (t, op, c) in by), default=0)
            ours = [by[(t, op, c)].rps for t in TARGETS[2:] if (t, op, c) in by]
            if ours and not uc:
                ahead = f"yes (UC OSS answered none within {h.REQUEST_TIMEOUT:g} s)"
            else:
                ahead = ("yes, " + " and ".join(f"{x / uc:.1f}×" for x in ours)) if ours and min(ours) > uc \
                    else ("no" if ours else "-")
            lines.append(f"| {op} | {c} | " + " | ".join(cells) + f" | {ahead} |")
    lines += [
        "", "**Why the gap.** UC OSS answers every request from its database through Hibernate: a getTable "
        "is several queries (the table, its schema and catalog, its columns, its properties); listTables "
        "loads each listed table's columns, properties and dependencies with queries of their own "
        "(`TableRepository.listTables`: three per table, so about 360 for the 120 here, issue 781's N+1); "
        "each createTable and commit is its own transaction. shardcat answers reads from the shard's "
        "memory (the router adds one loopback hop) and commits writes in groups on PostgreSQL. A row marked "
        "⚠ had other processes using more than "
        f"{h.NOISY_CORES} cores of the machine's two while measured (the shared machine was busy with other "
        "work during this run: compare rows of one run with each other, not with other sections).",
        "", f"![shardcat and UC OSS, requests per second](img/{PICTURE.name})", "",
              f"Seeding through the API took (s): {run['seed_seconds']}. "
              f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", ""]
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_uc_oss", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 s windows after 0.5 s warm-ups: a smoke run")
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    p.add_argument("--duration", type=float, help="seconds measured per row (default 5, quick 1)")
    p.add_argument("--warmup", type=float, help="seconds of warm-up per row (default 3, quick 0.5)")
    p.add_argument("--tables", type=int, default=1000)
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 32])
    p.add_argument("--targets", type=lambda s: [TARGETS[int(x)] for x in s.split(",")], default=list(TARGETS),
                   help="indexes into " + ", ".join(f"{i}: {t}" for i, t in enumerate(TARGETS)))
    p.add_argument("--quiet-wait", type=float, default=2.0, help="before each read row, wait at most this long "
                                                                 "for the machine to go quiet")
    p.add_argument("--from-raw", type=Path, help="rewrite the section and picture from benchmarks/out/<raw file>")
    args = p.parse_args(argv)
    args.duration = args.duration or (1.0 if args.quick else 5.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 3.0)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.from_raw:      # the section and picture again from a run's raw numbers (no load)
        run_info = json.loads(args.from_raw.read_text())
        run_info["results"] = [h.Result(**r) for r in run_info["results"]]
        run_info["raw_file"] = args.from_raw.name
        picture(run_info, PICTURE)
        h.write_section(h.DOCS, SECTION, markdown(run_info))
        return 0
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    why = uc_oss.available()
    if why and any(t.startswith("UC OSS") for t in args.targets):
        raise SystemExit(f"UC OSS cannot be built here: {why}")
    uc_oss.classpath()      # built (once) before anything is timed
    outcome = h.run_with_postgres("shardcat-bench-uc-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_uc_oss", *argv]),
                "machine": info, "tables": args.tables, "warmup_s": args.warmup, "duration_s": args.duration,
                "quick": args.quick, "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    if not args.no_docs:
        picture(run_info, PICTURE)
    h.publish("bench_uc_oss", run_info, markdown, h.DOCS, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
