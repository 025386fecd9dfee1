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
from ..governance.audit_api import audit_handlers
from ..openapi import openapi_handlers
from ..web.wire import (CLIENT_ADDRESS_HEADER, CLIENT_HOST_HEADER, FORWARDED_FOR_HEADER, HEAD_HEADER, MAX_BODY_BYTES,
                        MIN_VERSION_HEADER, PREFIX, RELAYED_HEADERS, SHARING_PREFIX, VERSION_HEADER)
from ..web import registry
from ..web.kit import healthz, ok
from ..web.routes import routes
from ..web.client_address import forwarded_for
from ..catalog.tree.metastores import AccountService
from ..catalog.protocols.delta_sharing.routing import metastore_of as sharing_metastore
from ..governance.oidc import OidcConfig, OidcVerifier
from ..store.db import Store
from ..entities.values import bigint_text
from .account import AccountApi
from ..governance.authentication import Authenticator
from ..web.middleware import error_middleware, text_input
from .routing import WRITE_COST, RoutingTable
from .metrics import probe_handlers
from .nodes import node_handlers
from ..web.explorer import explorer_handlers
from ..web.metrics import OBSERVED, Observed
from ..web.shard_client import Answer, ConnectionLost, ShardClient, ShardUnreachable

RETRY_BUDGET_SECONDS = 5.0
# What a request goes on to its shard with: who asks, the body's type; for Delta Sharing the
# response format asked for, a file's byte range, and the client's address and Host as the front saw them;
# for the Iceberg REST catalog its idempotency key, ETag and access delegation.
_HOP_HEADERS = ("Authorization", "Content-Type", "delta-sharing-capabilities", "Range", CLIENT_ADDRESS_HEADER,
                CLIENT_HOST_HEADER,
                # the Iceberg REST catalog's: a retried mutation's key, a load's ETag, how the client reads files
                "Idempotency-Key", "If-None-Match", "X-Iceberg-Access-Delegation")
_VERSION = VERSION_HEADER.lower()


def _int(value: str | None) -> int:
    return bigint_text(value) or 0


def metastore_in_path(path: str) -> str | None:
    """The metastore a `/metastores/{id}/...` path names (others are the caller's own metastore's)."""
    rest = path[len(PREFIX):]
    return rest.split("/")[2] if rest.startswith("/metastores/") else None


def _metastore_of(request: web.Request) -> str:
    found = metastore_in_path(request.path) or sharing_metastore(request.path)
    if found is not None:
        return found
    if "caller" not in request:       # a Delta Sharing path that names no metastore: nothing to forward to
        raise CatalogError("NOT_FOUND", f"No API found for {request.method} {request.path}.")
    return request["caller"].metastore()


def safe_to_resend(method: str, path: str) -> bool:
    """Whether a request only reads: sent again after a lost connection, it changes nothing."""
    return registry.read_only(method, path)


class Forwarder:
    def __init__(self, routing: RoutingTable, store: Store | None = None):
        self.routing = routing
        self.store = store      # its secret keys vouch for a client's address to the shards
        # The router alone decides what to send again: a write that may have reached a shard is not resent.
        self.client = ShardClient(gone=self._declared_dead)
        # Per metastore, the newest version any answer through here reflected: every later request
        # asks its shard for at least that, so no client reads older than a write it saw acknowledged,
        # even while two shards own the metastore.
        self.acknowledged: dict[str, int] = {}

    async def close(self, app) -> None:
        self.client.close()

    def _declared_dead(self, address) -> bool:
        """Whether the shard at `address` was declared dead: a read waiting on it goes to the new owner."""
        return any(h.address == address and not h.alive for h in self.routing.shards.values())

    async def routes_table(self, request: web.Request) -> web.Response:
        """The routing table, so a client library can send requests straight to the owner shard."""
        caller = request["caller"]
        out = self.routing.snapshot()
        if caller.metastore_id:
            out["my_shard"] = (await self.routing.shard_for(caller.metastore_id, cost=0)).url
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
        address = request_headers.get(CLIENT_ADDRESS_HEADER.lower())
        vouched = forwarded_for(self.store.secrets, address) if self.store is not None and address else None
        if vouched:     # the shard's front sees this router, not the client: a recipient's IP list needs the client
            headers[FORWARDED_FOR_HEADER] = vouched
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
            headers[HEAD_HEADER] = "HEAD"                                   # HEAD is not a GET's (catalog/protocols/delta_api.py)
        deadline = time.monotonic() + RETRY_BUDGET_SECONDS
        cost = 1.0 if resendable else WRITE_COST      # counted once, against the metastore's load
        while True:
            try:
                shard = await self.routing.shard_for(metastore_id, cost)
            except LookupError:
                shard = None
            cost = 0.0
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
        for name in RELAYED_HEADERS:
            value = answer.headers.get(name.lower())
            if value is not None:
                response.headers[name] = value
        return response


FORWARDER = web.AppKey("shardcat_forwarder", Forwarder)
AUTHENTICATOR = web.AppKey("shardcat_authenticator", Authenticator)


def make_router_app(store: Store, routing: RoutingTable, supervisor_events: dict[str, int] | None = None,
                    oidc: OidcConfig | None = None, nodes=None) -> web.Application:
    """The whole router as an aiohttp app (router/front.py serves it behind a faster front).
    `supervisor_events`: the supervisor's counts of its events by kind, for /metrics; `oidc`: an
    identity provider whose tokens sign users in (governance/oidc.py); `nodes`: what drains a
    node (the supervisor: router/nodes.py)."""
    verifier = OidcVerifier(oidc, store) if oidc else None
    authenticator = Authenticator(store, identity_provider=verifier)
    forwarder = Forwarder(routing, store)
    # Audit: the account-level requests served here; forwarded ones are recorded by their shard.
    audit_log = audit.AuditLog(store)
    app = web.Application(middlewares=[audit.middleware(audit_log), error_middleware(MAX_BODY_BYTES),
                                       authenticator.middleware, text_input],
                          client_max_size=MAX_BODY_BYTES)
    app[audit.APP_KEY] = audit_log
    app[FORWARDER], app[AUTHENTICATOR] = forwarder, authenticator
    app[OBSERVED] = Observed()      # the front counts into it; /metrics reads it
    app.on_startup.append(audit_log.start)
    app.on_cleanup.append(forwarder.close)
    app.on_cleanup.append(audit_log.stop)
    account = AccountApi(AccountService(store, lambda: routing.load), authenticator, verifier)
    handlers = {"healthz": healthz, **openapi_handlers(), **explorer_handlers(verifier),
                **probe_handlers(store, routing, audit_log, supervisor_events if supervisor_events is not None else {}),
                **account.handlers(), "getRouting": forwarder.routes_table, **node_handlers(nodes),
                **audit_handlers(audit_log)}
    app.add_routes([
        *routes(registry.ACCOUNT, {None: handlers}, extra=registry.ROUTER),
        web.route("*", PREFIX + "/{tail:.*}", forwarder.forward),     # the rest: a metastore's, to its shard
        web.route("*", SHARING_PREFIX + "/{tail:.*}", forwarder.forward),     # Delta Sharing: the metastore's
        # Databricks' lineage-tracking API sits outside the prefix; it is a metastore's too
        web.route("*", "/api/2.0/lineage-tracking/{tail:.*}", forwarder.forward),
    ])
    return app
