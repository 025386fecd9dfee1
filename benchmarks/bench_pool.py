"""What a pooled database read costs with asyncpg's reset on release vs the store's (none).

    python -m benchmarks.bench_pool            # ~1 min, writes its section of docs/benchmarks.md
    python -m benchmarks.bench_pool --no-docs  # print only

One embedded PostgreSQL, two `Store`s on the same database: `Store.open(reset_sessions=True)`,
whose pool sends asyncpg's default `RESET ALL; CLOSE ALL; UNLISTEN *; pg_advisory_unlock_all()`
each time a connection goes back, and `Store.open()`, whose pool sends nothing (the store keeps
no session state; store/db.py). The read is `Store.assignment`, one indexed lookup, the kind a
cache-off getTable makes three of. Eight tasks read in a closed loop; windows of the two
alternate, and each row is the median window.
"""

from __future__ import annotations

import asyncio
import shlex
import statistics
import sys
import time
import uuid

from shardcat.store.db import Store

from . import harness as h

HEADING = "## Pooled reads: asyncpg's reset on release vs none"
CONCURRENCY = 8
VARIANTS = {"asyncpg's reset on release": True, "no reset (the store's pool)": False}


async def window(store: Store, workspace_id: int, seconds: float, pg_pid: int | None) -> dict:
    reads = 0
    deadline = time.monotonic() + seconds

    async def reader() -> None:
        nonlocal reads
        while time.monotonic() < deadline:
            await store.assignment(workspace_id)
            reads += 1

    own, pg = h.own_cpu(), h.tree_cpu([pg_pid] if pg_pid else [])
    started = time.perf_counter()
    await asyncio.gather(*(reader() for _ in range(CONCURRENCY)))
    wall = time.perf_counter() - started
    return {"reads_per_s": reads / wall,
            "client_us": (h.own_cpu() - own) / reads * 1e6,
            "postgres_us": h.cpu_used(pg, h.tree_cpu([pg_pid] if pg_pid else [])) / reads * 1e6}


async def run(args, tmp, pg: h.Postgres) -> dict:
    url = await pg.database("pool")
    stores = {name: await Store.open(url, reset_sessions=reset) for name, reset in VARIANTS.items()}
    try:
        first = next(iter(stores.values()))
        await first.migrate()
        metastore_id = str(uuid.uuid4())
        await first.create_metastore(metastore_id, "bench", {})
        await first.assign(1, metastore_id, None)
        windows: dict[str, list[dict]] = {name: [] for name in stores}
        for round_ in range(args.rounds):
            for name, store in stores.items():
                await window(store, 1, args.warmup, pg.pid)
                windows[name].append(await window(store, 1, args.seconds, pg.pid))
            h.log(f"  round {round_ + 1}/{args.rounds}: " + ", ".join(
                f"{name} {w[-1]['reads_per_s']:,.0f}/s" for name, w in windows.items()))
    finally:
        for store in stores.values():
            await store.close()
    rows = {name: {key: statistics.median(w[key] for w in ws) for key in ws[0]} for name, ws in windows.items()}
    return {"rows": rows, "postgres": getattr(pg, "version", None)}


def report(run_info: dict) -> str:
    m = run_info["machine"]
    lines = [HEADING, "",
             f"- **Reproduce:** `{run_info['command']}` (about 1 min); run on {run_info['date']}.",
             f"- **Machine:** {h.machine_line(m, run_info['postgres'])}.",
             f"- **What:** `Store.assignment` (one indexed read) from {CONCURRENCY} tasks in a closed loop, on one "
             "embedded PostgreSQL; two stores on the same database, whose pools differ only in what they send when "
             f"a connection goes back. {run_info['rounds']} alternating windows of {run_info['seconds']:g} s each; "
             "the median window. CPU per read: this process (asyncpg) and PostgreSQL.",
             "",
             "| pool | reads/s | client CPU µs per read | PostgreSQL CPU µs per read |",
             "| --- | ---: | ---: | ---: |"]
    for name, r in run_info["rows"].items():
        lines.append(f"| {name} | {r['reads_per_s']:,.0f} | {r['client_us']:.0f} | {r['postgres_us']:.0f} |")
    before, after = (run_info["rows"][name]["reads_per_s"] for name in VARIANTS)
    lines += ["", f"Without the reset, a pooled read runs {after / before:.2f}× as fast: the reset is a second "
              "round trip, and work for PostgreSQL, on every use of a connection."]
    return "\n".join(lines) + "\n"


def main() -> None:
    args = h.alternating_windows_parser(__doc__.splitlines()[0], rounds=5).parse_args()
    info, date = h.machine(), h.now_utc()
    outcome = h.run_with_postgres("shardcat-bench-pool-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        raise SystemExit(130)
    command = shlex.join(["python", "-m", "benchmarks.bench_pool", *sys.argv[1:]])
    run_info = {"date": date, "command": command, "machine": info, "seconds": args.seconds, "rounds": args.rounds,
                **outcome}
    h.publish("bench_pool", run_info, report, h.DOCS, HEADING, to_docs=not args.no_docs)


if __name__ == "__main__":
    main()
