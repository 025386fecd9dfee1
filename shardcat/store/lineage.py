"""Lineage in PostgreSQL: the table and column edges that writers report (catalog/features/lineage.py,
OpenLineage), appended in the metastore's home outside its versioned writes, and read back
grouped by edge."""

from __future__ import annotations

import uuid

from ..entities.asset import Asset
from ..entities.values import now_ms
from .directory import homed


class Lineage:
    """The part of `Store` (db.py) that records and reads lineage (`unversioned`: directory.py)."""

    @homed
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

    @homed
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

    @homed
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

    @homed
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
