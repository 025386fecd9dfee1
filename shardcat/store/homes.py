"""Moving a metastore between home databases while it serves: copy, catch up, fence, switch.

docs/cluster.md "Home databases" has the protocol and its measured timeline. In short: the
metastore's rows are copied to the target in one snapshot of the source (fenced there: nothing
writes to the copy), then caught up from the change log while writes go on; then the source's
row is fenced (`metastores.fenced`, taken after every write in flight commits, so every later
write there fails with MetastoreMoving before it writes anything), the last changes are copied,
the copy is checked against the source, unfenced, and the directory names the target as the
home. Writers that found the fence wait for that switch (Store.rehome) and write in the new
home with the same expected version: versions go on without a gap or a repeat, and no write is
acknowledged by the old home after the switch. The source's rows are deleted last.

A move that fails before the switch lifts the fence and deletes the copy; one whose process
died is cleaned up by `recover_moves` (at the next start, or the next move of that metastore).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

from ..entities.values import now_ms
from .db import Store
from .directory import MOVE_LOCK_CLASS, move_lock_key
from .errors import MetastoreGone, is_db_unavailable

log = logging.getLogger(__name__)

# A metastore's rows in its home (each table has its `metastore_id`), by table, with how a change
# is caught up: the column holding the id of the securable a change-log row names (its rows are
# replaced), or one of the kinds below. Every table holding one metastore's state belongs here.
SERIAL = "serial"       # rows with an id of the database's own (lineage): new ids in the target, caught up by id
VERSIONED = "version"   # the change log itself: caught up by version
WHOLE = "whole"         # few rows changed by no versioned write too (snapshots): copied whole at each pass
# Tables that writes without a version change too (Store.unversioned: the history's purge, a purge
# request): copied again whole by a pass that finds the metastore's `side_writes` moved.
SIDE_TABLES = ("delta_commits", "asset_history")
HOME_TABLES: tuple[tuple[str, str], ...] = (
    ("assets", "id"),
    ("grants", "securable_id"),
    ("delta_commits", "table_id"),
    ("asset_history", "id"),
    ("change_log", VERSIONED),
    ("lineage", SERIAL),
    ("column_lineage", SERIAL),
    ("history_horizons", WHOLE),
    ("version_snapshots", WHOLE),
    ("table_clones", WHOLE),
)
BATCH_ROWS = 2000           # rows per insert into the target
CATCH_UP_ROUNDS = 5         # catch-up passes while serving, at most, before the fence
CATCH_UP_CLOSE = 20         # versions behind the source: close enough to fence


class MoveError(Exception):
    """A move that cannot be made or was given up (the metastore stays where it was, serving)."""


@dataclass
class _Progress:
    version: int = 0                       # the source's version the target holds
    marks: dict[str, int] | None = None    # serial table -> highest source id copied
    side: int = 0                          # the source's side_writes as copied
    rows: int = 0
    side_copies: int = 0                   # passes that copied SIDE_TABLES again


async def _columns(conn, table: str, serial: bool = False) -> str:
    """The columns a copy writes: not those PostgreSQL computes (generated ones, a serial table's id)."""
    rows = await conn.fetch("""SELECT column_name FROM information_schema.columns
                               WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER'
                                 AND NOT ($2 AND column_name = 'id')
                               ORDER BY ordinal_position""", table, serial)
    return ", ".join(f'"{r["column_name"]}"' for r in rows)


async def _copy(src, dst, table: str, where: str, args: list, columns: str) -> int:
    """Rows of `table` matching `where` in the source's open snapshot, inserted in the target."""
    insert = (f"INSERT INTO {table} ({columns}) "
              f"SELECT {columns} FROM json_populate_recordset(null::{table}, $1::json)")
    batch: list[str] = []
    count = 0
    async for row in src.cursor(f"SELECT row_to_json(t)::text FROM {table} t WHERE {where}", *args,
                                prefetch=BATCH_ROWS):
        batch.append(row[0])
        if len(batch) >= BATCH_ROWS:
            await dst.execute(insert, "[" + ",".join(batch) + "]")
            count, batch = count + len(batch), []
    if batch:
        await dst.execute(insert, "[" + ",".join(batch) + "]")
        count += len(batch)
    return count


async def _marks(src, ms: uuid.UUID) -> dict[str, int]:
    return {t: await src.fetchval(f"SELECT coalesce(max(id), 0) FROM {t} WHERE metastore_id = $1", ms)
            for t, key in HOME_TABLES if key == SERIAL}


async def _bulk_copy(src, dst, ms: uuid.UUID) -> _Progress:
    """The whole metastore, from one snapshot of the source, into the target (fenced there)."""
    await dst.execute("DELETE FROM metastores WHERE id = $1", ms)      # a failed move's leftovers
    async with src.transaction(isolation="repeatable_read", readonly=True):
        meta = await src.fetchrow("SELECT * FROM metastores WHERE id = $1", ms)
        if meta is None:
            raise MetastoreGone(str(ms))
        if meta["fenced"]:
            raise MoveError("the metastore is fenced in its home: another move is under way")
        progress = _Progress(meta["version"], await _marks(src, ms), meta["side_writes"])
        async with dst.transaction():
            await dst.execute("INSERT INTO metastores (id, name, version, info, fenced) VALUES ($1, $2, $3, $4, true)",
                              ms, meta["name"], meta["version"], meta["info"])
            for table, key in HOME_TABLES:
                progress.rows += await _copy(src, dst, table, "metastore_id = $1", [ms],
                                             await _columns(dst, table, key == SERIAL))
    return progress


async def _catch_up(src, dst, ms: uuid.UUID, progress: _Progress) -> int:
    """Copy what changed in the source since `progress.version` (the change log names it) and
    the serial rows added since; returns how many versions that was."""
    async with src.transaction(isolation="repeatable_read", readonly=True):
        meta = await src.fetchrow("SELECT version, name, info, side_writes FROM metastores WHERE id = $1", ms)
        if meta is None:
            raise MetastoreGone(str(ms))
        behind = meta["version"] - progress.version
        whole = {t for t, key in HOME_TABLES if key == WHOLE}
        if meta["side_writes"] != progress.side:
            whole |= set(SIDE_TABLES)
            progress.side_copies += 1
        changed = await src.fetchval(
            """SELECT coalesce(array_agg(DISTINCT c), '{}') FROM change_log, unnest(changed) AS c
               WHERE metastore_id = $1 AND version > $2""", ms, progress.version)
        marks = await _marks(src, ms)
        async with dst.transaction():
            for table, key in reversed(HOME_TABLES):     # dependents first (grants name assets)
                if table in whole:
                    await dst.execute(f"DELETE FROM {table} WHERE metastore_id = $1", ms)
                elif key not in (VERSIONED, SERIAL) and changed:
                    await dst.execute(f"DELETE FROM {table} WHERE metastore_id = $1 AND {key} = ANY($2::uuid[])",
                                      ms, changed)
            for table, key in HOME_TABLES:
                columns = await _columns(dst, table, key == SERIAL)
                if key == SERIAL:
                    progress.rows += await _copy(src, dst, table, "metastore_id = $1 AND id > $2",
                                                 [ms, progress.marks[table]], columns)
                elif table in whole:
                    progress.rows += await _copy(src, dst, table, "metastore_id = $1", [ms], columns)
                elif key == VERSIONED:
                    progress.rows += await _copy(src, dst, table, "metastore_id = $1 AND version > $2",
                                                 [ms, progress.version], columns)
                elif changed:
                    progress.rows += await _copy(src, dst, table, f"metastore_id = $1 AND {key} = ANY($2::uuid[])",
                                                 [ms, changed], columns)
            await dst.execute("UPDATE metastores SET version = $2, name = $3, info = $4 WHERE id = $1",
                              ms, meta["version"], meta["name"], meta["info"])
    progress.version, progress.marks, progress.side = meta["version"], marks, meta["side_writes"]
    return behind


_CHECKS = {"assets": ", coalesce(sum(written_at), 0)", "asset_history": ", coalesce(sum(written_at), 0)",
           "change_log": ", coalesce(max(version), 0)"}


async def _summary(conn, ms: uuid.UUID) -> dict[str, tuple]:
    """What the check compares: per table the metastore's row count (and for assets and their
    history the sum of the versions they were written at, for the change log its last version),
    and the metastore's own row. Aggregates over indexes: cheap enough to run under the fence."""
    out = {table: tuple(await conn.fetchrow(f"SELECT count(*) {_CHECKS.get(table, '')} FROM {table} "
                                            "WHERE metastore_id = $1", ms))
           for table, _ in HOME_TABLES}
    meta = await conn.fetchrow("SELECT version, name, info::text AS info FROM metastores WHERE id = $1", ms)
    out["metastores"] = tuple(meta) if meta else None
    return out


async def _check(src, dst, ms: uuid.UUID) -> None:
    """Under the fence: the copy against its source; MoveError if they differ."""
    theirs, ours = await _summary(src, ms), await _summary(dst, ms)
    differ = [t for t in theirs if theirs[t] != ours[t]]
    if differ:
        raise MoveError(f"The copy does not match its source ({', '.join(differ)}); the move was given up.")


async def move_metastore(store: Store, metastore_id: str, target: str, *,
                         rounds: int = CATCH_UP_ROUNDS) -> dict:
    """Move a metastore's home to the database named `target`, online; returns the timeline (ms)."""
    if target not in store.databases:
        raise MoveError(f"No database is named '{target}'; the databases are {', '.join(store.databases)}.")
    store.forget_home(metastore_id)
    source = await store.home_name(metastore_id)
    if source == target:
        raise MoveError(f"The metastore's home is '{target}' already.")
    ms = uuid.UUID(metastore_id)
    timeline: dict = {"metastore_id": metastore_id, "from": source, "to": target}
    async with store.pool.acquire() as lock:
        key = move_lock_key(metastore_id)
        if not await lock.fetchval("SELECT pg_try_advisory_lock($1, $2)", MOVE_LOCK_CLASS, key):
            raise MoveError("The metastore is being moved already.")
        try:
            await _recover(store, metastore_id)
            async with store.databases[source].acquire() as src, store.databases[target].acquire() as dst:
                timeline.update(await _move(store, src, dst, ms, source, target, rounds))
        finally:
            await lock.execute("SELECT pg_advisory_unlock($1, $2)", MOVE_LOCK_CLASS, key)
    return timeline


async def _move(store: Store, src, dst, ms: uuid.UUID, source: str, target: str, rounds: int) -> dict:
    t0 = time.monotonic()
    marks: dict = {}
    switched = False
    fenced = False
    try:
        progress = await _bulk_copy(src, dst, ms)
        marks["copied"], copied_rows = time.monotonic(), progress.rows
        done_rounds = 0
        for done_rounds in range(1, rounds + 1):
            if await _catch_up(src, dst, ms, progress) <= CATCH_UP_CLOSE:
                break
        marks["caught_up"] = time.monotonic()
        # The fence: taken once every write in flight committed (they hold the row); no write after it.
        async with src.transaction():
            await src.execute("SELECT 1 FROM metastores WHERE id = $1 FOR UPDATE", ms)
            await src.execute("UPDATE metastores SET fenced = true WHERE id = $1", ms)
        fenced = True
        marks["fenced"] = time.monotonic()
        await _catch_up(src, dst, ms, progress)
        await _check(src, dst, ms)
        marks["checked"] = time.monotonic()
        await dst.execute("UPDATE metastores SET fenced = false WHERE id = $1", ms)
        status = await store.pool.execute(
            "UPDATE metastore_homes SET home = $2, homed_at = $4 WHERE metastore_id = $1 AND home = $3",
            ms, target, source, now_ms())
        if not status.endswith(" 1"):
            raise MoveError("The directory no longer names the source as the metastore's home; the move was given up.")
        switched = True
        store.remember_home(str(ms), target)
        marks["switched"] = time.monotonic()
    except BaseException:
        if not switched:
            await _undo(src, dst, ms, fenced)
        raise
    await src.execute("DELETE FROM metastores WHERE id = $1", ms)
    done = time.monotonic()

    def ms_between(a: float, b: float) -> float:
        return round((b - a) * 1000, 1)

    return {"version": progress.version, "rows_copied": copied_rows, "rows_caught_up": progress.rows - copied_rows,
            "catch_up_rounds": done_rounds, "side_copies": progress.side_copies,
            "copy_ms": ms_between(t0, marks["copied"]),
            "catch_up_ms": ms_between(marks["copied"], marks["caught_up"]),
            "fence_ms": ms_between(marks["caught_up"], marks["fenced"]),
            "final_catch_up_ms": ms_between(marks["fenced"], marks["checked"]),
            "switch_ms": ms_between(marks["checked"], marks["switched"]),
            "writes_blocked_ms": ms_between(marks["caught_up"], marks["switched"]),
            "cleanup_ms": ms_between(marks["switched"], done),
            "total_ms": ms_between(t0, done)}


async def _undo(src, dst, ms: uuid.UUID, fenced: bool) -> None:
    """A move given up before the switch: the copy goes, the source serves again."""
    for conn, sql in ((dst, "DELETE FROM metastores WHERE id = $1"),
                      (src, "UPDATE metastores SET fenced = false WHERE id = $1")):
        if conn is src and not fenced:
            continue
        try:
            await conn.execute(sql, ms)
        except Exception as e:      # that database is unreachable: recover_moves finishes this at the next start
            log.warning("undoing the move of metastore %s: %s", ms, e)


async def _recover(store: Store, metastore_id: str | None = None) -> dict[str, int]:
    """Rows of abandoned moves: in each database, a metastore's rows where the directory names
    another home (a copy never switched to, or a source never deleted) go; a fenced metastore in
    its home is unfenced. Only metastores no live process is moving (their lock is free)."""
    if store.single:
        return {"deleted": 0, "unfenced": 0}
    homes = {str(r["metastore_id"]): r["home"] for r in await store.pool.fetch(
        "SELECT metastore_id, home FROM metastore_homes WHERE $1::uuid IS NULL OR metastore_id = $1",
        uuid.UUID(metastore_id) if metastore_id else None)}
    counts = {"deleted": 0, "unfenced": 0}
    for name, pool in store.databases.items():
        try:
            rows = await pool.fetch("SELECT id, fenced FROM metastores WHERE $1::uuid IS NULL OR id = $1",
                                    uuid.UUID(metastore_id) if metastore_id else None)
        except Exception as e:
            if not is_db_unavailable(e):
                raise
            log.warning("database %s does not answer (%s): what moves left there is cleaned up later", name, e)
            continue
        for row in rows:
            ms = str(row["id"])
            home = homes.get(ms)
            if home == name and not row["fenced"]:
                continue
            if home is None and name == store.directory_name:
                continue     # being created or deleted in the directory itself
            if metastore_id is None and not await _lock_free(store, ms):
                continue
            if home == name:
                await pool.execute("UPDATE metastores SET fenced = false WHERE id = $1", row["id"])
                counts["unfenced"] += 1
            elif home is not None:
                await pool.execute("DELETE FROM metastores WHERE id = $1", row["id"])
                counts["deleted"] += 1
    return counts


async def _lock_free(store: Store, metastore_id: str) -> bool:
    async with store.pool.acquire() as conn:
        key = move_lock_key(metastore_id)
        if await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", MOVE_LOCK_CLASS, key):
            await conn.execute("SELECT pg_advisory_unlock($1, $2)", MOVE_LOCK_CLASS, key)
            return True
    return False


async def recover_moves(store: Store) -> dict[str, int]:
    """At start: finish what moves of dead processes left (see `_recover`)."""
    return await _recover(store)


async def databases(store: Store, load: dict[str, float] | None = None) -> list[dict]:
    """Each configured database: its name, whether it holds the directory, how many metastores it
    is the home of, their measured load (what a new metastore's home is chosen by: `load` is each
    metastore's, store/databases.py `home_loads`), and whether it answers now."""
    loads = await store.home_loads(load)
    out = []
    for name, pool in store.databases.items():
        try:
            await asyncio.wait_for(pool.fetchval("SELECT 1"), 2.0)
            up = True
        except Exception:
            up = False
        out.append({"name": name, "directory": name == store.directory_name, "metastores": loads[name][1],
                    "load": round(loads[name][0], 1), "available": up})
    return out
