"""The fronts' HTTP/1.1 server vs well-kept servers that could replace it: speed, and which limits each enforces.

    python -m benchmarks.bench_http_servers            # ~1.5 min, writes its section of docs/benchmarks.md
    python -m benchmarks.bench_http_servers --no-docs  # print only
    python -m benchmarks.bench_http_servers --rounds 1 --seconds 2 --warmup 0.5 --no-docs   # a quick look

Each server of benchmarks/http_servers.py (the fronts' own, web/http1.py with its limits;
aiohttp's low-level server on its C parser; uvicorn's httptools and h11 protocols around a bare
ASGI callable) answers the same constant getTable-sized and listTables-sized bodies to 32
closed-loop clients (ShardClient, in this process); windows of the servers alternate and each row
is the median window. Server CPU per request is the figure to compare on a busy machine (req/s
moves with whatever else runs). Then each server gets the same hostile requests once (an
oversized request line, header, header count, a URL and a header sent in small pieces) and the
table says what it answered: the limits a replacement would bring by itself.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

import uvloop

from . import harness as h
from .http_servers import SERVERS

HEADING = "## HTTP/1.1 servers for the fronts: web/http1.py vs aiohttp's, uvicorn's, h11"
CONCURRENCY = 32
SIZES = {"getTable": 2_400, "listTables": 236_000}      # about what shardcat answers (bench_cache)
NAMES = {"http1": "web/http1.py (the fronts', with its limits)",
         "aiohttp-server": "aiohttp low-level server (web_server.Server, C parser)",
         "uvicorn-httptools": "uvicorn, httptools protocol (ASGI)", "uvicorn-h11": "uvicorn, h11 protocol (ASGI)"}
KIB = 1024
# name -> (the bytes to send, sent in pieces of this many bytes (0: at once)); none of them ever finishes a head
PROBES = {
    "request line of 64 KiB": (b"GET /" + b"a" * (64 * KIB) + b" HTTP/1.1\r\nHost: x\r\n\r\n", 0),
    "a header of 64 KiB": (b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (64 * KIB) + b"\r\n\r\n", 0),
    "1,000 headers": (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(1000)) + b"\r\n", 0),
    "a 1 MiB URL in 4 KiB pieces": (b"GET /" + b"a" * (1024 * KIB), 4 * KIB),
    "a 1 MiB header in 4 KiB pieces": (b"GET / HTTP/1.1\r\nX: " + b"a" * (1024 * KIB), 4 * KIB),
}


async def load(reqs: list[h.Request], seconds: float) -> int:
    return await h.answered_in(reqs, CONCURRENCY, seconds)


def window(reqs: list[h.Request], seconds: float, warmup: float, server_pid: int) -> dict:
    return uvloop.run(h.cpu_window(load, reqs, seconds, warmup, server_pid))


def start(logdir: Path, server: str) -> tuple[h.Child, str]:
    argv = [sys.executable, "-m", "benchmarks.http_servers", server, "--port", "0",
            "--get-size", str(SIZES["getTable"]), "--list-size", str(SIZES["listTables"])]
    child, match = h.spawn(argv, logdir / f"{server}.log", r"bare listening on (http://\S+)", server)
    return child, match.group(1)


async def probe(base: str, data: bytes, piece: int) -> str:
    """What a server answers to `data` within 3 s: its status line, or that it closed or kept waiting."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    answer = asyncio.ensure_future(reader.readline())
    try:
        for at in range(0, len(data), piece or len(data)):
            if answer.done():
                break
            writer.write(data[at:at + (piece or len(data))])
            await writer.drain()
            if piece:
                await asyncio.sleep(0.001)
        line = await asyncio.wait_for(answer, 3)
        return line.decode("latin-1").strip().removeprefix("HTTP/1.1 ") or "closed, no answer"
    except (asyncio.TimeoutError, TimeoutError):
        return "no answer in 3 s: still reading"
    except ConnectionError as e:
        return f"connection {type(e).__name__}"
    finally:
        answer.cancel()
        writer.close()


def run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="shardcat-bench-http-") as tmp:
        servers = {name: start(Path(tmp), name) for name in SERVERS}
        try:
            windows = {(name, op): [] for op in SIZES for name in SERVERS}
            for round_ in range(args.rounds):
                for op in SIZES:
                    for name, (child, base) in servers.items():
                        reqs = (h.get_requests(base, "bench", "s", 1000) if op == "getTable"
                                else h.list_requests(base, "bench", "s"))
                        windows[name, op].append(window(reqs, args.seconds, args.warmup, child.pid))
                h.log(f"  round {round_ + 1}/{args.rounds}: " + ", ".join(
                    f"{name} {op} {w[-1]['server_us']:.0f} µs" for (name, op), w in windows.items()))
            probes = {name: {p: uvloop.run(probe(base, *PROBES[p])) for p in PROBES}
                      for name, (_, base) in servers.items()}
        finally:
            h.stop_all()
    return {"rows": [{"server": name, "operation": op,
                      **{key: statistics.median(w[key] for w in ws) for key in ws[0]}}
                     for (name, op), ws in windows.items()],
            "probes": probes}


def report(run_info: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run_info['command']}` (about 1.5 min); run on {run_info['date']}.",
             f"- **Machine:** {h.machine_line(run_info['machine'], None, postgres=False)}.",
             f"- **What:** `benchmarks/http_servers.py` answering constant bodies ({SIZES['getTable']:,} B for "
             f"getTable URLs, {SIZES['listTables']:,} B for listTables) on uvloop from each server; {CONCURRENCY} "
             f"closed-loop clients in this process (ShardClient); {run_info['rounds']} alternating windows of "
             f"{run_info['seconds']:g} s each, the median window. CPU per answered request: the server, and this "
             "process (the client).",
             "",
             "| operation | server | req/s | server CPU µs per request | vs web/http1.py "
             "| client CPU µs per request |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    at = {(r["server"], r["operation"]): r for r in run_info["rows"]}
    for r in run_info["rows"]:
        own = at["http1", r["operation"]]["server_us"]
        lines.append(f"| {r['operation']} | {NAMES[r['server']]} | {r['req_per_s']:,.0f} | {r['server_us']:.1f} | "
                     f"{r['server_us'] / own:.2f}× | {r['client_us']:.1f} |")
    own = at["http1", "getTable"]["server_us"]
    best = min((r for r in run_info["rows"] if r["operation"] == "getTable" and r["server"] != "http1"),
               key=lambda r: r["server_us"])
    ratio = best["server_us"] / own
    lines += ["", f"Per getTable-sized answer the closest candidate, {NAMES[best['server']]}, spends "
              f"{best['server_us']:.1f} µs of server CPU against web/http1.py's {own:.1f} µs ({ratio:.2f}×). "
              + ("Within 10%: the fronts could switch to it." if ratio <= 1.1 else
                 "More than 10% over: the fronts keep web/http1.py, with its limits (web/http_limits.py).")]
    lines += ["", "What each answered to requests past common limits (its first status line within 3 s):", "",
              "| request | " + " | ".join(NAMES[s] for s in SERVERS) + " |",
              "| --- |" + " --- |" * len(SERVERS)]
    for p in PROBES:
        lines.append(f"| {p} | " + " | ".join(run_info["probes"][s][p] for s in SERVERS) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    h.alternating_windows_main("bench_http_servers", __doc__.splitlines()[0], 3, run, report, HEADING)


if __name__ == "__main__":
    main()
