"""Reads of a metastore's assets and change log in its home. Each returns the metastore version it
saw with its result, in the same statement (one snapshot): the shard catches up to that version
before it trusts the result (docs/design.md invariant 3). Search's SQL is built here too.
"""

from __future__ import annotations

import uuid

from ..entities.asset import Asset
from ..entities.shared_strings import shared
from .directory import homed
from .errors import MetastoreGone
from .rows import ASSET_COLUMNS, Change, StoragePath, asset_from, versioned_many, versioned_one


# Storage paths read per round trip when a whole path index is read: their decoding holds the event
# loop (~2-5 ms each at 500 on a loaded machine; 2,000 held it past 20 ms, issue #48).
PATHS_CHUNK = 500
# What search matches words in: an asset's full name and comment (indexed by migration 0009).
SEARCH_TEXT = "(lower(a.full_name) || ' ' || lower(coalesce(a.info->>'comment', '')))"


def _tag_match(term: int, key: int, value: int) -> str:
    """An asset holding tag $key (with value $value, unless that is NULL), on itself or on a column.
    `info->'tag_index'` (catalog/features/tags.py: every `key` and `key=value` of the asset and its columns,
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


async def read_asset(conn, metastore_id: str, namespace: str, full_name: str) -> tuple[int, Asset | None]:
    """The asset under a name, with the metastore's version (`Store.get_asset`, `WriteTx.get`)."""
    rows = await conn.fetch(
        """SELECT m.version AS ms_version, a.* FROM metastores m
           LEFT JOIN assets a ON a.metastore_id = m.id AND a.namespace = $2 AND a.full_name = $3
           WHERE m.id = $1""",
        uuid.UUID(metastore_id), namespace, full_name,
    )
    return versioned_one(metastore_id, rows)


