"""The store's connection pool: giving a connection back costs no round trip, and still leaves
nothing of its last user behind (an unfinished transaction and its locks); its jsonb codec."""

from __future__ import annotations

import asyncpg
import pytest

from shardcat.store.db import Store


async def test_a_released_connection_sends_no_reset_and_keeps_no_transaction(pg_url):
    store = await Store.open(pg_url, min_size=1, max_size=1)
    sent: list[str] = []
    try:
        async with store.pool.acquire() as conn:
            conn.add_query_logger(lambda record: sent.append(record.query))
            await conn.fetchval("SELECT 1")
        assert sent == ["SELECT 1"], sent           # asyncpg's default would add RESET ALL; CLOSE ALL; ...
        async with store.pool.acquire() as conn:
            left_open = conn.transaction()          # a user that forgets to finish its transaction
            await left_open.start()
            await conn.execute("SELECT pg_advisory_xact_lock(424242)")
        async with store.pool.acquire() as conn:    # the same connection (the pool holds one)
            assert not conn.is_in_transaction()
            held = await conn.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 424242")
            assert held == 0
    finally:
        await store.close()


async def test_jsonb_round_trips_what_json_would_and_refuses_what_it_refused(pg_url):
    """jsonb is written with orjson where it can (CPU per write, issue 33) and with json.dumps where
    orjson refuses or would write something else: the values read back are json's, and a NaN is
    refused by PostgreSQL as before, not stored as null."""
    store = await Store.open(pg_url, min_size=1, max_size=1)
    try:
        async with store.pool.acquire() as conn:
            for value in ({"a": [1, 2.5, None, {"é": "naïve ☃"}], "big": 2 ** 70, "neg": -(2 ** 64)},
                          {"tiny": 5e-324, "exp": 1e16, "nested": [[[]]], "t": True},
                          {"surrogate-free": "\U0001f600", "null": None}, [None], "text", 17):
                assert await conn.fetchval("SELECT $1::jsonb", value) == value
            assert isinstance((await conn.fetchval("SELECT $1::jsonb", {"big": 2 ** 70}))["big"], int)
            for refused in ({"x": float("nan")}, {"x": [1, {"y": float("inf")}]}):
                with pytest.raises(asyncpg.PostgresError):
                    await conn.fetchval("SELECT $1::jsonb", refused)
    finally:
        await store.close()
