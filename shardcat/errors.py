"""The catalog's error type: a Unity Catalog error code, its HTTP status and a message."""

from __future__ import annotations

# Unity Catalog error codes and the HTTP status each one travels with.
STATUS = {
    "INVALID_PARAMETER_VALUE": 400,
    "MALFORMED_REQUEST": 400,
    "BAD_REQUEST": 400,
    "FAILED_PRECONDITION": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "ALREADY_EXISTS": 409,
    "RESOURCE_CONFLICT": 409,
    "REQUEST_TOO_LARGE": 413,
    "NOT_OWNER": 421,              # shardcat: this shard does not serve that metastore (refresh routing)
    "RESOURCE_EXHAUSTED": 429,
    "INTERNAL_ERROR": 500,
    "TEMPORARILY_UNAVAILABLE": 503,
}


class CatalogError(Exception):
    """An error the API reports to the client as `{"error_code": ..., "message": ...}`."""

    def __init__(self, code: str, message: str):
        assert code in STATUS, code
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        return STATUS[self.code]

    def to_json(self) -> dict:
        return {"error_code": self.code, "message": self.message}


def invalid(message: str) -> CatalogError:
    return CatalogError("INVALID_PARAMETER_VALUE", message)


def not_found(message: str) -> CatalogError:
    return CatalogError("NOT_FOUND", message)


def already_exists(message: str) -> CatalogError:
    return CatalogError("ALREADY_EXISTS", message)
