"""`Store`: PostgreSQL, the one durable truth, as the layers above use it. This module opens the
connection pools (one per database), applies the migrations and composes the store's parts, each
in a module of its own job:

- directory.py: where each metastore lives (home databases, moves), metastores, workspaces, shards
- principals.py: the account's principals and tokens
- assets.py: reads of assets and the change log, each with the metastore version it saw; search
- lineage.py: reported lineage edges
- delta.py: Delta commits of catalog-managed tables
- writes.py: versioned writes (`WriteTx`) alone or in a group commit (`WriteBatch`)

errors.py holds what they raise, rows.py how rows become values. protocol.py says what the shard
core needs of a store; memory.py keeps that contract in memory for unit tests.
"""

from __future__ import annotations

import json
from importlib import resources

import asyncpg

from ..entities.values import now_ms
from .assets import AssetReads
from .databases import DatabaseConfigError, as_databases
from .delta import DeltaReads
from .directory import Directory
from .errors import DatabaseUnavailable
from .lineage import Lineage
from .principals import Accounts
from .rows import jsonb_text
from .writes import Writes

# asyncpg waits 60 s by default; a server mid-shutdown may take a connection and never answer it,
# and a request should get its 503 long before a client gives up on it.
CONNECT_TIMEOUT_SECONDS = 5.0


async def _connect(*args, **kwargs):
    kwargs.setdefault("timeout", CONNECT_TIMEOUT_SECONDS)
    try:
        return await asyncpg.connect(*args, **kwargs)
    except TimeoutError as e:
        raise DatabaseUnavailable(f"PostgreSQL did not answer a new connection in {kwargs['timeout']:g} s") from e
    except OSError as e:        # refused, or the server's socket is gone: tell it apart from other OSErrors
        raise DatabaseUnavailable(f"cannot connect to PostgreSQL: {e}") from e


async def _init_connection(conn):
    # Read back with json.loads: orjson would turn an integer past 64 bits into a float.
    await conn.set_type_codec("jsonb", encoder=jsonb_text, decoder=json.loads, schema="pg_catalog")


async def _keep_session(conn) -> None:
    """A pooled connection's reset on release. asyncpg's default sends `RESET ALL; CLOSE ALL; UNLISTEN
    *; pg_advisory_unlock_all()`: a round trip per use, for session state the store never sets (its
    locks are transaction-scoped). An open transaction is still rolled back: asyncpg does that first."""


class Store(Directory, Accounts, AssetReads, Lineage, DeltaReads, Writes):
    """The durable truth, its parts in the modules above. Holds a connection pool per database; all
    methods are safe to call concurrently.

    With one database (the default) that pool is `pool`. With several (docs/cluster.md "Home
    databases"), `pool` is the first's, the account directory (principals, tokens, workspaces,
    shard assignments, the audit log, which database is each metastore's home), and every
    method on one metastore runs in that metastore's home, `await self.home(metastore_id)`,
    learned from the directory once and again when the metastore is found gone or fenced there
    (moved: the method runs again in the new home)."""

    def __init__(self, pool: asyncpg.Pool, databases: dict[str, asyncpg.Pool] | None = None):
        super().__init__(pool, databases)
        self.secrets = None     # the SecretBox sealing credential secrets (store/sealing.py), set by its server

    @classmethod
    async def open(cls, url: str | dict[str, str], *, min_size: int = 2, max_size: int = 10,
                   reset_sessions: bool = False) -> "Store":
        """`url`: one PostgreSQL URL, or {name: URL} of several servers, the directory's first.
        `reset_sessions`: asyncpg's own reset query on every release, for comparison (benchmarks/bench_pool.py)."""
        pools: dict[str, asyncpg.Pool] = {}
        try:
            for i, (name, one) in enumerate(as_databases(url).items()):
                # A home other than the directory connects on first use: one that is down at start
                # takes down its metastores only (docs/cluster.md), not the process.
                pools[name] = await asyncpg.create_pool(
                    one, min_size=min_size if i == 0 else 0, max_size=max_size, init=_init_connection,
                    connect=_connect, reset=None if reset_sessions else _keep_session)
        except BaseException:
            for pool in pools.values():
                pool.terminate()
            raise
        return cls(next(iter(pools.values())), pools)

    async def close(self) -> None:
        for pool in self.databases.values():
            await pool.close()

    async def migrate(self) -> list[str]:
        """Apply the numbered SQL files under migrations/ not applied yet, on every database; returns
        the names applied on the directory's. Each database is named at its first start
        (`database_identity`); one that bears another name is refused (DatabaseConfigError: servers
        listed in another order would otherwise be taken for each other's metastores)."""
        applied: list[str] = []
        for i, (name, pool) in enumerate(self.databases.items()):
            done = await _migrate(pool, name)
            applied = done if i == 0 else applied
        # Metastores that were here before the directory knew its own name: their home is this server.
        await self.pool.execute("UPDATE metastore_homes SET home = $1 WHERE home = ''", self.directory_name)
        return applied


def _migration_files() -> list[tuple[str, str]]:
    return sorted((f.name, f.read_text()) for f in resources.files("shardcat.store").joinpath("migrations").iterdir()
                  if f.name.endswith(".sql"))


async def _migrate(pool: asyncpg.Pool, name: str) -> list[str]:
    applied = []
    async with pool.acquire() as conn, conn.transaction():
        # Several processes may start at once: one applies, the others wait and see it done.
        await conn.execute("SELECT pg_advisory_xact_lock(7239001)")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at bigint NOT NULL)"
        )
        done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
        for file, sql in _migration_files():
            if file not in done:
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2)", file, now_ms())
                applied.append(file)
        known = await conn.fetchval("SELECT name FROM database_identity")
        if known is None:
            await conn.execute("INSERT INTO database_identity VALUES (true, $1, $2)", name, now_ms())
        elif known != name:
            raise DatabaseConfigError(f"the database configured as '{name}' was named '{known}' at its first start: "
                                      "give each server its own name, the same at every start")
    return applied
