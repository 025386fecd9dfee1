"""How long the `shardcat` command takes from start to exit: `--help`, and a client command against a running server.

    python -m benchmarks.bench_cli_start [--runs 20] [--no-docs]

One embedded PostgreSQL and one `shardcat serve` (its in-process shard) with one catalog. Each
command runs `runs` times in a row as a new process (the installed console script, as a user
types it), after one warm-up run that fills the page cache: wall time from spawn to exit (median,
90th percentile) and the CPU the process used (user + system, median), which a busy machine
distorts less than wall time. Beside them, the floor (`python -c pass`) and what the client
avoids by not importing the server (`python -c "import shardcat.cluster.server"`).
Writes its section of docs/benchmarks.md and the raw numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import harness as h

HEADING = "## CLI start-up: `shardcat --help` and a client command"
CATALOG = "bench_cli"


def shardcat_script() -> str:
    """The console script beside this interpreter (not a version manager's shim, which adds its own start)."""
    script = Path(sys.executable).parent / "shardcat"
    return str(script) if script.exists() else shutil.which("shardcat") or sys.exit("no `shardcat` script installed")


def timed_runs(argv: list[str], runs: int, env: dict) -> dict:
    """`runs` runs of argv after a warm-up: wall and CPU milliseconds of each; every run must exit 0."""
    walls, cpus = [], []
    for n in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, timeout=120)
        wall = (time.perf_counter() - started) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
        if n:                                   # run 0 is the warm-up
            walls.append(wall)
            cpus.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    walls.sort()
    return {"wall_ms": walls, "cpu_ms": cpus, "wall_p50_ms": statistics.median(walls),
            "wall_p90_ms": h.percentile(walls, 90), "cpu_p50_ms": statistics.median(cpus)}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    server = h.start_shardcat(tmp / "serve", await pg.database("bench_cli_start"))
    script = shardcat_script()
    env = {**os.environ, "SHARDCAT_URL": server.base, "SHARDCAT_TOKEN": server.token}
    commands = [
        ("`python -c pass` (the interpreter alone)", [sys.executable, "-c", "pass"]),
        ("`shardcat --help`", [script, "--help"]),
        ("`shardcat catalog list` (one request)", [script, "catalog", "list"]),
        ("`shardcat table list bench_cli.s --json` (one request)", [script, "table", "list", f"{CATALOG}.s", "--json"]),
        ("`python -c \"import shardcat.cluster.server\"` (what the client does not import)",
         [sys.executable, "-c", "import shardcat.cluster.server"]),
    ]
    try:
        for argv in (["catalog", "create", CATALOG], ["schema", "create", f"{CATALOG}.s"],
                     ["table", "create", f"{CATALOG}.s.t", "--column", "id:LONG"]):
            subprocess.run([script, *argv], env=env, capture_output=True, timeout=120, check=True)
        rows = []
        for label, argv in commands:
            h.log(f"  {label}: {args.runs} runs")
            rows.append({"command": label, **timed_runs(argv, args.runs, env)})
    finally:
        h.stop(server.child)
    return {"runs": args.runs, "script": script, "postgres_version": pg.version, "rows": rows}


def markdown(run: dict) -> str:
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}`; run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             f"- **Method:** each command {run['runs']} times as a new process (the installed console script, "
             "not a version manager's shim), after one warm-up run; wall time from spawn to exit and the "
             "process's user + system CPU. The client commands ask a `shardcat serve` on loopback (one "
             "catalog, one schema, one table). The client imports none of the server's modules "
             "(tests/unit/client/test_cli_imports.py checks it); the last row is the import it avoids.",
             "",
             "| command | wall p50 ms | wall p90 ms | CPU p50 ms |",
             "| --- | ---: | ---: | ---: |"]
    for row in run["rows"]:
        lines.append(f"| {row['command']} | {row['wall_p50_ms']:.0f} | {row['wall_p90_ms']:.0f} | "
                     f"{row['cpu_p50_ms']:.0f} |")
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_cli_start", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command after a warm-up")
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_cli_start",
                                                        *(sys.argv[1:] if argv is None else argv)]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)
    result = h.run_with_postgres("bench_cli_start", body)
    if result is None:
        return 1
    h.publish("bench_cli_start", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
