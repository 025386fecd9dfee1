"""Scale benchmark: how each cost grows with the tables of a metastore and the metastores of a shard.

    python -m benchmarks.bench_scale [--quick] [--out docs/benchmarks.md]

One run, one embedded PostgreSQL (issue #48):

1. Tables per metastore, 10K, 100K, 1M: one schema, its tables copies of one made through the API,
   inserted straight into PostgreSQL by COPY in one metastore write (as bench_cache does), grown
   from one size to the next. At each size a fresh `shardcat serve` (an in-process shard) becomes
   the owner: its first getTable (cold), its first write (a createTable right after the cold read:
   "cold read + first write"; before issue #48's cold tries it waited for the whole path index),
   then warm p50/p99 of getTable, listTables (a page of 100 at random places in the schema: keyset
   pages) and createTable, one request at a time,
   and the server's RSS; then a user's (no admin) first getTable on a fresh owner, once deciding from
   the table's chain while the whole privilege index loads aside, once waiting for the whole index
   (`--privileges-aside-above` past the size). In this process: the resident bytes per asset of a shard's state (the
   path index), of the privilege index, and of a cached table (tracemalloc).
2. Metastores per shard, 10, 1K, 10K, each a catalog, a schema and 10 tables (rows copied straight
   into PostgreSQL): one in-process Shard touches every one (a cold getTable each), then the
   bytes per owned metastore, the cold-touch p50/p99, a hot metastore's warm getTable among them,
   and what is left once idle metastores are evicted (when the shard evicts them).
3. A Zipf workload (s = 1.1) over a catalog ten times larger than the cache: p50/p99 of getTable
   (in-process shard lookups) against the cache's bound.

Each cost's growth is stated from the fitted slope of log(cost) over log(size): under 0.15 constant,
over 0.8 linear, between them sublinear (a log-like curve). Writes its section of docs/benchmarks.md,
plots docs/img/bench_scale.png (matplotlib: the `bench` extra) and the raw numbers under
benchmarks/out/. `--quick`: 10K and 100K tables, 10 and 1K metastores.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import math
import os
import random
import shlex
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

from . import harness as h

SECTION = "## Scale: tables per metastore, metastores per shard, caches smaller than the catalog"
PLOT = h.ROOT / "docs" / "img" / "bench_scale.png"
CATALOG, SCHEMA = "big", "s"
COPY_CHUNK = 50_000          # rows per COPY: bounds this process's memory at 1M tables
SAMPLES = 300                # sequential requests per warm percentile
CREATES = 100
PAGE = 100
CACHED_SAMPLE = 10_000       # tables filled into a cache replica to weigh a cached table
TABLES_PER_METASTORE = 10
COLD_TIMEOUT = 900           # seconds a cold owner's first answers may take (the baseline's took over a minute at 1M)
TRACEMALLOC_UP_TO = 200_000  # past this many tables the state's bytes are the process's RSS growth (tracemalloc is slow)


def log(msg: str) -> None:
    h.log(f"[{time.strftime('%H:%M:%S')}] {msg}")


def pct(values: list[float], p: float) -> float:
    return h.percentile(sorted(values), p)


def growth(xs: list[float], ys: list[float]) -> tuple[float, str]:
    """The slope of log(y) over log(x) (least squares) and what it says."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return float("nan"), "-"
    mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else float("nan")
    word = "constant" if abs(slope) < 0.15 else "linear" if slope > 0.8 else "sublinear (log-like)" if slope > 0 \
        else "falling"
    return slope, word


# ---- data, straight into PostgreSQL ---------------------------------------------------------------

async def _jsonb_conn(db: str):
    import asyncpg
    conn = await asyncpg.connect(db, timeout=30)
    await conn.set_type_codec("jsonb", schema="pg_catalog", format="binary",
                              encoder=lambda v: b"\x01" + json.dumps(v).encode(), decoder=lambda b: json.loads(b[1:]))
    return conn


def _copy_of(t, i: int, new_id: uuid.UUID, ms, parent_id, version: int, catalog: str, schema: str) -> tuple:
    old_path = t["storage_path"]
    path = old_path.replace(str(t["id"]), str(new_id)) if str(t["id"]) in old_path else f"{old_path.rstrip('/')}-{i}"
    info = {k: (path if v == old_path else v) for k, v in t["info"].items()}
    info["comment"] = f"benchmark table number {i}"
    name = h.table_name(i)
    return (new_id, ms, "table", "table", parent_id, name, f"{catalog}.{schema}.{name}", path, info, version)


ASSET_COLUMNS = ["id", "metastore_id", "type", "namespace", "parent_id", "name", "full_name", "storage_path", "info",
                 "written_at"]


