"""One tree's CPU per cached read, in-process: run by benchmarks/bench_front_cpu.py as a script with
PYTHONPATH set to the checkout to measure (it imports nothing of `benchmarks`, whose harness differs
between commits; only shardcat, which it takes from whichever tree PYTHONPATH names).

    PYTHONPATH=<tree> python benchmarks/front_cpu_driver.py --db <postgresql url> [--profile getTable]

It starts `shardcat serve`'s one-process catalog in this process (cluster/server.py `start`, the
same code path as the CLI) against the database given, creates one schema of --tables tables of
8 columns through the API, then drives requests straight into the public front's connection
object (a `_Connection` of the front's HTTP/1.1 server over an in-memory transport): the request's
bytes in, the answer's bytes out, awaited one at a time. No sockets and no client in the measured
loop, so `time.process_time()` over N requests is the server's CPU per request: parsing, limits,
the front's fast path (caller, authorization, the cached read, JSON), the audit row (and, in the
background, its write to PostgreSQL), metrics, headers, writing. Prints one JSON line per round.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

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
PREFIX = "/api/2.1/unity-catalog"
CATALOG, SCHEMA = "bench", "s"
LIST_PAGE = 100


class Sink:
    """An in-memory transport: what the connection writes is counted, and the waiter of the
    request in flight is woken when its answer is written."""

    def __init__(self):
        self.written = 0
        self.waiter: asyncio.Future | None = None
        self.closed = False

    def write(self, data) -> None:
        self.written += len(data)
        self._done()

    def writelines(self, lines) -> None:
        for data in lines:
            self.written += len(data)
        self._done()

    def _done(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.closed = True


def head(path: str, token: str) -> bytes:
    """A request as the benchmarks' client (ShardClient) sends it."""
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 0\r\n"
            f"Authorization: Bearer {token}\r\n\r\n").encode("latin-1")


async def seed(url: str, token: str, tables: int) -> None:
    import aiohttp
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
        async def post(path: str, body: dict) -> None:
            async with session.post(url + PREFIX + path, json=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"POST {path}: HTTP {r.status}: {(await r.text())[:300]}")

        await post("/catalogs", {"name": CATALOG})
        await post("/schemas", {"name": SCHEMA, "catalog_name": CATALOG})
        todo = iter(range(tables))

        async def worker() -> None:
            for i in todo:
                await post("/tables", {"name": f"t{i:06d}", "catalog_name": CATALOG, "schema_name": SCHEMA,
                                       "table_type": "MANAGED", "data_source_format": "DELTA", "columns": COLUMNS,
                                       "comment": f"benchmark table number {i}",
                                       "properties": {"owner_team": "benchmarks", "delta.minReaderVersion": "1"}})

        await asyncio.gather(*(worker() for _ in range(8)))


async def drive(connection, sink: Sink, requests: list[bytes], n: int, rng: random.Random) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(n):
        sink.waiter = loop.create_future()
        connection.data_received(requests[rng.randrange(len(requests))])
        await sink.waiter


async def main(args) -> None:
    from shardcat.cluster.server import ServeConfig, start
    with tempfile.TemporaryDirectory(prefix="shardcat-front-cpu-") as tmp:
        running = await start(ServeConfig(port=0, db=args.db, data_dir=Path(tmp)))
        try:
            token = running.admin_token_path.read_text().strip()
            await seed(running.url, token, args.tables)
            server = running.front.server
            http1 = sys.modules[type(server).__module__]
            sets = {"getTable": [head(f"{PREFIX}/tables/{CATALOG}.{SCHEMA}.t{i:06d}", token)
                                 for i in range(args.tables)],
                    "listTables": [head(f"{PREFIX}/tables?catalog_name={CATALOG}&schema_name={SCHEMA}"
                                        f"&max_results={LIST_PAGE}", token)]}
            ops = args.ops.split(",")
            connections = {}
            for op in ops:
                sink = Sink()
                connection = http1._Connection(server)
                connection.connection_made(sink)
                connections[op] = connection, sink
                await drive(connection, sink, sets[op], 1, random.Random(0))
                answered = sink.written
                if answered < 300:
                    raise RuntimeError(f"{op}: the answer is too short to be a 200 ({answered} B)")
            stats = running.front.front.stats
            if args.breakdown:
                await breakdown(running, http1, sets, args)
                return
            for round_ in range(args.rounds):
                for op in ops:
                    connection, sink = connections[op]
                    rng = random.Random(round_)
                    await drive(connection, sink, sets[op], args.warmup, rng)
                    fast = stats["fast"]
                    profile = cProfile.Profile() if args.profile == op else None
                    started_cpu, started = time.process_time(), time.perf_counter()
                    if profile:
                        profile.enable()
                    await drive(connection, sink, sets[op], args.n, rng)
                    if profile:
                        profile.disable()
                    cpu, wall = time.process_time() - started_cpu, time.perf_counter() - started
                    if stats["fast"] - fast != args.n:
                        raise RuntimeError(f"{op}: {args.n - (stats['fast'] - fast)} requests left the fast path")
                    print(json.dumps({"round": round_, "op": op, "n": args.n, "cpu_us": cpu / args.n * 1e6,
                                      "wall_us": wall / args.n * 1e6}), flush=True)
                    if profile:
                        out = pstats.Stats(profile, stream=sys.stderr)
                        out.sort_stats("tottime").print_stats(args.profile_lines)
                        out.sort_stats("cumulative").print_stats(args.profile_lines)
            await asyncio.sleep(0.5)    # the audit rows' last batch written before the database goes
        finally:
            await running.stop()


