"""Shared fixtures: one embedded PostgreSQL and one catalog server per test session.

Each test that needs isolation gets its own metastore assigned to a fresh workspace,
with an admin token for that workspace, so tests never see each other's objects.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import aiohttp
import pytest
from hypothesis import settings

# The tests refresh system tables by request. A refresh every 10 s of every metastore in the shared
# server would write Delta files in delta-rs threads while tests change the environment in-process
# (glibc's setenv and a native thread's getenv race: the suite died of it once). Set before
# shardcat is imported: catalog/features/system.py reads it once.
os.environ.setdefault("SHARDCAT_SYSTEM_REFRESH_SECONDS", "3600")

from shardcat.auth import hash_token, new_token
from shardcat.entities.urls import join_url, normalize_url
from shardcat.cluster.embedded_db import start_embedded_postgres
from shardcat.cluster.server import ServeConfig, start
from shardcat.entities.values import now_ms

PREFIX = "/api/2.1/unity-catalog"

# No per-example deadline: a shared machine may stop the process for half a second mid-example.
settings.register_profile("shardcat", deadline=None)
settings.load_profile("shardcat")


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory) -> str:
    """A real PostgreSQL: $SHARDCAT_TEST_DB if set, else an embedded server for this session."""
    return os.environ.get("SHARDCAT_TEST_DB") or start_embedded_postgres(tmp_path_factory.mktemp("pg") / "data")


@pytest.fixture(scope="session")
async def server(pg_url, tmp_path_factory):
    running = await start(ServeConfig(port=0, data_dir=tmp_path_factory.mktemp("catalog"), db=pg_url))
    yield running
    await running.stop()


def serving(name: str, **config):
    """A module's own running catalog (e.g. `shards=2`), on the session's PostgreSQL:
    `cluster = serving("name", shards=2)` in a test module defines its `cluster` fixture."""

    @pytest.fixture(scope="module")
    async def running(pg_url, tmp_path_factory):
        started = await start(ServeConfig(port=0, data_dir=tmp_path_factory.mktemp(name), db=pg_url, **config))
        yield started
        await started.stop()

    return running


@pytest.fixture(scope="session")
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


@dataclass
class Workspace:
    """A fresh metastore, assigned to its own workspace, and an admin token for it."""
    url: str            # http://host:port
    token: str
    metastore_id: str
    workspace_id: int
    storage_root: str
    session: aiohttp.ClientSession

    @property
    def api(self) -> str:
        return self.url + PREFIX

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"}

    async def call(self, method: str, path: str, *, json=None, params=None, data=None, headers=None):
        """(status, parsed JSON body) of one API call; path is relative to the API prefix."""
        async with self.session.request(method, self.api + path, json=json, params=params, data=data,
                                        headers={**self.headers, **(headers or {})}) as r:
            return r.status, await r.json(content_type=None)


async def new_workspace(server, session, tmp_path) -> Workspace:
    store = server.store
    metastore_id = str(uuid.uuid4())
    root = join_url(normalize_url(str(tmp_path)), "storage", metastore_id)
    now = now_ms()
    await store.create_metastore(metastore_id, f"ms-{metastore_id[:8]}", {
        "storage_root": root, "owner": "admin", "created_at": now, "created_by": "admin",
        "updated_at": now, "updated_by": "admin"})
    # Random, not a counter: modules that import this file get a second copy of its globals.
    workspace_id = (1 << 41) + uuid.uuid4().int % (1 << 40)
    await store.assign(workspace_id, metastore_id, None)
    admin = await store.create_principal("admin", "user", is_account_admin=True)
    token = new_token()
    await store.add_token(admin.id, hash_token(token), workspace_id)
    return Workspace(server.url, token, metastore_id, workspace_id, root, session)


@pytest.fixture
async def ws(server, http, tmp_path) -> Workspace:
    return await new_workspace(server, http, tmp_path)
