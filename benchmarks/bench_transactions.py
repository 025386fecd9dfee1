"""Disjoint multi-asset transactions from 32 clients: conflicts per asset vs per metastore (issue 32).

    python -m benchmarks.bench_transactions                 # ~1 min, writes its section of docs/benchmarks.md
    python -m benchmarks.bench_transactions --no-docs       # print only

One embedded PostgreSQL and one `shardcat serve` process on it (one process, group commit on, as
served by default). Each client owns two tables of its own and loops: read both (two GETs,
remembering the metastore version each answer reflects, `X-Shardcat-Version`), then send one
transaction (`POST /shardcat/transactions`) updating both tables' comments, declaring what it read.
The transactions of different clients never touch the same asset. Two variants, the same requests
but for the check:
- per asset (the default): `read_versions` {table: version read}; a transaction conflicts only if one
  of its own tables changed since it read it, which no other client does, so every one commits;
- per metastore (`"isolation": "metastore"`, `read_at` = the newest version its reads reflect): any
  write to the metastore after the read is a conflict, which is what conditioning a write on the
  metastore version alone (today's check, invariant 2) gives a client that reads before it writes;
  on a 409 the client reads again and resends, until its transaction commits;
- one at a time: the per-metastore check with the metastore taken as a lock by the clients (one
  client reads and commits at a time, so nothing conflicts and nothing is thrown away): writes
  serialized on the metastore without the optimistic check's waste.
Committed transactions per second (each updates two tables), latency from the first read to the
commit (retries included), 409s per committed transaction, and the server's and PostgreSQL's CPU
per committed transaction. Windows of the two variants alternate; each row is the median window.
"""

from __future__ import annotations

import asyncio
import shlex
import statistics
import sys
import time

import aiohttp

from . import harness as h

HEADING = "## Multi-asset transactions: disjoint clients, conflicts per asset vs per metastore"
VARIANTS = ("per asset", "per metastore", "one at a time")
VERSION = "X-Shardcat-Version"
TX = "/shardcat/transactions"


class Client:
    """One client: its two tables, and its loop of read-then-commit."""

    def __init__(self, session: aiohttp.ClientSession, api: str, index: int, lock: asyncio.Lock):
        self.session, self.api, self.lock = session, api, lock
        self.tables = [f"c.s.client{index}_a", f"c.s.client{index}_b"]
        self.counter = 0
        self.requests = 0

    async def _read(self, name: str) -> int:
        self.requests += 1
        async with self.session.get(f"{self.api}/tables/{name}") as r:
            await r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {name}: HTTP {r.status}")
            return int(r.headers[VERSION])

    async def transaction(self, variant: str) -> int:
        """Read both tables and commit an update of both; returns how many 409s it took."""
        if variant == "one at a time":
            async with self.lock:
                return await self._transaction("per metastore")
        return await self._transaction(variant)

    async def _transaction(self, variant: str) -> int:
        conflicts = 0
        while True:
            versions = [await self._read(name) for name in self.tables]
            self.counter += 1
            body = {"operations": [{"op": "update", "type": "table", "name": name,
                                    "body": {"comment": f"update {self.counter}"}} for name in self.tables]}
            if variant == "per asset":
                body["read_versions"] = dict(zip(self.tables, versions))
            else:
                body.update(isolation="metastore", read_at=max(versions))
            self.requests += 1
            async with self.session.post(f"{self.api}{TX}", json=body) as r:
                answer = await r.read()
                if r.status == 200:
                    return conflicts
                if r.status != 409:
                    raise RuntimeError(f"transaction: HTTP {r.status}: {answer[:200]!r}")
            conflicts += 1
            if conflicts > 10_000:
                raise RuntimeError("a transaction did not commit after 10,000 conflicts")