async def breakdown(running, http1, sets: dict[str, list[bytes]], args) -> None:
    """CPU µs per call of the fast path's parts, each timed alone in a loop (the same calls at every
    commit; what each contains differs): the HTTP server with a constant answer, the front's
    answer without HTTP, and inside it the caller, the authorizer, the catalog's answer and the
    audit row."""
    front = running.front.front
    module = sys.modules[type(front).__module__]
    captured = {}

    async def capture(request):
        captured["request"] = request
        return await front.answer(request)

    server = running.front.server
    answer, server.answer = server.answer, capture
    requests = {}
    for op in ("getTable", "listTables"):
        sink = Sink()
        connection = http1._Connection(server)
        connection.connection_made(sink)
        await drive(connection, sink, sets[op][:1], 1, random.Random(0))
        requests[op] = captured["request"]
    server.answer = answer
    get = requests["getTable"]
    caller = await front._caller(get)
    name = get.raw_path.rsplit("/", 1)[1]
    from shardcat.governance import audit
    from shardcat.governance.authorize import authorizer as authorize
    route = module.PREFIX + "/tables/{full_name}"

    async def constant(request):
        return constant_answer

    async def timed(label: str, make_call, n: int) -> None:
        for _ in range(n // 5):
            await make_call()
        profile = cProfile.Profile() if args.profile and label.startswith(args.profile) else None
        started = time.process_time()
        if profile:
            profile.enable()
        for _ in range(n):
            await make_call()
        if profile:
            profile.disable()
            pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile_lines)
        print(json.dumps({"part": label, "cpu_us": (time.process_time() - started) / n * 1e6}), flush=True)

    async def wire_constant():
        sink.waiter = asyncio.get_running_loop().create_future()
        connection.data_received(sets["getTable"][0])
        await sink.waiter

    if hasattr(audit, "FrontRoute"):        # routes' audit facts worked out once (since the CPU work)
        facts = audit.FrontRoute("GET", route)

        async def row():
            audit.answered_row(facts, {"full_name": name}, caller, audit.new_request_id(), 0)
    else:
        async def row():
            audit.answered_row("GET", route, {"full_name": name}, caller, audit.new_request_id(), 0)

    body = await module.found_json(front.catalogs, caller, "table", name)
    constant_answer = type(await front.answer(get))(200, {"Content-Type": "application/json"}, body)
    plain = http1.Server(constant)
    sink = Sink()
    connection = http1._Connection(plain)
    connection.connection_made(sink)
    n = args.n
    for _ in range(args.rounds):
        await timed("http server, constant answer", wire_constant, n)
        await timed("front.answer getTable (no HTTP)", lambda: front.answer(get), n)
        await timed("front.answer listTables (no HTTP)", lambda: front.answer(requests["listTables"]), n // 2)
        await timed("caller", lambda: front._caller(get), n)
        await timed("authorizer", lambda: authorize(front.shard, caller), n)
        await timed("found_json getTable", lambda: module.found_json(front.catalogs, caller, "table", name), n)
        await timed("audit row", row, n)
    plain.close()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, help="PostgreSQL URL of an empty database")
    p.add_argument("--tables", type=int, default=1000)
    p.add_argument("--n", type=int, default=5000, help="requests per measured round")
    p.add_argument("--warmup", type=int, default=1000, help="requests before each measured round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ops", default="getTable,listTables")
    p.add_argument("--profile", default=None, help="an operation to profile (cProfile, on stderr)")
    p.add_argument("--profile-lines", type=int, default=45)
    p.add_argument("--breakdown", action="store_true", help="time the fast path's parts alone instead")
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    return p.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    if arguments.loop == "uvloop":
        import uvloop
        uvloop.run(main(arguments))
    else:
        asyncio.run(main(arguments))
