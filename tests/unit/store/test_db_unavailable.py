"""Which errors say the database is unreachable (store/errors.py is_db_unavailable): the ones asyncpg raises
when the server cut a connection or the pool is shutting down, also as the cause of another; not others."""

from __future__ import annotations

import asyncpg
import pytest

from shardcat.store.errors import is_db_unavailable


def caused(outer: Exception, inner: Exception) -> Exception:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize("error", [
    asyncpg.InterfaceError("pool is closed"), asyncpg.InterfaceError("pool is closing"),
    asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
    asyncpg.PostgresConnectionError("the connection was cut"), caused(RuntimeError("a tick failed"), asyncpg.InterfaceError("pool is closing"))])
def test_unavailable(error):
    assert is_db_unavailable(error)


@pytest.mark.parametrize("error", [
    asyncpg.InterfaceError("the server expects 2 arguments for this query, 1 was passed"),
    ValueError("closed"), RuntimeError("a tick failed"), None])
def test_not_unavailable(error):
    assert not is_db_unavailable(error)
