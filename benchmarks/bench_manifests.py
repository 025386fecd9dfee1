"""Iceberg manifest rewrite: a table of many small appends (one manifest each) rewritten by the
`iceberg.rewrite_manifests` maintenance job as a Ray task, through the catalog.

    python -m benchmarks.bench_manifests [--appends 500] [--no-docs]

One embedded PostgreSQL and one `shardcat serve`. The table gets `appends` one-row appends through
pyiceberg (each a commit through the catalog, each adding a manifest). Measured: the job's wall time
(Ray already started), the manifests before and after, and pyiceberg's scan planning (`plan_files`,
the table loaded anew and pyiceberg's manifest cache emptied, best of 3) and full read before and
after; the rows are checked identical. Writes its section of docs/benchmarks.md and the raw numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.manifest import clear_manifest_cache
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from shardcat.delta.client import DeltaCatalogClient
from shardcat.maintenance import runner

from . import harness as h

HEADING = "## Iceberg manifest rewrite: a table of small appends"
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "item", StringType(), required=False))


def catalog(server):
    return load_catalog("bench", type="rest", uri=f"{server.api}/iceberg", warehouse="bench", token=server.token)


def appended(server, appends: int) -> float:
    """bench.s.events with `appends` one-row appends; the seconds they took."""
    cat = catalog(server)
    cat.create_namespace("s")
    table = cat.create_table("s.events", SCHEMA)
    started = time.perf_counter()
    for i in range(appends):
        table.append(pa.table({"id": pa.array([i], pa.int64()), "item": [f"item-{i}"]}))
    return time.perf_counter() - started


def measured(server) -> dict:
    """Manifests of the current snapshot, planning seconds (best of 3, cold cache), full read seconds, the ids."""
    plans = []
    for _ in range(3):
        clear_manifest_cache()
        table = catalog(server).load_table("s.events")
        started = time.perf_counter()
        tasks = list(table.scan().plan_files())
        plans.append(time.perf_counter() - started)
    clear_manifest_cache()
    table = catalog(server).load_table("s.events")
    started = time.perf_counter()
    ids = sorted(table.scan().to_arrow()["id"].to_pylist())
    read = time.perf_counter() - started
    return {"manifests": len(table.current_snapshot().manifests(table.io)), "files": len(tasks),
            "plan_s": min(plans), "read_s": read, "ids": ids}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    server = h.start_shardcat(tmp / "serve", await pg.database("bench_manifests"))
    try:
        async with DeltaCatalogClient(server.api, server.token) as client:
            await client._call("POST", "/catalogs", json_body={"name": "bench"})
        h.log(f"  {args.appends} appends")
        append_s = await asyncio.to_thread(appended, server, args.appends)
        before = await asyncio.to_thread(measured, server)
        spec = {"api_url": server.api, "token": server.token, "warehouse": "bench", "identifier": "s.events"}
        runner.ensure_ray()
        await runner.run("iceberg.expire_snapshots", {**spec, "older_than_ms": 0})     # a warm worker first
        started = time.perf_counter()
        out = await runner.run("iceberg.rewrite_manifests", spec, attempts=1)
        seconds = time.perf_counter() - started
        after = await asyncio.to_thread(measured, server)
        assert after["ids"] == before["ids"], "the rewrite changed the data"
        h.log(f"    {seconds:.2f} s, {before['manifests']} -> {after['manifests']} manifests; plan "
              f"{before['plan_s']:.3f} s -> {after['plan_s']:.3f} s")
    finally:
        h.stop(server.child)
    strip = lambda m: {k: v for k, v in m.items() if k != "ids"}     # noqa: E731
    return {"appends": args.appends, "append_s": append_s, "seconds": seconds, "job": out, "rows": len(after["ids"]),
            "before": strip(before), "after": strip(after), "postgres_version": pg.version}


def markdown(run: dict) -> str:
    b, a = run["before"], run["after"]
    return "\n".join([
        HEADING, "",
        f"- **Reproduce:** `{run['command']}` (the appends take nearly all its time); run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        f"- **Method:** an Iceberg table of {run['appends']:,} one-row appends through pyiceberg (each a commit "
        f"through the catalog adding one manifest; {run['append_s']:.0f} s for all), then the "
        "`iceberg.rewrite_manifests` maintenance job as a Ray task (Ray already started): it reads the manifests, "
        "writes their entries into manifests of the target size (8 MiB) and commits one `replace` snapshot "
        "through the catalog. Planning: pyiceberg's `plan_files` on the table loaded anew with its manifest "
        "cache emptied, best of 3; read: every row; the rows are checked identical.",
        "",
        "| manifests before | manifests after | rewrite s | plan before s | plan after s | read before s | read after s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {b['manifests']:,} | {a['manifests']} | {run['seconds']:.2f} | {b['plan_s']:.3f} | {a['plan_s']:.3f} | "
        f"{b['read_s']:.2f} | {a['read_s']:.2f} |",
        "",
        f"Planning reads one manifest instead of {b['manifests']:,} after the rewrite; the data files "
        f"({b['files']:,}) stay as they are (the compaction job packs them).",
        "", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_manifests", description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=500, help="one-row appends (manifests) before the rewrite")
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_manifests",
                                                        *(sys.argv[1:] if argv is None else argv)]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)
    result = h.run_with_postgres("bench_manifests", body)
    if result is None:
        return 1
    h.publish("bench_manifests", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
