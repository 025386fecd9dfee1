"""How long a move of a metastore between home databases takes, step by step, under writers.

    python -m benchmarks.bench_move                  # 2,000 tables, 3 moves, ~1 min
    python -m benchmarks.bench_move --tables 20000   # a bigger metastore
    python -m benchmarks.bench_move --shards 2       # through the router to shard actors on Ray

Two embedded PostgreSQL servers, one in-process catalog over both (`--db db0=... --db db1=...`),
one metastore of N tables on db1. Four writers create tables in it in a closed loop through the
HTTP API while it is moved db1 -> db0 -> db1 -> db0 (`POST /shardcat/metastores/{m}/move`). Per
move: the server's timeline (store/homes.py: copy, catch-up, fence, final catch-up, switch,
cleanup; `writes_blocked_ms` is from the fence to the switch), and what the writers saw meanwhile:
writes acknowledged, failed, and the slowest write. At the end every acknowledged table is read
back (a lost one fails the run). Prints a markdown table (docs/cluster.md "Home databases").
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import aiohttp

from shardcat.cluster.embedded_db import start_embedded_postgres
from shardcat.cluster.server import ServeConfig, start
from shardcat.web.wire import PREFIX

WRITERS = 4


async def run(tables: int, moves: int, shards: int = 0) -> list[dict]:
    root = Path(tempfile.mkdtemp(prefix="bench-move-"))
    dirs = [root / f"pg{i}" for i in range(2)]
    urls = [await asyncio.to_thread(start_embedded_postgres, d) for d in dirs]
    running = await start(ServeConfig(port=0, data_dir=root / "catalog", db=[f"db0={urls[0]}", f"db1={urls[1]}"],
                                      shards=shards))
    token = running.admin_token_path.read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    api = running.url + PREFIX
    rows = []
    try:
        async with aiohttp.ClientSession(headers=headers) as http:
            async def call(method, path, body=None):
                async with http.request(method, api + path, json=body) as r:
                    return r.status, await r.json(content_type=None)

            # The default metastore is on db0: a new one goes to db1, the home of the fewest.
            status, ms = await call("POST", "/metastores", {"name": "moving", "storage_root": (root / "s").as_uri()})
            assert status == 200, ms
            status, _ = await call("PUT", "/workspaces/1/metastore", {"metastore_id": ms["metastore_id"]})
            assert status == 200
            assert (await call("POST", "/catalogs", {"name": "c"}))[0] == 200
            assert (await call("POST", "/schemas", {"name": "s", "catalog_name": "c"}))[0] == 200

            def table(name):
                return {"name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
                        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]}

            made = 0

            async def fill(k):
                nonlocal made
                for i in range(k, tables, 16):
                    status, body = await call("POST", "/tables", table(f"t{i}"))
                    assert status == 200, body
                    made += 1
            started = time.monotonic()
            await asyncio.gather(*(fill(k) for k in range(16)))
            print(f"{tables} tables made in {time.monotonic() - started:.1f} s", flush=True)

            acknowledged: list[str] = []
            seen: list[tuple[float, float, int]] = []      # (start, seconds, status)
            stop = asyncio.Event()

            async def writer(w):
                i = 0
                while not stop.is_set():
                    name, i = f"w{w}_{i}", i + 1
                    t0 = time.monotonic()
                    status, _ = await call("POST", "/tables", table(name))
                    seen.append((t0, time.monotonic() - t0, status))
                    if status == 200:
                        acknowledged.append(name)

            writers = [asyncio.create_task(writer(w)) for w in range(WRITERS)]
            await asyncio.sleep(1.0)
            for target in (["db0", "db1"] * moves)[:moves]:
                t0 = time.monotonic()
                status, timeline = await call("POST", "/shardcat/metastores/moving/move", {"database": target})
                t1 = time.monotonic()
                assert status == 200, timeline
                during = [s for s in seen if t0 <= s[0] <= t1]
                timeline.update(writes_acknowledged=sum(1 for s in during if s[2] == 200),
                                writes_failed=sum(1 for s in during if s[2] != 200),
                                slowest_write_ms=round(max((s[1] for s in during), default=0) * 1000, 1))
                rows.append(timeline)
                await asyncio.sleep(1.0)
            stop.set()
            await asyncio.gather(*writers)
            listed, token_ = set(), None
            while True:
                status, page = await call("GET", "/tables?catalog_name=c&schema_name=s&max_results=1000"
                                          + (f"&page_token={token_}" if token_ else ""))
                assert status == 200, page
                listed |= {t["name"] for t in page.get("tables", [])}
                token_ = page.get("next_page_token")
                if not token_:
                    break
            lost = set(acknowledged) - listed
            assert not lost, f"{len(lost)} acknowledged tables missing"
            print(f"{len(acknowledged)} writes acknowledged during the run, all present after {moves} moves")
    finally:
        await running.stop()        # the servers stop with this process (the wheel's cleanup)
    return rows


def table_md(rows: list[dict]) -> str:
    cols = ["from", "to", "version", "rows_copied", "rows_caught_up", "copy_ms", "catch_up_ms", "fence_ms",
            "final_catch_up_ms", "switch_ms", "writes_blocked_ms", "cleanup_ms", "total_ms",
            "writes_acknowledged", "writes_failed", "slowest_write_ms"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=2000)
    parser.add_argument("--moves", type=int, default=3)
    parser.add_argument("--shards", type=int, default=0,
                        help="N shard actors on Ray behind the router (default 0: one in-process shard)")
    args = parser.parse_args()
    rows = asyncio.run(run(args.tables, args.moves, args.shards))
    print(table_md(rows))


if __name__ == "__main__":
    main()