async def closed_loop(clients: list[Client], variant: str, seconds: float, pids: dict[str, list[int]]) -> dict:
    cpu0 = {k: h.tree_cpu_total(v) for k, v in pids.items()}
    own0 = h.own_cpu()
    requests0 = sum(c.requests for c in clients)
    latencies: list[float] = []
    conflicts = errors = 0
    deadline = time.monotonic() + seconds

    async def loop(client: Client) -> None:
        nonlocal conflicts, errors
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                took = await client.transaction(variant)     # (not `conflicts += await ...`: that reads it first)
            except Exception as e:       # counted and shown: a run with errors is not a result
                errors += 1
                if errors <= 3:
                    h.log(f"    error: {e!r}")
                continue
            latencies.append(time.perf_counter() - started)
            conflicts += took

    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in clients))
    wall = time.perf_counter() - started
    cpu = {k: h.tree_cpu_total(v) - cpu0[k] for k, v in pids.items()}
    own = h.own_cpu() - own0
    requests = sum(c.requests for c in clients) - requests0
    latencies.sort()
    done = len(latencies)
    return {"per_s": done / wall, "p50_ms": (h.percentile(latencies, 50) or 0) * 1e3,
            "p99_ms": (h.percentile(latencies, 99) or 0) * 1e3, "errors": errors,
            "conflicts_per_tx": conflicts / done if done else 0.0,
            "requests_per_tx": requests / done if done else 0.0,
            "server_ms_per_tx": cpu["server"] / done * 1e3 if done else 0.0,
            "pg_ms_per_tx": cpu["postgres"] / done * 1e3 if done else 0.0,
            "server_cores": cpu["server"] / wall, "pg_cores": cpu["postgres"] / wall, "own_cores": own / wall}


async def run(args, tmp, pg) -> dict:
    db = await pg.database("transactions")
    server = h.start_shardcat(tmp / "serve", db, name="shardcat-tx")
    pids = {"server": [server.child.pid], "postgres": [pg.pid] if pg.pid else []}
    rows: dict[str, list[dict]] = {}
    connector = aiohttp.TCPConnector(limit=args.clients * 2)
    headers = {"Authorization": f"Bearer {server.token}"}
    async with aiohttp.ClientSession(connector=connector, headers=headers,
                                     timeout=aiohttp.ClientTimeout(total=h.REQUEST_TIMEOUT)) as session:
        async def post(path: str, body: dict) -> None:
            async with session.post(server.api + path, json=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"POST {path}: HTTP {r.status}: {(await r.read())[:300]!r}")

        await post("/catalogs", {"name": "c"})
        await post("/schemas", {"name": "s", "catalog_name": "c"})
        lock = asyncio.Lock()
        clients = [Client(session, server.api, i, lock) for i in range(args.clients)]
        for client in clients:
            await post(TX, {"operations": [{"op": "create", "type": "table", "body": {
                "name": name.split(".")[-1], "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
                "data_source_format": "DELTA", "columns": []}} for name in client.tables]})
        for round_ in range(args.rounds):
            for variant in VARIANTS:
                await closed_loop(clients, variant, args.warmup, pids)
                w = await closed_loop(clients, variant, args.seconds, pids)
                rows.setdefault(variant, []).append(w)
                h.log(f"  round {round_ + 1} {variant} x{args.clients}: {w['per_s']:,.0f} tx/s p50 "
                      f"{w['p50_ms']:.1f} ms p99 {w['p99_ms']:.1f} ms, {w['conflicts_per_tx']:.2f} conflicts/tx, "
                      f"{w['requests_per_tx']:.1f} requests/tx, "
                      f"errors {w['errors']} (cores: server {w['server_cores']:.2f}, PostgreSQL {w['pg_cores']:.2f}, "
                      f"clients {w['own_cores']:.2f})")
    if server.child.proc.poll() is not None:
        raise RuntimeError("shardcat exited during the run")
    median = {k: {key: statistics.median(w[key] for w in ws) for key in ws[0]} for k, ws in rows.items()}
    return {"rows": median, "clients": args.clients, "postgres": getattr(pg, "version", None)}


