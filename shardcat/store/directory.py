"""The directory: where each metastore lives (its home database, followed when it moves), the
metastores themselves, workspaces' assignments and the metastore-to-shard assignments; and
`unversioned`, a transaction in a metastore's home that holds it against a move.

With one database the directory and every home are the same pool. With several (docs/cluster.md
"Home databases") the first is the directory, which names each metastore's home; a method on one
metastore runs in `await self.home(metastore_id)`, learned from the directory once and again when
the metastore is found gone or fenced there (`homed`: the method runs again in the new home).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from contextlib import asynccontextmanager

import asyncpg

from ..entities.values import now_ms
from .databases import home_loads, home_order
from .errors import DatabaseUnavailable, MetastoreGone, MetastoreMoving, is_db_unavailable
from .rows import Metastore, metastore_from

log = logging.getLogger(__name__)

# How long a write that found its metastore fenced waits for the move to switch its home before it
# fails with 503 (a move blocks writes for well under a second: docs/cluster.md "Home databases").
MOVE_WAIT_SECONDS = 10.0
MOVE_POLL_SECONDS = 0.02
ABANDONED_AFTER = 1.0       # a fence this old is checked for a mover that is gone (its lock free)
MOVE_LOCK_CLASS = 7239002   # session advisory lock (class, metastore) held by the process moving a metastore


def move_lock_key(metastore_id: str) -> int:
    return uuid.UUID(metastore_id).int & 0x7FFFFFFF


def homed(method):
    """A Store method on one metastore (its first argument), run again once in the metastore's new
    home when it was found gone from the one this process knew (moved: Store.rehome)."""
    @functools.wraps(method)
    async def run(self, metastore_id: str, *args, **kwargs):
        try:
            return await method(self, metastore_id, *args, **kwargs)
        except (MetastoreGone, MetastoreMoving) as e:
            if not await self.rehome(metastore_id, e):
                raise
        return await method(self, metastore_id, *args, **kwargs)
    return run


class Directory:
    """The part of `Store` (db.py) that knows where metastores live, and the account's assignments."""

    def __init__(self, pool: asyncpg.Pool, databases: dict[str, asyncpg.Pool] | None = None):
        self.pool = pool
        self.databases: dict[str, asyncpg.Pool] = databases or {"db0": pool}   # name -> pool, directory first
        self.directory_name = next(iter(self.databases))
        self.single = len(self.databases) == 1
        self._homes: dict[str, str] = {}        # metastore id -> its home's name, as the directory said

    # ---- home databases ----------------------------------------------------

    async def home(self, metastore_id: str) -> asyncpg.Pool:
        """The pool of the metastore's home database; MetastoreGone if the directory knows no such metastore."""
        if self.single:
            return self.pool
        return self.databases[await self.home_name(metastore_id)]

    async def home_name(self, metastore_id: str) -> str:
        name = self._homes.get(metastore_id)
        if name is None:
            name = await self._directory_home(metastore_id)
            if name is None:
                raise MetastoreGone(metastore_id)
            if name not in self.databases:
                raise DatabaseUnavailable(f"metastore {metastore_id}'s home database '{name}' is not configured here")
            self._homes[metastore_id] = name
        return name

    def remember_home(self, metastore_id: str, name: str) -> None:
        """A home this process has just switched the metastore to (store/homes.py)."""
        self._homes[metastore_id] = name

    async def _directory_home(self, metastore_id: str) -> str | None:
        if self.single:
            return self.directory_name
        return await self.pool.fetchval("SELECT home FROM metastore_homes WHERE metastore_id = $1",
                                        uuid.UUID(metastore_id))

    async def rehome(self, metastore_id: str, error: BaseException, deadline: float | None = None) -> bool:
        """After `error` (MetastoreGone or MetastoreMoving) in the home this process knew: whether
        the metastore has another home now (then it is remembered and the caller tries again there).
        A fenced metastore is waited for (until `deadline`, at most MOVE_WAIT_SECONDS) and True
        once the directory switched or the fence is gone (a move given up lifts it); a fence left
        by a mover that died (its lock free) is lifted here after ABANDONED_AFTER seconds."""
        if self.single:
            return False
        known = self._homes.pop(metastore_id, None)
        if known is None:       # another call rehomed it meanwhile: try again wherever it is now
            return await self._directory_home(metastore_id) is not None
        if isinstance(error, MetastoreMoving):
            deadline = deadline or time.monotonic() + MOVE_WAIT_SECONDS
            looked = time.monotonic()
            while time.monotonic() < deadline:
                await asyncio.sleep(MOVE_POLL_SECONDS)
                home = await self._directory_home(metastore_id)
                if home != known:
                    return home is not None
                # Still there: fenced yet? (a failed move lifts its fence without switching)
                fenced = await self.databases[known].fetchval(
                    "SELECT fenced FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
                if not fenced:          # lifted, or the rows are gone: try again and see
                    return True
                if time.monotonic() - looked > ABANDONED_AFTER:
                    looked = time.monotonic()
                    if await self._lift_abandoned_fence(metastore_id, known):
                        return True
            raise DatabaseUnavailable(f"metastore {metastore_id} is moving between databases; try again")
        home = await self._directory_home(metastore_id)
        return home is not None and home != known

    async def _lift_abandoned_fence(self, metastore_id: str, known: str) -> bool:
        """A fence whose mover holds no lock any more (it died between fence and switch): lifted,
        with the lock held, if the directory still names the fenced home. True: try again."""
        key = move_lock_key(metastore_id)
        async with self.pool.acquire() as conn:
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", MOVE_LOCK_CLASS, key):
                return False        # a mover is at work
            try:
                if await self._directory_home(metastore_id) == known:
                    await self.databases[known].execute("UPDATE metastores SET fenced = false WHERE id = $1",
                                                        uuid.UUID(metastore_id))
                    log.warning("metastore %s: lifted the fence of a move whose process is gone", metastore_id)
                return True
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1, $2)", MOVE_LOCK_CLASS, key)

    def forget_home(self, metastore_id: str) -> None:
        self._homes.pop(metastore_id, None)

    @asynccontextmanager
    async def unversioned(self, metastore_id: str):
        """A transaction in the metastore's home for rows a metastore write does not version
        (snapshots, the history's purge; lineage), as `async with store.unversioned(ms) as conn:`.
        It holds the metastore's row against a move's fence until it commits and, like `write`,
        leaves a home that holds the metastore no longer, or fenced, for the new one first.
        One that changes the Delta commits or the history (store/homes.py SIDE_TABLES) says so with
        `count_side_write(conn, metastore_id)` before it ends: that tells a move to copy them again."""
        deadline = time.monotonic() + MOVE_WAIT_SECONDS
        while True:
            moved = None
            async with (await self.home(metastore_id)).acquire() as conn, conn.transaction():
                try:
                    await _not_fenced(conn, metastore_id)
                except (MetastoreGone, MetastoreMoving) as e:
                    moved = e
                else:
                    yield conn
            if moved is None:
                return
            if not await self.rehome(metastore_id, moved, deadline):
                raise moved

    # ---- metastores and workspaces ----------------------------------------

    async def list_metastores(self) -> list[Metastore]:
        """Every metastore the directory names, read in its home (a home that is down: left out)."""
        out = []
        for row in await self.pool.fetch("SELECT metastore_id FROM metastore_homes ORDER BY name"):
            try:
                found = await self.get_metastore(str(row["metastore_id"]))
            except Exception as e:
                if not is_db_unavailable(e):
                    raise
                continue
            if found:
                out.append(found)
        return out

    async def get_metastore(self, metastore_id: str) -> Metastore | None:
        try:
            return await self._get_metastore(metastore_id)
        except MetastoreGone:
            return None

    @homed
    async def _get_metastore(self, metastore_id: str) -> Metastore:
        row = await (await self.home(metastore_id)).fetchrow("SELECT * FROM metastores WHERE id = $1",
                                                             uuid.UUID(metastore_id))
        if row is None:
            raise MetastoreGone(metastore_id)
        return metastore_from(row)

    async def metastore_named(self, id_or_name: str) -> str | None:
        """The id of the metastore with this id or, failing that, this name (the directory's)."""
        try:
            by_id = uuid.UUID(id_or_name)
        except ValueError:
            by_id = None
        row = await self.pool.fetchval(
            "SELECT metastore_id FROM metastore_homes WHERE metastore_id = $1 OR name = $2 ORDER BY (metastore_id = $1) DESC NULLS LAST LIMIT 1",
            by_id, id_or_name)
        return str(row) if row else None

    async def all_homes(self) -> dict[str, str]:
        """Every metastore's home, as the directory names it: metastore id -> database name."""
        return {str(row["metastore_id"]): row["home"]
                for row in await self.pool.fetch("SELECT metastore_id, home FROM metastore_homes")}

    async def home_loads(self, load: dict[str, float] | None = None) -> dict[str, tuple[float, int]]:
        """Per configured database: (its load, how many metastores it is the home of), `load` being
        each metastore's measured load (store/databases.py `home_loads`)."""
        return home_loads(self.databases, await self.all_homes(), load)

    async def create_metastore(self, metastore_id: str, name: str, info: dict, home: str | None = None,
                               load: dict[str, float] | None = None) -> Metastore:
        """A new metastore, homed in `home` or else in the least-loaded database: the sum of its
        metastores' measured `load` (metastore id -> load, as the router counts requests), plus one
        each, so the home of the fewest when nothing is measured (store/databases.py `home_order`).
        One that does not answer is passed over for the next. The directory's row first (the name
        is unique in the account), then the home's; with one database both in one transaction."""
        if home is not None and home not in self.databases:
            raise KeyError(f"database {home}")
        if home is None:
            candidates = [next(iter(self.databases))] if len(self.databases) == 1 else \
                home_order(self.databases, await self.all_homes(), load)
        else:
            candidates = [home]
        for i, candidate in enumerate(candidates):
            try:
                return await self._create_metastore(metastore_id, name, info, candidate)
            except Exception as e:
                if i == len(candidates) - 1 or not is_db_unavailable(e):
                    raise
                log.warning("database %s does not answer (%s): metastore %s goes to the next", candidate, e, name)

    async def _create_metastore(self, metastore_id: str, name: str, info: dict, home: str) -> Metastore:
        ms = uuid.UUID(metastore_id)
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                await conn.execute("INSERT INTO metastore_homes VALUES ($1, $2, $3, $4)", ms, name, home, now_ms())
                if home == self.directory_name:
                    row = await conn.fetchrow(
                        "INSERT INTO metastores (id, name, version, info) VALUES ($1, $2, 0, $3) RETURNING *",
                        ms, name, info)
        except asyncpg.UniqueViolationError:
            raise KeyError(name) from None
        if home != self.directory_name:
            try:
                row = await self.databases[home].fetchrow(
                    "INSERT INTO metastores (id, name, version, info) VALUES ($1, $2, 0, $3) RETURNING *",
                    ms, name, info)
            except BaseException as e:
                await self.pool.execute("DELETE FROM metastore_homes WHERE metastore_id = $1", ms)
                if isinstance(e, asyncpg.UniqueViolationError):
                    raise KeyError(name) from None
                raise
        self._homes[metastore_id] = home
        return metastore_from(row)

    async def rename_in_directory(self, metastore_id: str, name: str) -> None:
        """Take `name` for the metastore in the directory (the account's names are unique there);
        KeyError if another has it. The home's own row is renamed by the write (WriteTx.update_metastore)."""
        try:
            await self.pool.execute("UPDATE metastore_homes SET name = $2 WHERE metastore_id = $1",
                                    uuid.UUID(metastore_id), name)
        except asyncpg.UniqueViolationError:
            raise KeyError(name) from None

    async def delete_metastore(self, metastore_id: str) -> bool:
        """The metastore's rows in its home, then the directory's (its workspaces, its shard)."""
        ms = uuid.UUID(metastore_id)
        try:
            pool = await self.home(metastore_id)
        except MetastoreGone:
            return False
        if pool is not self.pool:
            await pool.execute("DELETE FROM metastores WHERE id = $1", ms)
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM metastores WHERE id = $1", ms)
            status = await conn.execute("DELETE FROM metastore_homes WHERE metastore_id = $1", ms)
        self._homes.pop(metastore_id, None)
        return status.endswith(" 1")

    async def assignment(self, workspace_id: int) -> tuple[str, str | None] | None:
        row = await self.pool.fetchrow("SELECT * FROM workspaces WHERE workspace_id = $1", workspace_id)
        return (str(row["metastore_id"]), row["default_catalog_name"]) if row else None

    async def assign(self, workspace_id: int, metastore_id: str, default_catalog_name: str | None) -> None:
        try:
            await self.pool.execute(
                """INSERT INTO workspaces VALUES ($1, $2, $3) ON CONFLICT (workspace_id)
                   DO UPDATE SET metastore_id = $2, default_catalog_name = $3""",
                workspace_id, uuid.UUID(metastore_id), default_catalog_name,
            )
        except asyncpg.ForeignKeyViolationError:
            raise MetastoreGone(metastore_id) from None

    async def unassign(self, workspace_id: int, metastore_id: str) -> bool:
        status = await self.pool.execute(
            "DELETE FROM workspaces WHERE workspace_id = $1 AND metastore_id = $2", workspace_id, uuid.UUID(metastore_id)
        )
        return status.endswith(" 1")

    async def workspaces_of(self, metastore_id: str) -> list[int]:
        rows = await self.pool.fetch("SELECT workspace_id FROM workspaces WHERE metastore_id = $1", uuid.UUID(metastore_id))
        return [r["workspace_id"] for r in rows]

    # ---- metastore-to-shard assignment ------------------------------------

    async def shard_assignments(self) -> dict[str, str]:
        rows = await self.pool.fetch("SELECT metastore_id, shard FROM shard_assignments")
        return {str(r["metastore_id"]): r["shard"] for r in rows}

    async def assign_shard(self, metastore_id: str, shard: str) -> None:
        await self.pool.execute(
            """INSERT INTO shard_assignments VALUES ($1, $2, $3)
               ON CONFLICT (metastore_id) DO UPDATE SET shard = $2, assigned_at = $3""",
            uuid.UUID(metastore_id), shard, now_ms(),
        )

    async def assign_shards(self, assignments: dict[str, str]) -> None:
        """Many metastore -> shard assignments in one statement."""
        await self.pool.execute(
            """INSERT INTO shard_assignments
               SELECT m, s, $3 FROM unnest($1::uuid[], $2::text[]) AS a(m, s)
               WHERE EXISTS (SELECT 1 FROM metastore_homes WHERE metastore_id = m)  -- skip metastores deleted meanwhile
               ON CONFLICT (metastore_id) DO UPDATE SET shard = EXCLUDED.shard, assigned_at = EXCLUDED.assigned_at""",
            list(assignments), list(assignments.values()), now_ms(),
        )

    async def shard_of(self, metastore_id: str) -> str | None:
        return await self.pool.fetchval(
            "SELECT shard FROM shard_assignments WHERE metastore_id = $1", uuid.UUID(metastore_id)
        )


async def _not_fenced(conn, metastore_id: str) -> None:
    """In a transaction writing rows a metastore write does not version: hold the metastore's row
    against a fence until commit (a move's fence takes it FOR UPDATE), and refuse one fenced.
    FOR KEY SHARE: versioned writes (and `count_side_write`'s update) do not wait for it."""
    fenced = await conn.fetchval("SELECT fenced FROM metastores WHERE id = $1 FOR KEY SHARE", uuid.UUID(metastore_id))
    if fenced is None:
        raise MetastoreGone(metastore_id)
    if fenced:
        raise MetastoreMoving(metastore_id)


async def count_side_write(conn, metastore_id: str) -> None:
    """Inside `Store.unversioned(ms)`: this transaction changed Delta commits or history (only then:
    a move compares nothing else there and copies them again when the count moved)."""
    await conn.execute("UPDATE metastores SET side_writes = side_writes + 1 WHERE id = $1", uuid.UUID(metastore_id))
