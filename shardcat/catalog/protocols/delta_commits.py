"""The Delta commits API of catalog-managed tables: `POST/GET /delta/preview/commits`.

A commit is one metastore write through `Shard.write`: the commit row, any published-version
report and any table-metadata change commit in the same transaction as the metastore version
bump and its change-log row, so commits are serialized per metastore, visible to every shard
that owns the metastore, and survive shard moves and restarts. The rules themselves are in
shardcat/delta/commits.py.
Which new managed Delta tables are catalog-managed is a rule of table creation (catalog/tree/tables.py).
"""

from __future__ import annotations

import os

from aiohttp import web

from ...auth import Caller
from ...delta import commits as rules
from ...entities.asset import Asset
from ...governance.authorize import authorizer, require_data_access
from ...store.writes import WriteTx
from ...entities.values import now_ms
from ...shards.shard import MetastoreState, Shard
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ..tree.column_governance import keep_column_governance

# The server-wide limit on ratified but unpublished commits per table (a table may set a lower one).
MAX_UNPUBLISHED = int(os.environ.get("SHARDCAT_DELTA_MAX_UNPUBLISHED", rules.DEFAULT_MAX_UNPUBLISHED))


class DeltaCommitService:
    def __init__(self, shard: Shard, max_unpublished: int = MAX_UNPUBLISHED):
        self.shard = shard
        self.max_unpublished = max_unpublished

    async def commit(self, caller: Caller, body: dict) -> dict:
        commit = rules.parse_commit(body)
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            table, latest, published = await tx.table_with_delta_head(commit.table_id)
            missing = rules.missing_table(commit.table_id)
            if table is None or table.type != "table":
                raise missing
            # MODIFY on the table, before anything names it or its type
            authz.require_data(table, write=True, missing=missing)
            rules.check_table(table, commit.table_id, commit.table_uri)
            changed = rules.apply_metadata(table, commit.metadata, caller.name, now) \
                if commit.info is not None and commit.metadata is not None else None
            if changed is not None:     # a new schema keeps its columns' tags and masks, or is refused
                changed = await keep_column_governance(self.shard.store, authz, table, changed)
            await self.ratify(tx, table, commit.info, commit.latest_backfilled_version, changed,
                              head=(latest, published))
            return {}

        try:
            return await self.shard.write(caller.metastore(), write, prefetch=(("delta_head", commit.table_id),))
        except rules.AlreadyRatified:
            return {}     # the replay rolled back; the accepted commit stands

    async def ratify(self, tx: WriteTx, table: Asset, info: rules.CommitInfo | None, backfilled: int | None,
                     changed: Asset | None = None, head: tuple[int | None, int | None] | None = None) -> None:
        """Ratify a proposed commit and/or record a published-version report, inside a metastore write:
        the one implementation behind both `/delta/preview/commits` and the Delta API's add-commit
        (catalog/protocols/delta_api.py). `table` is the (already checked and authorized) catalog-managed table;
        `changed` is the table as a metadata-changing commit leaves it, written with the commit.
        Raises rules.AlreadyRatified for a replay of the accepted commit (the write must roll back
        and report success), CatalogError for a refused proposal."""
        latest, published = head if head is not None else await tx.delta_head(table.id)
        head = rules.Head.of(latest, published)
        publish = backfilled if backfilled is not None and backfilled > head.published else None
        below = published if published is not None else -1     # every version up to it is published
        if info is None:
            rules.check_backfill(head, backfilled, latest is not None)
        else:
            existing = await tx.delta_commit_at(table.id, info.version) if info.version <= head.latest else None
            rules.check_proposal(head, info, existing, backfilled, rules.max_unpublished(table, self.max_unpublished))
            # The report of what is published goes with the commit (backfilled is below its version).
            await tx.add_delta_commit(table.id, info.version, info.file_name, info.file_size,
                                      info.file_modification_timestamp, info.timestamp, info.inline_content,
                                      publish_up_to=publish, published=below)
            publish = None
            if changed is not None:
                await tx.put(changed)
        if publish is not None:
            await tx.publish_delta_commits(table.id, publish, below)

    async def get_commits(self, caller: Caller, body: dict) -> dict:
        req = rules.parse_get_commits(body)
        ms = caller.metastore()
        await self.shard.state(ms, caller.min_version, paths=False)     # caught up; read by table id
        version, table, latest, _, rows = await self.shard.store.delta_commits(
            ms, req.table_id, req.start_version, req.end_version, rules.MAX_COMMITS_PER_PAGE)
        await self.shard.observed(ms, version)
        missing = rules.missing_table(req.table_id)
        if table is None or table.type != "table":
            raise missing
        # SELECT on the table, before anything names it or its type
        await require_data_access(self.shard, caller, table, write=False, missing=missing)
        rules.check_table(table, req.table_id, req.table_uri)
        return {"commits": [rules.commit_info_json(r) for r in rows], "latest_table_version": latest or 0}


async def _query_or_body(request: web.Request) -> dict:
    """GET carries a JSON body in the SDK; plain HTTP clients may use query parameters instead."""
    body = await json_body(request)
    for key in ("table_id", "table_uri", "start_version", "end_version"):
        if key not in body and key in request.query:
            body[key] = request.query[key]
    return body


def shard_handlers(serving: ShardServing, max_unpublished: int = MAX_UNPUBLISHED) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    commits = DeltaCommitService(shard, max_unpublished)

    async def post(request):
        return ok(await commits.commit(request["caller"], await json_body(request)))

    async def get(request):
        return ok(await commits.get_commits(request["caller"], await _query_or_body(request)))

    return {"commit": post, "getCommits": get}


def fast_writes(serving: ShardServing, max_unpublished: int = MAX_UNPUBLISHED) -> dict:
    """A commit, for the shard's front to make itself (serving/front.py), as `post` makes it."""
    return {("POST", "/delta/preview/commits"): DeltaCommitService(serving.shard, max_unpublished).commit}
