"""The store's connection pool: giving a connection back costs no round trip, and still leaves
nothing of its last user behind (an unfinished transaction and its locks)."""

from __future__ import annotations

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
