"""Sharding and caching benchmark: cache on vs off, through the router vs straight to the shard.

    python -m benchmarks.bench_cache [--quick] [--out docs/benchmarks.md]

One run, on this machine, one embedded PostgreSQL for all of it:

1. `shardcat serve --shards 1` (a shard actor on a Ray of its own, behind the router), cache on;
   one schema of 1,000 tables created through the API. getTable (a random table), listTables
   (a page of 100) and a batch resolve of 50 random names, at 1, 8, 32 and 128 closed-loop
   clients, through the router and straight to the owner shard (its URL from
   GET /shardcat/routing, the way a client library routes itself). The load comes from wrk
   (Debian's package; `--client python`: the harness's own asyncio client instead).
2. The same server restarted with `--no-cache` on the same database: the same rows. The shard
   then reads every request's caller from PostgreSQL too (since 9f598b0; it kept them 5 s before).
3. The bare aiohttp server (benchmarks/bare_server.py) with constant answers of the same sizes,
   on uvloop like the servers measured (benchmarks/bench_loop.py compares the loops).
4. A metastore of 100,000 tables (bulk-inserted into PostgreSQL in one metastore write, the
   way `Store.write` records one), served by a fresh `shardcat serve --shards 1`: time of the
   first getTable (the new owner builds its state, the storage-path trie, lazily), time to list
   the whole schema (twice), time to warm every table into the cache by batch resolves, and
   the memory per cached table: the shard process's RSS growth and the cache's own accounting
   (`MetastoreCache.stats()["bytes"]`, of a replica filled in this process from the same rows).

Writes its section of docs/benchmarks.md, a plot docs/img/bench_cache.png (matplotlib: the
`bench` extra) and the raw numbers under benchmarks/out/. `--quick` (2 s windows, 1 and 32
clients, 10,000 tables in step 4) is for trying it out; its section says so.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from yarl import URL

from . import harness as h

SECTION = "## Sharding and caching: cache on/off, router vs straight to the shard"
PLOT = h.ROOT / "docs" / "img" / "bench_cache.png"
CATALOG, SCHEMA = "bench", "s"
BIG_CATALOG, BIG_SCHEMA = "big", "s"
RESOLVE_CHUNK = 1000          # names per resolve request when warming the big metastore (the API's maximum)
LIST_CHUNK = 10000            # max_results per page when listing the big schema (the API's maximum)
OPS = ("getTable", "listTables", "batch")
VARIANTS = ("bare", "cache on, router", "cache on, direct", "cache off, router", "cache off, direct")


# ---- 1-3: throughput and latency --------------------------------------------------------------------

async def routing(server: h.Server) -> str:
    status, body = await h.call("GET", f"{server.api}/shardcat/routing", server.token)
    if status != 200:
        raise RuntimeError(f"GET /shardcat/routing: HTTP {status}: {body[:300]!r}")
    shard = json.loads(body)["my_shard"]
    if URL(shard).host not in ("127.0.0.1", "localhost", "::1"):
        raise RuntimeError(f"the shard listens on {shard}, not on loopback; this benchmark only uses loopback")
    return shard


def workloads(base: str, tables: int) -> dict[str, list[h.Request]]:
    return {"getTable": h.get_requests(base, CATALOG, SCHEMA, tables),
            "listTables": h.list_requests(base, CATALOG, SCHEMA),
            "batch": h.batch_requests(base, CATALOG, SCHEMA, tables)}


async def measure_server(server: h.Server, cache: str, args, cfg, progress, pg_pids, results) -> dict[str, int]:
    shard = await routing(server)
    h.log(f"  owner shard at {shard} (pid {h.pid_listening_on(int(shard.rsplit(':', 1)[1]))})")
    sizes = {}
    for path, base in (("router", server.base), ("direct", shard)):
        loads = workloads(base, args.tables)
        sizes = await h.response_sizes(loads, server.token)
        for op in OPS:
            for c in args.concurrency:
                results.append(await h.measure({"variant": f"cache {cache}, {path}", "operation": op}, loads[op],
                                               server.token, c, cfg, progress, [server.child.pid], pg_pids))
    if server.child.proc.poll() is not None:
        raise RuntimeError(f"shardcat (cache {cache}) exited during the run")
    return sizes


# ---- 4: a metastore of 100,000 tables ---------------------------------------------------------------

async def cache_accounting(db: str, metastore_id: str) -> dict:
    """Fill a MetastoreCache in this process with every table of the big metastore, as a shard's
    lookups would: its own byte accounting, and the Python heap it really takes (tracemalloc)."""
    import gc
    import tracemalloc

    from shardcat.cache.metastore_cache import MetastoreCache
    from shardcat.store.db import Store

    store = await Store.open(db)
    try:
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        _, paths = await store.paths(metastore_id)
        version, tables = await store.get_assets_by_ids(metastore_id, [p.id for p in paths if p.type == "table"])
        cache = MetastoreCache(version, max_bytes=1 << 40)
        cache.fill(tables, version)
        del paths, tables
        gc.collect()
        heap = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        stats = cache.stats()
    finally:
        await store.close()
    return {"entries": stats["entries"], "bytes": stats["bytes"], "heap_bytes": heap}


async def big_metastore(args, tmp: Path, pg: h.Postgres) -> dict:
    n = args.big_tables
    out: dict = {"tables": n}
    db = await pg.database("bench_cache_big")
    h.log(f"== {n:,} tables: the template table through the API (one in-process shard), the rest bulk-inserted")
    seeder = h.start_shardcat(tmp / "big", db, name="big-seed")
    await h.seed_tables(seeder.api, seeder.token, BIG_CATALOG, BIG_SCHEMA, 1)
    h.stop(seeder.child)
    metastore_id, out["insert_s"] = await h.bulk_insert_tables(db, BIG_CATALOG, BIG_SCHEMA, n)
    h.log(f"  inserted in {out['insert_s']:.1f} s")

    get_path = f"{h.PREFIX}/tables/{BIG_CATALOG}.{BIG_SCHEMA}.{h.table_name(n // 2)}"

    h.log("== a fresh shard actor becomes the owner: shardcat serve --shards 1, getTable through the router")
    server = h.start_shardcat(tmp / "big", db, "--shards", "1", "--log-level", "INFO", name="big-ray")
    await routing(server)                        # assigns the metastore; its state still warms lazily
    t0 = time.perf_counter()
    status, body = await h.call("GET", server.base + get_path, server.token)
    out["ray_first_get_s"] = time.perf_counter() - t0
    out["ray_first_get_status"] = status if status == 200 else f"HTTP {status}: {body[:200].decode(errors='replace')}"
    t0 = time.perf_counter()
    status, body = await h.call("GET", server.base + get_path, server.token)
    out["ray_second_get_s"] = time.perf_counter() - t0
    out["ray_second_get_status"] = status if status == 200 else f"HTTP {status}: {body[:200].decode(errors='replace')}"
    h.stop(server.child)
    # the supervisor's view: did it take the busy new owner for a hung one?
    out["ray_supervisor_kills"] = server.child.logfile.read_text(errors="replace").count("shard_unresponsive")
    h.log(f"  first getTable {out['ray_first_get_s'] * 1000:,.0f} ms: {out['ray_first_get_status']}; second "
          f"{out['ray_second_get_s'] * 1000:,.1f} ms: {out['ray_second_get_status']}; "
          f"shards the supervisor declared unresponsive: {out['ray_supervisor_kills']}")

    h.log("== a fresh in-process shard becomes the owner: shardcat serve (no Ray), the shard's own work and memory")
    # Room for every table (twice the cache's estimate of ~12.5 KB each): the cache must not evict here.
    cache_mb = max(256, n * 25 // 1024)
    server = h.start_shardcat(tmp / "big", db, "--cache-mb", str(cache_mb), name="big")
    out["cache_mb"] = cache_mb
    shard, shard_pid = server.base, server.child.pid
    rss = {"idle": h.rss(shard_pid)}
    for key in ("first_get_s", "second_get_s"):
        t0 = time.perf_counter()
        status, body = await h.call("GET", shard + get_path, server.token)
        out[key] = time.perf_counter() - t0
        assert status == 200, body[:300]
    rss["state_built"] = h.rss(shard_pid)
    h.log(f"  first getTable {out['first_get_s'] * 1000:.0f} ms (lazy warm-up), second "
          f"{out['second_get_s'] * 1000:.1f} ms")

    t0 = time.perf_counter()
    names = [f"{BIG_CATALOG}.{BIG_SCHEMA}.{h.table_name(i)}" for i in range(n)]
    for i in range(0, n, RESOLVE_CHUNK):
        body = {"items": [{"name": name} for name in names[i:i + RESOLVE_CHUNK]]}
        status, answer = await h.call("POST", f"{shard}{h.PREFIX}/resolve", server.token, json=body)
        assert status == 200 and b'"error"' not in answer, answer[:300]
        if (i // RESOLVE_CHUNK) % 20 == 0:
            h.log(f"  warming the cache: {i:,}/{n:,} tables, {time.perf_counter() - t0:.1f} s")
    out["warm_all_s"] = time.perf_counter() - t0
    rss["warm"] = h.rss(shard_pid)
    t0 = time.perf_counter()
    for i in range(0, n, RESOLVE_CHUNK):                     # again, now from the cache
        body = {"items": [{"name": name} for name in names[i:i + RESOLVE_CHUNK]]}
        status, _ = await h.call("POST", f"{shard}{h.PREFIX}/resolve", server.token, json=body)
        assert status == 200
    out["resolve_all_cached_s"] = time.perf_counter() - t0
    rss["after_cached_pass"] = h.rss(shard_pid)
    h.log(f"  warmed {n:,} tables in {out['warm_all_s']:.1f} s; a second pass from the cache "
          f"{out['resolve_all_cached_s']:.1f} s")
    for key in ("list_pass1_s", "list_pass2_s"):
        t0, listed, token, pages = time.perf_counter(), 0, None, 0
        while pages < n // LIST_CHUNK + 2:                       # bounded: a page more than needed
            params = {"catalog_name": BIG_CATALOG, "schema_name": BIG_SCHEMA, "max_results": str(LIST_CHUNK)}
            if token:
                params["page_token"] = token
            status, body = await h.call("GET", f"{shard}{h.PREFIX}/tables", server.token, params=params)
            assert status == 200, body[:300]
            page = json.loads(body)
            listed, pages, token = listed + len(page["tables"]), pages + 1, page.get("next_page_token")
            if not token:
                break
        out[key] = time.perf_counter() - t0
        out["list_pages"] = pages
        assert listed == n, f"listed {listed} of {n} tables"
        h.log(f"  listed all {listed:,} tables in {pages} pages of {LIST_CHUNK}: {out[key]:.1f} s")
    rss["listed"] = h.rss(shard_pid)
    out["rss"] = rss
    h.stop(server.child)
    h.log("== the cache's own accounting, from a replica filled in this process")
    out["accounting"] = await cache_accounting(db, metastore_id)
    return out


# ---- run, report, plot --------------------------------------------------------------------------

async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_cache")
    pg_pids = [pg.pid] if pg.pid else []
    cfg = h.LoadConfig(args.warmup, args.duration, args.quiet_wait, args.client)
    rows = len(OPS) * len(args.concurrency) * len(VARIANTS)
    progress = h.Progress(rows, args.warmup + args.duration + 0.5)
    h.log(f"== {rows} rows of {args.warmup:g} + {args.duration:g} s, then the {args.big_tables:,}-table metastore")
    results: list[h.Result] = []
    out: dict = {"postgres_version": None}

    h.log("== shardcat serve --shards 1 (cache on)")
    server = h.start_shardcat(tmp / "main", db, "--shards", "1")
    out["seed_s"] = await h.seed_tables(server.api, server.token, CATALOG, SCHEMA, args.tables)
    sizes = await measure_server(server, "on", args, cfg, progress, pg_pids, results)
    h.stop(server.child)
    h.log("== shardcat serve --shards 1 --no-cache (same database)")
    server = h.start_shardcat(tmp / "main", db, "--shards", "1", "--no-cache", name="shardcat-nocache")
    measure_server_sizes = await measure_server(server, "off", args, cfg, progress, pg_pids, results)
    assert measure_server_sizes == sizes, (measure_server_sizes, sizes)
    h.stop(server.child)

    h.log(f"== bare aiohttp ceiling, sizes {sizes}")
    bare, bare_base = h.start_bare(tmp, sizes)
    loads = workloads(bare_base, args.tables)
    for op in OPS:
        for c in args.concurrency:
            results.append(await h.measure({"variant": "bare", "operation": op}, loads[op], None, c, cfg, progress,
                                           [bare.pid], []))
    h.stop(bare)
    out.update(sizes=sizes, results=results, postgres_version=getattr(pg, "version", None))
    out["big"] = await big_metastore(args, tmp, pg)
    return out


def targets(results: list[h.Result]) -> list[tuple[str, str, bool | None]]:
    """The issue's targets: (what, measured, met)."""
    at = {(r.label["variant"], r.label["operation"], r.concurrency): r for r in results}

    def get(variant, op="getTable", c=32):
        return at.get((variant, op, c))

    out = []
    for path in ("router", "direct"):
        on, off = get(f"cache on, {path}"), get(f"cache off, {path}")
        if on and off and off.rps:
            ratio = on.rps / off.rps
            out.append((f"cached getTable at 32 clients ≥ 5× cache off ({path})",
                        f"{ratio:.1f}× ({on.rps:,.0f} vs {off.rps:,.0f} req/s)", ratio >= 5))
    bare = get("bare")
    for path, share in (("direct", 0.5), ("router", 0.25)):
        r = get(f"cache on, {path}")
        if r and bare and bare.rps:
            out.append((f"getTable at 32 clients, cache on, {'straight to the shard' if path == 'direct' else 'through the router'} "
                        f"≥ {'half' if share == 0.5 else 'a quarter'} of the bare ceiling",
                        f"{r.rps / bare.rps:.1%} ({r.rps:,.0f} vs {bare.rps:,.0f} req/s)", r.rps >= share * bare.rps))
    for variant in ("cache on, router", "cache on, direct"):
        r = get(variant)
        if r and r.p99_ms is not None:
            out.append((f"p99 < 10 ms at 32 clients: getTable, {variant}", f"{h.fmt_ms(r.p99_ms)} ms", r.p99_ms < 10))
    return out


