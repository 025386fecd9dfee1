"""The served OpenAPI document covers every route shardcat answers, and is served without a token.

Routes are read from the aiohttp apps themselves (the one-process app `shardcat serve` runs, and
the router app of a sharded catalog), so a new endpoint fails here until the document has it.
"""

from __future__ import annotations

import yaml
from aiohttp import web
from openapi_spec_validator import validate

from shardcat.openapi import document
from shardcat.router.forward import make_router_app
from shardcat.router.routing import RoutingTable

METHODS = ("get", "put", "post", "delete", "patch")


def app_routes(app) -> set[tuple[str, str]]:
    """(method, path template) of every route an aiohttp app answers, HEAD (aiohttp's, for each GET) aside."""
    out = set()
    for resource in app.router.resources():
        info = resource.get_info()
        path = info.get("path") or info.get("formatter")
        for route in resource:
            if route.method == "*":
                assert path.endswith("{tail}"), f"an unexpected catch-all route {path}"
                continue            # the router's forwarding: it answers the shard app's routes
            if route.method != "HEAD":
                out.add((route.method.lower(), path))
    return out


def documented(doc: dict) -> set[tuple[str, str]]:
    return {(method, path) for path, item in doc["paths"].items() for method in item if method in METHODS}


def test_document_is_valid_openapi():
    validate(document())


async def test_every_route_of_the_one_process_app_is_documented(server):
    routes = app_routes(server.runner.app)
    assert len(routes) > 100        # the app's routes were found
    missing = sorted(routes - documented(document()))
    assert not missing, f"routes missing from shardcat/openapi/shardcat.yaml: {missing}"


async def test_every_route_of_the_router_app_is_documented(server):
    routes = app_routes(make_router_app(server.store, RoutingTable(server.store)))
    missing = sorted(routes - documented(document()))
    assert not missing, f"routes missing from shardcat/openapi/shardcat.yaml: {missing}"


async def test_nothing_documented_that_no_app_answers(server):
    answered = app_routes(server.runner.app) | app_routes(make_router_app(server.store, RoutingTable(server.store)))
    extra = sorted(documented(document()) - answered)
    assert not extra, f"documented but answered by no app: {extra}"


async def test_the_document_is_served_as_json_and_yaml_without_a_token(server, http):
    async with http.get(server.url + "/api/2.1/unity-catalog/openapi.json") as r:
        assert r.status == 200 and r.content_type == "application/json"
        assert await r.json() == document()
    async with http.get(server.url + "/api/2.1/unity-catalog/openapi.yaml") as r:
        assert r.status == 200
        assert yaml.safe_load(await r.read()) == document()


async def test_a_sharded_catalogs_router_serves_it_too(server, http):
    runner = web.AppRunner(make_router_app(server.store, RoutingTable(server.store)))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]
        async with http.get(f"http://127.0.0.1:{port}/api/2.1/unity-catalog/openapi.json") as r:
            assert r.status == 200 and await r.json() == document()
    finally:
        await runner.cleanup()
