"""The endpoint registry is the one list of endpoints: apps' routes, the resend rule and audit names come from it."""

import pytest
from aiohttp import web

from shardcat.governance.audit import action_of
from shardcat.web import registry
from shardcat.web.routes import routes
from shardcat.web.wire import PREFIX


async def _handler(request):
    return web.Response()


def _handlers(app: str, *, leave_out: str | None = None) -> dict:
    """A stand-in handler for each of an app's endpoints, in tables by module as the apps give them."""
    out = {}
    for e in registry.served_by(app):
        if e.action != leave_out:
            out.setdefault(e.module, {})[e.handler or e.action] = _handler
    return out


def test_an_app_gets_its_endpoints_in_registry_order():
    got = routes(registry.ROUTER, _handlers(registry.ROUTER))
    assert [(r.method, r.path) for r in got] == [(e.method, e.full_path) for e in registry.served_by(registry.ROUTER)]


def test_a_handler_outside_the_registry_stops_the_app():
    handlers = _handlers(registry.ROUTER)
    handlers[None]["getNotDeclared"] = _handler
    with pytest.raises(ValueError, match="getNotDeclared that is not in the endpoint registry"):
        routes(registry.ROUTER, handlers)


def test_an_endpoint_without_a_handler_stops_the_app():
    with pytest.raises(ValueError, match="no module handles it"):
        routes(registry.SHARD, _handlers(registry.SHARD, leave_out="getTable"))


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


# ---- which module serves an endpoint: the registry's word, not the app's ----------------------------


def _shard_app():
    from shardcat.serving.app import make_shard_app
    from shardcat.shards.shard import Shard
    from shardcat.store.memory import MemoryStore
    from shardcat.governance.authentication import Authenticator

    store = MemoryStore()
    return make_shard_app(Shard(store, "a"), Authenticator(store))


def _app_handlers(app: web.Application) -> dict[tuple[str, str], list]:
    """(method, path template) -> the handlers the app has for it (a GET's HEAD too, by aiohttp)."""
    out = {}
    for resource in app.router.resources():
        info = resource.get_info()
        for route in resource:
            out.setdefault((route.method, info.get("path") or info.get("formatter")), []).append(route.handler)
    return out


def test_every_shard_endpoint_is_answered_by_the_module_the_registry_names():
    from importlib import import_module

    from shardcat.serving.app import SERVING

    app = _shard_app()
    served = _app_handlers(app)
    tables = {module: import_module(f"shardcat.{module}").shard_handlers(app[SERVING])
              for module in registry.modules(registry.SHARD)}
    made = {}       # (method, path) -> (module, handler) of each named module's shard_handlers
    for e in registry.served_by(registry.SHARD):
        if e.module in tables:
            made[(e.method, e.full_path)] = (e.module, tables[e.module][e.handler or e.action])
    shard_endpoints = [e for e in registry.ENDPOINTS if e.app == registry.SHARD]
    assert len(shard_endpoints) > 250 and len(registry.modules(registry.SHARD)) > 20
    for e in shard_endpoints:
        key = (e.method, e.full_path)
        assert e.module is not None, f"{e.method} {e.full_path}: the registry names no module for it"
        assert made.get(key, (None,))[0] == e.module, f"{e.method} {e.full_path}: not made by {e.module}"
        assert key in served, f"{e.method} {e.full_path}: the shard app does not serve it"
        # the app's handler is the one that module made (same code), not one from elsewhere
        handlers = [inner for h in served[key] for inner in (h, *getattr(h, "answers", ()))]
        assert made[key][1].__code__ in [h.__code__ for h in handlers], \
            f"{e.method} {e.full_path}: served by another handler than {e.module}'s"


def test_a_new_module_is_served_from_its_registry_lines_alone(monkeypatch):
    """A module the app has never heard of: its registry group is all it takes to be served."""
    import sys
    import types

    async def hello(request):
        return web.json_response({"hello": request.match_info["name"]})

    module = types.ModuleType("shardcat.catalog.example_protocol")
    module.shard_handlers = lambda serving: {"getExample": hello}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(registry, "ENDPOINTS", registry.ENDPOINTS + registry.served_in(
        "catalog.example_protocol", registry.E(registry.SHARD, "GET", "/example/{name}", "getExample")))
    assert _app_handlers(_shard_app())[("GET", f"{PREFIX}/example/{{name}}")] == [hello]


def test_a_registered_endpoint_its_module_does_not_make_stops_the_app(monkeypatch):
    monkeypatch.setattr(registry, "ENDPOINTS", registry.ENDPOINTS + registry.served_in(
        "catalog.tree.functions", registry.E(registry.SHARD, "GET", "/functions/{name}/example", "getExample")))
    with pytest.raises(ValueError, match="no module handles it"):
        _shard_app()
