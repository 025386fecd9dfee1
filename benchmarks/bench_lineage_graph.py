"""The lineage graph of depth 5 over 10,000 edges: how long `GET /shardcat/lineage` takes to answer it.

    python -m benchmarks.bench_lineage_graph [--layers 11] [--width 500] [--fan-in 2] [--repeat 200] [--no-docs]

One embedded PostgreSQL, one `shardcat serve` (its in-process shard), one metastore. A layered
graph of tables: `layers` layers of `width` tables each (bulk-inserted, as the other benchmarks'
tables); every table past the first layer is written from `fan-in` distinct tables of the layer
before, picked at random (seeded). The edges go in through the catalog's own intake, one
`POST /shardcat/lineage` report per written table (layers x width x fan-in edges in all: 10 x 500
x 2 = 10,000 by default). Then `GET /shardcat/lineage?depth=5` from tables of the middle layer,
upstream, downstream and both, `repeat` times each from one client (keep-alive, one at a time),
cycling over 20 start tables: p50/p99 and the answer's size. Writes its section of
docs/benchmarks.md and the raw numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import statistics
import sys
import time
from pathlib import Path

import aiohttp
import asyncpg

from . import harness as h

HEADING = "## Lineage graph: depth 5 over 10,000 edges"
CATALOG, SCHEMA = "lin", "s"
DEPTH = 5
STARTS = 20             # start tables of the middle layer the repeated queries cycle over
REPORTERS = 8           # concurrent reports while building the graph
DIRECTIONS = ("upstream", "downstream", "both")


def graph(layers: int, width: int, fan_in: int, seed: int = 31) -> list[tuple[int, list[int]]]:
    """(target table number, its source table numbers) of every written table: table number
    `layer * width + j`; each source list is `fan_in` distinct tables of the layer before."""
    rng = random.Random(seed)
    return [(layer * width + j, sorted((layer - 1) * width + s for s in rng.sample(range(width), fan_in)))
            for layer in range(1, layers) for j in range(width)]


def name(i: int) -> str:
    return f"{CATALOG}.{SCHEMA}.{h.table_name(i)}"


async def report_edges(server: h.Server, reports: list[tuple[int, list[int]]]) -> float:
    """Every report through `POST /shardcat/lineage`, REPORTERS at a time; the seconds it took."""
    t0 = time.perf_counter()
    todo = iter(reports)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"},
                                     timeout=aiohttp.ClientTimeout(total=h.REQUEST_TIMEOUT * 3)) as session:
        async def reporter() -> None:
            for target, sources in todo:
                body = {"target": name(target), "sources": [{"name": name(s)} for s in sources], "job": "bench"}
                async with session.post(f"{server.api}/shardcat/lineage", json=body) as r:
                    if r.status != 200:
                        raise RuntimeError(f"lineage report of {name(target)}: HTTP {r.status}: "
                                           f"{(await r.text())[:300]}")

        await asyncio.wait_for(asyncio.gather(*(reporter() for _ in range(REPORTERS))), 60 + len(reports) * 0.1)
    return time.perf_counter() - t0


async def timed_graphs(server: h.Server, starts: list[int], direction: str, repeat: int) -> dict:
    """`repeat` lineage queries of depth DEPTH cycling over `starts`, after one warm-up per start."""
    url = f"{server.api}/shardcat/lineage"
    times, edges, sizes, truncated = [], [], [], 0
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"},
                                     timeout=aiohttp.ClientTimeout(total=h.REQUEST_TIMEOUT)) as session:
        for n in range(len(starts) + repeat):
            params = {"name": name(starts[n % len(starts)]), "direction": direction, "depth": str(DEPTH)}
            t0 = time.perf_counter()
            async with session.get(url, params=params) as r:
                body = await r.read()
            elapsed = (time.perf_counter() - t0) * 1000
            if r.status != 200:
                raise RuntimeError(f"lineage {params}: HTTP {r.status}: {body[:300]!r}")
            if n < len(starts):
                continue            # the warm-ups: PostgreSQL's buffers and plans
            answer = json.loads(body)
            times.append(elapsed)
            edges.append(len(answer["edges"]))
            sizes.append(len(body))
            truncated += bool(answer.get("truncated"))
    times.sort()
    return {"direction": direction, "queries": repeat, "p50_ms": statistics.median(times),
            "p99_ms": h.percentile(times, 99), "max_ms": times[-1], "edges_min": min(edges),
            "edges_median": statistics.median(edges), "edges_max": max(edges),
            "bytes_median": statistics.median(sizes), "truncated": truncated}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    tables = args.layers * args.width
    reports = graph(args.layers, args.width, args.fan_in)
    db = await pg.database("bench_lineage_graph")
    seeder = h.start_shardcat(tmp / "seed", db, name="seed")
    await h.seed_tables(seeder.api, seeder.token, CATALOG, SCHEMA, 1)
    h.stop(seeder.child)
    _, insert_s = await h.bulk_insert_tables(db, CATALOG, SCHEMA, tables)
    h.log(f"== {tables:,} tables inserted in {insert_s:.1f} s")
    server = h.start_shardcat(tmp / "serve", db)
    try:
        report_s = await report_edges(server, reports)
        conn = await asyncpg.connect(db)
        try:
            stored = await conn.fetchval("SELECT count(*) FROM (SELECT DISTINCT source_id, target_id FROM lineage) e")
            await conn.execute("ANALYZE lineage")
        finally:
            await conn.close()
        h.log(f"== {len(reports):,} reports, {stored:,} edges in {report_s:.1f} s "
              f"({len(reports) / report_s:.0f} reports/s)")
        middle = args.layers // 2
        starts = [middle * args.width + j for j in range(min(STARTS, args.width))]
        rows = []
        for direction in DIRECTIONS:
            h.log(f"  depth {DEPTH}, {direction}")
            rows.append(await timed_graphs(server, starts, direction, args.repeat))
    finally:
        h.stop(server.child)
    return {"layers": args.layers, "width": args.width, "fan_in": args.fan_in, "tables": tables,
            "reports": len(reports), "edges": stored, "insert_s": insert_s, "report_s": report_s,
            "middle_layer": middle, "starts": len(starts), "repeat": args.repeat,
            "postgres_version": pg.version, "rows": rows}


def markdown(run: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}`; run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             f"- **Data:** one metastore, {run['tables']:,} tables in {run['layers']} layers of {run['width']}; "
             f"every table past the first written from {run['fan_in']} random tables of the layer before: "
             f"{run['edges']:,} edges, reported through the catalog's intake (`POST /shardcat/lineage`, one "
             f"report per written table: {run['reports']:,} reports in {run['report_s']:.1f} s, "
             f"{run['reports'] / run['report_s']:.0f} reports/s with {REPORTERS} reporters).",
             f"- **Method:** `GET /shardcat/lineage?name=...&direction=...&depth={DEPTH}` from tables of the "
             f"middle layer (layer {run['middle_layer']}, {run['starts']} start tables in turn), {run['repeat']} "
             "times in a row from one client after one warm-up per start table; as admin, so no node is hidden. "
             "The graph is walked hop by hop in PostgreSQL (one query per hop and direction), then the nodes "
             "are read and authorized; an answer holds at most 1,000 edges (`truncated` past that).",
             "",
             "| direction | p50 ms | p99 ms | max ms | edges in the answer (min / median / max) | answer bytes (median) | truncated |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in run["rows"]:
        lines.append(f"| {row['direction']} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} | {row['max_ms']:.1f} | "
                     f"{row['edges_min']} / {row['edges_median']:.0f} / {row['edges_max']} | "
                     f"{row['bytes_median']:,.0f} | {row['truncated']} of {row['queries']} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_lineage_graph",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=11, help="layers of tables (the middle one is the start)")
    parser.add_argument("--width", type=int, default=500, help="tables per layer")
    parser.add_argument("--fan-in", type=int, default=2, help="tables each written table is read from")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    if args.layers < 2 or not 1 <= args.fan_in <= args.width:
        parser.error("need at least 2 layers and 1 <= fan-in <= width")
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_lineage_graph",
                                                        *(sys.argv[1:] if argv is None else argv)]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)

    result = h.run_with_postgres("bench_lineage_graph", body)
    if result is None:
        return 1
    h.publish("bench_lineage_graph", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
