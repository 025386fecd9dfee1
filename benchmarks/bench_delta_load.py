"""Loading a catalog-managed Delta table: one UC Delta API loadTable vs getTable + get-commits.

    python -m benchmarks.bench_delta_load [--quick] [--out docs/benchmarks.md]

One run, on this machine: an embedded PostgreSQL and one `shardcat serve` process (one in-process
shard). A catalog-managed table `bench.s.orders` is written by shardcat's Delta client with
`UNPUBLISHED` ratified, unpublished commits. Timed, sequentially, on one keep-alive aiohttp
connection, the two variants interleaved (one of each per round; median and p90 reported), each
answering what a reader needs to build the table's snapshot:

1. `GET /delta/v1/catalogs/bench/schemas/s/tables/orders`: metadata, latest version and the
   unpublished commits, from one database snapshot;
2. `GET /tables/bench.s.orders` (metadata: the table's id and location) then
   `GET /delta/preview/commits?table_id=&table_uri=&start_version=0` (latest version and commits).

Writes its section of docs/benchmarks.md and the raw numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import pyarrow as pa

from shardcat.delta.client import DeltaCatalogClient

from . import harness as h

SECTION = "## Loading a catalog-managed Delta table: the UC Delta API vs getTable + get-commits"
UNPUBLISHED = 10


def summary(times: list[float]) -> dict:
    times = sorted(times)
    return {"median_ms": statistics.median(times), "p90_ms": h.percentile(times, 90), "reps": len(times)}


async def seed(server: h.Server) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"}) as s:
        for path, body in (("/catalogs", {"name": "bench"}), ("/schemas", {"name": "s", "catalog_name": "bench"})):
            async with s.post(server.api + path, json=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"{path}: HTTP {r.status} {await r.text()}")
    async with DeltaCatalogClient(server.api, server.token, publish_after_commit=False) as client:
        table = await client.create_table("bench.s.orders", pa.schema([("id", pa.int64())]))
        for i in range(UNPUBLISHED):
            await client.append(table, pa.table({"id": [i]}))


async def runs(server: h.Server, reps: int) -> dict:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"},
                                     timeout=aiohttp.ClientTimeout(total=h.REQUEST_TIMEOUT),
                                     connector=aiohttp.TCPConnector(limit=1)) as s:
        async def get(path: str, **params) -> dict:
            async with s.get(server.api + path, params=params or None) as r:
                body = await r.read()
                if r.status != 200:
                    raise RuntimeError(f"{path}: HTTP {r.status} {body[:200]!r}")
                return orjson.loads(body)

        async def delta_api():
            out = await get("/delta/v1/catalogs/bench/schemas/s/tables/orders")
            assert len(out["commits"]) == UNPUBLISHED and out["latest-table-version"] == UNPUBLISHED

        async def table_then_commits():
            table = await get("/tables/bench.s.orders")
            out = await get("/delta/preview/commits", table_id=table["table_id"],
                            table_uri=table["storage_location"], start_version="0")
            assert len(out["commits"]) == UNPUBLISHED and out["latest_table_version"] == UNPUBLISHED

        variants = (("loadTable (/delta/v1)", delta_api), ("getTable + get-commits", table_then_commits))
        for _, warm in variants:
            await warm()
        await h.wait_for_quiet(60, "delta load runs")
        times = {label: [] for label, _ in variants}
        for _ in range(reps):
            for label, fn in variants:
                t = time.perf_counter()
                await fn()
                times[label].append((time.perf_counter() - t) * 1000)
    out = {label: summary(x) for label, x in times.items()}
    for label, x in out.items():
        h.log(f"  {label}: median {x['median_ms']:.2f} ms, p90 {x['p90_ms']:.2f} ms")
    return out


def markdown(run: dict) -> str:
    a, b = run["runs"]["loadTable (/delta/v1)"], run["runs"]["getTable + get-commits"]
    return "\n".join([
        SECTION, "", f"Run {run['date']}: `{run['command']}` ({run['wall_minutes']:.1f} min).",
        h.machine_line(run["machine"], run.get("pg_version")), "", *h.quick_banner(run["quick"]),
        f"What a reader asks before it can build a catalog-managed table's snapshot (a table with {UNPUBLISHED} "
        "ratified, unpublished commits), sequential requests on one keep-alive connection to one `shardcat serve` "
        f"(one in-process shard, caches warm), {a['reps']} rounds of both, interleaved:", "",
        "| how | median | p90 |", "| --- | --- | --- |",
        f"| `GET /delta/v1/.../tables/orders` (one call) | {a['median_ms']:.2f} ms | {a['p90_ms']:.2f} ms |",
        f"| `GET /tables/...` + `GET /delta/preview/commits` | {b['median_ms']:.2f} ms | {b['p90_ms']:.2f} ms |",
        "", f"One call takes {a['median_ms'] / b['median_ms']:.0%} of the two's median time. Both read the "
        "commits from PostgreSQL (one repeatable-read snapshot each); the metadata of getTable comes from the "
        "shard's cache. On a network each saved round trip adds to the difference.", "",
        f"Raw numbers: `benchmarks/out/{run['raw_file']}`."]) + "\n"


async def run_async(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_delta_load")
    server = await asyncio.to_thread(h.start_shardcat, tmp / "server", db)
    h.log(f"== a catalog-managed table with {UNPUBLISHED} unpublished commits")
    await seed(server)
    h.log("== load times")
    return {"runs": await runs(server, args.reps), "pg_version": getattr(pg, "version", None)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--out", type=Path, default=h.DOCS)
    p.add_argument("--no-docs", action="store_true")
    args = p.parse_args(argv)
    args.reps = args.reps or (50 if args.quick else 1000)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    outcome = h.run_with_postgres("shardcat-bench-delta-load-", lambda tmp, pg: run_async(args, tmp, pg))
    if outcome is None:
        return 130
    run = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_delta_load", *argv]),
           "machine": info, "quick": args.quick, "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    h.publish("bench_delta_load", run, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
