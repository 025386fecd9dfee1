"""Query parameters and path segments that no parameter may hold (issue 28, class 6): NUL,
percent-escapes that are not UTF-8, lone surrogates (text PostgreSQL refuses or that is not text). Every endpoint refuses
them with a 400 in Unity Catalog error JSON before anything reaches the database; JSON bodies
with "\\u0000" or a lone surrogate likewise.

The endpoints are enumerated twice: from the served app's own routes (every route, every method,
a query parameter added), and by hand, with the query parameters each handler actually reads.
Requests go over raw HTTP too, so the fronts (router/front.py, shards/front.py) are covered.
"""

from __future__ import annotations

import asyncio
import re
import types

import pytest

from shardcat.governance.principals import SCIM_PREFIX
from shardcat.web.wire import CONTROL_PREFIX
from shardcat.serving.single import make_app
from shardcat.router.forward import make_router_app
from shardcat.shards.shard import Shard
from tests.conftest import PREFIX, serving

SCIM = "!" + SCIM_PREFIX                       # "!": an absolute path, not under the catalog API's prefix
TOKENS = "!" + CONTROL_PREFIX + "/auth/tokens"


def target(path: str) -> str:
    return path[1:] if path.startswith("!") else PREFIX + path

cluster = serving("input-text", shards=1)

# Spellings of text no parameter may hold, as they travel in a URL.
BAD = [
    pytest.param("%00", id="nul"),
    pytest.param("a%00b", id="nul-inside"),
    pytest.param("%FF", id="not-utf8"),
    pytest.param("%ED%A0%80", id="lone-surrogate-utf8"),
]

# Every endpoint that reads a query parameter, with the parameters its handler reads.
QUERY_ENDPOINTS = [
    ("GET", "/shardcat/search", ["query", "securable_types", "max_results", "page_token"]),
    ("GET", "/shardcat/audit", ["principal", "action", "securable", "securable_type", "allowed", "since",
                                "until", "metastore_id", "request_id", "max_results", "page_token"]),
    ("GET", SCIM + "/Users", ["filter", "startIndex", "count"]),
    ("GET", SCIM + "/Groups", ["filter", "startIndex", "count"]),
    ("GET", SCIM + "/ServicePrincipals", ["filter", "startIndex", "count"]),
    ("GET", TOKENS, ["all", "principal"]),
    ("GET", "/catalogs", ["max_results", "page_token"]),
    ("GET", "/schemas", ["catalog_name", "max_results", "page_token"]),
    ("GET", "/tables", ["catalog_name", "schema_name", "max_results", "page_token"]),
    ("GET", "/volumes", ["catalog_name", "schema_name", "max_results", "page_token"]),
    ("GET", "/functions", ["catalog_name", "schema_name", "max_results", "page_token"]),
    ("GET", "/models", ["catalog_name", "schema_name", "max_results", "page_token"]),
    ("GET", "/models/main.s.m/versions", ["max_results", "page_token"]),
    ("GET", "/credentials", ["purpose", "max_results", "page_token"]),
    ("GET", "/storage-credentials", ["max_results", "page_token"]),
    ("GET", "/external-locations", ["max_results", "page_token"]),
    ("GET", "/shares", ["max_results", "page_token"]),
    ("GET", "/recipients", ["max_results", "page_token"]),
    ("GET", "/files", ["url", "max_results", "page_token"]),
    ("GET", "/permissions/catalog/main", ["principal"]),
    ("GET", "/effective-permissions/catalog/main", ["principal"]),
    ("GET", "/shardcat/lineage", ["name", "securable_type", "direction", "depth"]),
    ("GET", "/shardcat/changes", ["since_version", "max_results"]),
    ("GET", "/delta/preview/commits", ["table_id", "table_uri", "start_version", "end_version"]),
    ("DELETE", "/catalogs/nope", ["force"]),
    ("DELETE", "/models/main.s.nope", ["force"]),
    ("PUT", "/workspaces/1/metastore", ["metastore_id"]),
]
QUERY_CASES = [pytest.param(m, p, q, id=f"{m} {p} {q}") for m, p, q_list in QUERY_ENDPOINTS for q in q_list]


def _check_refused(status: int, body, what) -> None:
    """A 400 naming the bad text: in Unity Catalog's error shape, Iceberg's ErrorModel under an Iceberg
    base, or the UC Delta API's error under /delta/v1 (each names the exception its own way)."""
    assert status == 400, (what, status, body)
    assert isinstance(body, dict), (what, body)
    if "error" in body:
        error = body["error"]
        expected = "InvalidParameterValueException" if "/delta/v1/" in str(what) else "BadRequestException"
        assert error.get("type") == expected and error.get("code") == 400, (what, body)
    else:
        error = body
        assert body.get("error_code") == "INVALID_PARAMETER_VALUE", (what, body)
    assert re.search(r"NUL|surrogate|UTF-8", error["message"]), (what, body)


async def _raw(url: str, token: str, method: str, target: str, body: bytes = b"") -> tuple[int, dict | None]:
    """One request on a raw socket, the target sent byte for byte as given (no client re-encoding)."""
    import json
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    writer.write(head.encode("latin-1") + body)
    raw = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    status = int(raw.split(b" ", 2)[1])
    payload = raw.partition(b"\r\n\r\n")[2]
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, None


