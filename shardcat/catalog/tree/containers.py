"""Catalogs and schemas: the containers of the catalog tree, and their one rule (a storage root).

A catalog or schema may name a `storage_root`; its managed storage is then
`<root>/__unitystorage/<catalogs|schemas>/<id>`, which must not overlap any other asset's
storage (one asset per path), and the tables, volumes and models created inside it get their
storage under it (assets.py `managed_root`). A container is deleted with what it holds only
with force=true (crud.py).

Every new catalog comes with a schema `default`, as in Databricks (and as DuckDB's Unity Catalog
extension assumes when attached without DEFAULT_SCHEMA), owned by the catalog's owner and written in
the catalog's own transaction; a catalog of a share or a connection does not (its schemas are the
share's or the foreign system's), nor does the system catalog. A catalog whose only content is its
empty `default` schema is empty: it is deleted without force. No `information_schema` schema is made
in a catalog: the metastore's is `system.information_schema` (docs/api.md).
"""

from __future__ import annotations

import dataclasses
import uuid

from ...entities.asset import Asset
from ...entities.types import CATALOG, SCHEMA
from ...entities.urls import join_url
from ...shards.shard import Shard
from .assets import check_free, checked_storage_url
from .crud import TypeService
from .foreign import check_catalog_options
from ...entities.foreign import FOREIGN_CATALOG, is_foreign_catalog
from ...entities.names import check_name
from ...errors import invalid, not_found
from ...governance.system_catalog import is_reserved_catalog_name, is_system_caller

DEFAULT_SCHEMA = "default"
# A catalog whose schemas come from elsewhere (a share, a foreign system) gets no default schema.
_NOT_OWN_SCHEMAS = ("share_name", "provider_name", "connection_name")


class Containers(TypeService):
    """Catalogs (`Containers(shard, CATALOG)`) and schemas (`Containers(shard, SCHEMA)`)."""

    def __init__(self, shard: Shard, t=CATALOG):
        assert t in (CATALOG, SCHEMA)
        super().__init__(shard, t)

    async def on_create(self, tx, state, asset, parent, flags):
        if asset.type == "catalog" and is_reserved_catalog_name(asset.name) and \
                not is_system_caller(flags["authz"].caller):
            raise invalid(f"Catalog name '{asset.name}' is reserved for the system tables (docs/system-tables.md).")
        if asset.info.get("connection_name") is not None:
            return await self._foreign(tx, asset, flags["authz"])
        if "options" in asset.info:
            raise invalid("Field 'options' is for foreign catalogs (with a connection_name).")
        root = asset.info.get("storage_root")
        if root is None:
            return asset
        root = checked_storage_url(root, "storage_root")
        location = join_url(root, "__unitystorage", f"{asset.type}s", asset.id)
        check_free(state, location, "storage_root", inside_managed=True)
        info = {**asset.info, "storage_root": root, "storage_location": location}
        return dataclasses.replace(asset, info=info, storage_path=location)

    async def _foreign(self, tx, asset, authz):
        """A foreign catalog: its connection must exist and let the caller mount it (CREATE FOREIGN
        CATALOG on it, or owning it), and its options suit the connection's type (foreign.py)."""
        info = dict(asset.info)
        if asset.type != "catalog":
            raise invalid("Only a catalog names a connection.")
        for field in ("storage_root", "provider_name", "share_name"):
            if field in info:
                raise invalid(f"A foreign catalog has no '{field}': its tables live in the foreign system.")
        name = check_name(info["connection_name"], "connection")
        connection = await tx.get("connection", name)
        gone = not_found(f"Connection '{name}' does not exist.")
        if connection is None:
            raise gone
        authz.require_or_missing("connection", "write_data", connection, gone)
        options = check_catalog_options(connection.info.get("connection_type"), info.get("options") or {})
        info.update(catalog_type=FOREIGN_CATALOG, connection_name=connection.name, options=options)
        return dataclasses.replace(asset, info=info)

    async def on_rename(self, tx, state, old, new):
        if new.type == "catalog" and is_reserved_catalog_name(new.name):
            raise invalid(f"Catalog name '{new.name}' is reserved for the system tables (docs/system-tables.md).")
        await super().on_rename(tx, state, old, new)

    async def on_update(self, tx, state, old, new, fields, flags):
        if "options" in fields:
            if not is_foreign_catalog(old):
                raise invalid("Field 'options' is for foreign catalogs (with a connection_name).")
            connection = await tx.get("connection", old.info.get("connection_name") or "")
            kind = connection.info.get("connection_type") if connection is not None else None
            check_catalog_options(kind, fields["options"])
        return new

    async def after_create(self, tx, state, asset):
        if asset.type != "catalog" or any(asset.info.get(k) for k in _NOT_OWN_SCHEMAS) or \
                is_reserved_catalog_name(asset.name):
            return
        info = {"comment": "Default schema (created with the catalog)", "owner": asset.info["owner"],
                **{k: asset.info[k] for k in ("created_at", "created_by", "updated_at", "updated_by")}}
        schema = Asset(id=str(uuid.uuid4()), metastore_id=state.id, type=SCHEMA.name, namespace=SCHEMA.namespace,
                       parent_id=asset.id, name=DEFAULT_SCHEMA, full_name=f"{asset.full_name}.{DEFAULT_SCHEMA}",
                       storage_path=None, info=info)
        await tx.put(schema, new=True)

    def comes_with(self, asset, below):
        """A catalog's `default` schema, while nothing lies in it, goes with the catalog."""
        if super().comes_with(asset, below):
            return True
        return asset.type == "schema" and asset.name == DEFAULT_SCHEMA and \
            not any(a.parent_id == asset.id and a.type != "staging_table" for a in below)
