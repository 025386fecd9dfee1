"""Event loop benchmark: instructions per request of `shardcat serve` on asyncio's loop vs uvloop.

    python -m benchmarks.bench_loop [--quick] [--out docs/benchmarks.md]

Throughput on a shared two-core machine swings by 2-3x from one minute to the next, too much
to see a 10-20% change. So this counts instructions instead (valgrind's callgrind), which a
busy machine does not change: one embedded PostgreSQL and one schema of 200 tables; then
`shardcat serve` (one in-process shard) under callgrind, once with `--event-loop asyncio` and
once with `--event-loop uvloop`; after a warm-up, the counters are zeroed, N requests are sent
from 8 concurrent clients, and the counters dumped: instructions per getTable and per batch
resolve of 50 names, in the server process (user space: the kernel's share of a syscall is
not counted). Starting Python under callgrind takes minutes; the run says what it waits for.

Writes its section of docs/benchmarks.md and the raw numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from . import harness as h

SECTION = "## Event loop: asyncio's own vs uvloop, instructions per request"
CATALOG, SCHEMA, TABLES, CLIENTS = "bench", "s", 200, 8
LOOPS = ("asyncio", "uvloop")
START_UNDER_CALLGRIND = 1200       # seconds: Python, Ray's and pyarrow's imports run 50x slower


async def send_all(reqs: list[h.Request], token: str, *, warming: bool = False) -> None:
    """Every request once, CLIENTS at a time; each must answer 200. While warming, a 503 is sent
    again: a server 50x slower than usual may give up on its first PostgreSQL connections."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    todo = iter(reqs)
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=600)) as session:
        async def client() -> None:
            for r in todo:
                attempts = 10 if warming else 1
                for attempt in range(attempts):
                    async with session.request(r.method, r.url, data=r.body) as resp:
                        await resp.read()
                        if resp.status == 200:
                            break
                        if resp.status != 503 or attempt == attempts - 1:
                            raise RuntimeError(f"{r.method} {r.url}: HTTP {resp.status}")
        await asyncio.gather(*(client() for _ in range(CLIENTS)))


def total_instructions(dump: str) -> int:
    for line in open(dump):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no instruction total in {dump}")


async def measure_loop(loop: str, tmp: Path, db: str, data_dir: Path, counts: dict[str, int]) -> dict[str, float]:
    out = tmp / f"callgrind-{loop}"
    out.mkdir()
    wrapper = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p", "--dump-instr=no")
    h.log(f"== {loop}: starting shardcat serve under callgrind (takes minutes)")
    started = time.perf_counter()
    server = h.start_shardcat(data_dir, db, "--event-loop", loop, name=f"shardcat-{loop}-callgrind", wrapper=wrapper,
                              start_timeout=START_UNDER_CALLGRIND)
    h.log(f"  started in {time.perf_counter() - started:.0f} s")
    child, token, base = server.child, server.token, server.base
    loads = {"getTable": h.get_requests(base, CATALOG, SCHEMA, TABLES),
             "batch": h.batch_requests(base, CATALOG, SCHEMA, TABLES)}
    per_request = {}
    try:
        for op, reqs in loads.items():
            sequence = [reqs[i % len(reqs)] for i in range(counts[op])]
            await send_all(sequence[: max(20, counts[op] // 5)], token, warming=True)   # the cache, the code, the pool
            subprocess.run(["callgrind_control", "-z", str(child.pid)], check=True, capture_output=True)
            t = time.perf_counter()
            await send_all(sequence, token)
            subprocess.run(["callgrind_control", "-d", str(child.pid)], check=True, capture_output=True)
            dumps = sorted(glob.glob(f"{out}/cg.{child.pid}.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
            per_request[op] = total_instructions(dumps[-1]) / counts[op]
            h.log(f"  {op}: {per_request[op]:,.0f} instructions per request "
                  f"({counts[op]} requests, {time.perf_counter() - t:.0f} s under callgrind)")
    finally:
        h.stop(child)
    return per_request


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_loop")
    h.log(f"== seeding {TABLES} tables")
    seeder = h.start_shardcat(tmp / "data", db, name="seeder")
    await h.seed_tables(seeder.api, seeder.token, CATALOG, SCHEMA, TABLES)
    h.stop(seeder.child)
    counts = {"getTable": 200 if args.quick else 1000, "batch": 40 if args.quick else 200}
    results = {loop: await measure_loop(loop, tmp, db, tmp / "data", counts) for loop in LOOPS}
    return {"counts": counts, "results": results, "postgres_version": getattr(pg, "version", None)}


def markdown(run: dict) -> str:
    asyncio_, uvloop = run["results"]["asyncio"], run["results"]["uvloop"]
    lines = [
        SECTION, "", *h.quick_banner(run["quick"]),
        f"- **Reproduce:** `{run['command']}` (about {run['wall_minutes']:.0f} min; needs valgrind); "
        f"run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        f"- **What:** `shardcat serve` (one in-process shard, cache on) under callgrind, once per event loop; "
        f"{TABLES} tables of {len(h.COLUMNS)} columns; after a warm-up, {run['counts']['getTable']:,} getTable and "
        f"{run['counts']['batch']:,} batch resolves of {h.BATCH} names from {CLIENTS} concurrent clients. "
        "Instructions executed by the server process per request, in user space (a syscall's kernel work is "
        "not counted), repeatable whatever else the machine does.",
        "",
        "| request | asyncio's loop | uvloop | uvloop / asyncio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for op in ("getTable", "batch"):
        lines.append(f"| {op} | {asyncio_[op]:,.0f} | {uvloop[op]:,.0f} | {uvloop[op] / asyncio_[op]:.2f} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_loop", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a fifth of the requests: a smoke run")
    p.add_argument("--out", type=Path, default=h.DOCS, help="markdown file whose section to rewrite")
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    args = p.parse_args(argv)
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        h.log("bench_loop needs valgrind (Debian: apt-get install valgrind)")
        return 2
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    outcome = h.run_with_postgres("shardcat-bench-loop-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_loop", *argv]),
                "machine": info, "quick": args.quick, "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    h.publish("bench_loop", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
