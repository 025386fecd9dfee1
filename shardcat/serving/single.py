"""The HTTP front of a one-process catalog: one in-process shard serves every metastore."""

from __future__ import annotations

from aiohttp import web

from .app import make_shard_app
from ..catalog.metastores import AccountService
from ..shards.shard import Shard
from ..store.db import Store
from ..router.account import AccountApi
from ..web.middleware import Authenticator


def make_app(store: Store, shard: Shard) -> web.Application:
    authenticator = Authenticator(store, cache=shard.cache_config.enabled)
    account = AccountApi(AccountService(store), authenticator)
    return make_shard_app(shard, authenticator, extra_routes=account.routes())
