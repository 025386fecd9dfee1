"""Versioned metadata in PostgreSQL: reads of a metastore as of a past version, an asset's history,
dropped assets, the history's purge, snapshots and shallow-clone references (migration 0012).

`assets` holds the present; `asset_history` every state a write replaced or deleted, with the
versions it was current (written_at <= v < replaced_at), written by `WriteTx.put` / `delete` in
the write's own statement. The state of the metastore at version v is the live rows written at
or before v plus the history rows current at v: `_at` builds that union for one filter, so each
read at a version costs one indexed statement on each table. Reads of the present never look here.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field

from ..entities.asset import NAME_TODAY, Asset
from ..entities.values import now_ms
from .assets import search_query
from .directory import count_side_write
from .errors import MetastoreGone
from .rows import ASSET_COLUMNS, asset_from

@dataclass
class PastRead:
    """A request reading at a past version (its session's `read_at`, shards/session.py): the
    version, and every asset its reads found (with their ancestors), by id, for authorization
    (governance/authorize.py's past index)."""
    version: int
    seen: dict[str, Asset] = field(default_factory=dict)


# The history's own columns beside an asset's.
_COLS = ", ".join(f"a.{c.strip()}" for c in ASSET_COLUMNS.split(","))


def at_version(where: str, v: str) -> str:
    """The assets matching `where` (over alias `a`) as they were at version `v` (a parameter): the
    live rows written by then and the history rows current then; alias `a` again outside."""
    return f"""(SELECT {_COLS} FROM assets a WHERE {where} AND a.written_at <= {v}
                UNION ALL
                SELECT {_COLS} FROM asset_history a WHERE {where} AND a.written_at <= {v} AND a.replaced_at > {v})"""


async def _metastore_version(conn, metastore_id: str) -> int:
    version = await conn.fetchval("SELECT version FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
    if version is None:
        raise MetastoreGone(metastore_id)
    return version


# ---- which version a request may read at ---------------------------------------------------

async def version_bounds(store, metastore_id: str, version: int | None, timestamp: int | None) -> dict:
    """What deciding a read at a version needs, in one snapshot: the metastore's current version,
    the version current at `timestamp` (if given), when the asked version stopped being current
    (None: it is current), the version below which the history is purged, and whether a snapshot
    pins the asked version."""
    ms = uuid.UUID(metastore_id)
    async with (await store.home(metastore_id)).acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        current = await _metastore_version(conn, metastore_id)
        if timestamp is not None:
            version = await conn.fetchval(
                "SELECT coalesce(max(version), 0) FROM change_log WHERE metastore_id = $1 AND at <= $2", ms, timestamp)
        ended = None
        if version is not None and 0 <= version < current:
            ended = await conn.fetchval(
                "SELECT min(at) FROM change_log WHERE metastore_id = $1 AND version > $2", ms, version)
        purged_below = await conn.fetchval(
            "SELECT purged_below FROM history_horizons WHERE metastore_id = $1", ms) or 0
        pinned = version is not None and await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM version_snapshots WHERE metastore_id = $1 AND version = $2)", ms, version)
    return {"current": current, "version": version, "ended_at": ended, "purged_below": purged_below,
            "pinned": bool(pinned)}


# ---- reads at a version ----------------------------------------------------------------------

def _latest(where: str, v: str) -> str:
    """The one state matching `where` current at `v`: the live row if written by then, else the
    latest history row begun by then if it had not ended (states of one id, or of one name, never
    overlap), each through its index in a few pages however long the history."""
    return f"""(SELECT {_COLS} FROM assets a WHERE {where} AND a.written_at <= {v}
                UNION ALL
                SELECT {_COLS} FROM (SELECT {_COLS}, a.replaced_at FROM asset_history a
                                     WHERE {where} AND a.written_at <= {v}
                                     ORDER BY a.written_at DESC LIMIT 1) a WHERE a.replaced_at > {v})"""


async def assets_at(store, metastore_id: str, version: int, names: list[tuple[str, str]],
                    ids: list[str]) -> list[Asset]:
    """Assets by (namespace, full name) and by id as they were at `version`."""
    rows = await (await store.home(metastore_id)).fetch(
        f"""SELECT a.* FROM unnest($4::uuid[]) AS k(id)
            CROSS JOIN LATERAL {_latest("a.id = k.id AND a.metastore_id = $1", "$5")} a
            UNION ALL
            SELECT a.* FROM unnest($2::text[], $3::text[]) AS k(namespace, full_name)
            CROSS JOIN LATERAL {_latest(
                "a.metastore_id = $1 AND a.namespace = k.namespace AND a.full_name = k.full_name", "$5")} a""",
        uuid.UUID(metastore_id), [n for n, _ in names], [f for _, f in names], ids, version)
    return list({r["id"]: asset_from(r) for r in rows}.values())


async def with_ancestors(store, metastore_id: str, past: PastRead, assets: list[Asset], known=None) -> list[Asset]:
    """`assets` (found at `past.version`), noted in `past.seen` with their ancestors as they were
    then (a statement per level not seen yet), except ancestors `known(id)` says today's privilege
    index holds (with their own ancestors: authorization needs no more of them)."""
    past.seen.update((a.id, a) for a in assets)
    missing = {a.parent_id for a in assets}
    for _ in range(5):
        missing = {i for i in missing if i != metastore_id and i not in past.seen and not (known and known(i))}
        if not missing:
            break
        found = await assets_at(store, metastore_id, past.version, [], sorted(missing))
        past.seen.update((a.id, a) for a in found)
        missing = {a.parent_id for a in found}
    return assets


# What governs an asset, kept in its info: tags (and search's index of them) and a table's row filter;
# on each column, its mask and tags.
_GOVERNANCE = ("tags", "tag_index", "row_filter")
_COLUMN_GOVERNANCE = ("mask", "tags")


def governed_as_today(past: Asset, today: Asset | None) -> Asset:
    """A state read at a past version, governed as its asset is today (`today`: its present state,
    None if dropped since): its metadata as it was, with today's tags, row filter and column masks
    (a column gone since keeps its own: nothing loosens), today's name for governance by name
    (entities/asset.py `name_today`), and today's storage (none once dropped), which is what any
    credential is vended for."""
    if today is not None and today.written_at == past.written_at:
        return past                     # the present state itself
    info = past.info
    if today is not None:
        info = {k: v for k, v in info.items() if k not in _GOVERNANCE}
        info.update((k, today.info[k]) for k in _GOVERNANCE if k in today.info)
        now = {c["name"].lower(): c for c in today.info.get("columns") or []}
        if info.get("columns"):
            info["columns"] = [_column_as_today(c, now.get(c["name"].lower())) for c in info["columns"]]
    out = dataclasses.replace(past, info=info, storage_path=today.storage_path if today is not None else None)
    out.memo[NAME_TODAY] = today.full_name if today is not None else None
    return out


def _column_as_today(past: dict, today: dict | None) -> dict:
    if today is None:
        return past
    out = {k: v for k, v in past.items() if k not in _COLUMN_GOVERNANCE}
    out.update((k, today[k]) for k in _COLUMN_GOVERNANCE if k in today)
    return out


async def children_at(store, metastore_id: str, version: int, parent_id: str, namespace: str, *, after: str,
                      limit: int) -> list[Asset]:
    rows = await (await store.home(metastore_id)).fetch(
        f"""SELECT * FROM {at_version("a.parent_id = $2 AND a.namespace = $3 AND a.name > $4", "$6")} a
            WHERE a.metastore_id = $1 ORDER BY a.name LIMIT $5""",
        uuid.UUID(metastore_id), uuid.UUID(parent_id), namespace, after, limit, version)
    return [asset_from(r) for r in rows]


async def search_at(store, metastore_id: str, version: int, types: list[str], patterns: list[str],
                    name_ranks: tuple, after: tuple[int, str, str], limit: int,
                    tags: list[tuple[str, str | None]] = ()) -> list[tuple[int, Asset]]:
    """`Store.search` over the metastore as it was at `version` (no index on the history's text:
    its rows in the retention window are scanned)."""
    exact, prefix, inside = name_ranks
    v = f"${10 + len(patterns) + 3 * len(tags)}"
    sql = search_query(len(patterns), len(tags), source=at_version("a.metastore_id = $1", v))
    async with (await store.home(metastore_id)).acquire() as conn, conn.transaction(readonly=True):
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        rows = await conn.fetch(
            sql, uuid.UUID(metastore_id), types, exact, prefix, inside, after[0], after[1], uuid.UUID(after[2]),
            limit, *patterns, *(x for k, val in tags for x in (k if val is None else f"{k}={val}", k, val)), version)
    if not rows:
        raise MetastoreGone(metastore_id)
    return [(r["rank"], asset_from(r)) for r in rows if r["id"] is not None]


# ---- an asset's history ----------------------------------------------------------------------

async def asset_states(store, metastore_id: str, namespace: str, full_name: str | None = None,
                       asset_id: str | None = None, limit: int = 1000) -> list[dict]:
    """Every state kept of the assets that had this name (or id), oldest first: the asset, the
    version range it was current, whether the write that ended it dropped it, and who wrote it
    and when (the change log)."""
    where = "a.metastore_id = $1 AND " + ("a.id = $3::uuid" if asset_id else "a.namespace = $2 AND a.full_name = $3")
    rows = await (await store.home(metastore_id)).fetch(
        f"""SELECT s.*, c.principal, c.at, e.principal AS ended_by, e.at AS ended_at FROM (
                SELECT {_COLS}, NULL::bigint AS replaced_at, false AS dropped FROM assets a WHERE {where}
                UNION ALL
                SELECT {_COLS}, a.replaced_at, a.dropped FROM asset_history a WHERE {where}) s
            LEFT JOIN change_log c ON c.metastore_id = s.metastore_id AND c.version = s.written_at
            LEFT JOIN change_log e ON e.metastore_id = s.metastore_id AND e.version = s.replaced_at
            ORDER BY s.written_at, s.id LIMIT $4""",
        uuid.UUID(metastore_id), namespace, asset_id or full_name, limit)
    return [{"asset": asset_from(r), "replaced_at": r["replaced_at"], "dropped": r["dropped"],
             "principal": r["principal"], "at": r["at"], "ended_by": r["ended_by"], "ended_at": r["ended_at"]}
            for r in rows]


# ---- dropped assets --------------------------------------------------------------------------

async def dropped(store, metastore_id: str, types: list[str], *, since: int, asset_id: str | None = None,
                  limit: int = 1000) -> list[dict]:
    """Assets deleted by a write at or after version `since` that do not exist now, newest drop
    first: their last state, the drop's version, who dropped them and when."""
    rows = await (await store.home(metastore_id)).fetch(
        f"""SELECT {_COLS}, a.replaced_at, a.grants, c.principal, c.at FROM asset_history a
            LEFT JOIN change_log c ON c.metastore_id = a.metastore_id AND c.version = a.replaced_at
            WHERE a.metastore_id = $1 AND a.dropped AND a.replaced_at >= $3 AND a.type = ANY($2::text[])
              AND ($4::uuid IS NULL OR a.id = $4::uuid)
              AND NOT EXISTS (SELECT 1 FROM assets l WHERE l.id = a.id)
              AND NOT EXISTS (SELECT 1 FROM asset_history l WHERE l.id = a.id AND l.written_at > a.written_at)
            ORDER BY a.replaced_at DESC, a.full_name LIMIT $5""",
        uuid.UUID(metastore_id), types, since, uuid.UUID(asset_id) if asset_id else None, limit)
    return [{"asset": asset_from(r), "dropped_at_version": r["replaced_at"], "grants": r["grants"] or [],
             "dropped_by": r["principal"], "dropped_at": r["at"]} for r in rows]


async def dropped_with(tx, metastore_id: str, drop_version: int, parent_ids: list[str]) -> list[dict]:
    """Inside a write: the assets the same drop deleted below `parent_ids` (a dropped schema's or
    catalog's contents), parents first."""
    rows = await tx.conn.fetch(
        f"""WITH RECURSIVE below AS (
                SELECT h.* FROM asset_history h
                WHERE h.metastore_id = $1 AND h.dropped AND h.replaced_at = $2 AND h.parent_id = ANY($3::uuid[])
                UNION ALL
                SELECT h.* FROM asset_history h JOIN below b ON h.parent_id = b.id
                WHERE h.metastore_id = $1 AND h.dropped AND h.replaced_at = $2)
            SELECT {ASSET_COLUMNS}, grants FROM below a""",
        uuid.UUID(metastore_id), drop_version, parent_ids)
    return [{"asset": asset_from(r), "grants": r["grants"] or []} for r in rows]


async def grants_at_drop(tx, metastore_id: str, ids: list[str]) -> dict[str, list[dict]]:
    """Inside a write: {id: the grants it held when last dropped} for those of `ids` a drop deleted."""
    rows = await tx.conn.fetch(
        """SELECT DISTINCT ON (id) id, grants FROM asset_history
           WHERE metastore_id = $1 AND dropped AND id = ANY($2::uuid[]) ORDER BY id, replaced_at DESC""",
        uuid.UUID(metastore_id), [uuid.UUID(i) for i in ids])
    return {str(r["id"]): r["grants"] or [] for r in rows}


async def restore_grants(tx, asset: Asset, grants: list[dict]) -> None:
    """Inside a write: put back the grants a dropped asset held, and tell the write's followers
    (the privilege index) what the asset now holds."""
    if grants:
        await tx.conn.executemany(
            "INSERT INTO grants VALUES ($1, $2, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            [(uuid.UUID(asset.metastore_id), uuid.UUID(asset.id), g["principal"], g["privilege"], g["granted_by"],
              g["granted_at"]) for g in grants])
        held: dict[str, set[str]] = {}
        for g in grants:
            held.setdefault(g["principal"], set()).add(g["privilege"])
        tx.grants_set[asset.id] = held


