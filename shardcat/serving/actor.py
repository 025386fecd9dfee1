"""The shard as a Ray actor: one Shard, its aiohttp app and the front before it, inside the actor's event loop.

Ray carries only control calls (start, own, drop, stats); requests reach the
shard over HTTP, from the router or straight from a routing-aware client. The
supervisor's `ping` runs in a concurrency group of its own (its own thread and event
loop), so a shard busy with a queue of requests still answers it at once; it reports
how long ago the serving loop last beat and how many answers it has sent, which together
tell a busy shard (late beats, answers still going out) from a hung one (neither).

A shard process outliving its place in the cluster ends itself (`Orphan watch`): when its
raylet (the Ray process that started it, its parent) is gone, or when it finds that none of the
metastores it serves is assigned to it any more and Ray's control store does not answer or says
its node is dead. Nothing of it is then left listening for a client with a stale routing table.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sys
import threading
import time

import ray

from ..catalog.features import maintenance as maintenance_feature
from ..governance import audit, oidc
from ..web import http1
from .gc_policy import freeze_survivors_of_full_collections
from ..web import metrics as web_metrics
from . import metrics as serving_metrics
from ..governance.authentication import Authenticator
from ..store.db import Store
from ..store.sealing import SecretBox
from .front import start_shard_front
from .app import make_shard_app
from ..shards.group_commit import GroupCommitConfig
from ..shards.shard import CacheConfig, Shard


log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 0.1
PARENT_CHECK_SECONDS = 0.5      # how often a shard looks for its raylet
OWNERSHIP_CHECK_SECONDS = 5.0   # how often a shard serving metastores checks they are still assigned to it
RAY_ANSWER_SECONDS = 5.0        # Ray's control store not answering in this long: unreachable


@ray.remote(max_restarts=0, num_cpus=0, concurrency_groups={"control": 1})
class ShardActor:
    def __init__(self, name: str, db_url: str, cache: CacheConfig = CacheConfig(), secret_keys: list[bytes] = (),
                 oidc=None, group_commit: GroupCommitConfig = GroupCommitConfig(), webhook_allow_hosts=()):
        self.name = name
        self.webhook_allow_hosts = webhook_allow_hosts     # reached although not public (web/destinations.py)
        self.oidc = oidc        # governance/oidc.py OidcConfig: bearer JWTs the router relays are verified here too
        self.db_url = db_url
        self.secret_keys = list(secret_keys)     # the server's (store/sealing.py): credentials are written here
        self.cache = cache
        self.group_commit = group_commit
        self.shard: Shard | None = None
        self.listening: http1.Listening | None = None     # its front, the app behind it
        self.heartbeat = time.monotonic()       # the serving loop's last beat
        self.audit: audit.AuditLog | None = None    # it counts the answers the serving loop has sent
        self._beating: asyncio.Task | None = None    # held so the loop keeps the task

    async def start(self, host: str | None = "127.0.0.1") -> tuple[str, str | None]:
        """Open the store and start serving; returns the shard's base URL and, on loopback, the Unix
        socket it also listens on for the router. `host` None: this node's IP, for a multi-node
        cluster where the router and clients reach shards over the network."""
        host = host or ray.util.get_node_ip_address()
        if os.nice(0) > 0:
            log.warning("shard %s runs at niceness %d: it yields the CPU to every other process on its node; "
                        "start Ray with RAY_worker_niceness=0 (ray-config/README.md)", self.name, os.nice(0))
        freeze_survivors_of_full_collections()      # the cache's objects out of every full collection
        store = await Store.open(self.db_url)
        store.secrets = SecretBox(self.secret_keys) if self.secret_keys else None
        self.shard = Shard(store, self.name, claim_on_demand=False, cache=self.cache,
                           group_commit=self.group_commit)
        verifier = oidc.OidcVerifier(self.oidc, store) if self.oidc else None
        app = make_shard_app(self.shard, Authenticator(store, cache=self.cache.enabled, identity_provider=verifier),
                             webhook_allow_hosts=self.webhook_allow_hosts)
        # Through the module: Ray ships this class by value, so a name imported into it is a copy
        # (an AppKey copy finds nothing).
        self.audit = app[audit.APP_KEY]
        self.observed = app[web_metrics.OBSERVED]
        local_socket = None
        if host == "127.0.0.1" and sys.platform == "linux":
            # The router is on this host: a Unix socket costs both sides less per request than
            # loopback TCP. Abstract (leading NUL): no file to clean up after a killed actor.
            local_socket = f"\0shardcat-{self.name}-{os.getpid()}-{secrets.token_hex(4)}"
        self.listening = await start_shard_front(app, host, 0, local_socket)
        self._beating = asyncio.get_running_loop().create_task(self._beat())
        self._watching = asyncio.get_running_loop().create_task(self._watch_ownership())
        threading.Thread(target=_watch_parent, args=(self.name, os.getppid()), daemon=True,
                         name="shardcat-parent-watch").start()
        port = self.listening.port
        return f"http://{host}:{port}", local_socket

    async def set_api_url(self, url: str) -> None:
        """Where this shard's maintenance tasks reach the catalog's API: the router's public address (it
        sends each request to the metastore's owner, wherever the metastore moved meanwhile). An
        SHARDCAT_API_URL in the shard's own environment wins: on a cluster of several machines the
        router may listen where other nodes cannot reach it."""
        if not os.environ.get("SHARDCAT_API_URL"):
            maintenance_feature.set_api_url(self.shard, url)

    async def where(self) -> tuple[str, str, int]:
        """(Ray node id, node IP, process id) of this shard."""
        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), os.getpid()

    async def _watch_ownership(self) -> None:
        """Orphan watch, ownership half: every metastore served here assigned elsewhere (the
        supervisor gave them away: it took this shard for dead) and Ray unreachable or this node
        dead: nobody will tell this process to stop; it stops itself."""
        while True:
            await asyncio.sleep(OWNERSHIP_CHECK_SECONDS)
            serving = list(self.shard.states)
            if not serving:
                continue
            try:
                assigned = await self.shard.store.shard_assignments()
            except Exception:       # the database is down: no evidence either way
                continue
            if any(assigned.get(m) == self.name for m in serving):
                continue
            reachable = await _node_alive(ray.get_runtime_context().get_node_id())
            if not reachable:
                log.error("shard %s: every metastore it serves (%d) is assigned elsewhere and Ray %s; exiting",
                          self.name, len(serving), "is unreachable" if reachable is None else "says its node is dead")
                os._exit(3)

    async def _beat(self) -> None:
        while True:
            self.heartbeat = time.monotonic()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def own(self, metastore_ids: list[str], warm: bool = False) -> None:
        """Serve these metastores; with `warm`, build their state now instead of on first use."""
        for metastore_id in metastore_ids:
            self.shard.own(metastore_id)
        if warm:
            for metastore_id in metastore_ids:
                await self.shard.state(metastore_id)

    async def drop(self, metastore_ids: list[str]) -> None:
        for metastore_id in metastore_ids:
            self.shard.drop(metastore_id)

    async def owned(self) -> list[str]:
        return sorted(self.shard.states)

    async def figures(self):
        """This shard's metrics figures (web/metrics.py Figures), for the router's /metrics."""
        return serving_metrics.shard_figures(self.shard, self.audit, self.observed)

    async def stats(self) -> dict:
        caches = [s.cache.stats() for s in self.shard.states.values() if s.cache is not None]
        cached = {k: sum(c[k] for c in caches) for k in ("entries", "bytes", "hits", "misses")} if caches else {}
        return {"name": self.name, "metastores": len(self.shard.states), **self.shard.stats, "cache": cached,
                "front": dict(self.listening.front.stats), "audit": dict(self.audit.stats), "niceness": os.nice(0),
                "event_loop": type(asyncio.get_running_loop()).__module__.partition(".")[0]}

    @ray.method(concurrency_group="control")
    async def ping(self) -> tuple[float, int]:
        """(seconds since the serving event loop last beat, answers sent so far). A loop busy with
        requests beats between them, late by as much as its queue takes on a slow machine, and
        keeps sending answers; a hung one does neither."""
        return time.monotonic() - self.heartbeat, self.audit.submitted if self.audit else 0

    async def pause(self, seconds: float) -> None:
        """Chaos: stop serving (HTTP and Ray calls on the serving loop) for `seconds`, as a hung loop
        would; only `ping` answers, reporting the stall. Blocking sleep on purpose: it holds the
        serving loop. Bounded to a minute."""
        time.sleep(min(max(seconds, 0.0), 60.0))


def _watch_parent(name: str, parent: int) -> None:
    """Orphan watch, raylet half: a worker's parent is its node's raylet; once it is gone (this
    process was handed to init), Ray can neither reach nor stop this shard: it exits."""
    while True:
        time.sleep(PARENT_CHECK_SECONDS)
        if os.getppid() != parent:
            log.error("shard %s: its raylet (pid %d) is gone; exiting", name, parent)
            os._exit(3)


async def _node_alive(node_id: str) -> bool | None:
    """Whether Ray's control store says this node is alive; None if it does not answer in time."""
    try:
        nodes = await asyncio.wait_for(asyncio.to_thread(ray.nodes), RAY_ANSWER_SECONDS)
    except Exception:
        return None
    return any(n.get("NodeID") == node_id and n.get("Alive") for n in nodes)