async def grow_tables(db: str, start: int, end: int) -> tuple[str, float]:
    """Tables t{start}..t{end-1} of big.s, copies of t000000, in one metastore write (COPY in chunks)."""
    t0 = time.perf_counter()
    conn = await _jsonb_conn(db)
    try:
        t = await conn.fetchrow("SELECT * FROM assets WHERE type = 'table' AND full_name = $1",
                                f"{CATALOG}.{SCHEMA}.{h.table_name(0)}")
        ms = t["metastore_id"]
        async with conn.transaction():
            version = await conn.fetchval("UPDATE metastores SET version = version + 1 WHERE id = $1 RETURNING version",
                                          ms)
            for lo in range(start, end, COPY_CHUNK):
                rows = [_copy_of(t, i, uuid.uuid4(), ms, t["parent_id"], version, CATALOG, SCHEMA)
                        for i in range(lo, min(end, lo + COPY_CHUNK))]
                await conn.copy_records_to_table("assets", records=rows, columns=ASSET_COLUMNS)
                log(f"  inserted {min(end, lo + COPY_CHUNK):,} tables")
            # the change log names the schema: its listing changed (the ids are too many to list usefully)
            await conn.execute("INSERT INTO change_log VALUES ($1, $2, $3::uuid[], $4::uuid[], $5)",
                               ms, version, [t["parent_id"]], [t["parent_id"]], int(time.time() * 1000))
        await conn.execute("ANALYZE assets")
    finally:
        await conn.close()
    return str(ms), time.perf_counter() - t0


async def add_metastores(db: str, count: int, first: int) -> list[str]:
    """`count` more metastores, each a copy of big's metastore row with its catalog, schema and
    TABLES_PER_METASTORE tables; returns their ids."""
    conn = await _jsonb_conn(db)
    try:
        t = await conn.fetchrow("SELECT * FROM assets WHERE type = 'table' AND full_name = $1",
                                f"{CATALOG}.{SCHEMA}.{h.table_name(0)}")
        src_ms = await conn.fetchrow("SELECT * FROM metastores WHERE id = $1", t["metastore_id"])
        schema = await conn.fetchrow("SELECT * FROM assets WHERE id = $1", t["parent_id"])
        catalog = await conn.fetchrow("SELECT * FROM assets WHERE id = $1", schema["parent_id"])
        ids, ms_rows, homes, assets = [], [], [], []
        now = int(time.time() * 1000)
        for k in range(first, first + count):
            ms = uuid.uuid4()
            ids.append(str(ms))
            name = f"scale-{k:05d}"
            ms_rows.append((ms, name, 1, dict(src_ms["info"], name=name)))
            homes.append((ms, name, "", now))
            cat_id, sch_id = uuid.uuid4(), uuid.uuid4()
            for row, new_id, parent in ((catalog, cat_id, ms), (schema, sch_id, cat_id)):
                assets.append((new_id, ms, row["type"], row["namespace"], parent, row["name"], row["full_name"],
                               row["storage_path"], row["info"], 1))
            assets += [_copy_of(t, i, uuid.uuid4(), ms, sch_id, 1, CATALOG, SCHEMA) for i in range(TABLES_PER_METASTORE)]
        async with conn.transaction():
            await conn.copy_records_to_table("metastores", records=ms_rows, columns=["id", "name", "version", "info"])
            await conn.copy_records_to_table("metastore_homes", records=homes,
                                             columns=["metastore_id", "name", "home", "homed_at"])
            await conn.copy_records_to_table("assets", records=assets, columns=ASSET_COLUMNS)
        await conn.execute("ANALYZE assets")
    finally:
        await conn.close()
    return ids


# ---- in this process: bytes per asset -------------------------------------------------------------

