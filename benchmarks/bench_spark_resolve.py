"""Spark planning with shardcat's plugin (jvm/spark-plugin): a query joining 1, 10 and 50 catalog tables,
catalog calls and planning time with the plugin's one resolve vs connector-style loads (the Unity Catalog
Spark connector's two calls per table: GET the table, then its temporary credentials), and the example
pipeline's wall time.

    python -m benchmarks.bench_spark_resolve [--rounds 5] [--rows 20000] [--out docs/benchmarks.md]

One run, on this machine: an embedded PostgreSQL, one `shardcat serve` process, a local Spark (local[2])
with the plugin's jar and extension. `bench.s` holds 50 small Parquet tables (external, file://). Each
round plans the 1-, 10- and 50-table join once with each variant (interleaved): the plugin's catalog with
the parser's batching on (one POST /resolve per query) and off (the connector's calls per table load).
Planning time is `spark.sql(q)` through the physical plan (`queryExecution().executedPlan()`), nothing run.
Catalog calls are the HTTP requests the server's audit log recorded for the query (distinct request ids).
The official connector itself is not measured: its jar is not on the Maven Central this machine reaches
(docs/spark.md); the baseline makes its calls, from the same catalog code.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import aiohttp

from . import harness as h

SECTION = "## Spark planning: the plugin's one resolve vs the connector's calls per table"
CATALOG, SCHEMA, TABLES, SIZES = "bench", "s", 50, (1, 10, 50)


async def seed(server: h.Server, folder: Path) -> None:
    """bench.s.t000000 .. t000049: one Parquet file of 3 rows each, registered as external tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"}) as session:
        async def post(path, body):
            async with session.post(server.api + path, json=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"{path}: HTTP {r.status} {await r.text()}")
        await post("/catalogs", {"name": CATALOG})
        await post("/schemas", {"name": SCHEMA, "catalog_name": CATALOG})
        for i in range(TABLES):
            where = folder / h.table_name(i)
            where.mkdir(parents=True)
            pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), where / "part-0.parquet")
            await post("/tables", {
                "name": h.table_name(i), "catalog_name": CATALOG, "schema_name": SCHEMA, "table_type": "EXTERNAL",
                "data_source_format": "PARQUET", "storage_location": f"file://{where}",
                "columns": [{"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0, "nullable": True,
                             "type_json": '{"name":"id","type":"long","nullable":true,"metadata":{}}'}]})


def join_query(n: int) -> str:
    names = [f"{CATALOG}.{SCHEMA}.{h.table_name(i)}" for i in range(n)]
    joins = "".join(f" JOIN {name} t{i} ON t0.id = t{i}.id" for i, name in enumerate(names) if i)
    return f"SELECT t0.id FROM {names[0]} t0{joins}"


async def requests_since(server: h.Server, since_ms: int) -> int:
    """HTTP requests the audit log recorded since then (one request may record several decisions)."""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"}) as session:
        ids, token = set(), None
        while True:
            params = {"since": str(since_ms), "max_results": "1000", **({"page_token": token} if token else {})}
            async with session.get(server.api + "/shardcat/audit", params=params) as r:
                body = await r.json()
            ids.update(e["request_id"] for e in body["events"] if e["action"] != "listAuditEvents")
            token = body.get("next_page_token")
            if not token:
                return len(ids)


