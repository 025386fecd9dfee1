"""The audit log's read API (`GET /shardcat/audit`): account admins read every metastore's events,
a metastore admin its own; filters, pages, and a caller's own reads left out on request. The log
itself (what each request records, and its writer) is audit.py's."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ..entities.values import bigint_text
from ..errors import CatalogError, invalid
from ..store.audit import query
from ..web import registry
from ..web.routes import Handler
from ..web.paging import decode_token, encode_token, page_size
from . import authorize
from .audit import AuditLog, is_uuid


def _token(before: int) -> str:
    return encode_token(before, "before")


def _before(token: str | None) -> int | None:
    if not token:
        return None
    return decode_token(token, "before", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63)


def _ms(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    ms = bigint_text(value)
    if ms is not None:
        return ms
    raise invalid(f"Query parameter '{name}' must be milliseconds since the epoch, got '{value:.40}'.")


def _bool(value: str | None, name: str) -> bool | None:
    if value is None or value == "":
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise invalid(f"Query parameter '{name}' must be true or false, got '{value:.40}'.")


async def _metastore_admin(store, caller) -> bool:
    if not caller.metastore_id:
        return False
    metastore = await store.get_metastore(caller.metastore_id)
    return metastore is not None and authorize.is_metastore_admin(caller, metastore)


# The actions that only read (GET, HEAD, read-only POSTs): what `omit_own_reads` leaves out.
_READS = sorted({e.action for e in registry.ENDPOINTS if e.method in ("GET", "HEAD") or e.read_only})


def audit_handlers(audit_log: AuditLog) -> dict[str, Handler]:
    async def list_events(request: web.Request) -> web.Response:
        caller = request["caller"]
        q = request.query
        metastore_id = q.get("metastore_id") or None
        if metastore_id is not None and not is_uuid(metastore_id):
            raise invalid(f"Query parameter 'metastore_id' must be a UUID, got '{metastore_id:.40}'.")
        if not caller.is_account_admin:
            if not await _metastore_admin(audit_log.store, caller):
                raise CatalogError("PERMISSION_DENIED", "Only account admins and metastore admins may read "
                                                        "the audit log.")
            metastore_id = caller.metastore_id     # a metastore admin sees their own metastore's events
        limit = page_size(q.get("max_results"))
        # Read your own writes: this process's buffered events first (bounded wait if the database is slow).
        try:
            await asyncio.wait_for(asyncio.shield(audit_log.flush()), 2.0)
        except Exception:
            pass
        events = await query(
            audit_log.store, principal=q.get("principal") or None, action=q.get("action") or None,
            securable=q.get("securable") or None, securable_type=q.get("securable_type") or None,
            allowed=_bool(q.get("allowed"), "allowed"), since=_ms(q.get("since"), "since"),
            until=_ms(q.get("until"), "until"), metastore_id=metastore_id, request_id=q.get("request_id") or None,
            before=_before(q.get("page_token")), limit=limit + 1,
            omit=(caller.name, _READS) if _bool(q.get("omit_own_reads"), "omit_own_reads") else None)
        out = {"events": events[:limit]}
        if len(events) > limit:
            out["next_page_token"] = _token(events[limit - 1]["id"])
        return web.json_response(out)

    return {"listAuditEvents": list_events}