def other_p99s(results: list[h.Result]) -> str:
    """The p99 at 32 clients, cache on, of the operations the targets do not name."""
    at = {(r.label["variant"], r.label["operation"], r.concurrency): r for r in results}
    parts = []
    for op in OPS[1:]:
        router, direct = at.get(("cache on, router", op, 32)), at.get(("cache on, direct", op, 32))
        if router and direct:
            parts.append(f"{op} {h.fmt_ms(router.p99_ms)} ms through the router and {h.fmt_ms(direct.p99_ms)} ms "
                         f"straight to the shard ({direct.rps:,.0f} req/s, {direct.server_cpu / direct.rps * 1e6:,.0f} "
                         "µs of server CPU each)")
    return "; ".join(parts)


def _outcome(status) -> str:
    return "200" if status == 200 else f"**failed: {status}**"


def markdown(run: dict) -> str:
    results = run["results"]
    at = {(r.label["variant"], r.label["operation"], r.concurrency): r for r in results}
    big, rss = run["big"], run["big"]["rss"]
    n = big["tables"]
    acc = big["accounting"]
    sizes = run["sizes"]
    lines = [
        SECTION, "", *h.quick_banner(run["quick"]),
        "- **Reproduce:** `pip install -e \".[bench]\"` (matplotlib)"
        + (" and `apt-get install wrk`" if run["client"] == "wrk" else "") + f", then `{run['command']}` "
        f"(about {run['wall_minutes']:.1f} min); run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        "- **Server:** `shardcat serve --shards 1`: the router process (its front and, behind it, the router app) "
        "and one shard actor (its front and, behind it, the shard app) on a local Ray, one "
        "embedded PostgreSQL; `--no-cache` for the cache-off rows (every read from PostgreSQL: a getTable "
        "reads its caller, the workspace's metastore, then the table; the router still keeps its callers). *router*: "
        "requests to the serve URL; *direct*: the same requests to the owner shard's URL, taken from "
        "`GET /shardcat/routing` (`my_shard`), as a routing client library does.",
        f"- **Data:** one schema of {run['tables']:,} tables of {len(h.COLUMNS)} columns created through the API. "
        f"getTable: a random table ({sizes['getTable']:,} B answer); listTables: first page of "
        f"`max_results={h.LIST_PAGE}` ({sizes['listTables']:,} B); batch: `POST /resolve` of {h.BATCH} random "
        f"table names ({sizes['batch']:,} B).",
        f"- **Load:** {h.LOAD_TEXT[run['client']]}; "
        f"{run['warmup_s']:g} s warm-up then {run['duration_s']:g} s measured per row; latency from sending a request "
        "to having read its whole body. **Ceiling** (*bare*): `benchmarks/bare_server.py` answering constant "
        "bodies of the same sizes on the same URLs, measured the same way in the same run. All servers run on "
        "uvloop, `shardcat serve`'s default.",
        "- **Caveat:** the load generator, the servers, Ray and PostgreSQL share the machine's cores, so the "
        "client's own CPU is part of every number (the ceiling's too). ⚠: during that row other processes used "
        f"more than {h.NOISY_CORES} cores. Per-row CPU (server tree, PostgreSQL, client, rest) is in the raw JSON.",
        "",
        "Each cell: req/s (p50 / p99 ms).",
        "",
        "| operation | clients | " + " | ".join(VARIANTS) + " |",
        "| --- | ---: |" + " ---: |" * len(VARIANTS),
    ]
    for op in OPS:
        for c in run["concurrency"]:
            cells = []
            for v in VARIANTS:
                r = at.get((v, op, c))
                cells.append("-" if r is None else f"{h.fmt_rps(r)} ({h.fmt_ms(r.p50_ms)} / {h.fmt_ms(r.p99_ms)})"
                             + (f" **{r.errors} errors**" if r.errors else ""))
            lines.append(f"| {op} | {c} | " + " | ".join(cells) + " |")
    lines += ["", f"![latency vs throughput](img/{PLOT.name})", "", "### Targets", "",
              "| target | measured | met |", "| --- | --- | --- |"]
    for what, measured, met in targets(results):
        lines.append(f"| {what} | {measured} | {'yes' if met else '**no**'} |")
    lines += ["", "The targets are the issue's, and they name cached getTable. The other operations' p99 at 32 "
              f"clients, cache on: {other_p99s(results)}. Those answers are 100 or 50 tables long, and 32 clients "
              "queue for one shard process."]
    per = lambda a, b: (rss[b] - rss[a]) / n   # noqa: E731
    lines += [
        "", f"### A metastore of {n:,} tables", "",
        f"The tables (copies of one created through the API) are inserted straight into PostgreSQL in one metastore "
        f"write ({big['insert_s']:.0f} s). Then two fresh owners, each a new process on that database: a shard "
        "actor behind the router (`shardcat serve --shards 1`: the path a metastore takes when it moves), and an "
        f"in-process shard (`shardcat serve --cache-mb {big['cache_mb']}`, no Ray, no supervisor) for the "
        "shard's own work and memory. A new owner builds the metastore's state lazily, on its first request: it "
        "reads every asset with a storage path and puts the paths into its URL trie.",
        "",
        "| measure | value |", "| --- | --- |",
        f"| shard actor behind the router: first getTable | {big['ray_first_get_s'] * 1000:,.0f} ms, "
        f"{_outcome(big['ray_first_get_status'])} |",
        f"| shard actor behind the router: second getTable | {big['ray_second_get_s'] * 1000:,.1f} ms, "
        f"{_outcome(big['ray_second_get_status'])} |",
        f"| shard actors the supervisor declared unresponsive (and killed) meanwhile | {big['ray_supervisor_kills']} |",
        f"| in-process shard: first getTable | {big['first_get_s'] * 1000:,.0f} ms |",
        f"| in-process shard: second getTable | {big['second_get_s'] * 1000:.1f} ms |",
        f"| warm every table into the cache: batch resolves of {RESOLVE_CHUNK} names, straight to the shard "
        f"| {big['warm_all_s']:.1f} s |",
        f"| the same resolves again, from the cache | {big['resolve_all_cached_s']:.1f} s |",
        f"| then list the whole schema, {big['list_pages']} pages of {LIST_CHUNK:,}, straight to the shard: "
        f"first pass / second pass | {big['list_pass1_s']:.1f} s / {big['list_pass2_s']:.1f} s |",
        "| shard process RSS: idle / state built / all cached / after listing | "
        + " / ".join(f"{rss[k] / 2**20:,.0f}" for k in ("idle", "state_built", "warm", "listed")) + " MiB |",
        f"| RSS growth per table, state and cache together (idle → all cached) | {per('idle', 'warm'):,.0f} B |",
        f"| of which: building the state (idle → state built; includes the rebuild's transient heap, which "
        f"the allocator keeps and the cache then reuses) | {per('idle', 'state_built'):,.0f} B |",
        f"| of which: filling the cache (state built → all cached) | {per('state_built', 'warm'):,.0f} B |",
        f"| cache's own accounting per table (`MetastoreCache.stats()[\"bytes\"]` / entries, replica) "
        f"| {acc['bytes'] / max(1, acc['entries']):,.0f} B ({acc['entries']:,} entries) |",
        f"| Python heap per cached table (tracemalloc of the replica: assets and cache indexes) "
        f"| {acc['heap_bytes'] / max(1, acc['entries']):,.0f} B |",
        "", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", "",
    ]
    return "\n".join(lines)


