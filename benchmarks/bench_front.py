"""The fronts' HTTP/1.1 server vs aiohttp.web: the same constant answers, the same client.

    python -m benchmarks.bench_front            # ~1.5 min, writes its section of docs/benchmarks.md
    python -m benchmarks.bench_front --no-docs  # print only

`benchmarks/bare_server.py` twice: as the ceiling the other benchmarks measure against (an
aiohttp.web app answering constant bodies) and with `--front` (the same bodies from
shardcat/web/http1.py, the server the router and every shard run before their aiohttp
apps). getTable-sized and listTables-sized answers at 32 closed-loop clients (the benchmarks'
ShardClient load); windows of the two servers alternate, and each row is the median window.
The difference is what a front saves on every request it answers itself, before any of the
catalog's own work.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import uvloop

from . import harness as h

HEADING = "## The fronts' HTTP/1.1 server vs aiohttp.web: constant answers"
CONCURRENCY = 32
SIZES = {"getTable": 2_400, "listTables": 236_000}      # about what shardcat answers (bench_cache)
SERVERS = {"aiohttp.web (the bare ceiling)": False, "the fronts' server (web/http1.py)": True}


async def load(reqs: list[h.Request], seconds: float) -> int:
    return await h.answered_in(reqs, CONCURRENCY, seconds)


def window(reqs: list[h.Request], seconds: float, warmup: float, server_pid: int) -> dict:
    return uvloop.run(h.cpu_window(load, reqs, seconds, warmup, server_pid))


def run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="shardcat-bench-front-") as tmp:
        servers = {name: h.start_bare(Path(tmp), SIZES, front=front) for name, front in SERVERS.items()}
        try:
            windows = {(name, op): [] for op in SIZES for name in SERVERS}
            for round_ in range(args.rounds):
                for op in SIZES:
                    for name, (child, base) in servers.items():
                        reqs = (h.get_requests(base, "bench", "s", 1000) if op == "getTable"
                                else h.list_requests(base, "bench", "s"))
                        windows[name, op].append(window(reqs, args.seconds, args.warmup, child.pid))
                h.log(f"  round {round_ + 1}/{args.rounds}: " + ", ".join(
                    f"{name} {op} {w[-1]['req_per_s']:,.0f}/s" for (name, op), w in windows.items()))
        finally:
            h.stop_all()
    return {"rows": [{"server": name, "operation": op,
                      **{key: statistics.median(w[key] for w in ws) for key in ws[0]}}
                     for (name, op), ws in windows.items()]}


def report(run_info: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run_info['command']}` (about 1.5 min); run on {run_info['date']}.",
             f"- **Machine:** {h.machine_line(run_info['machine'], None, postgres=False)}.",
             f"- **What:** `benchmarks/bare_server.py` answering constant bodies ({SIZES['getTable']:,} B for "
             f"getTable URLs, {SIZES['listTables']:,} B for listTables) on uvloop, once on aiohttp.web and once "
             f"with `--front`; {CONCURRENCY} closed-loop clients in this process (ShardClient); "
             f"{run_info['rounds']} alternating windows of {run_info['seconds']:g} s each, the median window. CPU per "
             "answered request: the server, and this process (the client).",
             "",
             "| operation | server | req/s | server CPU µs per request | client CPU µs per request |",
             "| --- | --- | ---: | ---: | ---: |"]
    for r in run_info["rows"]:
        lines.append(f"| {r['operation']} | {r['server']} | {r['req_per_s']:,.0f} | {r['server_us']:.1f} | "
                     f"{r['client_us']:.1f} |")
    at = {(r["server"], r["operation"]): r for r in run_info["rows"]}
    aiohttp_name, front_name = SERVERS
    get_old, get_new = at[aiohttp_name, "getTable"], at[front_name, "getTable"]
    lines += ["", f"Per getTable-sized answer the fronts' server spends {get_new['server_us']:.1f} µs of CPU against "
              f"aiohttp.web's {get_old['server_us']:.1f} µs. A shard's front gives the catalog's own work the "
              "difference on every read it answers itself, which is why a shard can come close to the bare "
              "ceiling (bench_cache)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    h.alternating_windows_main("bench_front", __doc__.splitlines()[0], 3, run, report, HEADING)


if __name__ == "__main__":
    main()
