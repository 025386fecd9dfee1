"""ray-config/cluster.yaml is a configuration `ray up` accepts, and it installs shardcat; its workers
offer the resource that keeps shards off the head (the router's node)."""

import json
import shlex
from pathlib import Path

import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from shardcat.cluster.ray_cluster import SHARD_RESOURCE

CONFIG = Path(__file__).resolve().parents[3] / "ray-config" / "cluster.yaml"


def test_ray_up_accepts_the_cluster_config():
    config = prepare_config(yaml.safe_load(CONFIG.read_text()))   # fills Ray's defaults, as `ray up` does
    validate_config(config)                                       # Ray's own schema; raises if invalid
    assert config["provider"]["type"] == "local"
    assert any("pip install" in c and "shardcat" in c for c in config["setup_commands"])
    # shards are Ray workers: at Ray's default niceness (15) they would yield to everything else
    for commands in (config["head_start_ray_commands"], config["worker_start_ray_commands"]):
        assert any(c.startswith("RAY_worker_niceness=0 ray start") for c in commands)
    assert any("ray start --head" in c for c in config["head_start_ray_commands"])


def resources(command: str) -> dict:
    flags = [a for a in shlex.split(command) if a.startswith("--resources=")]
    return json.loads(flags[0].split("=", 1)[1]) if flags else {}


def test_shards_go_to_the_workers_and_the_router_stays_on_the_head():
    config = prepare_config(yaml.safe_load(CONFIG.read_text()))
    workers = [c for c in config["worker_start_ray_commands"] if " ray start" in f" {c}"]
    head = [c for c in config["head_start_ray_commands"] if " ray start" in f" {c}"]
    assert workers and all(resources(c).get(SHARD_RESOURCE, 0) >= 1 for c in workers)
    assert head and all(SHARD_RESOURCE not in resources(c) for c in head)
