"""Seeds many metastores in bulk, straight through the Store: fast enough for 100,000 tables.

One template catalog, schema and table are created through the HTTP API (so their rows are
exactly what the server writes); every seeded row is a copy of a template with its own id,
names and storage path. Rows go in through `Store.write`, one WriteTx per batch, so each
batch bumps the metastore version and writes its change-log row like any other write.
Seeding happens before any shard has looked at a seeded metastore. Then, through the API, each
metastore gets its catalog-managed Delta table (`main.load.delta_commits`: a staging table, then
the table at its location with `delta.feature.catalogManaged`, as docs/delta.md describes), and
the principals that load grants name are created (account-wide).
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import asdict, replace
from pathlib import Path

import aiohttp

from shardcat.auth import hash_token, new_token
from shardcat.entities.urls import join_url
from shardcat.entities.asset import Asset
from shardcat.store.db import Store
from shardcat.entities.values import now_ms

from .workload import CATALOG, COLUMNS, DELTA_TABLE, LOAD_SCHEMA, PREFIX, PRINCIPALS, Metastore, table_name

BATCH = 2000
_COLUMNS = "id, metastore_id, type, namespace, parent_id, name, full_name, storage_path, info, written_at"


async def _admin_workspace(store: Store, storage: str, workspace_id: int, name: str) -> Metastore:
    """A metastore assigned to its own workspace, with an admin token (as tests/conftest.py does)."""
    metastore_id = str(uuid.uuid4())
    now = now_ms()
    await store.create_metastore(metastore_id, name, {
        "storage_root": join_url(storage, metastore_id), "owner": "admin", "created_at": now,
        "created_by": "admin", "updated_at": now, "updated_by": "admin"})
    await store.assign(workspace_id, metastore_id, None)
    admin = await store.create_principal("admin", "user", is_account_admin=True)
    token = new_token()
    await store.add_token(admin.id, hash_token(token), workspace_id)
    return Metastore(metastore_id, token, 0)


async def _templates(store: Store, url: str, storage: str, workspace_id: int) -> dict[str, Asset]:
    ms = await _admin_workspace(store, storage, workspace_id, f"loadtest-template-{uuid.uuid4().hex[:8]}")
    headers = {"Authorization": f"Bearer {ms.token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        for path, body in (("/catalogs", {"name": CATALOG}),
                           ("/schemas", {"name": "s000", "catalog_name": CATALOG}),
                           ("/tables", {"name": "t000000", "catalog_name": CATALOG, "schema_name": "s000",
                                        "table_type": "MANAGED", "data_source_format": "DELTA",
                                        "columns": COLUMNS})):
            async with http.post(url + PREFIX + path, json=body) as r:
                assert r.status == 200, (path, r.status, await r.text())
    out = {}
    for namespace, full in (("catalog", CATALOG), ("schema", f"{CATALOG}.s000"), ("table", f"{CATALOG}.s000.t000000")):
        _, asset = await store.get_asset(ms.id, namespace, full)
        out[namespace] = asset
    return out


def _clone(template: Asset, metastore_id: str, parent_id: str, name: str, full_name: str, root: str) -> Asset:
    asset_id = str(uuid.uuid4())
    info = dict(template.info)
    path = None
    if template.storage_path is not None:
        path = join_url(root, "tables", asset_id)
        info["storage_location"] = path
    return Asset(id=asset_id, metastore_id=metastore_id, type=template.type, namespace=template.namespace,
                 parent_id=parent_id, name=name, full_name=full_name, storage_path=path, info=info, written_at=0)


async def _put_batch(store: Store, metastore_id: str, version: int, assets: list[Asset]) -> int:
    """One metastore write of many rows; returns the new version."""
    async with store.write(metastore_id, version) as tx:
        await tx.conn.executemany(
            f"INSERT INTO assets ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            [(uuid.UUID(a.id), uuid.UUID(a.metastore_id), a.type, a.namespace, uuid.UUID(a.parent_id), a.name,
              a.full_name, a.storage_path, a.info, tx.version) for a in assets])
        tx.changed.update(a.id for a in assets)      # the change-log row names every new row
        tx.parents.update(a.parent_id for a in assets)
        return tx.version


async def seed_metastore(store: Store, templates: dict[str, Asset], storage: str, workspace_id: int,
                         tables: int) -> Metastore:
    ms = await _admin_workspace(store, storage, workspace_id, f"loadtest-{workspace_id}-{uuid.uuid4().hex[:6]}")
    root = join_url(storage, ms.id)
    catalog = _clone(templates["catalog"], ms.id, ms.id, CATALOG, CATALOG, root)
    schemas = {}
    for name in [table_name(i)[0] for i in range(0, tables, 1000)] + [LOAD_SCHEMA]:
        schemas[name] = _clone(templates["schema"], ms.id, catalog.id, name, f"{CATALOG}.{name}", root)
    version = await _put_batch(store, ms.id, 0, [catalog, *schemas.values()])
    for start in range(0, tables, BATCH):
        batch = []
        for i in range(start, min(tables, start + BATCH)):
            schema, table = table_name(i)
            batch.append(_clone(templates["table"], ms.id, schemas[schema].id, table,
                                f"{CATALOG}.{schema}.{table}", root))
        version = await _put_batch(store, ms.id, version, batch)
    return Metastore(ms.id, ms.token, tables)


async def seed(store: Store, url: str, storage: str, sizes: list[int], *, first_workspace: int | None = None
               ) -> list[Metastore]:
    """Seed one metastore per size (through `url`'s server for the templates); returns them."""
    # Workspace ids of their own, so several seedings can share one database.
    first_workspace = first_workspace or random.randrange(10**9, 2 * 10**9, 10**6)
    templates = await _templates(store, url, storage, first_workspace)
    for name in PRINCIPALS:
        await store.create_principal(name, "user")
    seeded = [await seed_metastore(store, templates, storage, first_workspace + 1 + i, n) for i, n in enumerate(sizes)]
    async with aiohttp.ClientSession() as http:
        return [await _delta_table(http, url, ms) for ms in seeded]


async def _delta_table(http: aiohttp.ClientSession, url: str, ms: Metastore) -> Metastore:
    """The metastore's catalog-managed Delta table, created the Delta 4.1 way (staging table first)."""
    headers = {"Authorization": f"Bearer {ms.token}"}
    where = {"catalog_name": CATALOG, "schema_name": LOAD_SCHEMA}
    async with http.post(url + PREFIX + "/staging-tables", json={"name": DELTA_TABLE, **where}, headers=headers) as r:
        staging = await r.json()
        assert r.status == 200, (r.status, staging)
    async with http.post(url + PREFIX + "/tables", headers=headers, json={
            "name": DELTA_TABLE, **where, "table_type": "MANAGED", "data_source_format": "DELTA", "columns": COLUMNS,
            "storage_location": staging["staging_location"],
            "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": staging["id"]}}) as r:
        table = await r.json()
        assert r.status == 200, (r.status, table)
    return replace(ms, delta_table_id=table["table_id"], delta_table_uri=table["storage_location"])


def save_population(path: Path, url: str, metastores: list[Metastore]) -> None:
    path.write_text(json.dumps({"url": url, "metastores": [asdict(m) for m in metastores]}, indent=1))


def load_population(path: Path) -> tuple[str, list[Metastore]]:
    data = json.loads(Path(path).read_text())
    return data["url"], [Metastore(**m) for m in data["metastores"]]
