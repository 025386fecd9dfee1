"""Iceberg's error model on the wire: `{"error": {"message", "type", "code"}}`. Every answer under an
Iceberg base is in it: the catalog's own errors (catalog/protocols/iceberg_rest.py) and what the front refuses
before a handler runs (an unknown route, a bad token, bad input: web/middleware.py)."""

from __future__ import annotations

from aiohttp import web

from .kit import encode_json
from .registry import ICEBERG_BASES
from .wire import PREFIX

# A Unity Catalog error code's Iceberg exception type (Iceberg's Java client picks its exception by it).
_TYPES = {"ALREADY_EXISTS": "AlreadyExistsException", "RESOURCE_CONFLICT": "CommitFailedException",
          "PERMISSION_DENIED": "ForbiddenException", "UNAUTHENTICATED": "NotAuthorizedException",
          "TEMPORARILY_UNAVAILABLE": "ServiceUnavailableException", "NOT_FOUND": "NotFoundException",
          "ENDPOINT_NOT_FOUND": "NotFoundException", "RESOURCE_EXHAUSTED": "TooManyRequestsException"}
# Where Iceberg's routes live: /api/2.1/unity-catalog/iceberg/... and .../iceberg-rest/..., known or not.
_ROOTS = tuple(f"{PREFIX}{base.rsplit('/v1', 1)[0]}/" for base in ICEBERG_BASES)


def is_iceberg_path(path: str) -> bool:
    return path.startswith(_ROOTS)


def iceberg_type(code: str, status: int) -> str:
    """The Iceberg exception type of a Unity Catalog error code (answered with `status`)."""
    return _TYPES.get(code) or ("BadRequestException" if status < 500 else "InternalServerError")


def iceberg_response(status: int, kind: str, message: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return web.Response(status=status, body=encode_json(body), content_type="application/json")
