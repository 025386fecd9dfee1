"""The router's metrics and probes. `/metrics` shows the router's own figures (requests through its
front, audit, database pool, shard liveness, the routing table, the supervisor's events) and, in
the same scrape, every live shard's (asked over Ray), each labelled `server` (router, shard-0...),
so one scrape target covers the cluster. `/readyz`: ready when PostgreSQL answers and every
metastore assigned to a shard has a live owner (and some shard is live to take new ones)."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from ..governance.audit import AuditLog
from ..store.db import Store
from ..web.kit import healthz
from ..web.routes import Handler
from ..web.metrics import (CONTENT_TYPE, OBSERVED, Figures, Observed, add_audit, add_pool, database_answers,
                           exposition, probe_answer)
from .routing import RoutingTable

log = logging.getLogger(__name__)

SHARD_FIGURES_TIMEOUT = 2.0      # a shard that cannot say its figures in this long counts as down


def router_figures(store: Store, routing: RoutingTable, audit_log: AuditLog, observed: Observed,
                   supervisor_events: dict[str, int]) -> Figures:
    figures = Figures(requests=observed.requests.snapshot())
    add_audit(figures, audit_log)
    add_pool(figures, store.pool)
    figures.counters["front_fast_answers"] = observed.front.get("fast", 0)
    figures.counters["front_relayed"] = observed.front.get("through_app", 0)
    assigned = {name: 0 for name in routing.shards}
    for shard in routing.owner.values():
        assigned[shard] = assigned.get(shard, 0) + 1
    figures.labelled["shard_metastores"] = {name: n for name, n in assigned.items()
                                            if n or routing.shards[name].alive}
    figures.labelled["supervisor_events"] = dict(supervisor_events)
    placement = routing.placement
    if placement:       # the supervisor's goal beside what it has: a shortfall shows here
        figures.labelled["shards"] = {"wanted": placement["shards_wanted"], "possible": placement["shards_possible"],
                                      "live": placement["shards_live"]}
    return figures


async def _shard_figures(handle) -> Figures | None:
    try:
        return await asyncio.wait_for(handle.actor.figures.remote(), SHARD_FIGURES_TIMEOUT)
    except Exception as e:      # dead, hung, or restarting: it shows as down
        log.info("metrics: no figures from %s (%s)", handle.name, type(e).__name__)
        return None


def readiness_problems(routing: RoutingTable) -> list[str]:
    """What keeps the router from serving every metastore now."""
    live = {h.name for h in routing.live()}
    if not live:
        return ["no shard is live"]
    # A metastore whose recorded owner this router never started (an earlier run's shard) is
    # assigned a live one on its first request; one whose owner died here waits for the failover.
    orphans = sum(1 for shard in routing.owner.values() if shard in routing.shards and shard not in live)
    return [f"{orphans} metastore(s) assigned to a shard that is not live"] if orphans else []


def probe_handlers(store: Store, routing: RoutingTable, audit_log: AuditLog,
                   supervisor_events: dict[str, int]) -> dict[str, Handler]:
    """/livez, /readyz and /metrics of the router app."""

    async def ready(request):
        problem = await database_answers(store.pool)
        return probe_answer(([problem] if problem else []) + readiness_problems(routing))

    async def metrics(request):
        own = router_figures(store, routing, audit_log, request.app[OBSERVED], supervisor_events)
        handles = [h for h in routing.shards.values() if h.alive]
        answers = await asyncio.gather(*(_shard_figures(h) for h in handles))
        up = {name: 0 for name in routing.shards}
        snapshots = [({"server": "router"}, own)]
        for handle, figures in zip(handles, answers):
            if figures is not None:
                up[handle.name] = 1
                snapshots.append(({"server": handle.name}, figures))
        own.labelled["shard_up"] = up
        return web.Response(body=exposition(snapshots), headers={"Content-Type": CONTENT_TYPE})

    return {"livez": healthz, "readyz": ready, "metrics": metrics}
