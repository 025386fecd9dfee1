"""Chaos and reassignment experiments: a fault under load, then the invariants checked.

Each experiment runs the checking load loop (driver.py) and a prober against a running
sharded catalog, injects one fault at `fault_at`, and measures:
- recovery: seconds from the fault until every metastore answered a request sent after it;
- errors clients saw (by op and error code), over the run and after the fault;
- invariants: no acknowledged write lost (every acknowledged create, alter and drop is in the
  database and visible through the API afterwards; every acknowledged grant or revoke, the
  newest by metastore version for each table and principal, is in effect: in the database and
  in `GET /permissions`), no read older than a write the same client saw acknowledged (checked
  on every answer), no duplicate commit versions (each metastore's change log holds each
  version 1..current exactly once; each Delta table holds each version 1..latest exactly once,
  every acknowledged commit is the one stored at its version, and no version was acknowledged
  to two different commits).

Faults: kill-shard (ray.kill its actor), pause-shard (its event loop stops answering for longer
than the ping timeout and the router's retry budget), move (metastores moved between shards on
purpose, under load), dual-owner (a metastore handed to a second shard without telling the
first; a stale client keeps reading and writing straight at the first), pg-restart (PostgreSQL
restarted under load; needs the embedded server's data dir).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import ray

from shardcat.cluster.embedded_db import restart_embedded_postgres

from .driver import Budget, Ledger, LoadClient, Prober, Sample
from .workload import PREFIX, Metastore

EXPERIMENTS = ("kill-shard", "pause-shard", "move", "dual-owner", "pg-restart")
RECOVERY_TARGET = 2.0        # seconds: every metastore served again within this after a shard dies


@dataclass
class ChaosConfig:
    experiment: str
    duration: float = 6.0            # seconds of load
    fault_at: float = 2.0            # seconds into the load
    clients: int = 8
    max_requests: int = 50_000
    write_share: float | None = 0.15  # more writes than the mix's 2%: more acknowledged writes to check
    pause_seconds: float = 6.0       # > ping timeout (1 s) and > the router's retry budget (5 s)
    moves: int = 10
    # Go on past `duration` (up to `max_duration`) until the clients have this many acknowledged
    # tables, grants and Delta commits to check: on a slow machine a fixed time may give too few.
    min_checked: int = 0
    max_duration: float = 60.0


async def run_experiment(running, metastores: list[Metastore], cfg: ChaosConfig, *, pgdata: Path | None = None,
                         seed: int = 1) -> dict:
    """Run one experiment against `running` (shardcat.cluster.server.Running with a cluster)."""
    assert cfg.experiment in EXPERIMENTS, cfg.experiment
    cluster = running.cluster
    rng = random.Random(seed)
    samples: list[Sample] = []
    stale_samples: list[Sample] = []
    details: dict = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256)) as session:
        t0 = time.monotonic()

        def recovered() -> tuple[float | None, dict[str, float]]:
            """Every metastore served after the fault; after a database restart, only answers to
            requests sent once it is back count (a request just after the fault may beat the stop)."""
            if not fault_time or (cfg.experiment == "pg-restart" and "restart_seconds" not in details):
                return None, {}
            return prober.served_again(fault_time[0], fault_time[0] + details.get("restart_seconds", 0.0))

        def enough() -> bool:
            """With `min_checked`: the fault happened, every metastore was served after it, and
            the clients have enough acknowledged writes to check."""
            return cfg.min_checked <= 0 or (
                recovered()[0] is not None and enough_to_check([c.ledger for c in clients], cfg.min_checked))

        budget = Budget(t0 + cfg.duration, cfg.max_requests, hard_deadline=t0 + max(cfg.duration, cfg.max_duration),
                        enough=enough)
        run_id = uuid.uuid4().hex[:6]          # table names of their own: runs can share metastores
        clients = [LoadClient(f"c{run_id}x{i}", running.url, metastores, session, budget, samples, t0, seed=seed * 100 + i,
                              write_share=cfg.write_share) for i in range(cfg.clients)]
        prober = Prober(running.url, metastores, session, budget, t0)
        fault_time: list[float] = []

        async def fault():
            await asyncio.sleep(cfg.fault_at)
            fault_time.append(time.monotonic() - t0)
            await inject(cfg, running, metastores, rng, details, session, budget, stale_samples, t0, pgdata)

        tasks = [*(c.run() for c in clients), prober.run(), fault()]
        await asyncio.gather(*tasks)
        budget.stopped = True
        stale = details.pop("_stale_client", None)
        recovery, per_metastore = recovered()
        verified = await verify(running, session, [c.ledger for c in clients] + ([stale.ledger] if stale else []),
                                {m.id: m for m in metastores})
    ledgers = [c.ledger for c in clients] + ([stale.ledger] if stale else [])
    return summarize(cfg, samples, stale_samples, fault_time[0], recovery, per_metastore, ledgers, verified, details,
                     cluster.events)


def enough_to_check(ledgers: list[Ledger], n: int) -> bool:
    """Whether the ledgers hold at least n distinct tables, grants and Delta commits (and 2n writes)."""
    def distinct(kind: str) -> int:
        return len(set().union(*(getattr(ledger, kind) for ledger in ledgers)))
    return (sum(ledger.acked_writes for ledger in ledgers) >= 2 * n and distinct("tables") >= n
            and distinct("grants") >= n and distinct("commits") >= n)


async def inject(cfg, running, metastores, rng, details, session, budget, stale_samples, t0, pgdata) -> None:
    cluster = running.cluster
    routing = cluster.routing
    ids = {m.id for m in metastores}

    def busiest() -> str:
        counts = Counter(routing.owner[m] for m in ids if m in routing.owner)
        return counts.most_common(1)[0][0]

    if cfg.experiment == "kill-shard":
        victim = busiest()
        details.update(shard=victim, metastores=sum(1 for m in ids if routing.owner.get(m) == victim))
        await cluster.kill(victim)
    elif cfg.experiment == "pause-shard":
        victim = busiest()
        details.update(shard=victim, metastores=sum(1 for m in ids if routing.owner.get(m) == victim),
                       pause_seconds=cfg.pause_seconds)
        routing.shards[victim].actor.pause.remote(cfg.pause_seconds)   # not awaited: it stops answering
    elif cfg.experiment == "move":
        moved = 0
        for _ in range(cfg.moves):
            metastore_id = rng.choice(sorted(ids))
            others = [h.name for h in routing.live() if h.name != routing.owner.get(metastore_id)]
            if others:
                await routing.move(metastore_id, rng.choice(others))
                moved += 1
            await asyncio.sleep(min(0.2, cfg.duration / (4 * cfg.moves)))
        details.update(moves=moved)
    elif cfg.experiment == "dual-owner":
        target = max(metastores, key=lambda m: m.tables)
        old = routing.shards[routing.owner[target.id]]
        new = next(h for h in routing.live() if h is not old)
        # The router and the database now name `new`; `old` was never told and still serves.
        await running.store.assign_shard(target.id, new.name)
        routing.owner[target.id] = new.name
        await new.actor.own.remote([target.id])
        details.update(metastore=target.id, old=old.name, new=new.name)
        stale = LoadClient(f"stale{uuid.uuid4().hex[:4]}", old.url, [target], session, budget, stale_samples, t0,
                           seed=rng.randrange(10**6), write_share=cfg.write_share, min_version_header=True)
        details["_stale_client"] = stale
        await stale.run()
        try:
            details["old_still_owns"] = target.id in await old.actor.owned.remote()
        except ray.exceptions.RayActorError:      # the supervisor took it for hung under the load and replaced it
            details["old_still_owns"] = None
            details["old_owner_died"] = True
    elif cfg.experiment == "pg-restart":
        if pgdata is None:
            raise ValueError("pg-restart needs the embedded PostgreSQL's data dir")
        started = time.monotonic()
        await asyncio.to_thread(restart_embedded_postgres, pgdata)
        details.update(restart_seconds=round(time.monotonic() - started, 3))


async def _get_when_served(session: aiohttp.ClientSession, url: str, token: str, sem: asyncio.Semaphore | None = None,
                           params: dict | None = None, patience: float = 60.0) -> tuple[int, dict]:
    """GET, asking again while the answer is 503: a shard being replaced says nothing about what
    the catalog holds."""
    deadline = time.monotonic() + patience
    while True:
        async with sem or contextlib.nullcontext(), \
                session.get(url, params=params, headers={"Authorization": f"Bearer {token}"}) as r:
            body = await r.json(content_type=None)
            if r.status != 503 or time.monotonic() > deadline:
                return r.status, body
        await asyncio.sleep(0.2)


async def verify(running, session: aiohttp.ClientSession, ledgers, metastores: dict[str, Metastore]) -> dict:
    """After the run: every acknowledged write is in the database and visible through the API."""
    store = running.store
    lost: list[str] = []
    checked = 0
    latest: dict[tuple[str, str], object] = {}
    for ledger in ledgers:
        latest.update(ledger.tables)
    sem = asyncio.Semaphore(16)

    async def check(key, owned):
        nonlocal checked
        metastore_id, full = key
        _, asset = await store.get_asset(metastore_id, "table", full)
        if owned.present:
            in_db = asset is not None and asset.info.get("comment") == owned.comment
        else:
            in_db = asset is None
        if not in_db:
            lost.append(f"database: {full} in {metastore_id}: acknowledged {owned}, found "
                        f"{None if asset is None else asset.info.get('comment')!r}")
        status, body = await _get_when_served(session, f"{running.url}{PREFIX}/tables/{full}",
                                              metastores[metastore_id].token, sem)
        if (status == 200) != owned.present or (owned.present and body.get("comment") != owned.comment):
            lost.append(f"api: {full} in {metastore_id}: acknowledged {owned}, got {status}")
        checked += 1

    await asyncio.gather(*(check(k, o) for k, o in latest.items()))
    rows = await store.pool.fetch(
        """SELECT m.id, m.version, count(c.version) AS n, count(DISTINCT c.version) AS distinct_n,
                  coalesce(min(c.version), 0) AS lo, coalesce(max(c.version), 0) AS hi
           FROM metastores m LEFT JOIN change_log c ON c.metastore_id = m.id
           WHERE m.id = ANY($1::uuid[]) GROUP BY m.id, m.version""", list(metastores))
    duplicates = [f"{r['id']}: version {r['version']}, change log {r['n']} rows ({r['distinct_n']} distinct) "
                  f"{r['lo']}..{r['hi']}" for r in rows
                  if not (r["n"] == r["distinct_n"] == r["version"] and r["hi"] == r["version"]
                          and r["lo"] == (1 if r["version"] else 0))]
    versions = {str(r["id"]): r["version"] for r in rows}
    for ledger in ledgers:
        for metastore_id, seen in ledger.seen_version.items():
            if seen > versions.get(metastore_id, 0):
                duplicates.append(f"{metastore_id}: a write was acknowledged at version {seen} > "
                                  f"the database's {versions.get(metastore_id)}")
    grants_checked = await verify_grants(running, session, ledgers, metastores, lost)
    commits_checked = await verify_commits(running, session, ledgers, metastores, duplicates)
    return {"checked_tables": checked, "checked_grants": grants_checked, "checked_commits": commits_checked,
            "lost": lost, "version_problems": duplicates}


async def verify_grants(running, session, ledgers, metastores: dict[str, Metastore], lost: list[str]) -> int:
    """Each (table, principal) ends as its newest acknowledged change left it. Changes are metastore
    writes, so the acknowledged metastore versions order them, across clients too. A key with a change
    of unknown outcome is left out (it may have landed after the newest acknowledged one)."""
    final: dict[tuple[str, str, str], tuple[int, bool]] = {}
    unknown = set().union(*(ledger.grants_unknown for ledger in ledgers)) if ledgers else set()
    for ledger in ledgers:
        for key, (version, granted) in ledger.grants.items():
            if key in final and final[key][0] == version and final[key][1] != granted:
                lost.append(f"grants: {key} acknowledged both ways at version {version}")
            if version > final.get(key, (-1, False))[0]:
                final[key] = (version, granted)
    sem = asyncio.Semaphore(16)

    async def check(key, granted: bool):
        metastore_id, full, principal = key
        _, asset = await running.store.get_asset(metastore_id, "table", full)
        in_db = asset is not None and bool(await running.store.pool.fetchval(
            "SELECT count(*) FROM grants WHERE securable_id = $1 AND principal = $2 AND privilege = 'SELECT'",
            uuid.UUID(asset.id), principal))
        what = f"{'grant' if granted else 'revoke'} of SELECT on {full} to {principal} in {metastore_id}"
        if in_db != granted:
            lost.append(f"database: acknowledged {what}, but the grant is {'absent' if granted else 'present'}")
        status, body = await _get_when_served(session, f"{running.url}{PREFIX}/permissions/table/{full}",
                                              metastores[metastore_id].token, sem, params={"principal": principal})
        held = [p for a in (body or {}).get("privilege_assignments", []) if a["principal"] == principal
                for p in a["privileges"]] if status == 200 else None
        if held is None or ("SELECT" in held) != granted:
            lost.append(f"api: acknowledged {what}, GET permissions answered {status} {held}")

    checked = {k: v for k, v in final.items() if k not in unknown}
    await asyncio.gather(*(check(k, granted) for k, (_, granted) in checked.items()))
    return len(checked)


async def verify_commits(running, session, ledgers, metastores: dict[str, Metastore], problems: list[str]) -> int:
    """Each Delta table holds versions 1..latest once each; every acknowledged commit is the one stored at its
    version (none acknowledged twice to different commits); the API's latest version is the database's."""
    acked: dict[tuple[str, str, int], set[str]] = {}
    for ledger in ledgers:
        for key, name in ledger.commits.items():
            acked.setdefault(key, set()).add(name)
    for (metastore_id, _, version), names in acked.items():
        if len(names) > 1:
            problems.append(f"{metastore_id}: Delta version {version} acknowledged to {len(names)} different "
                            f"commits: {sorted(names)}")
    tables = {m.delta_table_id: m for m in metastores.values() if m.delta_table_id}
    if not tables:
        return 0
    rows = await running.store.pool.fetch(
        "SELECT table_id, version, file_name FROM delta_commits WHERE table_id = ANY($1::uuid[])", list(tables))
    stored: dict[str, dict[int, list[str]]] = {}
    for r in rows:
        stored.setdefault(str(r["table_id"]), {}).setdefault(r["version"], []).append(r["file_name"])
    for table_id, ms in tables.items():
        versions = stored.get(table_id, {})
        latest = max(versions, default=0)
        if sorted(versions) != list(range(1, latest + 1)) or any(len(n) != 1 for n in versions.values()):
            problems.append(f"{ms.id}: Delta table versions are not 1..{latest} once each")
        status, body = await _get_when_served(session, f"{running.url}{PREFIX}/delta/preview/commits", ms.token,
                                              params={"table_id": table_id, "table_uri": ms.delta_table_uri,
                                                      "start_version": "0"})
        if status != 200 or body.get("latest_table_version") != latest:
            problems.append(f"{ms.id}: get commits answered {status} {str(body)[:200]}, the database's latest "
                            f"Delta version is {latest}")
        else:
            for c in body["commits"]:       # the unpublished ones: the same commits as the database's
                if versions.get(c["version"]) != [c["file_name"]]:
                    problems.append(f"{ms.id}: get commits shows {c['file_name']} at version {c['version']}, "
                                    f"the database {versions.get(c['version'])}")
    for (metastore_id, table_id, version), names in acked.items():
        if versions_of := stored.get(table_id, {}).get(version):
            if sorted(names) != versions_of:
                problems.append(f"{metastore_id}: acknowledged Delta version {version} as {sorted(names)}, "
                                f"stored {versions_of}")
        else:
            problems.append(f"{metastore_id}: acknowledged Delta version {version} is missing")
    return len(acked)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summarize(cfg, samples, stale_samples, fault_time, recovery, per_metastore, ledgers, verified, details,
              events) -> dict:
    errors = [s for s in samples if s.error]
    after = [s for s in errors if s.start >= fault_time]
    ok = [s.latency for s in samples if not s.error]
    span = max((s.start + s.latency for s in samples), default=0.0) or 1.0
    violations = [v for ledger in ledgers for v in ledger.violations]
    return {
        "experiment": cfg.experiment,
        "config": {k: v for k, v in cfg.__dict__.items()},
        "requests": len(samples),
        "rps": round(len(samples) / span, 1),
        "p50_ms": round(1000 * percentile(ok, 0.50), 2),
        "p99_ms": round(1000 * percentile(ok, 0.99), 2),
        "fault_at": round(fault_time, 3),
        "recovery_seconds": None if recovery is None else round(recovery, 3),
        "slowest_metastores": sorted(((round(v, 3), k) for k, v in per_metastore.items()), reverse=True)[:3],
        "errors": len(errors),
        "errors_after_fault": len(after),
        "errors_by_code": dict(Counter(f"{s.op}:{s.error}" for s in errors).most_common()),
        "stale_client": {"requests": len(stale_samples),
                         "errors_by_code": dict(Counter(s.error for s in stale_samples if s.error))},
        "acknowledged_writes": sum(ledger.acked_writes for ledger in ledgers),
        "unknown_outcome_writes": sum(len(ledger.unknown) for ledger in ledgers),
        "checked_tables": verified["checked_tables"],
        "checked_grants": verified["checked_grants"],
        "checked_commits": verified["checked_commits"],
        "lost_writes": verified["lost"][:20],
        "stale_reads": violations[:20],
        "version_problems": verified["version_problems"][:20],
        "invariants_hold": not (verified["lost"] or violations or verified["version_problems"]),
        "details": details,
        "events": [{**e, "t": round(e["t"], 3)} for e in events[-20:]],
        "latency_mean_ms": round(1000 * statistics.fmean(ok), 2) if ok else 0.0,
        "timeline": timeline(samples),
    }


def timeline(samples, step: float = 0.25) -> list[tuple[float, int, int, float]]:
    """(bucket start s, answered, errors, p99 ms) per `step` of request start times."""
    buckets: dict[int, list] = {}
    for s in samples:
        buckets.setdefault(int(s.start / step), []).append(s)
    return [(round(k * step, 2), sum(1 for s in b if not s.error), sum(1 for s in b if s.error),
             round(1000 * percentile([s.latency for s in b], 0.99), 1)) for k, b in sorted(buckets.items())]
