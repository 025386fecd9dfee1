"""The API's HTTP conventions, for every app and front: its path prefix and headers, JSON request
bodies read with clear 400s, JSON answers, query flags, and each app's routes from the endpoint registry
(the prefix and headers: wire.py)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Awaitable, Callable, Mapping, Protocol

import orjson
from aiohttp import web

from ..errors import CatalogError, invalid
from . import registry
from .wire import CLIENT_ADDRESS_HEADER, CLIENT_HOST_HEADER, FORWARDED_FOR_HEADER, HEAD_HEADER



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


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _head_or_get(head: Handler, get: Handler) -> Handler:
    """A GET route's handler that answers as its HEAD endpoint when a front relayed a HEAD (web/http1.py)."""
    async def either(request: web.Request):
        return await (head if HEAD_HEADER in request.headers else get)(request)
    return either


def routes(app: str, handlers: Mapping[str | None, Mapping[str, Handler]], *,
           extra: str | None = None) -> list[web.RouteDef]:
    """An app's aiohttp routes, derived from the endpoint registry (web/registry.py) at start-up: its
    endpoints in registry order, each with its handler from `handlers`, each module's table of
    handlers by name (the endpoint's `handler`, else its operationId; under None the app's own).
    `extra`: another app's endpoints served here too (the one-process app serves the account's).
    A handler no endpoint names, or an endpoint without one, is an error."""
    unused = {(module, name) for module, table in handlers.items() for name in table}
    declared = registry.served_by(app) + (registry.served_by(extra) if extra else [])
    heads = {e.full_path: handlers.get(e.module, {}).get(e.handler or e.action) for e in declared if e.method == "HEAD"}
    out, seen = [], set()
    for e in declared:
        if (e.method, e.full_path) in seen:
            continue
        seen.add((e.method, e.full_path))
        name = e.handler or e.action
        handler = handlers.get(e.module, {}).get(name)
        if handler is None:
            raise ValueError(f"{e.method} {e.full_path} is in the endpoint registry but no module handles it "
                             f"({e.module or 'the app'} has no handler {name})")
        unused.discard((e.module, name))
        # aiohttp's GET answers HEAD too unless told not to, or a HEAD endpoint of its own answers it (the
        # Iceberg exists operations: 204, not the GET's 200), also when a front sent the HEAD on as a GET
        own_head = heads.get(e.full_path) if e.method == "GET" else None
        if own_head is not None:
            handler = _head_or_get(own_head, handler)
        options = {"allow_head": e.head and own_head is None} if e.method == "GET" else {}
        out.append(web.route(e.method, e.full_path, handler, **options))
    if unused:
        module, name = sorted(unused, key=str)[0]
        raise ValueError(f"{module or 'the app'} has a handler {name} that is not in the endpoint registry "
                         "(web/registry.py)")
    return out


class ShardServing(Protocol):
    """What the shard app gives the `shard_handlers(serving)` of each module the endpoint registry
    names (serving/app.py's `Serving`): the shard and the app's audit log, among others."""
    shard: Any          # shards/shard.py Shard
    catalogs: Any       # catalog/tree/service.py CatalogService
    audit_log: Any      # governance/audit.py AuditLog
    webhook_allow_hosts: frozenset[str]     # reached although not public (web/destinations.py)


_FORWARDED_CONTEXT = b"shardcat forwarded client address v1"


def _address_mac(key: bytes, address: str) -> str:
    return hmac.new(hmac.new(key, _FORWARDED_CONTEXT, hashlib.sha256).digest(), address.encode(),
                    hashlib.sha256).hexdigest()


def forwarded_for(box, address: str) -> str | None:
    """The header value a router sends a shard to vouch for the client's address (HMAC under the
    server's first secret key: every process of a catalog holds the same keys); None without keys."""
    keys = list(box.keys) if box is not None else []
    return f"{address};{_address_mac(keys[0], address)}" if keys and address else None


def client_address(request: web.Request, box=None) -> str | None:
    """The client's IP address: the one a router vouched for (behind a router, the front before a
    shard sees the router), else the one the HTTP/1.1 front saw, else the connection's."""
    vouched = request.headers.get(FORWARDED_FOR_HEADER)
    if vouched and box is not None:
        address, _, mac = vouched.rpartition(";")
        if any(hmac.compare_digest(_address_mac(k, address), mac) for k in box.keys):
            return address
    return request.headers.get(CLIENT_ADDRESS_HEADER) or request.remote


def public_origin(request: web.Request) -> str:
    """scheme://host[:port] as the client addressed this server (through the front: its Host header)."""
    host = request.headers.get(CLIENT_HOST_HEADER) or request.host
    return f"{request.scheme}://{host}"
