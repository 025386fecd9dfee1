"""Delta Sharing: a query of a 1,000-file table, and the official connector reading it end to end.

    python -m benchmarks.bench_sharing [--files N] [--repeat R] [--no-docs]

One embedded PostgreSQL, one `shardcat serve` process (its in-process shard, behind its front).
A catalog-managed Delta table written by shardcat's Delta client in one commit of N files (one
partition each, 10 rows a file), shared to a recipient whose profile comes from its activation
link. Measured from this process: `POST .../query` (parquet format, every file a signed URL on
shardcat), R times after one warm-up: the answer's size, the time to its first file line and to
its end; the same with a predicate hint that keeps one partition; then the `delta-sharing`
connector's `load_as_pandas` of the whole table (every file fetched over HTTP from shardcat),
3 times. Writes its section of docs/benchmarks.md and the raw numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import aiohttp
import pyarrow as pa

from shardcat.delta.client import DeltaCatalogClient

from . import harness as h

HEADING = "## Delta Sharing: a 1,000-file table queried, and read by the connector"
ROWS_PER_FILE = 10


async def ok(session: aiohttp.ClientSession, server: h.Server, method: str, path: str, body=None) -> dict:
    async with session.request(method, server.api + path, json=body,
                               headers={"Authorization": f"Bearer {server.token}"}) as r:
        answer = await r.json(content_type=None)
        if r.status != 200:
            raise RuntimeError(f"{method} {path}: {r.status} {answer}")
        return answer


async def setup(server: h.Server, files: int, tmp: Path) -> Path:
    async with aiohttp.ClientSession() as s:
        await ok(s, server, "POST", "/catalogs", {"name": "bench"})
        await ok(s, server, "POST", "/schemas", {"name": "s", "catalog_name": "bench"})
        schema = pa.schema([("part", pa.int64()), ("id", pa.int64()), ("v", pa.float64())])
        async with DeltaCatalogClient(server.api, server.token) as delta:
            await delta.create_table("bench.s.wide", schema, partition_columns=["part"])
            n = files * ROWS_PER_FILE
            await delta.append("bench.s.wide", pa.table({"part": [i // ROWS_PER_FILE for i in range(n)],
                                                         "id": list(range(n)), "v": [i * 0.5 for i in range(n)]},
                                                        schema=schema))
        await ok(s, server, "POST", "/shares", {"name": "bench"})
        await ok(s, server, "PATCH", "/shares/bench", {"updates": [{"action": "ADD",
                                                                    "data_object": {"name": "bench.s.wide"}}]})
        made = await ok(s, server, "POST", "/recipients", {"name": "reader", "authentication_type": "TOKEN"})
        await ok(s, server, "PATCH", "/shares/bench/permissions",
                 {"changes": [{"principal": "reader", "add": ["SELECT"]}]})
        code = made["tokens"][0]["activation_url"]
        async with s.get(f"{server.api}/public/data_sharing_activation/{code}") as r:
            profile = await r.json()
    path = tmp / "reader.share"
    path.write_text(json.dumps(profile))
    return path


async def timed_query(profile: dict, body: dict, repeat: int) -> dict:
    url = f"{profile['endpoint']}/shares/bench/schemas/s/tables/wide/query"
    headers = {"Authorization": f"Bearer {profile['bearerToken']}"}
    first, total, size, lines = [], [], 0, 0
    async with aiohttp.ClientSession() as s:
        for i in range(repeat + 1):
            t0 = time.perf_counter()
            async with s.post(url, json=body, headers=headers) as r:
                if r.status != 200:
                    raise RuntimeError(f"query: {r.status} {await r.text()}")
                seen, t_first, size = 0, None, 0
                async for line in r.content:
                    size += len(line)
                    seen += 1
                    if seen == 3 and t_first is None:
                        t_first = time.perf_counter() - t0
                t_end = time.perf_counter() - t0
            if i:                               # the first is a warm-up
                first.append((t_first or t_end) * 1000)
                total.append(t_end * 1000)
            lines = seen
    return {"files": lines - 2, "bytes": size, "first_ms": statistics.median(first),
            "total_ms": statistics.median(total), "total_max_ms": max(total)}


def connector_read(profile_path: Path) -> tuple[float, int]:
    import delta_sharing
    t0 = time.perf_counter()
    df = delta_sharing.load_as_pandas(f"{profile_path}#bench.s.wide")
    return time.perf_counter() - t0, len(df)


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_sharing")
    server = h.start_shardcat(tmp / "serve", db)
    try:
        h.log(f"== a table of {args.files} files")
        profile_path = await setup(server, args.files, tmp)
        profile = json.loads(profile_path.read_text())
        h.log("== query, the whole table")
        whole = await timed_query(profile, {}, args.repeat)
        hint = json.dumps({"op": "equal", "children": [{"op": "column", "name": "part", "valueType": "long"},
                                                       {"op": "literal", "value": "7", "valueType": "long"}]})
        h.log("== query, one partition by a predicate hint")
        one = await timed_query(profile, {"jsonPredicateHints": hint}, args.repeat)
        h.log("== the connector's load_as_pandas")
        reads = [await asyncio.to_thread(connector_read, profile_path) for _ in range(3)]
    finally:
        h.stop(server.child)
    return {"files": args.files, "repeat": args.repeat, "postgres_version": pg.version, "whole": whole,
            "one_partition": one, "connector_s": [r[0] for r in reads], "connector_rows": reads[0][1]}


def markdown(run: dict) -> str:
    whole, one = run["whole"], run["one_partition"]
    reads = sorted(run["connector_s"])
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}` (about three minutes); run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             f"- **Data:** a catalog-managed Delta table written by shardcat's Delta client in one commit of "
             f"{run['files']:,} files (one partition each, {ROWS_PER_FILE} rows a file), shared to a recipient "
             "whose profile came from its activation link; `shardcat serve` as its own process (in-process shard, "
             "behind its front), the client in this process.",
             f"- **Method:** `POST .../query` in the parquet format, {run['repeat']} times after a warm-up (the "
             "median; time to the first file line and to the end of the answer); then the `delta-sharing` "
             "connector's `load_as_pandas` of the whole table, 3 times (every file fetched from shardcat by its "
             "signed URL).",
             "",
             "| request | files answered | answer bytes | first file line ms | whole answer ms (p50 / max) |",
             "| --- | ---: | ---: | ---: | ---: |",
             f"| query, the whole table | {whole['files']:,} | {whole['bytes']:,} | {whole['first_ms']:.1f} | "
             f"{whole['total_ms']:.1f} / {whole['total_max_ms']:.1f} |",
             f"| query, one partition by `jsonPredicateHints` | {one['files']:,} | {one['bytes']:,} | "
             f"{one['first_ms']:.1f} | {one['total_ms']:.1f} / {one['total_max_ms']:.1f} |",
             "",
             f"`load_as_pandas` of the table ({run['connector_rows']:,} rows, {run['files']:,} files): "
             f"{reads[1]:.1f} s (median of 3; {reads[0]:.1f} to {reads[-1]:.1f} s).",
             "",
             "The answer is built whole before it is sent (the first file line comes with the rest): the log is "
             "read and replayed, every file filtered and signed, then the lines encoded. The connector fetches "
             "files one after another, each a HEAD and ranged GETs (the Parquet footer, then the data), so its "
             "time is per-file round trips, not the query.", "",
             f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_sharing", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_sharing", *sys.argv[1:]]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)

    result = h.run_with_postgres("bench_sharing", body)
    if result is None:
        return 1
    h.publish("bench_sharing", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
