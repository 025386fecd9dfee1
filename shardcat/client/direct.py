"""Client-side routing: send a metastore's requests straight to the shard that serves it.

The router publishes its routing table (`GET /shardcat/routing`); this client asks it
once for the caller's shard and then skips the router's hop. A shard that no longer
serves the metastore answers 421 NOT_OWNER, and a dead one refuses connections: either
way the client asks the router again. Like the router, it sends back the newest
metastore version it has seen, so it never reads older than its own acknowledged writes.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from ..web.wire import MIN_VERSION_HEADER, PREFIX, VERSION_HEADER

RETRY_BUDGET_SECONDS = 5.0


class DirectClient:
    def __init__(self, router_url: str, token: str, session: aiohttp.ClientSession):
        self.router_url = router_url.rstrip("/")
        self.session = session
        self.headers = {"Authorization": f"Bearer {token}"}
        self.shard_url: str | None = None     # where requests go; None: ask the router
        self.seen_version = 0

    async def refresh(self) -> str:
        """Learn the caller's shard from the router; a one-process server is its own shard."""
        async with self.session.get(f"{self.router_url}{PREFIX}/shardcat/routing", headers=self.headers) as r:
            body = await r.json(content_type=None) if r.status == 200 else {}
        self.shard_url = body.get("my_shard") or self.router_url
        return self.shard_url

    async def call(self, method: str, path: str, *, json=None, params=None) -> tuple[int, dict]:
        """(status, JSON body) of one API call; `path` is relative to the API prefix."""
        deadline = time.monotonic() + RETRY_BUDGET_SECONDS
        while True:
            base = self.shard_url or await self.refresh()
            headers = dict(self.headers)
            if self.seen_version:
                headers[MIN_VERSION_HEADER] = str(self.seen_version)
            try:
                async with self.session.request(method, base + PREFIX + path, json=json, params=params,
                                                headers=headers) as r:
                    body = await r.json(content_type=None)
                    if r.status != 421:
                        self.seen_version = max(self.seen_version, int(r.headers.get(VERSION_HEADER, 0)))
                        return r.status, body
            except aiohttp.ClientConnectorError:
                pass            # never reached the shard, so resending cannot apply anything twice
            self.shard_url = None
            if time.monotonic() > deadline:
                return 503, {"error_code": "TEMPORARILY_UNAVAILABLE",
                             "message": f"No shard answered for {RETRY_BUDGET_SECONDS:.0f} s."}
            await asyncio.sleep(0.05)
