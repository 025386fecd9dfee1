"""Versioned metadata: reads at a version 1, 1,000 and 100,000 writes back, and a clone of a
10,000-table schema.

    python -m benchmarks.bench_versions [--writes N] [--tables T] [--clone-tables C] [--repeat R] [--no-docs]

One embedded PostgreSQL; shardcat's store, an in-process shard and its services (no HTTP: the
numbers are the catalog's own work, store round trips included). A schema of T tables (one
write), then N writes (each a metastore version of its own, through group-commit batches of
`Store.write_batch`, the path every write takes), each changing the comment of one table in
turn, so that history grows N rows. Then, at the current version minus 1, 1,000 and 100,000,
R times each: get a table by name, a page of 100 of the schema's tables, a search, a resolve of
10 tables; and the same reads of the present for comparison. Last, a schema of C tables (one
write) cloned to a new schema (`POST /shardcat/clones`' service). Wall time per operation
(median of R) and this process's CPU per operation; PostgreSQL runs beside it.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
import uuid
from pathlib import Path

from . import harness as h

HEADING = "## Versioned metadata: reads at a version, clone of a large schema"
BACK = (1, 1_000, 100_000)


def _caller(metastore_id: str):
    from shardcat.auth import Caller
    return Caller("bench", 1, True, 1, metastore_id)


async def _seed_schema(shard, ms: str, catalog: str, schema: str, tables: int, root: str) -> None:
    """A catalog (if missing), a schema and `tables` managed Delta tables, in one write per 5,000 tables."""
    from shardcat.entities.asset import Asset
    from shardcat.entities.urls import join_url

    async def make(tx, state):
        cat = await tx.get("catalog", catalog)
        if cat is None:
            cat = await tx.put(Asset(str(uuid.uuid4()), ms, "catalog", "catalog", ms, catalog, catalog, None,
                                     {"owner": "bench"}))
        return await tx.put(Asset(str(uuid.uuid4()), ms, "schema", "schema", cat.id, schema, f"{catalog}.{schema}",
                                  None, {"owner": "bench"}))

    parent = await shard.write(ms, make)
    for start in range(0, tables, 5000):
        async def body(tx, state, start=start):
            for i in range(start, min(start + 5000, tables)):
                tid = str(uuid.uuid4())
                location = join_url(root, "tables", tid)
                await tx.put(Asset(tid, ms, "table", "table", parent.id, f"t{i:06d}", f"{catalog}.{schema}.t{i:06d}",
                                   location, {"owner": "bench", "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": [{"name": "id", "type_name": "LONG", "position": 0}],
                                              "storage_location": location, "comment": f"table {i}"}))
        await shard.write(ms, body)


async def _writes(store, shard, ms: str, schema_full: str, tables: int, count: int) -> float:
    """`count` writes, one version each, in group-commit batches of 500; returns seconds."""
    import dataclasses
    state = await shard.state(ms)
    names = [f"{schema_full}.t{i:06d}" for i in range(tables)]
    t0 = time.perf_counter()
    done = 0
    while done < count:
        n = min(500, count - done)
        version = await store.metastore_version(ms)
        async with store.write_batch(ms, version) as batch:
            for k in range(n):
                async with batch.write() as tx:
                    asset = await tx.get("table", names[(done + k) % tables])
                    await tx.put(dataclasses.replace(asset, info={**asset.info, "comment": f"write {done + k}"}))
        done += n
        if done % 20_000 == 0:
            h.log(f"   {done:,} writes")
    await shard.reconcile(state)
    return time.perf_counter() - t0


async def _measure(fn, repeat: int) -> dict:
    await fn()          # warm: plans, caches, the past index copy
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        await fn()
        walls.append((time.perf_counter() - t0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)
    return {"p50_ms": statistics.median(walls), "max_ms": max(walls), "cpu_ms": statistics.median(cpus)}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    from shardcat.catalog.features.resolve import ResolveService
    from shardcat.catalog.features.search import SearchService
    from shardcat.catalog.tree.service import CatalogService
    from shardcat.catalog.features.snapshots import SnapshotService
    from shardcat.entities.urls import normalize_url
    from shardcat.shards.shard import Shard
    from shardcat.store.db import Store
    from shardcat.shards.session import reading_at
    from shardcat.store.history import PastRead

    db = await pg.database("bench_versions")
    store = await Store.open(db)
    await store.migrate()
    ms = str(uuid.uuid4())
    root = normalize_url(str(tmp / "storage"))
    await store.create_metastore(ms, "bench", {"storage_root": root, "owner": "bench"})
    shard = Shard(store)
    caller = _caller(ms)
    await _seed_schema(shard, ms, "main", "s", args.tables, root)
    h.log(f"== {args.writes:,} writes over {args.tables:,} tables")
    writes_s = await _writes(store, shard, ms, "main.s", args.tables, args.writes)
    history_rows = await store.pool.fetchval("SELECT count(*) FROM asset_history")
    current = await store.metastore_version(ms)
    catalogs, search, resolver = CatalogService(shard), SearchService(shard), ResolveService(shard)
    target = f"main.s.t{args.tables // 2:06d}"
    items = {"items": [{"securable_type": "TABLE", "name": f"main.s.t{i:06d}"} for i in range(0, args.tables, args.tables // 10)]}
    ops = {
        "get a table": lambda: catalogs.find(caller, "table", target),
        "list 100 tables": lambda: catalogs.list_page(caller, "table", "main.s", 100, None),
        "search (100 results)": lambda: search.search(caller, {"query": "t000", "max_results": "100"}),
        "resolve 10 tables": lambda: resolver.resolve(caller, items),
    }
    rows = []
    for back in (None, *BACK):
        if back is not None and back > current - 1:
            continue
        label = "present (cache)" if back is None else f"{back:,} writes back"
        h.log(f"== {label}")
        row = {"at": label, "ops": {}}
        for name, fn in ops.items():
            async def at_version(fn=fn):
                if back is None:
                    return await fn()
                with reading_at(PastRead(current - back)):
                    return await fn()
            row["ops"][name] = await _measure(at_version, args.repeat)
        rows.append(row)
    # a clone of a large schema
    h.log(f"== clone of a {args.clone_tables:,}-table schema")
    await _seed_schema(shard, ms, "big", "s", args.clone_tables, root)
    snapshots = SnapshotService(shard)
    c0, t0 = time.process_time(), time.perf_counter()
    out = await snapshots.clone(caller, {"securable_type": "SCHEMA", "source": "big.s", "name": "big.copy"})
    clone = {"tables": args.clone_tables, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
             "cloned": out["cloned"]}
    await store.close()
    return {"writes": args.writes, "tables": args.tables, "writes_s": writes_s, "history_rows": history_rows,
            "current": current, "repeat": args.repeat, "rows": rows, "clone": clone,
            "postgres_version": pg.version}


def markdown(run: dict) -> str:
    busy = run["machine"].get("running_share")
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}`; run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}. A shared machine "
             "(other sessions were running): walls are indicative, CPU per operation is this process's.",
             f"- **Data:** one schema of {run['tables']:,} tables; {run['writes']:,} writes after it, each one version "
             f"changing one table's comment in turn ({run['writes_s']:.0f} s through group-commit batches of 500, "
             f"{run['writes'] / run['writes_s']:,.0f} writes/s with the history kept), leaving "
             f"{run['history_rows']:,} history rows; the metastore at version {run['current']:,}.",
             f"- **Method:** in-process (store, shard, services; no HTTP), an account admin's reads, median of "
             f"{run['repeat']} after a warm-up. *Present*: today's path (cache first). *N writes back*: "
             "`?as_of_version=` current − N (store/history.py, no cache). Search: `t000` over every table "
             "(100 results of the schema's); resolve: 10 tables by name.",
             "", "| read at | get a table | list 100 tables | search (100 results) | resolve 10 tables |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for row in run["rows"]:
        cells = [f"{o['p50_ms']:.2f} ms ({o['cpu_ms']:.2f} CPU)" for o in row["ops"].values()]
        lines.append(f"| {row['at']} | " + " | ".join(cells) + " |")
    c = run["clone"]
    lines += ["", f"Clone of a schema of {c['tables']:,} managed Delta tables (no data files yet: the shallow "
              f"clone finds no log to reference) into a new schema, one metastore write: **{c['wall_s']:.1f} s** wall, "
              f"{c['cpu_s']:.1f} s CPU in this process ({c['cloned']:,} assets).", "",
              "A read at a version costs one indexed statement per table (`assets` and `asset_history`) and does "
              "not depend on how far back it reads for a get or a resolve (each name's latest state at or before "
              "the version, through its own index); a list and a search read the rows current at the version "
              "through the narrower end of the interval index, so they grow with the history of the listed "
              "assets inside the window.",
              "", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_versions", description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=101_000)
    parser.add_argument("--tables", type=int, default=1_000)
    parser.add_argument("--clone-tables", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_versions", *sys.argv[1:]]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)

    result = h.run_with_postgres("bench_versions", body)
    if result is None:
        return 1
    h.publish("bench_versions", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
