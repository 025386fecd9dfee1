"""Commands: a named Locust scenario, or a chaos experiment under load. Loopback only, bounded runs.

    python -m loadtest run smoke|paper-mix        # Locust headless vs `shardcat serve --shards N`
    python -m loadtest chaos kill-shard|pause-shard|move|dual-owner|pg-restart|all [--long]

Each starts its own embedded PostgreSQL and server under a temporary directory, seeds the
metastores (workload.metastore_sizes), runs, writes CSV/JSON/PNG under loadtest/out/, updates
its table in docs/benchmarks.md or docs/reliability.md, and stops everything it started.
Needs matplotlib (the `load` extra); Locust comes from loadtest/locust_env.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .locust_env import locust_python

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "loadtest" / "out"
DOCS = ROOT / "docs"


@dataclass(frozen=True)
class Scenario:
    metastores: int
    max_tables: int
    shards: int
    users: int
    seconds: int
    max_requests: int


SCENARIOS = {
    # a minute-scale check that everything works end to end
    "smoke": Scenario(metastores=12, max_tables=2_000, shards=2, users=8, seconds=20, max_requests=50_000),
    # the paper's shape: 200 metastores, most ~30 tables, the two largest 100,000
    "paper-mix": Scenario(metastores=200, max_tables=100_000, shards=2, users=32, seconds=300,
                          max_requests=3_000_000),
}


def log(msg: str) -> None:
    print(f"[loadtest {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- processes -------------------------------------------------------------------------------

def start_server(db: str, data_dir: Path, shards: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "shardcat", "serve", "--shards", str(shards), "--port", "0",
                             "--db", db, "--data-dir", str(data_dir)], stdout=subprocess.PIPE,
                            stderr=open(data_dir / "server.log", "w"), text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if found:
            return proc, found.group(1)
        if time.monotonic() > deadline:
            break
    stop(proc)
    raise RuntimeError(f"the server did not start; see {data_dir / 'server.log'}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ---- run: a Locust scenario ------------------------------------------------------------------

def run_scenario(name: str) -> None:
    from shardcat.cluster.embedded_db import start_embedded_postgres
    from shardcat.store.db import Store

    from .plots import plot_locust
    from .seed import save_population, seed
    from .workload import metastore_sizes

    sc = SCENARIOS[name]
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="shardcat-load-"))
    server = None
    try:
        db = start_embedded_postgres(tmp / "pg")
        server, url = start_server(db, tmp, sc.shards)
        sizes = metastore_sizes(sc.metastores, max_tables=sc.max_tables)
        log(f"server {url}; seeding {len(sizes)} metastores, {sum(sizes)} tables")

        async def do_seed():
            store = await Store.open(db)
            try:
                return await seed(store, url, (tmp / "storage").as_uri(), sizes)
            finally:
                await store.close()

        started = time.monotonic()
        metastores = asyncio.run(do_seed())
        log(f"seeded in {time.monotonic() - started:.1f} s; Locust: {sc.users} users for {sc.seconds} s "
            f"or {sc.max_requests} requests")
        population = tmp / "population.json"
        save_population(population, url, metastores)
        prefix = OUT / f"locust-{name}"
        env = {**os.environ, "LOADTEST_POPULATION": str(population), "LOADTEST_MAX_REQUESTS": str(sc.max_requests)}
        subprocess.run([locust_python(), "-m", "locust", "-f", str(ROOT / "loadtest" / "locustfile.py"), "--headless",
                        "-u", str(sc.users), "-r", str(sc.users), "-t", f"{sc.seconds}s", "--host", url,
                        "--csv", str(prefix), "--csv-full-history", "--only-summary", "--stop-timeout", "5",
                        "--loglevel", "WARNING"], env=env, timeout=sc.seconds + 120, check=False)
        section = plot_locust(name, prefix, sc, sizes)
        write_section(DOCS / "benchmarks.md", f"## Mixed workload under Locust: `{name}`", section)
        log(f"results in {prefix}_*.csv, plot in docs/img/, section in docs/benchmarks.md")
    finally:
        if server is not None:
            stop(server)
        shutil.rmtree(tmp, ignore_errors=True)


# ---- chaos: one experiment under load --------------------------------------------------------

async def run_chaos(experiments: list[str], long: bool) -> list[dict]:
    from shardcat.cluster.embedded_db import start_embedded_postgres, stop_embedded_postgres
    from shardcat.cluster.server import ServeConfig, start

    from .chaos import ChaosConfig, run_experiment
    from .plots import plot_chaos
    from .seed import seed
    from .workload import metastore_sizes

    OUT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="shardcat-chaos-"))
    results = []
    try:
        pgdata = tmp / "pg"
        db = await asyncio.to_thread(start_embedded_postgres, pgdata)
        running = await start(ServeConfig(port=0, db=db, shards=3 if long else 2, data_dir=tmp))
        try:
            sizes = metastore_sizes(100 if long else 20, max_tables=20_000 if long else 2_000)
            metastores = await seed(running.store, running.url, (tmp / "storage").as_uri(), sizes)
            log(f"cluster {running.url}: {len(metastores)} metastores, {sum(sizes)} tables")
            for experiment in experiments:
                while len(running.cluster.routing.live()) < (3 if long else 2):
                    await asyncio.sleep(0.2)      # a killed shard's replacement is still starting
                cfg = ChaosConfig(experiment, duration=60.0 if long else 8.0, fault_at=20.0 if long else 3.0,
                                  clients=32 if long else 8, max_requests=2_000_000 if long else 100_000)
                log(f"{experiment}: {cfg.duration:.0f} s of load, fault at {cfg.fault_at:.0f} s")
                result = await run_experiment(running, metastores, cfg, pgdata=pgdata)
                result["command"] = f"python -m loadtest chaos {experiment}{' --long' if long else ''}"
                result["when"] = time.strftime("%Y-%m-%d %H:%M")
                (OUT / f"chaos-{experiment}.json").write_text(json.dumps(result, indent=1, default=str))
                plot_chaos(result, DOCS / "img" / f"chaos-{experiment}.png")
                log(f"{experiment}: recovery {result['recovery_seconds']} s, errors {result['errors']}, "
                    f"invariants {'hold' if result['invariants_hold'] else 'VIOLATED'}")
                results.append(result)
        finally:
            await running.stop()
    finally:
        await asyncio.to_thread(stop_embedded_postgres, tmp / "pg")   # restarted: no longer reaped for us
        shutil.rmtree(tmp, ignore_errors=True)
    update_reliability(long)
    return results


def update_reliability(long: bool) -> None:
    """Rewrite the results table of docs/reliability.md from loadtest/out/chaos-*.json."""
    rows = ["| experiment | run | requests | req/s | p50 / p99 ms | recovery s | client errors (after fault) "
            "| acked writes checked | invariants | command |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for path in sorted(OUT.glob("chaos-*.json")):
        r = json.loads(path.read_text())
        kind = "long" if r["config"]["duration"] >= 30 else "**short (not a measurement)**"
        rows.append(f"| {r['experiment']} | {kind}, {r['when']} | {r['requests']} | {r['rps']} | "
                    f"{r['p50_ms']} / {r['p99_ms']} | {r['recovery_seconds']} | {r['errors']} "
                    f"({r['errors_after_fault']}) | {r['checked_tables']} | "
                    f"{'hold' if r['invariants_hold'] else 'VIOLATED'} | `{r['command']}` |")
    write_between(DOCS / "reliability.md", "<!-- chaos-results -->", "\n".join(rows))


def write_between(path: Path, marker: str, body: str) -> None:
    text = path.read_text()
    start = text.index(marker) + len(marker)
    end = text.index(marker, start)
    path.write_text(text[:start] + "\n" + body + "\n" + text[end:])


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the section starting at `heading` (up to the next `## `), or append it."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    body = heading + "\n\n" + section.strip("\n") + "\n"
    if start is None:
        text = text.rstrip("\n") + "\n\n" + body
    else:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
        after = "\n".join(lines[end:])
        text = "\n".join(lines[:start]).rstrip("\n") + "\n\n" + body + ("\n" + after + "\n" if after else "")
    path.write_text(text)


def main(argv=None) -> None:
    from .chaos import EXPERIMENTS

    parser = argparse.ArgumentParser(prog="python -m loadtest")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="a named Locust scenario")
    run.add_argument("scenario", choices=sorted(SCENARIOS))
    chaos = sub.add_parser("chaos", help="a chaos or reassignment experiment under load")
    chaos.add_argument("experiment", choices=[*EXPERIMENTS, "all"])
    chaos.add_argument("--long", action="store_true", help="60 s of load from 32 clients over 100 metastores")
    args = parser.parse_args(argv)
    if args.command == "run":
        run_scenario(args.scenario)
    else:
        experiments = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
        results = asyncio.run(run_chaos(experiments, args.long))
        sys.exit(0 if all(r["invariants_hold"] and r["recovery_seconds"] is not None for r in results) else 1)


if __name__ == "__main__":
    main()
