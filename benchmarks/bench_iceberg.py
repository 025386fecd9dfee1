"""Iceberg commits: through shardcat's Iceberg REST catalog vs pyiceberg's own SqlCatalog (sqlite), one run.

    python -m benchmarks.bench_iceberg [--quick] [--commits N] [--out docs/benchmarks.md]

One run on one machine: an embedded PostgreSQL and `shardcat serve` (one in-process shard) as
its own process, and in this process pyiceberg 0.12 twice: as a REST client of shardcat
(`load_catalog(type="rest", ...)`), and as a SqlCatalog on a local sqlite file, both with local
file storage. For each, one table and N sequential commits of each kind, timed from the call to
its return: a property change (a metadata-only commit: through shardcat the catalog reads the
current metadata, checks the requirements, writes the new metadata file and makes one metastore
write; with SqlCatalog pyiceberg does the same in-process and updates a sqlite row) and an append
of 10 rows (the client also writes a data file, a manifest and a manifest list). Writes its
section of docs/benchmarks.md and the raw numbers under benchmarks/out/.
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

SECTION = "## Iceberg commits: shardcat's Iceberg REST vs pyiceberg's SqlCatalog (sqlite)"


def _schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType
    return Schema(NestedField(1, "id", LongType(), required=False),
                  NestedField(2, "name", StringType(), required=False))


def _rows(i: int):
    import pyarrow as pa
    ids = list(range(i * 10, i * 10 + 10))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{x}" for x in ids], pa.string())})


def _time_commits(table, commits: int) -> dict[str, list[float]]:
    """Milliseconds of each property commit and each 10-row append on `table`, sequentially."""
    out: dict[str, list[float]] = {"property commit": [], "append 10 rows": []}
    for i in range(commits):
        started = time.perf_counter()
        with table.transaction() as tx:
            tx.set_properties(counter=str(i))
        out["property commit"].append((time.perf_counter() - started) * 1000)
    for i in range(commits):
        started = time.perf_counter()
        table.append(_rows(i))
        out["append 10 rows"].append((time.perf_counter() - started) * 1000)
    return out


def _shardcat(server: h.Server, commits: int) -> dict[str, list[float]]:
    from pyiceberg.catalog import load_catalog
    catalog = load_catalog("shardcat", type="rest", uri=f"{server.api}/iceberg", warehouse="bench",
                           token=server.token)
    catalog.create_namespace("s")
    return _time_commits(catalog.create_table("s.t", _schema()), commits)


def _sql(tmp: Path, commits: int) -> dict[str, list[float]]:
    from pyiceberg.catalog.sql import SqlCatalog
    (tmp / "warehouse").mkdir()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{tmp / 'catalog.db'}", warehouse=(tmp / "warehouse").as_uri())
    catalog.create_namespace("s")
    return _time_commits(catalog.create_table("s.t", _schema()), commits)


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_iceberg")
    h.log("== shardcat serve (one in-process shard)")
    server = h.start_shardcat(tmp / "shardcat", db)
    status, _ = await h.call("POST", f"{server.api}/catalogs", server.token, json={"name": "bench"})
    if status != 200:
        raise RuntimeError(f"creating the catalog answered {status}")
    h.log(f"== {args.commits} commits of each kind through shardcat, then through SqlCatalog")
    timings = {"shardcat REST": await asyncio.to_thread(_shardcat, server, args.commits),
               "SqlCatalog (sqlite)": await asyncio.to_thread(_sql, tmp, args.commits)}
    if server.child.proc.poll() is not None:
        raise RuntimeError(f"shardcat exited during the run (code {server.child.proc.returncode})")
    rows = []
    for target, kinds in timings.items():
        for kind, ms in kinds.items():
            ordered = sorted(ms)
            rows.append({"target": target, "operation": kind, "commits": len(ms),
                         "p50_ms": statistics.median(ordered), "p99_ms": h.percentile(ordered, 99),
                         "mean_ms": statistics.fmean(ordered), "per_s": 1000 / statistics.fmean(ordered)})
    import pyiceberg
    return {"rows": rows, "pyiceberg": pyiceberg.__version__, "postgres_version": getattr(pg, "version", None)}


def markdown(run: dict) -> str:
    lines = [
        SECTION, "", *h.quick_banner(run["quick"]),
        f"- **Reproduce:** `{run['command']}` (about {run['wall_minutes']:.1f} min); run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        f"- **Clients:** pyiceberg {run['pyiceberg']}, one table each, {run['commits']} sequential commits of each "
        "kind, one client; local file storage for both. shardcat: `shardcat serve` (one in-process shard) as its "
        "own process, cache on, embedded PostgreSQL; the catalog writes each new metadata file itself and moves "
        "the table's pointer in one metastore write. SqlCatalog: pyiceberg writes the metadata file and updates "
        "a row of a local sqlite file, in the client's process (no server, no network, no authorization).",
        "- **Operations:** a property change (metadata only) and an append of 10 rows (the client also writes a "
        "data file, a manifest and a manifest list); latency from the call to its return.",
        "- **Caveat:** the machine is shared with other work while this runs; client, server and PostgreSQL "
        "share its cores.",
        "",
        "| catalog | operation | commits | commits/s | mean ms | p50 ms | p99 ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in run["rows"]:
        lines.append(f"| {r['target']} | {r['operation']} | {r['commits']} | {r['per_s']:.0f} | {r['mean_ms']:.1f} "
                     f"| {r['p50_ms']:.1f} | {h.fmt_ms(r['p99_ms'])} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", ""]
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_iceberg", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="50 commits of each kind: a smoke run")
    p.add_argument("--commits", type=int, help="sequential commits of each kind per catalog (default 300)")
    p.add_argument("--out", type=Path, default=h.DOCS, help="markdown file whose section to rewrite")
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    args = p.parse_args(argv)
    args.commits = args.commits or (50 if args.quick else 300)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    h.log(f"bench_iceberg: {info['cores']} cores, {info['cpu_model']}, {info['ram_gib']} GiB RAM")
    outcome = h.run_with_postgres("shardcat-bench-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_iceberg", *argv]),
                "machine": info, "commits": args.commits, "quick": args.quick,
                "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    h.publish("bench_iceberg", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