def _heap() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _retained_rss() -> int:
    """The process's RSS once garbage is collected and malloc has returned its free pages (what a
    load read and let go, a million rows, would otherwise still count)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):       # not glibc: RSS as it is
        pass
    return h.rss(os.getpid())


async def _warm_state(shard, ms: str):
    state = await shard.state(ms)
    warmed = getattr(shard, "warmed", None)      # a shard that builds its path index in the background
    if warmed is not None:
        state = await warmed(ms)
    return state


async def resident_bytes(db: str, ms: str, n: int) -> dict:
    """tracemalloc of a shard's state (path index) and privilege index of the metastore, and of a
    cache replica holding CACHED_SAMPLE of its tables."""
    from shardcat.cache.metastore_cache import MetastoreCache
    from shardcat.governance.index import load_index
    from shardcat.shards.shard import CacheConfig, Shard
    from shardcat.store.db import Store

    store = await Store.open(db)
    out = {}
    try:
        # The privilege index first: its load timed as a cold owner pays it, untraced (with the RSS it
        # leaves behind, allocator and all), then its own objects weighed by tracemalloc at every size.
        base = _retained_rss()
        t0 = time.perf_counter()
        _, index = await load_index(store, ms)
        out["privilege_load_s"] = time.perf_counter() - t0     # what a cold owner's first governed request waited
        out["privilege_rss_bytes"] = _retained_rss() - base
        del index
        tracemalloc.start()
        base = _heap()
        _, index = await load_index(store, ms)
        out["privilege_bytes"] = _heap() - base
        del index
        tracemalloc.stop()
        shard = Shard(store, cache=CacheConfig(max_bytes=1 << 40))
        traced = n <= TRACEMALLOC_UP_TO
        out["measured_by"] = "tracemalloc" if traced else "RSS growth"
        if traced:
            tracemalloc.start()
        heap = _heap if traced else _retained_rss
        base = heap()
        t0 = time.perf_counter()
        state = await _warm_state(shard, ms)
        out["paths_in_db"] = bool(getattr(state, "paths_in_db", False))
        del state
        out["state_build_s"] = time.perf_counter() - t0
        out["state_bytes"] = heap() - base
        if not traced:
            tracemalloc.start()
        _, paths = await store.paths(ms)
        sample = random.Random(3).sample([p.id for p in paths if p.type == "table"], min(CACHED_SAMPLE, n))
        del paths
        base = _heap()        # the tables' decoded bodies count: a cached table keeps them
        version, tables = await store.get_assets_by_ids(ms, sample)
        cache = MetastoreCache(version, max_bytes=1 << 40)
        cache.fill(tables, version)
        del tables
        out["cached_heap_bytes"] = _heap() - base
        stats = cache.stats()
        out["cached_entries"], out["cached_accounted_bytes"] = stats["entries"], stats["bytes"]
        tracemalloc.stop()
    finally:
        await store.close()
    out.update(await owner_reads(db, ms))
    out["state_per_asset"] = out["state_bytes"] / n
    out["privilege_per_asset"] = out["privilege_bytes"] / n
    out["privilege_rss_per_asset"] = out["privilege_rss_bytes"] / n
    out["cached_per_table"] = out["cached_heap_bytes"] / max(1, out["cached_entries"])
    return out


# The privilege index's read of every securable's owner: from its column (migration 0019), and the
# baseline, out of each asset's JSON body as before. Each twice, alternating; the second of each counts.
OWNER_READS = {
    "owners_column_s": "SELECT id, parent_id, type, full_name, owner FROM assets "
                       "WHERE metastore_id = $1 AND type <> 'staging_table'",
    "owners_from_json_s": "SELECT id, parent_id, type, full_name, info->>'owner' AS owner FROM assets "
                          "WHERE metastore_id = $1 AND type <> 'staging_table'",
}


async def owner_reads(db: str, ms: str) -> dict:
    import asyncpg
    conn = await asyncpg.connect(db)
    out = {}
    try:
        for _ in range(2):
            for key, sql in OWNER_READS.items():
                t0 = time.perf_counter()
                await conn.fetch(sql, uuid.UUID(ms))
                out[key] = time.perf_counter() - t0
    finally:
        await conn.close()
    log(f"  owners read: {out['owners_column_s']:.2f} s from their column, {out['owners_from_json_s']:.2f} s "
        "from the JSON bodies (before migration 0019)")
    return out


# ---- 1: one metastore, 10K to 1M tables, served ---------------------------------------------------

async def timed_call(method: str, url: str, token: str, timeout: float = 60, **kw) -> tuple[float, int, bytes]:
    import aiohttp
    t0 = time.perf_counter()
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"},
                                     timeout=aiohttp.ClientTimeout(total=timeout)) as s:
        async with s.request(method, url, **kw) as r:
            status, body = r.status, await r.read()
    return (time.perf_counter() - t0) * 1000, status, body


async def sequential(session, method: str, urls_bodies, token: str) -> list[float]:
    """Latencies (ms) of requests sent one at a time on one connection; every answer must be a 200."""
    out = []
    for url, body in urls_bodies:
        t0 = time.perf_counter()
        async with session.request(method, url, json=body) as r:
            data = await r.read()
            if r.status != 200:
                raise RuntimeError(f"{method} {url}: HTTP {r.status}: {data[:300]!r}")
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def serve_size(tmp: Path, db: str, n: int, created: int) -> dict:
    import aiohttp

    from shardcat.web.paging import encode_page_token
    rng = random.Random(n)
    out: dict = {"tables": n}
    server = h.start_shardcat(tmp / "data", db, "--cache-mb", str(max(256, n * 4 // 1024)), name=f"serve-{n}")
    api, token, pid = server.api, server.token, server.child.pid
    try:
        out["rss_idle"] = h.rss(pid)
        get = f"{api}/tables/{CATALOG}.{SCHEMA}.{h.table_name(n // 2)}"
        out["cold_get_ms"], status, body = await timed_call("GET", get, token, timeout=COLD_TIMEOUT)
        assert status == 200, body[:300]
        # A read by path right after: its path is not loaded yet (once, it waited for the whole index).
        path = json.loads(body)["storage_location"]
        out["cold_path_ms"], status, answer = await timed_call(
            "POST", f"{api}/resolve", token, timeout=COLD_TIMEOUT,
            json={"items": [{"path": path}], "credentials": False})
        assert status == 200 and json.loads(answer)["items"][0].get("table", {}).get("storage_location") == path, \
            answer[:300]
        body = h.table_body(CATALOG, SCHEMA, 0) | {"name": f"c{created:07d}"}
        out["warm_create_ms"], status, answer = await timed_call("POST", f"{api}/tables", token, timeout=COLD_TIMEOUT,
                                                                 json=body)
        assert status == 200, answer[:300]
        out["time_to_warm_ms"] = out["cold_get_ms"] + out["warm_create_ms"]
        out["rss_state"] = h.rss(pid)
        log(f"  {n:,} tables: cold getTable {out['cold_get_ms']:,.0f} ms; first createTable {out['warm_create_ms']:,.0f} ms")
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"},
                                         timeout=aiohttp.ClientTimeout(total=60)) as s:
            picks = [rng.randrange(n - created) for _ in range(SAMPLES // 3)]   # the t-tables
            urls = [(f"{api}/tables/{CATALOG}.{SCHEMA}.{h.table_name(i)}", None) for i in picks]
            await sequential(s, "GET", urls, token)                     # now cached
            lat = await sequential(s, "GET", [urls[rng.randrange(len(urls))] for _ in range(SAMPLES)], token)
            out["get_p50"], out["get_p99"] = pct(lat, 50), pct(lat, 99)
            base = f"{api}/tables?catalog_name={CATALOG}&schema_name={SCHEMA}&max_results={PAGE}"
            pages = []
            for _ in range(SAMPLES):
                at = rng.randrange(n)
                pages.append((base + ("" if at == 0 else "&page_token=" + encode_page_token(h.table_name(at))), None))
            await sequential(s, "GET", pages[:20], token)
            lat = await sequential(s, "GET", pages, token)
            out["list_p50"], out["list_p99"] = pct(lat, 50), pct(lat, 99)
            # the first page and the last: a keyset page costs the same wherever it starts
            first = await sequential(s, "GET", [(base, None)] * 30, token)
            last = await sequential(s, "GET", [(base + "&page_token=" + encode_page_token(h.table_name(n - PAGE)),
                                                None)] * 30, token)
            out["list_first_p50"], out["list_last_p50"] = pct(first, 50), pct(last, 50)
            bodies = [(f"{api}/tables", h.table_body(CATALOG, SCHEMA, 0) | {"name": f"c{created + 1 + i:07d}"})
                      for i in range(CREATES)]
            lat = await sequential(s, "POST", bodies, token)
            out["create_p50"], out["create_p99"] = pct(lat, 50), pct(lat, 99)
        out["rss_end"] = h.rss(pid)
        reader = await _reader(db, api, token, get.rsplit("/", 1)[-1])
        log(f"  warm p50/p99 ms: getTable {out['get_p50']:.1f}/{out['get_p99']:.1f}, listTables "
            f"{out['list_p50']:.1f}/{out['list_p99']:.1f} (first page {out['list_first_p50']:.1f}, last "
            f"{out['list_last_p50']:.1f}), createTable {out['create_p50']:.1f}/{out['create_p99']:.1f}")
    finally:
        h.stop(server.child)
    out.update(await governed_cold_reads(tmp, db, n, get, reader))
    out["created"] = 1 + CREATES
    return out


async def _reader(db: str, api: str, admin_token: str, table: str) -> str:
    """A token of a new user (no admin) in the admin's workspace, granted what reading `table` needs."""
    import aiohttp

    from shardcat.auth import hash_token, new_token
    from shardcat.store.db import Store
    store = await Store.open(db, min_size=1, max_size=2)
    try:
        name = f"reader_{uuid.uuid4().hex[:8]}"
        principal = await store.create_principal(name, "user")
        workspace = await store.pool.fetchval("SELECT workspace_id FROM tokens WHERE token_hash = $1",
                                              hash_token(admin_token))
        token = new_token()
        await store.add_token(principal.id, hash_token(token), workspace)
    finally:
        await store.close()
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin_token}"}) as s:
        for kind, securable, privilege in (("catalog", CATALOG, "USE CATALOG"), ("schema", f"{CATALOG}.{SCHEMA}",
                                           "USE SCHEMA"), ("table", table, "SELECT")):
            async with s.patch(f"{api}/permissions/{kind}/{securable}",
                               json={"changes": [{"principal": name, "add": [privilege]}]}) as r:
                assert r.status == 200, await r.text()
    return token


