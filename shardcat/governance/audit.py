"""The audit log: who did what to which securable, allowed or why not, and when.

Every request a shard (or the router, for what it serves itself) answers becomes one row
of `audit_log` (migration 0006): the aiohttp `middleware` records the caller, the action
(named after the route: getTable, createTable, ...), the securable, the HTTP status and
the error code and message of a refusal. A request that holds many decisions (the items
of a batched resolve) adds one row per decision with `record_all(...)`; a handler that
knows its securable better than the route does says so with `annotate(...)`.

Recording never blocks or fails a request: events go to a bounded in-memory buffer that a
background task writes in batches (COPY). When the buffer is full (the database is slow or
down) new events are dropped and counted in `AuditLog.stats`; on shutdown the buffer is
flushed. `GET /api/2.1/unity-catalog/shardcat/audit` reads the log (audit_api.py), with filters and
paging, for account admins (all events) and metastore admins (their metastore's).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from aiohttp import web

from ..shards.session import Session
from ..shards.session import current as current_session
from ..web import registry
from ..web.wire import PREFIX, REQUEST_ID_HEADER
from ..store.audit import COLUMNS as _COLUMNS
from ..store.audit import write_rows
from ..store.errors import is_db_unavailable

log = logging.getLogger(__name__)

REFUSED = (401, 403)              # statuses that mean "not allowed"


# ---- the writer -------------------------------------------------------------------------------


MAX_COPY_ROWS = 2_000       # rows per COPY at most: encoding them holds the serving event loop. Each
                            # COPY takes a few loop turns, which bounded 500 per COPY to ~5,000 rows/s
DROP_WARNING_SECONDS = 10.0     # at most one warning this often while events are dropped


class AuditLog:
    """Buffers audit events and writes them in batches from a background task: `batch` pending
    events wake it before its `interval` is up, and one COPY takes all pending, up to MAX_COPY_ROWS.

    `batch` is small on purpose (64). Under load the writer then streams: a COPY starts as soon as
    64 rows wait, and those that arrive while it runs make the next one (about 100 to 150 rows at
    16,000 requests/s), so PostgreSQL and the serving loop take the log in small, even steps. With
    `batch` 500 (a COPY of ~570 rows every ~35 ms; its encoding alone held the loop 0.7 ms, up to
    5 ms) a shard serving 32 closed-loop clients answered with p99 ~6 ms instead of ~4, its loop
    idle 8% of the time instead of 3% (docs/benchmarks.md, issue 34). Under light load the `interval` still gathers rows, so
    a COPY's own cost (statement, round trips, pool) is paid once per 64 requests or more, not
    every few requests."""

    def __init__(self, store, *, max_pending: int = 50_000, batch: int = 64, interval: float = 0.2):
        self.store = store
        self.max_pending = max_pending
        self.batch = batch
        self.interval = interval
        self.pending: deque[tuple] = deque()
        self.stats = {"recorded": 0, "written": 0, "dropped": 0, "write_failures": 0}
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()          # held while a batch is written: background task or flush
        self._task: asyncio.Task | None = None
        self._warned_at = -DROP_WARNING_SECONDS

    def submit(self, event: dict) -> None:
        """Queue one event; never blocks, never raises. A full buffer drops it (counted)."""
        self.submit_row(tuple([_storable(event.get(c)) for c in _COLUMNS]))

    def submit_row(self, row: tuple) -> None:
        """Queue one event as a row of storable values in `_COLUMNS` order (`submit_rows`)."""
        self.submit_rows((row,))

    def submit_rows(self, rows: Sequence[tuple]) -> None:
        """Queue events as rows of storable values in `_COLUMNS` order; what does not fit is dropped."""
        room = self.max_pending - len(self.pending)
        if len(rows) > room:
            self._drop(len(rows) - max(room, 0))
            rows = rows[:max(room, 0)]
        self.pending.extend(rows)
        self.stats["recorded"] += len(rows)
        if len(self.pending) >= self.batch:
            self._wake.set()

    def _drop(self, count: int) -> None:
        self.stats["dropped"] += count
        now = time.monotonic()
        if now - self._warned_at >= DROP_WARNING_SECONDS:
            self._warned_at = now
            log.warning("audit: the buffer is full, the database takes events slower than they come; "
                        "%d event(s) dropped so far", self.stats["dropped"])

    @property
    def submitted(self) -> int:
        """Events offered so far, kept or dropped: one or more per answered API request."""
        return self.stats["recorded"] + self.stats["dropped"]

    async def start(self, app=None) -> None:
        _by_store.setdefault(id(self.store), []).append(self)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, app=None, timeout: float = 5.0) -> None:
        """Stop the background task and write what is buffered (for up to `timeout` seconds)."""
        running = _by_store.get(id(self.store), [])
        if self in running:
            running.remove(self)
        if not running:
            _by_store.pop(id(self.store), None)
        try:
            await asyncio.wait_for(self._finish(), timeout)
        except Exception as e:   # database gone at shutdown: say how much is lost
            log.warning("audit: %d event(s) not written at shutdown: %r", len(self.pending), e)
            self.stats["dropped"] += len(self.pending)
            self.pending.clear()
        finally:
            if self._task is not None:      # still there only if the timeout struck first
                self._task.cancel()
                self._task = None

    async def _finish(self) -> None:
        """Stop the writer between batches, then write the rest. Cancelled in the middle of one,
        a batch PostgreSQL already took would go back to the buffer and be written twice."""
        async with self._lock:
            if self._task is not None:
                self._task.cancel()
                await asyncio.wait([self._task])     # not `await task`: that would swallow our own cancellation
                self._task = None
            while self.pending:
                await self._write_batch()

    async def flush(self) -> None:
        """Write everything buffered now; raises if the database refuses (the events stay buffered).
        Every batch is written under the lock, so this also waits for one the background task
        already took from the buffer: when it returns, every event submitted before it is written."""
        async with self._lock:
            while self.pending:
                await self._write_batch()

    async def _write_due(self) -> None:
        """The background task's turn: what is pending, written in COPYs of at least `batch` rows
        while that many are waiting (the rest waits for the next wake-up or `interval`). Under load,
        rows keep arriving while a COPY runs; writing them at once, as `flush` does, made a stream
        of COPYs of a few rows each, and a COPY's own cost (a statement, a round trip, the pool) was
        paid every few requests instead of every few hundred."""
        async with self._lock:
            while self.pending:
                await self._write_batch()
                if len(self.pending) < self.batch:
                    return

    async def _run(self) -> None:
        backoff = self.interval
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), backoff)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._write_due()
                backoff = self.interval
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.stats["write_failures"] += 1
                backoff = min(backoff * 2, 5.0)
                log.warning("audit: cannot write %d event(s) yet: %r", len(self.pending), e)

    async def _write_batch(self) -> None:
        """One batch from the front of the buffer; the caller holds `_lock`."""
        rows = [self.pending.popleft() for _ in range(min(MAX_COPY_ROWS, len(self.pending)))]
        try:
            await write_rows(self.store, rows)
        except BaseException as e:
            if isinstance(e, Exception) and not is_db_unavailable(e):
                # The database refused these rows themselves: retrying would fail forever.
                self.stats["dropped"] += len(rows)
                log.error("audit: dropped %d event(s) the database refused: %r", len(rows), e)
                return
            # Back to the front, in order; what no longer fits is dropped (and counted).
            room = max(self.max_pending - len(self.pending), 0)
            if len(rows) > room:
                self._drop(len(rows) - room)
            self.pending.extendleft(reversed(rows[:room]))
            raise
        self.stats["written"] += len(rows)


APP_KEY = web.AppKey("shardcat_audit", AuditLog)   # app[APP_KEY]: the app's audit log
def _storable(value):
    """Text PostgreSQL can store: request paths may carry NULs or unpaired surrogates."""
    if isinstance(value, str) and not (value.isascii() and "\x00" not in value):
        return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\\0")
    return value


# The running log of each store: where work outside a request (maintenance) records. By store, not
# "the app that started last": in one process several apps may run (tests), each with its database.
_by_store: dict[int, list[AuditLog]] = {}      # id(store) -> its running logs, the newest last


# ---- what a request records -----------------------------------------------------------------

def _context() -> dict | None:
    """The current request's audit context (its session's `audit`): the log, request id and route,
    and the securable a handler names; None outside an audited request."""
    session = current_session()
    return session.audit if session is not None else None


def context(audit_log: AuditLog, request_id: str, label: str) -> dict:
    """The audit context of a request (for its session): what `record_all`, `annotate` and its
    row find. `label`: its route's row label (`FrontRoute.label` for a front's)."""
    return {"log": audit_log, "request_id": request_id, "route": label}


def annotate(securable_type: str | None, full_name: str | None, securable_id: str | None = None) -> None:
    """Name the securable the current request acts on (when the route alone does not say)."""
    current = _context()
    if current is not None:
        current.update(securable_type=securable_type, securable_name=full_name, securable_id=securable_id)


class AccessDecision(NamedTuple):
    """One access decision a request took besides its own (an item of a batched resolve)."""
    action: str
    securable_type: str | None
    full_name: str | None
    allowed: bool
    securable_id: str | None = None
    error_code: str | None = None
    message: str | None = None


def new_request_id() -> str:
    """32 hex digits, unique across processes: a random prefix per process and a counter (no
    system call per request, as os.urandom would make)."""
    return f"{_id_prefix}{next(_id_counter):016x}"


def _new_id_source() -> None:
    global _id_prefix, _id_counter
    _id_prefix, _id_counter = os.urandom(8).hex(), itertools.count()


_new_id_source()
os.register_at_fork(after_in_child=_new_id_source)     # a forked child must not repeat its parent's ids


def record_all(caller, decisions: Iterable[tuple], store=None) -> None:
    """Record a request's access decisions, one row each (same request id, no status), besides
    the request's own row: `AccessDecision`s, or plain tuples of its seven fields in its order.
    Outside a request, into the running log of `store`. Never blocks or raises; a no-op where no
    audit log runs."""
    current = _context()
    audit_log = current["log"] if current is not None else (_by_store.get(id(store)) or [None])[-1]
    if audit_log is None:
        return
    try:
        # the row's leading columns, the same for every decision of the request
        head = (int(time.time() * 1000), current["request_id"] if current else None, *_caller_columns(caller))
        route = current["route"] if current else None     # the label is storable already (`_route_facts`)
        # rows straight in _COLUMNS order: a resolve may hold a thousand
        audit_log.submit_rows([(*head, action, route, kind, _text(name, 1000), _text(ident, 200), bool(allowed), None,
                                code, _text(message, 2000))
                               for action, kind, name, allowed, ident, code, message in decisions])
    except Exception:
        log.exception("audit: cannot record a decision")


def _caller_columns(caller) -> tuple:
    """A row's (principal, workspace_id, metastore_id)."""
    if caller is None:
        return None, None, None
    return _storable(caller.name), caller.workspace_id, _uuid_or_none(caller.metastore_id)


