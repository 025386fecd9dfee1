"""The cost of counting requests for /metrics on the fast read path: two `shardcat serve`, one from
another checkout (--base, e.g. the commit before metrics) and one from this tree, side by side.

    git worktree add /tmp/base <commit>; python -m benchmarks.bench_metrics --base /tmp/base

One embedded PostgreSQL, a database for each server, the same 1,000 tables seeded through the API
in each. Then rounds: in each round getTable (a random table) and listTables (first page of 100)
are sent by one closed-loop client to each server in turn, `--requests` per server and operation,
and each request's latency kept. Interleaving the servers round by round spreads a shared
machine's noise over both. Prints the median and 90th percentile per server and operation.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import aiohttp

from . import harness as h

CATALOG, SCHEMA = "bench", "s"


async def _latencies(session, requests, token: str, count: int) -> list[float]:
    headers = {"Authorization": f"Bearer {token}"}
    out = []
    for _ in range(count):
        request = random.choice(requests)
        started = time.perf_counter()
        async with session.request(request.method, request.url, headers=headers) as answer:
            await answer.read()
            assert answer.status == 200, answer.status
        out.append(time.perf_counter() - started)
    return out


async def run(args, tmp: Path, pg) -> dict:
    servers = {}
    for label, tree in (("base", args.base), ("this tree", None)):
        db = await pg.database(f"bench_metrics_{len(servers)}")
        wrapper = ("env", f"--chdir={tree}", f"PYTHONPATH={tree}") if tree else ()
        server = h.start_shardcat(tmp / f"shardcat{len(servers)}", db, name=f"shardcat-{len(servers)}",
                                  wrapper=wrapper)
        await h.seed_tables(server.api, server.token, CATALOG, SCHEMA, args.tables)
        servers[label] = server
    found = {(label, op): [] for label in servers for op in ("getTable", "listTables")}
    async with aiohttp.ClientSession() as session:
        for round_ in range(args.rounds):
            for label, server in (servers.items() if round_ % 2 == 0 else reversed(servers.items())):
                work = {"getTable": h.get_requests(server.base, CATALOG, SCHEMA, args.tables),
                        "listTables": h.list_requests(server.base, CATALOG, SCHEMA)}
                for op, requests in work.items():
                    found[(label, op)] += await _latencies(session, requests, server.token, args.requests)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_metrics", description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, required=True, help="a checkout without the change (its own tree root)")
    p.add_argument("--tables", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--requests", type=int, default=500, help="per server, operation and round")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    args.base = args.base.resolve()
    found = h.run_with_postgres("shardcat-bench-metrics-", lambda tmp, pg: run(args, tmp, pg))
    if found is None:
        return 130
    print("| server | operation | requests | p50 ms | p90 ms |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (label, op), seconds in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        q = statistics.quantiles(seconds, n=10)
        print(f"| {label} | {op} | {len(seconds)} | {statistics.median(seconds) * 1e3:.3f} | {q[8] * 1e3:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