async def clone_references(store, metastore_id: str, source_ids: list[str]) -> dict[str, list[str]]:
    """Live clones referencing each of these source tables' files (of one metastore): source id -> clone ids."""
    rows = await (await store.home(metastore_id)).fetch(
        """SELECT c.source_id, c.clone_id FROM table_clones c
           WHERE c.source_id = ANY($1::uuid[])
             AND (EXISTS (SELECT 1 FROM assets a WHERE a.id = c.clone_id)
                  OR EXISTS (SELECT 1 FROM asset_history h WHERE h.id = c.clone_id))""", source_ids)
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(str(r["source_id"]), []).append(str(r["clone_id"]))
    return out


async def clone_sources(store, metastore_id: str, clone_ids: list[str]) -> dict[str, list[tuple[str, str]]]:
    """What each of these tables (of one metastore) shallow-clones: clone id -> [(source id, source path)]."""
    rows = await (await store.home(metastore_id)).fetch(
        """SELECT clone_id, source_id, source_path FROM table_clones
           WHERE metastore_id = $1 AND clone_id = ANY($2::uuid[])""",
        uuid.UUID(metastore_id), clone_ids)
    out: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        out.setdefault(str(r["clone_id"]), []).append((str(r["source_id"]), r["source_path"]))
    return out


