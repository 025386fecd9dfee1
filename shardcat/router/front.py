"""The router's public HTTP/1.1 server: forwards a metastore's requests straight to its shard, and
hands every other request to the full router app (router/forward.py) on a private socket.

Behind aiohttp's server the router reached 20.7% of the bare-server ceiling at 32 clients, and
behind this front 34.9% (docs/benchmarks.md). It parses requests with httptools and, for the
bulk of the traffic (reads and writes of a metastore whose owner and caller are already known),
sends the request to the owner shard and relays its answer without building either side's objects.
Anything else (account-level routes, a caller or an owner not yet cached, a shard that refused or
could not be reached, a request too large) goes to the router app unchanged, so the app stays the
one definition of the router's behaviour: authentication errors, retries, audit, error JSON. A
read that failed on the fast path is safe to send again there; a write that lost its connection
after it was sent may have been applied: it is answered here as the app answers it (503, outcome
unknown) and never sent again (issue 33). A shard's NOT_OWNER (421) says it did nothing, write
or not (serving/app.py answers a write it applied otherwise): the router app sends it on.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from ..auth import bearer
from ..errors import CatalogError
from ..web.wire import PREFIX, RELAYED_HEADERS
from ..web import http1
from ..web.http_limits import HttpLimits
from .forward import AUTHENTICATOR, FORWARDER, Forwarder, metastore_in_path, safe_to_resend
from .routing import WRITE_COST
from ..governance.authentication import Authenticator
from ..web.fronts import answered
from ..web.metrics import OBSERVED
from ..web.request_log import RequestLog
from ..web.shard_client import Address, Answer, ConnectionLost, ShardClient, ShardUnreachable

# The shard's answer headers a fast-path answer carries: those the router app relays (forward.py).
_RELAYED = ("content-type", "date", *(name.lower() for name in RELAYED_HEADERS))
# What the fast path sends to a metastore's shard: reads, and writes (sent once, never again).
_FAST_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


class Front:
    """Decides where each request goes and gets its answer: the fast path, or the router app."""

    def __init__(self, app: web.Application, app_address: Address):
        """`app`: the router app (make_router_app), listening at `app_address`."""
        self.forwarder: Forwarder = app[FORWARDER]
        self.authenticator: Authenticator = app[AUTHENTICATOR]
        self.app_address = app_address
        self.client = ShardClient()         # to the router app; the forwarder has its own to the shards
        self._own_routes = _own_routes(app, self.forwarder.forward)
        # requests answered each way, and by operation: plain ints the router app's /metrics reads
        observed = app[OBSERVED]
        self.requests = observed.requests
        self.stats = observed.front
        self.stats.update(fast=0, through_app=0)
        self.request_log = RequestLog("router")

    async def answer(self, request: http1.Request) -> Answer:
        return await answered(self, request, self._fast(request) if self._fast_path(request) else _nothing())

    def _fast_path(self, request: http1.Request) -> bool:
        path = request.path
        if "%" in path or not path.startswith(PREFIX + "/"):
            return False
        if request.method not in _FAST_METHODS:
            return False
        first = path[len(PREFIX) + 1:].partition("/")[0]
        return not any(matches(path) for matches in self._own_routes.get(first, ()))

    async def _fast(self, request: http1.Request) -> Answer | None:
        """The owner shard's answer, or None where the router app must decide."""
        token = bearer(request.headers.get("authorization"))
        caller = self.authenticator.cached(token) if token else None
        if caller is None:
            return None
        metastore_id = metastore_in_path(request.path) or caller.metastore_id
        resendable = safe_to_resend(request.method, request.path)
        # counted against the metastore's load as the router app counts it: a write weighs WRITE_COST
        shard = self.forwarder.routing.assigned(metastore_id, 1.0 if resendable else WRITE_COST) \
            if metastore_id else None
        if shard is None:
            return None
        headers = self.forwarder.shard_headers(metastore_id, request.headers)
        try:
            answer = await self.forwarder.client.request(shard.address, request.method, request.raw_path, headers,
                                                         request.body)
        except ShardUnreachable:
            return None                     # it never left: the router app sends it, with retries
        except ConnectionLost:
            if resendable:
                return None                 # a read: the router app sends it again, with retries
            return _unknown_outcome(shard.name)
        if answer.status == 421:            # not the owner (any more): the router app reasserts
            return None
        self.forwarder.acknowledge(metastore_id, answer)
        return Answer(answer.status, {k: answer.headers[k] for k in _RELAYED if k in answer.headers}, answer.body)


def _unknown_outcome(shard_name: str) -> Answer:
    """A write whose connection was lost after it was sent: as the router app answers it (forward.py)."""
    error = CatalogError("TEMPORARILY_UNAVAILABLE",
                         f"Lost the connection to {shard_name} mid-request; the outcome is unknown.")
    return Answer(error.status, {"content-type": "application/json"}, orjson.dumps(error.to_json()))


def _own_routes(app: web.Application, forward_handler) -> dict[str, list]:
    """Matchers of the router app's own routes under the API prefix (everything but the forwarding
    catch-all), by the path segment after the prefix: a path none of them matches is a metastore's."""
    out: dict[str, list] = {}
    for resource in app.router.resources():
        if all(route.handler == forward_handler for route in resource):
            continue
        info = resource.get_info()
        shape = info.get("path") or info.get("formatter") or ""
        if not shape.startswith(PREFIX + "/"):
            continue
        first = shape[len(PREFIX) + 1:].partition("/")[0]
        if "{" in first:
            raise ValueError(f"the router's own route {shape} has no fixed first segment")
        matcher = info["pattern"].fullmatch if "pattern" in info else shape.__eq__
        out.setdefault(first, []).append(matcher)
    return out


async def start_front(app: web.Application, host: str, port: int,
                      limits: HttpLimits | None = None) -> http1.Listening:
    """Serve the router app (make_router_app) behind a front on (host, port); port 0 picks a free one.
    `limits`: what a client may send (the defaults of HttpLimits unless given)."""
    return await http1.serve_behind(app, lambda address: Front(app, address), host, port, limits=limits)


async def _nothing() -> None:
    """The fast path's answer for a request it does not take."""
    return None
