"""Locust users drawing the workload of workload.py against a seeded catalog (loopback only).

    LOADTEST_POPULATION=population.json LOADTEST_MAX_REQUESTS=100000 \
        locust -f loadtest/locustfile.py --headless -u 32 -r 32 -t 60s --host http://127.0.0.1:PORT

Run through `python -m loadtest run SCENARIO`, which starts the server, seeds it, runs this
headless and plots the CSVs. Every user checks session consistency on its own writes: an
answer reflecting a metastore version older than a write it saw acknowledged is a failure
named "stale read". The run stops at its time limit or after LOADTEST_MAX_REQUESTS requests.
"""

from __future__ import annotations

import itertools
import os
import random
import sys
from pathlib import Path

from locust import FastHttpUser, task

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from loadtest.seed import load_population  # noqa: E402
from loadtest.workload import CATALOG, LOAD_SCHEMA, WRITES, Chooser, alter_request, create_request, \
    drop_request, read_request  # noqa: E402

_, METASTORES = load_population(Path(os.environ["LOADTEST_POPULATION"]))
MAX_REQUESTS = int(os.environ.get("LOADTEST_MAX_REQUESTS", "1000000"))
_sent = itertools.count(1)
_users = itertools.count()


class CatalogUser(FastHttpUser):
    network_timeout = 10.0
    connection_timeout = 5.0

    def on_start(self):
        self.index = next(_users)
        self.chooser = Chooser(METASTORES, random.Random(self.index))
        self.seen: dict[str, int] = {}           # metastore -> version of the newest acknowledged write
        self.mine: dict[str, list[str]] = {}     # metastore -> own tables present
        self.seq = 0

    @task
    def one_request(self):
        if next(_sent) > MAX_REQUESTS:
            self.environment.runner.quit()
            return
        ms = self.chooser.metastore()
        op = self.chooser.op()
        own = self.mine.setdefault(ms.id, [])
        if op in WRITES:
            if op == "createTable" or not own:
                self.seq += 1
                req = create_request(f"u{self.index}_{self.seq:07d}_{os.getpid()}")
            elif op == "alterTable":
                req = alter_request(random.choice(own), f"c{self.seq}")
            else:
                req = drop_request(own.pop(random.randrange(len(own))))
        else:
            req = read_request(op, ms, self.chooser)
        headers = {"Authorization": f"Bearer {ms.token}"}
        with self.client.request(req.method, req.path, params=req.params, json=req.json, headers=headers,
                                 name=req.op, catch_response=True) as r:
            version = int(r.headers.get("X-Shardcat-Version") or 0) if r.headers else 0
            if r.status_code != 200:
                r.failure(f"{r.status_code}")
            elif req.is_write:
                self.seen[ms.id] = max(self.seen.get(ms.id, 0), version)
                if req.op == "createTable":
                    own.append(f"{CATALOG}.{LOAD_SCHEMA}.{req.json['name']}")
                r.success()
            elif version < self.seen.get(ms.id, 0):
                r.failure("stale read")
            else:
                r.success()
