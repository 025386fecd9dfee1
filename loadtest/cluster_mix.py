"""The paper's request mix over 100 metastores with Zipf-skewed load, through the router, on 1 and 2
Ray nodes and 1 and 2 home databases, and a node joining under that load: one bounded run on
loopback, with the CPU every process group used (this machine's ceiling, beside the design's).

    python -m loadtest.cluster_mix [--seconds 60] [--warmup 15] [--users 32] [--zipf 1.0] [--no-docs]
    python -m loadtest.cluster_mix --report loadtest/out/cluster-mix-*.json      # the docs again, from a run

The router and the supervisor run in this process, connected to a Ray `Cluster` on 127.0.0.1 (as
loadtest/multinode.py does); Locust runs headless in a process of its own (locustfile.py, with
LOADTEST_ZIPF: metastores chosen by Zipf's law, and LOADTEST_SAMPLES: every request recorded), the
whole time a catalog serves. Every configuration runs 2 shard actors in total (the same total
shard count: on 2 nodes, one on each). In order:

1. Two embedded PostgreSQL servers (pg-a, pg-b); a Ray cluster of its head alone.
2. "1 database" (pg-a): the catalog started, 100 metastores seeded (workload.metastore_sizes),
   Locust's warm-up, then a measured window: **1 node x 1 database**.
3. "2 databases" (db0 on pg-a, db1 on pg-b; a new metastore goes to the home of fewest, so half
   each): the same, **1 node x 2 databases**; then, under the same Locust run, a worker node
   joins: the time until its shard serves, the metastores moved, the head's surplus shard retired
   and the load balanced, with the failures and latency meanwhile; then a warm-up and a window
   on the result: **2 nodes x 2 databases**.
4. "1 database" again, its catalog started anew on the two nodes: **2 nodes x 1 database**.

Each window reports requests answered per second, p50 and p99 (overall and per request type),
failures, where shards and metastores were, and the CPU seconds per second (cores busy) of each
process group: the router's process, the shards (by node), Ray's own processes, each PostgreSQL
server, Locust, and the rest of the machine. Results: loadtest/out/cluster-mix-*.json, the section
"Measured: the paper mix ..." of docs/cluster.md, a short entry in docs/benchmarks.md, and
docs/img/cluster-mix.png (loadtest/plots_cluster.py). Locust comes from
loadtest/locust_env.py (or --locust-python). Everything it started is stopped at the end.
"""

from __future__ import annotations

# First: it gives this run's Ray a directory of its own (RAY_TMPDIR) before Ray is imported.
from .multinode import HEAD, RAY_DIR, add_node_in_thread, reap  # noqa: I001

import argparse
import asyncio
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
import ray
import uvloop
from ray.cluster_utils import Cluster

from benchmarks.common import on_sigterm_raise
from benchmarks.machine import machine, machine_busy, tree_cpu_total
from benchmarks.processes import Postgres, spawn, stop, stop_all
from benchmarks.reports import machine_line, now_utc, write_section
from shardcat.cluster.server import ServeConfig, start

from .locust_env import locust_python, locust_version
from .samples import Sample, bins, read_samples, summarize
from .seed import save_population, seed
from .workload import metastore_sizes, zipf_weights

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "loadtest" / "out"
CLUSTER_MD = ROOT / "docs" / "cluster.md"
BENCHMARKS_MD = ROOT / "docs" / "benchmarks.md"
PNG = ROOT / "docs" / "img" / "cluster-mix.png"
HEADING = "## Measured: the paper mix over 100 metastores, 1 and 2 nodes, 1 and 2 databases"
BENCH_HEADING = "## The paper mix over 100 metastores on 1 and 2 nodes, 1 and 2 databases (docs/cluster.md)"
SHARDS = 2                  # in every configuration: the same total shard count
STOP_WAIT = 20.0            # seconds for a stopped catalog's shard processes to exit
START_LIMIT = 300.0         # seconds for a catalog and its shards to start
SEED_LIMIT = 900.0          # seconds to seed the metastores
GROUPS = ("router", "shards on head", "shards on worker", "Ray", "PostgreSQL pg-a", "PostgreSQL pg-b",
          "Locust", "other")


