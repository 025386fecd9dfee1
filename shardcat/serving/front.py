"""A shard's public HTTP/1.1 server: answers the gets and lists of catalogs, schemas, tables and
volumes, the batched resolve, the creates of those types and Delta commits itself, and relays
every other request to the shard's aiohttp app behind it.

aiohttp.web's request and response machinery was most of a shard's work per cached read, and
near half of its work per write. The front answers such a request with the same service calls,
records the same audit row and sends the same headers as the app would, building no aiohttp
objects. It answers only the plain success: a read it cannot parse simply, or whose caller,
lookup or authorization fails in any way, goes to the app unchanged (a read, so nothing is done
twice), and the app stays the one definition of errors, retries and everything else. So does a
write refused before anything was written (a CatalogError below 500, and no version written):
the app refuses it again as it always does. A write that fails otherwise may have been applied:
the front answers that failure itself, as the app would, and never sends the write again.
"""

from __future__ import annotations

import time
from importlib import import_module
from typing import Awaitable, Callable

import orjson

from aiohttp import web

from ..auth import Caller, bearer
from ..governance import audit
from ..governance.index import answering
from ..web import http1
from ..web.http_limits import HttpLimits
from ..web.shard_client import Address, Answer, ShardClient
from ..errors import CatalogError
from ..web import registry
from ..entities.secrets import scrub, secret_values
from ..store.errors import MetastoreGone
from ..shards.session import Session
from ..web.kit import encode_json, json_object
from ..web.middleware import unexpected_error
from ..web.fronts import answered
from ..web.metrics import OBSERVED
from ..web.request_log import RequestLog
from .app import CRUD, SERVING, after_written, answered_version, found_json, listed_json, resolved_json, session_caller
from ..web.wire import MIN_VERSION_HEADER, PREFIX, VERSION_HEADER
from ..catalog.features.versions import AS_OF_TIMESTAMP, AS_OF_VERSION

_MIN_VERSION = MIN_VERSION_HEADER.lower()
_UNDER = PREFIX + "/"
# What this front can answer itself; of that, what the endpoint registry says it does answer.
_CAN = {("POST", "/resolve")} | {("GET", f"/{s}") for _, s, _, _ in CRUD} | {("GET", f"/{s}/{{{k}}}") for _, s, k, _ in CRUD}
_FAST = frozenset((e.method, e.path) for e in registry.served_by(registry.SHARD) if e.fast)
# Writes are made by the work their module's `fast_writes(serving)` gives (a POST without path parameters).
_FAST_WRITES = [e for e in registry.served_by(registry.SHARD) if e.fast and (e.method, e.path) not in _CAN]
if any(e.method != "POST" or "{" in e.path or e.module is None for e in _FAST_WRITES):
    raise ValueError(f"the shard front cannot answer {[(e.method, e.path) for e in _FAST_WRITES]} itself: "
                     "unmark `fast` in web/registry.py")


class _Route:
    """One route this front answers, and what its answers share, worked out once at import."""

    __slots__ = ("type_name", "key", "parents", "audit")

    def __init__(self, method: str, pattern: str, type_name: str | None = None, key: str | None = None,
                 parents: tuple[str, ...] = ()):
        self.type_name = type_name
        self.key = key                      # an item's path parameter
        self.parents = parents              # a list's parent query parameters
        self.audit = audit.FrontRoute(method, PREFIX + pattern)


# path segment -> the route of an item (GET /tables/{full_name}) or of a list (GET /tables), where fast
_ITEMS = {segment: _Route("GET", f"/{segment}/{{{key}}}", type_name, key)
          for type_name, segment, key, _ in CRUD if ("GET", f"/{segment}/{{{key}}}") in _FAST}
_LISTS = {segment: _Route("GET", f"/{segment}", type_name, parents=parents)
          for type_name, segment, _, parents in CRUD if ("GET", f"/{segment}") in _FAST}
