"""Prometheus metrics: requests counted in plain ints where they are answered, turned into
Prometheus' text format (the `prometheus_client` package) only when `/metrics` is scraped.

The fronts answer most reads in tens of microseconds, so they do not call into a metrics
library per request: `RequestFigures.observe` adds to a list of ints (one bucket, the sum) and
the collector reads those lists at scrape time. Every other figure (cache, database pool, audit,
writes, shards, the supervisor) is a counter or gauge its owner already keeps; the apps gather
them into a `Figures` snapshot (plain data, so a shard's crosses Ray to the router) and
`exposition` writes one or more snapshots, each with its labels (e.g. `shard="shard-0"`).
Requests are labelled by the endpoint registry's operation name, never by raw path.
"""

from __future__ import annotations

import asyncio
import re
from bisect import bisect_left
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from . import registry

READY_TIMEOUT_SECONDS = 2.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Latency buckets (seconds): cached reads take well under a millisecond, writes a few.
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SUM = len(BUCKETS) + 1       # a series: one count per bucket, one past the last bucket (+Inf), then the sum

# What each counter and gauge a snapshot may carry means: name (without shardcat_) -> help.
COUNTERS = {
    "cache_hits": "Lookups answered from the in-memory cache.",
    "cache_misses": "Lookups the cache could not answer (read from PostgreSQL).",
    "cache_evictions": "Cached assets evicted under the memory bound.",
    "idle_evictions": "Metastores gone cold after their idle timeout (state and cache freed; served again on use).",
    "writes": "Metastore writes committed (each bumps the metastore's version).",
    "write_conflicts": "Writes that found the metastore version moved and ran again.",
    "write_groups": "Transactions that committed several queued metastore writes together (group commit).",
    "grouped_writes": "Metastore writes taken in such groups, refused ones included (over write_groups: writes per group).",
    "lone_writes": "Metastore writes group commit ran in a transaction of their own: nothing else was queued.",
    "group_replays": "Groups rolled back and run again with a savepoint per write, one of them having failed.",
    "cold_path_loads": "Storage paths a cold path index (a new owner's, or one kept in PostgreSQL past "
                       "--path-index-max) read from PostgreSQL for a request's path questions.",
    "privilege_chain_loads": "Securables a request's partial privilege index read with their ancestors and grants "
                             "(a cold owner of a large metastore, its whole index loading aside).",
    "reconciles": "Change-log replays after another writer moved a metastore's version.",
    "rebuilds": "Metastore states rebuilt from PostgreSQL (change-log gap too large).",
    "dual_owner_drops": "Metastores dropped after seeing another shard's write (dual ownership resolved).",
    "audit_events_recorded": "Audit events queued for the audit log.",
    "audit_events_written": "Audit events written to PostgreSQL.",
    "audit_events_dropped": "Audit events dropped because the buffer was full.",
    "audit_write_failures": "Audit batches that failed to write.",
    "front_fast_answers": "Requests the HTTP front answered itself (the fast path).",
    "front_relayed": "Requests the HTTP front relayed to the app behind it.",
    "supervisor_events": "Supervisor events by kind (shard_killed, shard_unresponsive, metastores_reassigned...).",
    "maintenance_runs": "Table maintenance runs finished by this process, by job and outcome (job:succeeded|failed).",
    "gc_collections": "Garbage collections of a serving process, by generation (0 young, 2 full).",
    "gc_pause_seconds": "Seconds a serving process spent in garbage collections, by generation: every request it "
                        "was answering waited as long.",
}
GAUGES = {
    "cache_entries": "Assets in the in-memory caches.",
    "cache_bytes": "Estimated bytes held by the in-memory caches.",
    "cache_hit_ratio": "Share of cache lookups answered from memory (the caches of the metastores served now).",
    "cache_bound_bytes": "The caches' memory bound (--cache-mb): all the metastores of a shard together.",
    "cache_metastore_bytes": "Estimated bytes each metastore's cache holds (those holding nothing left out).",
    "metastores_warm": "Metastores served here whose state is in memory (the others went cold or were never used).",
    "metastores_owned": "Metastores this server serves now.",
    "metastores_paths_in_db": "Metastores served here whose path index is kept in PostgreSQL (more storage paths "
                              "than --path-index-max): asked path by path, a bounded part in memory.",
    "metastore_version": "The version of each metastore served here, as this server knows it (it rises by one per write).",
    "db_pool_size": "Connections open in the PostgreSQL pool.",
    "db_pool_idle": "Idle connections in the PostgreSQL pool.",
    "db_pool_max": "The PostgreSQL pool's connection limit.",
    "audit_events_pending": "Audit events waiting to be written.",
    "shard_up": "1 for a shard the router counts alive and that answered this scrape, else 0.",
    "shard_metastores": "Metastores the routing table assigns to a shard.",
    "shards": "Shard counts of a Ray cluster: wanted (--shards), possible (what the live eligible nodes allow), live.",
    "gc_longest_pause_seconds": "The longest garbage collection of a serving process since it started, by generation.",
}