@pytest.fixture(scope="module")
async def world(server, http, tmp_path_factory):
    from tests.conftest import new_workspace
    ws = await new_workspace(server, http, tmp_path_factory.mktemp("input-text"))
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"}),
                       ("/models", {"name": "m", "catalog_name": "main", "schema_name": "s"})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer
    return ws


@pytest.mark.parametrize("method,path,param", QUERY_CASES)
@pytest.mark.parametrize("bad", BAD)
async def test_every_query_parameter_refuses_bad_text(world, method, path, param, bad):
    status, body = await _raw(world.url, world.token, method, f"{target(path)}?{param}={bad}")
    _check_refused(status, body, (method, path, param, bad))


def _routes() -> list[tuple[str, str]]:
    """(method, path with every path parameter filled in) of every API route the one-process app
    serves, and the router app's own, read from the apps' route tables (built over a stand-in
    store: building an app does no I/O)."""
    store = types.SimpleNamespace(principals=None, pool=None, secrets=None)
    apps = [make_app(store, Shard(store)), make_router_app(store, None)]
    out = set()
    for app in apps:
        for resource in app.router.resources():
            info = resource.get_info()
            shape = info.get("formatter") or info.get("path") or ""
            if not shape.startswith((PREFIX, CONTROL_PREFIX)) or shape == PREFIX + "/{tail}":
                continue
            path = re.sub(r"\{[^}]*\}", "x", shape)
            out |= {(route.method, path) for route in resource if route.method != "HEAD"}
    return sorted(out)


ROUTES = _routes()
assert len(ROUTES) > 60, ROUTES       # the enumeration found the API


def _router_only() -> set[tuple[str, str]]:
    """The routes only a sharded catalog's router serves (the one-process app answers 404 for them)."""
    store = types.SimpleNamespace(principals=None, pool=None, secrets=None)
    single = {(r.method, re.sub(r"\{[^}]*\}", "x", res.get_info().get("formatter") or res.get_info().get("path") or ""))
              for res in make_app(store, Shard(store)).router.resources() for r in res}
    return {route for route in ROUTES if route not in single}


ROUTER_ONLY = _router_only()


@pytest.mark.parametrize("method,path", ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_every_route_refuses_bad_text_in_the_query(world, method, path):
    """From the apps' own tables of routes: every one, with a NUL in a query parameter."""
    status, body = await _raw(world.url, world.token, method, f"{path}?query=%00&x=1")
    _check_refused(status, body, (method, path))


PATH_ROUTES = [(m, p) for m, p in ROUTES if "/x" in p]


@pytest.mark.parametrize("bad", ["a%00", "%FF", "%ED%B0%80"], ids=["nul", "not-utf8", "lone-surrogate"])
@pytest.mark.parametrize("method,path", PATH_ROUTES, ids=[f"{m} {p}" for m, p in PATH_ROUTES])
async def test_every_route_refuses_bad_text_in_a_path_segment(world, cluster, http, tmp_path, method, path, bad):
    """Every route with a path parameter, that parameter holding a NUL or an invalid escape (the
    router's own routes asked of a sharded catalog's router, the rest of the one-process one)."""
    target = path.replace("/x", f"/{bad}", 1)
    if (method, path) in ROUTER_ONLY:
        from tests.conftest import new_workspace
        ws = await new_workspace(cluster, http, tmp_path)
        status, body = await _raw(ws.url, ws.token, method, target)
    else:
        status, body = await _raw(world.url, world.token, method, target)
    _check_refused(status, body, (method, target))


@pytest.mark.parametrize("bad", BAD)
async def test_the_router_refuses_bad_text_too(cluster, http, tmp_path, bad):
    """The sharded deployment: router front, router app, then shard."""
    from tests.conftest import new_workspace
    ws = await new_workspace(cluster, http, tmp_path)
    for target in (f"{PREFIX}/catalogs?page_token={bad}", f"{PREFIX}/shardcat/search?query={bad}",
                   f"{TOKENS[1:]}?principal={bad}", f"{PREFIX}/catalogs/{bad}",
                   f"{PREFIX}/shardcat/audit?principal={bad}"):
        for _ in range(2):       # the second time the caller is cached: the fast path
            status, body = await _raw(ws.url, ws.token, "GET", target)
            _check_refused(status, body, target)


@pytest.mark.parametrize("text", ["\u0000", "a\u0000", "\ud800", "x\udfff"])
@pytest.mark.parametrize("method,path,field", [
    ("POST", "/catalogs", "name"), ("POST", "/catalogs", "comment"), ("PATCH", "/catalogs/main", "comment"),
    ("PATCH", "/catalogs/main", "owner"), ("POST", "/schemas", "comment"),
    ("POST", "/credentials", "name"), ("POST", SCIM + "/Users", "userName"), ("POST", TOKENS, "comment"),
    ("PATCH", "/permissions/catalog/main", "principal"),
])
async def test_bodies_refuse_nul_and_lone_surrogates(world, method, path, field, text):
    import json
    body = {"name": "c_new", "catalog_name": "main", "comment": "c", "userName": "u@example.com",
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"]}
    body[field] = text
    if field == "principal":
        body = {"changes": [{"principal": text, "add": ["USE_CATALOG"]}]}
    # json.dumps escapes both as \u sequences (ensure_ascii), the only way a JSON body carries them
    status, answer = await _raw(world.url, world.token, method, target(path), json.dumps(body).encode())
    _check_refused(status, answer, (method, path, field))
