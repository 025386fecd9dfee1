"""Which assets changed after a version, as seen from inside a metastore write: the commit-time
checks of multi-asset transactions (catalog/protocols/transactions.py).

An asset changed after version v when a write with a version above v named it in the change log
(a create, update, drop, grant change or Delta commit), or when a write of the same group commit
that ran before this one in its transaction named it (shards/group_commit.py: those rows reach
the change log only when the group commits; `WriteTx.earlier` holds them meanwhile).
"""

from __future__ import annotations

import uuid

# A transaction may have read at most this many versions before the one it commits at: the check
# reads the change log in between (bounded by the request timeout in practice).
MAX_READ_AGE = 100_000


async def changed_after(tx, version: int, ids: set[str]) -> dict[str, int]:
    """{id: the first version after `version` that changed it} for those of `ids` that changed,
    up to the write `tx` (exclusive)."""
    if not ids:
        return {}
    found: dict[str, int] = {}
    wanted = [uuid.UUID(i) for i in sorted(ids)]
    rows = await tx.conn.fetch(
        """SELECT version, changed FROM change_log
           WHERE metastore_id = $1 AND version > $2 AND version < $3 AND changed && $4::uuid[]
           ORDER BY version""",
        uuid.UUID(tx.metastore_id), version, tx.version, wanted)
    for row in rows:
        for i in row["changed"]:
            found.setdefault(str(i), row["version"])
    for earlier in tx.earlier:
        if earlier.version > version:
            for i in earlier.changed:
                found.setdefault(i, earlier.version)
    return {i: v for i, v in found.items() if i in ids}


async def first_change_after(tx, version: int) -> tuple[int, list[str]] | None:
    """(version, ids it changed) of the first write after `version` before `tx`; None if there is none."""
    for earlier in tx.earlier:
        if earlier.version == version + 1:
            return earlier.version, sorted(earlier.changed)
    row = await tx.conn.fetchrow(
        """SELECT version, changed FROM change_log WHERE metastore_id = $1 AND version > $2 AND version < $3
           ORDER BY version LIMIT 1""", uuid.UUID(tx.metastore_id), version, tx.version)
    if row is None:
        return None
    return row["version"], sorted(str(i) for i in row["changed"])
