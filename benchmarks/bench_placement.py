"""Which Ray placement spreads shard-like actors evenly over nodes: SPREAD or node affinity (one run).

A 3-node `ray.cluster_utils.Cluster` on loopback (as loadtest/multinode.py); `--rounds` times,
6 actors that ask for no CPU (as shard actors do) are placed with Ray's SPREAD strategy, then 6
with hard node affinity round-robin over the nodes (what cluster/ray_cluster.py does), and the
actors per node are counted. Prints one JSON line per round and a summary (docs/cluster.md).

    python -m benchmarks.bench_placement [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import Counter

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="scbp-")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 1}


@ray.remote(num_cpus=0)
class Probe:
    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


def place(strategies: list) -> list[int]:
    actors = [Probe.options(scheduling_strategy=s).remote() for s in strategies]
    nodes = ray.get([a.node.remote() for a in actors])
    for a in actors:
        ray.kill(a)
    return sorted(Counter(nodes).values(), reverse=True) + [0] * (3 - len(set(nodes)))


def main(rounds: int, actors: int) -> dict:
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(**NODE)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    out = {"spread": [], "node_affinity": []}
    try:
        for i in range(rounds):
            out["spread"].append(place(["SPREAD"] * actors))
            out["node_affinity"].append(place([NodeAffinitySchedulingStrategy(nodes[j % len(nodes)], soft=False)
                                               for j in range(actors)]))
            print(json.dumps({"round": i, "spread": out["spread"][-1], "node_affinity": out["node_affinity"][-1]}))
    finally:
        ray.shutdown()
        cluster.shutdown()
    even = sorted([actors // 3] * 3, reverse=True)
    summary = {k: {"rounds": rounds, "even": sum(1 for r in v if r == even),
                   "layouts": dict(Counter(str(r) for r in v))} for k, v in out.items()}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--actors", type=int, default=6)
    args = parser.parse_args()
    main(args.rounds, args.actors)
