"""Node loss and node change on a real multi-node Ray cluster, measured under a writer and a reader per metastore.

Ray's own test cluster (`ray.cluster_utils.Cluster`): a head and two workers, each a Ray node of
its own (raylet, agents, workers), all on 127.0.0.1 (the node IP is set and
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, so no address is the host's interface). `shardcat`'s router
and supervisor run in this process, connected to the head, with `--shards N` spread over the
nodes. Every metastore has a writer (a catalog created per request, each acknowledged name
recorded) and a reader (a catalog read by name), both through the router, for the whole run.
The phases, in order:

- start: shards on every node;
- kill-node: a whole worker killed (its shard processes, raylet and agents, SIGKILL), >= 2 shards on it;
- join: a worker added; it gets its share of shards and metastores;
- kill-raylet: a worker's raylet alone killed; its shard processes must end themselves;
- drain: the joined worker drained (`POST /shardcat/nodes/{id}/drain`, what `shardcat drain` sends).

After each phase it records: the timeline (fault, detection, reassignment, every affected
metastore answering a read sent after the fault, shard count restored), the reads and writes
that failed and how, the slowest read, the placement (shards per node), whether any process of
a dead or stopped shard still runs or listens, and, at the end, every acknowledged write looked
up through the API. It asserts nothing: tests/integration/test_multinode.py runs it in a
process of its own (a Cluster needs its own Ray) and asserts; docs/cluster.md shows a run, and
`python -m loadtest.plots_cluster` draws it.

    python -m loadtest.multinode --out multinode.json [--shards 4] [--db postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# Ray's files (sessions, sockets, the "current cluster" address) in a directory of this run's own:
# another process on the machine never joins this cluster, and every process of it can be found.
RAY_DIR = tempfile.mkdtemp(prefix="scmn-")
os.environ["RAY_TMPDIR"] = RAY_DIR

import aiohttp  # noqa: E402
import psutil  # noqa: E402
import ray  # noqa: E402
from ray._private import ray_constants  # noqa: E402
from ray._private import utils as ray_utils  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from shardcat.auth import hash_token, new_token  # noqa: E402
from shardcat.cluster.embedded_db import start_embedded_postgres, stop_embedded_postgres  # noqa: E402
from shardcat.cluster.server import ServeConfig, start  # noqa: E402
from shardcat.entities.values import now_ms  # noqa: E402
from shardcat.router.forward import RETRY_BUDGET_SECONDS  # noqa: E402

PREFIX = "/api/2.1/unity-catalog"
LOOPBACK = "127.0.0.1"
# No log monitor (the driver reads no worker logs: log_to_driver=False) and no autoscaler monitor:
# Python processes of Ray's that this run never uses, started and run on the same cores as
# everything measured. Ray's own failure detection is left as it is.
NODE = {"node_ip_address": LOOPBACK, "num_cpus": 1, "include_log_monitor": False}
HEAD = {**NODE, "include_dashboard": False, "no_monitor": True, "_system_config": {"worker_niceness": 0}}
WRITE_PAUSE, READ_PAUSE = 0.05, 0.02      # seconds between one client's requests
RECOVERY_LIMIT = 120.0                    # a phase not recovered in this long is reported as such


@dataclass
class Sample:
    metastore: str
    kind: str           # "read" or "write"
    sent: float         # time.time()
    done: float
    status: int         # HTTP status; 0: no answer (the client's timeout or connection)
    code: str = ""      # the error code of a failed request


@dataclass
class Traffic:
    """A writer and a reader per metastore, through the router, until stopped."""
    url: str
    metastores: dict[str, str]                 # metastore id -> admin token
    samples: list[Sample] = field(default_factory=list)
    acknowledged: dict[str, list[str]] = field(default_factory=dict)    # metastore -> catalog names
    stopped: bool = False

    async def run(self, session: aiohttp.ClientSession) -> None:
        await asyncio.gather(*(self._writer(session, m) for m in self.metastores),
                             *(self._reader(session, m) for m in self.metastores))

    async def _call(self, session, metastore: str, kind: str, method: str, path: str, body=None) -> int:
        sent = time.time()
        code = ""
        try:
            async with session.request(method, self.url + PREFIX + path, json=body,
                                       headers={"Authorization": f"Bearer {self.metastores[metastore]}"}) as r:
                status = r.status
                if status != 200:
                    code = (await r.json(content_type=None) or {}).get("error_code", "")
                else:
                    await r.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            status, code = 0, type(e).__name__
        self.samples.append(Sample(metastore, kind, sent, time.time(), status, code))
        return status

    async def _writer(self, session, metastore: str) -> None:
        acked = self.acknowledged.setdefault(metastore, [])
        i = 0
        while not self.stopped:
            name = f"w{i}"
            if await self._call(session, metastore, "write", "POST", "/catalogs", {"name": name}) == 200:
                acked.append(name)
            i += 1
            await asyncio.sleep(WRITE_PAUSE)

    async def _reader(self, session, metastore: str) -> None:
        while not self.stopped:
            await self._call(session, metastore, "read", "GET", "/catalogs/seed")
            await asyncio.sleep(READ_PAUSE)


async def make_metastore(store, storage: str, name: str) -> tuple[str, str]:
    """A metastore assigned to a workspace of its own, and an account admin's token for it."""
    metastore_id = str(uuid.uuid4())
    now = now_ms()
    await store.create_metastore(metastore_id, name, {
        "storage_root": f"{storage}/{metastore_id}", "owner": "admin", "created_at": now, "created_by": "admin",
        "updated_at": now, "updated_by": "admin"})
    workspace_id = (1 << 42) + uuid.uuid4().int % (1 << 40)
    await store.assign(workspace_id, metastore_id, None)
    admin = await store.create_principal("admin", "user", is_account_admin=True)
    token = new_token()
    await store.add_token(admin.id, hash_token(token), workspace_id)
    return metastore_id, token