def spark_session():
    from pyspark.sql import SparkSession
    from tests import jvm
    jars = [*jvm.classpath("spark").split(os.pathsep), jvm.package("spark-plugin")]
    spark = (SparkSession.builder.master("local[2]").appName("bench-spark-resolve")
             .config("spark.jars", ",".join(jars))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension,shardcat.spark.ShardcatExtensions")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def variant(spark, server: h.Server, batch: bool):
    session = spark.newSession()
    for key, value in {"": "shardcat.spark.ShardcatCatalog", ".uri": server.base, ".token": server.token,
                       ".batchResolve": str(batch).lower()}.items():
        session.conf.set(f"spark.sql.catalog.{CATALOG}{key}", value)
    return session


def plan_once(session, query: str) -> float:
    start = time.perf_counter()
    session.sql(query)._jdf.queryExecution().executedPlan()
    return (time.perf_counter() - start) * 1000


async def planning_runs(spark, server: h.Server, rounds: int) -> dict:
    sessions = {"plugin": variant(spark, server, True), "connector-style": variant(spark, server, False)}
    out = {f"{label} {n}": {"ms": [], "calls": []} for n in SIZES for label in sessions}
    for label, session in sessions.items():          # warm-up: JIT, class loading, file listing caches
        await asyncio.to_thread(plan_once, session, join_query(SIZES[-1]))
    for r in range(rounds):
        for n in SIZES:
            for label, session in sessions.items():
                since = int(time.time() * 1000)
                await asyncio.sleep(0.01)
                ms = await asyncio.to_thread(plan_once, session, join_query(n))
                await asyncio.sleep(0.05)        # the audit log is written behind the answer
                out[f"{label} {n}"]["ms"].append(ms)
                out[f"{label} {n}"]["calls"].append(await requests_since(server, since))
        h.log(f"  round {r + 1}/{rounds}: " + ", ".join(
            f"{k} {statistics.median(v['ms']):.0f} ms/{max(v['calls'])} calls" for k, v in out.items()))
    return {k: {"median_ms": statistics.median(v["ms"]), "p90_ms": h.percentile(sorted(v["ms"]), 90),
                "calls": statistics.median(v["calls"]), "reps": len(v["ms"]), "all_ms": v["ms"]}
            for k, v in out.items()}


def pipeline_run(spark, server: h.Server, rows: int) -> dict:
    spec = importlib.util.spec_from_file_location("spark_pipeline", h.ROOT / "examples" / "spark_pipeline.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = example.run(spark.newSession(), server.base, server.token, rows=rows)
    return {k: out[k] for k in ("wall_seconds", "catalog_seconds", "spark_seconds")} | {"raw_rows": rows}


def markdown(run: dict) -> str:
    p = run["planning"]
    lines = [SECTION, "", f"Run {run['date']}: `{run['command']}` ({run['wall_minutes']:.1f} min).",
             h.machine_line(run["machine"], run.get("pg_version")), "",
             f"A query joining n Parquet tables of `bench.s`, planned (parsed, analysed, optimised, physical plan; "
             f"not run) by a local Spark {run['spark']} with shardcat's plugin, {p['plugin 1']['reps']} rounds, "
             "the variants interleaved. *plugin*: the parser resolves the query's tables in one `POST /resolve` "
             "and the catalog's loads are served from it. *connector-style*: the same catalog with the parser's "
             "batching off, each table load making the Unity Catalog Spark connector's two calls (`GET "
             "/tables/{name}`, `POST /temporary-table-credentials`); the connector's own jar is not on the Maven "
             "Central this machine reaches. Catalog calls: HTTP requests in shardcat's audit log per query.", "",
             "| tables joined | plugin: calls | plugin: planning median (p90) | connector-style: calls "
             "| connector-style: planning median (p90) |", "| --- | --- | --- | --- | --- |"]
    for n in SIZES:
        a, b = p[f"plugin {n}"], p[f"connector-style {n}"]
        lines.append(f"| {n} | {a['calls']:.0f} | {a['median_ms']:.0f} ms ({a['p90_ms']:.0f}) | {b['calls']:.0f} | "
                     f"{b['median_ms']:.0f} ms ({b['p90_ms']:.0f}) |")
    pipe = run.get("pipeline")
    if pipe:
        lines += ["", f"The example pipeline (`examples/spark_pipeline.py`, {pipe['raw_rows']:,} raw rows, raw files → "
                  f"bronze → silver → gold on shardcat.spark) in the same JVM: **{pipe['wall_seconds']} s** wall, "
                  f"{pipe['catalog_seconds']} s of it in catalog calls."]
    lines += ["", "Loopback makes a catalog call cheap; what the plugin removes grows with the round trip between "
              "driver and catalog (2 calls per table instead of 1 per query). Both variants read the files' "
              "footers and list the tables' directories while planning, which is most of the planning time here."]
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}`."]
    return "\n".join(lines) + "\n"


async def run_async(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_spark_resolve")
    server = await asyncio.to_thread(h.start_shardcat, tmp / "server", db)
    try:
        h.log(f"== seeding {TABLES} Parquet tables")
        await seed(server, tmp / "data")
        spark = await asyncio.to_thread(spark_session)
        try:
            h.log("== planning")
            planning = await planning_runs(spark, server, args.rounds)
            pipeline = None
            if args.rows:
                h.log(f"== example pipeline ({args.rows:,} rows)")
                pipeline = await asyncio.to_thread(pipeline_run, spark, server, args.rows)
            return {"planning": planning, "pipeline": pipeline, "spark": spark.version,
                    "pg_version": getattr(pg, "version", None)}
        finally:
            spark.stop()
    finally:
        h.stop(server.child)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rows", type=int, default=20000, help="raw rows of the example pipeline (0: skip it)")
    p.add_argument("--out", type=Path, default=h.DOCS)
    p.add_argument("--no-docs", action="store_true")
    args = p.parse_args(argv)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    outcome = h.run_with_postgres("shardcat-bench-spark-resolve-", lambda tmp, pg: run_async(args, tmp, pg))
    if outcome is None:
        return 1
    run = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_spark_resolve", *argv]),
           "machine": info, "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    h.publish("bench_spark_resolve", run, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
