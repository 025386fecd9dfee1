"""Delta commits of catalog-managed tables in PostgreSQL (shardcat/delta/commits.py decides them):
a table's commits read in one snapshot, and a write's ratifying and publishing of commits
(`DeltaWrites`, part of `WriteTx`) with each table's head (latest and latest published version)."""

from __future__ import annotations

import uuid

from ..entities.asset import Asset
from ..entities.values import now_ms
from .directory import homed
from .rows import ASSET_COLUMNS, asset_of, versioned_one

# A table's latest and latest published Delta versions, of table $1: each a walk down an index from
# the top that stops at its first entry (the primary key; the published commits' partial index), not
# an aggregate over every commit the table ever had nor a filter that a cached plan may turn into one.
DELTA_HEAD = """(SELECT version FROM delta_commits WHERE table_id = $1 ORDER BY version DESC LIMIT 1) AS latest,
                 (SELECT version FROM delta_commits WHERE table_id = $1 AND published
                  ORDER BY version DESC LIMIT 1) AS published"""

# Ratify a commit and, when $10 (below its version) is not null, mark the versions above $11 (the
# latest published before) up to $10 published: an inline commit's content is not needed then. The
# update does not see the row the insert adds (one snapshot): it is above $10.
ADD_DELTA_COMMIT = """WITH added AS (
        INSERT INTO delta_commits (table_id, version, metastore_id, file_name, file_size, file_modification_timestamp,
                                   commit_timestamp, content, ratified_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9))
    UPDATE delta_commits SET published = true, content = NULL
    WHERE table_id = $1 AND version > $11 AND version <= $10::bigint AND NOT published"""

async def _versioned_one_by_id(conn, metastore_id: str, asset_id: str) -> tuple[int, Asset | None]:
    rows = await conn.fetch(
        """SELECT m.version AS ms_version, a.* FROM metastores m
           LEFT JOIN assets a ON a.id = $2 WHERE m.id = $1""",
        uuid.UUID(metastore_id), uuid.UUID(asset_id),
    )
    return versioned_one(metastore_id, rows)


class DeltaReads:
    """The part of `Store` (db.py) that reads a table's commits."""

    @homed
    async def delta_commits(self, metastore_id: str, table_id: str, start: int, end: int | None,
                            limit: int) -> tuple[int, Asset | None, int | None, int | None, list[dict]]:
        """One snapshot of a table's commits: (metastore version, the table, latest ratified version,
        latest published version, the unpublished commits with start <= version <= end, oldest first)."""
        async with (await self.home(metastore_id)).acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            version, table = await _versioned_one_by_id(conn, metastore_id, table_id)
            head = await conn.fetchrow(f"SELECT {DELTA_HEAD}", uuid.UUID(table_id))
            rows = await conn.fetch(
                """SELECT * FROM delta_commits WHERE table_id = $1 AND NOT published AND version >= $2
                     AND ($3::bigint IS NULL OR version <= $3) ORDER BY version LIMIT $4""",
                uuid.UUID(table_id), start, end, limit)
        return version, table, head["latest"], head["published"], [dict(r) for r in rows]


class DeltaWrites:
    """The part of `WriteTx` (writes.py) that ratifies and publishes Delta commits, keeping the heads
    the write (or its group) read in `self.heads` true."""

    async def table_with_delta_head(self, table_id: str) -> tuple[Asset | None, int | None, int | None]:
        """`get_by_id` and `delta_head` of a table in one round trip, or none when this write or its
        group has read them already."""
        try:
            return self.heads[table_id]
        except KeyError:
            pass
        row = await self._conn.fetchrow(
            f"""SELECT {ASSET_COLUMNS}, h.latest, h.published
                FROM (SELECT {DELTA_HEAD}) h LEFT JOIN assets a ON a.id = $1""",
            uuid.UUID(table_id))
        self.heads[table_id] = head = (asset_of(self.metastore_id, row), row["latest"], row["published"])
        return head

    async def delta_head(self, table_id: str) -> tuple[int | None, int | None]:
        """(latest ratified version, latest published version) of a table; None where there is none."""
        if table_id in self.heads:
            return self.heads[table_id][1:]
        row = await self._conn.fetchrow(f"SELECT {DELTA_HEAD}", uuid.UUID(table_id))
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
            await self._conn.execute(ADD_DELTA_COMMIT, *args)
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
