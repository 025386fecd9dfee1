"""What the load generator's client costs: aiohttp's client, the router's ShardClient, wrk.

    python -m benchmarks.bench_client            # ~1 min, writes its section of docs/benchmarks.md
    python -m benchmarks.bench_client --no-docs  # print only

The benchmarks run their clients on the same two cores as the servers they measure, so the
client's CPU per request is taken from the server. This measures it against the bare aiohttp
server (benchmarks/bare_server.py, getTable-sized answers): 32 closed-loop clients with aiohttp's
client on asyncio's loop (what the benchmarks used first), the same on uvloop, the router's own
lean client (shardcat/web/shard_client.py) on uvloop (bench_api's), and wrk (Debian's
package, bench_cache's; its CPU is that of the child process). Windows of the variants
alternate; each row is the median window.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import uvloop

from . import harness as h

HEADING = "## The load client: aiohttp's, the router's ShardClient, wrk"
CONCURRENCY = 32
ANSWER_BYTES = 2400       # about a getTable answer
VARIANTS = {"aiohttp's client, asyncio's loop": ("aiohttp", asyncio.run),
            "aiohttp's client, uvloop": ("aiohttp", uvloop.run),
            "ShardClient, uvloop (bench_api's client)": ("ShardClient", uvloop.run),
            "wrk (bench_cache's client)": ("wrk", uvloop.run)}


async def aiohttp_loop(reqs: list[h.Request], seconds: float) -> int:
    """The benchmarks' closed loop as it was: one keep-alive aiohttp session shared by the clients."""
    answered = 0
    deadline = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=CONCURRENCY, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                     timeout=aiohttp.ClientTimeout(total=h.REQUEST_TIMEOUT)) as session:
        async def worker(i: int) -> None:
            nonlocal answered
            rng = random.Random(i)
            while time.perf_counter() < deadline:
                async with session.get(reqs[rng.randrange(len(reqs))].url) as resp:
                    await resp.read()
                    answered += resp.status == 200
        await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))
    return answered


async def shard_client_loop(reqs: list[h.Request], seconds: float) -> int:
    return await h.answered_in(reqs, CONCURRENCY, seconds)


async def wrk_loop(reqs: list[h.Request], seconds: float) -> int:
    counters = {"ok": 0, "errors": 0}
    w = await h.wrk_window(reqs, {}, CONCURRENCY, seconds, counters, seed=1)
    if w.errors or not w.ok:
        raise RuntimeError(f"wrk: {w.errors} errors, {w.ok} answers")
    return w.ok


LOOPS = {"aiohttp": aiohttp_loop, "ShardClient": shard_client_loop, "wrk": wrk_loop}


def window(kind: str, runner, reqs: list[h.Request], seconds: float, warmup: float, server_pid: int) -> dict:
    loop = LOOPS[kind]
    return runner(h.cpu_window(loop, reqs, seconds, warmup, server_pid))


def run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="shardcat-bench-client-") as tmp:
        child, base = h.start_bare(Path(tmp), {"getTable": ANSWER_BYTES})
        try:
            reqs = h.get_requests(base, "bench", "s", 1000)
            windows: dict[str, list[dict]] = {name: [] for name in VARIANTS}
            for round_ in range(args.rounds):
                for name, (kind, runner) in VARIANTS.items():
                    windows[name].append(window(kind, runner, reqs, args.seconds, args.warmup, child.pid))
                h.log(f"  round {round_ + 1}/{args.rounds}: " + ", ".join(
                    f"{name} {w[-1]['req_per_s']:,.0f}/s" for name, w in windows.items()))
        finally:
            h.stop_all()
    return {"rows": {name: {key: statistics.median(w[key] for w in ws) for key in ws[0]}
                     for name, ws in windows.items()}}


def report(run_info: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run_info['command']}` (about 1 min); run on {run_info['date']}.",
             f"- **Machine:** {h.machine_line(run_info['machine'], None, postgres=False)}.",
             f"- **What:** getTable URLs against `benchmarks/bare_server.py` ({ANSWER_BYTES:,} B constant answers, "
             f"uvloop), {CONCURRENCY} closed-loop clients in this process; {run_info['rounds']} alternating windows "
             f"of {run_info['seconds']:g} s each, the median window. CPU per answered request: this process (the "
             "client) and the bare server.",
             "",
             "| client | req/s | client CPU µs per request | server CPU µs per request |",
             "| --- | ---: | ---: | ---: |"]
    for name, r in run_info["rows"].items():
        lines.append(f"| {name} | {r['req_per_s']:,.0f} | {r['client_us']:.0f} | {r['server_us']:.0f} |")
    first, shard_client, wrk = (run_info["rows"][name] for name in (list(VARIANTS)[0], *list(VARIANTS)[2:]))
    lines += ["", f"ShardClient spends {shard_client['client_us'] / first['client_us']:.2f}× the CPU per request of "
              f"aiohttp's client on asyncio's loop, wrk {wrk['client_us'] / shard_client['client_us']:.2f}× that of "
              "ShardClient. Whatever the client spends, the servers on the same two cores do not get: the bare "
              f"ceiling measured is {shard_client['req_per_s'] / first['req_per_s']:.2f}× as high with ShardClient "
              f"as with the first client, and {wrk['req_per_s'] / first['req_per_s']:.2f}× with wrk."]
    return "\n".join(lines) + "\n"


def main() -> None:
    h.require_wrk("wrk")
    h.alternating_windows_main("bench_client", __doc__.splitlines()[0], 3, run, report, HEADING)


if __name__ == "__main__":
    main()
