"""aiohttp middlewares of the front: Unity Catalog error JSON for every failure (never showing a
secret the request carried), and the refusal of parameters PostgreSQL cannot store."""

from __future__ import annotations

import logging
from urllib.parse import unquote_to_bytes

import orjson
from aiohttp import web

from ..entities.secrets import scrub, secret_values
from ..entities.text import bad_char
from ..errors import CatalogError
from ..store.errors import is_db_unavailable
from .iceberg_errors import protocol_error

log = logging.getLogger(__name__)

_HTTP_CODES = {404: "ENDPOINT_NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "REQUEST_TOO_LARGE"}


def error_middleware(max_body_bytes: int):
    """Every failure as Unity Catalog error JSON with its HTTP status, or under an Iceberg base as
    Iceberg's error model, under /delta/v1 the UC Delta API's (iceberg_errors.py), unknown routes there
    included; never a bare 500 page."""

    @web.middleware
    async def errors(request: web.Request, handler):
        try:
            return await handler(request)
        except CatalogError as e:
            status, code, message = e.status, e.code, await _without_secrets(request, e.message)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            status, code = e.status, _HTTP_CODES.get(e.status, "BAD_REQUEST")
            message = _http_message(request, e, max_body_bytes)
        except Exception as e:
            error = unexpected_error(e, request.method, request.path)
            status, code, message = error.status, error.code, error.message
        answer = protocol_error(request.path, status, code, message) if code != "NOT_OWNER" else None
        if answer is not None:      # under an Iceberg base or /delta/v1 (NOT_OWNER: shard to router, not a client)
            return answer
        return web.json_response({"error_code": code, "message": message}, status=status)

    return errors


def unexpected_error(e: Exception, method: str, path: str) -> CatalogError:
    """What a request that failed with an error other than a CatalogError answers (logged here):
    also for a front that answers a write itself (serving/front.py)."""
    if is_db_unavailable(e):     # PostgreSQL down or restarting: retryable, not a server bug
        log.warning("database unavailable serving %s %s: %r", method, path, e)
        return CatalogError("TEMPORARILY_UNAVAILABLE", "The catalog database is unavailable; try again shortly.")
    log.exception("internal error serving %s %s", method, path, exc_info=e)
    return CatalogError("INTERNAL_ERROR", "The server failed to handle the request; it has been logged.")


async def _without_secrets(request: web.Request, message: str) -> str:
    """An error message with nothing in it that the request sent in a secret-bearing field (a
    safety net: messages about such fields already leave their values out). The client and the
    audit log (which records the answer's message) both get this."""
    if request.method not in ("POST", "PUT", "PATCH") or not request.body_exists:
        return message
    try:
        body = orjson.loads(await request.read())
    except Exception:      # not JSON, or the body could not be read: nothing of it is in the message
        return message
    secrets = secret_values(body)
    return scrub(message, secrets) if secrets else message


def _http_message(request: web.Request, e: web.HTTPException, max_body_bytes: int) -> str:
    if e.status == 404:
        return f"No API found for {request.method} {request.path}."
    if e.status == 405:
        allowed = ", ".join(sorted(getattr(e, "allowed_methods", ()) or ()))
        return f"Method {request.method} is not allowed on {request.path}; allowed: {allowed}."
    if e.status == 413:
        return f"The request body is larger than the limit of {max_body_bytes} bytes."
    return e.text or e.reason


@web.middleware
async def text_input(request: web.Request, handler):
    """Refuse, before anything reaches the database, a request whose query parameters or path
    segments hold what is not text PostgreSQL can store: NUL, percent-escapes that are not UTF-8,
    unpaired surrogates. (Other control characters are each parameter's own rule to refuse, with a
    message that says what it wanted: names do. JSON bodies: serving/app.py `json_object`.)"""
    raw = request.raw_path
    if raw.isascii() and raw.isprintable() and "%" not in raw:
        return await handler(request)        # nothing decodes to anything odd: the common case
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeError:
        raise CatalogError("INVALID_PARAMETER_VALUE",
                           "The request's path or query has percent-escapes that are not valid UTF-8.") from None
    for where, items in (("Query parameter", request.query.items()), ("Path parameter", request.match_info.items())):
        for name, value in items:
            wrong = bad_char(name, controls=False) or bad_char(value, controls=False)
            if wrong is not None:
                shown = repr(name)[1:-1][:60]
                raise CatalogError("INVALID_PARAMETER_VALUE",
                                   f"{where} '{shown}' contains {wrong}, which is not allowed.")
    return await handler(request)


