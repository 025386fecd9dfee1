"""The audit log in PostgreSQL (table `audit_log`): rows written in batches with COPY, and read back
filtered, newest first. What to record, and who may read it, is governance/audit.py's."""

from __future__ import annotations

import uuid

COLUMNS = ("at", "request_id", "principal", "workspace_id", "metastore_id", "action", "route",
           "securable_type", "securable_name", "securable_id", "allowed", "status", "error_code", "message")


async def write_rows(store, rows: list[tuple]) -> None:
    """Rows of storable values in COLUMNS order, in one COPY."""
    async with store.pool.acquire() as conn:
        await conn.copy_records_to_table("audit_log", records=rows, columns=COLUMNS)


def _event(row) -> dict:
    out = {"id": row["id"], "at": row["at"], "request_id": row["request_id"], "principal": row["principal"],
           "workspace_id": row["workspace_id"],
           "metastore_id": str(row["metastore_id"]) if row["metastore_id"] else None,
           "action": row["action"], "route": row["route"], "securable_type": row["securable_type"],
           "securable_full_name": row["securable_name"], "securable_id": row["securable_id"],
           "allowed": row["allowed"], "status": row["status"], "error_code": row["error_code"],
           "message": row["message"]}
    return {k: v for k, v in out.items() if v is not None}


async def query(store, *, principal=None, action=None, securable=None, securable_type=None, allowed=None,
                since=None, until=None, metastore_id=None, request_id=None, before=None, limit=100,
                omit=None) -> list[dict]:
    """Events matching every given filter, newest first, ids below `before`; `omit`: (principal,
    actions) whose events are left out (a caller's own reads)."""
    where, args = [], []

    def cond(sql: str, value) -> None:
        args.append(value)
        where.append(sql.replace("$?", f"${len(args)}"))

    if principal is not None:
        cond("principal = $?", principal)
    if action is not None:
        cond("action = $?", action)
    if securable is not None:     # a full name or an id
        cond("$? IN (securable_name, securable_id)", securable)
    if securable_type is not None:
        cond("securable_type = $?", securable_type.upper())
    if allowed is not None:
        cond("allowed = $?", allowed)
    if since is not None:
        cond("at >= $?", since)
    if until is not None:
        cond("at < $?", until)
    if metastore_id is not None:
        cond("metastore_id = $?", uuid.UUID(metastore_id))
    if request_id is not None:
        cond("request_id = $?", request_id)
    if before is not None:
        cond("id < $?", before)
    if omit is not None:
        args.append(omit[0])
        cond(f"NOT (principal IS NOT DISTINCT FROM ${len(args)} AND action = ANY($?))", list(omit[1]))
    args.append(limit)
    sql = (f"SELECT * FROM audit_log {'WHERE ' + ' AND '.join(where) if where else ''} "
           f"ORDER BY id DESC LIMIT ${len(args)}")
    return [_event(r) for r in await store.pool.fetch(sql, *args)]
