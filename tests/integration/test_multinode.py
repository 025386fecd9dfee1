"""Node loss and node change on a real multi-node Ray cluster: a head and two workers of Ray's own test
cluster, every address loopback, a writer and a reader per metastore through the router.

`loadtest/multinode.py` runs the phases in a process of its own (a Ray `Cluster` needs its own
Ray; this session's is shared by the other tests) on a database of its own in this session's
PostgreSQL (the other tests' metastores would be in its routing table: idle, they are the ones
a joining node's shard takes first), and reports what it saw; this test asserts it. Phases: start, a whole worker killed (its 2 shards with it),
a worker joining, a raylet killed alone (its shard processes left to end themselves), the
joined worker drained. After each: every node the placement goal names runs its shards, the
shard count is back to N, every affected metastore answered reads again (through the router's
retries: no read failed unless the failover outlasted the retry budget, and then only with a
clean 503), no process of a dead or stopped shard still runs or listens; at the end every
acknowledged write is there. How fast each step was is docs/cluster.md's (this run's numbers
come from a shared machine)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from shardcat.router.forward import RETRY_BUDGET_SECONDS

SHARDS = 4             # 2 on one worker (the router's node takes the odd shard last), 1 on each other node
RUN_TIMEOUT = 400       # seconds; a run takes ~40 s on a quiet 2-core machine, 60-160 s on a shared one


async def test_node_loss_and_node_change_on_three_nodes(pg_url, tmp_path):
    out = tmp_path / "multinode.json"
    name = f"shardcat_multinode_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(pg_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        proc = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "loadtest.multinode", "--db",
                             urlunsplit(urlsplit(pg_url)._replace(path="/" + name)), "--shards", str(SHARDS),
                             "--out", str(out)], capture_output=True, text=True, timeout=RUN_TIMEOUT,
            env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()
    assert out.exists(), proc.stderr[-5000:]
    result = json.loads(out.read_text())
    phases = {p["phase"]: p for p in result["phases"]}
    assert list(phases) == ["start", "kill-node", "join", "kill-raylet", "drain"], (proc.stderr[-5000:], result)

    start = phases["start"]
    assert sorted(start["placement"]) == ["head", "worker-1", "worker-2"]
    counts = sorted(len(shards) for shards in start["placement"].values())
    assert counts[0] >= 1 and counts[-1] - counts[0] <= 1 and sum(counts) == SHARDS, start["placement"]

    for name in ("kill-node", "join", "kill-raylet", "drain"):
        phase = phases[name]
        timeline = phase["timeline"]
        assert timeline["restored"] is not None, phase
        assert phase["shards_live"] == SHARDS, phase
        # shards on every node the goal names, as many as it names (every start, replacements too)
        assert {n: len(phase["placement"].get(n, [])) for n in phase["goal_per_node"]} == phase["goal_per_node"]
        assert sum(phase["goal_per_node"].values()) == SHARDS
        assert phase["still_running"] == [] and phase["still_listening"] == [], phase
        assert all(t is not None for t in phase["served_again"].values()), phase["served_again"]
        reads_failed = [f for f in phase["failed"] if f["kind"] == "read"]
        writes_failed = [f for f in phase["failed"] if f["kind"] == "write"]
        if name in ("join", "drain"):
            assert phase["failed"] == [], phase["failed"]        # planned: no request fails
        else:
            # A write in flight on a killed shard has an unknown outcome: a clean 503, never a 500.
            assert all(f["code"] == "TEMPORARILY_UNAVAILABLE" for f in writes_failed), writes_failed
            if timeline["reassigned"] < RETRY_BUDGET_SECONDS - 1.0:
                assert reads_failed == [], reads_failed           # the router's retries hid the failover
            else:
                assert all(f["code"] in ("TEMPORARILY_UNAVAILABLE", "TimeoutError") for f in reads_failed)

    kill = phases["kill-node"]
    assert len(kill["shards_on_it"]) >= 2 and set(kill["shards_on_it"]) <= set(kill["shards_gone"])
    assert kill["timeline"]["detected"] is not None and kill["timeline"]["reassigned"] is not None
    assert kill["node"] not in kill["goal_per_node"]

    join = phases["join"]
    assert join["placement"]["worker-3"] and join["metastores_per_node"].get("worker-3", 0) >= 1, join

    raylet = phases["kill-raylet"]
    # Nobody killed these shard processes: they ended themselves once their raylet was gone.
    assert raylet["shards_on_it"] and set(raylet["shards_on_it"]) <= set(raylet["shards_gone"])
    assert raylet["node"] not in raylet["goal_per_node"]

    drain = phases["drain"]
    assert drain["status"] == 200 and drain["answer"]["shards_stopped"], drain
    assert drain["placement"].get("worker-3", []) == [] and "worker-3" not in drain["metastores_per_node"]

    verify = result["verify"]
    assert verify["acknowledged_writes"] >= 100 and verify["lost"] == {}, verify
