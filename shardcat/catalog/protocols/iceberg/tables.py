"""Tables in the Iceberg REST catalog: list, exists, load (with vended credentials), credentials, metrics, create
(and stage-create), register, drop and rename.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import uuid

from ....auth import Caller
from ....entities.urls import is_within
from ....entities.values import now_ms
from ....entities.asset import Asset
from ....errors import CatalogError
from ....governance.authorize import authorizer
from ....iceberg import metadata as md
from ....iceberg.confined import own_location
from ....iceberg.tables import is_iceberg_table, is_iceberg_view
from ....iceberg.tables import props as properties_of
from ....shards.session import current
from ....shards.shard import MetastoreState
from ....store import history
from ....store.writes import WriteTx
from ...features.uniform import is_uniform, served
from .base import IcebergBase
from .base import local_file_path
from .errors import IcebergError, kind_of, taken_by, missing, require, require_data
from .names import Name, schema_of
from .readopt import dropped_table_at


def etag(metadata_location: str, snapshots: str, signed: bool) -> str:
    """A load's ETag: its metadata file, and the representation asked for (all or refs; signing or keys)."""
    digest = hashlib.sha256(f"{metadata_location}|{snapshots}|{signed}".encode()).hexdigest()[:32]
    return f'"{digest}"'


def _listed_foreign(asset: Asset) -> bool:
    return bool((asset.info.get("foreign") or {}).get("partial"))


