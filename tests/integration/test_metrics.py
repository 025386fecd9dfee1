"""/metrics, /livez and /readyz (issue 35): scraped after a known workload, the counters match the
requests made; the probes answer without a token; on a two-shard cluster the router's scrape shows
each shard's figures and liveness, and a killed shard shows in the supervisor's counters."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from shardcat.router.metrics import readiness_problems
from shardcat.serving.single import make_app
from shardcat.shards.shard import Shard
from shardcat.store.db import Store
from shardcat.router.routing import RoutingTable, ShardHandle
from shardcat.web.request_log import LOGGER
from shardcat.web.metrics import BUCKETS, COUNTERS, GAUGES, LABELLED, Figures, exposition, operation
from tests.conftest import new_workspace, serving

cluster = serving("metrics", shards=2)


async def scrape(http, url: str) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of one scrape."""
    async with http.get(url + "/metrics") as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = await r.text()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_operation_names_come_from_the_registry():
    assert operation("GET", "/api/2.1/unity-catalog/tables/a.b.c") == "getTable"
    assert operation("HEAD", "/api/2.1/unity-catalog/tables/a.b.c") == "getTable"
    assert operation("GET", "/api/2.1/unity-catalog/tables") == "listTables"
    assert operation("POST", "/api/2.1/unity-catalog/models/versions") == "createModelVersion"
    assert operation("GET", "/api/2.1/unity-catalog/models/a.b.m/versions/3") == "getModelVersion"
    assert operation("PATCH", "/api/2.1/unity-catalog/permissions/table/a.b.c") == "update"
    assert operation("POST", "/api/1.0/unity-control/auth/tokens") == "createToken"
    assert operation("GET", "/metrics") == "metrics"
    assert operation("GET", "/api/2.1/unity-catalog/no-such/thing") == "other"
    assert operation("GET", "/wp-admin/x") == "other"


async def test_counters_match_a_known_workload(ws, server, http):
    before = await scrape(http, server.url)
    status, _ = await ws.call("POST", "/catalogs", json={"name": "m"})
    assert status == 200
    for _ in range(5):
        status, _ = await ws.call("GET", "/catalogs/m")
        assert status == 200
    for _ in range(2):
        status, _ = await ws.call("GET", "/catalogs/none_such")
        assert status == 404
    after = await scrape(http, server.url)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("shardcat_requests_total", operation="getCatalog", status="200") == 5
    assert delta("shardcat_requests_total", operation="getCatalog", status="404") == 2
    assert delta("shardcat_requests_total", operation="createCatalog", status="200") == 1
    # the histogram counts the same requests, each in some bucket
    assert delta("shardcat_request_duration_seconds_count", operation="getCatalog", status="200") == 5
    assert delta("shardcat_request_duration_seconds_bucket", operation="getCatalog", status="200", le="+Inf") == 5
    assert delta("shardcat_writes_total") == 1
    # one write, nothing queued beside it: group commit ran it alone
    assert delta("shardcat_lone_writes_total") == 1 and delta("shardcat_write_groups_total") == 0
    assert delta("shardcat_metastore_version", metastore=ws.metastore_id) == 1     # the one write
    assert delta("shardcat_cache_hits_total") >= 4        # the gets after the first are cached
    assert delta("shardcat_front_fast_answers_total") >= 5
    assert value(after, "shardcat_db_pool_max") >= 1
    # one audit event per request; the scrapes themselves are not audited
    assert delta("shardcat_audit_events_recorded_total") == 8
    assert value(after, "shardcat_audit_events_dropped_total") == 0
    assert delta("shardcat_requests_total", operation="metrics", status="200") == 1


async def test_probes_need_no_token(server, http):
    for path, body in (("/livez", {"status": "ok"}), ("/readyz", {"status": "ready"}), ("/healthz", {"status": "ok"})):
        async with http.get(server.url + path) as r:
            assert r.status == 200, path
            assert await r.json() == body


def test_readiness_needs_a_live_owner_for_every_metastore():
    routing = RoutingTable(store=None)
    assert readiness_problems(routing) == ["no shard is live"]
    routing.add_shard(ShardHandle("shard-0", "http://127.0.0.1:1", None))
    routing.add_shard(ShardHandle("shard-1", "http://127.0.0.1:2", None))
    # m3's owner is an earlier run's shard: its first request assigns it a live one
    routing.owner = {"m1": "shard-0", "m2": "shard-1", "m3": "shard-7.2"}
    assert readiness_problems(routing) == []
    routing.shards["shard-1"].alive = False
    assert readiness_problems(routing) == ["1 metastore(s) assigned to a shard that is not live"]