async def governed_cold_reads(tmp: Path, db: str, n: int, get: str, token: str) -> dict:
    """A user's (no admin) first getTable on a fresh owner, twice in one run: deciding from the table's
    chain while the whole privilege index loads aside (`--privileges-aside-above 0`; by default past
    100,000 securables) and waiting for the whole index (the threshold past the metastore's size)."""
    out = {}
    for mode, above in (("aside", 0), ("whole", 10 * n)):
        extra = ("--privileges-aside-above", str(above))
        server = h.start_shardcat(tmp / "data", db, *extra, name=f"governed-{mode}-{n}")
        try:
            url = server.api + get[get.index("/tables/"):]        # the same table on this server
            out[f"governed_{mode}_ms"], status, body = await timed_call("GET", url, token, timeout=COLD_TIMEOUT)
            assert status == 200, body[:300]
        finally:
            h.stop(server.child)
    log(f"  a user's cold getTable: {out['governed_aside_ms']:,.0f} ms deciding from its chain, "
        f"{out['governed_whole_ms']:,.0f} ms waiting for the whole privilege index")
    return out


# ---- 2: many metastores in one shard ---------------------------------------------------------------

async def many_metastores(db: str, ids: list[str]) -> dict:
    from shardcat.shards.shard import Shard
    from shardcat.store.db import Store

    store = await Store.open(db)
    out: dict = {"metastores": len(ids)}
    name = f"{CATALOG}.{SCHEMA}.{h.table_name(0)}"
    try:
        shard = Shard(store)
        tracemalloc.start()
        base = _heap()
        cold = []
        for k, ms in enumerate(ids):
            t0 = time.perf_counter()
            asset = await shard.lookup(ms, "table", name)
            cold.append((time.perf_counter() - t0) * 1000)
            assert asset is not None and asset.full_name == name
            if k and k % 2000 == 0:
                log(f"  touched {k:,}/{len(ids):,} metastores")
        out["bytes_per_metastore"] = (_heap() - base) / len(ids)
        out["cold_p50"], out["cold_p99"] = pct(cold, 50), pct(cold, 99)
        evict = getattr(shard, "evict_idle", None)
        if evict is not None:           # a shard that drops idle metastores
            before = _heap()
            evicted = evict(now=time.monotonic() + 10 ** 6, keep={ids[0]})
            out["evicted"] = evicted
            out["bytes_freed_per_metastore"] = (before - _heap()) / max(1, evicted)
            # what an idle metastore still costs: its cold state (the traced heap counts from before the first touch)
            out["bytes_left_per_idle_metastore"] = (_heap() - base) / len(ids)
            out["owned_after_eviction"] = len(shard.states)
        tracemalloc.stop()          # before the hot loop: tracing slows every allocation
        hot = ids[0]
        lat = []
        for _ in range(2000):
            t0 = time.perf_counter()
            await shard.lookup(hot, "table", name)
            lat.append((time.perf_counter() - t0) * 1e6)
        out["hot_get_p50_us"], out["hot_get_p99_us"] = pct(lat, 50), pct(lat, 99)
    finally:
        await store.close()
    log(f"  {len(ids):,} metastores: {out['bytes_per_metastore']:,.0f} B each; cold touch p50/p99 "
        f"{out['cold_p50']:.1f}/{out['cold_p99']:.1f} ms; hot getTable p50 {out['hot_get_p50_us']:.0f} µs")
    return out


