"""Authentication: the caller of a request, from its bearer token (a shardcat token, or a JWT an
OIDC identity provider vouches for), with a short-lived cache; as an aiohttp middleware for the apps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from aiohttp import web

from ..auth import Caller, bearer, hash_token
from ..cache.ttl import TtlCache
from ..entities.values import now_ms
from ..errors import CatalogError
from ..store.db import Store
from ..web import registry


def _unexpired(hit: tuple[Caller, int | None]) -> bool:
    """Whether a (caller, token expiry in ms) pair is still good: expiry is checked on every use."""
    return hit[1] is None or hit[1] > now_ms()


def _token_exchange(request: web.Request) -> bool:
    """An RFC 8693 token exchange (`POST .../auth/tokens` with a form): it carries no bearer token."""
    return (request.method == "POST" and request.path == registry.TOKEN_EXCHANGE_PATH
            and request.content_type == "application/x-www-form-urlencoded")


class Authenticator:
    """Finds a request's caller from its bearer token; short TTL caches spare the database.

    A token's caller (principal, account-admin and trusted-engine marks, groups closed
    transitively, the metastore of its workspace) is read on a cache miss and lives `ttl`
    seconds (5 s): a revoked token, a deactivated principal, a membership or assignment change
    takes effect within that on every front and shard (at once on the front that made the
    change). Expiry is checked on every use, so an expired token stops at its expiry time exactly.
    With `cache` False (a shard's cache-off mode) nothing is kept: every request reads its caller.
    """

    def __init__(self, store: Store, ttl: float = 5.0, *, cache: bool = True,
                 timer: Callable[[], float] = time.monotonic, identity_provider=None):
        self.store = store
        self.cache = cache
        # An OIDC identity provider's verifier (governance/oidc.py): a bearer JWT it vouches for
        # authenticates as the principal it names; its refusal (a CatalogError) is the answer
        self.identity_provider = identity_provider
        # token hash -> (Caller, token expiry): read afresh (identity and workspace assignment) on a miss
        self.callers = TtlCache(maxsize=100_000, ttl=ttl, timer=timer)
        # token hash -> the read in flight: when an entry expires under load, every request in
        # flight misses it at once, and one read, not one per request, must refill it
        self._loading: dict[bytes, asyncio.Future] = {}

    def forget_workspace(self, workspace_id: int) -> None:
        self.forget_identities()    # rare: cheaper than indexing the callers by workspace

    def forget_token(self, digest: bytes) -> None:
        self.callers.invalidate(digest)
        self._loading.pop(digest, None)     # a read begun before the change is not shared after it

    def forget_identities(self) -> None:
        """After a principal or membership change: every cached identity may be stale."""
        self.callers.clear()
        self._loading.clear()

    async def caller(self, token: str) -> Caller | None:
        digest = hash_token(token)
        hit = self.callers.get(digest) or await self._load_once(digest, token)
        if hit is None:
            return None
        if not _unexpired(hit):
            self.forget_token(digest)
            return None
        return hit[0]

    def cached(self, token: str) -> Caller | None:
        """The caller of a token while it is in the cache and unexpired, without waiting on the
        database; None otherwise (then `caller` says)."""
        hit = self.callers.get(hash_token(token))
        return hit[0] if hit is not None and _unexpired(hit) else None

    async def _load_once(self, digest: bytes, token: str) -> tuple[Caller, int | None] | None:
        """`_load_caller`, shared by the requests that miss the same token meanwhile. Without the
        cache every request reads its own (cache-off mode measures exactly that)."""
        if not self.cache:
            return await self._load_caller(digest, token)
        loading = self._loading.get(digest)
        if loading is None:
            loading = self._loading[digest] = asyncio.ensure_future(self._load_caller(digest, token))
            loading.add_done_callback(lambda done: self._loaded(digest, done))
        return await asyncio.shield(loading)     # a waiter that gives up does not cancel the others' read

    def _loaded(self, digest: bytes, done: asyncio.Future) -> None:
        if self._loading.get(digest) is done:
            del self._loading[digest]
        if not done.cancelled():
            done.exception()        # retrieved: every waiter may have given up

    async def _load_caller(self, digest: bytes, token: str) -> tuple[Caller, int | None] | None:
        found = await self.store.principals.identity_for_token(digest)
        if found is None and self.identity_provider is not None and token.count(".") == 2:
            found = await self.identity_provider.identity(token)     # a JWT: refused with its reason
        if found is None:
            return None
        assignment = await self.store.assignment(found.workspace_id)
        caller = Caller(found.name, found.principal_id, found.is_account_admin, found.workspace_id,
                        assignment[0] if assignment else None, groups=found.groups,
                        trusted_engine=found.trusted_engine)
        if self.cache:
            self.callers.put(digest, (caller, found.expires_at))
        return caller, found.expires_at

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        if registry.public(request.path):
            return await handler(request)
        token = bearer(request.headers.get("Authorization"))
        if token is None and _token_exchange(request):
            return await handler(request)       # an identity provider's token in the form is its credential
        if token is None:
            raise CatalogError("UNAUTHENTICATED", "Missing 'Authorization: Bearer <token>' header.")
        caller = await self.caller(token)
        if caller is None:
            raise CatalogError("UNAUTHENTICATED", "The bearer token is not valid (unknown, revoked or expired).")
        request["caller"] = caller
        return await handler(request)
