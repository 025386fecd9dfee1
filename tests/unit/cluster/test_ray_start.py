"""A local Ray that fails to start leaves nothing running: the processes it spawned before
failing are stopped, the start is tried again, the last error reaches the caller, and processes
that were there before stay."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from shardcat.cluster import ray_cluster

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_failed_local_start_stops_what_it_spawned(monkeypatch):
    spawned = []

    def half_start(**kwargs):
        # What Ray does when its raylet never comes up: the GCS server runs, then init raises.
        spawned.append(subprocess.Popen(SLEEPER))
        raise TimeoutError("raylet did not start")

    monkeypatch.setattr(ray_cluster.ray, "init", half_start)
    bystander = subprocess.Popen(SLEEPER)
    try:
        with pytest.raises(TimeoutError, match="raylet"):
            ray_cluster.init_ray(None, local_attempts=2)
        assert len(spawned) == 2 and all(p.wait(timeout=10) is not None for p in spawned)
        assert bystander.poll() is None and psutil.pid_exists(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()
        for p in spawned:
            p.kill()


def test_a_local_start_that_failed_once_is_tried_again(monkeypatch):
    spawned, calls = [], []

    def flaky_start(**kwargs):
        calls.append("init")
        if len(calls) == 1:
            spawned.append(subprocess.Popen(SLEEPER))
            raise Exception("The current node timed out during startup.")

    monkeypatch.setattr(ray_cluster.ray, "init", flaky_start)
    monkeypatch.setattr(ray_cluster.ray, "shutdown", lambda: calls.append("shutdown"))
    try:
        ray_cluster.init_ray(None)
        assert calls == ["init", "shutdown", "init"]
        assert spawned[0].wait(timeout=10) is not None
        calls.clear()                      # joining a cluster is not retried: its error is the answer
        with pytest.raises(Exception, match="timed out"):
            ray_cluster.init_ray("ray://nowhere:10001")
        assert calls == ["init"]
    finally:
        for p in spawned:
            p.kill()
