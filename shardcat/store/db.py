"""PostgreSQL access: the schema, reads that report the metastore version, and versioned writes.

Every write goes through `Store.write(metastore_id, expected_version)`: one transaction
that first bumps the metastore version conditioned on the version the writer expects
(docs/design.md invariant 2), then writes asset rows, then appends a change-log row naming
what changed. If the condition fails another writer got there first: `VersionConflict`.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import json
import logging
import math
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources

import asyncpg
import orjson

from ..entities.asset import Asset
from ..entities.values import now_ms
from .databases import DatabaseConfigError, as_databases, home_loads, home_order
from .principals import Principals


log = logging.getLogger(__name__)


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


# How long a write that found its metastore fenced waits for the move to switch its home before it
# fails with 503 (a move blocks writes for well under a second: docs/cluster.md "Home databases").
MOVE_WAIT_SECONDS = 10.0
MOVE_POLL_SECONDS = 0.02
ABANDONED_AFTER = 1.0       # a fence this old is checked for a mover that is gone (its lock free)
MOVE_LOCK_CLASS = 7239002   # session advisory lock (class, metastore) held by the process moving a metastore


def move_lock_key(metastore_id: str) -> int:
    return uuid.UUID(metastore_id).int & 0x7FFFFFFF


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
        if isinstance(error, asyncpg.InterfaceError) and ("closed" in str(error) or "in progress" in str(error)):
            return True
        if isinstance(error, asyncpg.exceptions.InternalClientError) and "in progress" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


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


@dataclass(frozen=True)
class Metastore:
    id: str
    name: str
    version: int
    info: dict


@dataclass(frozen=True)
class Principal:
    id: int
    name: str
    kind: str
    is_account_admin: bool


@dataclass(frozen=True)
class Change:
    version: int
    changed: list[str]
    parents: list[str]


# What search matches words in: an asset's full name and comment (indexed by migration 0009).
SEARCH_TEXT = "(lower(a.full_name) || ' ' || lower(coalesce(a.info->>'comment', '')))"


def _tag_match(term: int, key: int, value: int) -> str:
    """An asset holding tag $key (with value $value, unless that is NULL), on itself or on a column.
    `info->'tag_index'` (catalog/tags.py: every `key` and `key=value` of the asset and its columns,
    $term is one of them) is indexed (migration 0010) and narrows the rows; the exact test follows."""
    def holds(tags: str) -> str:
        return f"({tags} ? ${key}::text AND (${value}::text IS NULL OR {tags} ->> ${key}::text = ${value}::text))"
    columns = "CASE WHEN jsonb_typeof(a.info->'columns') = 'array' THEN a.info->'columns' ELSE '[]'::jsonb END"
    own, column = holds("a.info->'tags'"), holds("c->'tags'")
    return (f"(a.info->'tag_index' ? ${term}::text AND "
            f"({own} OR EXISTS (SELECT 1 FROM jsonb_array_elements({columns}) c WHERE {column})))")


def search_query(patterns: int, tags: int = 0, source: str = "assets") -> str:
    """Store.search's SQL for this many LIKE patterns ($10 on) and tag conditions (two parameters
    each: three parameters, after the patterns). One condition per pattern on the
    indexed text: the planner combines them in the trigram index, which it cannot do for one
    condition over an array of patterns. A pattern holding no whitespace matches name and comment
    joined by a space just where it matches one of them. `source`: the assets searched (a past
    version's, store/history.py)."""
    conditions = [f"{SEARCH_TEXT} LIKE ${10 + i}" for i in range(patterns)]
    conditions += [_tag_match(10 + patterns + 3 * i, 11 + patterns + 3 * i, 12 + patterns + 3 * i)
                   for i in range(tags)]
    matches = " AND ".join(conditions) or "true"
    return f"""SELECT m.version AS ms_version, r.* FROM metastores m
               LEFT JOIN LATERAL (
                   SELECT * FROM (
                       SELECT a.*, CASE WHEN lower(a.name) = $3 THEN 0 WHEN lower(a.name) LIKE $4 THEN 1
                                        WHEN lower(a.name) LIKE $5 THEN 2 ELSE 3 END AS rank
                       FROM {source} a
                       WHERE a.metastore_id = $1 AND a.type = ANY($2::text[]) AND {matches}) s
                   WHERE (s.rank, s.full_name, s.id) > ($6, $7, $8::uuid)
                   ORDER BY s.rank, s.full_name, s.id LIMIT $9) r ON true
               WHERE m.id = $1"""


_ASSET_COLUMNS = "id, metastore_id, type, namespace, parent_id, name, full_name, storage_path, info, written_at"


@dataclass(frozen=True)
class StoragePath:
    """Where an asset's data lies: what a shard's URL tries hold, without the asset's body."""
    id: str
    type: str
    full_name: str
    storage_path: str


def _asset(row) -> Asset:
    return Asset(
        id=str(row["id"]), metastore_id=str(row["metastore_id"]), type=row["type"],
        namespace=row["namespace"], parent_id=str(row["parent_id"]), name=row["name"],
        full_name=row["full_name"], storage_path=row["storage_path"], info=row["info"],
        written_at=row["written_at"],
    )


def _asset_of(metastore_id: str, row) -> Asset | None:
    """The row's asset if it is one of this metastore's. Reads by id check the metastore here, not in
    SQL: there the id stays the only condition an index can take, where a plan PostgreSQL caches
    while a metastore is small could take the metastore's names index and, once it grows, walk
    every asset of the metastore for one id."""
    if row is None or row["id"] is None or row["metastore_id"] != uuid.UUID(str(metastore_id)):
        return None
    return _asset(row)


def _metastore(row) -> Metastore:
    return Metastore(id=str(row["id"]), name=row["name"], version=row["version"], info=row["info"])


def _jsonb_text(value) -> str:
    """A value as jsonb's text: orjson's (a tenth of json.dumps' CPU; an asset's info and each change-log
    row are encoded on every write), json.dumps' for what orjson refuses (integers past 64 bits, lone
    surrogates, keys that are not strings) or would write otherwise (NaN and infinities: null)."""
    try:
        text = orjson.dumps(value)
    except TypeError:                   # orjson.JSONEncodeError is one
        return json.dumps(value)
    if b"null" in text and _non_finite(value):
        return json.dumps(value)
    return text.decode()


def _non_finite(value) -> bool:
    """Whether a JSON value holds a float that is NaN or infinite, at any depth."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


async def _init_connection(conn):
    # Read back with json.loads: orjson would turn an integer past 64 bits into a float.
    await conn.set_type_codec("jsonb", encoder=_jsonb_text, decoder=json.loads, schema="pg_catalog")


async def _keep_session(conn) -> None:
    """A pooled connection's reset on release. asyncpg's default sends `RESET ALL; CLOSE ALL; UNLISTEN
    *; pg_advisory_unlock_all()`: a round trip per use, for session state the store never sets (its
    locks are transaction-scoped). An open transaction is still rolled back: asyncpg does that first."""


def _homed(method):
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


class Store:
    """The durable truth. Holds a connection pool per database; all methods are safe to call concurrently.

    With one database (the default) that pool is `pool`. With several (docs/cluster.md "Home
    databases"), `pool` is the first's, the account directory (principals, tokens, workspaces,
    shard assignments, the audit log, which database is each metastore's home), and every
    method on one metastore runs in that metastore's home, `await self.home(metastore_id)`,
    learned from the directory once and again when the metastore is found gone or fenced there
    (moved: the method runs again in the new home)."""

    def __init__(self, pool: asyncpg.Pool, databases: dict[str, asyncpg.Pool] | None = None):
        self.pool = pool
        self.databases: dict[str, asyncpg.Pool] = databases or {"db0": pool}   # name -> pool, directory first
        self.directory_name = next(iter(self.databases))
        self.single = len(self.databases) == 1
        self._homes: dict[str, str] = {}        # metastore id -> its home's name, as the directory said
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

    @property
    def principals(self) -> Principals:
        """Principals, groups and tokens beyond the basics below (shardcat/store/principals.py)."""
        return Principals(self.pool, now_ms)

    # ---- migrations -------------------------------------------------------

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

    @_homed
    async def _get_metastore(self, metastore_id: str) -> Metastore:
        row = await (await self.home(metastore_id)).fetchrow("SELECT * FROM metastores WHERE id = $1",
                                                             uuid.UUID(metastore_id))
        if row is None:
            raise MetastoreGone(metastore_id)
        return _metastore(row)

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
        return _metastore(row)

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

    # ---- principals and tokens --------------------------------------------

    async def create_principal(self, name: str, kind: str = "user", *, is_account_admin: bool = False) -> Principal:
        row = await self.pool.fetchrow(
            """INSERT INTO principals (name, kind, is_account_admin, created_at) VALUES ($1, $2, $3, $4)
               ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING *""",
            name, kind, is_account_admin, now_ms(),
        )
        return Principal(row["id"], row["name"], row["kind"], row["is_account_admin"])

    async def add_token(self, principal_id: int, token_hash: bytes, workspace_id: int, comment: str | None = None,
                        expires_at: int | None = None) -> int:
        return await self.pool.fetchval(
            """INSERT INTO tokens (principal_id, token_hash, workspace_id, comment, created_at, expires_at)
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
            principal_id, token_hash, workspace_id, comment, now_ms(), expires_at,
        )

    async def principal_for_token(self, token_hash: bytes) -> tuple[Principal, int] | None:
        """The live token's principal and workspace, or None if unknown, revoked or expired."""
        row = await self.pool.fetchrow(
            """SELECT p.*, t.workspace_id FROM tokens t JOIN principals p ON p.id = t.principal_id
               WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > $2)""",
            token_hash, now_ms(),
        )
        if row is None:
            return None
        return Principal(row["id"], row["name"], row["kind"], row["is_account_admin"]), row["workspace_id"]

    # ---- asset reads: each returns the metastore version it saw -----------

    @_homed
    async def metastore_version(self, metastore_id: str) -> int:
        version = await (await self.home(metastore_id)).fetchval("SELECT version FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
        if version is None:
            raise MetastoreGone(metastore_id)
        return version

    @_homed
    async def get_asset(self, metastore_id: str, namespace: str, full_name: str) -> tuple[int, Asset | None]:
        return await _get_asset(await self.home(metastore_id), metastore_id, namespace, full_name)

    @_homed
    async def get_asset_by_id(self, metastore_id: str, asset_id: str) -> tuple[int, Asset | None]:
        rows = await (await self.home(metastore_id)).fetch(
            "SELECT m.version AS ms_version, a.* FROM metastores m LEFT JOIN assets a ON a.id = $2 WHERE m.id = $1",
            uuid.UUID(metastore_id), uuid.UUID(asset_id),
        )
        return _versioned_one(metastore_id, rows)

    @_homed
    async def get_assets_by_ids(self, metastore_id: str, ids: list[str]) -> tuple[int, list[Asset]]:
        rows = await (await self.home(metastore_id)).fetch(
            """SELECT m.version AS ms_version, a.* FROM metastores m
               LEFT JOIN assets a ON a.id = ANY($2::uuid[]) WHERE m.id = $1""",
            uuid.UUID(metastore_id), ids,
        )
        return _versioned_many(metastore_id, rows)

    @_homed
    async def assets_of_type(self, metastore_id: str, type_name: str) -> list[Asset]:
        """Every asset of one type in a metastore (few: credentials, for re-encrypting their secrets)."""
        rows = await (await self.home(metastore_id)).fetch(f"SELECT {_ASSET_COLUMNS} FROM assets WHERE metastore_id = $1 AND type = $2",
                                     uuid.UUID(metastore_id), type_name)
        return [_asset(r) for r in rows]

    @_homed
    async def get_assets_by_keys(self, metastore_id: str, names: list[tuple[str, str]],
                                 ids: list[str]) -> tuple[int, list[Asset]]:
        """Assets by (namespace, full name) and by id, with the metastore version, in one statement (one snapshot)."""
        rows = await (await self.home(metastore_id)).fetch(
            """SELECT m.version AS ms_version, a.* FROM metastores m
               LEFT JOIN LATERAL (
                   SELECT * FROM assets WHERE id = ANY($4::uuid[])
                   UNION ALL
                   SELECT a.* FROM unnest($2::text[], $3::text[]) AS k(namespace, full_name)
                   JOIN assets a ON a.metastore_id = m.id AND a.namespace = k.namespace
                                AND a.full_name = k.full_name
               ) a ON true
               WHERE m.id = $1""",
            uuid.UUID(metastore_id), [n for n, _ in names], [f for _, f in names], ids,
        )
        version, assets = _versioned_many(metastore_id, rows)
        return version, list({a.id: a for a in assets}.values())

    @_homed
    async def list_children(self, metastore_id: str, parent_id: str, namespace: str, *,
                            after: str = "", limit: int | None = None) -> tuple[int, list[Asset]]:
        rows = await (await self.home(metastore_id)).fetch(
            """SELECT m.version AS ms_version, a.* FROM metastores m
               LEFT JOIN LATERAL (
                   SELECT * FROM assets WHERE parent_id = $2 AND namespace = $3 AND name > $4
                   ORDER BY name LIMIT $5) a ON true
               WHERE m.id = $1""",
            uuid.UUID(metastore_id), uuid.UUID(parent_id), namespace, after, limit,
        )
        return _versioned_many(metastore_id, rows)

    @_homed
    async def count_children(self, metastore_id: str, parent_id: str, namespace: str, limit: int) -> int:
        """How many children (parent, namespace) has, counting no further than `limit` (index only)."""
        return await (await self.home(metastore_id)).fetchval(
            """SELECT count(*) FROM (SELECT 1 FROM assets WHERE parent_id = $1 AND namespace = $2 LIMIT $3) c""",
            uuid.UUID(parent_id), namespace, limit)

    @_homed
    async def table_summaries(self, metastore_id: str, catalog_id: str, schema_like: str, table_like: str,
                              after: str, limit: int) -> tuple[int, list[Asset]]:
        rows = await (await self.home(metastore_id)).fetch(
            """SELECT m.version AS ms_version, t.* FROM metastores m
               LEFT JOIN LATERAL (
                   SELECT a.* FROM assets s JOIN assets a ON a.parent_id = s.id AND a.namespace = 'table'
                   WHERE s.parent_id = $2 AND s.type = 'schema' AND s.name LIKE $3 AND a.name LIKE $4
                     AND a.full_name > $5
                   ORDER BY a.full_name LIMIT $6) t ON true
               WHERE m.id = $1""",
            uuid.UUID(metastore_id), uuid.UUID(catalog_id), schema_like, table_like, after, limit,
        )
        return _versioned_many(metastore_id, rows)

    @_homed
    async def search(self, metastore_id: str, types: list[str], patterns: list[str], name_ranks: tuple[str, str, str],
                     after: tuple[int, str, str], limit: int,
                     tags: list[tuple[str, str | None]] = ()) -> tuple[int, list[tuple[int, Asset]]]:
        """Assets of `types` whose lower-cased full name or comment matches every LIKE pattern (none
        holding whitespace) and that hold every (key, value or None: any) tag, on themselves or on a
        column, as (rank, asset): 0 when the name is `name_ranks[0]`, 1 when it is LIKE
        `name_ranks[1]`, 2 when LIKE `name_ranks[2]`, else 3 (names None: all 3); in (rank, full name,
        id) order after `after`."""
        exact, prefix, inside = name_ranks
        async with (await self.home(metastore_id)).acquire() as conn, conn.transaction(readonly=True):
            # Planned for its own words: the generic plan PostgreSQL moves a prepared statement to
            # after five runs cannot tell a rare word (the index) from one every asset holds (a scan).
            await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            rows = await conn.fetch(
                search_query(len(patterns), len(tags)),
                uuid.UUID(metastore_id), types, exact, prefix, inside, after[0], after[1], uuid.UUID(after[2]),
                limit, *patterns, *(x for k, v in tags for x in (k if v is None else f"{k}={v}", k, v)))
        if not rows:
            raise MetastoreGone(metastore_id)
        return rows[0]["ms_version"], [(r["rank"], _asset(r)) for r in rows if r["id"] is not None]

    @_homed
    async def has_assets(self, metastore_id: str) -> bool:
        return await (await self.home(metastore_id)).fetchval(
            "SELECT EXISTS (SELECT 1 FROM assets WHERE metastore_id = $1)", uuid.UUID(metastore_id)
        )

    @_homed
    async def paths(self, metastore_id: str) -> tuple[int, list[StoragePath]]:
        """Every asset holding a storage path, with the version the read saw (to build a URL trie).
        Without the assets' bodies: a metastore of 100,000 tables must load in well under a second."""
        async with (await self.home(metastore_id)).acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            version = await conn.fetchval("SELECT version FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
            if version is None:
                raise MetastoreGone(metastore_id)
            rows = await conn.fetch(
                """SELECT id, type, full_name, storage_path FROM assets
                   WHERE metastore_id = $1 AND storage_path IS NOT NULL""",
                uuid.UUID(metastore_id),
            )
        return version, [StoragePath(str(r["id"]), r["type"], r["full_name"], r["storage_path"]) for r in rows]

    @_homed
    async def changes(self, metastore_id: str, after: int, limit: int) -> list[Change]:
        """Change-log rows for versions > after, oldest first, at most `limit`."""
        rows = await (await self.home(metastore_id)).fetch(
            """SELECT version, changed, parents FROM change_log
               WHERE metastore_id = $1 AND version > $2 ORDER BY version LIMIT $3""",
            uuid.UUID(metastore_id), after, limit,
        )
        return [Change(r["version"], [str(i) for i in r["changed"]], [str(i) for i in r["parents"]]) for r in rows]

    @_homed
    async def change_feed(self, metastore_id: str, after: int, limit: int) -> tuple[int, list[dict], dict]:
        """One snapshot of the change log for the feed: (metastore version, rows for versions > after,
        oldest first, at most `limit`, as dicts of version, at, changed and details, and the current
        (type, full name) of every id they touched that still exists)."""
        async with (await self.home(metastore_id)).acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            meta = await conn.fetchrow("SELECT version, name FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
            if meta is None:
                raise MetastoreGone(metastore_id)
            rows = await conn.fetch(
                """SELECT version, at, changed, details FROM change_log
                   WHERE metastore_id = $1 AND version > $2 ORDER BY version LIMIT $3""",
                uuid.UUID(metastore_id), after, limit)
            ids = sorted({i for r in rows for i in r["changed"]})
            current = {str(r["id"]): (r["type"], r["full_name"]) for r in await conn.fetch(
                "SELECT id, type, full_name FROM assets WHERE id = ANY($1::uuid[])", ids)}
        current[metastore_id] = ("metastore", meta["name"])
        return meta["version"], [{"version": r["version"], "at": r["at"], "changed": [str(i) for i in r["changed"]],
                                  "details": r["details"]} for r in rows], current

    @_homed
    async def add_lineage(self, metastore_id: str, target: Asset, sources: list[Asset], job: str | None,
                          principal: str) -> None:
        """One reported write: `target` was written from `sources`."""
        at = now_ms()
        async with self.unversioned(metastore_id) as conn:
            await conn.executemany(
                """INSERT INTO lineage (metastore_id, source_id, source_type, source_name, target_id, target_name,
                                        job, principal, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
                [(uuid.UUID(metastore_id), uuid.UUID(s.id), s.type, s.full_name, uuid.UUID(target.id),
                  target.full_name, job, principal, at) for s in sources])

    @_homed
    async def add_column_lineage(self, metastore_id: str, edges: list[tuple[Asset, str, Asset, str]],
                                 job: str | None, principal: str) -> None:
        """One reported write's column lineage: (source, source column, target, target column) each."""
        at = now_ms()
        async with self.unversioned(metastore_id) as conn:
            await conn.executemany(
                """INSERT INTO column_lineage (metastore_id, source_id, source_type, source_name, source_column,
                                               target_id, target_name, target_column, job, principal, at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)""",
                [(uuid.UUID(metastore_id), uuid.UUID(s.id), s.type, s.full_name, sc, uuid.UUID(t.id), t.full_name,
                  tc, job, principal, at) for s, sc, t, tc in edges])

    @_homed
    async def column_lineage_edges(self, metastore_id: str, asset_id: str, column: str, upstream: bool) -> list[dict]:
        """The column edges into (`upstream`) or out of one column, one per (source column, target
        column), with the names last recorded and the last time."""
        end, col = ("target_id", "target_column") if upstream else ("source_id", "source_column")
        rows = await (await self.home(metastore_id)).fetch(
            f"""SELECT source_id, source_column, target_id, target_column, max(at) AS last_at,
                       (array_agg(source_type ORDER BY at DESC))[1] AS source_type,
                       (array_agg(source_name ORDER BY at DESC))[1] AS source_name,
                       (array_agg(target_name ORDER BY at DESC))[1] AS target_name
                FROM column_lineage WHERE metastore_id = $1 AND {end} = $2 AND lower({col}) = lower($3)
                GROUP BY source_id, source_column, target_id, target_column
                ORDER BY source_name, source_column, target_name, target_column LIMIT 1000""",
            uuid.UUID(metastore_id), uuid.UUID(asset_id), column)
        return [{**dict(r), "source_id": str(r["source_id"]), "target_id": str(r["target_id"])} for r in rows]

    @_homed
    async def lineage_edges(self, metastore_id: str, ids: list[str], upstream: bool) -> list[dict]:
        """The edges into (`upstream`) or out of the assets `ids`, one per (source, target): the
        names and source type last recorded, first and last time, how many writes, which jobs."""
        end = "target_id" if upstream else "source_id"
        rows = await (await self.home(metastore_id)).fetch(
            f"""SELECT source_id, target_id, min(at) AS first_at, max(at) AS last_at, count(*) AS runs,
                       (array_agg(source_type ORDER BY at DESC))[1] AS source_type,
                       (array_agg(source_name ORDER BY at DESC))[1] AS source_name,
                       (array_agg(target_name ORDER BY at DESC))[1] AS target_name,
                       (array_agg(DISTINCT job) FILTER (WHERE job IS NOT NULL))[1:10] AS jobs
                FROM lineage WHERE metastore_id = $1 AND {end} = ANY($2::uuid[])
                GROUP BY source_id, target_id""",
            uuid.UUID(metastore_id), ids)
        return [{**dict(r), "source_id": str(r["source_id"]), "target_id": str(r["target_id"])} for r in rows]

    @_homed
    async def delta_commits(self, metastore_id: str, table_id: str, start: int, end: int | None,
                            limit: int) -> tuple[int, Asset | None, int | None, int | None, list[dict]]:
        """One snapshot of a table's commits: (metastore version, the table, latest ratified version,
        latest published version, the unpublished commits with start <= version <= end, oldest first)."""
        async with (await self.home(metastore_id)).acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            version, table = await _versioned_one_by_id(conn, metastore_id, table_id)
            head = await conn.fetchrow(f"SELECT {_DELTA_HEAD}", uuid.UUID(table_id))
            rows = await conn.fetch(
                """SELECT * FROM delta_commits WHERE table_id = $1 AND NOT published AND version >= $2
                     AND ($3::bigint IS NULL OR version <= $3) ORDER BY version LIMIT $4""",
                uuid.UUID(table_id), start, end, limit)
        return version, table, head["latest"], head["published"], [dict(r) for r in rows]

    # ---- writes -----------------------------------------------------------

    @asynccontextmanager
    async def write(self, metastore_id: str, expected_version: int):
        """One serializable write to a metastore, as `async with store.write(ms, v) as tx:`. In its
        home; a home that no longer holds it, or holds it fenced (moving), is left for the new one
        before anything is written (Store.rehome), with the same expected version."""
        deadline = time.monotonic() + MOVE_WAIT_SECONDS
        while True:
            moved = None
            async with (await self.home(metastore_id)).acquire() as conn, conn.transaction():
                try:
                    tx = await _begin_write(conn, metastore_id, expected_version)
                except (MetastoreGone, MetastoreMoving) as e:
                    moved = e
                else:
                    yield tx
                    await _log_write(conn, tx)
            if moved is None:
                return
            if not await self.rehome(metastore_id, moved, deadline):
                raise moved

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

    @asynccontextmanager
    async def write_batch(self, metastore_id: str, expected_version: int, *, savepoints: bool = True,
                          prefetch: list[tuple] = ()):
        """Many writes to a metastore in one transaction (group commit, shards/group_commit.py), as
        `async with store.write_batch(ms, v) as batch:` and then `async with batch.write() as tx:`
        per write. Each write is what `write` makes of it (a version of its own, a change-log row).
        All commit together, or none.

        With `savepoints`, each write runs inside a savepoint: one that fails is rolled back alone.
        Without (optimistic: one round trip less per write), a write that fails before it changed
        anything (`WriteTx.dirty`) still fails alone, as nothing of it is to undo; one that fails
        after, or on a database error, raises `GroupSpoiled`, which rolls the whole transaction
        back: the caller replays the group with savepoints. Without savepoints, too, the rows of
        new assets (`WriteTx.put(new=True)`) wait and go in one statement with the group's next one
        (consecutive creates: one insert for all of them); a name taken among them spoils the group.

        The metastore's row is locked once, conditioned on the expected version as `write` does,
        in the same statement as what the writes will read first (`prefetch`: WriteBatch.lock);
        the writes take the versions after it in turn, and the row's new version and the
        change-log rows are written once at the end: fewer round trips per write. A moved
        metastore is followed to its new home as `write` does."""
        deadline = time.monotonic() + MOVE_WAIT_SECONDS
        while True:
            moved = None
            async with (await self.home(metastore_id)).acquire() as conn, conn.transaction():
                batch = WriteBatch(conn, metastore_id, expected_version, savepoints)
                row = await batch.lock(prefetch)
                if row is None:
                    moved = MetastoreGone(metastore_id)
                elif row["ms_fenced"]:
                    moved = MetastoreMoving(metastore_id)
                else:
                    if row["ms_version"] != expected_version:
                        raise VersionConflict(metastore_id, expected_version, row["ms_version"])
                    yield batch
                    await batch.finish()
            if moved is None:
                return
            if not await self.rehome(metastore_id, moved, deadline):
                raise moved


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


async def _begin_write(conn, metastore_id: str, expected_version: int) -> "WriteTx":
    """Bump the metastore's version, conditioned on the one the writer expects (invariant 2)."""
    new_version = await conn.fetchval(
        "UPDATE metastores SET version = version + 1 WHERE id = $1 AND version = $2 AND NOT fenced RETURNING version",
        uuid.UUID(metastore_id), expected_version,
    )
    if new_version is None:
        row = await conn.fetchrow("SELECT version, fenced FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
        if row is None:
            raise MetastoreGone(metastore_id)
        if row["fenced"]:
            raise MetastoreMoving(metastore_id)
        raise VersionConflict(metastore_id, expected_version, row["version"])
    return WriteTx(conn, metastore_id, new_version)


_LOG_WRITE = """INSERT INTO change_log (metastore_id, version, changed, parents, at, details, principal)
                VALUES ($1, $2, $3::uuid[], $4::uuid[], $5, $6, $7)"""

# A deleted asset's grants, as the history keeps them (for undrop).
_HELD_GRANTS = """(SELECT jsonb_agg(jsonb_build_object('principal', g.principal, 'privilege', g.privilege,
                                                   'granted_by', g.granted_by, 'granted_at', g.granted_at))
                   FROM grants g WHERE g.securable_id = gone.id)"""

# Who is writing (a caller's name): set per request by catalog/versions.py, read by `Shard.write`
# into `WriteTx.principal`, kept in the change log for an asset's history.
WRITER: contextvars.ContextVar[str | None] = contextvars.ContextVar("shardcat_writer", default=None)


def _log_row(tx: "WriteTx") -> tuple:
    return (uuid.UUID(tx.metastore_id), tx.version, sorted(tx.changed), sorted(tx.parents), now_ms(), tx.details(),
            tx.principal)


async def _log_write(conn, tx: "WriteTx") -> None:
    await conn.execute(_LOG_WRITE, *_log_row(tx))


class GroupSpoiled(Exception):
    """A write of an optimistic group (no savepoints) failed where it cannot fail alone: after it
    changed rows, or on a database error. The group's transaction is rolled back; replay it with
    savepoints. The write's own error is the cause."""


def _from_database(error: BaseException) -> bool:
    """Whether a database error is in the error's chain (the body may have turned it into its own):
    the transaction may be aborted then, whatever the body did."""
    seen = 0
    while error is not None and seen < 20:
        if isinstance(error, (asyncpg.PostgresError, asyncpg.InterfaceError)):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


class WriteBatch:
    """The writes of one group commit, in one open transaction that holds the metastore's row;
    `version` is the metastore's version after the writes that went through so far (a rolled-back
    write leaves it as it was), `logged` those writes, whose change-log rows the commit appends."""

    def __init__(self, conn, metastore_id: str, expected_version: int, savepoints: bool = True):
        self.conn = conn
        self.metastore_id = metastore_id
        self.version = expected_version
        self.logged: list[WriteTx] = []
        self.savepoints = savepoints
        self._savepoint = False
        # Optimistic groups: new assets' rows not sent yet, and the connection the writes see,
        # which sends them before any statement of its own.
        self.deferred: list[Asset] = []
        self.deferred_commits: list[tuple] = []     # `add_delta_commit`'s statements' arguments
        self._conn = conn if savepoints else _FlushingConnection(self)
        # The group's reads by name, shared by its writes (`WriteTx.reads`): the metastore's row is
        # locked, so its assets change only through the group's own puts and deletes meanwhile.
        self.reads: dict[tuple[str, str], Asset | None] = {}
        # Likewise Delta tables with their heads, by table id (`WriteTx.heads`; `lock` fills it).
        self.heads: dict[str, tuple[Asset | None, int | None, int | None]] = {}

    async def lock(self, keys: list[tuple]):
        """Lock the metastore's row, and in the same statement read ahead what the group's writes
        say they will read (`Shard.write`'s `prefetch`): ("asset", namespace, full name) an asset
        by name, for `WriteTx.get`; ("delta_head", table id) a table and its Delta head, for
        `WriteTx.table_with_delta_head` (a second kind: a statement of its own). Unknown kinds are
        ignored. Returns the row's `ms_version` and `ms_fenced`, or None: no such metastore here.
        The reads share the lock's statement, so its snapshot: if another transaction wrote the
        metastore before the lock was had, its version is past the expected one and the group
        does not run on them."""
        ms = uuid.UUID(self.metastore_id)
        names = sorted({key[1:] for key in keys if key[0] == "asset"})
        ids = sorted({key[1] for key in keys if key[0] == "delta_head" and _is_uuid(key[1])})
        statements = [*([(_LOCK_AND_NAMES, [n for n, _ in names], [f for _, f in names])] if names else []),
                      *([(_LOCK_AND_HEADS, [uuid.UUID(i) for i in ids])] if ids else [])] or [(_LOCK,)]
        first = None
        for sql, *args in statements:
            rows = await self.conn.fetch(sql, ms, *args)
            first = first or (rows[0] if rows else None)
            for row in rows:
                if row.get("key_namespace") is not None:
                    self.reads[row["key_namespace"], row["key_full_name"]] = \
                        _asset(row) if row["id"] is not None else None
                elif row.get("table_id") is not None:
                    self.heads[str(row["table_id"])] = (_asset_of(self.metastore_id, row), row["latest"],
                                                        row["published"])
        return first

    @asynccontextmanager
    async def write(self):
        if self.savepoints:
            # One savepoint name, released and set again in one round trip (simple protocol: two statements).
            await self.conn.execute("RELEASE SAVEPOINT group_write; SAVEPOINT group_write" if self._savepoint
                                    else "SAVEPOINT group_write")
            self._savepoint = True
        tx = WriteTx(self._conn, self.metastore_id, self.version + 1, self.reads, self.heads)
        if not self.savepoints:
            tx.defer = self.deferred.append
            tx.defer_commit = self.deferred_commits.append
        tx.earlier = tuple(self.logged)     # not in the change log until the group commits (store/conflicts.py)
        try:
            yield tx
        except Exception as e:
            if not self.savepoints:
                if is_db_unavailable(e) or self.conn.is_closed():
                    raise                   # the transaction is lost: no replay saves the group
                if tx.dirty or _from_database(e):
                    raise GroupSpoiled(str(e)) from e
                raise                       # nothing of it was sent that changed anything: it fails alone
            tx.forget_reads()               # they may hold what the rolled-back write did
            if not self.conn.is_closed():
                await self.conn.execute("ROLLBACK TO SAVEPOINT group_write")
            raise
        except BaseException:
            if self.savepoints:
                tx.forget_reads()
                if not self.conn.is_closed():
                    await self.conn.execute("ROLLBACK TO SAVEPOINT group_write")
            raise
        self.version = tx.version
        self.logged.append(tx)

    async def flush(self) -> None:
        """Send the deferred rows of new assets, in one statement, then the deferred Delta commits."""
        if self.deferred:
            rows, self.deferred = self.deferred, []
            await _insert_assets(self.conn, rows)
        await self._send_commits()

    async def _send_commits(self) -> None:
        """The deferred Delta commits in one round trip (each its own statement, as a write alone
        sends it: one plan for both)."""
        if self.deferred_commits:
            commits, self.deferred_commits = self.deferred_commits, []
            await self.conn.executemany(_ADD_DELTA_COMMIT, commits)

    async def finish(self) -> None:
        """Once the writes are done, in one statement: the deferred rows of new assets, the
        metastore's new version and the writes' change-log rows (deferred Delta commits before,
        in their own round trip). A row refused then (a name taken) spoils the group."""
        try:
            await self._send_commits()
            if not self.logged and not self.deferred:
                return
            new, self.deferred = self.deferred, []
            logged = [_log_row(tx) for tx in self.logged]
            await self.conn.execute(
                _FINISH_GROUP, *_asset_arrays(new), self.version, [r[1] for r in logged],
                [_uuid_array(r[2]) for r in logged], [_uuid_array(r[3]) for r in logged], [r[4] for r in logged],
                [_jsonb_text(r[5]) for r in logged], [r[6] for r in logged], uuid.UUID(self.metastore_id))
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as e:
            if is_db_unavailable(e) or self.conn.is_closed():
                raise
            raise GroupSpoiled(str(e)) from e


class _FlushingConnection:
    """The connection as an optimistic group's writes see it: before each statement (and savepoint)
    it sends the group's deferred rows, so every read sees every earlier write of the group."""

    def __init__(self, batch: WriteBatch):
        self._batch = batch
        self._conn = batch.conn

    def _flushing(name: str):
        """The connection's statement method `name`, sending the deferred rows first."""
        async def statement(self, *args, **kwargs):
            await self._batch.flush()
            return await getattr(self._conn, name)(*args, **kwargs)
        statement.__name__ = name
        return statement

    execute, executemany, fetch, fetchrow, fetchval = map(
        _flushing, ("execute", "executemany", "fetch", "fetchrow", "fetchval"))
    del _flushing

    @asynccontextmanager
    async def transaction(self, **kwargs):
        await self._batch.flush()           # not inside the savepoint: its rollback must not take them
        async with self._conn.transaction(**kwargs):
            yield

    def is_closed(self) -> bool:
        return self._conn.is_closed()


UNKNOWN = object()     # `WriteTx.known`: not read yet


class WriteTx:
    """The inside of one metastore write: reads see everything committed before it."""

    def __init__(self, conn, metastore_id: str, version: int, reads: dict | None = None, heads: dict | None = None):
        self._conn = conn
        # Whether this write may have changed rows: set before each statement that does, and when
        # its connection is taken for statements of the caller's own (`conn`). A write of an
        # optimistic group that fails while not dirty fails alone (WriteBatch).
        self.dirty = False
        self.metastore_id = metastore_id
        self.version = version
        # Assets read by name in this transaction, (namespace, full name) -> the asset or None: read
        # again, one is answered from here (a create reads its schema's catalog twice; a group's
        # writes, their common parents). Kept true by `put` and `delete`, the only ways a write
        # changes assets; whoever rolls back part of the transaction calls `forget_reads`.
        self.reads: dict[tuple[str, str], Asset | None] = {} if reads is None else reads
        # Delta tables read in this transaction with their heads, id -> (table or None, latest,
        # published): kept true by `add_delta_commit`, `publish_delta_commits`, `put` and `delete`.
        self.heads: dict[str, tuple[Asset | None, int | None, int | None]] = {} if heads is None else heads
        self.changed: set[str] = set()         # ids this write changed; `touch` says how, for the change feed
        self.parents: set[str] = set()
        self.written: dict[str, Asset] = {}   # id -> new state
        self.created: set[str] = set()         # ids that did not exist before this write
        self.deleted: dict[str, Asset] = {}   # id -> last state
        self.touched: dict[str, dict] = {}     # id -> what this write did to it, for the change feed
        self.grants_set: dict[str, dict[str, set[str]]] = {}   # securable id -> its grants now, set by this write
        self.principal: str | None = WRITER.get()     # who writes (the change log keeps it)
        self.earlier: tuple[WriteTx, ...] = ()  # the writes of the same group commit before this one
        self.defer = None       # an optimistic group's: takes a new asset's row, sent with the group's next statement
        self.defer_commit = None    # likewise a Delta commit's statement (WriteBatch.flush)

    @property
    def conn(self):
        """The write's connection, for statements of the caller's own (store/history.py,
        store/conflicts.py): the write counts as having changed rows from then on."""
        self.dirty = True
        return self._conn

    def touch(self, securable_id: str, change: str, type_name: str | None = None, full_name: str | None = None):
        """Record that this write changed a securable, and how: CREATE, UPDATE, DELETE, PERMISSIONS,
        DELTA_COMMIT or DELTA_PUBLISH. One write may touch an id more than once: created and then
        updated, it was created; deleted and then put back, updated; updated, it stays updated."""
        self.changed.add(securable_id)
        before = self.touched.get(securable_id, {})
        if before.get("change") == "CREATE" and change != "DELETE" or \
                before.get("change") == "UPDATE" and change not in ("CREATE", "DELETE"):
            change = before["change"]
        self.touched[securable_id] = {"id": securable_id, "change": change, "type": type_name or before.get("type"),
                                      "full_name": full_name or before.get("full_name")}

    def details(self) -> list[dict]:
        return [self.touched[i] for i in sorted(self.touched)]

    async def get(self, namespace: str, full_name: str) -> Asset | None:
        key = (namespace, full_name)
        try:
            return self.reads[key]
        except KeyError:
            pass
        _, asset = await _get_asset(self._conn, self.metastore_id, namespace, full_name)
        self.reads[key] = asset
        return asset

    def known(self, namespace: str, full_name: str):
        """The asset under a name (None: no asset) if this write, or its group, has read it already;
        `UNKNOWN` otherwise. No round trip."""
        return self.reads.get((namespace, full_name), UNKNOWN)

    def forget_reads(self) -> None:
        """Part of the transaction was rolled back (a savepoint): what was read may have changed."""
        self.reads.clear()
        self.heads.clear()

    def _changed(self, ids: set[str], keys: list[tuple[str, str]]) -> None:
        """Assets `ids` were written or deleted, now found under `keys`: their reads go."""
        reads = self.reads
        for key in keys:
            reads.pop(key, None)
        for asset_id in ids:
            self.heads.pop(asset_id, None)
        for key in [k for k, a in reads.items() if a is not None and a.id in ids]:
            del reads[key]

    async def has_children(self, parent_id: str) -> bool:
        return await self._conn.fetchval("SELECT EXISTS (SELECT 1 FROM assets WHERE parent_id = $1)", uuid.UUID(parent_id))

    async def descendants(self, asset_id: str) -> list[Asset]:
        rows = await self._conn.fetch(
            f"""WITH RECURSIVE below AS (
                    SELECT * FROM assets WHERE parent_id = $1
                    UNION ALL SELECT a.* FROM assets a JOIN below b ON a.parent_id = b.id)
                SELECT {_ASSET_COLUMNS} FROM below""",
            uuid.UUID(asset_id),
        )
        return [_asset(r) for r in rows]

    async def update_metastore(self, info: dict, name: str) -> None:
        self.dirty = True
        try:
            await self._conn.execute(
                "UPDATE metastores SET info = $2, name = $3 WHERE id = $1", uuid.UUID(self.metastore_id), info, name
            )
        except asyncpg.UniqueViolationError:
            raise KeyError(name) from None
        self.touch(self.metastore_id, "UPDATE", "metastore", name)

    async def put(self, asset: Asset, *, new: bool = False) -> Asset:
        """Insert or replace an asset; returns it stamped with this write's version. `new`: its id
        was made by this write (no row has it): in an optimistic group its row may wait for the
        group's next statement (WriteBatch), a name taken then spoiling the group."""
        asset = dataclasses.replace(asset, written_at=self.version)
        self.dirty = True
        if new and self.defer is not None:
            self.defer(asset)
            self._changed({asset.id}, [(asset.namespace, asset.full_name)])
            self.created.add(asset.id)
            self.touch(asset.id, "CREATE", asset.type, asset.full_name)
            self.parents.add(asset.parent_id)
            self.written[asset.id] = asset
            return asset
        try:
            # The state this replaces (written by an earlier write) goes to the history in the same
            # statement: one round trip, as before (migration 0012, docs/versions.md).
            inserted = await self._conn.fetchval(
                f"""WITH old AS (SELECT * FROM assets WHERE id = $1 AND written_at < $10),
                    kept AS (INSERT INTO asset_history ({_ASSET_COLUMNS}, replaced_at)
                             SELECT {_ASSET_COLUMNS}, $10 FROM old ON CONFLICT DO NOTHING)
                    INSERT INTO assets ({_ASSET_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                    ON CONFLICT (id) DO UPDATE SET type = $3, namespace = $4, parent_id = $5, name = $6,
                        full_name = $7, storage_path = $8, info = $9, written_at = $10
                    RETURNING (xmax = 0)""",
                uuid.UUID(asset.id), uuid.UUID(asset.metastore_id), asset.type, asset.namespace,
                uuid.UUID(asset.parent_id), asset.name, asset.full_name, asset.storage_path, asset.info,
                asset.written_at,
            )
        except asyncpg.UniqueViolationError:
            raise KeyError(asset.full_name) from None
        self._changed({asset.id}, [(asset.namespace, asset.full_name)])
        replaced = self.deleted.get(asset.id)
        if inserted and replaced is None:
            self.created.add(asset.id)
        # A table that takes over its staging table's id is new to the change feed all the same.
        new = inserted and (replaced is None or replaced.type != asset.type)
        self.touch(asset.id, "CREATE" if new else "UPDATE", asset.type, asset.full_name)
        self.parents.add(asset.parent_id)
        self.written[asset.id] = asset
        return asset

    async def insert_new(self, assets: list[Asset]) -> list[Asset]:
        """Insert many assets that do not exist yet (new ids: a clone's), in one statement; a name
        taken raises KeyError. Returns them stamped with this write's version."""
        stamped = [dataclasses.replace(a, written_at=self.version) for a in assets]
        self.dirty = True
        try:
            await _insert_assets(self._conn, stamped)
        except asyncpg.UniqueViolationError as e:
            raise KeyError(str(e)) from None
        for a in stamped:
            self.created.add(a.id)
            self.touch(a.id, "CREATE", a.type, a.full_name)
            self.parents.add(a.parent_id)
            self.written[a.id] = a
        return stamped

    async def delete(self, assets: list[Asset]) -> None:
        """Delete assets; their last states (and grants) stay in the history, marked dropped, for
        reads at earlier versions and undrop until the retention window passes. A dropped table's
        Delta commits stay too (undrop needs them); the history's purge deletes them."""
        ids = [a.id for a in assets]
        self._changed(set(ids), [])
        self.dirty = True
        if any(a.written_at == self.version for a in assets):
            # Changed earlier in this same write: the state kept is the one before it (its grants
            # read before the delete takes them).
            await self._conn.execute(
                f"""UPDATE asset_history h SET dropped = true, grants = {_HELD_GRANTS.replace('gone.', 'h.')}
                    WHERE id = ANY($1::uuid[]) AND replaced_at = $2""", ids, self.version)
        await self._conn.execute(
            f"""WITH gone AS (DELETE FROM assets WHERE id = ANY($1::uuid[]) RETURNING *)
                INSERT INTO asset_history ({_ASSET_COLUMNS}, replaced_at, dropped, grants)
                SELECT {_ASSET_COLUMNS}, $2, true, {_HELD_GRANTS} FROM gone WHERE written_at < $2
                ON CONFLICT DO NOTHING""", ids, self.version)
        for a in assets:
            self.touch(a.id, "DELETE", a.type, a.full_name)
            self.parents.add(a.parent_id)
            self.deleted[a.id] = a

    # ---- grants (governance/grants.py decides them; store/grants.py reads them) ----

    async def grants_on(self, securable_id: str) -> dict[str, set[str]]:
        """{principal: privileges} held on a securable, as of this write."""
        held: dict[str, set[str]] = {}
        for r in await self._conn.fetch("SELECT principal, privilege FROM grants WHERE securable_id = $1",
                                       uuid.UUID(securable_id)):
            held.setdefault(r["principal"], set()).add(r["privilege"])
        return held

    async def set_grants(self, securable_id: str, held: dict[str, set[str]], *, is_asset: bool, granted_by: str,
                         at: int) -> None:
        """Replace every grant on a securable (the metastore itself when not `is_asset`) with `held`."""
        sid = uuid.UUID(securable_id)
        self.dirty = True
        await self._conn.execute("DELETE FROM grants WHERE securable_id = $1", sid)
        await self._conn.executemany(
            "INSERT INTO grants VALUES ($1, $2, $3, $4, $5, $6, $7)",
            [(uuid.UUID(self.metastore_id), sid, sid if is_asset else None, p, priv, granted_by, at)
             for p, privs in held.items() for priv in privs])
        self.grants_set[securable_id] = held

    # ---- Delta commits of catalog-managed tables (shardcat/delta/commits.py) ----

    async def get_by_id(self, asset_id: str) -> Asset | None:
        row = await self._conn.fetchrow(f"SELECT {_ASSET_COLUMNS} FROM assets WHERE id = $1", uuid.UUID(asset_id))
        return _asset_of(self.metastore_id, row)

    async def table_with_delta_head(self, table_id: str) -> tuple[Asset | None, int | None, int | None]:
        """`get_by_id` and `delta_head` of a table in one round trip, or none when this write or its
        group has read them already."""
        try:
            return self.heads[table_id]
        except KeyError:
            pass
        row = await self._conn.fetchrow(
            f"""SELECT {_ASSET_COLUMNS}, h.latest, h.published
                FROM (SELECT {_DELTA_HEAD}) h LEFT JOIN assets a ON a.id = $1""",
            uuid.UUID(table_id))
        self.heads[table_id] = head = (_asset_of(self.metastore_id, row), row["latest"], row["published"])
        return head

    async def delta_head(self, table_id: str) -> tuple[int | None, int | None]:
        """(latest ratified version, latest published version) of a table; None where there is none."""
        if table_id in self.heads:
            return self.heads[table_id][1:]
        row = await self._conn.fetchrow(f"SELECT {_DELTA_HEAD}", uuid.UUID(table_id))
        return row["latest"], row["published"]

    def _moved_head(self, table_id: str, latest: int | None, published: int | None) -> None:
        if table_id in self.heads:
            table, was_latest, was_published = self.heads[table_id]
            self.heads[table_id] = (table, was_latest if latest is None else latest,
                                    was_published if published is None else published)

    async def delta_commit_at(self, table_id: str, version: int) -> dict | None:
        row = await self._conn.fetchrow("SELECT * FROM delta_commits WHERE table_id = $1 AND version = $2",
                                       uuid.UUID(table_id), version)
        return dict(row) if row else None

    async def add_delta_commit(self, table_id: str, version: int, file_name: str, file_size: int,
                               file_modification_timestamp: int, commit_timestamp: int, content: str | None,
                               publish_up_to: int | None = None, published: int = -1) -> None:
        """Ratify a commit; with `publish_up_to` (below `version`), then `publish_delta_commits` up to
        it in the same round trip (`published`: the table's latest published version before)."""
        self.dirty = True
        assert publish_up_to is None or publish_up_to < version
        args = (uuid.UUID(table_id), version, uuid.UUID(self.metastore_id), file_name, file_size,
                file_modification_timestamp, commit_timestamp, content, now_ms(), publish_up_to, published)
        if self.defer_commit is not None:
            self.defer_commit(args)
        else:
            await self._conn.execute(_ADD_DELTA_COMMIT, *args)
        self._moved_head(table_id, version, publish_up_to)
        self.touch(table_id, "DELTA_COMMIT")
        if publish_up_to is not None:
            self.touch(table_id, "DELTA_PUBLISH")

    async def publish_delta_commits(self, table_id: str, up_to: int, published: int = -1) -> None:
        """Mark versions <= up_to published; an inline commit's content is no longer needed then.
        `published`: the table's latest published version before (every version up to it is
        published already), so the update walks the few versions above it, not the table's history."""
        self.dirty = True
        await self._conn.execute(
            """UPDATE delta_commits SET published = true, content = NULL
               WHERE table_id = $1 AND version > $3 AND version <= $2 AND NOT published""",
            uuid.UUID(table_id), up_to, published)
        self._moved_head(table_id, None, up_to)
        self.touch(table_id, "DELTA_PUBLISH")


_INSERT_ASSETS = f"""INSERT INTO assets ({_ASSET_COLUMNS})
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[],
                         $7::text[], $8::text[], $9::jsonb[], $10::bigint[])"""


def _asset_arrays(assets: list[Asset]) -> tuple:
    """`_INSERT_ASSETS`' ten arguments: a column each."""
    return ([uuid.UUID(a.id) for a in assets], [uuid.UUID(a.metastore_id) for a in assets],
            [a.type for a in assets], [a.namespace for a in assets], [uuid.UUID(a.parent_id) for a in assets],
            [a.name for a in assets], [a.full_name for a in assets], [a.storage_path for a in assets],
            [a.info for a in assets], [a.written_at for a in assets])


async def _insert_assets(conn, assets: list[Asset]) -> None:
    """Insert assets that do not exist yet, in one statement (a taken name or id: UniqueViolationError)."""
    await conn.execute(_INSERT_ASSETS, *_asset_arrays(assets))


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _uuid_array(ids: list[str]) -> str:
    """A uuid[] as PostgreSQL's text for it."""
    return "{" + ",".join(ids) + "}"


# A group's end (WriteBatch.finish): its new assets ($1-$10, as `_INSERT_ASSETS`), metastore $18's
# new version ($11) and its writes' change-log rows ($12-$17: version, changed, parents, at, details, principal;
# arrays and JSON as text: an array of arrays of different lengths cannot go as one).
_FINISH_GROUP = f"""WITH added AS ({_INSERT_ASSETS}),
    bumped AS (UPDATE metastores SET version = $11 WHERE id = $18)
    INSERT INTO change_log (metastore_id, version, changed, parents, at, details, principal)
    SELECT $18, v, c::uuid[], p::uuid[], at, d::jsonb, who
    FROM unnest($12::bigint[], $13::text[], $14::text[], $15::bigint[], $16::text[], $17::text[])
         AS t(v, c, p, at, d, who)"""


# A table's latest and latest published Delta versions, of table $1: each a walk down an index from
# the top that stops at its first entry (the primary key; the published commits' partial index), not
# an aggregate over every commit the table ever had nor a filter that a cached plan may turn into one.
_DELTA_HEAD = """(SELECT version FROM delta_commits WHERE table_id = $1 ORDER BY version DESC LIMIT 1) AS latest,
                 (SELECT version FROM delta_commits WHERE table_id = $1 AND published
                  ORDER BY version DESC LIMIT 1) AS published"""

# A group's lock of metastore $1's row (WriteBatch.lock), and with it what its writes read first.
_LOCK = "SELECT version AS ms_version, fenced AS ms_fenced FROM metastores WHERE id = $1 FOR UPDATE"


def _locked(read: str) -> str:
    """`read`'s rows, each with the metastore's locked row's version and fence, in one statement
    (one row of nulls beside them when `read` has none; no row when there is no metastore)."""
    return f"""WITH m AS ({_LOCK}) SELECT m.ms_version, m.ms_fenced, r.* FROM m LEFT JOIN LATERAL ({read}) r ON true"""


# Assets of metastore $1 by (namespace, full name) ($2, $3: arrays), each name with its asset or
# nulls: a lookup per name (a LIMIT keeps the planner from joining the tables as wholes).
_LOCK_AND_NAMES = _locked(f"""SELECT k.namespace AS key_namespace, k.full_name AS key_full_name, a.*
    FROM unnest($2::text[], $3::text[]) AS k(namespace, full_name)
    LEFT JOIN LATERAL (SELECT {_ASSET_COLUMNS} FROM assets
                       WHERE metastore_id = $1 AND namespace = k.namespace AND full_name = k.full_name LIMIT 1) a ON true""")

# Tables by id ($2, an array) with their Delta heads: a lookup per id, likewise.
_LOCK_AND_HEADS = _locked(f"""SELECT t.id AS table_id, a.*,
        (SELECT version FROM delta_commits WHERE table_id = t.id ORDER BY version DESC LIMIT 1) AS latest,
        (SELECT version FROM delta_commits WHERE table_id = t.id AND published ORDER BY version DESC LIMIT 1) AS published
    FROM unnest($2::uuid[]) AS t(id) LEFT JOIN LATERAL (SELECT {_ASSET_COLUMNS} FROM assets WHERE id = t.id LIMIT 1) a ON true""")

# Ratify a commit and, when $10 (below its version) is not null, mark the versions above $11 (the
# latest published before) up to $10 published: an inline commit's content is not needed then. The
# update does not see the row the insert adds (one snapshot): it is above $10.
_ADD_DELTA_COMMIT = """WITH added AS (
        INSERT INTO delta_commits (table_id, version, metastore_id, file_name, file_size, file_modification_timestamp,
                                   commit_timestamp, content, ratified_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9))
    UPDATE delta_commits SET published = true, content = NULL
    WHERE table_id = $1 AND version > $11 AND version <= $10::bigint AND NOT published"""


async def _get_asset(conn, metastore_id: str, namespace: str, full_name: str) -> tuple[int, Asset | None]:
    rows = await conn.fetch(
        """SELECT m.version AS ms_version, a.* FROM metastores m
           LEFT JOIN assets a ON a.metastore_id = m.id AND a.namespace = $2 AND a.full_name = $3
           WHERE m.id = $1""",
        uuid.UUID(metastore_id), namespace, full_name,
    )
    return _versioned_one(metastore_id, rows)


def _versioned_many(metastore_id: str, rows) -> tuple[int, list[Asset]]:
    if not rows:
        raise MetastoreGone(metastore_id)
    return rows[0]["ms_version"], [a for a in (_asset_of(metastore_id, r) for r in rows) if a is not None]


def _versioned_one(metastore_id: str, rows) -> tuple[int, Asset | None]:
    version, assets = _versioned_many(metastore_id, rows)
    return version, (assets[0] if assets else None)


async def _versioned_one_by_id(conn, metastore_id: str, asset_id: str) -> tuple[int, Asset | None]:
    rows = await conn.fetch(
        """SELECT m.version AS ms_version, a.* FROM metastores m
           LEFT JOIN assets a ON a.id = $2 WHERE m.id = $1""",
        uuid.UUID(metastore_id), uuid.UUID(asset_id),
    )
    return _versioned_one(metastore_id, rows)
