"""CPU per cached getTable and listTables of two commits side by side: the server's own work per
request, which a shared machine changes far less than it changes req/s.

    python -m benchmarks.bench_front_cpu --old 1372562            # this checkout against that commit
    python -m benchmarks.bench_front_cpu --old A --new B --no-docs
    python -m benchmarks.bench_front_cpu --old 1372562 --profile getTable   # cProfile of each, on stderr

`--old` / `--new` name a commit (checked out in a temporary `git worktree`, removed at the end) or
a directory holding a checkout; `--new` defaults to this checkout. One embedded PostgreSQL, a
fresh database per run. Two measures per commit:

- **in-process** (benchmarks/front_cpu_driver.py, run with the commit's shardcat on PYTHONPATH):
  `shardcat serve`'s one-process catalog in the driver's own process; request bytes handed
  straight to the public front's connection object over an in-memory transport, one at a time,
  and `time.process_time()` over N requests: parsing, limits, the fast path, the audit row (and
  its background COPY), metrics, headers, writing. No sockets and no client: the least noisy.
- **served**: `shardcat serve` as its own process (as bench_api runs it), closed-loop keep-alive
  clients in this process (the benchmarks' ShardClient); the server process's user+system CPU
  over a window divided by the requests answered (sockets and the event loop's polling included).

Both commits' runs alternate (in-process: whole runs; served: windows), and each cell is the median.
Writes its section of docs/benchmarks.md unless --no-docs.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from . import harness as h

SECTION = "## CPU per cached read, two commits side by side (bench_front_cpu)"
CATALOG, SCHEMA = "bench", "s"
DRIVER = Path(__file__).resolve().parent / "front_cpu_driver.py"
OPS = ("getTable", "listTables")


def checkout(ref: str, stack: ExitStack) -> tuple[Path, str]:
    """(a directory holding `ref`, its short commit id): the directory itself, or a temporary worktree."""
    path = Path(ref)
    if path.is_dir():
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return path.resolve(), (commit + ("+changes" if dirty else "")) if commit else str(path)
    commit = subprocess.run(["git", "-C", str(h.ROOT), "rev-parse", "--short", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    where = Path(tempfile.mkdtemp(prefix=f"shardcat-cpu-{commit}-")) / "tree"
    subprocess.run(["git", "-C", str(h.ROOT), "worktree", "add", "--detach", str(where), commit], check=True,
                   capture_output=True)
    stack.callback(subprocess.run, ["git", "-C", str(h.ROOT), "worktree", "remove", "--force", str(where)],
                   capture_output=True)
    return where, commit


def in_process(tree: Path, db: str, args, breakdown: bool = False) -> list[dict]:
    """One driver run of `tree`: its rounds' JSON lines."""
    argv = [sys.executable, str(DRIVER), "--db", db, "--tables", str(args.tables), "--n", str(args.n),
            "--rounds", str(args.rounds), "--warmup", str(args.warmup_requests)]
    if breakdown:
        argv.append("--breakdown")
    if args.profile:
        argv += ["--profile", args.profile]
    done = subprocess.run(argv, cwd=tree, env={**__import__("os").environ, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, timeout=600)
    if args.profile:
        sys.stderr.write(f"==== profile of {args.profile} in {tree}\n{done.stderr}\n")
    if done.returncode != 0:
        raise RuntimeError(f"the driver failed in {tree}:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


async def served_window(server: h.Server, reqs: list[h.Request], concurrency: int, seconds: float,
                        warmup: float) -> float:
    """Server CPU µs per answered request over one window of closed-loop load."""
    headers = {"Authorization": f"Bearer {server.token}"}
    counters = {"ok": 0, "errors": 0}
    await h.closed_loop(reqs, headers, concurrency, warmup, counters, seed=1)
    counters = {"ok": 0, "errors": 0}
    before = h.tree_cpu([server.child.pid])
    await h.closed_loop(reqs, headers, concurrency, seconds, counters, seed=2)
    used = h.cpu_used(before, h.tree_cpu([server.child.pid]))
    if counters["errors"] or not counters["ok"]:
        raise RuntimeError(f"{counters['errors']} of {counters['ok'] + counters['errors']} requests failed")
    return used / counters["ok"] * 1e6


async def run(args, tmp: Path, pg: h.Postgres, trees: dict[str, Path]) -> dict:
    inproc: dict[tuple[str, str], list[float]] = {(c, op): [] for c in trees for op in OPS}
    for attempt in range(args.passes if args.requests else 0):
        for commit, tree in trees.items():
            db = await pg.database(f"cpu_{commit}_{attempt}")
            h.log(f"== in-process, {commit} (pass {attempt + 1}/{args.passes})")
            for line in in_process(tree, db, args):
                inproc[commit, line["op"]].append(line["cpu_us"])
    parts: dict[tuple[str, str], list[float]] = {}
    if args.breakdown:
        for attempt in range(args.passes):
            for commit, tree in trees.items():
                db = await pg.database(f"parts_{commit}_{attempt}")
                h.log(f"== the fast path's parts, {commit} (pass {attempt + 1}/{args.passes})")
                for line in in_process(tree, db, args, breakdown=True):
                    parts.setdefault((commit, line["part"]), []).append(line["cpu_us"])
    served: dict[tuple[str, str, int], list[float]] = {}
    if args.served:
        servers, workloads = {}, {}
        for commit, tree in trees.items():
            db = await pg.database(f"served_{commit}")
            server = servers[commit] = h.start_shardcat(tmp / f"shardcat-{commit}", db, name=f"shardcat-{commit}",
                                                        tree=tree)
            await h.seed_tables(server.api, server.token, CATALOG, SCHEMA, args.tables)
            workloads[commit] = {"getTable": h.get_requests(server.base, CATALOG, SCHEMA, args.tables),
                                 "listTables": h.list_requests(server.base, CATALOG, SCHEMA)}
        for round_ in range(args.rounds):
            for op in OPS:
                for c in args.concurrency:
                    for commit, server in servers.items():
                        us = await served_window(server, workloads[commit][op], c, args.seconds, args.warmup)
                        served.setdefault((commit, op, c), []).append(us)
            h.log(f"  served round {round_ + 1}/{args.rounds}: " + ", ".join(
                f"{k[0]} {k[1]}@{k[2]} {v[-1]:.0f} µs" for k, v in served.items()))
    return {"in_process": [{"commit": c, "operation": op, "cpu_us": statistics.median(v) if v else None,
                            "min_us": min(v) if v else None, "runs": v} for (c, op), v in inproc.items()],
            "served": [{"commit": c, "operation": op, "clients": n, "cpu_us": statistics.median(v), "windows": v}
                       for (c, op, n), v in served.items()],
            "parts": [{"commit": c, "part": part, "cpu_us": statistics.median(v), "min_us": min(v), "runs": v}
                      for (c, part), v in parts.items()]}


def markdown(run_info: dict) -> str:
    old, new = run_info["commits"]
    lines = [SECTION, "",
             f"- **Reproduce:** `{run_info['command']}` (about {run_info['wall_minutes']:.0f} min); run on "
             f"{run_info['date']}.",
             f"- **Machine:** {h.machine_line(run_info['machine'], None, postgres=False)}. "
             + ("**Shared machine** (other work ran): CPU per request moves far less than req/s under "
                "sharing, but still a few percent; compare the two columns of one run, not runs."
                if run_info["shared"] else ""),
             f"- **Data:** one schema of {run_info['tables']:,} tables of 8 columns (the bench_api data); getTable "
             "a random one, listTables the first page of 100.",
             "- **In-process:** benchmarks/front_cpu_driver.py: request bytes into the front's connection object, "
             f"one at a time, {run_info['n']:,} per round, {run_info['rounds']} rounds per run, "
             f"{run_info['passes']} run(s) per commit alternating; the median round. CPU µs per request of the "
             "whole process (the audit log's background COPY included).",
             *([f"- **Served:** `shardcat serve` as its own process, closed-loop clients in the benchmark's "
                f"process; the server's CPU over a {run_info['seconds']:g} s window per answered request, "
                f"{run_info['rounds']} alternating windows; the median."] if run_info["served"] else []),
             "",
             f"| operation | measure | {old} | {new} | change |",
             "| --- | --- | ---: | ---: | ---: |"]
    rows = {(r["commit"], r["operation"]): r["cpu_us"] for r in run_info["in_process"] if r["runs"]}
    least = {(r["commit"], r["operation"]): r["min_us"] for r in run_info["in_process"] if r["runs"]}
    served = {(r["commit"], r["operation"], r["clients"]): r["cpu_us"] for r in run_info["served"]}
    for op in OPS:
        if (old, op) in rows and (new, op) in rows:
            a, b = rows[old, op], rows[new, op]
            lines.append(f"| {op} | in-process | {a:.1f} | {b:.1f} | {100 * (b - a) / a:+.1f}% |")
            a, b = least[old, op], least[new, op]
            lines.append(f"| {op} | in-process, best round | {a:.1f} | {b:.1f} | {100 * (b - a) / a:+.1f}% |")
        for c in sorted({k[2] for k in served}):
            a, b = served[old, op, c], served[new, op, c]
            lines.append(f"| {op} | served, {c} client(s) | {a:.1f} | {b:.1f} | {100 * (b - a) / a:+.1f}% |")
    parts = {(r["commit"], r["part"]): r for r in run_info.get("parts", [])}
    if parts:
        lines += ["", "The fast path's parts, each timed alone in a loop (front_cpu_driver.py --breakdown; CPU µs per "
                  "call, median of the rounds; what each part contains differs between the commits):", "",
                  f"| part | {old} | {new} | change |", "| --- | ---: | ---: | ---: |"]
        for part in dict.fromkeys(p for _, p in parts):
            if (old, part) in parts and (new, part) in parts:
                a, b = parts[old, part]["cpu_us"], parts[new, part]["cpu_us"]
                lines.append(f"| {part} | {a:.2f} | {b:.2f} | {100 * (b - a) / a:+.1f}% |")
    return "\n".join(lines + [""])


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_front_cpu", description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="a commit, or a directory holding a checkout")
    p.add_argument("--new", default=str(h.ROOT), help="a commit or a directory (default: this checkout)")
    p.add_argument("--tables", type=int, default=1000)
    p.add_argument("--n", type=int, default=5000, help="in-process: requests per round")
    p.add_argument("--warmup-requests", type=int, default=1000, help="in-process: requests before each round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--passes", type=int, default=2, help="in-process: runs per commit, alternating")
    p.add_argument("--served", action="store_true", help="also measure `shardcat serve` processes under load")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 32])
    p.add_argument("--seconds", type=float, default=4.0, help="served: seconds per window")
    p.add_argument("--warmup", type=float, default=1.0, help="served: seconds of warm-up per window")
    p.add_argument("--breakdown", action="store_true", help="also time the fast path's parts alone (--breakdown "
                                                              "of the driver)")
    p.add_argument("--no-requests", dest="requests", action="store_false",
                   help="skip the whole-request rounds (with --breakdown or --served)")
    p.add_argument("--profile", choices=OPS, help="print a cProfile of this operation's in-process rounds")
    p.add_argument("--shared", action="store_true", help="say in the report that the machine was shared")
    p.add_argument("--out", type=Path, default=h.DOCS)
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    with ExitStack() as stack:
        trees = dict(checkout(ref, stack)[::-1] for ref in (args.old, args.new))
        if len(trees) != 2:
            raise SystemExit("--old and --new are the same commit")
        h.log(f"bench_front_cpu: {', '.join(f'{c} in {t}' for c, t in trees.items())}")
        outcome = h.run_with_postgres("shardcat-bench-cpu-", lambda tmp, pg: run(args, tmp, pg, trees))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_front_cpu", *argv]),
                "machine": info, "commits": list(trees), "tables": args.tables, "n": args.n, "rounds": args.rounds,
                "passes": args.passes, "served": args.served, "seconds": args.seconds, "shared": args.shared,
                "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    h.publish("bench_front_cpu", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
