"""The HTTP front of a one-process catalog: one in-process shard serves every metastore."""

from __future__ import annotations

from aiohttp import web

from .app import make_shard_app
from ..catalog.tree.metastores import AccountService
from ..governance.oidc import OidcConfig, OidcVerifier
from ..shards.shard import Shard
from ..store.db import Store
from ..router.account import AccountApi
from ..governance.authentication import Authenticator


def make_app(store: Store, shard: Shard, oidc: OidcConfig | None = None,
             webhook_allow_hosts: tuple[str, ...] = ()) -> web.Application:
    """`oidc`: an identity provider whose tokens sign users in (governance/oidc.py); `webhook_allow_hosts`:
    hosts webhooks may reach although not public (web/destinations.py)."""
    verifier = OidcVerifier(oidc, store) if oidc else None
    authenticator = Authenticator(store, cache=shard.cache_config.enabled, identity_provider=verifier)
    account = AccountApi(AccountService(store), authenticator, verifier)
    return make_shard_app(shard, authenticator, extra_handlers=account.handlers(), webhook_allow_hosts=webhook_allow_hosts)
