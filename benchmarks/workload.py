"""Benchmark data and requests: tables inserted in bulk or through the API, and the request sets
of getTable, listTables and the batched resolve."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid

import aiohttp

from .common import PREFIX
from .load import Request, requests


# ---- data -----------------------------------------------------------------------------------------

COLUMNS = [
    {"name": "id", "type_name": "LONG", "nullable": False, "comment": "surrogate key"},
    {"name": "event_time", "type_name": "TIMESTAMP", "comment": "when the event happened (UTC)"},
    {"name": "user_id", "type_name": "LONG", "comment": "who did it"},
    {"name": "country", "type_name": "STRING", "comment": "ISO 3166-1 alpha-2"},
    {"name": "amount", "type_name": "DECIMAL", "type_precision": 18, "type_scale": 2},
    {"name": "is_test", "type_name": "BOOLEAN"},
    {"name": "payload", "type_name": "STRING", "comment": "raw JSON of the event"},
    {"name": "event_date", "type_name": "DATE", "partition_index": 0},
]


async def bulk_insert_tables(db: str, catalog: str, schema: str, count: int) -> tuple[str, float]:
    """Copy the template table `{catalog}.{schema}.t000000` (made through the API) into `count`
    tables (t000000 kept), each commented "benchmark table number {i}", in one metastore write:
    bump the version, insert the rows, log the change, as Store.write does. Returns (metastore
    id, seconds)."""
    import asyncpg
    start = time.perf_counter()
    conn = await asyncpg.connect(db, timeout=30)
    try:
        # binary jsonb (version byte 1, then the text) so that COPY can carry it
        await conn.set_type_codec("jsonb", schema="pg_catalog", format="binary",
                                  encoder=lambda v: b"\x01" + json.dumps(v).encode(),
                                  decoder=lambda b: json.loads(b[1:]))
        t = await conn.fetchrow("SELECT * FROM assets WHERE type = 'table' AND full_name = $1",
                                f"{catalog}.{schema}.{table_name(0)}")
        ms, old_path = t["metastore_id"], t["storage_path"]
        async with conn.transaction():
            version = await conn.fetchval("UPDATE metastores SET version = version + 1 WHERE id = $1 "
                                          "RETURNING version", ms)
            rows, ids = [], []
            for i in range(1, count):
                new_id = uuid.uuid4()
                path = old_path.replace(str(t["id"]), str(new_id)) if str(t["id"]) in old_path \
                    else f"{old_path.rstrip('/')}-{i}"
                info = {k: (path if v == old_path else v) for k, v in t["info"].items()}
                info["comment"] = f"benchmark table number {i}"
                name = table_name(i)
                rows.append((new_id, ms, "table", "table", t["parent_id"], name,
                             f"{catalog}.{schema}.{name}", path, info, version))
                ids.append(new_id)
            await conn.copy_records_to_table(
                "assets", records=rows, columns=["id", "metastore_id", "type", "namespace", "parent_id", "name",
                                                 "full_name", "storage_path", "info", "written_at"])
            await conn.execute("INSERT INTO change_log VALUES ($1, $2, $3::uuid[], $4::uuid[], $5)",
                               ms, version, ids, [t["parent_id"]], int(time.time() * 1000))
        await conn.execute("ANALYZE assets")
    finally:
        await conn.close()
    return str(ms), time.perf_counter() - start


def table_name(i: int) -> str:
    return f"t{i:06d}"


def table_body(catalog: str, schema: str, i: int) -> dict:
    return {"name": table_name(i), "catalog_name": catalog, "schema_name": schema, "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": COLUMNS, "comment": f"benchmark table number {i}",
            "properties": {"owner_team": "benchmarks", "delta.minReaderVersion": "1"}}


async def seed_tables(api: str, token: str, catalog: str, schema: str, tables: int, parallel: int = 8) -> float:
    """Create a catalog, a schema and `tables` tables through the API; returns the seconds it took."""
    start = time.perf_counter()
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"},
                                     timeout=aiohttp.ClientTimeout(total=30),
                                     connector=aiohttp.TCPConnector(limit=parallel)) as session:
        async def post(path: str, body: dict) -> None:
            async with session.post(api + path, json=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"POST {path} {body.get('name')!r}: HTTP {r.status}: {(await r.text())[:300]}")

        await post("/catalogs", {"name": catalog, "comment": "benchmark catalog"})
        await post("/schemas", {"name": schema, "catalog_name": catalog, "comment": "benchmark schema"})
        todo = iter(range(tables))

        async def worker() -> None:
            for i in todo:
                await post("/tables", table_body(catalog, schema, i))

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(parallel))), 30 + tables * 0.1)
    return time.perf_counter() - start


async def call(method: str, url: str, token: str | None = None, **kw) -> tuple[int, bytes]:
    """One request, for set-up and checks; returns (status, body)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=60)) as s:
        async with s.request(method, url, **kw) as r:
            return r.status, await r.read()


LIST_PAGE = 100      # listTables asks for one page of this many
BATCH = 50           # names per batch resolve


def get_requests(base: str, catalog: str, schema: str, tables: int) -> list[Request]:
    """getTable of one of the tables, picked at random per request."""
    return requests(base, [f"{PREFIX}/tables/{catalog}.{schema}.{table_name(i)}" for i in range(tables)])


def list_requests(base: str, catalog: str, schema: str) -> list[Request]:
    """listTables, the first page of LIST_PAGE."""
    return requests(base, [f"{PREFIX}/tables?catalog_name={catalog}&schema_name={schema}&max_results={LIST_PAGE}"])


def batch_requests(base: str, catalog: str, schema: str, tables: int, variants: int = 200) -> list[Request]:
    """POST /resolve of BATCH distinct random table names (a query's worth), `variants` different bodies."""
    rng = random.Random(7)
    bodies = [json.dumps({"items": [{"name": f"{catalog}.{schema}.{table_name(i)}"}
                                    for i in rng.sample(range(tables), min(BATCH, tables))]}).encode()
              for _ in range(variants)]
    return requests(base, [f"{PREFIX}/resolve"], "POST", bodies)


async def response_sizes(workloads: dict[str, list[Request]], token: str) -> dict[str, int]:
    """Body size of one answer to each workload, checking it is a 200 (and a full batch has no errors)."""
    sizes = {}
    for op, reqs in workloads.items():
        r = reqs[len(reqs) // 2]
        status, body = await call(r.method, str(r.url), token, data=r.body)
        if status != 200:
            raise RuntimeError(f"{op}: HTTP {status} for {r.method} {r.url}: {body[:300]!r}")
        doc = json.loads(body)
        if "items" in doc and any("error" in item for item in doc["items"]):
            raise RuntimeError(f"{op}: an item failed: {body[:300]!r}")
        sizes[op] = len(body)
    return sizes