async def test_router_scrape_shows_shards_and_a_kill(cluster, http, tmp_path):
    ws = await new_workspace(cluster, http, tmp_path)
    status, _ = await ws.call("POST", "/catalogs", json={"name": "m"})
    assert status == 200
    for _ in range(3):
        status, _ = await ws.call("GET", "/catalogs/m")
        assert status == 200
    samples = await scrape(http, cluster.url)
    assert value(samples, "shardcat_shard_up", server="router", shard="shard-0") == 1
    assert value(samples, "shardcat_shard_up", server="router", shard="shard-1") == 1
    owner = cluster.cluster.routing.owner[ws.metastore_id]
    # the router counted the requests at its front; the owner shard counted what reached it
    assert value(samples, "shardcat_requests_total", server="router", operation="getCatalog", status="200") >= 3
    assert value(samples, "shardcat_requests_total", server=owner, operation="getCatalog", status="200") >= 3
    assert value(samples, "shardcat_writes_total", server=owner) >= 1
    assert value(samples, "shardcat_metastores_owned", server=owner) >= 1
    # a shard's process times its garbage collections (serving/gc_policy.py), each generation a series
    for name in ("shardcat_gc_collections_total", "shardcat_gc_pause_seconds_total", "shardcat_gc_longest_pause_seconds"):
        for generation in "012":
            assert (name, tuple(sorted({"server": owner, "generation": generation}.items()))) in samples, name
    # the supervisor's shard count goal beside what it has (a shortfall would show: possible < wanted)
    assert value(samples, "shardcat_shards", server="router", count="wanted") == 2
    assert value(samples, "shardcat_shards", server="router", count="possible") == 2
    assert value(samples, "shardcat_shards", server="router", count="live") == 2
    async with http.get(cluster.url + "/readyz") as r:
        assert r.status == 200, await r.text()
    async with http.get(cluster.url + "/") as r:        # the router serves the explorer's page too
        assert r.status == 200 and r.content_type == "text/html"

    victim = "shard-1" if owner == "shard-0" else "shard-0"
    await cluster.cluster.kill(victim)
    for _ in range(200):      # until the supervisor has noticed and moved the victim's metastores
        samples = await scrape(http, cluster.url)
        if value(samples, "shardcat_supervisor_events_total", server="router", event="metastores_reassigned") >= 1:
            break
        await asyncio.sleep(0.1)
    assert value(samples, "shardcat_supervisor_events_total", server="router", event="shard_killed") == 1
    assert value(samples, "shardcat_supervisor_events_total", server="router", event="metastores_reassigned") >= 1
    assert value(samples, "shardcat_shard_up", server="router", shard=victim) == 0


def test_the_dashboard_names_only_metrics_that_exist():
    """ray-config/grafana-shardcat.json asks for metrics shardcat exposes (a rename breaks it here)."""
    figures = Figures(requests={("getTable", 200): [1] + [0] * len(BUCKETS) + [0.001]},
                      counters={k: 1 for k in COUNTERS if k not in LABELLED},
                      gauges={k: 1 for k in GAUGES if k not in LABELLED},
                      labelled={k: {"x": 1} for k in LABELLED})
    exposed = set(re.findall(r"^(shardcat_\w+)", exposition([({"server": "router"}, figures)]).decode(), re.M))
    dashboard = Path(__file__).resolve().parents[2] / "ray-config" / "grafana-shardcat.json"
    wanted = set(re.findall(r"shardcat_\w+", json.dumps([p["targets"] for p in json.loads(dashboard.read_text())["panels"]])))
    assert wanted and wanted <= exposed, wanted - exposed


async def test_request_log_lines_say_who_did_what_and_no_secret(ws, server, http, caplog):
    front = server.front.front
    caplog.set_level(logging.INFO, logger=LOGGER)
    front.request_log.enabled = True        # what `shardcat serve --request-log` sets at start
    try:
        status, _ = await ws.call("POST", "/catalogs", json={"name": "logged", "comment": "x"})
        assert status == 200
        status, _ = await ws.call("GET", "/catalogs/logged")        # answered on the fast path
        assert status == 200
        status, _ = await ws.call("GET", "/catalogs/absent", params={"page_token": "secret-ish"})
        assert status == 404
    finally:
        front.request_log.enabled = False
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert [(x["operation"], x["status"]) for x in lines] == [("createCatalog", 200), ("getCatalog", 200),
                                                             ("getCatalog", 404)]
    for line in lines:
        assert line["principal"] == "admin" and line["metastore"] == ws.metastore_id
        assert line["request_id"] and line["latency_ms"] >= 0 and line["server"] == "shard-0"
        assert ws.token not in json.dumps(line) and "secret-ish" not in json.dumps(line)


async def test_not_ready_when_the_database_does_not_answer(pg_url):
    """/readyz of an app whose PostgreSQL is gone answers 503 naming it; /livez still answers."""
    store = await Store.open(pg_url, min_size=1, max_size=1)
    app = make_app(store, Shard(store))
    async with TestServer(app) as test_server, TestClient(test_server) as client:
        r = await client.get("/readyz")
        assert r.status == 200, await r.text()
        await store.pool.close()                # the database stops answering this server
        r = await client.get("/readyz")
        body = await r.json()
        assert r.status == 503 and body["error_code"] == "TEMPORARILY_UNAVAILABLE"
        assert "database does not answer" in body["message"]
        r = await client.get("/livez")
        assert r.status == 200