_RESOLVE = _Route("POST", "/resolve") if ("POST", "/resolve") in _FAST else None


class ShardFront:
    """Answers a shard's plain reads itself; relays the rest to the shard app at `app_address`."""

    def __init__(self, app: web.Application, app_address: Address):
        serving = app[SERVING]
        self.shard = serving.shard
        self.authenticator = serving.authenticator
        self.catalogs = serving.catalogs
        self.resolver = serving.resolver
        self.audit_log = serving.audit_log
        self.app_address = app_address
        self.client = ShardClient()
        self.max_body_bytes = serving.max_body_bytes
        # path under the prefix -> (route, work(caller, body)) of each write this front makes itself
        self.writes = {}
        for e in _FAST_WRITES:
            work = import_module(f"shardcat.{e.module}").fast_writes(serving).get((e.method, e.path))
            if work is None:
                raise ValueError(f"shardcat.{e.module}.fast_writes gives no {e.method} {e.path}: unmark `fast` "
                                 "in web/registry.py or add it there")
            self.writes[e.path] = (_Route(e.method, e.path), work)
        # requests answered each way; of those through the app, the ones the front tried first.
        # Plain ints in the app's `Observed`, which its /metrics reads (web/metrics.py).
        observed = app[OBSERVED]
        self.requests = observed.requests
        self.stats = observed.front
        self.stats.update(fast=0, through_app=0, tried_first=0)
        self.request_log = RequestLog(self.shard.name)

    async def answer(self, request: http1.Request) -> Answer:
        return await answered(self, request, self._answer_itself(request))

    async def _answer_itself(self, request: http1.Request) -> Answer | None:
        """The answer of a plain, successful read, or of a write; None for the app to answer."""
        if request.method == "POST":
            raw = request.raw_path      # an exact path: no query, no escapes
            write = self.writes.get(raw[len(PREFIX):]) if raw.startswith(_UNDER) else None
            if write is not None:
                return await self._write(request, *write)
        target = self._target(request)
        if target is None:
            return None
        route, match, work = target
        at = int(time.time() * 1000)
        request_id = audit.new_request_id()
        try:
            caller = await self._caller(request)
            if caller is None:
                return None
            before = self.shard.states.get(caller.metastore_id)
            with Session(caller, audit=audit.context(self.audit_log, request_id, route.audit.label)) as session:
                body = await answering(self.shard, session, lambda: work(caller))
        except Exception:       # not found, refused, a database error...: the app answers it as always
            self.stats["tried_first"] += 1
            return None
        self.audit_log.submit_row(audit.answered_row(route.audit, match, caller, request_id, at))
        request.operation = route.audit.action      # the metrics' name (web/fronts.py), the registry's as the row's
        headers = {"Content-Type": "application/json", "Date": http1.http_date(),
                   audit.REQUEST_ID_HEADER: request_id}
        version = answered_version(self.shard, session, before)
        if version is not None:
            headers[VERSION_HEADER] = str(version)
        return Answer(200, headers, body)

    async def _write(self, request: http1.Request, route: _Route, work) -> Answer | None:
        """A write's answer: enter the request's session, run the operation, answer as the app
        would (its middlewares: serving/app.py `make_shard_app`); None for the app to answer: a
        request it must see (no caller known here, a body over its limit) or one refused before
        anything was written."""
        if len(request.body) > self.max_body_bytes:
            return None
        caller = await self._caller(request)
        if caller is None:
            return None
        at = int(time.time() * 1000)
        request_id = audit.new_request_id()
        before = self.shard.states.get(caller.metastore_id)
        session = Session(caller, audit=audit.context(self.audit_log, request_id, route.audit.label))
        try:
            with session:
                answer = await answering(self.shard, session, lambda: work(caller, json_object(request.body)))
            status, body = 200, encode_json(answer)
        except Exception as e:
            if session.written_version is None and (isinstance(e, MetastoreGone) or
                                                    isinstance(e, CatalogError) and e.status < 500):
                self.stats["tried_first"] += 1
                return None         # nothing written: the app refuses it again, as always
            error = after_written(e, session) if isinstance(e, CatalogError) \
                else unexpected_error(e, "POST", request.path)
            try:
                secrets = secret_values(orjson.loads(request.body))
            except Exception:       # not JSON: nothing of it is in the message
                secrets = None
            status = error.status
            body = orjson.dumps({"error_code": error.code,
                                 "message": scrub(error.message, secrets) if secrets else error.message})
        self.audit_log.submit_row(audit.written_row(route.audit, session.audit, caller, at, status, body, request.body))
        request.operation = route.audit.action
        headers = {"Content-Type": "application/json", "Date": http1.http_date(), audit.REQUEST_ID_HEADER: request_id}
        version = answered_version(self.shard, session, before)
        if version is not None:
            headers[VERSION_HEADER] = str(version)
        return Answer(status, headers, body)

    def _target(self, request: http1.Request) -> tuple[_Route, dict, Callable[[Caller], Awaitable[bytes]]] | None:
        """(the route, its path parameters, the work answering for a caller) of a request the front
        answers; None for any other."""
        raw = request.raw_path
        path, _, query = raw.partition("?")
        # Escapes, '+' and other than ASCII would need decoding (the app's rules); a path parameter
        # of the app's routes is never ".", "..", nor has braces or a slash.
        if "%" in raw or "+" in query or not raw.isascii() or not path.startswith(_UNDER):
            return None
        segment, slash, name = path[len(_UNDER):].partition("/")
        method = request.method
        if method == "GET":
            if name:
                route = _ITEMS.get(segment)
                if route is None or name == "." or name == ".." or "/" in name or "{" in name or "}" in name \
                        or (query and _query(query)):
                    return None
                catalogs, type_name = self.catalogs, route.type_name
                return route, {route.key: name}, lambda caller: found_json(catalogs, caller, type_name, name)
            route = _LISTS.get(segment)
            if route is None or slash:
                return None
            params = _query(query) if query else {}
            if AS_OF_VERSION in params or AS_OF_TIMESTAMP in params:     # a read at a past version: the app's
                return None
            parents = route.parents
            if parents and not all(params.get(p) for p in parents):
                return None
            parent = ".".join([params[p] for p in parents]) if parents else None
            catalogs, type_name = self.catalogs, route.type_name
            return (route, {}, lambda caller: listed_json(catalogs, caller, type_name, parent,
                                                          params.get("max_results"), params.get("page_token")))
        if method == "POST" and segment == "resolve" and not slash and not query and _RESOLVE is not None:
            return _RESOLVE, {}, lambda caller: resolved_json(self.resolver, caller, request.body)
        return None

    async def _caller(self, request: http1.Request) -> Caller | None:
        """The request's caller, at the version it asks for; None where the app must answer."""
        token = bearer(request.headers.get("authorization"))
        caller = await self.authenticator.caller(token) if token else None
        if caller is None or caller.metastore_id is None:
            return None
        try:
            return session_caller(caller, request.headers.get(_MIN_VERSION))    # the app's rule
        except CatalogError:
            return None


def _query(query: str) -> dict[str, str]:
    """A query string without escapes as the app reads it: the first value of each name."""
    params: dict[str, str] = {}
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            params.setdefault(name, value)
    return params


async def start_shard_front(app: web.Application, host: str, port: int, unix: str | None = None,
                            limits: HttpLimits | None = None) -> http1.Listening:
    """Serve the shard app (make_shard_app) behind a ShardFront on (host, port) and, if named, a Unix
    socket; `limits`: what a client may send (the defaults of HttpLimits unless given)."""
    return await http1.serve_behind(app, lambda address: ShardFront(app, address), host, port, unix, limits)
