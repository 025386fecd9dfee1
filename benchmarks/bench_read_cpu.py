"""CPU per cached getTable and listTables answer, in-process: the catalog operations' part of a read.

    PYTHONPATH=<tree> python benchmarks/bench_read_cpu.py

Over the in-memory store (store/memory.py; no HTTP, no PostgreSQL), an account admin gets one
table of a schema of 100 (8 columns) and lists the schema, through serving/app.py's `found_json`
and `listed_json`, the calls the shard app and its front make. `time.process_time()` over N calls,
best of 5 rounds: CPU per answer, comparable between two trees on the same machine even while
others use it (run each tree two or three times, alternating).
"""
import asyncio, sys, time, uuid
from shardcat.auth import Caller
from shardcat.catalog.tree.service import CatalogService
from shardcat.shards.shard import Shard
from shardcat.store.memory import MemoryStore
from shardcat.serving.app import found_json, listed_json

COLS = [{"name": f"c{i}", "type_name": "INT", "type_text": "int", "type_json": "{}", "position": i} for i in range(8)]


async def main(n=20000, rounds=5):
    store = MemoryStore()
    ms = str(uuid.uuid4())
    await store.create_metastore(ms, "m", {"storage_root": f"file:///w/{ms}"})
    admin = Caller("admin", 1, True, 1, ms)
    svc = CatalogService(Shard(store, "a"))
    await svc.create(admin, "catalog", {"name": "c"})
    await svc.create(admin, "schema", {"name": "s", "catalog_name": "c"})
    for i in range(100):
        await svc.create(admin, "table", {"name": f"t{i}", "catalog_name": "c", "schema_name": "s",
                                          "table_type": "MANAGED", "data_source_format": "DELTA", "columns": COLS})
    body = await found_json(svc, admin, "table", "c.s.t7")
    for what, work, m in (("getTable", lambda: found_json(svc, admin, "table", "c.s.t7"), n),
                          ("listTables(100)", lambda: listed_json(svc, admin, "table", "c.s", None, None), n // 20)):
        best = None
        for _ in range(rounds):
            t0 = time.process_time()
            for _ in range(m):
                await work()
            us = (time.process_time() - t0) / m * 1e6
            best = us if best is None else min(best, us)
        print(f"{what}: {best:.2f} us CPU (best of {rounds} rounds of {m})")
    print(len(body), "bytes")

asyncio.run(main())