# ---- 3: Zipf over a catalog ten times the cache ----------------------------------------------------

async def zipf(db: str, ms: str, n: int, fractions: list[float], requests: int) -> list[dict]:
    """getTable lookups (in-process shard) drawn from a Zipf(1.1) over the first `n` tables, with the
    cache bounded to a fraction of what they take."""
    from shardcat.cache.metastore_cache import asset_size
    from shardcat.shards.shard import CacheConfig, Shard
    from shardcat.store.db import Store

    store = await Store.open(db)
    rows = []
    try:
        probe = Shard(store)
        one = await probe.lookup(ms, "table", f"{CATALOG}.{SCHEMA}.{h.table_name(0)}")
        catalog_bytes = n * asset_size(one)
        weights = [1 / (k + 1) ** 1.1 for k in range(n)]
        rng = random.Random(11)
        order = list(range(n))
        rng.shuffle(order)
        draws = [order[k] for k in rng.choices(range(n), weights, k=requests)]
        warm = [order[k] for k in rng.choices(range(n), weights, k=requests // 2)]   # the same law, other draws
        for fraction in fractions:
            shard = Shard(store, cache=CacheConfig(max_bytes=int(catalog_bytes * fraction)))
            await _warm_state(shard, ms)
            for i in warm:
                await shard.lookup(ms, "table", f"{CATALOG}.{SCHEMA}.{h.table_name(i)}")
            cache = shard.states[ms].cache
            before = dict(cache.stats())
            lat = []
            for i in draws:
                t0 = time.perf_counter()
                await shard.lookup(ms, "table", f"{CATALOG}.{SCHEMA}.{h.table_name(i)}")
                lat.append((time.perf_counter() - t0) * 1000)
            stats = cache.stats()
            hits, misses = stats["hits"] - before["hits"], stats["misses"] - before["misses"]
            rows.append({"fraction": fraction, "cache_bytes": int(catalog_bytes * fraction), "p50": pct(lat, 50),
                         "p99": pct(lat, 99), "hit_ratio": hits / max(1, hits + misses),
                         "evictions": stats["evictions"] - before["evictions"], "resident": stats["bytes"]})
            log(f"  cache {fraction:.0%} of the catalog: p50 {rows[-1]['p50']:.2f} ms, p99 {rows[-1]['p99']:.2f} ms, "
                f"hit ratio {rows[-1]['hit_ratio']:.1%}")
    finally:
        await store.close()
    return rows


# ---- run, report, plot -----------------------------------------------------------------------------

async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_scale")
    out: dict = {"sizes": [], "metastores": [], "zipf": []}
    log("== seed: the template table through the API")
    seeder = h.start_shardcat(tmp / "data", db, name="seed")
    await h.seed_tables(seeder.api, seeder.token, CATALOG, SCHEMA, 1)
    h.stop(seeder.child)
    have, created = 1, 0
    ms = None
    for n in args.tables:
        log(f"== {n:,} tables in one schema")
        ms, insert_s = await grow_tables(db, have, n - created)
        have = n - created
        row = await serve_size(tmp, db, n, created)
        created += row["created"]
        row["insert_s"] = insert_s
        log("  resident bytes (tracemalloc, in this process)")
        row.update(await resident_bytes(db, ms, n))
        log(f"  privilege index loaded in {row['privilege_load_s']:.2f} s, "
            f"{row['privilege_rss_per_asset']:,.0f} B/asset of RSS left after it")
        log(f"  state {row['state_per_asset']:,.0f} B/asset, privileges {row['privilege_per_asset']:,.0f} B/asset, "
            f"cached table {row['cached_per_table']:,.0f} B")
        out["sizes"].append(row)
        if n == args.zipf_tables:
            log(f"== Zipf getTable over {n:,} tables against the cache's bound")
            out["zipf"] = await zipf(db, ms, n, args.zipf_fractions, args.zipf_requests)
    made = 0
    for m in args.metastores:
        log(f"== {m:,} metastores of {TABLES_PER_METASTORE} tables in one shard")
        ids = await add_metastores(db, m - made, made) if m > made else []
        out.setdefault("_ids", []).extend(ids)
        made = m
        out["metastores"].append(await many_metastores(db, out["_ids"][:m]))
    out.pop("_ids", None)
    out["postgres_version"] = getattr(pg, "version", None)
    return out


def markdown(run: dict) -> str:
    sizes, mss = run["sizes"], run["metastores"]
    xs = [r["tables"] for r in sizes]
    lines = [SECTION, "", *h.quick_banner(run["quick"]),
             f"- **Reproduce:** `pip install -e \".[bench]\"` (matplotlib), then `{run['command']}` "
             f"(about {run['wall_minutes']:.0f} min); run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             "- **Data:** one schema of copies of one table of 8 columns (made through the API), inserted by COPY "
             "straight into PostgreSQL in one metastore write per size; each size a fresh `shardcat serve` "
             "(in-process shard) on it. Requests one at a time on one connection (latency, not throughput).",
             "- **Resident bytes** are tracemalloc's, in the benchmark's own process (the state's past "
             f"{TRACEMALLOC_UP_TO:,} tables: the process's RSS growth): a shard's "
             "state of the metastore (its path index: whole in memory, or kept in PostgreSQL past "
             "`--path-index-max`), the privilege index (its load timed untraced; in brackets the RSS it left, "
             "malloc's free pages returned), and a cache replica of "
             f"{CACHED_SAMPLE:,} tables (bytes per cached table).", "",
             "| tables | cold getTable | a user's cold getTable (index aside / whole) | cold read by path "
             "| cold read + first write | getTable p50/p99 "
             "| listTables p50/p99 (first / last page p50) "
             "| createTable p50/p99 | path index | state B/asset | privileges B/asset [RSS] (load) | cached table B "
             "| RSS idle → warm → end |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :--- | ---: | ---: | ---: | ---: |"]
    for r in sizes:
        lines.append(
            f"| {r['tables']:,} | {r['cold_get_ms']:,.0f} ms | {r.get('governed_aside_ms', float('nan')):,.0f} / "
            f"{r.get('governed_whole_ms', float('nan')):,.0f} ms | {r.get('cold_path_ms', float('nan')):,.0f} ms | "
            f"{r['time_to_warm_ms']:,.0f} ms | "
            f"{r['get_p50']:.1f} / {r['get_p99']:.1f} ms | {r['list_p50']:.1f} / {r['list_p99']:.1f} ms "
            f"({r['list_first_p50']:.1f} / {r['list_last_p50']:.1f}) | {r['create_p50']:.1f} / {r['create_p99']:.1f} ms | "
            f"{'in PostgreSQL' if r.get('paths_in_db') else 'in memory'} | {r['state_per_asset']:,.0f} | "
            f"{r['privilege_per_asset']:,.0f} [{r.get('privilege_rss_per_asset', float('nan')):,.0f}] "
            f"({r.get('privilege_load_s', float('nan')):.1f} s) | {r['cached_per_table']:,.0f} | "
            + " → ".join(f"{r[k] / 2 ** 20:,.0f}" for k in ("rss_idle", "rss_state", "rss_end")) + " MiB |")
    lines += ["", "Growth with the tables of the metastore (slope of log cost over log tables):", ""]
    for key, what in (("cold_get_ms", "cold getTable"), ("governed_aside_ms", "a user's cold getTable, index aside"),
                      ("governed_whole_ms", "a user's cold getTable, waiting for the whole index"),
                      ("cold_path_ms", "cold read by path"),
                      ("time_to_warm_ms", "cold read + first write"),
                      ("get_p50", "warm getTable p50"), ("list_p50", "listTables page p50"),
                      ("create_p50", "createTable p50"), ("state_bytes", "state bytes (whole metastore)"),
                      ("cached_per_table", "bytes per cached table")):
        slope, word = growth(xs, [r.get(key, 0) for r in sizes])
        lines.append(f"- {what}: slope {slope:.2f}, **{word}**")
    if mss:
        lines += ["", f"Metastores in one in-process shard, each a catalog, a schema and {TABLES_PER_METASTORE} "
                  "tables, every one touched once (a cold getTable):", "",
                  "| metastores | bytes per owned metastore | cold touch p50/p99 | hot getTable p50/p99 "
                  "| evicted when idle | bytes freed per evicted metastore | bytes left per idle metastore |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in mss:
            lines.append(f"| {r['metastores']:,} | {r['bytes_per_metastore']:,.0f} | {r['cold_p50']:.1f} / "
                         f"{r['cold_p99']:.1f} ms | {r['hot_get_p50_us']:.0f} / {r['hot_get_p99_us']:.0f} µs | "
                         f"{r.get('evicted', '-')} | "
                         + (f"{r['bytes_freed_per_metastore']:,.0f}" if 'bytes_freed_per_metastore' in r else "-")
                         + " | " + (f"{r['bytes_left_per_idle_metastore']:,.0f}" if 'bytes_left_per_idle_metastore' in r
                                    else "-") + " |")
        lines.append("")
        for key, what in (("bytes_per_metastore", "bytes per metastore"), ("cold_p50", "cold touch p50"),
                          ("hot_get_p50_us", "hot getTable p50")):
            slope, word = growth([r["metastores"] for r in mss], [r[key] for r in mss])
            lines.append(f"- {what}: slope {slope:.2f} over metastores, **{word}**")
    if run["zipf"]:
        lines += ["", f"getTable (in-process shard lookups) drawn from a Zipf (s = 1.1) over {run['zipf_tables']:,} "
                  "tables, the cache bounded to a share of what they all take:", "",
                  "| cache / catalog | cache bound | hit ratio | p50 | p99 | evictions |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in run["zipf"]:
            lines.append(f"| {r['fraction']:.0%} | {r['cache_bytes'] / 2 ** 20:,.1f} MiB | {r['hit_ratio']:.1%} | "
                         f"{r['p50']:.2f} ms | {r['p99']:.2f} ms | {r['evictions']:,} |")
        lines += ["", "The hit ratio tops out where every table drawn before is cached: the rest are first "
                  "draws from the Zipf's long tail, which no cache holds. p50 is a hit, p99 a read from PostgreSQL: "
                  "a smaller cache moves more draws from the first to the second, and the cost of each stays."]
    lines += ["", f"![costs against size](img/{PLOT.name})", "",
              f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", ""]
    return "\n".join(lines)


def plot(run: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    sizes = run["sizes"]
    xs = [r["tables"] for r in sizes]
    ax = axes[0]
    for key, label in (("cold_get_ms", "cold getTable"), ("cold_path_ms", "cold read by path"),
                       ("time_to_warm_ms", "cold read + first write"), ("get_p50", "getTable p50"), ("list_p50", "listTables page p50"),
                       ("create_p50", "createTable p50")):
        ax.plot(xs, [r.get(key) for r in sizes], "o-", label=label)
    ax.set(xscale="log", yscale="log", xlabel="tables in the metastore", ylabel="ms", title="latency vs tables")
    ax = axes[1]
    for key, label in (("state_per_asset", "state B/asset"), ("privilege_per_asset", "privileges B/asset"),
                       ("cached_per_table", "B per cached table")):
        ax.plot(xs, [r[key] for r in sizes], "o-", label=label)
    ax.set(xscale="log", yscale="log", xlabel="tables in the metastore", ylabel="bytes", title="memory per asset")
    ax = axes[2]
    mss = run["metastores"]
    if mss:
        mx = [r["metastores"] for r in mss]
        ax.plot(mx, [r["bytes_per_metastore"] for r in mss], "o-", label="bytes per owned metastore")
        ax.plot(mx, [r["cold_p50"] * 1000 for r in mss], "s-", label="cold touch p50, µs")
        ax.plot(mx, [r["hot_get_p50_us"] for r in mss], "^-", label="hot getTable p50, µs")
    ax.set(xscale="log", yscale="log", xlabel="metastores in the shard", title="many metastores")
    ax = axes[3]
    if run["zipf"]:
        zx = [r["fraction"] * 100 for r in run["zipf"]]
        ax.plot(zx, [r["p50"] for r in run["zipf"]], "o-", label="p50 ms")
        ax.plot(zx, [r["p99"] for r in run["zipf"]], "^--", label="p99 ms")
        ax2 = ax.twinx()
        ax2.plot(zx, [r["hit_ratio"] * 100 for r in run["zipf"]], "s:", color="grey", label="hit ratio %")
        ax2.set_ylabel("hit ratio, %")
    ax.set(xscale="log", xlabel="cache bound, % of the catalog", ylabel="ms", title="Zipf getTable vs cache size")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("shardcat at scale" + (" — QUICK RUN" if run["quick"] else ""))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_scale", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10K and 100K tables, 10 and 1K metastores")
    p.add_argument("--out", type=Path, default=h.DOCS, help="markdown file whose section to rewrite")
    p.add_argument("--no-docs", action="store_true", help="print the section, write neither it nor the plot")
    ints = lambda s: [int(x) for x in s.split(",") if x]     # noqa: E731
    p.add_argument("--tables", type=ints, help="tables per metastore (default 10000,100000,1000000)")
    p.add_argument("--metastores", type=ints, help="metastores per shard (default 10,1000,10000)")
    p.add_argument("--zipf-tables", type=int, default=100_000, help="the Zipf workload's catalog (one of --tables)")
    p.add_argument("--zipf-requests", type=int, default=8_000)
    args = p.parse_args(argv)
    args.tables = args.tables or ([10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])
    args.metastores = args.metastores or ([10, 1000] if args.quick else [10, 1000, 10_000])
    args.zipf_fractions = [0.01, 0.03, 0.1, 0.3, 1.0]
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    log(f"bench_scale: {info['cores']} cores, {info['cpu_model']}, {info['ram_gib']} GiB RAM")
    outcome = h.run_with_postgres("shardcat-scale-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_scale", *argv]),
                "machine": info, "quick": args.quick, "zipf_tables": args.zipf_tables,
                "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    if not args.no_docs:
        plot(run_info, PLOT)
        log(f"plot in {PLOT.relative_to(h.ROOT)}")
    h.publish("bench_scale", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
