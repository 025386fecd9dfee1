"""What the system tables copy out of PostgreSQL: one metastore's audit, lineage and column-lineage rows
after a cursor (their ids), oldest first, a bounded batch at a time (catalog/features/system.py appends
them to the Delta tables and keeps the cursor in those tables' own logs)."""

from __future__ import annotations

import uuid

_QUERIES = {
    "audit": """SELECT id, at, request_id, principal, workspace_id, action, route, securable_type,
                       securable_name, securable_id, allowed, status, error_code, message
                FROM audit_log WHERE metastore_id = $1 AND id > $2 ORDER BY id LIMIT $3""",
    "table_lineage": """SELECT id, at, source_id::text, source_type, source_name, target_id::text, target_name, job,
                               principal
                        FROM lineage WHERE metastore_id = $1 AND id > $2 ORDER BY id LIMIT $3""",
    "column_lineage": """SELECT id, at, source_id::text, source_type, source_name, source_column, target_id::text,
                                target_name, target_column, job, principal
                         FROM column_lineage WHERE metastore_id = $1 AND id > $2 ORDER BY id LIMIT $3""",
}


async def rows_after(store, kind: str, metastore_id: str, after: int, limit: int) -> list[dict]:
    """Up to `limit` rows of `kind` (audit, table_lineage, column_lineage) of the metastore with id > after."""
    args = (_QUERIES[kind], uuid.UUID(metastore_id), after, limit)
    if kind == "audit":           # the audit log is the directory database's (store/audit.py)
        rows = await store.pool.fetch(*args)
    else:                         # lineage lives in the metastore's home (store/lineage.py)
        async with store.unversioned(metastore_id) as conn:
            rows = await conn.fetch(*args)
    return [dict(r) for r in rows]
