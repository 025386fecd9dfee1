"""Grants in PostgreSQL (table `grants`, migration 0005): what governance/index.py reads to build and
refresh a shard's privilege index (in the metastore's home database), and who is an account admin (the
directory's). Writes go through `WriteTx.set_grants`."""

from __future__ import annotations

import uuid

from .errors import MetastoreGone


def group_grants(rows) -> dict[str, dict[str, set[str]]]:
    """Rows of (securable_id, principal, privilege) as {securable id: {principal: privileges}}."""
    out: dict[str, dict[str, set[str]]] = {}
    for r in rows:
        out.setdefault(str(r["securable_id"]), {}).setdefault(r["principal"], set()).add(r["privilege"])
    return out


SNAPSHOT_CHUNK = 10_000     # asset rows per round trip of a paced snapshot


async def privilege_snapshot(store, metastore_id: str, pace=None):
    """The metastore's securables, owners and grants at one version (one repeatable-read snapshot):
    (version, the metastore's owner, asset rows (id, parent_id, type, full_name, owner), grants grouped).
    Ids as text: a million of them decoded as UUIDs and turned back into strings cost seconds.
    `pace` (shards/warm_pace.py `Pace`): read in chunks, giving way to the requests in flight between them."""
    ms = uuid.UUID(metastore_id)
    query = """SELECT id::text, parent_id::text, type, full_name, owner FROM assets
               WHERE metastore_id = $1 AND type <> 'staging_table'"""
    async with (await store.home(metastore_id)).acquire() as conn, \
            conn.transaction(isolation="repeatable_read", readonly=True):
        meta = await conn.fetchrow("SELECT version, info FROM metastores WHERE id = $1", ms)
        if meta is None:
            raise MetastoreGone(metastore_id)
        if pace is None:
            assets = await conn.fetch(query, ms)
        else:
            assets, cursor = [], await conn.cursor(query, ms)
            while rows := await cursor.fetch(SNAPSHOT_CHUNK):
                assets += rows
                if pace.due():
                    await pace.give_way()
        grants = await conn.fetch("SELECT securable_id, principal, privilege FROM grants WHERE metastore_id = $1", ms)
    return meta["version"], meta["info"].get("owner"), assets, group_grants(grants)


async def count_securables(store, metastore_id: str, limit: int) -> int:
    """How many securables the metastore has, counted up to `limit` (an index range, bounded)."""
    return await (await store.home(metastore_id)).fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM assets WHERE metastore_id = $1 LIMIT $2) AS s",
        uuid.UUID(metastore_id), limit)


async def securable_chains(store, metastore_id: str, securable_ids: list[str]):
    """The securables with these ids and all their ancestors, as rows (id, parent_id, type, owner,
    full_name), and the grants on them and on the metastore: what a decision about one of them reads
    (cache/partial_privilege_index.py). One statement, so one snapshot and one round trip: a cold
    owner's request waits for it. Ids that are not UUIDs name nothing."""
    ms = uuid.UUID(metastore_id)
    ids = []
    for sid in securable_ids:
        try:
            ids.append(uuid.UUID(sid))
        except ValueError:
            continue
    found = await (await store.home(metastore_id)).fetch(
        """WITH RECURSIVE chain AS (
               SELECT id, parent_id FROM assets WHERE metastore_id = $1 AND id = ANY($2) AND type <> 'staging_table'
               UNION
               SELECT a.id, a.parent_id FROM assets a JOIN chain c ON a.id = c.parent_id WHERE a.metastore_id = $1),
           securables AS (
               SELECT a.id, a.parent_id, a.type, a.owner, a.full_name FROM assets a JOIN chain c ON a.id = c.id
               WHERE a.metastore_id = $1)
           SELECT id::text, parent_id::text, type, owner, full_name, NULL AS principal, NULL AS privilege
           FROM securables
           UNION ALL
           SELECT securable_id::text, NULL, NULL, NULL, NULL, principal, privilege FROM grants
           WHERE metastore_id = $1 AND (securable_id = $1 OR securable_id IN (SELECT id FROM securables))""",
        ms, ids)
    rows = [(r["id"], r["parent_id"], r["type"], r["owner"], r["full_name"]) for r in found if r["principal"] is None]
    grants: dict[str, dict[str, set[str]]] = {}
    for r in found:
        if r["principal"] is not None:
            grants.setdefault(r["id"], {}).setdefault(r["principal"], set()).add(r["privilege"])
    return rows, grants


async def grants_of(store, metastore_id: str, securable_ids: list[str]) -> dict[str, dict[str, set[str]]]:
    """The grants on these securables of a metastore, grouped (those with none are absent)."""
    rows = await (await store.home(metastore_id)).fetch("SELECT securable_id, principal, privilege FROM grants WHERE securable_id = ANY($1)",
                                  [uuid.UUID(i) for i in securable_ids])
    return group_grants(rows)


async def is_account_admin(store, principal: str) -> bool:
    return bool(await store.pool.fetchval("SELECT is_account_admin FROM principals WHERE name = $1", principal))