class RequestFigures:
    """Requests answered, by (operation, status): plain ints a front adds to per request."""

    __slots__ = ("series",)

    def __init__(self):
        self.series: dict[tuple[str, int], list] = {}

    def observe(self, operation: str, status: int, seconds: float) -> None:
        series = self.series.get((operation, status))
        if series is None:
            series = self.series[(operation, status)] = [0] * _SUM + [0.0]
        series[bisect_left(BUCKETS, seconds)] += 1
        series[_SUM] += seconds

    def snapshot(self) -> dict[tuple[str, int], list]:
        return {key: list(series) for key, series in self.series.items()}


@dataclass
class Figures:
    """One server's figures at a scrape: plain data (crosses Ray from a shard to the router)."""
    requests: dict[tuple[str, int], list] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    # labelled ones: name -> {label value: number}, the label's name in LABELLED
    labelled: dict[str, dict[str, float]] = field(default_factory=dict)


class Observed:
    """What an app's front counts as it answers, for the app's /metrics to read: created with the
    app (`OBSERVED`), filled by the front standing before it (serving/front.py, router/front.py)."""

    def __init__(self):
        self.requests = RequestFigures()
        self.front: dict[str, int] = {}       # the front's own counts: answered itself, relayed


OBSERVED = web.AppKey("shardcat_observed", Observed)

LABELLED = {"supervisor_events": "event", "shard_up": "shard", "shard_metastores": "shard",
            "cache_metastore_bytes": "metastore",
            "metastore_version": "metastore", "shards": "count", "gc_collections": "generation",
            "gc_pause_seconds": "generation", "gc_longest_pause_seconds": "generation", "maintenance_runs": "run"}


class _Snapshots:
    """A prometheus_client collector over snapshots taken for one scrape."""

    def __init__(self, snapshots: list[tuple[dict[str, str], Figures]]):
        self.snapshots = snapshots

    def collect(self):
        label_names = sorted({k for labels, _ in self.snapshots for k in labels})
        total = CounterMetricFamily("shardcat_requests", "API requests answered, by operation and status.",
                                    labels=[*label_names, "operation", "status"])
        latency = HistogramMetricFamily("shardcat_request_duration_seconds",
                                        "Time to answer an API request, by operation and status.",
                                        labels=[*label_names, "operation", "status"])
        for labels, figures in self.snapshots:
            own = [labels.get(n, "") for n in label_names]
            for (operation, status), series in sorted(figures.requests.items()):
                values = [*own, operation, str(status)]
                cumulative, buckets = 0, []
                for bound, count in zip((*BUCKETS, float("inf")), series[:_SUM]):
                    cumulative += count
                    buckets.append((_bound(bound), cumulative))
                total.add_metric(values, cumulative)
                latency.add_metric(values, buckets, series[_SUM])
        yield total
        yield latency
        for table, family in ((COUNTERS, CounterMetricFamily), (GAUGES, GaugeMetricFamily)):
            for name, help_text in table.items():
                extra = [LABELLED[name]] if name in LABELLED else []
                metric = family(f"shardcat_{name}", help_text, labels=[*label_names, *extra])
                seen = False
                for labels, figures in self.snapshots:
                    own = [labels.get(n, "") for n in label_names]
                    if name in LABELLED:
                        for value_label, value in sorted(figures.labelled.get(name, {}).items()):
                            metric.add_metric([*own, value_label], value)
                            seen = True
                    else:
                        plain = figures.counters if table is COUNTERS else figures.gauges
                        if name in plain:
                            metric.add_metric(own, plain[name])
                            seen = True
                if seen:
                    yield metric


