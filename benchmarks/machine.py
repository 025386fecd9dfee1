"""The machine under a benchmark: what it is, how busy it is, and the CPU each process used."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import subprocess
import time
from pathlib import Path

import aiohttp
import psutil

from .common import QUIET_CORES, ROOT, log


# ---- machine and CPU ------------------------------------------------------------------------------

def machine() -> dict:
    model = "unknown"
    with contextlib.suppress(OSError):
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), model)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    commit = None
    with contextlib.suppress(Exception):   # read-only git queries
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, timeout=5).stdout.strip() or None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if commit and dirty:
            commit += " + uncommitted changes"
    return {"cores": usable, "cpu_model": model, "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "kernel": platform.release(), "python": platform.python_version(), "aiohttp": aiohttp.__version__,
            "commit": commit, "running_share": running_share()}


def running_share(seconds: float = 2.0) -> float:
    """The share of `seconds` of wall time in which a busy thread of this process actually ran.
    Well under 1 on an idle machine means the host held the whole VM back, which neither the load
    nor the steal time inside it shows; every wall-clock number of the run then carries such gaps."""
    start = last = time.perf_counter()
    lost = 0.0
    while last - start < seconds:
        now = time.perf_counter()
        if now - last > 0.002:       # longer than a time slice: the thread was not running
            lost += now - last
        last = now
    return round(1 - lost / (last - start), 3)


def tree_cpu(pids: list[int]) -> dict[int, float]:
    """User+system CPU seconds of these processes and all their live descendants, by pid."""
    out: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            for q in (p, *p.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    t = q.cpu_times()
                    out[q.pid] = t.user + t.system
    return out


def tree_cpu_total(pids: list[int]) -> float:
    """User+system CPU seconds of these processes' trees, the descendants that ended included: each
    live process's own and its reaped children's (which the kernel adds to the parent when it waits
    for them). It only grows, so the difference of two readings is the CPU used in between, even
    when processes ended meanwhile (a PostgreSQL backend whose connection closed): a sum over the
    live processes alone then drops by what the ended ones had used, and can come out negative."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            for q in (p, *p.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    t = q.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
    return total


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in after.items())


def own_cpu() -> float:
    """CPU seconds of this process and of its children that have ended (a load generator's wrk)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy since boot (all cores; /proc/stat), 0 if unknown."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    return (sum(f[:8]) - f[3] - f[4]) / _TICK          # user..steal minus idle and iowait


async def wait_for_quiet(max_wait: float, label: str) -> None:
    """Wait at most `max_wait` s until the machine uses < QUIET_CORES (others' test suites, builds)."""
    deadline = time.monotonic() + max_wait
    waited = False
    while max_wait > 0:
        b0, t0 = machine_busy(), time.perf_counter()
        await asyncio.sleep(0.5)
        load = (machine_busy() - b0) / (time.perf_counter() - t0)
        if load < QUIET_CORES or time.monotonic() >= deadline:
            if waited:
                log(f"  machine load now {load:.2f} cores" + ("" if load < QUIET_CORES else "; going on anyway"))
            return
        if not waited:
            log(f"  {label}: other processes use {load:.2f} cores; waiting up to {max_wait:.0f} s")
            waited = True
