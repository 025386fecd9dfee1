"""Idempotency-Key on the Iceberg REST catalog's mutations: a retried request answers its first outcome.

Every mutating operation (MUTATIONS) takes the header. The first request with a key claims it in
PostgreSQL (store/idempotency.py) and records its final answer (2xx or 4xx, as the spec's finalization
rules say); the same caller's later request with that key answers the recorded status and body without
running again, for LIFETIME (advertised in /v1/config as `idempotency-key-lifetime`). A key is scoped to
its metastore and caller: another caller's request with the same key is that caller's own request, and
never hears the first one's answer. A key names the request it was first sent with (method, path and body,
the body as JSON whatever its spelling): sent with another, it is refused (400), so a key never answers a
request it was not first sent with. While the first request runs, a second one with its key answers 503
(retry later); a 5xx frees the key, so a retry runs the operation again. Keys live in the directory's
database, so a retry that reaches another shard (a failover) or a restarted server finds them. What is
kept of an answer leaves out its storage credentials (`config`, `storage-credentials`): no vended key is
written to the database, and a replayed answer carries none (the client asks loadCredentials, or loads).
"""

from __future__ import annotations

import hashlib
import json
import random
import re

from aiohttp import web

from ....auth import Caller
from ....entities.values import now_ms
from ....errors import CatalogError
from ....store import idempotency as keys
from ....web.iceberg_errors import iceberg_response

LIFETIME = "PT1H"
LIFETIME_MS = 60 * 60 * 1000
HEADER = "Idempotency-Key"
PURGE_CHANCE = 0.01          # a finished request purges the expired keys this often
MUTATIONS = frozenset({
    "createNamespace", "dropNamespace", "updateProperties", "createTable", "registerTable", "updateTable",
    "dropTable", "unregisterTable", "renameTable", "commitTransaction", "createView", "registerView",
    "replaceView", "dropView", "renameView", "planTableScan", "cancelPlanning", "fetchScanTasks",
})
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


SECRET_FIELDS = ("config", "storage-credentials")


def stored(body):
    """An answer as it is kept for replay: without the storage credentials it may carry."""
    if not isinstance(body, dict):
        return body
    return {k: ({} if k == "config" else []) if k in SECRET_FIELDS else v for k, v in body.items()}


def _replay(status: int, body) -> web.Response:
    if body is None:
        return web.Response(status=status)
    return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json")


async def _digest(request: web.Request) -> str:
    """The request body's fingerprint: its JSON spelled one way (key order and spaces aside), else its bytes."""
    raw = await request.read() if request.can_read_body else b""
    try:
        raw = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode() if raw else b""
    except (ValueError, RecursionError):
        pass                                # not JSON: the operation refuses it; its bytes name it here
    return "body:" + hashlib.sha256(raw).hexdigest()[:32]


async def once(store, request: web.Request, caller: Caller, operation: str, run) -> web.Response:
    """`run()`'s answer, or, for a key this caller already used, the answer its first request had."""
    key = request.headers.get(HEADER)
    if key is None or operation not in MUTATIONS:
        return await run()
    if not _UUID.fullmatch(key):
        return iceberg_response(400, "BadRequestException", f"{HEADER} must be a UUID (36 characters), "
                                                            f"got {key[:40]!r}.")
    try:
        metastore = caller.metastore()
    except CatalogError:
        return await run()                  # no metastore: the operation answers that itself
    key = key.lower()
    target = f"{request.method} {request.rel_url.raw_path} {await _digest(request)}"
    now = now_ms()
    held = await keys.claim(store, metastore, caller.principal_id, key, target, now, now - LIFETIME_MS)
    if held is not None:
        if held.operation != target:
            return iceberg_response(400, "BadRequestException", f"This {HEADER} was used for another request "
                                                                f"({held.operation.split(' body:')[0][:200]}, or "
                                                                "another body); use a new key.")
        if held.status is None:
            return iceberg_response(503, "ServiceUnavailableException", f"The request with this {HEADER} is still "
                                                                        "running; retry later.")
        return _replay(held.status, held.body)
    try:
        response = await run()
    except BaseException:
        await keys.release(store, metastore, caller.principal_id, key)
        raise
    if response.status >= 500:
        await keys.release(store, metastore, caller.principal_id, key)
    else:
        body = json.loads(response.body) if response.body else None
        await keys.finish(store, metastore, caller.principal_id, key, response.status, stored(body))
    if random.random() < PURGE_CHANCE:
        await keys.purge(store, now - LIFETIME_MS)
    return response
