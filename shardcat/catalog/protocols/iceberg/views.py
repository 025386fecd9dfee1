"""Views in the Iceberg REST catalog: create, register, load and replace (a new view version).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from ....auth import Caller
from ....entities.asset import Asset
from ....entities.urls import join_url
from ....errors import CatalogError
from ....governance.authorize import authorizer
from ....iceberg import metadata as md
from ....iceberg.tables import is_iceberg_view
from ....iceberg.tables import props as properties_of
from ....entities.values import now_ms
from ....shards.shard import MetastoreState
from ....store.writes import WriteTx
from ...tree import assets
from .base import IcebergBase, Lookups
from .errors import IcebergError, taken_by, missing, require, require_data
from .readopt import dropped_view_at


class Views(IcebergBase):
    """The view operations."""

    async def create_view(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        request = md.view_request(body)
        schema_full, full = self.new_name(warehouse, raw, request.name)
        schema = await self._schema(caller, schema_full)
        authz = await authorizer(self.shard, caller)
        authz.require("table", "create", None, parent=schema)
        view_id = str(uuid.uuid4())
        if request.location:
            location = self._url(request.location)
            await self._check_external(caller, location, "location")
        else:
            location = await self._managed_location(caller, schema, view_id, "views")
        view = md.new_view_metadata(request, location)
        metadata_location = md.next_view_location(view, None)
        existing = await self.shard.lookup(caller.metastore(), "table", full, caller.min_version)
        if existing is not None:
            raise taken_by(authz, "View", full, existing)
        await asyncio.to_thread(md.write_view, view, metadata_location,
                                await self._io(caller, location, write=True))
        await self._insert(caller, full, view_id, self._view_info(view, metadata_location), None)
        return {"metadata-location": metadata_location, "metadata": md.metadata_json(view), "config": {}}

    def _view_info(self, view, metadata_location: str) -> dict:
        return {"table_type": "VIEW", "view_definition": md.view_sql(view),
                "columns": md.columns_of(self._view_schema(view)),
                "properties": {md.METADATA_LOCATION: metadata_location}}

    async def register_view(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        """register-view: a view from its metadata file, under register's rules for tables. The file is
        read only where a new external view could be and the caller may read by path (path_access.py);
        the view's location holds it and passes the rules for a view's location, since the view's later
        metadata files go there."""
        name, given = body.get("name"), body.get("metadata-location")
        if not isinstance(name, str) or not isinstance(given, str):
            raise IcebergError(400, "BadRequestException", "Fields 'name' and 'metadata-location' must be strings.")
        schema_full, full = self.new_name(warehouse, raw, name)
        metadata_location = self._url(given)
        schema = await self._schema(caller, schema_full)
        authz = await authorizer(self.shard, caller)
        authz.require("table", "create", None, parent=schema)
        existing = await self.shard.lookup(caller.metastore(), "table", full, caller.min_version)
        if existing is not None:
            raise taken_by(authz, "View", full, existing)
        views_root = await self._views_root(caller, schema)
        adopted = views_root and await dropped_view_at(self.shard, caller, metadata_location, views_root)
        if adopted:     # a dropped view's own managed folder, registered by who may undrop it
            return await self._readopt_view(caller, full, metadata_location, join_url(views_root, adopted.id), adopted)
        await self._check_external(caller, metadata_location, "metadata-location")
        view, location = await self._read_registered(caller, metadata_location, md.read_view, "view")
        await self._check_external(caller, location, "location")
        await self._insert(caller, full, str(uuid.uuid4()), self._view_info(view, metadata_location), None)
        return {"metadata-location": metadata_location, "metadata": md.metadata_json(view), "config": {}}

    async def _views_root(self, caller: Caller, schema: Asset) -> str | None:
        """Where the schema's managed views go (`<managed root>/views`), None where it has no managed storage."""
        state = await self.shard.state(caller.metastore(), caller.min_version, paths=False)    # its root alone
        try:
            return join_url(await assets.managed_root(Lookups(self.shard, caller), state, schema), "views")
        except CatalogError:
            return None

    async def _readopt_view(self, caller: Caller, full, metadata_location: str, location: str, dropped: Asset) -> dict:
        """register-view from a dropped view's managed folder (readopt.py): the view made again under its own id,
        from a metadata file that names that folder as its location."""
        io = {} if location.startswith("file:") else await self._io(caller, location, write=False)
        view = await asyncio.to_thread(md.read_view, metadata_location, io)
        if self._url(view.location) != location:
            raise IcebergError(400, "BadRequestException", f"The metadata file '{metadata_location}' lies outside "
                                                           f"the location of its view, '{view.location}'.")
        await self._insert(caller, full, dropped.id, self._view_info(view, metadata_location), None)
        return {"metadata-location": metadata_location, "metadata": md.metadata_json(view), "config": {}}

    @staticmethod
    def _view_schema(view):
        schema_id = next(v for v in view.versions if v.version_id == view.current_version_id).schema_id
        return next(s for s in view.schemas if s.schema_id == schema_id)

    async def load_view(self, caller: Caller, full_name: str) -> dict:
        asset = await self._table(caller, full_name, view=True)
        require_data(await authorizer(self.shard, caller), asset, write=False)    # SELECT on the view
        location = properties_of(asset)[md.METADATA_LOCATION]
        io = await self._io(caller, location.rsplit("/", 1)[0], write=False)     # the metadata folder
        view = await asyncio.to_thread(md.read_view, location, io)
        return {"metadata-location": location, "metadata": md.metadata_json(view), "config": {}}

    async def replace_view(self, caller: Caller, full_name: str, body: dict) -> dict:
        requirements, updates = body.get("requirements") or [], body.get("updates") or []
        if not isinstance(requirements, list) or not isinstance(updates, list):
            raise IcebergError(400, "BadRequestException", "'requirements' and 'updates' must be lists.")
        asset = await self._table(caller, full_name, view=True)
        authz = await authorizer(self.shard, caller)
        require(authz, "update", asset)                              # the view's owner or MANAGE

        async def prepare(current: Asset):
            base_location = properties_of(current)[md.METADATA_LOCATION]
            io = await self._io(caller, base_location.rsplit("/", 1)[0], write=True)    # the metadata folder
            base = await asyncio.to_thread(md.read_view, base_location, io)
            view = md.updated_view(base, requirements, updates)
            if view.location != base.location:      # set-location: checked as creating the view there is
                url = self._url(view.location)
                if url != base.location:
                    await self._check_external(caller, url, "location")
                view = view.model_copy(update={"location": url})
                io = await self._io(caller, url, write=True)
            await self._with_schema(authz, current, self._view_schema(view))     # refused: no file
            location = md.next_view_location(view, base_location)
            await asyncio.to_thread(md.write_view, view, location, io)
            return base_location, view, location

        prepared = await prepare(asset)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            nonlocal prepared
            current = await tx.get_by_id(asset.id)
            if not is_iceberg_view(current) or current.full_name != full_name:
                raise missing("View", full_name, " (dropped or renamed while replacing it)")
            require(authz, "update", current)
            if properties_of(current)[md.METADATA_LOCATION] != prepared[0]:
                prepared = await prepare(current)                   # redone on the newer view, under the write
            base_location, view, location = prepared
            governed = await self._with_schema(authz, current, self._view_schema(view))
            info = {**governed.info, "view_definition": md.view_sql(view),
                    "properties": {**properties_of(current), md.METADATA_LOCATION: location,
                                   md.PREVIOUS_METADATA_LOCATION: base_location},
                    "updated_at": now, "updated_by": caller.name}
            await tx.put(dataclasses.replace(current, info=info))
            return {"metadata-location": location, "metadata": md.metadata_json(view), "config": {}}

        return await self.shard.write(caller.metastore(), write)
