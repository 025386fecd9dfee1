"""Iceberg scan planning on the server vs on the client, and loadTable with If-None-Match (304) vs a full load.

    python -m benchmarks.bench_iceberg_plan [--quick] [--files N] [--repeats N] [--out docs/benchmarks.md]

One run on one machine: an embedded PostgreSQL and `shardcat serve` (one in-process shard) as its own
process; in this process pyiceberg 0.12 as its REST client. One table partitioned by `day` (identity, 100
days) of N data files (default 10,000; tiny Parquet files written here, added with pyiceberg's add_files in
commits of 1,000 files: ten manifests), each file holding a distinct range of `id`. A selective filter
(`day = 42 AND id` within one file's range) is planned, each way, `repeats` times:

- on the server: pyiceberg with `scan-planning-mode=server` calls planTableScan; the catalog reads the
  manifests with pyiceberg's planner and answers the one file's task;
- on the client: pyiceberg reads the manifest list and the manifests itself (its own planner), with the
  table loaded once beforehand (a client planning on its own needs the table's metadata too; the load is
  timed in the loadTable rows).

loadTable: the same table's metadata (10 snapshots) loaded through the REST API with its ETag in
If-None-Match (the catalog answers 304 after authorizing, without reading the metadata file) and without.
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

from . import harness as h

SECTION = "## Iceberg scan planning: on the server vs on the client; loadTable 304 vs full"
DAYS = 100
BATCH = 1000


def _make_table(server: h.Server, tmp: Path, files: int):
    """The table and its files: `files` Parquet files, file i of day i % DAYS holding ids i*10 .. i*10+9."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField

    catalog = load_catalog("bench", type="rest", uri=f"{server.api}/iceberg", warehouse="bench", token=server.token)
    catalog.create_namespace("s")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "day", LongType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="day"))
    table = catalog.create_table("s.events", schema, partition_spec=spec)
    folder = Path(table.location().removeprefix("file://")) / "data"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        path = folder / f"day_{i % DAYS}" / f"part-{i:05d}.parquet"
        path.parent.mkdir(exist_ok=True)
        ids = list(range(i * 10, i * 10 + 10))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "day": pa.array([i % DAYS] * 10, pa.int64())}),
                       path)
        paths.append(path.as_uri())
    for start in range(0, files, BATCH):
        table = catalog.load_table("s.events")
        table.add_files(paths[start:start + BATCH])
    return catalog


def _filter(files: int) -> tuple[str, int]:
    """The selective filter (one file: the first of day 42) and that file's index."""
    target = 42
    return f"day = 42 AND id >= {target * 10} AND id < {target * 10 + 10}", target