class Tables(IcebergBase):
    """The table operations but commits."""

    async def list_tables(self, caller: Caller, warehouse: str | None, raw: str, page_size, page_token,
                          views: bool = False) -> dict:
        schema = self.schema_name(warehouse, self.namespace(warehouse, raw))
        try:
            page, token = await self.catalogs.list_page(caller, "table", schema, page_size, page_token)
        except CatalogError as e:
            if e.code == "NOT_FOUND":
                raise missing("Namespace", schema) from None
            raise
        # A foreign Iceberg REST catalog's listing names its tables only (tree/foreign.py: `partial`
        # until each is read): Iceberg tables all the same.
        wanted = is_iceberg_view if views else (lambda a: is_iceberg_table(a) or is_uniform(a) or _listed_foreign(a))
        namespace = self.shown(warehouse, schema)
        out = {"identifiers": [{"namespace": namespace, "name": a.name} for a in page if wanted(a)]}
        if token:
            out["next-page-token"] = token
        return out

    async def exists(self, caller: Caller, full_name: str, view: bool = False) -> None:
        asset = await self._table(caller, full_name, view, read=True)
        require(await authorizer(self.shard, caller), "read", asset)

    async def _loadable(self, caller: Caller, full_name: str):
        asset = await self._table(caller, full_name, read=True)
        authz = await authorizer(self.shard, caller)
        require_data(authz, asset, write=False)                 # SELECT (and USE CATALOG / USE SCHEMA)
        return await served(self.shard, caller, asset), authz   # a UniForm table: its Iceberg metadata

    async def load_table(self, caller: Caller, full_name: str, snapshots: str = "all",
                         signer: tuple[str, str] | None = None) -> dict:
        """The table's metadata (with `snapshots` "refs": only the snapshots its branches and tags name) and
        the caller's access to its files: vended credentials, or with `signer` (signing.py) remote signing."""
        asset, authz = await self._loadable(caller, full_name)
        location = properties_of(asset)[md.METADATA_LOCATION]
        if signer is not None:
            credentials, config = [], await self.signing_config(caller, asset, signer)
            io = await self._io(caller, asset.storage_path, write=False)
        else:
            credentials = await self._credentials(caller, asset, authz)
            config = dict(credentials[0]["config"]) if credentials else {}
            io = await self._own_io(credentials[0]["config"]) if credentials else {}
        read = await asyncio.to_thread(md.read_metadata, location, io)
        own_location(read, asset.storage_path)          # a file a writer overwrote in storage is not answered
        metadata = md.metadata_json(read)
        if snapshots == "refs":
            named = {ref["snapshot-id"] for ref in (metadata.get("refs") or {}).values()}
            metadata["snapshots"] = [s for s in metadata.get("snapshots") or [] if s["snapshot-id"] in named]
        return {"metadata-location": location, "metadata": metadata, "config": config,
                "storage-credentials": credentials}

    async def load_table_tagged(self, caller: Caller, full_name: str, snapshots: str, delegation: frozenset[str],
                                signer: tuple[str, str], if_none_match: str | None) -> tuple[str, dict | None]:
        """(ETag, the load's answer), the answer None when `if_none_match` names that ETag (304): decided on
        the metadata pointer, after the load's own checks, without reading the metadata file. `signer`
        (the signing URI and endpoint) is answered when the client's `delegation` asks for remote signing."""
        asset, _ = await self._loadable(caller, full_name)
        signer = signer if await self.signs_for(caller, asset, delegation) else None
        tag = etag(properties_of(asset)[md.METADATA_LOCATION], snapshots, signer is not None)
        if if_none_match is not None and tag in [t.strip() for t in if_none_match.split(",")]:
            return tag, None
        answer = await self.load_table(caller, full_name, snapshots, signer)
        return etag(answer["metadata-location"], snapshots, signer is not None), answer

    async def unregister(self, caller: Caller, full_name: str) -> dict:
        """unregisterTable: the table leaves the catalog (drop's rules: its owner or MANAGE), its files stay;
        the answer is its last metadata. A commit that lands between the read and the drop is answered
        without (the drop's write does not recheck the pointer)."""
        asset = await self._table(caller, full_name)
        authz = await authorizer(self.shard, caller)
        require(authz, "delete", asset)
        location = properties_of(asset)[md.METADATA_LOCATION]
        io = await self._io(caller, asset.storage_path, write=False)
        metadata = await asyncio.to_thread(md.read_metadata, location, io)
        await self.catalogs.delete(caller, "table", full_name)
        return {"metadata-location": location, "metadata": md.metadata_json(metadata)}

    async def load_credentials(self, caller: Caller, full_name: str) -> dict:
        asset = await self._table(caller, full_name, read=True)
        authz = await authorizer(self.shard, caller)
        require_data(authz, asset, write=False)
        return {"storage-credentials": await self._credentials(caller, asset, authz)}

    async def report_metrics(self, caller: Caller, full_name: str) -> None:
        asset = await self._table(caller, full_name, read=True)          # acknowledged, not kept
        require_data(await authorizer(self.shard, caller), asset, write=False)

    def _table_info(self, metadata, metadata_location: str, location: str | None, managed: bool) -> dict:
        info = {"table_type": "MANAGED" if managed else "EXTERNAL", "data_source_format": "ICEBERG",
                "columns": md.columns_of(metadata.schema()),
                "properties": {md.METADATA_LOCATION: metadata_location}}
        if location is not None:
            info["storage_location"] = location
        return info

    async def create_table(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        request = md.create_request(body)
        schema_full, full = self.new_name(warehouse, raw, request.name)
        name = full.rsplit(".", 1)[1]
        schema = await self._schema(caller, schema_full)
        authz = await authorizer(self.shard, caller)
        authz.require("table", "create", None, parent=schema)
        if request.stage_create:
            return await self._stage(caller, schema, name, request)
        table_id = str(uuid.uuid4())
        managed = not request.location
        location = await self._managed_location(caller, schema, table_id) if managed else \
            self._url(request.location)
        if not managed:
            await self._check_external(caller, location, "location")
        metadata = md.new_metadata(request, location)
        metadata_location = md.next_location(metadata, None)
        existing = await self.shard.lookup(caller.metastore(), "table", full, caller.min_version)
        if existing is not None:
            raise taken_by(authz, "Table", full, existing)
        io = await self._io(caller, location, write=True)
        await asyncio.to_thread(md.write_metadata, metadata, metadata_location, io)
        info = self._table_info(metadata, metadata_location, None if managed else location, managed)
        await self._insert(caller, full, table_id, info, location)
        return await self.load_table(caller, full)

    async def _stage(self, caller: Caller, schema: Asset, name: str, request) -> dict:
        """stage-create: metadata for a table a later commit (with assert-create) creates. A managed
        table's location is reserved as a Unity Catalog staging table, which that commit consumes."""
        if request.location:
            location = self._url(request.location)
            await self._check_external(caller, location, "location")
        else:
            full = f"{schema.full_name}.{name}"
            staging = await self.shard.lookup(caller.metastore(), "staging_table", full, caller.min_version)
            if staging is None:
                staging_info = await self.catalogs.create(caller, "staging_table", {
                    "name": name, "catalog_name": schema.full_name.split(".")[0],
                    "schema_name": schema.name})
                location = staging_info["storage_location"]
            else:
                location = staging.storage_path
        metadata = md.new_metadata(request, location)
        local = local_file_path(location)
        if local is not None:       # a local file system needs the folders object stores do not (DuckDB writes there)
            await asyncio.to_thread(os.makedirs, os.path.join(local, "metadata"), exist_ok=True)
        return {"metadata": md.metadata_json(metadata), "config": {}, "storage-credentials": []}

    async def register_table(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        request = md.register_request(body)
        schema_full, full = self.new_name(warehouse, raw, request.name)
        metadata_location = self._url(request.metadata_location)
        schema = await self._schema(caller, schema_full)
        authz = await authorizer(self.shard, caller)
        authz.require("table", "create", None, parent=schema)
        existing = await self.shard.lookup(caller.metastore(), "table", full, caller.min_version)
        adopted = await dropped_table_at(self.shard, caller, metadata_location) if existing is None else None
        if adopted is not None:     # a dropped table's own managed storage, registered by who may undrop it
            return await self._readopt(caller, schema, full, metadata_location, adopted)
        if existing is None:        # nothing is read where no new external table could be
            await self._check_external(caller, metadata_location, "metadata-location")
        elif not request.overwrite:
            raise taken_by(authz, "Table", full, existing)
        elif not is_iceberg_table(existing) or not is_within(metadata_location, existing.storage_path):
            raise IcebergError(409, "AlreadyExistsException", f"Table already exists: {full.spelled} (not an Iceberg "
                                                              f"table holding '{metadata_location}').")
        else:
            require_data(await authorizer(self.shard, caller), existing, write=True)    # MODIFY, to repoint it
        metadata, location = await self._read_registered(caller, metadata_location, md.read_metadata, "table")
        if existing is not None:
            if existing.storage_path != location:
                raise IcebergError(409, "AlreadyExistsException", f"Table already exists: {full.spelled} (not an "
                                                                  f"Iceberg table at '{location}': it cannot be "
                                                                  "overwritten).")
            await self._commit_all(caller, [(full, [], [])], preset={
                existing.id: (properties_of(existing)[md.METADATA_LOCATION], metadata, metadata_location)})
        else:
            info = self._table_info(metadata, metadata_location, location, managed=False)
            await self._insert(caller, full, str(uuid.uuid4()), info, location)
        return await self.load_table(caller, full)

    async def _readopt(self, caller: Caller, schema: Asset, full, metadata_location: str, dropped: Asset) -> dict:
        """register from a dropped table's managed storage (readopt.py): the table made again MANAGED under its
        own id, so at its own location, which must be where this schema's managed tables go."""
        if await self._managed_location(caller, schema, dropped.id) != dropped.storage_path:
            raise IcebergError(400, "BadRequestException", f"The metadata file '{metadata_location}' lies in the "
                                                           "managed storage of another schema's tables.")
        io = {} if dropped.storage_path.startswith("file:") else await self._io(caller, dropped.storage_path, write=False)
        metadata = await asyncio.to_thread(md.read_metadata, metadata_location, io)
        if self._url(metadata.location) != dropped.storage_path:
            raise IcebergError(400, "BadRequestException", f"The metadata file '{metadata_location}' lies outside "
                                                           f"the location of its table, '{metadata.location}'.")
        info = self._table_info(metadata, metadata_location, None, managed=True)
        await self._insert(caller, full, dropped.id, info, dropped.storage_path)
        return await self.load_table(caller, full)

    async def drop(self, caller: Caller, full_name: str, purge: bool, view: bool = False) -> None:
        asset = await self._table(caller, full_name, view)
        await self.catalogs.delete(caller, "table", full_name)
        if purge and asset.storage_path:
            # A MANAGED table's data and metadata go too (local storage; cloud and EXTERNAL storage are
            # kept), once it can no longer be undropped: when its history is purged (catalog/features/versions.py).
            await history.request_storage_purge(self.shard.store, asset.metastore_id, asset.id,
                                                current().written_version)

    async def rename(self, caller: Caller, warehouse: str | None, body: dict, view: bool = False) -> None:
        source, destination = body.get("source"), body.get("destination")
        if not isinstance(source, dict) or not isinstance(destination, dict) or \
                not isinstance(source.get("name"), str) or not isinstance(destination.get("name"), str):
            raise IcebergError(400, "BadRequestException", "Fields 'source' and 'destination' must be identifiers "
                                                           "{namespace, name}.")
        src = self.table_name(warehouse, source.get("namespace") or [], source["name"])
        dst = self.table_name(warehouse, destination.get("namespace") or [], destination["name"])
        await self._table(caller, src, view)
        if schema_of(src) != schema_of(dst):
            return await self._move(caller, src, dst, view)
        try:
            await self.catalogs.update(caller, "table", src, {"new_name": dst.rsplit(".", 1)[1]})
        except CatalogError as e:
            if e.code != "ALREADY_EXISTS":
                raise
            # the destination's kind, said only to who may see it
            holder = await self.shard.lookup(caller.metastore(), "table", dst, caller.min_version)
            visible = holder is not None and (await authorizer(self.shard, caller)).sees(holder.type, holder)
            kind = kind_of(holder) if visible else ("View" if view else "Table")
            raise IcebergError(409, "AlreadyExistsException", f"Cannot rename {src.spelled} to {dst.spelled}. "
                                                              f"{kind} already exists") from None

    async def _move(self, caller: Caller, src: Name, dst: Name, view: bool) -> None:
        """A rename into another namespace, which the spec allows: into another schema of the same catalog, as
        renaming and creating there are governed (the table's owner or MANAGE, CREATE TABLE and USE SCHEMA on the
        destination). Where a Unity catalog cannot follow, the spec's 406: into another catalog (grants,
        storage and policies are a catalog's), or a managed table whose files lie in managed storage the
        destination's tables do not use (the source schema's own storage root)."""
        if src.split(".")[0] != dst.split(".")[0]:
            raise IcebergError(406, "UnsupportedOperationException", f"Cannot rename {src.spelled} to {dst.spelled}: "
                                                                     "a table or view moves within its catalog only.")
        asset = await self._table(caller, src, view)
        target = await self._schema(caller, schema_of(dst))
        authz = await authorizer(self.shard, caller)
        require(authz, "update", asset)
        authz.require("table", "create", None, parent=target)
        # a managed table stays where the destination's managed tables go: its own id's place there
        if asset.info.get("table_type") == "MANAGED" and \
                await self._managed_location(caller, target, asset.id) != asset.storage_path:
            raise IcebergError(406, "UnsupportedOperationException",
                               f"Cannot rename {src.spelled} to {dst.spelled}: the table's files lie in managed "
                               f"storage that the tables of {schema_of(dst).spelled} do not use.")
        now, name = now_ms(), dst.rsplit(".", 1)[1]

        async def write(tx: WriteTx, state: MetastoreState):
            current = await tx.get_by_id(asset.id)
            if current is None or current.full_name != src:
                raise missing("View" if view else "Table", src, " (dropped or renamed meanwhile)")
            require(authz, "update", current)
            schema = await tx.get("schema", schema_of(dst))
            if schema is None or schema.id != target.id:
                raise missing("Namespace", schema_of(dst))
            authz.require("table", "create", None, parent=schema)
            holder = await tx.get("table", dst)
            if holder is not None:
                kind = kind_of(holder) if authz.sees(holder.type, holder) else ("View" if view else "Table")
                raise IcebergError(409, "AlreadyExistsException", f"Cannot rename {src.spelled} to {dst.spelled}. "
                                                                  f"{kind} already exists")
            info = {**current.info, "updated_at": now, "updated_by": caller.name}
            await tx.put(dataclasses.replace(current, parent_id=schema.id, name=name, full_name=str(dst), info=info))

        await self.shard.write(caller.metastore(), write)
