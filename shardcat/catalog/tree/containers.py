"""Catalogs and schemas: the containers of the catalog tree, and their one rule (a storage root).

A catalog or schema may name a `storage_root`; its managed storage is then
`<root>/__unitystorage/<catalogs|schemas>/<id>`, which must not overlap any other asset's
storage (one asset per path), and the tables, volumes and models created inside it get their
storage under it (assets.py `_managed_root`). A container is deleted with what it holds only
with force=true (crud.py).
"""

from __future__ import annotations

import dataclasses

from ...entities.types import CATALOG, SCHEMA
from ...entities.urls import join_url
from ...shards.shard import Shard
from .assets import _check_free, _storage_url
from .crud import TypeService
from ...errors import invalid
from ...governance.system_catalog import is_reserved_catalog_name, is_system_caller


class Containers(TypeService):
    """Catalogs (`Containers(shard, CATALOG)`) and schemas (`Containers(shard, SCHEMA)`)."""

    def __init__(self, shard: Shard, t=CATALOG):
        assert t in (CATALOG, SCHEMA)
        super().__init__(shard, t)

    async def on_create(self, tx, state, asset, parent, flags):
        if asset.type == "catalog" and is_reserved_catalog_name(asset.name) and \
                not is_system_caller(flags["authz"].caller):
            raise invalid(f"Catalog name '{asset.name}' is reserved for the system tables (docs/system-tables.md).")
        root = asset.info.get("storage_root")
        if root is None:
            return asset
        root = _storage_url(root, "storage_root")
        location = join_url(root, "__unitystorage", f"{asset.type}s", asset.id)
        _check_free(state, location, "storage_root", inside_managed=True)
        info = {**asset.info, "storage_root": root, "storage_location": location}
        return dataclasses.replace(asset, info=info, storage_path=location)
