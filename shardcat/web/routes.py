"""An app's aiohttp routes, derived from the endpoint registry (registry.py) at start-up, and what a
module's `shard_handlers(serving)` receives (`ShardServing`) and returns (`Handler`s by operationId)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping, Protocol

from aiohttp import web

from . import registry
from .wire import HEAD_HEADER


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _head_or_get(head: Handler, get: Handler) -> Handler:
    """A GET route's handler that answers as its HEAD endpoint when a front relayed a HEAD (web/http1.py)."""
    async def either(request: web.Request):
        return await (head if HEAD_HEADER in request.headers else get)(request)
    either.answers = (get, head)        # what it dispatches to, for those who check a route's handler
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