def _time(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _planning(server: h.Server, files: int, repeats: int) -> dict:
    from pyiceberg.catalog import load_catalog
    row_filter, _ = _filter(files)
    on_server = load_catalog("srv", type="rest", uri=f"{server.api}/iceberg", warehouse="bench", token=server.token,
                             **{"scan-planning-mode": "server"})
    on_client = load_catalog("cli", type="rest", uri=f"{server.api}/iceberg", warehouse="bench", token=server.token)
    server_table, client_table = on_server.load_table("s.events"), on_client.load_table("s.events")
    found = {"server": len(list(server_table.scan(row_filter=row_filter).plan_files())),
             "client": len(list(client_table.scan(row_filter=row_filter).plan_files()))}
    if found != {"server": 1, "client": 1}:
        raise RuntimeError(f"the filter should select one file each way: {found}")
    total = len(list(client_table.scan().plan_files()))
    if total != files:
        raise RuntimeError(f"the table holds {total} files, not {files}")
    return {"plan on the server (planTableScan)": _time(lambda: list(server_table.scan(row_filter=row_filter)
                                                                     .plan_files()), repeats),
            "plan on the client (manifests read by pyiceberg)": _time(lambda: list(client_table.scan(
                row_filter=row_filter).plan_files()), repeats)}


async def _loads(server: h.Server, repeats: int) -> dict:
    import aiohttp
    url = f"{server.api}/iceberg/v1/catalogs/bench/namespaces/s/tables/events"
    auth = {"Authorization": f"Bearer {server.token}"}
    out: dict[str, list[float]] = {"loadTable, full": [], "loadTable, If-None-Match (304)": []}
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers=auth) as r:
            tag, size = r.headers["ETag"], len(await r.read())
        for _ in range(repeats):
            for kind, headers in (("loadTable, full", auth), ("loadTable, If-None-Match (304)",
                                                              {**auth, "If-None-Match": tag})):
                started = time.perf_counter()
                async with session.get(url, headers=headers) as r:
                    await r.read()
                    expected = 200 if "full" in kind else 304
                    if r.status != expected:
                        raise RuntimeError(f"{kind} answered {r.status}")
                out[kind].append((time.perf_counter() - started) * 1000)
    return {"timings": out, "full_bytes": size}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_iceberg_plan")
    h.log("== shardcat serve (one in-process shard)")
    server = h.start_shardcat(tmp / "shardcat", db)
    status, _ = await h.call("POST", f"{server.api}/catalogs", server.token, json={"name": "bench"})
    if status != 200:
        raise RuntimeError(f"creating the catalog answered {status}")
    h.log(f"== a table of {args.files} files")
    made = time.perf_counter()
    await asyncio.to_thread(_make_table, server, tmp, args.files)
    h.log(f"   made in {time.perf_counter() - made:.0f} s")
    h.log(f"== planning, {args.repeats} times each way")
    timings = await asyncio.to_thread(_planning, server, args.files, args.repeats)
    h.log(f"== loadTable, {args.loads} times each way")
    loads = await _loads(server, args.loads)
    timings.update(loads["timings"])
    if server.child.proc.poll() is not None:
        raise RuntimeError(f"shardcat exited during the run (code {server.child.proc.returncode})")
    rows = []
    for kind, ms in timings.items():
        ordered = sorted(ms)
        rows.append({"operation": kind, "n": len(ms), "p50_ms": statistics.median(ordered),
                     "p99_ms": h.percentile(ordered, 99), "mean_ms": statistics.fmean(ordered)})
    import pyiceberg
    return {"rows": rows, "pyiceberg": pyiceberg.__version__, "full_bytes": loads["full_bytes"],
            "postgres_version": getattr(pg, "version", None)}


def markdown(run: dict) -> str:
    lines = [
        SECTION, "", *h.quick_banner(run["quick"]),
        f"- **Reproduce:** `{run['command']}` (about {run['wall_minutes']:.1f} min); run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        f"- **Table:** {run['files']:,} Parquet files of 10 rows, identity-partitioned by `day` ({DAYS} days), "
        f"added in commits of {BATCH:,} files (pyiceberg's add_files); local file storage. Filter: "
        "`day = 42 AND id` within one file's range (one file of the table).",
        f"- **Clients:** pyiceberg {run['pyiceberg']} in one process, sequential. Planning: `scan(...).plan_files()` "
        "on a table loaded once, with `scan-planning-mode=server` (one planTableScan; the catalog reads the "
        "manifests with pyiceberg's planner) and without (pyiceberg reads the manifest list and the manifests). "
        f"loadTable: aiohttp GETs of the table (full answer {run['full_bytes']:,} B), with its ETag in "
        "If-None-Match (304, no body; authorized, the metadata file not read) and without.",
        "- **Caveat:** client, server and PostgreSQL share the machine's cores; the server plans with the same "
        "library the client does, so the difference is where the manifests are read and what crosses the wire "
        "(local files here: no object-store latency, which planning on the server saves the client from).",
        "",
        "| operation | runs | mean ms | p50 ms | p99 ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in run["rows"]:
        lines.append(f"| {r['operation']} | {r['n']} | {r['mean_ms']:.1f} | {r['p50_ms']:.1f} | {h.fmt_ms(r['p99_ms'])} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", ""]
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_iceberg_plan", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1,000 files, 5 plans and 50 loads each way: a smoke run")
    p.add_argument("--files", type=int, help="data files in the table (default 10,000)")
    p.add_argument("--repeats", type=int, help="plans each way (default 20)")
    p.add_argument("--loads", type=int, help="loadTable calls each way (default 300)")
    p.add_argument("--out", type=Path, default=h.DOCS, help="markdown file whose section to rewrite")
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    args = p.parse_args(argv)
    args.files = args.files or (1000 if args.quick else 10_000)
    args.repeats = args.repeats or (5 if args.quick else 20)
    args.loads = args.loads or (50 if args.quick else 300)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    h.log(f"bench_iceberg_plan: {info['cores']} cores, {info['cpu_model']}, {info['ram_gib']} GiB RAM")
    outcome = h.run_with_postgres("shardcat-bench-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_iceberg_plan", *argv]),
                "machine": info, "files": args.files, "quick": args.quick,
                "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    h.publish("bench_iceberg_plan", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