def add_audit(figures: Figures, audit_log) -> None:
    """An audit log's counts (governance/audit.py AuditLog)."""
    stats = audit_log.stats
    figures.counters.update(audit_events_recorded=stats["recorded"], audit_events_written=stats["written"],
                            audit_events_dropped=stats["dropped"], audit_write_failures=stats["write_failures"])
    figures.gauges["audit_events_pending"] = len(audit_log.pending)


def add_pool(figures: Figures, pool) -> None:
    """A database pool's figures (asyncpg's Pool)."""
    figures.gauges.update(db_pool_size=pool.get_size(), db_pool_idle=pool.get_idle_size(),
                          db_pool_max=pool.get_max_size())


async def database_answers(pool) -> str | None:
    """None when PostgreSQL answers a query in time; else what is wrong."""
    try:
        await asyncio.wait_for(pool.fetchval("SELECT 1"), READY_TIMEOUT_SECONDS)
    except Exception as e:      # down, restarting, the pool exhausted for too long
        return f"the database does not answer ({type(e).__name__})"
    return None


def probe_answer(problems: list[str]) -> web.Response:
    """A readiness probe's answer: 200 when nothing is wrong, else 503 naming what is."""
    if not problems:
        return web.json_response({"status": "ready"})
    return web.json_response({"error_code": "TEMPORARILY_UNAVAILABLE", "message": "Not ready: " + "; ".join(problems)},
                             status=503)


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def exposition(snapshots: list[tuple[dict[str, str], Figures]]) -> bytes:
    """Prometheus' text format of these snapshots, each with its own labels (the same label names
    for all: a missing one is written empty)."""
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(_Snapshots(snapshots))
    return generate_latest(collectors)


# ---- operation names of concrete paths --------------------------------------------------------

_PREFIXES = sorted({e.prefix for e in registry.ENDPOINTS}, key=len, reverse=True)


def _shape(path: str) -> tuple[str, str, int] | None:
    """(prefix, first segment under it, number of segments) of a path, or None outside every prefix."""
    for prefix in _PREFIXES:
        if path.startswith(prefix) and (len(path) == len(prefix) or path[len(prefix)] == "/"):
            rest = path[len(prefix):]
            segments = rest.split("/")[1:] if rest else []
            return prefix, segments[0] if segments else "", len(segments)
    return None


def _index() -> tuple[dict, dict]:
    exact: dict[tuple[str, str], str] = {}
    patterns: dict[tuple[str, str, str, int], list] = {}
    for e in registry.ENDPOINTS:
        if "{" not in e.path:
            exact.setdefault((e.method, e.full_path), e.action)
            continue
        prefix, first, count = _shape(e.full_path)
        pattern = re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(e.full_path)))
        patterns.setdefault((e.method, prefix, first, count), []).append((pattern, e.action))
    return exact, patterns


_EXACT, _PATTERNS = _index()
_KNOWN: dict[tuple[str, str], str] = {}      # (method, concrete path) -> operation, for the paths seen most


def operation(method: str, path: str) -> str:
    """The registry's operation name of a request (a concrete path, without its query), or
    "other" for a path no endpoint matches (never the raw path: labels stay few)."""
    if method == "HEAD":
        method = "GET"
    found = _EXACT.get((method, path)) or _KNOWN.get((method, path))
    if found is not None:
        return found
    shape = _shape(path)
    found = "other"
    if shape is not None:
        for pattern, action in _PATTERNS.get((method, *shape), ()):
            if pattern.fullmatch(path):
                found = action
                break
    if len(_KNOWN) >= 4096:     # a small, bounded memo: hot paths repeat, names vary without end
        _KNOWN.clear()
    _KNOWN[(method, path)] = found
    return found
