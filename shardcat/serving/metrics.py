"""A shard's metrics and probes: `/metrics` (its figures: requests, cache, writes, audit, database
pool, garbage collections), `/livez` and `/readyz` (ready when PostgreSQL answers). The figures
are counters the shard, its cache, its audit log, its front and its process's collector policy
already keep; this module only reads them (web/metrics.py)."""

from __future__ import annotations

from aiohttp import web

from ..governance.audit import AuditLog
from ..maintenance.runner import RUNS as maintenance_runs
from ..shards.shard import Shard
from ..web.kit import healthz
from ..web.routes import Handler
from ..web.metrics import (CONTENT_TYPE, OBSERVED, Figures, Observed, add_audit, add_pool, database_answers,
                           exposition, probe_answer)
from . import gc_policy

_CACHE_COUNTS = ("hits", "misses", "evictions")


def shard_figures(shard: Shard, audit_log: AuditLog, observed: Observed) -> Figures:
    """The shard's figures now (plain data)."""
    figures = Figures(requests=observed.requests.snapshot())
    counters = figures.counters
    add_caches(figures, shard)
    figures.labelled["metastore_version"] = {ms: state.version for ms, state in shard.states.items()}
    for key in ("writes", "write_conflicts", "reconciles", "rebuilds", "dual_owner_drops", "grouped_writes",
                "lone_writes", "group_replays", "idle_evictions", "cold_path_loads", "privilege_chain_loads"):
        counters[key] = shard.stats.get(key, 0)
    counters["write_groups"] = shard.stats.get("groups", 0)
    add_audit(figures, audit_log)
    add_pool(figures, shard.store.pool)
    counters["front_fast_answers"] = observed.front.get("fast", 0)
    counters["front_relayed"] = observed.front.get("through_app", 0)
    figures.labelled["maintenance_runs"] = {f"{job}:{outcome}": n for (job, outcome), n in maintenance_runs.items()}
    if gc_policy.installed():       # a process serving a shard: its collections are timed
        pauses = gc_policy.PAUSES
        for name, by_generation in (("gc_collections", pauses.collections), ("gc_pause_seconds", pauses.seconds),
                                    ("gc_longest_pause_seconds", pauses.longest)):
            figures.labelled[name] = {str(generation): value for generation, value in by_generation.items()}
    return figures


def add_caches(figures: Figures, shard: Shard) -> None:
    """The caches of the metastores served now, together and per metastore, and how many are warm. The
    counts include those of caches given up (moved away, gone cold, rebuilt): they never go down."""
    counters, gauges = figures.counters, figures.gauges
    caches = {ms: s.cache.stats() for ms, s in shard.states.items() if s.cache is not None}
    for key in _CACHE_COUNTS:
        counters[f"cache_{key}"] = shard.caches.given_up[key] + sum(c[key] for c in caches.values())
    gauges["cache_entries"] = sum(c["entries"] for c in caches.values())
    gauges["cache_bytes"] = sum(c["bytes"] for c in caches.values())
    looked_up = counters["cache_hits"] + counters["cache_misses"]
    gauges["cache_hit_ratio"] = counters["cache_hits"] / looked_up if looked_up else 0.0
    gauges["cache_bound_bytes"] = shard.budget.max_bytes
    # Only the metastores holding something: an idle one, gone cold, has no series.
    figures.labelled["cache_metastore_bytes"] = {ms: c["bytes"] for ms, c in caches.items() if c["bytes"]}
    gauges["metastores_owned"] = len(shard.states)
    gauges["metastores_warm"] = sum(1 for s in shard.states.values() if s.version >= 0)
    gauges["metastores_paths_in_db"] = sum(1 for s in shard.states.values() if s.paths_in_db)


def probe_handlers(shard: Shard, audit_log: AuditLog) -> dict[str, Handler]:
    """/livez, /readyz and /metrics of a shard's app (the app holds the front's `OBSERVED`)."""

    async def ready(request):
        problem = await database_answers(shard.store.pool)
        return probe_answer([problem] if problem else [])

    async def metrics(request):
        figures = shard_figures(shard, audit_log, request.app[OBSERVED])
        return web.Response(body=exposition([({}, figures)]), headers={"Content-Type": CONTENT_TYPE})

    return {"livez": healthz, "readyz": ready, "metrics": metrics}
