"""The Iceberg REST catalog as its spec and pyiceberg expect it (issue 46): every error under an Iceberg base in
Iceberg's ErrorModel and under /delta/v1 in the UC Delta API's (unknown routes, tokens, methods, query strings
and server errors included), and the answers the spec names where shardcat answered otherwise."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shardcat.web.middleware import error_middleware

ICE = "/iceberg/v1"
P = f"{ICE}/catalogs/ice"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
DELTA_TYPES = {  # api/delta.yaml's DeltaErrorType
    "BadRequestException", "InvalidParameterValueException", "UnsupportedTableFormatException",
    "NotAuthorizedException", "PermissionDeniedException", "NotFoundException", "NoSuchCatalogException",
    "NoSuchSchemaException", "NoSuchTableException", "AlreadyExistsException", "CommitVersionConflictException",
    "UpdateRequirementConflictException", "ResourceExhaustedException", "TooManyRequestsException",
    "CommitStateUnknownException", "InternalServerErrorException", "NotImplementedException"}


@pytest.fixture
async def ice(ws):
    for path, body in (("/catalogs", {"name": "ice"}), ("/schemas", {"name": "s", "catalog_name": "ice"})):
        status, out = await ws.call("POST", path, json=body)
        assert status == 200, out
    return ws


def error_model(status: int, body, kind: str | None = None, delta: bool = False) -> dict:
    """The answer is `{"error": {"message", "type", "code"}}` and nothing else, `code` its status."""
    assert isinstance(body, dict) and set(body) == {"error"}, (status, body)
    error = body["error"]
    assert set(error) == {"message", "type", "code"} and error["code"] == status and error["message"], body
    if kind is not None:
        assert error["type"] == kind, body
    if delta:
        assert error["type"] in DELTA_TYPES, body
    return error


async def raw(ws, method: str, path: str, *, token: str | None = None, **kw) -> tuple[int, object]:
    headers = {"Authorization": f"Bearer {token if token is not None else ws.token}"}
    async with ws.session.request(method, ws.api + path, headers=headers, **kw) as r:
        return r.status, await r.json(content_type=None)


async def test_refusals_before_a_handler_are_in_each_protocols_error_model(ice):
    delta = "/delta/v1/catalogs/ice/schemas/s/tables"
    for path, unknown, is_delta in ((f"{P}/namespaces", f"{P}/nothing-here", False),
                                    (f"{ICE}/config", f"{ICE}/nothing/here", False), (delta, f"{delta}/t/x/y", True)):
        status, body = await raw(ice, "GET", path, token="not-a-token")
        assert status == 401
        error_model(status, body, "NotAuthorizedException", delta=is_delta)
        status, body = await raw(ice, "GET", unknown)
        assert status == 404
        error_model(status, body, "NotFoundException", delta=is_delta)
        status, body = await raw(ice, "PATCH", path)
        assert status == 405
        error_model(status, body, delta=is_delta)
        status, body = await raw(ice, "GET", path + "?x=%ff")           # not UTF-8: refused before any handler
        assert status == 400
        error_model(status, body, delta=is_delta)
    status, body = await raw(ice, "GET", "/delta/v1/no/such/route")
    error_model(status, body, "NotFoundException", delta=True)
    status, body = await raw(ice, "GET", f"{P}/namespaces", params={"pageSize": "abc"})
    assert status == 400
    error_model(status, body, "BadRequestException")
    status, body = await raw(ice, "GET", delta, params={"max_results": "abc"})
    assert status == 400
    error_model(status, body, "InvalidParameterValueException", delta=True)
    # Unity Catalog's own API keeps its shape.
    status, body = await raw(ice, "GET", "/no/such/route")
    assert status == 404 and body["error_code"] == "ENDPOINT_NOT_FOUND", body


async def test_a_server_error_is_in_each_protocols_error_model():
    """A handler failing unexpectedly answers 500 in the protocol's model (and Unity Catalog's elsewhere)."""
    async def broken(request):
        raise RuntimeError("a bug")

    app = web.Application(middlewares=[error_middleware(1 << 20)])
    for path in ("/api/2.1/unity-catalog/iceberg/v1/config", "/api/2.1/unity-catalog/iceberg-rest/v1/x",
                 "/api/2.1/unity-catalog/delta/v1/config", "/api/2.1/unity-catalog/catalogs"):
        app.router.add_get(path, broken)
    async with TestClient(TestServer(app)) as client:
        for path, kind in (("/api/2.1/unity-catalog/iceberg/v1/config", "InternalServerError"),
                           ("/api/2.1/unity-catalog/iceberg-rest/v1/x", "InternalServerError"),
                           ("/api/2.1/unity-catalog/delta/v1/config", "InternalServerErrorException")):
            r = await client.get(path)
            error = error_model(r.status, await r.json(), kind, delta="delta" in path)
            assert r.status == 500 and "a bug" not in error["message"]
        r = await client.get("/api/2.1/unity-catalog/catalogs")
        assert r.status == 500 and (await r.json())["error_code"] == "INTERNAL_ERROR"
