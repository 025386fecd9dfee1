"""Idempotency keys of the Iceberg REST catalog's mutations in PostgreSQL (table `iceberg_idempotency`).

A request carrying a key first claims it; the claim is refused when the same caller's key is already
held, and then the holder's row says what to answer: the final answer it recorded, or that the first
request still runs. Final answers (2xx and 4xx) are recorded; a 5xx releases the key, since the
spec replays only final answers. A key older than the lifetime is free again. When to claim, and
what the answers mean, is the catalog's (catalog/protocols/iceberg/idempotency.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Held:
    """The row of a key already claimed: its operation, and its final answer (status None: still running)."""
    operation: str
    status: int | None
    body: object


async def claim(store, metastore_id: str, principal_id: int, key: str, operation: str, now: int,
                expired_before: int) -> Held | None:
    """None if this request now holds the key (new, or its earlier holder expired), else the holder's row."""
    row = await store.pool.fetchrow(
        "INSERT INTO iceberg_idempotency (metastore_id, principal_id, key, operation, created_at) "
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (metastore_id, principal_id, key) DO UPDATE "
        "SET operation = EXCLUDED.operation, status = NULL, body = NULL, created_at = EXCLUDED.created_at "
        "WHERE iceberg_idempotency.created_at < $6 RETURNING 1",
        metastore_id, principal_id, key, operation, now, expired_before)
    if row is not None:
        return None
    held = await store.pool.fetchrow(
        "SELECT operation, status, body FROM iceberg_idempotency WHERE metastore_id = $1 AND principal_id = $2 "
        "AND key = $3", metastore_id, principal_id, key)
    if held is None:        # expired and purged between the two statements: claim again
        return await claim(store, metastore_id, principal_id, key, operation, now, expired_before)
    return Held(held["operation"], held["status"], held["body"])


async def finish(store, metastore_id: str, principal_id: int, key: str, status: int, body: object) -> None:
    """Record the final answer of the request holding the key."""
    await store.pool.execute(
        "UPDATE iceberg_idempotency SET status = $4, body = $5 WHERE metastore_id = $1 AND principal_id = $2 "
        "AND key = $3", metastore_id, principal_id, key, status, body)


async def release(store, metastore_id: str, principal_id: int, key: str) -> None:
    """Free a key whose request did not reach a final answer (a 5xx): a retry runs it again."""
    await store.pool.execute(
        "DELETE FROM iceberg_idempotency WHERE metastore_id = $1 AND principal_id = $2 AND key = $3 "
        "AND status IS NULL", metastore_id, principal_id, key)


async def purge(store, expired_before: int) -> int:
    """Delete the keys claimed before `expired_before`; how many went."""
    done = await store.pool.execute("DELETE FROM iceberg_idempotency WHERE created_at < $1", expired_before)
    return int(done.split()[-1])
