"""Locust users drawing the workload of workload.py against a seeded catalog (loopback only).

    LOADTEST_POPULATION=population.json LOADTEST_MAX_REQUESTS=100000 \
        locust -f loadtest/locustfile.py --headless -u 32 -r 32 -t 60s --host http://127.0.0.1:PORT

Run through `python -m loadtest run SCENARIO`, which starts the server, seeds it, runs this
headless and plots the CSVs. Every user checks session consistency on its own writes: an
answer reflecting a metastore version older than a write it saw acknowledged is a failure
named "stale read". Grants change SELECT on seeded tables for seeded principals; Delta commits
ratify the next version of each metastore's catalog-managed table (a version another user took
first is a 409, not a failure: the user reads the latest version and proposes after it next
time). The run stops at its time limit or after LOADTEST_MAX_REQUESTS requests.

Optional: LOADTEST_ZIPF=S picks each user's metastores by Zipf's law with exponent S
(workload.zipf_weights) instead of by size; LOADTEST_SAMPLES=PATH writes every request (its
start as Unix time, name, milliseconds, and the failure or nothing) to PATH as CSV when Locust
quits (SIGTERM included): loadtest/cluster_mix.py cuts its windows out of them.
"""

from __future__ import annotations

import csv
import itertools
import os
import random
import sys
import time
from pathlib import Path

from locust import FastHttpUser, events, task

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from loadtest.seed import load_population  # noqa: E402
from loadtest.workload import CATALOG, LOAD_SCHEMA, WRITES, Chooser, alter_request, commit_request, \
    create_request, drop_request, get_commits_request, grant_request, grant_target, read_request  # noqa: E402

_, METASTORES = load_population(Path(os.environ["LOADTEST_POPULATION"]))
MAX_REQUESTS = int(os.environ.get("LOADTEST_MAX_REQUESTS", "1000000"))
ZIPF = float(os.environ["LOADTEST_ZIPF"]) if os.environ.get("LOADTEST_ZIPF") else None
SAMPLES = os.environ.get("LOADTEST_SAMPLES")
_sent = itertools.count(1)
_users = itertools.count()
_samples: list[tuple[float, str, float, str]] = []


if SAMPLES:
    @events.request.add_listener
    def _record(name, response_time, exception=None, start_time=None, **_):
        start = start_time if start_time is not None else time.time() - response_time / 1000
        _samples.append((start, name, response_time, "" if exception is None else str(exception)[:80]))

    @events.quitting.add_listener
    def _write(**_):
        with open(SAMPLES, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(("start", "name", "ms", "failure"))
            out.writerows((f"{t:.4f}", n, f"{ms:.2f}", e) for t, n, ms, e in _samples)


class CatalogUser(FastHttpUser):
    network_timeout = 10.0
    connection_timeout = 5.0

    def on_start(self):
        self.index = next(_users)
        self.chooser = Chooser(METASTORES, random.Random(self.index), zipf=ZIPF)
        self.seen: dict[str, int] = {}           # metastore -> version of the newest acknowledged write
        self.mine: dict[str, list[str]] = {}     # metastore -> own tables present
        self.seq = 0
        self.delta_latest: dict[str, int] = {}   # metastore -> latest Delta version this user knows

    def send(self, ms, req, expect=()):
        """Send one request, check it, and return (status, body)."""
        headers = {"Authorization": f"Bearer {ms.token}"}
        with self.client.request(req.method, req.path, params=req.params, json=req.json, headers=headers,
                                 name=req.op, catch_response=True) as r:
            version = int(r.headers.get("X-Shardcat-Version") or 0) if r.headers else 0
            if r.status_code in expect:
                r.success()
            elif r.status_code != 200:
                r.failure(f"{r.status_code}")
            elif req.is_write:
                self.seen[ms.id] = max(self.seen.get(ms.id, 0), version)
                r.success()
            elif version < self.seen.get(ms.id, 0):
                r.failure("stale read")
            else:
                r.success()
            try:
                return r.status_code, r.json() if r.status_code == 200 else None
            except ValueError:
                return r.status_code, None

    def delta_commit(self, ms):
        if ms.id not in self.delta_latest:
            status, body = self.send(ms, get_commits_request(ms, 0))
            if status != 200:
                return
            self.delta_latest[ms.id] = body["latest_table_version"]
        version = self.delta_latest[ms.id] + 1
        status, _ = self.send(ms, commit_request(ms, version, f"u{self.index}"), expect=(409,))
        if status == 200:
            self.delta_latest[ms.id] = version
        else:                     # taken by another user, or unknown: read the latest before the next one
            self.delta_latest.pop(ms.id, None)

    @task
    def one_request(self):
        if next(_sent) > MAX_REQUESTS:
            self.environment.runner.quit()
            return
        ms = self.chooser.metastore()
        op = self.chooser.op()
        own = self.mine.setdefault(ms.id, [])
        if op == "deltaCommit" and ms.delta_table_id:
            return self.delta_commit(ms)
        if op == "updatePermissions":
            return self.send(ms, grant_request(*grant_target(ms, self.chooser)))
        if op in WRITES:
            if op in ("createTable", "deltaCommit") or not own:
                self.seq += 1
                req = create_request(f"u{self.index}_{self.seq:07d}_{os.getpid()}")
            elif op == "alterTable":
                req = alter_request(random.choice(own), f"c{self.seq}")
            else:
                req = drop_request(own.pop(random.randrange(len(own))))
        else:
            req = read_request(op, ms, self.chooser)
        status, _ = self.send(ms, req)
        if status == 200 and req.op == "createTable":
            own.append(f"{CATALOG}.{LOAD_SCHEMA}.{req.json['name']}")
