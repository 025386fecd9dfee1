"""CPU per metastore write, in-process, group commit on: where each write's serial Python goes (issue 33).

    python -m benchmarks.cpu_per_write                       # createTable and Delta commit, 32 writers
    python -m benchmarks.cpu_per_write --op createTable --profile 25   # and cProfile's top 25 functions

The shard's Python is serial (one event loop per shard), so its CPU per write bounds a shard's
writes per second whatever the machine's other load: 1e6 / (µs per write). This measures it the
way bench_writes' in-process rows run (one `Store`, a `Shard` with group commit on, writers in
a closed loop on their own names or their own Delta table) but for a fixed number of writes, and
runs on asyncio's loop as those rows do (`--loop uvloop`: as `shardcat serve` and its shard actors
run), and reports CPU seconds, not time: this process's (the shard, asyncpg, the writers' loop) and
PostgreSQL's (its whole process tree), per write. On a shared machine the figures still compare
(a busy neighbour slows the run, it does not add to this process's CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import uvloop

from shardcat.store.db import Store

from . import harness as h
from .bench_writes import POOL, Target

OPS = ("createTable", "Delta commit")


async def measure(target: Target, op: str, writers: int, writes: int, pg_pids: list[int],
                  profile: cProfile.Profile | None = None) -> dict:
    """Run `writes` writes from `writers` closed-loop writers; CPU per write of this process and PostgreSQL."""
    fn = target.op(op, "in-process")
    left = writes
    errors = 0

    async def writer(i: int) -> None:
        nonlocal left, errors
        while left > 0:
            left -= 1
            try:
                await fn(i)
            except Exception as e:          # counted: a run with errors measures something else
                errors += 1
                if errors <= 3:
                    h.log(f"    error: {e!r}")

    pg0, own0, wall0 = h.tree_cpu_total(pg_pids), time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    await asyncio.gather(*(writer(i) for i in range(writers)))
    if profile is not None:
        profile.disable()
    own, pg, wall = time.process_time() - own0, h.tree_cpu_total(pg_pids) - pg0, time.perf_counter() - wall0
    stats = target.shard.stats
    return {"writes": writes, "errors": errors, "own_us": own / writes * 1e6, "pg_us": pg / writes * 1e6,
            "wall_s": wall, "groups": stats["groups"], "grouped": stats["grouped_writes"]}


async def main_async(args) -> None:
    with tempfile.TemporaryDirectory(prefix="shardcat-cpu-") as tmp:
        pg = h.Postgres(Path(tmp) / "pg")
        try:
            store = await Store.open(await pg.database("cpu"), min_size=2, max_size=POOL)
            try:
                await store.migrate()
                pg_pids = [pg.pid] if pg.pid else []
                for op in args.op:
                    target = Target(store, True)
                    await target.setup(f"file://{tmp}")
                    if op == "Delta commit":
                        await target.managed_tables(args.writers)
                    await measure(target, op, args.writers, args.warmup, pg_pids)
                    runs = []
                    for _ in range(args.rounds):
                        groups0, grouped0 = target.shard.stats["groups"], target.shard.stats["grouped_writes"]
                        r = await measure(target, op, args.writers, args.writes, pg_pids)
                        r["per_group"] = (r["grouped"] - grouped0) / max(1, r["groups"] - groups0)
                        runs.append(r)
                        h.log(f"  {op} x{args.writers}: {r['own_us']:.0f} µs of this process and "
                              f"{r['pg_us']:.0f} µs of PostgreSQL per write ({r['writes']} writes, "
                              f"{r['per_group']:.1f} per group, {r['wall_s']:.1f} s, {r['errors']} errors)")
                    best = min(runs, key=lambda r: r["own_us"])
                    print(f"{op}, {args.writers} writers, group commit on: {best['own_us']:.0f} µs of Python "
                          f"(this process) and {best['pg_us']:.0f} µs of PostgreSQL CPU per write "
                          f"(lowest of {args.rounds} runs of {args.writes}); "
                          f"serial Python bound {1e6 / best['own_us']:,.0f} writes/s")
                    if args.profile:
                        profile = cProfile.Profile(time.process_time)   # CPU, not wall time: the process waits on PostgreSQL
                        await measure(target, op, args.writers, args.writes, pg_pids, profile)
                        out = io.StringIO()
                        pstats.Stats(profile, stream=out).sort_stats(args.sort).print_stats(args.profile)
                        print(out.getvalue())
            finally:
                await store.close()
        finally:
            pg.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", nargs="+", choices=OPS, default=list(OPS))
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--writes", type=int, default=3000, help="writes per measured run")
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's top N functions")
    parser.add_argument("--sort", default="tottime", help="cProfile sort key (tottime, cumulative)")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="asyncio",
                        help="the event loop: asyncio's, as bench_writes' in-process rows run, or uvloop, as "
                             "`shardcat serve` and its shard actors do")
    args = parser.parse_args()
    if args.loop == "uvloop":
        uvloop.run(main_async(args))
    else:
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
