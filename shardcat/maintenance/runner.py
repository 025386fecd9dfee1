"""Maintenance jobs as Ray tasks: one task per (table, action), spread over the cluster's nodes, retried
by Ray when it fails (an exception or a lost worker), awaited without blocking the caller's loop.

The process that asks (a shard, or the one-process server) joins the Ray it already runs in (`--shards`
starts one: cluster/ray_cluster.py) or starts a local one on first use. Each task reports the node it
ran on and which attempt succeeded, for the runs table.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time

import ray

from ..web import store_endpoints
from . import delta_jobs, iceberg_jobs

MAX_RETRIES = 2            # a failed job is tried this many more times (and Ray reruns a task whose worker died)
RUNS: collections.Counter = collections.Counter()    # (job, outcome) -> runs finished in this process (/metrics)
ACTIONS = {
    "delta.compact": delta_jobs.compact,
    "delta.checkpoint": delta_jobs.checkpoint,
    "delta.vacuum": delta_jobs.vacuum,
    "iceberg.expire_snapshots": iceberg_jobs.expire_snapshots,
    "iceberg.compact": iceberg_jobs.compact,
    "iceberg.remove_orphan_files": iceberg_jobs.remove_orphan_files,
    "iceberg.rewrite_manifests": iceberg_jobs.rewrite_manifests,
}


def ensure_ray() -> None:
    """Join the running Ray, or start a local one (this process's own: never another's on the machine)."""
    if not ray.is_initialized():
        address = os.environ.get("SHARDCAT_RAY_ADDRESS")
        # A local Ray started here may be the one the process's shards run on later (the server, tests):
        # its workers at niceness 0, as cluster/ray_cluster.py init_ray starts one, not Ray's 15.
        local = {"_system_config": {"worker_niceness": 0}} if not address else {}
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                 configure_logging=False, ignore_reinit_error=True, **local)


# The stores a job may call (web/store_endpoints.py), as the asking process allows them now: a worker's own
# environment is the one Ray started with.
_ENDPOINT_SETTINGS = (store_endpoints.ENV, "SHARDCAT_S3_ENDPOINT")


@ray.remote(max_retries=MAX_RETRIES, scheduling_strategy="SPREAD")
def _task(action: str, spec: dict, settings: dict | None = None) -> dict:
    """The job itself, on whichever node Ray picked (SPREAD: the tasks of a round go to different
    nodes). Ray runs it again when its worker or node is lost; an exception is `run`'s to retry."""
    for name, value in (settings or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    started = time.time()
    out = ACTIONS[action](**spec)
    return {**out, "node": ray.get_runtime_context().get_node_id(), "seconds": round(time.time() - started, 3)}


class JobFailed(Exception):
    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


async def run(action: str, spec: dict, *, attempts: int = 1 + MAX_RETRIES, backoff: float = 0.5) -> dict:
    """Run one job as a Ray task, tried up to `attempts` times (backoff doubling between tries); its
    result with `node`, `seconds` and `attempt`. JobFailed (with the last error) when every try failed."""
    if action not in ACTIONS:
        raise ValueError(f"unknown maintenance action {action!r}")
    await asyncio.to_thread(ensure_ray)
    error = None
    for attempt in range(1, attempts + 1):
        try:
            settings = {name: os.environ.get(name) for name in _ENDPOINT_SETTINGS}
            return {**await _task.remote(action, spec, settings), "attempt": attempt}
        except (ray.exceptions.RayError, OSError) as e:
            error = e
            if attempt < attempts:
                await asyncio.sleep(backoff * 2 ** (attempt - 1))
    raise JobFailed(_short(error), attempts)


def _short(error: BaseException | None) -> str:
    """The failing job's own error, without Ray's traceback of the task."""
    cause = getattr(error, "cause", None) or error
    return f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"[:1000]
