"""A database that cannot be reached is reported as DatabaseUnavailable (a 503), promptly.

A server mid-shutdown may accept a connection and never answer it; a new connection then
gives up after CONNECT_TIMEOUT_SECONDS rather than asyncpg's default minute.
"""

from __future__ import annotations

import asyncio
import socket
import time

import asyncpg
import pytest

from shardcat.store import db
from shardcat.store.db import Store
from shardcat.store.errors import DatabaseUnavailable, is_db_unavailable


async def test_a_server_that_never_answers_is_unavailable_after_the_connect_timeout(monkeypatch):
    accepted: list[asyncio.StreamWriter] = []

    async def take_and_stay_silent(reader, writer):
        accepted.append(writer)

    silent = await asyncio.start_server(take_and_stay_silent, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    monkeypatch.setattr(db, "CONNECT_TIMEOUT_SECONDS", 0.5)
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable, match="did not answer a new connection in 0.5 s") as caught:
        await Store.open(f"postgresql://nobody@127.0.0.1:{port}/none", min_size=1, max_size=1)
    assert time.monotonic() - started < 5.0
    for _ in range(50):     # the server's accept callback runs as a task: on a stalled loop, after the timeout
        if accepted:
            break
        await asyncio.sleep(0.1)
    assert accepted, "the connection reached the silent server"
    assert is_db_unavailable(caught.value)
    silent.close()
    for writer in accepted:
        writer.close()


async def test_a_refused_connection_is_unavailable():
    with socket.socket() as s:           # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DatabaseUnavailable, match="cannot connect to PostgreSQL"):
        await Store.open(f"postgresql://nobody@127.0.0.1:{port}/none", min_size=1, max_size=1)


def test_a_connection_left_mid_operation_by_a_restart_is_unavailable():
    """Seen under a PostgreSQL restart: BEGIN on a pooled connection whose last query was cut,
    then the pool's ROLLBACK on release, both refused by asyncpg. Nothing was written: a 503."""
    busy = "cannot perform operation: another operation is in progress"
    try:
        try:
            raise asyncpg.InterfaceError(busy)      # BEGIN
        except asyncpg.InterfaceError:
            raise asyncpg.InterfaceError(busy)      # the pool's ROLLBACK on release
    except asyncpg.InterfaceError as release:
        assert is_db_unavailable(release)
    assert not is_db_unavailable(asyncpg.InterfaceError("cannot use Connection.transaction() here"))
