"""The error model of the two table protocols on the wire, `{"error": {"message", "type", "code"}}`: Iceberg's
REST catalog (its ErrorModel) and the UC Delta API (api/delta.yaml's DeltaErrorResponse). Every answer under
an Iceberg base or /delta/v1 is in it: the protocols' own errors (catalog/protocols/) and what the front
refuses before a handler runs or answers for a failed one (an unknown route, a bad token, bad input, a
server error: web/middleware.py `protocol_error`). Only `type` differs: each names its exception by it."""

from __future__ import annotations

from aiohttp import web

from .kit import encode_json
from .registry import ICEBERG_BASES
from .wire import PREFIX

# A Unity Catalog error code's Iceberg exception type (Iceberg's Java client picks its exception by it).
_TYPES = {"ALREADY_EXISTS": "AlreadyExistsException", "RESOURCE_CONFLICT": "CommitFailedException",
          "PERMISSION_DENIED": "ForbiddenException", "UNAUTHENTICATED": "NotAuthorizedException",
          "TEMPORARILY_UNAVAILABLE": "ServiceUnavailableException", "NOT_FOUND": "NotFoundException",
          "ENDPOINT_NOT_FOUND": "NotFoundException", "RESOURCE_EXHAUSTED": "TooManyRequestsException", "INTERNAL_ERROR": "InternalServerError"}
# ... and its DeltaErrorType (api/delta.yaml's enum: nothing outside it).
_DELTA_TYPES = {
    "INVALID_PARAMETER_VALUE": "InvalidParameterValueException", "UNAUTHENTICATED": "NotAuthorizedException",
    "PERMISSION_DENIED": "PermissionDeniedException", "NOT_FOUND": "NotFoundException",
    "ENDPOINT_NOT_FOUND": "NotFoundException", "ALREADY_EXISTS": "AlreadyExistsException",
    "RESOURCE_CONFLICT": "CommitVersionConflictException", "RESOURCE_EXHAUSTED": "ResourceExhaustedException",
    "TEMPORARILY_UNAVAILABLE": "InternalServerErrorException", "INTERNAL_ERROR": "InternalServerErrorException"}
# Where Iceberg's routes live: /api/2.1/unity-catalog/iceberg/... and .../iceberg-rest/..., known or not.
_ROOTS = tuple(f"{PREFIX}{base.rsplit('/v1', 1)[0]}/" for base in ICEBERG_BASES)
_DELTA_ROOT = f"{PREFIX}/delta/v1/"


def is_iceberg_path(path: str) -> bool:
    return path.startswith(_ROOTS)


def is_delta_api_path(path: str) -> bool:
    return path.startswith(_DELTA_ROOT) or path == _DELTA_ROOT[:-1]


def iceberg_type(code: str, status: int) -> str:
    """The Iceberg exception type of a Unity Catalog error code (answered with `status`)."""
    return _TYPES.get(code) or ("BadRequestException" if status < 500 else "InternalServerError")


def delta_type(code: str, status: int) -> str:
    """The DeltaErrorType of a Unity Catalog error code (answered with `status`)."""
    if status == 429:
        return "TooManyRequestsException" if code != "RESOURCE_EXHAUSTED" else "ResourceExhaustedException"
    return _DELTA_TYPES.get(code) or ("BadRequestException" if status < 500 else "InternalServerErrorException")


def iceberg_response(status: int, kind: str, message: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return web.Response(status=status, body=encode_json(body), content_type="application/json")


def protocol_body(path: str, status: int, code: str, message: str) -> bytes | None:
    """An error's body under an Iceberg base or /delta/v1, in that protocol's model; None elsewhere."""
    if is_iceberg_path(path):
        kind = iceberg_type(code, status)
    elif is_delta_api_path(path):
        kind = delta_type(code, status)
    else:
        return None
    return encode_json({"error": {"message": message, "type": kind, "code": status}})


def protocol_error(path: str, status: int, code: str, message: str) -> web.Response | None:
    """The answer for an error under an Iceberg base or /delta/v1 in that protocol's model; None elsewhere."""
    body = protocol_body(path, status, code, message)
    return None if body is None else web.Response(status=status, body=body, content_type="application/json")
