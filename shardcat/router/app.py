"""The HTTP front: authenticates every request and hands it to the shard that owns its metastore.

While the cluster runs in one process the owning shard is in-process and its routes
are served directly here; the metastore-to-shard assignment lives in `Router`.
"""

from __future__ import annotations

from aiohttp import web

from ..shards.http import ShardApi
from ..shards.metastores import MetastoreService
from ..shards.service import CatalogService
from ..shards.shard import Shard
from ..store.db import Store
from .middleware import Authenticator, error_middleware

MAX_BODY_BYTES = 4 << 20


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def make_app(store: Store, shard: Shard, *, max_body_bytes: int = MAX_BODY_BYTES) -> web.Application:
    authenticator = Authenticator(store)
    app = web.Application(middlewares=[error_middleware(max_body_bytes), authenticator.middleware],
                          client_max_size=max_body_bytes)
    api = ShardApi(CatalogService(shard), MetastoreService(shard), authenticator.forget_workspace)
    app.add_routes([web.get("/healthz", healthz), *api.routes()])
    return app
