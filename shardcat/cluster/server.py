"""Runs a catalog: database (embedded or --db), migrations, bootstrap, shard and HTTP front."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from ..catalog.features.maintenance import set_api_url as set_maintenance_api_url
from ..governance.oidc import OidcConfig
from ..serving.single import make_app
from ..router.forward import make_router_app
from ..router.front import start_front
from ..web.http1 import Listening
from ..web.http_limits import HttpLimits
from ..router.routing import RoutingTable
from ..serving.front import start_shard_front
from ..serving.gc_policy import freeze_survivors_of_full_collections
from ..shards.group_commit import GroupCommitConfig
from ..shards.shard import CacheConfig, Shard
from ..store.databases import parse_databases
from ..store.db import Store
from ..store.homes import recover_moves
from ..store.sealing import SecretBox, load_keys, reseal_credentials
from .bootstrap import ensure_admin_token, ensure_default_metastore
from .embedded_db import start_embedded_postgres
from .ray_cluster import RayCluster

log = logging.getLogger(__name__)


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path.home() / ".shardcat"
    db: str | list[str] | None = None  # PostgreSQL URL, or several (`NAME=URL` or URL, store/databases.py): the first
                                       # holds the account directory, each is a home of metastores; None: embedded
    shards: int = 0                # 0: one in-process shard; N: N shard actors on Ray behind a router
    shards_per_node: int | None = None   # at most (with shards) or exactly (alone) this many shards per Ray node
    ray_address: str | None = None # join this Ray cluster instead of starting a local one
    cache: CacheConfig = field(default_factory=CacheConfig)
    group_commit: GroupCommitConfig = field(default_factory=GroupCommitConfig)   # of every shard
    event_loop: str = "uvloop"     # of the shard actors (the caller runs this process's own)
    secret_key: str | None = None  # where the secret keys are: a file, env:NAME; None: <data_dir>/secret.key
    http_limits: HttpLimits = field(default_factory=HttpLimits)    # of the public front (shard actors: the defaults)
    oidc: OidcConfig | None = None  # an identity provider whose tokens sign users in (governance/oidc.py)
    webhook_allow_hosts: tuple[str, ...] = ()   # hosts webhooks may reach although not public (web/destinations.py)


@dataclass
class Running:
    url: str
    admin_token_path: Path
    store: Store
    runner: web.AppRunner
    front: Listening                        # the public server, in front of the runner's app
    cluster: RayCluster | None = None

    async def stop(self) -> None:
        self.front.stop()
        await self.runner.cleanup()
        if self.cluster:
            await self.cluster.stop()
        await self.store.close()


async def start(config: ServeConfig) -> Running:
    data_dir = config.data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    secrets = SecretBox(load_keys(data_dir, config.secret_key))    # a bad key source stops here, first
    if config.db:
        databases = parse_databases([config.db] if isinstance(config.db, str) else list(config.db))
    else:
        databases = {"db0": await asyncio.to_thread(start_embedded_postgres, data_dir / "postgres")}
    db_url = databases      # what the shard actors open too
    keys = secrets.keys
    store = await Store.open(db_url)
    store.secrets = secrets
    try:
        await store.migrate()
        await recover_moves(store)      # what moves between home databases left when their process died
    except BaseException:
        await store.close()
        raise
    await reseal_credentials(store, store.secrets)     # plain text (older versions) and older keys' seals
    token_path = await ensure_admin_token(store, data_dir)
    await ensure_default_metastore(store, data_dir)
    if config.shards or config.shards_per_node:
        cluster = RayCluster(RoutingTable(store), db_url, ray_address=config.ray_address, cache=config.cache,
                             event_loop=config.event_loop, secret_keys=keys, oidc=config.oidc,
                             group_commit=config.group_commit, shards_per_node=config.shards_per_node,
                             webhook_allow_hosts=config.webhook_allow_hosts)
        await cluster.start(config.shards)
        front = await start_front(make_router_app(store, cluster.routing, cluster.event_counts, config.oidc, cluster),
                                  config.host, config.port, config.http_limits)
        await cluster.announce_api_url(f"http://{config.host}:{front.port}")     # where maintenance tasks call back
        return Running(f"http://{config.host}:{front.port}", token_path, store, front.runner, front, cluster)
    shard = Shard(store, cache=config.cache, group_commit=config.group_commit)
    front = await start_shard_front(make_app(store, shard, config.oidc, config.webhook_allow_hosts), config.host,
                                    config.port, limits=config.http_limits)
    set_maintenance_api_url(shard, f"http://{config.host}:{front.port}")     # where its maintenance tasks call back
    return Running(f"http://{config.host}:{front.port}", token_path, store, front.runner, front)


async def serve_forever(config: ServeConfig) -> None:
    if not (config.shards or config.shards_per_node):
        freeze_survivors_of_full_collections()     # this process holds the shard and its cache
    running = await start(config)
    print(f"shardcat listening on {running.url}/api/2.1/unity-catalog", flush=True)   # benchmarks parse this line
    print(f"explorer at {running.url}/", flush=True)
    print(f"admin token in {running.admin_token_path}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await running.stop()
