"""Databricks' workspace setting of the default namespace: `GET /api/2.0/settings/types/default_namespace_ws/names/default`.

Databricks answers `{"etag", "setting_name": "default", "namespace": {"value": <the workspace's default
catalog>}}`. Engines ask it when attached without a schema: DuckDB's Unity Catalog extension takes its
`setting_name` as the attached catalog's default schema, which is `default`, the schema every new catalog
comes with (catalog/tree/containers.py). Here the default catalog is the workspace assignment's
`default_catalog_name` (the account API sets it); without one the namespace carries no value. Read-only:
the setting changes with the assignment.
"""

from __future__ import annotations

import hashlib

from ...auth import Caller
from ...web.kit import ok
from ...web.routes import Handler, ShardServing

SETTING_NAME = "default"


async def default_namespace(store, caller: Caller) -> dict:
    assigned = await store.assignment(caller.workspace_id)
    catalog = assigned[1] if assigned else None
    namespace = {"value": catalog} if catalog else {}
    etag = hashlib.sha256(f"{caller.workspace_id}|{catalog or ''}".encode()).hexdigest()[:16]
    return {"etag": etag, "setting_name": SETTING_NAME, "namespace": namespace}


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    store = serving.shard.store

    async def get(request):
        return ok(await default_namespace(store, request["caller"]))

    return {"getDefaultNamespaceSetting": get}
