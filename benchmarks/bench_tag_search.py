"""Search by tag in a metastore of 100,000 tables: the GIN index on tag_index (migration 0010) vs a scan.

    python -m benchmarks.bench_tag_search [--tables N] [--repeat R] [--no-docs]

One embedded PostgreSQL, one `shardcat serve` (its in-process shard). A schema of N tables (the
first through the API, the rest bulk-inserted in one metastore write), then tags set in the
database in one more write: `domain` = `sales` on every 10th table and `ops` on the others, `pii`
on every 1,000th table and on the first column of every 500th. `GET /shardcat/search` for a few
tag queries, each R times in a row from one client: first with the index of migration 0010, then,
in the same database, with it dropped. Writes its section of docs/benchmarks.md and the raw
numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import asyncpg

from . import harness as h
from .bench_search import timed_searches

HEADING = "## Search by tag: the GIN index on tags vs a scan"
CATALOG, SCHEMA = "big", "s"
INDEX = "assets_tags"
QUERIES = {"tag:pii": "tables tagged pii, on themselves or on a column (first page of 100)",
           "tag:pii number": "the same, holding a word too",
           "tag:domain=sales": "every 10th table (first page of 100)",
           "tag:domain=nowhere": "nothing"}


async def tag_tables(db: str, catalog: str, schema: str) -> float:
    """Tags on the bulk-inserted tables, in one metastore write (version bump, change-log row)."""
    t0 = time.perf_counter()
    conn = await asyncpg.connect(db, timeout=30)
    try:
        async with conn.transaction():
            ms = await conn.fetchval("SELECT metastore_id FROM assets WHERE full_name = $1", f"{catalog}.{schema}")
            version = await conn.fetchval("UPDATE metastores SET version = version + 1 WHERE id = $1 "
                                          "RETURNING version", ms)
            await conn.execute(
                """UPDATE assets SET written_at = $2, info = jsonb_set(info, '{tags}',
                       CASE WHEN substr(name, 2)::int % 1000 = 0 THEN '{"pii": null}'::jsonb ELSE '{}'::jsonb END
                       || jsonb_build_object('domain', CASE WHEN substr(name, 2)::int % 10 = 0 THEN 'sales'
                                                            ELSE 'ops' END))
                   WHERE metastore_id = $1 AND type = 'table'""", ms, version)
            await conn.execute(
                """UPDATE assets SET info = jsonb_set(info, '{columns,0,tags}', '{"pii": "email"}'::jsonb)
                   WHERE metastore_id = $1 AND type = 'table' AND substr(name, 2)::int % 500 = 0
                     AND jsonb_array_length(info->'columns') > 0""", ms)
            # search's tag_index, as catalog/features/tags.py keeps it: every key and key=value, own and columns'
            await conn.execute(
                """UPDATE assets a SET info = jsonb_set(info, '{tag_index}', (
                       SELECT coalesce(jsonb_agg(DISTINCT t), '[]'::jsonb) FROM (
                           SELECT o.key AS t FROM jsonb_each_text(a.info->'tags') o
                           UNION SELECT o.key || '=' || o.value FROM jsonb_each_text(a.info->'tags') o
                                 WHERE o.value IS NOT NULL
                           UNION SELECT k.key FROM jsonb_array_elements(a.info->'columns') c,
                                                   jsonb_each_text(coalesce(c->'tags', '{}'::jsonb)) k
                           UNION SELECT k.key || '=' || k.value FROM jsonb_array_elements(a.info->'columns') c,
                                                 jsonb_each_text(coalesce(c->'tags', '{}'::jsonb)) k
                                 WHERE k.value IS NOT NULL) terms))
                   WHERE metastore_id = $1 AND type = 'table'""", ms)
            ids = [r["id"] for r in await conn.fetch(
                "SELECT id FROM assets WHERE metastore_id = $1 AND type = 'table'", ms)]
            await conn.execute("INSERT INTO change_log VALUES ($1, $2, $3::uuid[], $4::uuid[], $5)",
                               ms, version, ids, [], int(time.time() * 1000))
        await conn.execute("ANALYZE assets")
    finally:
        await conn.close()
    return time.perf_counter() - t0


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_tag_search")
    seeder = h.start_shardcat(tmp / "seed", db, name="seed")
    await h.seed_tables(seeder.api, seeder.token, CATALOG, SCHEMA, 1)
    h.stop(seeder.child)
    _, insert_s = await h.bulk_insert_tables(db, CATALOG, SCHEMA, args.tables)
    tag_s = await tag_tables(db, CATALOG, SCHEMA)
    h.log(f"== {args.tables:,} tables inserted in {insert_s:.1f} s, tagged in {tag_s:.1f} s")
    server = h.start_shardcat(tmp / "serve", db)
    conn = await asyncpg.connect(db)
    rows = []
    try:
        for query, finds in QUERIES.items():
            h.log(f"  with the index: {query!r}")
            rows.append({"query": query, "finds": finds, "index": await timed_searches(server, query, args.repeat)})
        definition = await conn.fetchval("SELECT pg_get_indexdef($1::regclass)", INDEX)
        await conn.execute(f"DROP INDEX {INDEX}")
        for row in rows:
            h.log(f"  scan: {row['query']!r}")
            row["scan"] = await timed_searches(server, row["query"], args.repeat)
        await conn.execute(definition)
    finally:
        await conn.close()
        h.stop(server.child)
    return {"tables": args.tables, "repeat": args.repeat, "insert_s": insert_s, "tag_s": tag_s,
            "postgres_version": pg.version, "rows": rows}


def markdown(run: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}`; run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             f"- **Data:** one schema of {run['tables']:,} tables; `domain` on every table (`sales` on every 10th), "
             "`pii` on every 1,000th table and on the first column of every 500th.",
             f"- **Method:** `GET /shardcat/search?query=...&max_results=100`, {run['repeat']} times in a row per "
             "query after two warm-ups; *index*: as migrated (migration 0010, GIN on `info->'tag_index'`, every "
             "key and key=value of a table and its columns); *scan*: that index dropped.",
             "",
             "| query | what it finds | results | index p50 / max ms | scan p50 / max ms |",
             "| --- | --- | ---: | ---: | ---: |"]
    for row in run["rows"]:
        index, scan = row["index"], row["scan"]
        lines.append(f"| `{row['query']}` | {row['finds']} | {index['results']} | {index['p50_ms']:.1f} / "
                     f"{index['max_ms']:.1f} | {scan['p50_ms']:.1f} / {scan['max_ms']:.1f} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_tag_search",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_tag_search",
                                                        *sys.argv[1:]]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)

    result = h.run_with_postgres("bench_tag_search", body)
    if result is None:
        return 1
    h.publish("bench_tag_search", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
