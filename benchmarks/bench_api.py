"""Baseline benchmark: getTable and listTables against `shardcat serve`, and a bare aiohttp ceiling.

    python -m benchmarks.bench_api [--quick] [--out docs/benchmarks.md]

One run: an embedded PostgreSQL; `shardcat serve` (one in-process shard) as its own process;
one schema of 1,000 tables of 8 columns created through the API; getTable (a random one)
and listTables (first page of 100) at 1 and 32 closed-loop clients; then the bare aiohttp
server (benchmarks/bare_server.py) answering the same URLs with constant bodies of the same
sizes, measured the same way. Writes its section of docs/benchmarks.md (a --quick run is
marked as such) and the raw numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from . import harness as h

SECTION = "## Baseline: getTable and listTables (foundation)"
CATALOG, SCHEMA = "bench", "s"


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_api")
    log = h.log
    log("== shardcat serve (one in-process shard)")
    server = h.start_shardcat(tmp / "shardcat", db)
    log(f"== seeding {args.tables} tables of {len(h.COLUMNS)} columns through the API")
    seed_s = await h.seed_tables(server.api, server.token, CATALOG, SCHEMA, args.tables)
    workloads = {"getTable": h.get_requests(server.base, CATALOG, SCHEMA, args.tables),
                 "listTables": h.list_requests(server.base, CATALOG, SCHEMA)}
    sizes = await h.response_sizes(workloads, server.token)
    log(f"  seeded in {seed_s:.1f} s; response sizes {sizes}")
    bare, bare_base = h.start_bare(tmp, sizes)
    bare_workloads = {"getTable": h.get_requests(bare_base, CATALOG, SCHEMA, args.tables),
                      "listTables": h.list_requests(bare_base, CATALOG, SCHEMA)}
    if await h.response_sizes(bare_workloads, None) != sizes:
        raise RuntimeError("the bare server does not answer with the same sizes")

    cfg = h.LoadConfig(args.warmup, args.duration, args.quiet_wait)
    progress = h.Progress(2 * 2 * len(args.concurrency), args.warmup + args.duration)
    pg_pids = [pg.pid] if pg.pid else []
    results = []
    for op in workloads:
        for c in args.concurrency:
            results.append(await h.measure({"target": "shardcat", "operation": op}, workloads[op], server.token, c,
                                           cfg, progress, [server.child.pid], pg_pids))
            results.append(await h.measure({"target": "bare", "operation": op}, bare_workloads[op], None, c,
                                           cfg, progress, [bare.pid], []))
    for child in (server.child, bare):
        if child.proc.poll() is not None:
            raise RuntimeError(f"{child.name} exited during the run (code {child.proc.returncode})")
    return {"sizes": sizes, "seed_seconds": round(seed_s, 1), "postgres_version": getattr(pg, "version", None),
            "results": results}


def markdown(run: dict) -> str:
    results = run["results"]
    bare = {(r.label["operation"], r.concurrency): r for r in results if r.label["target"] == "bare"}
    lines = [
        SECTION, "", *h.quick_banner(run["quick"]),
        f"- **Reproduce:** `{run['command']}` (about {run['wall_minutes']:.1f} min); run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        "- **Server:** `shardcat serve` with one in-process shard (no Ray; its front and, behind it, the shard app), cache on, embedded PostgreSQL.",
        f"- **Data:** one schema of {run['tables']:,} tables of {len(h.COLUMNS)} columns, created through the API. "
        f"getTable asks for a random one ({run['sizes']['getTable']:,} B answer); listTables for the first page "
        f"of `max_results={h.LIST_PAGE}` ({run['sizes']['listTables']:,} B).",
        f"- **Load:** {h.LOAD_TEXT['python']}, "
        f"{run['warmup_s']:g} s warm-up then {run['duration_s']:g} s measured per row; latency from sending a "
        "request to having read its whole body.",
        "- **Ceiling:** `benchmarks/bare_server.py`, a bare aiohttp server answering constant bodies of the same "
        "sizes on the same URLs (no auth, no database, no JSON encoding), measured the same way in the same run.",
        "- **Caveat:** load generator, server and PostgreSQL share the machine's cores; the client's own CPU "
        "is part of every number, the ceiling's too. CPU columns are cores busy in the window (1.00 = one "
        "core). ⚠ marks a row during which other processes used more than "
        f"{h.NOISY_CORES} cores.",
        "",
        "| operation | clients | req/s | p50 ms | p99 ms | errors | % of ceiling | ceiling req/s | ceiling p50 / p99 ms "
        "| cores: server / postgres / client / other |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        if r.label["target"] != "shardcat":
            continue
        b = bare.get((r.label["operation"], r.concurrency))
        lines.append(
            f"| {r.label['operation']} | {r.concurrency} | {h.fmt_rps(r)} | {h.fmt_ms(r.p50_ms)} | {h.fmt_ms(r.p99_ms)} "
            f"| {r.errors} | {f'{100 * r.rps / b.rps:.0f} %' if b and b.rps else '-'} | {h.fmt_rps(b)} "
            f"| {h.fmt_ms(b.p50_ms) if b else '-'} / {h.fmt_ms(b.p99_ms) if b else '-'} "
            f"| {r.server_cpu:.2f} / {r.postgres_cpu:.2f} / {r.client_cpu:.2f} / {r.other_cpu:.2f} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", ""]
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_api", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 s windows after 0.5 s warm-ups: a smoke run")
    p.add_argument("--out", type=Path, default=h.DOCS, help="markdown file whose section to rewrite")
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    p.add_argument("--duration", type=float, help="seconds measured per row (default 10, quick 2)")
    p.add_argument("--warmup", type=float, help="seconds of warm-up per row (default 3, quick 0.5)")
    p.add_argument("--tables", type=int, default=1000)
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 32])
    p.add_argument("--quiet-wait", type=float, help="before each row, wait at most this long for the machine to "
                                                    "go quiet (default 60, quick 0)")
    args = p.parse_args(argv)
    args.duration = args.duration or (2.0 if args.quick else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 3.0)
    args.quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0.0 if args.quick else 60.0)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    h.log(f"bench_api: {info['cores']} cores, {info['cpu_model']}, {info['ram_gib']} GiB RAM")
    outcome = h.run_with_postgres("shardcat-bench-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_api", *argv]),
                "machine": info, "tables": args.tables, "warmup_s": args.warmup, "duration_s": args.duration,
                "quick": args.quick, "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    h.publish("bench_api", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
