"""Structured request logs: one JSON line per answered request on the `shardcat.requests` logger,
at info level, written by the fronts (which see every request) when `shardcat serve --request-log`
turns it on. Off, a front pays one attribute check per request.

A line holds the request id, principal, operation (the endpoint registry's name), path (without
its query), status, latency, metastore and shard; never a header, a token, a query string or a body.
"""

from __future__ import annotations

import logging

import orjson

from ..auth import bearer
from .wire import REQUEST_ID_HEADER

_ID = REQUEST_ID_HEADER.lower()

LOGGER = "shardcat.requests"
_log = logging.getLogger(LOGGER)
_log.setLevel(logging.WARNING)      # off until `turn_on`, whatever the root logger's level


class RequestLog:
    """Writes request lines while its logger is enabled for info (checked when the front starts)."""

    def __init__(self, server: str):
        self.server = server
        self.enabled = _log.isEnabledFor(logging.INFO)

    def write(self, request, status: int, seconds: float, operation: str, answer_headers: dict,
              authenticator=None) -> None:
        caller = None
        if authenticator is not None:
            token = bearer(request.headers.get("authorization"))
            caller = authenticator.cached(token) if token else None
        line = {"request_id": answer_headers.get(REQUEST_ID_HEADER) or answer_headers.get(_ID),
                "principal": caller.name if caller else None, "operation": operation,
                "method": request.method, "path": request.path, "status": status,
                "latency_ms": round(seconds * 1000, 3),
                "metastore": caller.metastore_id if caller else None, "server": self.server}
        _log.info(orjson.dumps(line).decode())


def turn_on() -> None:
    """`--request-log`: the request lines at info level, each a JSON object alone on its line."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    _log.addHandler(handler)
    _log.setLevel(logging.INFO)
    _log.propagate = False