@functools.lru_cache(maxsize=4096)
def _uuid_or_none(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value is not None else None
    except ValueError:
        return None


def is_uuid(value) -> bool:
    return _uuid_or_none(value) is not None


def _text(value, limit: int):
    """A text column's value: at most `limit` characters (then "..."), storable."""
    if not isinstance(value, str):
        return value
    if len(value) > limit:
        value = value[:limit] + "..."
    return value if value.isascii() and "\x00" not in value else _storable(value)


# Route resources -> securable types (the endpoint registry's, for paths that match no route).
_SECURABLES = registry.securables()
_VERBS = {"POST": "create", "PATCH": "update", "PUT": "set", "DELETE": "delete"}


def _camel(segment: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in segment.replace("_", "-").split("-"))


def _singular(word: str) -> str:
    if word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


@functools.lru_cache(maxsize=1024)
def action_of(method: str, route: str) -> str:
    """An operation name for a route (without the API prefix): the endpoint registry's (web/registry.py);
    for a path that matches no route, made up the same way (getTable, listCatalogs, createSchema...)."""
    endpoint = registry.endpoint(method, PREFIX + route) or registry.endpoint(method, route)
    if endpoint is not None:
        return endpoint.action
    parts = [p for p in route.split("/") if p]
    literals = [p for p in parts if not p.startswith("{")]
    if not literals:
        return method.lower()
    noun = _camel(literals[-1])
    if literals[-1] == "versions":
        noun = "ModelVersions"
    elif literals[-1] == "aliases":
        noun = "RegisteredModelAliases"
    item = parts[-1].startswith("{")
    if method == "GET":
        return ("get" + _singular(noun)) if item else ("list" + noun)
    return _VERBS.get(method, method.lower()) + _singular(noun)


def _route_of(request: web.Request) -> tuple[str, str, str]:
    """(route pattern without the API prefix, the row's route column, action); the path itself when
    no route matched. The same for every request of a route, so worked out once per route."""
    resource = request.match_info.route.resource
    if resource is None:
        return _route_facts(request.method, request.path)
    return _route_facts(request.method, resource.canonical)


@functools.lru_cache(maxsize=4096)
def _route_facts(method: str, canonical: str) -> tuple[str, str, str]:
    route = canonical[len(PREFIX):] if canonical.startswith(PREFIX) else canonical
    return route, _storable(f"{method} {route}"), action_of(method, route)


@functools.lru_cache(maxsize=1024)
def _literals(route: str) -> tuple[str, ...]:
    return tuple(p for p in route.split("/") if p and not p.startswith("{"))


def _securable_from_route(route: str, match: dict) -> tuple[str | None, str | None, str | None]:
    """(type, full name, id) as far as the route and its path parameters say."""
    parts = _literals(route)
    if not parts:
        return None, None, None
    if parts[0] == "permissions":
        return (match.get("securable_type") or "").upper() or None, match.get("full_name"), None
    if parts[0] == "models" and "version" in match:
        return "MODEL_VERSION", f"{match.get('full_name')}.{match['version']}", None
    kind = _SECURABLES.get(parts[0])
    if parts[0] == "metastores" and "id" in match:
        return kind, None, match["id"]
    if parts[0] == "workspaces":
        return "METASTORE", None, None
    if parts[:2] == ("delta", "v1") and "catalog" in match:     # /delta/v1/catalogs/{catalog}/schemas/{schema}/...
        if "table" in match:
            return "TABLE", f"{match['catalog']}.{match['schema']}.{match['table']}", None
        return ("SCHEMA", f"{match['catalog']}.{match['schema']}", None) if "schema" in match else \
            ("CATALOG", match["catalog"], None)
    if parts[:2] == ("delta", "v1") and "table_id" in match:
        return "TABLE", None, match["table_id"]
    name = match.get("full_name") or match.get("name")
    return kind, name, None


def _from_json(data: dict, kind: str | None) -> tuple[str | None, str | None]:
    """(full name, id) of the object a request body or a JSON answer describes."""
    # Only the naming fields, and only strings: nothing else of a request body (its secrets, say) is kept.
    name = data.get("full_name") if isinstance(data.get("full_name"), str) else None
    if name is None and isinstance(data.get("name"), str):
        scope = [data.get(k) for k in ("catalog_name", "schema_name") if isinstance(data.get(k), str)]
        name = ".".join([*scope, data["name"]])
    ident = None
    for key in ("table_id", "volume_id", "schema_id", "catalog_id", "function_id", "model_id", "id",
                "metastore_id"):
        if isinstance(data.get(key), str):
            ident = data[key]
            break
    if name is None and isinstance(data.get("url"), str):
        name = data["url"]
    return name, ident


def _json_of(raw: bytes | None) -> dict:
    if not raw or len(raw) > (1 << 20):
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def middleware(audit_log: AuditLog):
    """Record every request (outermost middleware: it sees the final status and error JSON). Being
    every app's first, it enters the request's session (shards/session.py), holding its audit context."""

    @web.middleware
    async def audited(request: web.Request, handler):
        if not registry.audited(request.path):     # probes, metrics, the explorer's files
            with Session():
                return await handler(request)
        request_id = new_request_id()
        at = int(time.time() * 1000)
        route, label, action = _route_of(request)
        current = context(audit_log, request_id, label)
        with Session(audit=current):
            response = await handler(request)
        if "forwarded" in current:
            return response
        try:
            sent = None
            if request.method == "POST" and response.status >= 400 and request.body_exists:
                sent = await request.read()     # already read by the handler: aiohttp keeps it
            audit_log.submit_row(_row(request, response, current, route, action, at, sent))
        except Exception:
            log.exception("audit: cannot record %s %s", request.method, request.path)
        if not response.prepared:
            response.headers[REQUEST_ID_HEADER] = request_id
        return response

    return audited


def recorded_elsewhere() -> None:
    """The current request is answered, and recorded, by another server (a router forwarding to a shard)."""
    current = _context()
    if current is not None:
        current["forwarded"] = True


def _row(request: web.Request, response: web.StreamResponse, current: dict, route: str, action: str, at: int,
         sent: bytes | None) -> tuple:
    """A request's row in _COLUMNS order, built directly: this runs for every request."""
    body = getattr(response, "body", None)
    return _row_for(current, route, action, at, request.method, request.match_info, request.get("caller"),
                    response.status, body if isinstance(body, bytes) else None, sent)


def _row_for(current: dict, route: str, action: str, at: int, method: str, match, caller, status: int,
             body: bytes | None, sent: bytes | None) -> tuple:
    if "securable_type" in current:     # the handler named its securable (`annotate`)
        kind = current["securable_type"] or _securable_from_route(route, match)[0]
        name, ident = current["securable_name"], current["securable_id"]
        creates = False
    else:
        kind, name, ident = _securable_from_route(route, match)
        creates = method == "POST" and name is None
    # Decode the answer only when it is needed: errors (small) and creates (they name their object).
    # Reads are the bulk of the traffic and their answers can be large; their route names the securable.
    answer = _json_of(body) if status >= 400 or creates else {}
    if creates:
        # A create names its object in the answer (or, when refused, in the request body).
        name, ident = _from_json(answer if status < 400 else _json_of(sent), kind)
    error_code = message = None
    if status >= 400:
        if isinstance(answer.get("error"), dict):     # the UC Delta API's shape: {"error": {"type", "message"}}
            answer = {"error_code": answer["error"].get("type"), "message": answer["error"].get("message")}
        error_code, message = _text(answer.get("error_code"), 200), _text(answer.get("message"), 2000)
    return _row_of(at, current["request_id"], caller, action, current["route"], kind, name, ident,
                   status, error_code, message)


class FrontRoute:
    """What every row a front records for one route shares (the route, its row label, its action),
    worked out once when the front starts instead of per request (`context`, `answered_row`)."""

    __slots__ = ("route", "label", "action")

    def __init__(self, method: str, route_pattern: str):
        self.route, self.label, self.action = _route_facts(method, route_pattern)


def answered_row(route: FrontRoute, match: dict, caller, request_id: str, at: int) -> tuple:
    """The row the middleware records for a request answered 200 whose route names its securable
    and whose handler names none: for a front answering such a request itself (serving/front.py)."""
    kind, name, ident = _securable_from_route(route.route, match)
    return _row_of(at, request_id, caller, route.action, route.label, kind, name, ident, 200, None, None)


def written_row(route: FrontRoute, current: dict, caller, at: int, status: int, body: bytes,
                sent: bytes) -> tuple:
    """The row the middleware records for a write (a POST without path parameters) that a front
    answered itself (serving/front.py), `current` its audit `context`, `body` its answer, `sent`
    the request's body."""
    return _row_for(current, route.route, route.action, at, "POST", {}, caller, status, body, sent)


def _row_of(at: int, request_id: str, caller, action: str, label: str, kind, name, ident, status: int,
            error_code: str | None, message: str | None) -> tuple:
    principal, workspace_id, metastore_id = _caller_columns(caller)
    if metastore_id is None and kind == "METASTORE":
        metastore_id = _uuid_or_none(ident)
    return (at, request_id, principal, workspace_id, metastore_id, action, label, _text(kind, 200),
            _text(name, 1000), _text(ident, 200), status not in REFUSED, status, error_code, message)
