"""shardcat's own OpenAPI document (shardcat.yaml, next to this file) and the routes that serve it.

The document describes every endpoint shardcat answers: the Unity Catalog REST API as shardcat
implements it, SCIM identity, and shardcat's additions. It is read once, on first request, and
served as JSON or as the YAML it is written in; no token is needed (it names no securable).
tests/integration/test_openapi_routes.py fails when a route is missing from it, and
tests/integration/test_fuzz_openapi.py drives the served API from it.
"""

from __future__ import annotations

import functools
from importlib import resources

import orjson
import yaml
from aiohttp import web


@functools.cache
def document_yaml() -> bytes:
    return resources.files(__package__).joinpath("shardcat.yaml").read_bytes()


@functools.cache
def document() -> dict:
    """The document as a dict (what openapi.json serves)."""
    return yaml.safe_load(document_yaml())


@functools.cache
def _document_json() -> bytes:
    return orjson.dumps(document())


async def _serve_json(request: web.Request) -> web.Response:
    return web.Response(body=_document_json(), content_type="application/json")


async def _serve_yaml(request: web.Request) -> web.Response:
    return web.Response(body=document_yaml(), content_type="application/yaml")


def openapi_handlers() -> dict:
    """The document's handlers by operationId (web/registry.py declares their paths)."""
    return {"getOpenApiJson": _serve_json, "getOpenApiYaml": _serve_yaml}