def plot(run: dict, path: Path) -> None:
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(OPS), figsize=(5 * len(OPS), 4.5))
    colors = dict(zip(VARIANTS, ("black", "tab:blue", "tab:green", "tab:orange", "tab:red")))
    for ax, op in zip(axes, OPS):
        for v in VARIANTS:
            rs = sorted((r for r in run["results"] if r.label["variant"] == v and r.label["operation"] == op
                         and r.p50_ms is not None), key=lambda r: r.concurrency)
            if not rs:
                continue
            x = [r.rps for r in rs]
            ax.plot(x, [r.p50_ms for r in rs], "o-", color=colors[v], label=v)
            ax.plot(x, [r.p99_ms for r in rs], "^--", color=colors[v], alpha=0.6)
            for r in rs:
                ax.annotate(str(r.concurrency), (r.rps, r.p50_ms), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())   # minor labels overlap
        ax.set_title(op)
        ax.set_xlabel("throughput, req/s")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("latency, ms (solid p50, dashed p99)")
    axes[0].legend(fontsize=8)
    fig.suptitle("shardcat: latency vs throughput at 1-128 clients (labels: clients)"
                 + (" — QUICK RUN, noise" if run["quick"] else ""))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_cache", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="2 s windows, 1 and 32 clients, 10,000 tables in the big metastore: a smoke run")
    p.add_argument("--out", type=Path, default=h.DOCS, help="markdown file whose section to rewrite")
    p.add_argument("--no-docs", action="store_true", help="print the section, write neither it nor the plot")
    p.add_argument("--duration", type=float, help="seconds measured per row (default 7, quick 2)")
    p.add_argument("--warmup", type=float, help="seconds of warm-up per row (default 2, quick 0.5)")
    p.add_argument("--client", choices=sorted(h.LOADS), default="wrk",
                   help="the load generator (default wrk: Debian's package)")
    p.add_argument("--tables", type=int, default=1000, help="tables in the measured schema")
    p.add_argument("--big-tables", type=int, help="tables in the big metastore (default 100000, quick 10000)")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")],
                   help="comma-separated client counts (default 1,8,32,128; quick 1,32)")
    p.add_argument("--quiet-wait", type=float, help="before each row, wait at most this long for the machine to "
                                                    "go quiet (default 20, quick 0)")
    args = p.parse_args(argv)
    args.duration = args.duration or (2.0 if args.quick else 7.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 2.0)
    args.big_tables = args.big_tables or (10_000 if args.quick else 100_000)
    args.concurrency = args.concurrency or ([1, 32] if args.quick else [1, 8, 32, 128])
    args.quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0.0 if args.quick else 20.0)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    h.require_wrk(args.client)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    h.log(f"bench_cache: {info['cores']} cores, {info['cpu_model']}, {info['ram_gib']} GiB RAM")
    outcome = h.run_with_postgres("shardcat-bench-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_cache", *argv]),
                "machine": info, "tables": args.tables, "warmup_s": args.warmup, "duration_s": args.duration,
                "concurrency": args.concurrency, "quick": args.quick, "client": args.client,
                "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    if not args.no_docs:
        plot(run_info, PLOT)
        h.log(f"plot in {PLOT.relative_to(h.ROOT)}")
    h.publish("bench_cache", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
