"""The endpoint registry is the one list of endpoints: apps' routes, the resend rule and audit names come from it."""

import pytest
from aiohttp import web

from shardcat.governance.audit import action_of
from shardcat.web import registry
from shardcat.web.kit import routes
from shardcat.web.wire import PREFIX


async def _handler(request):
    return web.Response()


def _handlers(app: str) -> list[web.RouteDef]:
    return [web.route(e.method, e.full_path, _handler) for e in registry.served_by(app)]


def test_an_app_gets_its_endpoints_in_registry_order():
    got = routes(registry.ROUTER, _handlers(registry.ROUTER))
    assert [(r.method, r.path) for r in got] == [(e.method, e.full_path) for e in registry.served_by(registry.ROUTER)]


def test_a_handler_outside_the_registry_stops_the_app():
    extra = web.get(f"{PREFIX}/not-declared", _handler)
    with pytest.raises(ValueError, match="not in the endpoint registry"):
        routes(registry.ROUTER, [*_handlers(registry.ROUTER), extra])


def test_an_endpoint_without_a_handler_stops_the_app():
    with pytest.raises(ValueError, match="no module handles it"):
        routes(registry.SHARD, _handlers(registry.SHARD)[1:])


def test_resend_rule_and_audit_names_come_from_the_registry():
    assert registry.read_only("POST", f"{PREFIX}/resolve")
    assert registry.read_only("GET", f"{PREFIX}/tables/a.b.c")
    assert not registry.read_only("POST", f"{PREFIX}/tables")
    assert not registry.read_only("DELETE", f"{PREFIX}/tables/a.b.c")
    for e in registry.ENDPOINTS:
        route = e.path if e.prefix == PREFIX else e.full_path
        assert action_of(e.method, route) == e.action


def test_each_endpoint_is_declared_once():
    keys = [(e.method, e.full_path) for e in registry.ENDPOINTS]
    assert len(keys) == len(set(keys))