async def add_clone_references(tx, refs: list[tuple[str, str, str]]) -> None:
    """Inside a write: (clone id, source id, source path) each."""
    await tx.conn.executemany(
        "INSERT INTO table_clones VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        [(uuid.UUID(tx.metastore_id), uuid.UUID(c), uuid.UUID(s), p) for c, s, p in refs])


# ---- retention -------------------------------------------------------------------------------

# A history row a snapshot pins: current at the snapshot's version.
_PINNED = """EXISTS (SELECT 1 FROM version_snapshots s WHERE s.metastore_id = h.metastore_id
                             AND h.written_at <= s.version AND h.replaced_at > s.version)"""


async def purge_expired(store, metastore_id: str, older_than_ms: int, limit: int) -> tuple[int, list[dict]]:
    """Delete at most `limit` history rows of states that stopped being current before
    `older_than_ms`, except those a snapshot pins; record the horizon. Returns (rows deleted, the
    dropped assets among them whose storage may now go: their last states)."""
    ms = uuid.UUID(metastore_id)
    below_sql = "SELECT coalesce(max(version), 0) + 1 FROM change_log WHERE metastore_id = $1 AND at < $2"
    # Nothing to do is found read-only: an idle metastore's round writes nothing (a write in
    # `unversioned` counts itself in the metastore's row, store/directory.py).
    home = await store.home(metastore_id)
    below = await home.fetchval(below_sql, ms, older_than_ms)
    idle = await home.fetchval(
        f"""SELECT NOT EXISTS (SELECT 1 FROM asset_history h WHERE h.metastore_id = $1 AND h.replaced_at < $2
                                 AND NOT {_PINNED})
                   AND coalesce((SELECT purged_below FROM history_horizons WHERE metastore_id = $1), 0) >= $2 - 1""",
        ms, below)
    if idle:
        return 0, []
    async with store.unversioned(metastore_id) as conn:
        below = await conn.fetchval(below_sql, ms, older_than_ms)
        rows = await conn.fetch(
            f"""WITH doomed AS (
                    SELECT h.id, h.written_at FROM asset_history h
                    WHERE h.metastore_id = $1 AND h.replaced_at < $2 AND NOT {_PINNED}
                    ORDER BY h.replaced_at LIMIT $3)
                DELETE FROM asset_history a USING doomed d WHERE a.id = d.id AND a.written_at = d.written_at
                RETURNING {_COLS}, a.dropped""", ms, below, limit)
        gone = [asset_from(r) for r in rows if r["dropped"]]
        if rows:
            await count_side_write(conn, metastore_id)
        if gone:
            # An asset undropped since is live again: neither its commits nor its storage go.
            ids = [uuid.UUID(a.id) for a in gone]
            still = {str(r["id"]) for r in await conn.fetch("SELECT id FROM assets WHERE id = ANY($1::uuid[])", ids)}
            gone = [a for a in gone if a.id not in still]
            await conn.execute("DELETE FROM delta_commits WHERE table_id = ANY($1::uuid[])",
                               [uuid.UUID(a.id) for a in gone if a.type == "table"])
        done = len(rows) < limit
        if done:
            await conn.execute(
                """INSERT INTO history_horizons VALUES ($1, $2) ON CONFLICT (metastore_id)
                   DO UPDATE SET purged_below = greatest(history_horizons.purged_below, EXCLUDED.purged_below)""",
                ms, below - 1)
    return len(rows), [{"asset": a} for a in gone]


async def metastores_with_history(store) -> list[str]:
    """In every home database (docs/cluster.md "Home databases")."""
    rows = [r for pool in store.databases.values()
            for r in await pool.fetch("SELECT DISTINCT metastore_id FROM asset_history")]
    return sorted({str(r["metastore_id"]) for r in rows})


# ---- snapshots -------------------------------------------------------------------------------

def _snapshot(r) -> dict:
    return {"name": r["name"], "securable_type": r["securable_type"].upper(), "securable_id": str(r["securable_id"]),
            "full_name": r["full_name"], "version": r["version"], "comment": r["comment"],
            "created_by": r["created_by"], "created_at": r["created_at"]}


async def add_snapshot(store, metastore_id: str, name: str, securable_type: str, securable_id: str, full_name: str,
                       version: int, comment: str | None, created_by: str) -> dict | None:
    """None: a snapshot of that name exists."""
    async with store.unversioned(metastore_id) as conn:
        row = await conn.fetchrow(
            """INSERT INTO version_snapshots VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
               ON CONFLICT DO NOTHING RETURNING *""",
            uuid.UUID(metastore_id), name, securable_type, uuid.UUID(securable_id), full_name, version, comment,
            created_by, now_ms())
    return _snapshot(row) if row else None


async def get_snapshot(store, metastore_id: str, name: str) -> dict | None:
    row = await (await store.home(metastore_id)).fetchrow("SELECT * FROM version_snapshots WHERE metastore_id = $1 AND name = $2",
                                    uuid.UUID(metastore_id), name)
    return _snapshot(row) if row else None


async def list_snapshots(store, metastore_id: str, after: str, limit: int) -> list[dict]:
    rows = await (await store.home(metastore_id)).fetch(
        "SELECT * FROM version_snapshots WHERE metastore_id = $1 AND name > $2 ORDER BY name LIMIT $3",
        uuid.UUID(metastore_id), after, limit)
    return [_snapshot(r) for r in rows]


async def delete_snapshot(store, metastore_id: str, name: str) -> bool:
    async with store.unversioned(metastore_id) as conn:
        status = await conn.execute("DELETE FROM version_snapshots WHERE metastore_id = $1 AND name = $2",
                                    uuid.UUID(metastore_id), name)
    return status.endswith(" 1")


async def subtree_at(store, metastore_id: str, version: int, root_id: str) -> list[Asset]:
    """The asset `root_id` and everything below it as they were at `version`, parents first (a
    level per statement: catalogs hold schemas hold tables, volumes, functions, models, versions)."""
    ms = uuid.UUID(metastore_id)
    found = await (await store.home(metastore_id)).fetch(f"SELECT * FROM {at_version('a.metastore_id = $1 AND a.id = $2', '$3')} a",
                                   ms, uuid.UUID(root_id), version)
    out, level = [], found
    while level:
        out += [asset_from(r) for r in level]
        level = await (await store.home(metastore_id)).fetch(
            f"""SELECT * FROM {at_version('a.metastore_id = $1 AND a.parent_id = ANY($2::uuid[])', '$3')} a
                ORDER BY a.full_name""", ms, [r["id"] for r in level], version)
    return out


async def metastore_record(tx) -> tuple[str, dict]:
    """Inside a write: the metastore's (name, info)."""
    row = await tx.conn.fetchrow("SELECT name, info FROM metastores WHERE id = $1", uuid.UUID(tx.metastore_id))
    if row is None:
        raise MetastoreGone(tx.metastore_id)
    return row["name"], row["info"]


async def first_version_since(store, metastore_id: str, since_ms: int) -> int:
    """The first version written at or after `since_ms` (the version after the current one if none)."""
    ms = uuid.UUID(metastore_id)
    return await (await store.home(metastore_id)).fetchval(
        """SELECT coalesce((SELECT min(version) FROM change_log WHERE metastore_id = $1 AND at >= $2),
                          (SELECT version + 1 FROM metastores WHERE id = $1))""", ms, since_ms)


async def purge_dropped(store, metastore_id: str, asset_id: str, drop_version: int) -> list[Asset]:
    """Forget a dropped asset and what the same drop deleted below it: every kept state of them,
    their Delta commits and clone references. Returns their last states (the storage to delete)."""
    ms = uuid.UUID(metastore_id)
    async with store.unversioned(metastore_id) as conn:
        rows = await conn.fetch(
            f"""WITH RECURSIVE below AS (
                    SELECT h.* FROM asset_history h WHERE h.metastore_id = $1 AND h.id = $2 AND h.dropped
                      AND h.replaced_at = $3
                    UNION ALL
                    SELECT h.* FROM asset_history h JOIN below b ON h.parent_id = b.id
                    WHERE h.metastore_id = $1 AND h.dropped AND h.replaced_at = $3)
                SELECT {ASSET_COLUMNS} FROM below a
                WHERE NOT EXISTS (SELECT 1 FROM assets l WHERE l.id = a.id)""",
            ms, uuid.UUID(asset_id), drop_version)
        ids = [r["id"] for r in rows]
        if ids:
            await count_side_write(conn, metastore_id)
        await conn.execute("DELETE FROM asset_history WHERE id = ANY($1::uuid[])", ids)
        await conn.execute("DELETE FROM delta_commits WHERE table_id = ANY($1::uuid[])", ids)
        await conn.execute("DELETE FROM table_clones WHERE clone_id = ANY($1::uuid[])", ids)
    return [asset_from(r) for r in rows]


async def request_storage_purge(store, metastore_id: str, asset_id: str, drop_version: int) -> None:
    """Mark a dropped asset's storage for deletion when its history is purged (Iceberg's
    purgeRequested: deferred to the end of the retention window, or an explicit purge)."""
    async with store.unversioned(metastore_id) as conn:
        status = await conn.execute(
            """UPDATE asset_history SET info = info || '{"purge_requested": true}'::jsonb
               WHERE id = $1 AND dropped AND replaced_at = $2""", uuid.UUID(asset_id), drop_version)
        if not status.endswith(" 0"):
            await count_side_write(conn, metastore_id)
