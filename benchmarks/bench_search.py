"""Search in a metastore of 100,000 tables: the trigram index (migration 0009) vs a sequential scan.

    python -m benchmarks.bench_search [--tables N] [--repeat R] [--no-docs]

One embedded PostgreSQL, one `shardcat serve` (its in-process shard). A schema of N tables (the
first through the API, the rest bulk-inserted in one metastore write), each commented "benchmark
table number {i}". `GET /shardcat/search` for a few queries, each R times in a row from one
client: first with the index migration 0009 built, then, in the same database, with it dropped
(a sequential scan, as every search was before it). The index is built again
at the end and its build time reported. Writes its section of docs/benchmarks.md and the raw
numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

import asyncpg

from . import harness as h

HEADING = "## Search: the trigram index vs a sequential scan"
CATALOG, SCHEMA = "big", "s"
INDEX = "assets_search"


def queries(tables: int) -> dict[str, str]:
    """query -> what it finds, for a schema of `tables` tables."""
    rare = tables * 5 // 9
    return {f"number {rare}": "one table (a word of its comment)",
            h.table_name(tables // 10)[:-1]: "10 tables (a name prefix)",
            "benchmark": "every table (first page of 100)"}


async def timed_searches(server: h.Server, query: str, repeat: int) -> dict:
    url = f"{server.api}/shardcat/search"
    times, found = [], None
    for _ in range(repeat + 2):          # the first two warm PostgreSQL's buffers and plans
        t0 = time.perf_counter()
        status, body = await h.call("GET", url, server.token, params={"query": query, "max_results": "100"})
        times.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise RuntimeError(f"search {query!r}: HTTP {status}: {body[:300]!r}")
        found = body.count(b'"securable_type"')
    times = sorted(times[2:])
    return {"p50_ms": statistics.median(times), "max_ms": times[-1], "results": found}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_search")
    seeder = h.start_shardcat(tmp / "seed", db, name="seed")
    await h.seed_tables(seeder.api, seeder.token, CATALOG, SCHEMA, 1)
    h.stop(seeder.child)
    _, insert_s = await h.bulk_insert_tables(db, CATALOG, SCHEMA, args.tables)
    h.log(f"== {args.tables:,} tables inserted in {insert_s:.1f} s")
    server = h.start_shardcat(tmp / "serve", db)
    conn = await asyncpg.connect(db)
    rows = []
    try:
        for query, finds in queries(args.tables).items():
            h.log(f"  with the index: {query!r}")
            rows.append({"query": query, "finds": finds, "index": await timed_searches(server, query, args.repeat)})
        definition = await conn.fetchval("SELECT pg_get_indexdef($1::regclass)", INDEX)     # the migration's
        await conn.execute(f"DROP INDEX {INDEX}")
        for row in rows:
            h.log(f"  sequential scan: {row['query']!r}")
            row["scan"] = await timed_searches(server, row["query"], args.repeat)
        t0 = time.perf_counter()
        await conn.execute(definition)
        build_s = time.perf_counter() - t0
        index_bytes = await conn.fetchval("SELECT pg_relation_size($1::regclass)", INDEX)
    finally:
        await conn.close()
        h.stop(server.child)
    return {"tables": args.tables, "repeat": args.repeat, "insert_s": insert_s, "build_s": build_s,
            "index_bytes": index_bytes, "postgres_version": pg.version, "rows": rows}


def markdown(run: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}` (about a minute); run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             f"- **Data:** one schema of {run['tables']:,} tables, each commented \"benchmark table number "
             "{i}\" (bulk-inserted in one metastore write), on an in-process shard (`shardcat serve`).",
             f"- **Method:** `GET /shardcat/search?query=...&max_results=100`, {run['repeat']} times in a row per "
             "query from one client after two warm-ups; *index*: as migrated (migration 0009, a GIN trigram index "
             "on full name and comment); *scan*: the same database with that index dropped: a sequential scan, as "
             f"every search was before it. Rebuilding the index took {run['build_s']:.1f} s; it takes "
             f"{run['index_bytes'] / 2**20:.1f} MiB.",
             "",
             "| query | what it finds | results | index p50 / max ms | scan p50 / max ms | scan / index (p50) |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for row in run["rows"]:
        index, scan = row["index"], row["scan"]
        lines.append(f"| `{row['query']}` | {row['finds']} | {index['results']} | {index['p50_ms']:.1f} / "
                     f"{index['max_ms']:.1f} | {scan['p50_ms']:.1f} / {scan['max_ms']:.1f} | "
                     f"{scan['p50_ms'] / index['p50_ms']:.1f}x |")
    lines += ["", "A word every asset holds cannot be narrowed by any index: that search reads and ranks the whole "
              "metastore either way, and pages of it cost the same.", "",
              f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_search", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_search", *sys.argv[1:]]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)

    result = h.run_with_postgres("bench_search", body)
    if result is None:
        return 1
    h.publish("bench_search", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
