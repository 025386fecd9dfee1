"""Versioned writes: `Store.write` (one write, its own transaction) and `Store.write_batch` (a group
commit's writes in one transaction, shards/group_commit.py), each write a `WriteTx`.

A write first bumps the metastore version conditioned on the version the writer expects
(docs/design.md invariant 2), then writes asset rows, then appends a change-log row naming what
changed; if the condition fails another writer got there first: `VersionConflict`. A group
locks the metastore's row once and gives its writes the versions after it in turn (`WriteBatch`).
Rows no write versions (lineage, snapshots) go through `Store.unversioned` (directory.py).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from contextlib import asynccontextmanager

import asyncpg

from ..entities.asset import Asset
from ..entities.values import now_ms
from .assets import read_asset
from .delta import ADD_DELTA_COMMIT, DeltaWrites
from .directory import MOVE_WAIT_SECONDS
from .errors import GroupSpoiled, MetastoreGone, MetastoreMoving, VersionConflict, from_database, is_db_unavailable
from .rows import ASSET_COLUMNS, asset_from, asset_of, jsonb_text

class Writes:
    """The part of `Store` (db.py) that opens writes, in the metastore's home (`Directory.home`)."""

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


def _log_row(tx: "WriteTx") -> tuple:
    return (uuid.UUID(tx.metastore_id), tx.version, sorted(tx.changed), sorted(tx.parents), now_ms(), tx.details(),
            tx.principal)


async def _log_write(conn, tx: "WriteTx") -> None:
    await conn.execute(_LOG_WRITE, *_log_row(tx))


UNKNOWN = object()     # `WriteTx.known`: not read yet


class WriteTx(DeltaWrites):
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
        self.principal: str | None = None     # who writes, kept in the change log (`Shard.write` names it)
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
        _, asset = await read_asset(self._conn, self.metastore_id, namespace, full_name)
        self.reads[key] = asset
        return asset

    async def get_by_id(self, asset_id: str) -> Asset | None:
        row = await self._conn.fetchrow(f"SELECT {ASSET_COLUMNS} FROM assets WHERE id = $1", uuid.UUID(asset_id))
        return asset_of(self.metastore_id, row)

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
                SELECT {ASSET_COLUMNS} FROM below""",
            uuid.UUID(asset_id),
        )
        return [asset_from(r) for r in rows]

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
            return self.recorded_put(asset, inserted=True)
        try:
            # The state this replaces (written by an earlier write) goes to the history in the same
            # statement: one round trip, as before (migration 0012, docs/versions.md).
            inserted = await self._conn.fetchval(
                f"""WITH old AS (SELECT * FROM assets WHERE id = $1 AND written_at < $10),
                    kept AS (INSERT INTO asset_history ({ASSET_COLUMNS}, replaced_at)
                             SELECT {ASSET_COLUMNS}, $10 FROM old ON CONFLICT DO NOTHING)
                    INSERT INTO assets ({ASSET_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                    ON CONFLICT (id) DO UPDATE SET type = $3, namespace = $4, parent_id = $5, name = $6,
                        full_name = $7, storage_path = $8, info = $9, written_at = $10
                    RETURNING (xmax = 0)""",
                uuid.UUID(asset.id), uuid.UUID(asset.metastore_id), asset.type, asset.namespace,
                uuid.UUID(asset.parent_id), asset.name, asset.full_name, asset.storage_path, asset.info,
                asset.written_at,
            )
        except asyncpg.UniqueViolationError:
            raise KeyError(asset.full_name) from None
        return self.recorded_put(asset, inserted)

    def recorded_put(self, asset: Asset, inserted: bool) -> Asset:
        """What a put records once the asset's row is written (`inserted`: no row had its id before):
        its reads go; the change log, the feed and the shard's followers learn of it (`written`)."""
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
                INSERT INTO asset_history ({ASSET_COLUMNS}, replaced_at, dropped, grants)
                SELECT {ASSET_COLUMNS}, $2, true, {_HELD_GRANTS} FROM gone WHERE written_at < $2
                ON CONFLICT DO NOTHING""", ids, self.version)
        self.recorded_delete(assets)

    def recorded_delete(self, assets: list[Asset]) -> None:
        """What a delete records once the assets' rows are gone (`deleted`: their last states)."""
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
                        asset_from(row) if row["id"] is not None else None
                elif row.get("table_id") is not None:
                    self.heads[str(row["table_id"])] = (asset_of(self.metastore_id, row), row["latest"],
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
                if tx.dirty or from_database(e):
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

    def lost(self) -> bool:
        """Whether the group's transaction is gone (its connection closed): no write of it can fail alone."""
        return self.conn.is_closed()

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
            await self.conn.executemany(ADD_DELTA_COMMIT, commits)

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
                [jsonb_text(r[5]) for r in logged], [r[6] for r in logged], uuid.UUID(self.metastore_id))
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


_INSERT_ASSETS = f"""INSERT INTO assets ({ASSET_COLUMNS})
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
    LEFT JOIN LATERAL (SELECT {ASSET_COLUMNS} FROM assets
                       WHERE metastore_id = $1 AND namespace = k.namespace AND full_name = k.full_name LIMIT 1) a ON true""")

# Tables by id ($2, an array) with their Delta heads: a lookup per id, likewise.
_LOCK_AND_HEADS = _locked(f"""SELECT t.id AS table_id, a.*,
        (SELECT version FROM delta_commits WHERE table_id = t.id ORDER BY version DESC LIMIT 1) AS latest,
        (SELECT version FROM delta_commits WHERE table_id = t.id AND published ORDER BY version DESC LIMIT 1) AS published
    FROM unnest($2::uuid[]) AS t(id) LEFT JOIN LATERAL (SELECT {ASSET_COLUMNS} FROM assets WHERE id = t.id LIMIT 1) a ON true""")
