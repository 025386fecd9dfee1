"""The API's HTTP conventions for request bodies and answers: JSON bodies read with clear 400s, JSON
answers, query flags (the prefix and headers: wire.py; an app's routes: routes.py; the client's
address: client_address.py)."""

from __future__ import annotations

import json

import orjson
from aiohttp import web

from ..errors import CatalogError, invalid



async def json_body(request: web.Request) -> dict:
    """The request's JSON object; a clear 400 for anything else."""
    return json_object(await request.read())


def json_object(raw: bytes) -> dict:
    """A request body's JSON object; a clear 400 for anything else."""
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = _json_loads(raw)     # what orjson refuses (huge integers, NaN, bad UTF-8): json's rules and messages
    if not isinstance(body, dict):
        raise CatalogError("MALFORMED_REQUEST", f"The request body must be a JSON object, got {type(body).__name__}.")
    if b"\\u" in raw:    # NUL and lone surrogates can only come in as \u escapes: no escape, nothing to check
        _check_text(body)
    return body


def _json_loads(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError as e:
        raise CatalogError("MALFORMED_REQUEST", f"The request body is not valid JSON: {e}.") from None
    except RecursionError:
        raise CatalogError("MALFORMED_REQUEST", "The request body is not valid JSON: nested too deeply.") from None


def _check_text(body: dict) -> None:
    """Refuse strings PostgreSQL cannot store (NUL, unpaired surrogates), naming the field; iterative, any depth."""
    stack = [(k, k, v) for k, v in body.items()]
    while stack:
        where, key, value = stack.pop()
        for text, what in ((key, "a key"), (value, "a value")):
            if not isinstance(text, str):
                continue
            if "\x00" in text:
                raise invalid(f"Field {where!r:.80} has {what} with a NUL character (\\u0000), which is not allowed.")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise invalid(f"Field {where!r:.80} has {what} with an unpaired surrogate: not valid Unicode.") from None
        if isinstance(value, dict):
            stack += [(f"{where}.{k}", k, v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{where}[{i}]", None, v) for i, v in enumerate(value)]


def flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name)
    if value is None:
        return False
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0", ""):
        return False
    raise invalid(f"Query parameter '{name}' must be true or false, got '{value:.40}'.")


def required_query(request: web.Request, name: str) -> str:
    value = request.query.get(name)
    if not value:
        raise invalid(f"Missing required query parameter '{name}'.")
    return value


def ok(data: dict | None = None) -> web.Response:
    """A 200 with a JSON answer; assets in it may come pre-encoded (`present`)."""
    return ok_json(encode_json(data if data is not None else {}))


def ok_json(body: bytes) -> web.Response:
    """A 200 with an answer already encoded as JSON."""
    return web.Response(body=body, content_type="application/json")


def encode_json(value) -> bytes:
    """JSON bytes of an answer. orjson (the json module was a quarter of a shard's CPU on reads);
    json for what orjson refuses to carry exactly (integers past 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(value).encode()


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})
