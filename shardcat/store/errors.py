"""What the store raises: a version moved on, a metastore gone or moving, the database out of reach,
a group commit spoiled; and how to tell a database fault in an error's chain."""

from __future__ import annotations

import asyncpg


class VersionConflict(Exception):
    """The metastore's version moved past the one the writer expected."""

    def __init__(self, metastore_id: str, expected: int, actual: int | None):
        super().__init__(f"metastore {metastore_id}: expected version {expected}, found {actual}")
        self.metastore_id = metastore_id
        self.expected = expected
        self.actual = actual


class MetastoreGone(Exception):
    """The metastore no longer exists in the database."""


class MetastoreMoving(Exception):
    """The metastore is fenced in this database: it is being moved to another (store/homes.py)."""


class DatabaseUnavailable(Exception):
    """PostgreSQL cannot be reached right now (down, restarting): a new connection failed."""


# What a request sees while PostgreSQL is down or restarting: no new connection, a connection cut
# mid-query, or the server refusing work while it shuts down or starts. Such a request fails with
# 503 TEMPORARILY_UNAVAILABLE; the pool drops the dead connection and opens a new one when asked.
DB_UNAVAILABLE = (DatabaseUnavailable, asyncpg.PostgresConnectionError, asyncpg.OperatorInterventionError)


def is_db_unavailable(error: BaseException | None) -> bool:
    """Whether an error (or the one it was raised while handling) says the database is unreachable.
    A transaction whose connection was cut reports that as InterfaceError from its rollback."""
    for _ in range(5):
        if error is None:
            return False
        if isinstance(error, DB_UNAVAILABLE):
            return True
        # asyncpg's own complaints when the server cut the connection between two of its calls
        if isinstance(error, asyncpg.InterfaceError) and any(w in str(error) for w in ("closed", "closing", "in progress")):
            return True
        if isinstance(error, asyncpg.exceptions.InternalClientError) and "in progress" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


class GroupSpoiled(Exception):
    """A write of an optimistic group (no savepoints) failed where it cannot fail alone: after it
    changed rows, or on a database error. The group's transaction is rolled back; replay it with
    savepoints. The write's own error is the cause."""


def from_database(error: BaseException) -> bool:
    """Whether a database error is in the error's chain (the body may have turned it into its own):
    the transaction may be aborted then, whatever the body did."""
    seen = 0
    while error is not None and seen < 20:
        if isinstance(error, (asyncpg.PostgresError, asyncpg.InterfaceError)):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False