def report(run_info: dict) -> str:
    m, rows = run_info["machine"], run_info["rows"]
    lines = [HEADING, "",
             f"- **Reproduce:** `{run_info['command']}`; run on {run_info['date']}.",
             f"- **Machine:** {h.machine_line(m, run_info['postgres'])}. A shared machine: the clients, the "
             "server and PostgreSQL share these cores with other work, so the absolute numbers are low and noisy; "
             "the three variants alternate window by window, so their ratios are the finding.",
             f"- **What:** one `shardcat serve` process (group commit on) on an embedded PostgreSQL; "
             f"{run_info['clients']} closed-loop clients (aiohttp), each owning two tables: read both (two GETs), "
             "then one transaction updating both (`POST /shardcat/transactions`), declaring its reads. No two "
             "clients touch the same table. *per asset*: `read_versions` per table (the default check). *per "
             "metastore*: `\"isolation\": \"metastore\"` with `read_at` the version of its reads, the check a "
             "metastore-version condition gives; a 409 makes the client read again and resend until it commits. "
             "*one at a time*: the same, with the clients taking turns (a lock around read and commit), i.e. "
             "writes serialized on the metastore with no conflicts to throw work away. "
             f"{run_info['rounds']} alternating windows of {run_info['seconds']:g} s (after "
             f"{run_info['warmup']:g} s of warm-up each); the median window. Latency: first read to commit, "
             "retries included. CPU: the server's and PostgreSQL's CPU ms per committed transaction; cores: CPU "
             "seconds per second of the server, PostgreSQL and the clients' process.",
             "",
             "| check | clients | committed tx/s | table updates/s | p50 ms | p99 ms | 409s per commit | errors | "
             "CPU ms per tx: server / PostgreSQL | cores: server / PostgreSQL / clients |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for variant in VARIANTS:
        r = rows.get(variant)
        if r:
            lines.append(f"| {variant} | {run_info['clients']} | {r['per_s']:,.0f} | {2 * r['per_s']:,.0f} | "
                         f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['conflicts_per_tx']:.2f} | {r['errors']:.0f} | "
                         f"{r['server_ms_per_tx']:.2f} / {r['pg_ms_per_tx']:.2f} | {r['server_cores']:.2f} / "
                         f"{r['pg_cores']:.2f} / {r['own_cores']:.2f} |")
    a, b, c = rows.get("per asset"), rows.get("per metastore"), rows.get("one at a time")
    if a and b and c and b["per_s"] and c["per_s"]:
        lines += ["", f"Per-asset checks commit {a['per_s'] / b['per_s']:.1f}× the transactions per second of the "
                  f"per-metastore check here and {a['per_s'] / c['per_s']:.1f}× those of one at a time, with {a['conflicts_per_tx']:.2f} conflicts per commit against "
                  f"{b['conflicts_per_tx']:.2f}: under the per-metastore check every commit by one client invalidates "
                  "the reads of all the others in flight, so most of the work (reads, validation, a transaction "
                  "rolled back) is thrown away; per asset, disjoint transactions all commit, and those that queue "
                  "behind one in flight commit together (group commit)."]
        lines += ["", f"The machine was shared and busy (the server got {a['server_cores']:.2f} of a core): the CPU "
                  "per committed transaction is the steadier figure. Per asset the server spent "
                  f"{a['server_ms_per_tx']:.1f} ms and PostgreSQL {a['pg_ms_per_tx']:.1f} ms per transaction (two "
                  f"table updates and the two reads before them), one at a time {c['server_ms_per_tx']:.1f} / "
                  f"{c['pg_ms_per_tx']:.1f} ms (no group commit to share: each transaction commits alone), per "
                  f"metastore {b['server_ms_per_tx']:.1f} / {b['pg_ms_per_tx']:.1f} ms "
                  f"({b['server_ms_per_tx'] / a['server_ms_per_tx']:.0f}× the server's CPU, spent on the "
                  "conflicting attempts)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = h.alternating_windows_parser(__doc__.splitlines()[0], rounds=3)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
    info, date = h.machine(), h.now_utc()
    outcome = h.run_with_postgres("shardcat-bench-tx-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        raise SystemExit(130)
    command = shlex.join(["python", "-m", "benchmarks.bench_transactions", *sys.argv[1:]])
    run_info = {"date": date, "command": command, "machine": info, "seconds": args.seconds, "rounds": args.rounds,
                "warmup": args.warmup, **outcome}
    h.publish("bench_transactions", run_info, report, h.DOCS, HEADING, to_docs=not args.no_docs)


def republish(raw_json: str) -> None:
    """Write the docs section again from a saved run (benchmarks/out/bench_transactions-*.json)."""
    import json
    h.write_section(h.DOCS, HEADING, report(json.loads(open(raw_json).read())))


if __name__ == "__main__":
    main()