class AssetReads:
    """The part of `Store` (db.py) that reads assets and the change log (`homed`: in the metastore's home)."""

    @homed
    async def metastore_version(self, metastore_id: str) -> int:
        version = await (await self.home(metastore_id)).fetchval("SELECT version FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
        if version is None:
            raise MetastoreGone(metastore_id)
        return version

    @homed
    async def get_asset(self, metastore_id: str, namespace: str, full_name: str) -> tuple[int, Asset | None]:
        return await read_asset(await self.home(metastore_id), metastore_id, namespace, full_name)

    @homed
    async def get_asset_by_id(self, metastore_id: str, asset_id: str) -> tuple[int, Asset | None]:
        rows = await (await self.home(metastore_id)).fetch(
            "SELECT m.version AS ms_version, a.* FROM metastores m LEFT JOIN assets a ON a.id = $2 WHERE m.id = $1",
            uuid.UUID(metastore_id), uuid.UUID(asset_id),
        )
        return versioned_one(metastore_id, rows)

    @homed
    async def get_assets_by_ids(self, metastore_id: str, ids: list[str]) -> tuple[int, list[Asset]]:
        rows = await (await self.home(metastore_id)).fetch(
            """SELECT m.version AS ms_version, a.* FROM metastores m
               LEFT JOIN assets a ON a.id = ANY($2::uuid[]) WHERE m.id = $1""",
            uuid.UUID(metastore_id), ids,
        )
        return versioned_many(metastore_id, rows)

    @homed
    async def assets_of_type(self, metastore_id: str, type_name: str) -> list[Asset]:
        """Every asset of one type in a metastore (few: credentials, for re-encrypting their secrets)."""
        rows = await (await self.home(metastore_id)).fetch(f"SELECT {ASSET_COLUMNS} FROM assets WHERE metastore_id = $1 AND type = $2",
                                     uuid.UUID(metastore_id), type_name)
        return [asset_from(r) for r in rows]

    @homed
    async def assets_with_property(self, metastore_id: str, key: str) -> list[Asset]:
        """The catalogs, schemas and tables whose properties hold `key` (a policy switch: few of them).
        One scan in PostgreSQL, once per owner: the shard's followers keep the answer current after it."""
        rows = await (await self.home(metastore_id)).fetch(
            f"""SELECT {ASSET_COLUMNS} FROM assets WHERE metastore_id = $1
                AND type IN ('catalog', 'schema', 'table') AND info->'properties' ? $2""",
            uuid.UUID(metastore_id), key)
        return [asset_from(r) for r in rows]

    @homed
    async def tables_under(self, metastore_id: str, ids: list[str]) -> list[Asset]:
        """The tables among `ids`, in a schema among them, or in a schema of a catalog among them (by the
        children index)."""
        rows = await (await self.home(metastore_id)).fetch(
            f"""WITH given AS (SELECT unnest($2::uuid[]) AS id),
                     schemas AS (SELECT id FROM given UNION SELECT s.id FROM assets s JOIN given g
                                 ON s.parent_id = g.id AND s.type = 'schema')
                SELECT {ASSET_COLUMNS} FROM assets WHERE metastore_id = $1 AND type = 'table'
                   AND (id IN (SELECT id FROM given) OR parent_id IN (SELECT id FROM schemas))""",
            uuid.UUID(metastore_id), ids)
        return [asset_from(r) for r in rows]

    @homed
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
        version, assets = versioned_many(metastore_id, rows)
        return version, list({a.id: a for a in assets}.values())

    @homed
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
        return versioned_many(metastore_id, rows)

    @homed
    async def count_children(self, metastore_id: str, parent_id: str, namespace: str, limit: int) -> int:
        """How many children (parent, namespace) has, counting no further than `limit` (index only)."""
        return await (await self.home(metastore_id)).fetchval(
            """SELECT count(*) FROM (SELECT 1 FROM assets WHERE parent_id = $1 AND namespace = $2 LIMIT $3) c""",
            uuid.UUID(parent_id), namespace, limit)

    @homed
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
        return versioned_many(metastore_id, rows)

    @homed
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
        return rows[0]["ms_version"], [(r["rank"], asset_from(r)) for r in rows if r["id"] is not None]

    @homed
    async def has_assets(self, metastore_id: str) -> bool:
        return await (await self.home(metastore_id)).fetchval(
            "SELECT EXISTS (SELECT 1 FROM assets WHERE metastore_id = $1)", uuid.UUID(metastore_id)
        )

    @homed
    async def paths(self, metastore_id: str, pace=None) -> tuple[int, list[StoragePath]]:
        """Every asset holding a storage path, with the version the read saw (to build a URL trie).
        Without the assets' bodies: a metastore of 100,000 tables must load in well under a second.
        `pace` (shards/warm_pace.py `Pace`): between chunks it gives way to the requests in flight."""
        async with (await self.home(metastore_id)).acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            version = await conn.fetchval("SELECT version FROM metastores WHERE id = $1", uuid.UUID(metastore_id))
            if version is None:
                raise MetastoreGone(metastore_id)
            # In chunks, each a round trip: the event loop serves the owner's requests in between
            # (a cold owner's writes go on meanwhile: shards/cold_paths.py).
            cursor = await conn.cursor(
                """SELECT id, type, full_name, storage_path FROM assets
                   WHERE metastore_id = $1 AND storage_path IS NOT NULL""",
                uuid.UUID(metastore_id),
            )
            paths = []
            while rows := await cursor.fetch(PATHS_CHUNK):
                paths += [StoragePath(str(r["id"]), shared(r["type"]), r["full_name"], r["storage_path"]) for r in rows]
                if pace is not None and pace.due():
                    await pace.give_way()
        return version, paths

    @homed
    async def count_paths(self, metastore_id: str, limit: int) -> int:
        """How many assets hold a storage path, counted up to `limit` (an index range, bounded)."""
        return await (await self.home(metastore_id)).fetchval(
            """SELECT count(*) FROM (SELECT 1 FROM assets WHERE metastore_id = $1 AND storage_path IS NOT NULL
               LIMIT $2) AS p""", uuid.UUID(metastore_id), limit)

    @homed
    async def paths_near(self, metastore_id: str, at: list[str], below: list[str],
                         locations: bool) -> tuple[int, list[StoragePath]]:
        """The assets whose storage path is one of `at` (canonical urls) or starts with one of `below`
        (each ending in "/"), and with `locations` every external location, with the version the read
        saw: what a cold owner's path index needs to answer for those paths (shards/cold_paths.py).
        Each prefix is a range of the byte-ordered index assets_paths (migration 0018)."""
        ms = uuid.UUID(metastore_id)
        ends = [prefix[:-1] + chr(ord(prefix[-1]) + 1) for prefix in below]   # just past every path under it
        async with (await self.home(metastore_id)).acquire() as conn, \
                conn.transaction(isolation="repeatable_read", readonly=True):
            version = await conn.fetchval("SELECT version FROM metastores WHERE id = $1", ms)
            if version is None:
                raise MetastoreGone(metastore_id)
            rows = await conn.fetch(
                """SELECT id, type, full_name, storage_path FROM assets
                   WHERE metastore_id = $1 AND storage_path = ANY($2::text[])
                   UNION
                   SELECT a.id, a.type, a.full_name, a.storage_path
                   FROM unnest($3::text[], $4::text[]) AS r(lo, hi)
                   CROSS JOIN LATERAL (SELECT id, type, full_name, storage_path FROM assets
                                       WHERE metastore_id = $1 AND storage_path >= r.lo AND storage_path < r.hi) a
                   UNION
                   SELECT id, type, full_name, storage_path FROM assets
                   WHERE $5 AND metastore_id = $1 AND namespace = 'external_location'
                     AND type = 'external_location' AND storage_path IS NOT NULL""",
                ms, at, below, ends, locations,
            )
        return version, [StoragePath(str(r["id"]), shared(r["type"]), r["full_name"], r["storage_path"]) for r in rows]

    @homed
    async def changes(self, metastore_id: str, after: int, limit: int) -> list[Change]:
        """Change-log rows for versions > after, oldest first, at most `limit`."""
        rows = await (await self.home(metastore_id)).fetch(
            """SELECT version, changed, parents FROM change_log
               WHERE metastore_id = $1 AND version > $2 ORDER BY version LIMIT $3""",
            uuid.UUID(metastore_id), after, limit,
        )
        return [Change(r["version"], [str(i) for i in r["changed"]], [str(i) for i in r["parents"]]) for r in rows]

    @homed
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