def log(msg: str) -> None:
    print(f"[cluster-mix {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- CPU per process group -------------------------------------------------------------------

class CpuMeter:
    """CPU seconds each process group has used since the meter started, sampled (`sample`) every
    second and at each window's edges. A PostgreSQL server counts as its whole tree
    (tree_cpu_total: a backend that ended is in its postmaster's children's time); every other
    process, all descendants of this one, by its own time, pid by pid (a Ray worker killed and
    reaped would otherwise land whole in its raylet's children's time)."""

    def __init__(self, postgres: dict[str, int], classify):
        self.postgres = postgres            # group -> postmaster pid
        self.classify = classify            # pid -> group, for this process's descendants
        self.seen: dict[int, float] = {}    # pid -> its own CPU at the last sample
        self.totals: dict[str, float] = defaultdict(float)
        self.lock = threading.Lock()
        self.pg0 = {g: tree_cpu_total([pid]) for g, pid in postgres.items()}
        self.machine0 = machine_busy()
        self.series: list[tuple[float, dict[str, float]]] = []
        self.sample()

    def sample(self) -> tuple[float, dict[str, float]]:
        with self.lock:
            me = psutil.Process()
            skip = set()
            for pid in self.postgres.values():
                try:
                    skip |= {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
                except psutil.Error:
                    pass
            first = not self.series
            for p in [me, *me.children(recursive=True)]:
                if p.pid in skip:
                    continue
                try:
                    t = p.cpu_times()
                except psutil.Error:
                    continue
                cpu = t.user + t.system
                before = self.seen.get(p.pid, cpu if first else 0.0)
                self.seen[p.pid] = cpu
                self.totals["router" if p.pid == me.pid else self.classify(p.pid)] += max(0.0, cpu - before)
            now = {**self.totals, **{g: tree_cpu_total([pid]) - self.pg0[g] for g, pid in self.postgres.items()},
                   "machine": machine_busy() - self.machine0}
            point = (time.time(), now)
            self.series.append(point)
            return point


def every_process() -> dict[int, tuple[str, float]]:
    """Every process on the machine: pid -> (what it runs, shortened; its own CPU seconds)."""
    out = {}
    for p in psutil.process_iter(["cmdline", "name", "cpu_times"]):
        t = p.info["cpu_times"]
        if t is not None:
            out[p.pid] = (" ".join(p.info["cmdline"] or [p.info["name"] or "?"])[:120], t.user + t.system)
    return out


def others(before: dict, after: dict, ours: set[int], seconds: float, top: int = 5) -> list[dict]:
    """The processes not of this run that used the most CPU between two `every_process` readings
    (what the "other" column is made of)."""
    used = [(after[pid][1] - before.get(pid, (None, 0.0))[1], after[pid][0]) for pid in after if pid not in ours]
    return [{"cores": round(cpu / seconds, 3), "process": what} for cpu, what in sorted(used, reverse=True)[:top]
            if cpu / seconds >= 0.01]


def cores(a: tuple[float, dict], b: tuple[float, dict]) -> dict[str, float]:
    """Cores busy per group between two samples (CPU seconds per second); "other": the rest of the
    machine, "machine": all of it."""
    seconds = b[0] - a[0]
    out = {g: (b[1].get(g, 0.0) - a[1].get(g, 0.0)) / seconds for g in GROUPS if g != "other"}
    machine_cores = (b[1]["machine"] - a[1]["machine"]) / seconds
    out["other"] = max(0.0, machine_cores - sum(out.values()))
    out["machine"] = machine_cores
    return {g: round(v, 3) for g, v in out.items()}


# ---- the run ---------------------------------------------------------------------------------

class Run:
    def __init__(self, args, tmp: Path):
        self.args, self.tmp = args, tmp
        self.pgs: dict[str, Postgres] = {}
        self.shard_node: dict[int, str] = {}      # shard pid -> node name, every shard ever seen
        self.locust_pid: int | None = None
        self.running = None
        self.windows: list[dict] = []
        self.join: dict = {}
        self.samples: list[Sample] = []
        self.sizes = metastore_sizes(args.metastores, max_tables=args.max_tables)

    # ---- processes

    async def start_postgres(self) -> None:
        for name in ("pg-a", "pg-b"):       # one at a time: the wheel locks
            self.pgs[name] = await asyncio.to_thread(Postgres, self.tmp / name)
        self.layouts = {
            "1 database": [f"db0={await self.pgs['pg-a'].database('mix1')}"],
            "2 databases": [f"db0={await self.pgs['pg-a'].database('mix2')}",
                            f"db1={await self.pgs['pg-b'].database('mix2')}"],
        }

    def start_ray(self) -> None:
        began = time.time()
        self.ray_cluster = Cluster(initialize_head=True, head_node_args=HEAD)
        ray.init(address=self.ray_cluster.address, log_to_driver=False, configure_logging=False)
        self.ray_cluster.wait_for_nodes()
        self.nodes = {self.ray_cluster.head_node.node_id: "head"}
        log(f"Ray head up in {time.time() - began:.1f} s")

    def classify(self, pid: int) -> str:
        if pid == self.locust_pid:
            return "Locust"
        node = self.shard_node.get(pid)
        if node is not None:
            return f"shards on {'head' if node == 'head' else 'worker'}"
        return "Ray"

    def note_shards(self) -> None:
        if self.running is not None:
            for h in self.running.cluster.routing.shards.values():
                if h.pid:
                    self.shard_node[h.pid] = self.nodes.get(h.node_id, h.node_id)

    def our_pids(self) -> set[int]:
        me = psutil.Process()
        pids = {me.pid, *(c.pid for c in me.children(recursive=True))}
        for pg in self.pgs.values():
            try:
                pids |= {pg.pid, *(c.pid for c in psutil.Process(pg.pid).children(recursive=True))}
            except psutil.Error:
                pass
        return pids

    async def sample(self) -> tuple[float, dict]:
        self.note_shards()
        return await asyncio.to_thread(self.meter.sample)

    async def meter_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            await self.sample()

    async def start_catalog(self, layout: str) -> None:
        began = time.time()
        self.running = await asyncio.wait_for(start(ServeConfig(port=0, db=self.layouts[layout], shards=SHARDS,
                                                                data_dir=self.tmp / layout.replace(" ", "-"))),
                                              START_LIMIT)
        self.note_shards()
        log(f"catalog ({layout}) at {self.running.url} in {time.time() - began:.1f} s: {self.placement()['shards']}")

    async def stop_catalog(self) -> None:
        pids = [h.pid for h in self.running.cluster.routing.shards.values() if h.alive and h.pid]
        await self.running.stop()
        self.running = None
        procs = []
        for pid in pids:
            try:
                procs.append(psutil.Process(pid))
            except psutil.Error:
                pass
        await asyncio.to_thread(psutil.wait_procs, procs, STOP_WAIT)

    async def seed(self, layout: str) -> Path:
        began = time.time()
        metastores = await asyncio.wait_for(seed(self.running.store, self.running.url, (self.tmp / "storage").as_uri(),
                                                 self.sizes), SEED_LIMIT)
        store = self.running.store
        homes = ({m.id: "db0" for m in metastores} if len(store.databases) == 1 else
                 {m.id: await store.home_name(m.id) for m in metastores})
        self.homes = homes
        path = self.tmp / f"population-{layout.replace(' ', '-')}.json"
        save_population(path, self.running.url, metastores)
        self.population = {m.id: m for m in metastores}
        log(f"seeded {len(metastores)} metastores ({sum(self.sizes)} tables) in {time.time() - began:.1f} s; "
            f"homes {dict(sorted(_count(homes.values()).items()))}")
        return path

    def start_locust(self, population: Path, limit: float, label: str):
        samples = self.tmp / f"samples-{label}.csv"
        env = {"LOADTEST_POPULATION": str(population), "LOADTEST_MAX_REQUESTS": str(10**9),
               "LOADTEST_ZIPF": str(self.args.zipf), "LOADTEST_SAMPLES": str(samples)}
        os.environ.update(env)       # spawn passes this process's environment on
        try:
            child, _ = spawn([self.args.locust_python, "-m", "locust", "-f", str(ROOT / "loadtest" / "locustfile.py"),
                              "--headless", "-u", str(self.args.users), "-r", str(self.args.users),
                              "-t", f"{int(limit)}s", "--host", self.running.url, "--only-summary",
                              "--stop-timeout", "5", "--loglevel", "WARNING"],
                             self.tmp / f"locust-{label}.log", r"", f"locust ({label})")
        finally:
            for key in env:
                os.environ.pop(key, None)
        self.locust_pid = child.pid
        return child, samples

    async def stop_locust(self, child, samples: Path) -> None:
        await asyncio.to_thread(stop, child)      # SIGTERM: Locust quits and writes its samples
        self.locust_pid = None
        if samples.exists():
            self.samples += await asyncio.to_thread(read_samples, samples)
        else:
            log(f"Locust wrote no samples; its log: {child.logfile}")

    # ---- what the cluster looks like

    def node_name(self, node_id: str | None) -> str:
        return self.nodes.get(node_id, str(node_id))

    def placement(self) -> dict:
        """Shards per node, the seeded metastores per node and per home database, and each node's
        share of the router's load figure (routing.py: decayed requests, writes x4)."""
        routing = self.running.cluster.routing
        shards: dict[str, list[str]] = {}
        for h in routing.live():
            shards.setdefault(self.node_name(h.node_id), []).append(h.name)
        population = getattr(self, "population", {})
        per_node: dict[str, int] = {}
        load: dict[str, float] = {}
        for m in population:
            shard = routing.shards.get(routing.owner.get(m, ""))
            node = self.node_name(shard.node_id) if shard else "unassigned"
            per_node[node] = per_node.get(node, 0) + 1
            load[node] = load.get(node, 0.0) + routing.weight(m)
        total = sum(load.values()) or 1.0
        return {"shards": {n: sorted(v) for n, v in sorted(shards.items())},
                "metastores_per_node": dict(sorted(per_node.items())),
                "load_share_per_node": {n: round(v / total, 3) for n, v in sorted(load.items())},
                "metastores_per_database": dict(sorted(_count(getattr(self, "homes", {}).values()).items()))}

    def restored(self) -> bool:
        """SHARDS live, none retiring or starting, and every node at its goal."""
        cluster = self.running.cluster
        live = cluster.routing.live()
        goal = cluster.goal()
        return (len(live) == SHARDS and not any(h.retiring for h in live) and not any(cluster.starting.values())
                and {n: sum(1 for h in live if h.node_id == n) for n in goal} == goal)

    # ---- measuring

    async def window(self, name: str) -> dict:
        """Warm-up, then a measured window of the load running now."""
        log(f"{name}: {self.args.warmup:.0f} s warm-up, then {self.args.seconds:.0f} s measured")
        await asyncio.sleep(self.args.warmup)
        everyone = await asyncio.to_thread(every_process)
        a = await self.sample()
        await asyncio.sleep(self.args.seconds)
        b = await self.sample()
        ours = await asyncio.to_thread(self.our_pids)
        record = {"config": name, "t_from": a[0], "t_to": b[0], "cores": cores(a, b), "placement": self.placement(),
                  "others": others(everyone, await asyncio.to_thread(every_process), ours, b[0] - a[0])}
        self.windows.append(record)
        log(f"{name}: cores {record['cores']}")
        return record

    async def node_joins(self) -> None:
        """A worker node joins under the load: how long until it serves, the moves, the head's
        surplus shard retired, the load balanced."""
        cluster, routing = self.running.cluster, self.running.cluster.routing
        owners_before = {m: routing.owner.get(m) for m in self.population}
        events_before = len(cluster.events)
        t0 = time.time()
        log("a worker node joins")
        adding = asyncio.create_task(add_node_in_thread(self.ray_cluster))
        node, node_up = None, None
        timeline: list[dict] = []
        restored_at = balanced_at = first_move = None
        while time.time() - t0 < self.args.join_limit:
            if node is None and adding.done():
                node, node_up = adding.result(), time.time()
                self.nodes[node.node_id] = "worker"
            if first_move is None and any(routing.owner.get(m) != owners_before[m] for m in self.population):
                first_move = time.time()
            placement = self.placement()
            timeline.append({"t": round(time.time() - t0, 2), "shards": {n: len(v) for n, v in placement["shards"].items()},
                             "metastores": placement["metastores_per_node"],
                             "load_share": placement["load_share_per_node"]})
            # the supervisor polls Ray's node table about once a second
            seen = node is not None and cluster.nodes.get(node.node_id, {}).get("alive", False)
            if seen and restored_at is None and self.restored():
                restored_at = time.time()
            if restored_at is not None and self.restored() and not routing.balance_plan():
                balanced_at = time.time()
                break
            await asyncio.sleep(0.25)
        if node is None:
            node, node_up = await adding, time.time()
            self.nodes[node.node_id] = "worker"
        done = balanced_at or time.time()
        events = [{"t": round(e["t"] - t0, 3), **{k: v for k, v in e.items() if k != "t"}}
                  for e in cluster.events[events_before:]]

        def first(kind: str, **match) -> float | None:
            return next((e["t"] for e in events if e["event"] == kind
                         and all(e.get(k) == v for k, v in match.items())), None)

        def last(kind: str) -> float | None:
            return max((e["t"] for e in events if e["event"] == kind), default=None)

        moved = sorted(m for m in self.population if routing.owner.get(m) != owners_before[m])
        self.join = {
            "t0": t0, "t_done": done, "limit": self.args.join_limit,
            "marks": {"node started (Ray)": round(node_up - t0, 2),
                      "node seen by the supervisor": first("node_joined"),
                      "shard on the new node serving": first("shard_started", node=node.node_id),
                      "first metastore moved": round(first_move - t0, 2) if first_move else None,
                      "surplus shard retired": last("shard_retired"),
                      "placement restored": round(restored_at - t0, 2) if restored_at else None,
                      "load balanced": round(balanced_at - t0, 2) if balanced_at else None},
            "metastores_moved": len(moved),
            "moved_by_rebalancing": sum(e.get("count", 0) for e in events if e["event"] == "rebalanced"),
            "placement_after": self.placement(),
            "events": [e for e in events if e["event"] not in ("shard_check_inconclusive", "shard_suspect")],
            "timeline": timeline,
        }
        log(f"join: {self.join['marks']}; {len(moved)} metastores moved")

    # ---- the whole run

    async def run(self) -> dict:
        await self.start_postgres()
        self.start_ray()
        # Ray's driver took SIGTERM for itself (sys.exit from a signal handler, which a transport
        # callback may swallow); from here a signal cancels the run, whose cleanup then runs.
        loop, me = asyncio.get_running_loop(), asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, me.cancel)
        self.meter = CpuMeter({f"PostgreSQL {name}": pg.pid for name, pg in self.pgs.items()}, self.classify)
        meter_task = asyncio.create_task(self.meter_loop())
        a = self.args
        try:
            # 1 node x 1 database
            await self.start_catalog("1 database")
            population1 = await self.seed("1 database")
            homes1, seeded1 = self.homes, self.population
            locust, samples = self.start_locust(population1, a.warmup + a.seconds + 60, "1db-1node")
            await self.window("1 node x 1 database")
            await self.stop_locust(locust, samples)
            await self.stop_catalog()

            # 1 node x 2 databases; a node joins; 2 nodes x 2 databases
            await self.start_catalog("2 databases")
            population2 = await self.seed("2 databases")
            locust, samples = self.start_locust(population2, 3 * a.warmup + 2 * a.seconds + a.join_limit + 120,
                                                "2db")
            await self.window("1 node x 2 databases")
            await self.node_joins()
            await self.window("2 nodes x 2 databases")
            await self.stop_locust(locust, samples)
            await self.stop_catalog()

            # 2 nodes x 1 database: the first layout's catalog started anew, on both nodes
            self.homes, self.population = homes1, seeded1
            await self.start_catalog("1 database")
            locust, samples = self.start_locust(population1, a.warmup + a.seconds + 60, "1db-2nodes")
            await self.window("2 nodes x 1 database")
            await self.stop_locust(locust, samples)
            await self.stop_catalog()
        finally:
            meter_task.cancel()
            if self.running is not None:
                await self.running.stop()
        return self.result()

    def result(self) -> dict:
        by_name = {w["config"]: w for w in self.windows}
        order = ["1 node x 1 database", "2 nodes x 1 database", "1 node x 2 databases", "2 nodes x 2 databases"]
        configs = []
        for name in order:
            if name in by_name:
                w = by_name[name]
                configs.append({**w, **summarize(self.samples, w["t_from"], w["t_to"])})
        join = dict(self.join)
        if join:
            join["during"] = summarize(self.samples, join["t0"], join["t_done"])
            join["bins"] = bins(self.samples, join["t0"], join["t0"] - 10, join["t_done"] + 10)
            join["cores_over_time"] = [
                {"t": round(b[0] - join["t0"], 2), **cores(a, b)}
                for a, b in zip(self.meter.series, self.meter.series[1:])
                if join["t0"] - 10 <= b[0] <= join["t_done"] + 10 and b[0] - a[0] > 0.2]
            join["cores_during"] = cores(*_nearest(self.meter.series, join["t0"], join["t_done"]))
        weights = zipf_weights(len(self.sizes), self.args.zipf)
        hottest = max(range(len(weights)), key=weights.__getitem__)
        return {"configs": configs, "join": join, "sizes": self.sizes, "zipf": self.args.zipf,
                "hottest_share": round(weights[hottest] / sum(weights), 3), "hottest_tables": self.sizes[hottest],
                "top10_share": round(sum(sorted(weights, reverse=True)[:10]) / sum(weights), 3)}


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _nearest(series, t_from: float, t_to: float):
    a = min(series, key=lambda p: abs(p[0] - t_from))
    b = min(series, key=lambda p: abs(p[0] - t_to))
    return a, b


# ---- the report ------------------------------------------------------------------------------

def _ms(v) -> str:
    return "–" if v is None else (f"{v:.0f}" if v >= 10 else f"{v:.1f}")


def _per(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "–"


def markdown(run: dict) -> str:
    r = run["result"]
    configs, join = r["configs"], r["join"]
    sizes = r["sizes"]
    lines = [
        HEADING, "",
        f"- **Reproduce:** `{run['command']}` (about {run['minutes']:.0f} min); run on {run['date']}.",
        f"- **Machine:** {machine_line(run['machine'], run.get('pg_version'))}. **2 cores for everything**: "
        "every Ray node, shard, PostgreSQL server and Locust share them, so a second node adds processes, "
        "not cores (the *cores busy* columns show where the CPU went).",
        *([f"- **Locust** {run['locust']}, in a virtualenv of its own unless this Python has it "
            "(`loadtest/locust_env.py`: Locust needs a newer `requests` than the test extra's delta-sharing allows)."]
          if run.get("locust") else []),
        f"- **What:** the paper mix (`loadtest/workload.py` `MIX`: 98 % reads, 2 % writes) from Locust "
        f"({run['users']} users, `loadtest/locustfile.py`) through the router, over {len(sizes)} metastores of "
        f"{sum(sizes):,} tables (largest {max(sizes):,}, median {sorted(sizes)[len(sizes) // 2]}); each user picks "
        f"its next metastore by **Zipf's law, exponent {r['zipf']}** (the hottest metastore gets "
        f"{r['hottest_share']:.0%} of the picks, the 10 hottest {r['top10_share']:.0%}; popularity is dealt at "
        "random, not by size), staying on it for ~40 requests. **2 shard actors in total in every "
        "configuration** (the same total shard count; on 2 nodes, one each). Nodes are Ray nodes of one "
        "`ray.cluster_utils.Cluster` on 127.0.0.1; databases are embedded PostgreSQL servers (2 databases: "
        "metastores homed half on each). Each window follows a "
        f"{run['warmup']:.0f} s warm-up and lasts {run['seconds']:.0f} s; requests counted by when they were answered.",
        "",
        "| configuration | req/s | p50 ms | p99 ms | failures | shards per node | metastores per node "
        "| cores busy: router | shards | Ray | PostgreSQL | Locust | other | machine |",
        "|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in configs:
        k, p = c["cores"], c["placement"]
        shards = k["shards on head"] + k["shards on worker"]
        pg = k["PostgreSQL pg-a"] + k["PostgreSQL pg-b"]
        lines.append(
            f"| {c['config']} | {c['rps']:,.0f} | {_ms(c['p50_ms'])} | {_ms(c['p99_ms'])} | {c['failures']} "
            f"| {_per({n: len(v) for n, v in p['shards'].items()})} | {_per(p['metastores_per_node'])} "
            f"| {k['router']:.2f} | {shards:.2f} | {k['Ray']:.2f} | {pg:.2f} | {k['Locust']:.2f} | {k['other']:.2f} "
            f"| **{k['machine']:.2f}** |")
    busy_others = [c for c in configs if c["cores"]["other"] >= 0.1 and c.get("others")]
    if busy_others:
        lines += ["", "*Other*: the machine's CPU outside this run's processes (kernel softirq for loopback "
                  "traffic included); where it reached 0.1 core, the busiest other processes were: "
                  + "; ".join(f"{c['config']}: " + ", ".join(f"`{o['process'][:60]}` {o['cores']:.2f}"
                                                            for o in c["others"][:3]) for c in busy_others) + "."]
    ops = sorted({op for c in configs for op in c["ops"]}, key=lambda op: -max(c["ops"].get(op, {}).get("requests", 0)
                                                                               for c in configs))
    lines += ["", "p50 / p99 ms per request type (req/s in the first configuration):", "",
              "| request | req/s | " + " | ".join(c["config"] for c in configs) + " |",
              "|---|---:|" + "---:|" * len(configs)]
    for op in ops:
        first = configs[0]["ops"].get(op, {})
        cells = [f"{_ms(c['ops'][op]['p50_ms'])} / {_ms(c['ops'][op]['p99_ms'])}" if op in c["ops"] else "–"
                 for c in configs]
        lines.append(f"| {op} | {first.get('rps', 0):,.1f} | " + " | ".join(cells) + " |")
    if join:
        d, m, after = join["during"], join["marks"], join["placement_after"]
        lines += [
            "", "### A node joins under the mix", "",
            "From the 1 node x 2 databases configuration (2 shards on the head), a worker node is added while "
            "Locust goes on; seconds after the call that adds it:", "",
            "| step | seconds |", "|---|---:|",
            *[f"| {k} | {'–' if v is None else f'{v:.1f}'} |" for k, v in m.items()],
            "",
            f"*Load balanced*: the placement restored and the router's `balance_plan` wants no further move "
            f"(every shard within 25 % of the fair share of the load). Metastores moved: {join['metastores_moved']} "
            f"of {len(sizes)}; after: shards {_per({n: len(v) for n, v in after['shards'].items()})}, metastores "
            f"{_per(after['metastores_per_node'])}, load share {_per(after['load_share_per_node'])}.",
            f"Meanwhile (join to balanced, {d['seconds']:.0f} s): {d['requests']:,} requests, {d['rps']:,.0f} req/s, "
            f"p50 {_ms(d['p50_ms'])} ms, p99 {_ms(d['p99_ms'])} ms, **{d['failures']} failed**"
            + (f" ({_per(d['failure_kinds'])})" if d["failure_kinds"] else "")
            + f"; cores busy {join['cores_during']['machine']:.2f} of 2.",
        ]
        if m.get("load balanced") is None:
            lines.append(f"The load was not balanced within the {join['limit']:.0f} s the run allows.")
    lines += ["", *reading(run)]
    lines += ["", "![The four configurations, then the node joining: requests, p99, metastores per node, "
              "cores busy](img/cluster-mix.png)", ""]
    lines += ["Raw numbers: `loadtest/out/" + run["raw_file"] + "` (not committed)."]
    return "\n".join(lines)


def _span(values: list[float], fmt: str = "{:,.0f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def reading(run: dict) -> list[str]:
    """What the numbers say, from the numbers (so that a new run rewrites it too)."""
    r = run["result"]
    configs, join = r["configs"], r["join"]
    if not configs:
        return []
    ncores = run["machine"]["cores"]
    k = [c["cores"] for c in configs]
    rps = [c["rps"] for c in configs]
    shards = [c["shards on head"] + c["shards on worker"] for c in k]
    out = [
        f"**Reading.** The four configurations answer {_span(rps)} req/s (p99 "
        f"{_span([c['p99_ms'] for c in configs])} ms), within {100 * (max(rps) - min(rps)) / max(rps):.0f} % of each "
        f"other: **this machine is the limit, not the design.** {_span([c['machine'] for c in k], '{:.2f}')} of its "
        f"{ncores} cores were busy in every window, {_span([c['Locust'] for c in k], '{:.2f}')} of them Locust making "
        f"the load and {_span([c['router'] for c in k], '{:.2f}')} the router; the shards used "
        f"{_span(shards, '{:.2f}')} cores whether they ran on one Ray node or two, because the second node is a second "
        "raylet on the same two cores, not a second machine (Ray's own processes: "
        f"{_span([c['Ray'] for c in k], '{:.2f}')} cores). Two home databases split PostgreSQL's work "
        f"({_span([c['PostgreSQL pg-a'] + c['PostgreSQL pg-b'] for c in k], '{:.2f}')} cores in all) without "
        "changing the total, and PostgreSQL is far from being the bottleneck at this mix (98 % reads, served from "
        "the shards' caches). What two real machines would give (the shards' and PostgreSQL's CPU on other cores "
        "than the router's and the clients') cannot be measured here; the per-process cores above are what "
        "such a split would move.",
    ]
    if join:
        d, m = join["during"], join["marks"]
        inside = [b for b in join["bins"] if 0 <= b["t"] < (m.get("placement restored") or join["t_done"] - join["t0"])]
        ray_peak = max((c["Ray"] for c in join["cores_over_time"] if 0 <= c["t"] <= join["t_done"] - join["t0"]),
                       default=0.0)
        after = join["placement_after"]
        out += ["",
                f"The join failed **{d['failures']}** of {d['requests']:,} requests. While Ray started the new node's "
                f"processes (up to {ray_peak:.2f} cores for Ray, the grey band) the answered rate fell to "
                f"{min((b['answered'] for b in inside), default=0):,}/s, then came back as the moves went on. "
                "*Node started (Ray)* is when `Cluster.add_node` returned (it waits for the node to register; the "
                "supervisor, polling Ray's node table, may see it first). Moves go by load, not count: the worker "
                f"took {after['metastores_per_node'].get('worker', 0)} metastores carrying "
                f"{after['load_share_per_node'].get('worker', 0):.0%} of the load (the Zipf-hot ones), so the "
                "2 nodes x 2 databases window ran on that split; 2 nodes x 1 database was a fresh start, which "
                "keeps the assignment by shard name from the 1-node run "
                f"({_per(configs[1]['placement']['metastores_per_node']) if len(configs) > 1 else '–'})."]
    return out


def bench_entry(run: dict) -> str:
    r = run["result"]
    rows = [f"| {c['config']} | {c['rps']:,.0f} | {_ms(c['p99_ms'])} | {c['cores']['machine']:.2f} |"
            for c in r["configs"]]
    marks = r["join"].get("marks", {}) if r["join"] else {}
    return "\n".join([
        BENCH_HEADING, "",
        f"`{run['command']}` on {run['date']} (commit {run['machine']['commit']}): Locust's paper mix, Zipf "
        f"exponent {r['zipf']} over 100 metastores, 2 shards, through the router; 2 cores for everything. "
        "Details, per request type and the node-join timeline: "
        "[cluster.md](cluster.md#measured-the-paper-mix-over-100-metastores-1-and-2-nodes-1-and-2-databases).", "",
        "| configuration | req/s | p99 ms | cores busy (of 2) |", "|---|---:|---:|---:|", *rows, "",
        "The configurations differ by less than the machine lets them: every window had the 2 cores nearly all "
        "busy (Locust, the load, took about a third of them), so a second Ray node on the same cores adds no "
        "throughput here.", "",
        f"A node joining: placement restored in {marks.get('placement restored', '–')} s, load balanced in "
        f"{marks.get('load balanced', '–')} s, {r['join'].get('during', {}).get('failures', '–')} requests failed.",
    ])


# ---- main ------------------------------------------------------------------------------------

def publish(record: dict, docs: bool) -> None:
    from .plots_cluster import plot_mix
    plot_mix(record, PNG)
    section = markdown(record)
    print(section, flush=True)
    if docs:
        write_section(CLUSTER_MD, HEADING, section)
        write_section(BENCHMARKS_MD, BENCH_HEADING, bench_entry(record))
        log(f"wrote {CLUSTER_MD.name}, {BENCHMARKS_MD.name} and {PNG.name}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each measured window")
    parser.add_argument("--warmup", type=float, default=15.0, help="before each window")
    parser.add_argument("--users", type=int, default=32, help="Locust users")
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of the metastore popularity")
    parser.add_argument("--metastores", type=int, default=100)
    parser.add_argument("--max-tables", type=int, default=20_000, help="the largest metastore's tables")
    parser.add_argument("--join-limit", type=float, default=150.0, help="seconds allowed for the join to balance")
    parser.add_argument("--locust-python", default=None,
                        help="a Python with Locust installed (default: this one, or loadtest/out/locust-venv)")
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default loadtest/out/cluster-mix-*.json)")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/ (the JSON and PNG only)")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--report", type=Path, default=None,
                        help="run nothing: write the docs and the picture again from this run's JSON")
    args = parser.parse_args(argv)
    if args.report:
        shutil.rmtree(RAY_DIR, ignore_errors=True)      # made when multinode.py was imported; no Ray here
        return publish(json.loads(args.report.read_text()), not args.no_docs)
    args.locust_python = args.locust_python or locust_python()
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    on_sigterm_raise()          # SIGTERM ends the run through its cleanup, as Ctrl-C does
    info, date = machine(), now_utc()
    command = shlex.join(["python", "-m", "loadtest.cluster_mix", *(argv if argv is not None else sys.argv[1:])])
    tmp = Path(tempfile.mkdtemp(prefix="shardcat-mix-"))
    began = time.time()
    run = Run(args, tmp)
    try:
        result = uvloop.run(run.run())      # the router's loop, as `shardcat serve` runs it
    finally:
        stop_all()
        ray.shutdown()
        if hasattr(run, "ray_cluster"):
            run.ray_cluster.shutdown()
        reap(RAY_DIR)
        for pg in run.pgs.values():
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(RAY_DIR, ignore_errors=True)
    record = {"command": command, "date": date, "machine": info, "minutes": (time.time() - began) / 60,
              "locust": locust_version(args.locust_python),
              "users": args.users, "seconds": args.seconds, "warmup": args.warmup,
              "pg_version": getattr(run.pgs.get("pg-a"), "version", None), "result": result}
    OUT.mkdir(parents=True, exist_ok=True)
    out = args.out or OUT / f"cluster-mix-{time.strftime('%Y%m%d-%H%M%S')}.json"
    record["raw_file"] = out.name
    out.write_text(json.dumps(record, indent=1, default=str))
    publish(record, not args.no_docs)
    log(f"raw numbers in {out}")


if __name__ == "__main__":
    main()
