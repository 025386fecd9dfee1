"""The router app of a sharded catalog: authenticate, find the owner shard, forward over HTTP.

Account-level routes are served here; everything else is scoped to one metastore and
forwarded to the shard that owns it. A shard that answers NOT_OWNER or cannot be reached
makes the router refresh its routing and try again, for a bounded time. In `shardcat serve`
it sits behind router/front.py, which sends most reads to their shard itself.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from ..errors import CatalogError
from ..governance import audit
from ..openapi import openapi_routes
from ..shards.delta_api import HEAD_HEADER
from ..shards.http import MAX_BODY_BYTES, MIN_VERSION_HEADER, PREFIX, VERSION_HEADER, healthz, ok
from ..shards.metastores import AccountService
from ..store.db import Store, bigint_text
from .account import AccountApi
from .middleware import Authenticator, error_middleware, text_input
from .routing import RoutingTable
from .shard_client import Answer, ConnectionLost, ShardClient, ShardUnreachable

RETRY_BUDGET_SECONDS = 5.0
_HOP_HEADERS = ("Authorization", "Content-Type")
_RELAYED_HEADERS = (VERSION_HEADER, audit.REQUEST_ID_HEADER)
_VERSION = VERSION_HEADER.lower()
# POSTs that only read: as safe to send again after a lost connection as a GET.
_READ_ONLY_POSTS = frozenset({PREFIX + "/resolve", PREFIX + "/table-summaries",
                             PREFIX + "/shardcat/authorize"})


def _int(value: str | None) -> int:
    return bigint_text(value) or 0


def metastore_in_path(path: str) -> str | None:
    """The metastore a `/metastores/{id}/...` path names (others are the caller's own metastore's)."""
    rest = path[len(PREFIX):]
    return rest.split("/")[2] if rest.startswith("/metastores/") else None


def _metastore_of(request: web.Request) -> str:
    return metastore_in_path(request.path) or request["caller"].metastore()


def safe_to_resend(method: str, path: str) -> bool:
    """Whether a request only reads: sent again after a lost connection, it changes nothing."""
    return method in ("GET", "HEAD") or path in _READ_ONLY_POSTS


class Forwarder:
    def __init__(self, routing: RoutingTable):
        self.routing = routing
        # The router alone decides what to send again: a write that may have reached a shard is not resent.
        self.client = ShardClient()
        # Per metastore, the newest version any answer through here reflected: every later request
        # asks its shard for at least that, so no client reads older than a write it saw acknowledged,
        # even while two shards own the metastore.
        self.acknowledged: dict[str, int] = {}

    async def close(self, app) -> None:
        self.client.close()

    async def routes_table(self, request: web.Request) -> web.Response:
        """The routing table, so a client library can send requests straight to the owner shard."""
        caller = request["caller"]
        out = self.routing.snapshot()
        if caller.metastore_id:
            out["my_shard"] = (await self.routing.shard_for(caller.metastore_id)).url
        return ok(out)

    def shard_headers(self, metastore_id: str, request_headers) -> dict[str, str]:
        """The headers a request goes on to its shard with: who is asking, and the metastore version
        it must see at least (the newest any answer through here reflected, or the client's own).
        `request_headers` is read by lower-case names: aiohttp's headers, or a dict of them."""
        headers = {}
        for name in _HOP_HEADERS:
            value = request_headers.get(name.lower())
            if value is not None:
                headers[name] = value
        seen = max(self.acknowledged.get(metastore_id, 0), _int(request_headers.get(MIN_VERSION_HEADER.lower())))
        if seen:
            headers[MIN_VERSION_HEADER] = str(seen)
        return headers

    def acknowledge(self, metastore_id: str, answer: Answer) -> None:
        """Remember the version a shard's answer reflected (see `acknowledged`)."""
        version = _int(answer.headers.get(_VERSION))
        if version > self.acknowledged.get(metastore_id, 0):
            self.acknowledged[metastore_id] = version

    async def forward(self, request: web.Request) -> web.Response:
        metastore_id = _metastore_of(request)
        body = await request.read()
        headers = self.shard_headers(metastore_id, request.headers)
        resendable = safe_to_resend(request.method, request.path)
        # HEAD goes on as GET (its answer has a body to read); aiohttp leaves the body out for the client.
        method = "GET" if request.method == "HEAD" else request.method
        if request.method == "HEAD" or HEAD_HEADER in request.headers:    # ... saying so, for the routes whose
            headers[HEAD_HEADER] = "HEAD"                                   # HEAD is not a GET's (shards/delta_api.py)
        deadline = time.monotonic() + RETRY_BUDGET_SECONDS
        while True:
            try:
                shard = await self.routing.shard_for(metastore_id)
            except LookupError:
                shard = None
            if shard is not None:
                try:
                    # the path as the client encoded it: decoding and encoding again could change it
                    answer = await self.client.request(shard.address, method, request.raw_path, headers, body)
                    if answer.status != 421:
                        return self._relay(request, metastore_id, answer)
                    await self.routing.reassert(metastore_id)
                except ShardUnreachable:
                    pass                          # never reached the shard: always safe to try again
                except ConnectionLost:
                    if not resendable:            # a write may have been applied: let the client decide
                        raise CatalogError("TEMPORARILY_UNAVAILABLE",
                                           f"Lost the connection to {shard.name} mid-request; the outcome is unknown.")
            if time.monotonic() > deadline:
                raise CatalogError("TEMPORARILY_UNAVAILABLE", f"No shard could serve metastore {metastore_id}.")
            await asyncio.sleep(0.05)

    def _relay(self, request: web.Request, metastore_id: str, answer: Answer) -> web.Response:
        audit.recorded_elsewhere()     # the shard recorded it in the audit log
        self.acknowledge(metastore_id, answer)
        response = web.Response(body=answer.body, status=answer.status,
                                content_type=answer.headers.get("content-type", "application/json").split(";")[0])
        for name in _RELAYED_HEADERS:
            value = answer.headers.get(name.lower())
            if value is not None:
                response.headers[name] = value
        return response


FORWARDER = web.AppKey("shardcat_forwarder", Forwarder)
AUTHENTICATOR = web.AppKey("shardcat_authenticator", Authenticator)


def make_router_app(store: Store, routing: RoutingTable) -> web.Application:
    """The whole router as an aiohttp app (router/front.py serves it behind a faster front)."""
    authenticator = Authenticator(store)
    forwarder = Forwarder(routing)
    # Audit: the account-level requests served here; forwarded ones are recorded by their shard.
    audit_log = audit.AuditLog(store)
    app = web.Application(middlewares=[audit.middleware(audit_log), error_middleware(MAX_BODY_BYTES),
                                       authenticator.middleware, text_input],
                          client_max_size=MAX_BODY_BYTES)
    app[audit.APP_KEY] = audit_log
    app[FORWARDER], app[AUTHENTICATOR] = forwarder, authenticator
    app.on_startup.append(audit_log.start)
    app.on_cleanup.append(forwarder.close)
    app.on_cleanup.append(audit_log.stop)
    account = AccountApi(AccountService(store), authenticator)
    app.add_routes([
        web.get("/healthz", healthz),
        *openapi_routes(),
        *account.routes(),
        web.get(f"{PREFIX}/shardcat/routing", forwarder.routes_table),
        *audit.audit_routes(audit_log),
        web.route("*", PREFIX + "/{tail:.*}", forwarder.forward),
    ])
    return app
