"""Foreign catalogs against native ones: getTable cold (through to the foreign system) and warm (shardcat's mirror), listTables of a 1,000-table schema.

    python -m benchmarks.bench_federation [--tables 1000] [--gets 300] [--colds 20] [--no-docs]

Two `shardcat serve` processes on one embedded PostgreSQL: the foreign system (another Unity
Catalog: a catalog `upstream`, schema `big` of `tables` tables) and the federating server (allowed
to call 127.0.0.1, `--webhook-allow-host`), which holds a native copy of the same schema and mounts
the foreign one through a UNITY_CATALOG connection (docs/federation.md). One client, one request at
a time, on loopback:

- getTable, native: the same table again and again (shardcat's cache).
- getTable, foreign warm: the same, on a foreign table already fetched (within its TTL).
- getTable, foreign cold: the first read of a table in a freshly mounted foreign catalog (each
  sample mounts a new one): the foreign catalog's schemas and the table fetched from the foreign
  system, mirrored in one metastore write, then answered.
- listTables (max_results=1000), native and foreign warm; foreign cold: a freshly mounted
  catalog's first list (the schema's 1,000 tables fetched, written as assets, then listed).
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

from . import harness as h

HEADING = "## Foreign catalogs: getTable and listTables, foreign (cold, warm) vs native"
COLUMNS = [{"name": f"c{i}", "type_name": "LONG", "position": i} for i in range(8)]


async def _call(session, server, method, path, **kw):
    async with session.request(method, server.api + path, headers={"Authorization": f"Bearer {server.token}"},
                               **kw) as r:
        body = await r.json(content_type=None)
        if r.status != 200:
            raise RuntimeError(f"{method} {path}: {r.status} {body}")
        return body


async def _fill(session, server, catalog: str, tables: int) -> None:
    await _call(session, server, "POST", "/catalogs", json={"name": catalog})
    await _call(session, server, "POST", "/schemas", json={"name": "big", "catalog_name": catalog})
    sem = asyncio.Semaphore(16)

    async def one(i):
        async with sem:
            await _call(session, server, "POST", "/tables", json={
                "name": f"t{i:05d}", "catalog_name": catalog, "schema_name": "big", "table_type": "MANAGED",
                "data_source_format": "DELTA", "columns": COLUMNS})
    await asyncio.gather(*(one(i) for i in range(tables)))


async def _timed(n: int, call) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        out.append((time.perf_counter() - started) * 1000)
    return sorted(out)


def _row(label: str, times: list[float]) -> dict:
    return {"operation": label, "n": len(times), "p50_ms": statistics.median(times),
            "p90_ms": h.percentile(times, 90), "ms": times}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_federation")
    foreign = h.start_shardcat(tmp / "foreign", db, name="foreign")
    local = h.start_shardcat(tmp / "federating", db, "--webhook-allow-host", "127.0.0.1", name="federating")
    rows = []
    try:
        async with aiohttp.ClientSession() as s:
            h.log(f"  {args.tables} tables upstream and natively")
            await _fill(s, foreign, "upstream", args.tables)
            await _fill(s, local, "native", args.tables)
            await _call(s, local, "POST", "/connections", json={
                "name": "up", "connection_type": "UNITY_CATALOG",
                "options": {"url": foreign.base, "bearer_token": foreign.token}})
            mounts = iter(range(10_000))

            async def mount() -> str:
                name = f"mirror{next(mounts)}"
                await _call(s, local, "POST", "/catalogs", json={"name": name, "connection_name": "up",
                                                                 "options": {"catalog": "upstream"}})
                return name

            one = "t00042"
            rows.append(_row("getTable, native", await _timed(
                args.gets, lambda: _call(s, local, "GET", f"/tables/native.big.{one}"))))
            warm = await mount()
            await _call(s, local, "GET", f"/tables/{warm}.big.{one}")
            rows.append(_row("getTable, foreign warm", await _timed(
                args.gets, lambda: _call(s, local, "GET", f"/tables/{warm}.big.{one}"))))
            colds = []
            for _ in range(args.colds):
                name = await mount()
                colds += await _timed(1, lambda: _call(s, local, "GET", f"/tables/{name}.big.{one}"))
            rows.append(_row("getTable, foreign cold", sorted(colds)))
            listing = {"catalog_name": "native", "schema_name": "big", "max_results": "1000"}
            rows.append(_row(f"listTables of {args.tables}, native", await _timed(
                args.lists, lambda: _call(s, local, "GET", "/tables", params=listing))))
            warm_list = {**listing, "catalog_name": warm}
            await _call(s, local, "GET", "/tables", params=warm_list)
            rows.append(_row(f"listTables of {args.tables}, foreign warm", await _timed(
                args.lists, lambda: _call(s, local, "GET", "/tables", params=warm_list))))
            colds = []
            for _ in range(args.cold_lists):
                name = await mount()
                colds += await _timed(1, lambda: _call(s, local, "GET", "/tables", params={**listing,
                                                                                         "catalog_name": name}))
            rows.append(_row(f"listTables of {args.tables}, foreign cold", sorted(colds)))
            for row in rows:
                h.log(f"  {row['operation']}: p50 {row['p50_ms']:.2f} ms, p90 {row['p90_ms']:.2f} ms")
    finally:
        h.stop(local.child)
        h.stop(foreign.child)
    return {"tables": args.tables, "postgres_version": pg.version, "rows": rows}


def markdown(run: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}`; run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             "- **Method:** two `shardcat serve` processes on one PostgreSQL, the foreign system (a catalog "
             f"with a schema of {run['tables']} tables of 8 columns) and the federating server with a native copy "
             "of that schema and a UNITY_CATALOG connection to the other; one client, one request at a time, "
             "on loopback. Cold: the first read in a freshly mounted foreign catalog (its schemas and the table, "
             "or the whole schema for a list, fetched from the foreign system and written as assets in one "
             "metastore write); warm: the same read again, within the TTL (shardcat's cache, as for a native "
             "table). Lists ask `max_results=1000`.",
             "",
             "| operation | n | p50 ms | p90 ms |",
             "| --- | ---: | ---: | ---: |"]
    for row in run["rows"]:
        lines.append(f"| {row['operation']} | {row['n']} | {row['p50_ms']:.2f} | {row['p90_ms']:.2f} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_federation", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000, help="tables in the listed schema")
    parser.add_argument("--gets", type=int, default=300, help="timed getTable calls (native, warm)")
    parser.add_argument("--colds", type=int, default=20, help="cold getTable samples (one fresh mount each)")
    parser.add_argument("--lists", type=int, default=30, help="timed listTables calls (native, warm)")
    parser.add_argument("--cold-lists", type=int, default=5, help="cold listTables samples (one fresh mount each)")
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_federation",
                                                        *(sys.argv[1:] if argv is None else argv)]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)
    result = h.run_with_postgres("bench_federation", body)
    if result is None:
        return 1
    h.publish("bench_federation", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
