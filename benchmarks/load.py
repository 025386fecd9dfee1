"""Load: closed loops of clients (the lean ShardClient or wrk), timed windows, CPU per request, percentiles."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from yarl import URL

from shardcat.web.shard_client import Address, ShardClient

from .common import MAX_REQUESTS, NOISY_CORES, REQUEST_TIMEOUT, log
from .machine import cpu_used, machine_busy, own_cpu, tree_cpu, wait_for_quiet


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

def fmt_ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"
