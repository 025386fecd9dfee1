"""Each path is declared once, in the endpoint registry (web/registry.py); the rest must agree with it.

Three places name a path: the registry (the declaration), the apps' served routes (derived from it
at start-up), and the OpenAPI document (shardcat/openapi/shardcat.yaml, written by hand as the
API's spec). `mismatches` names every path missing from one of them, and an endpoint's audit
action must be its operationId. The apps are only built here, on stand-in stores: no request is served.
"""

from __future__ import annotations

from unittest.mock import MagicMock

from shardcat.governance.audit import action_of
from shardcat.openapi import document
from shardcat.web import registry
from shardcat.web.wire import PREFIX

METHODS = ("get", "put", "post", "delete", "patch", "head")


def documented(doc: dict) -> dict[tuple[str, str], str]:
    """(method, path) -> operationId of every operation in an OpenAPI document."""
    return {(method.upper(), path): op["operationId"]
            for path, item in doc["paths"].items() for method, op in item.items() if method in METHODS}


def served(*apps) -> set[tuple[str, str]]:
    """(method, path template) of every route the apps answer; a GET's HEAD (aiohttp's) and the
    router's forwarding catch-alls aside."""
    routes = set()
    for app in apps:
        for resource in app.router.resources():
            info = resource.get_info()
            path = info.get("path") or info.get("formatter")
            routes |= {(route.method, path) for route in resource if route.method != "*"}
    declared_heads = {(e.method, e.full_path) for e in registry.ENDPOINTS if e.method == "HEAD"}
    return {(m, p) for m, p in routes if not (m == "HEAD" and ("GET", p) in routes and (m, p) not in declared_heads)}


def mismatches(endpoints, routes: set, doc: dict[tuple[str, str], str]) -> list[str]:
    """Each path declared in one place and missing in another, and each action that is not its operationId."""
    declared = {(e.method, e.full_path): e.action for e in endpoints}
    out = [f"{m} {p}: declared, not served" for m, p in sorted(declared.keys() - routes)]
    out += [f"{m} {p}: served, not declared in web/registry.py" for m, p in sorted(routes - declared.keys())]
    out += [f"{m} {p}: declared, not in shardcat.yaml" for m, p in sorted(declared.keys() - doc.keys())]
    out += [f"{m} {p}: in shardcat.yaml, not declared" for m, p in sorted(doc.keys() - declared.keys())]
    out += [f"{m} {p}: action {a}, operationId {doc[m, p]}" for (m, p), a in sorted(declared.items())
            if (m, p) in doc and doc[m, p] != a]
    return out


def _apps():
    """The one-process app (a shard's endpoints and the account's) and a sharded catalog's router."""
    from shardcat.router.forward import make_router_app
    from shardcat.router.routing import RoutingTable
    from shardcat.serving.single import make_app
    from shardcat.shards.shard import Shard
    from shardcat.store.memory import MemoryStore

    stand_in = MagicMock()      # what the account's and router's services would read from
    return make_app(stand_in, Shard(MemoryStore(), "a")), make_router_app(stand_in, RoutingTable(stand_in))


def test_registry_served_routes_and_document_name_the_same_paths():
    routes = served(*_apps())
    assert len(routes) > 290
    assert mismatches(registry.ENDPOINTS, routes, documented(document())) == []


def test_a_path_in_one_place_only_is_named():
    endpoints, routes, doc = list(registry.ENDPOINTS), served(*_apps()), documented(document())
    extra = registry.E(registry.SHARD, "GET", "/example/{name}", "getExample")
    assert mismatches([*endpoints, extra], routes, doc) == [
        f"GET {PREFIX}/example/{{name}}: declared, not served", f"GET {PREFIX}/example/{{name}}: declared, not in shardcat.yaml"]
    assert mismatches(endpoints, routes | {("GET", "/example")}, doc) == [
        "GET /example: served, not declared in web/registry.py"]
    assert mismatches(endpoints, routes, {**doc, ("GET", "/example"): "getExample"}) == [
        "GET /example: in shardcat.yaml, not declared"]
    doc.pop(("GET", f"{PREFIX}/tables/{{full_name}}"))
    assert mismatches(endpoints, routes, doc) == [f"GET {PREFIX}/tables/{{full_name}}: declared, not in shardcat.yaml"]
    doc[("GET", f"{PREFIX}/tables/{{full_name}}")] = "readTable"
    assert mismatches(endpoints, routes, doc) == [f"GET {PREFIX}/tables/{{full_name}}: action getTable, operationId readTable"]


def test_audit_actions_are_the_operation_ids():
    """What the audit log records for each endpoint (governance/audit.py's own lookup) is its
    operationId, and operationIds name one operation each (readers filter on them)."""
    doc = documented(document())
    assert len(set(doc.values())) == len(doc)
    for e in registry.ENDPOINTS:
        route = e.path if e.prefix == PREFIX else e.full_path
        assert action_of(e.method, route) == doc[e.method, e.full_path], f"{e.method} {e.full_path}"
