"""The change feed: what each write did to a metastore, version by version, for tools that keep
something in step with the catalog (a search index, a copy of the metadata, an engine's cache).

`GET /shardcat/changes?since_version=V` answers the versions after V, oldest first: when each
was written and every securable it touched, with its id, type, full name and the change
(CREATE, UPDATE, DELETE, PERMISSIONS, DELTA_COMMIT, DELTA_PUBLISH). It is the change log the
shards reconcile from (docs/design.md), read from PostgreSQL at one snapshot; a reader continues
from the last version it got. It names every securable of the metastore, so only metastore
admins and account admins may read it.
"""

from __future__ import annotations


from ...auth import Caller
from ...entities.types import METASTORE, TYPES
from ...errors import CatalogError, invalid
from ...governance.authorize import authorizer
from ...entities.values import bigint_text
from ...web.paging import page_size
from ...shards.shard import Shard
from ...web.kit import ok
from ...web.routes import Handler, ShardServing

_INTERNAL = ("staging_table",)      # a step of creating a table, not a securable of its own
_SECURABLE_TYPES = {name: t.securable_type for name, t in TYPES.items()} | {
    "metastore": METASTORE.securable_type, "model_version": "MODEL_VERSION"}   # not REGISTERED_MODEL, as grants say


def _since(value: str | None) -> int:
    if value is None:
        return 0
    since = bigint_text(value)
    if since is None:
        raise invalid(f"since_version must be a metastore version (an integer >= 0), got '{value:.40}'.")
    return since


def touched(row: dict, current: dict) -> list[dict]:
    """The securables one version touched. Rows from before the change log kept details name the
    ids only; an entry without a name (a grant or a Delta commit) takes the current one."""
    details = row["details"] or [{"id": i, "change": None} for i in row["changed"]]
    out = []
    for d in details:
        type_name, full_name = d.get("type"), d.get("full_name")
        if type_name is None or full_name is None:
            type_name, full_name = current.get(d["id"], (type_name, full_name))
        if type_name in _INTERNAL:
            continue
        out.append({"id": d["id"], "securable_type": _SECURABLE_TYPES.get(type_name), "full_name": full_name,
                    "change": d["change"]})
    return out


class ChangeFeed:
    def __init__(self, shard: Shard):
        self.shard = shard

    async def changes(self, caller: Caller, query) -> dict:
        since = _since(query.get("since_version"))
        limit = page_size(query.get("max_results"))
        if not (await authorizer(self.shard, caller)).admin:
            raise CatalogError("PERMISSION_DENIED",
                               "Only account admins and metastore admins may read the change feed.")
        ms = caller.metastore()
        version, rows, current = await self.shard.store.change_feed(ms, since, limit + 1)
        await self.shard.observed(ms, version)
        return {"metastore_id": ms, "metastore_version": version,
                "changes": [{"version": r["version"], "at": r["at"], "securables": touched(r, current)}
                            for r in rows[:limit]],
                "has_more": len(rows) > limit}


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    feed = ChangeFeed(shard)

    async def changes(request):
        return ok(await feed.changes(request["caller"], request.query))

    return {"listChanges": changes}