def listening(url: str) -> bool:
    """Whether anything accepts connections at this shard URL."""
    host, port = url.split("//")[1].rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, int(port))) == 0


def leftovers(gone: list) -> tuple[list[str], list[str]]:
    """Of these dead or stopped shards: those whose process still runs, those whose port still
    accepts connections."""
    def running(pid: int | None) -> bool:
        try:
            return bool(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    return [h.name for h in gone if running(h.pid)], [h.name for h in gone if listening(h.url)]


class Run:
    def __init__(self, db: str, shards: int, data_dir: Path):
        self.db, self.shards, self.data_dir = db, shards, data_dir
        self.phases: list[dict] = []
        self.workers: dict[str, object] = {}       # name -> ray._private.node.Node
        self.gone: dict[str, object] = {}          # name -> node of the workers killed

    # ---- the cluster ---------------------------------------------------------------

    def add_worker(self, name: str) -> str:
        node = self.ray_cluster.add_node(**NODE)
        self.workers[name] = node
        return node.node_id

    async def start(self) -> None:
        began = time.time()
        self.ray_cluster = Cluster(initialize_head=True, head_node_args=HEAD)
        self.head_id = self.ray_cluster.head_node.node_id
        for name in ("worker-1", "worker-2"):
            self.workers[name] = self.ray_cluster.add_node(wait=False, **NODE)
        ray.init(address=self.ray_cluster.address, log_to_driver=False, configure_logging=False)
        self.ray_cluster.wait_for_nodes()
        ray_up = time.time()
        self.running = await start(ServeConfig(port=0, db=self.db, shards=self.shards, data_dir=self.data_dir))
        self.cluster = self.running.cluster
        self.metastores = dict([await make_metastore(self.running.store, f"file://{self.data_dir}/storage",
                                                     f"multinode-{i}-{uuid.uuid4().hex[:6]}")
                                for i in range(self.shards)])
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30),
                                             connector=aiohttp.TCPConnector(limit=256))
        for metastore, token in self.metastores.items():
            async with self.session.post(self.running.url + PREFIX + "/catalogs", json={"name": "seed"},
                                         headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 200, await r.text()
        self.traffic = Traffic(self.running.url, self.metastores)
        self.traffic_task = asyncio.create_task(self.traffic.run(self.session))
        self.phases.append({"phase": "start", "ray_seconds": round(ray_up - began, 2),
                            "serve_seconds": round(time.time() - ray_up, 2), "placement": self.placement(),
                            "nodes": self.node_names()})

    async def stop(self) -> dict:
        self.traffic.stopped = True
        await self.traffic_task
        lost = await self.lost_writes()
        await self.session.close()
        await self.running.stop()
        ray.shutdown()
        self.ray_cluster.head_node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
        reap(RAY_DIR)
        return lost

    def node_names(self) -> dict[str, str]:
        return {self.head_id: "head", **{n.node_id: name for name, n in [*self.workers.items(), *self.gone.items()]}}

    def placement(self) -> dict[str, list[str]]:
        """Live shards by node name (every node Ray lists alive, with or without shards)."""
        names = self.node_names()
        alive = [n for n, info in self.cluster.nodes.items() if info["alive"]]
        out = {names.get(n, n): [] for n in alive}
        for h in self.cluster.routing.live():
            out.setdefault(names.get(h.node_id, h.node_id), []).append(h.name)
        return {k: sorted(v) for k, v in sorted(out.items())}

    def metastores_per_node(self) -> dict[str, int]:
        names, routing = self.node_names(), self.cluster.routing
        out: dict[str, int] = {}
        for m in self.metastores:
            node = routing.shards[routing.owner[m]].node_id
            out[names.get(node, node)] = out.get(names.get(node, node), 0) + 1
        return dict(sorted(out.items()))

    def restored(self) -> bool:
        """N shards live, none retiring, none starting, and the goal met on every node."""
        live = self.cluster.routing.live()
        goal = self.cluster.goal()
        per_node = {n: sum(1 for h in live if h.node_id == n) for n in goal}
        return (len(live) == self.shards and not any(h.retiring for h in live)
                and not any(self.cluster.starting.values()) and per_node == goal)

    # ---- phases --------------------------------------------------------------------

    async def phase(self, name: str, fault, noticed) -> dict:
        """Inject `fault` (a coroutine function returning details), wait until the supervisor
        `noticed(details)` it, then for the cluster to be whole again, and record what happened."""
        routing = self.cluster.routing
        owners_before = dict(routing.owner)
        shards_before = {h.name: h for h in routing.shards.values() if h.alive}
        events_before = len(self.cluster.events)
        t0 = time.time()
        shards_over_time = [(0.0, len(routing.live()))]
        details = await fault() or {}
        while not noticed(details) and time.time() - t0 < RECOVERY_LIMIT:
            shards_over_time.append((round(time.time() - t0, 2), len(routing.live())))
            await asyncio.sleep(0.05)
        while not self.restored():
            shards_over_time.append((round(time.time() - t0, 2), len(routing.live())))
            if time.time() - t0 > RECOVERY_LIMIT:
                break
            await asyncio.sleep(0.1)
        restored_at = time.time() if self.restored() else None
        await self.settle(time.time(), [h for n, h in shards_before.items() if not routing.shards[n].alive])
        shards_over_time.append((round(time.time() - t0, 2), len(routing.live())))
        events = [e for e in self.cluster.events[events_before:]]
        gone = [h for n, h in shards_before.items() if not routing.shards[n].alive]
        affected = sorted(m for m in self.metastores if owners_before.get(m) in {h.name for h in gone}
                          or owners_before.get(m) != routing.owner.get(m))
        samples = [s for s in self.traffic.samples if s.sent >= t0 - 10 and s.done >= t0]
        served_again = {}
        for m in affected:
            ok = [s.done for s in samples if s.metastore == m and s.kind == "read" and s.status == 200 and s.sent >= t0]
            served_again[m] = round(min(ok) - t0, 3) if ok else None

        def first(kind: str, **match) -> float | None:
            for e in events:
                if e["event"] == kind and all(e.get(k) == v for k, v in match.items()):
                    return round(e["t"] - t0, 3)
            return None
        failed = [s for s in samples if s.status != 200]
        reads = [s for s in samples if s.kind == "read" and s.sent >= t0]
        record = {
            "phase": name, **details,
            "timeline": {
                "detected": first("shard_unresponsive") if name.startswith("kill") else
                            first("node_draining") if name == "drain" else first("node_joined"),
                "reassigned": first("metastores_reassigned") if name.startswith("kill") else
                              _last(events, "shard_retired", t0),
                "first_answer": max((v for v in served_again.values() if v is not None), default=None),
                "restored": round(restored_at - t0, 3) if restored_at else None,
            },
            "served_again": served_again,
            "affected_metastores": len(affected),
            "shards_gone": sorted(h.name for h in gone),
            "shards_live": len(routing.live()),
            "placement": self.placement(),
            "metastores_per_node": self.metastores_per_node(),
            "goal_per_node": {self.node_names().get(n, n): g for n, g in self.cluster.goal().items()},
            "requests": len(samples), "reads_after_fault": len(reads),
            "failed": [{"kind": s.kind, "status": s.status, "code": s.code, "at": round(s.sent - t0, 3),
                        "took": round(s.done - s.sent, 3)} for s in failed],
            "slowest_read": round(max((s.done - s.sent for s in reads), default=0.0), 3),
            "still_running": leftovers(gone)[0],
            "still_listening": leftovers(gone)[1],
            "events": [{"t": round(e["t"] - t0, 3), **{k: v for k, v in e.items() if k != "t"}} for e in events],
            "shards_over_time": _changes(shards_over_time),
            "requests_over_time": _bins(samples, t0),
        }
        self.phases.append(record)
        return record

    async def settle(self, mark: float, gone: list, limit: float = 30.0, exit_within: float = 0.5) -> None:
        """Until every metastore's writer and reader had an answer to a request sent after `mark`, so
        that whatever the phase did to them shows in the samples, and the processes of the shards
        `gone` ended or `exit_within` seconds passed (then the phase records those still there);
        at most `limit` seconds."""
        wanted = {(m, kind) for m in self.metastores for kind in ("read", "write")}
        while time.time() - mark < limit:
            answered = {(s.metastore, s.kind) for s in self.traffic.samples[-400:] if s.sent >= mark}
            if wanted <= answered and (time.time() - mark >= exit_within or not any(leftovers(gone))):
                return
            await asyncio.sleep(0.02)

    async def kill_node(self, worker: str) -> dict:
        """A machine lost: its shard processes, raylet and agents SIGKILLed at once."""
        node = self.workers.pop(worker)
        self.gone[worker] = node
        shards = [h for h in self.cluster.routing.live() if h.node_id == node.node_id]
        pids = [h.pid for h in shards] + [info.process.pid for infos in node.all_processes.values()
                                          for info in infos]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return {"node": worker, "shards_on_it": sorted(h.name for h in shards), "processes_killed": len(pids)}

    async def kill_raylet(self, worker: str) -> dict:
        """Only the raylet of a worker dies; its shard processes are left to notice by themselves."""
        node = self.workers[worker]
        shards = [h for h in self.cluster.routing.live() if h.node_id == node.node_id]
        os.kill(node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid, signal.SIGKILL)
        return {"node": worker, "shards_on_it": sorted(h.name for h in shards)}

    async def join(self, worker: str) -> dict:
        """A machine joins: a node added to the cluster while the router in this process serves."""
        node = await add_node_in_thread(self.ray_cluster)
        self.workers[worker] = node
        return {"node": worker, "node_id": node.node_id}

    async def drain(self, worker: str) -> dict:
        node_id = self.workers[worker].node_id
        token = next(iter(self.metastores.values()))
        async with self.session.post(f"{self.running.url}{PREFIX}/shardcat/nodes/{node_id}/drain",
                                     headers={"Authorization": f"Bearer {token}"},
                                     timeout=aiohttp.ClientTimeout(total=RECOVERY_LIMIT)) as r:
            answer = await r.json(content_type=None)
        return {"node": worker, "status": r.status, "answer": answer}

    async def lost_writes(self) -> dict:
        """Every acknowledged catalog, looked up through the router: those missing, per metastore."""
        lost, checked = {}, 0
        for metastore, names in self.traffic.acknowledged.items():
            found, token_page = set(), None
            while True:
                params = {"max_results": "1000", **({"page_token": token_page} if token_page else {})}
                async with self.session.get(self.running.url + PREFIX + "/catalogs", params=params,
                                            headers={"Authorization": f"Bearer {self.metastores[metastore]}"}) as r:
                    body = await r.json()
                found.update(c["name"] for c in body.get("catalogs", []))
                token_page = body.get("next_page_token")
                if not token_page:
                    break
            checked += len(names)
            missing = sorted(set(names) - found)
            if missing:
                lost[metastore] = missing
        return {"acknowledged_writes": checked, "lost": lost}


async def add_node_in_thread(ray_cluster: Cluster):
    """Add a node to the cluster from a thread, so that the router in this process goes on serving
    meanwhile (Ray's Node sets a SIGTERM handler, which only the main thread may: that step is
    skipped for it; the run reaps every process of its own at the end). Returns the node."""
    def add():
        set_handler = ray_utils.set_sigterm_handler
        ray_utils.set_sigterm_handler = lambda handler: None
        try:
            return ray_cluster.add_node(**NODE)
        finally:
            ray_utils.set_sigterm_handler = set_handler
    return await asyncio.to_thread(add)


def reap(ray_dir: str) -> None:
    """SIGKILL every process of this run's Ray cluster still running (their command lines or open
    files name its directory): a node's agents outlive its killed raylet."""
    mine = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and (any(ray_dir in part for part in proc.info["cmdline"] or ())
                                            or any(ray_dir in f.path for f in proc.open_files())):
                mine.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for proc in mine:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(mine, timeout=10)


def _changes(series: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """The points where the value changed (and the last one)."""
    out = [p for i, p in enumerate(series) if i == 0 or p[1] != series[i - 1][1]]
    return out + ([series[-1]] if series[-1] is not out[-1] else [])


def _bins(samples: list[Sample], t0: float, width: float = 0.25) -> list[dict]:
    """Per `width` seconds after the fault (by answer time): reads and writes answered, failed,
    and the slowest read."""
    bins: dict[int, dict] = {}
    for s in samples:
        b = bins.setdefault(int((s.done - t0) // width), {"ok": 0, "failed": 0, "slowest_read": 0.0})
        b["ok" if s.status == 200 else "failed"] += 1
        if s.kind == "read":
            b["slowest_read"] = max(b["slowest_read"], round(s.done - s.sent, 3))
    return [{"t": round(i * width, 2), **b} for i, b in sorted(bins.items())]


def _last(events: list[dict], kind: str, t0: float) -> float | None:
    times = [e["t"] - t0 for e in events if e["event"] == kind]
    return round(max(times), 3) if times else None


async def main(db: str | None, shards: int, out: Path) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="shardcat-multinode-"))
    embedded = db is None       # an embedded server of its own, stopped (and its data removed) at the end
    if embedded:
        db = await asyncio.to_thread(start_embedded_postgres, data_dir / "postgres")
    run = Run(db, shards, data_dir)
    began = time.time()
    result: dict = {"shards": shards, "retry_budget_seconds": RETRY_BUDGET_SECONDS}
    try:
        await run.start()
        busiest = max(("worker-1", "worker-2"), key=lambda w: len(run.placement().get(w, [])))
        routing = run.cluster.routing

        def all_dead(details):
            return not any(routing.shards[n].alive for n in details["shards_on_it"])

        def has_shards(details):
            return any(h.node_id == details["node_id"] for h in routing.live())

        await run.phase("kill-node", lambda: run.kill_node(busiest), all_dead)
        await run.phase("join", lambda: run.join("worker-3"), has_shards)
        other = next(w for w in run.workers if w not in ("worker-3",))
        await run.phase("kill-raylet", lambda: run.kill_raylet(other), all_dead)
        await run.phase("drain", lambda: run.drain("worker-3"), lambda details: True)
    finally:
        stopping = time.time()
        result["verify"] = await run.stop() if hasattr(run, "traffic") else None
        result["stop_seconds"] = round(time.time() - stopping, 1)
        result["phases"] = run.phases
        result["seconds"] = round(time.time() - began, 1)
        result["acknowledged_writes"] = sum(len(v) for v in run.traffic.acknowledged.values()) \
            if hasattr(run, "traffic") else 0
        out.write_text(json.dumps(result, indent=1))
        if embedded:
            await asyncio.to_thread(stop_embedded_postgres, data_dir / "postgres")
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(RAY_DIR, ignore_errors=True)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=None, help="PostgreSQL URL (default: an embedded server of its own)")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("multinode.json"))
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(main(args.db, args.shards, args.out))
