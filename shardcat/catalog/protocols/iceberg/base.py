"""What every operation of the Iceberg REST catalog shares: namespace and table names, finding a namespace or
table the caller may see, storage (FileIO properties, locations and their rules), and inserting a table or view row.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid

from ....auth import Caller
from ....entities.urls import InvalidUrl, is_within, join_url, local_path, normalize_url
from ....entities.asset import Asset
from ....entities.names import check_name
from ....errors import CatalogError
from ....governance import audit
from ....governance.authorize import authorizer, data_decision
from ....governance import vending
from ....governance.vending import vend
from ....iceberg import metadata as md
from ....iceberg.tables import POINTER_KEYS, is_iceberg_table, is_iceberg_view
from ....iceberg.tables import props as properties_of
from ...features.uniform import is_uniform
from ....entities.values import now_ms
from ....shards.locations import require_external_location
from ....shards.shard import MetastoreState, Shard
from ....store.writes import WriteTx
from ....web import store_endpoints
from ...tree import assets
from ...tree.path_access import authorize_path, owner_label
from ...tree.service import CatalogService
from .errors import IcebergError, taken_by, missing, taken
from .names import Name, SEPARATOR, schema_of, spelled


class Lookups:
    """`tx.get` over the shard's cached lookups, so the managed-root rule can run before a write."""

    def __init__(self, shard: Shard, caller: Caller):
        self.shard, self.caller = shard, caller

    async def get(self, namespace: str, full_name: str):
        return await self.shard.lookup(self.caller.metastore(), namespace, full_name, self.caller.min_version)


def local_file_path(url: str) -> str | None:
    """A file:// URL's local path (decoded the one way, cache/urls.py); None for other storage."""
    return local_path(url) if url.startswith("file:") else None


class IcebergBase:
    """The shard, its catalog service, and the helpers every group of operations uses."""

    def __init__(self, shard: Shard):
        self.shard = shard
        self.catalogs = CatalogService(shard)

    @staticmethod
    def namespace(warehouse: str | None, raw: str | list) -> list[str]:
        """A namespace's levels, with the warehouse catalog in front (a one-level namespace under
        a warehouse is a schema of it)."""
        if not isinstance(raw, (list, str)):        # a JSON object or number sent as a namespace
            raise IcebergError(400, "BadRequestException", f"Invalid namespace {raw!r:.80}: it must be a list of "
                                                           "strings.")
        parts = raw if isinstance(raw, list) else raw.split(SEPARATOR)
        if not parts or not all(isinstance(p, str) and p for p in parts):
            raise IcebergError(400, "BadRequestException", f"Invalid namespace {raw!r:.80}.")
        return [warehouse, *parts] if warehouse is not None else list(parts)

    @staticmethod
    def namespace_name(warehouse: str | None, levels: list[str]) -> Name:
        """The full name of a namespace's catalog or schema, spelled as the client named the namespace."""
        return Name(".".join(levels).lower(), ".".join(levels[1:] if warehouse is not None else levels))

    def schema_name(self, warehouse: str | None, levels: list[str]) -> Name:
        name = self.namespace_name(warehouse, levels)
        if len(levels) != 2:
            raise IcebergError(404, "NoSuchNamespaceException", f"Namespace {name.spelled} is not a schema: tables "
                                                                "and views live in a schema (a one-level namespace "
                                                                "under a warehouse).")
        return name

    def table_name(self, warehouse: str | None, namespace, name: str) -> Name:
        schema = self.schema_name(warehouse, self.namespace(warehouse, namespace))
        return Name(f"{schema}.{name.lower()}", f"{schema.spelled}.{name}")

    def new_name(self, warehouse: str | None, namespace, name) -> tuple[Name, Name]:
        """(schema, table) for a table or view to create: its name checked as every table name is."""
        schema = self.schema_name(warehouse, self.namespace(warehouse, namespace))
        return schema, Name(f"{schema}.{check_name(name, 'table')}", f"{schema.spelled}.{name}")

    @staticmethod
    def shown(warehouse: str | None, full_name: str) -> list[str]:
        """A schema's (or catalog's) namespace as the client names it."""
        parts = full_name.split(".")
        return parts[1:] if warehouse is not None else parts

    async def _container(self, caller: Caller, name: str) -> Asset:
        """The catalog or schema a namespace is (`name`: its full name); a missing or invisible one is
        NoSuchNamespaceException."""
        levels = name.split(".")
        if len(levels) > 2:
            raise missing("Namespace", name, " (namespaces have at most two levels, catalog and schema)")
        try:
            for level in levels:
                check_name(level, "namespace")
        except CatalogError:            # no catalog or schema can have that name: it does not exist (404, not 400)
            raise missing("Namespace", name) from None
        try:
            return await self.catalogs.find(caller, "catalog" if len(levels) == 1 else "schema", name)
        except CatalogError as e:
            if e.code == "NOT_FOUND":
                raise missing("Namespace", name) from None
            raise

    async def _table(self, caller: Caller, full_name: str, view: bool = False, read: bool = False) -> Asset:
        """The Iceberg table (view). One the caller may not see answers exactly as a missing one, and so
        does one in a missing namespace (as in Iceberg's reference catalog); only who may see a table
        hears it is not an Iceberg one. A UniForm Delta table (features/uniform.py) is one to `read` only.
        A foreign catalog's table is fetched first if it is not fresh (tree/foreign.py), as for every API."""
        await self.catalogs.federation.before_read(caller, "table", full_name, False)
        asset = await self.shard.lookup(caller.metastore(), "table", full_name, caller.min_version)
        if asset is not None and not (await authorizer(self.shard, caller)).sees(asset.type, asset):
            asset = None
        if not view and is_uniform(asset):
            if not read:
                raise IcebergError(403, "ForbiddenException", f"Table {spelled(full_name)} is a Delta table with "
                                                              "UniForm: read-only through the Iceberg REST catalog "
                                                              "(write it as Delta).")
            audit.annotate("TABLE", asset.full_name, asset.id)
            return asset
        if not (is_iceberg_view(asset) if view else is_iceberg_table(asset)):
            kind = "View" if view else "Table"
            raise missing(kind, full_name, "" if asset is None else f" (it is not an Iceberg {kind.lower()})")
        audit.annotate("TABLE", asset.full_name, asset.id)
        return asset

    async def _io(self, caller: Caller, url: str, *, write: bool, own: bool = True) -> dict:
        """FileIO properties for the catalog's own metadata reads and writes at `url` (authorized by the
        caller): the same vended, down-scoped credentials an engine gets; none for file://. For the
        catalog's own calls (`own`) an s3_compatible store's endpoint must be public or listed, and is
        given as the address just vetted (web/store_endpoints.py); engines get it as named."""
        if url.startswith("file:"):
            return {}
        config = md.storage_properties(await vend(self.shard, caller, url, write=write),
                                       os.environ.get("SHARDCAT_S3_ENDPOINT"), vending.region())
        return await self._own_io(config) if own else config

    @staticmethod
    async def _own_io(config: dict) -> dict:
        """An engine's FileIO properties made the catalog's own: an S3 endpoint vetted now and pinned."""
        if not config.get("s3.endpoint"):
            return config
        endpoint = await asyncio.to_thread(store_endpoints.connect_url, config["s3.endpoint"],
                                           path_style=config.get("s3.force-virtual-addressing") != "true")
        return {**config, "s3.endpoint": endpoint}

    async def _read_registered(self, caller: Caller, metadata_location: str, read, kind: str):
        """(metadata, its location) of a table's or view's metadata file to register: read only where
        the caller may read by path (path_access.py), so what no one may read is refused before it is
        opened; and the file must lie in the location it names (it registers its own metadata only)."""
        await self.shard.asking_paths(         # a cold owner answers from the paths it loads (path_waits.py)
            caller.metastore(), caller.min_version,
            lambda state: authorize_path(self.shard, caller, state, metadata_location, write=False))
        io = await self._io(caller, metadata_location.rsplit("/", 1)[0], write=False)    # its folder
        metadata = await asyncio.to_thread(read, metadata_location, io)
        location = self._url(metadata.location)
        if not is_within(metadata_location, location):
            raise IcebergError(400, "BadRequestException", f"The metadata file '{metadata_location}' lies outside "
                                                           f"the location of its {kind}, '{location}'.")
        # Nor may its snapshots read another table's manifests (the catalog plans them with its own rights).
        named = [s.manifest_list for s in getattr(metadata, "snapshots", None) or []] + \
            [f.statistics_path for f in [*(getattr(metadata, "statistics", None) or []),
                                         *(getattr(metadata, "partition_statistics", None) or [])]]
        for url in named:
            try:
                inside = is_within(self._url(url), location)
            except IcebergError:
                inside = False
            if not inside:
                raise IcebergError(400, "BadRequestException", f"The metadata file '{metadata_location}' names a "
                                                               f"manifest list or statistics file outside the "
                                                               f"location of its {kind}.")
        return metadata, location

    async def _credentials(self, caller: Caller, asset: Asset, authz) -> list[dict]:
        """The table's vended storage credentials as Iceberg storage-credentials (none for file://):
        read-write for a caller who may MODIFY the table, else read-only."""
        write = data_decision(authz, asset, write=True).allowed
        config = await self._io(caller, asset.storage_path, write=write, own=False)
        return [{"prefix": asset.storage_path, "config": config}] if config else []

    async def _schema(self, caller: Caller, schema_full: str) -> Asset:
        return await self._container(caller, schema_full)

    async def _managed_location(self, caller: Caller, schema: Asset, table_id: str, kind: str = "tables") -> str:
        state = await self.shard.state(caller.metastore(), caller.min_version, paths=False)    # its root alone
        root = await assets.managed_root(Lookups(self.shard, caller), state, schema)
        return join_url(root, kind, table_id)

    def _row(self, caller: Caller, schema: Asset, name: str, table_id: str, info: dict, now: int,
             state: MetastoreState) -> Asset:
        info = {**info, "owner": caller.name, "created_at": now, "created_by": caller.name,
                "updated_at": now, "updated_by": caller.name}
        return Asset(id=table_id, metastore_id=state.id, type="table", namespace="table", parent_id=schema.id,
                     name=name, full_name=f"{schema.full_name}.{name}", storage_path=None, info=info)

    async def _insert(self, caller: Caller, full: str, table_id: str, info: dict, expect_path: str | None) -> Asset:
        """Create the row `full` (a table's or view's Name) through the table rules (managed location, one
        asset per path, external locations) in one metastore write; `expect_path` is where the metadata
        file was written."""
        authz = await authorizer(self.shard, caller)
        now = now_ms()
        schema_full, name = schema_of(full), full.rsplit(".", 1)[1]
        kind = "View" if info.get("table_type") == "VIEW" else "Table"

        async def write(tx: WriteTx, state: MetastoreState):
            schema = await tx.get("schema", schema_full)
            if schema is None:
                raise missing("Namespace", schema_full)
            authz.require("table", "create", None, parent=schema)
            existing = await tx.get("table", full)
            if existing is not None:
                raise taken_by(authz, kind, full, existing)
            # The table rules see the row without its metadata pointer (they refuse one: see below).
            props = info.get("properties") or {}
            bare = {**info, "properties": {k: v for k, v in props.items() if k not in POINTER_KEYS}}
            row = self._row(caller, schema, name, table_id, bare, now, state)
            asset = await self.catalogs.tables.on_create(tx, state, row, schema, {})     # the table rules (tables.py)
            pointer = {k: v for k, v in props.items() if k in POINTER_KEYS}
            asset = dataclasses.replace(asset, info={**asset.info, "properties": {**properties_of(asset), **pointer}})
            if expect_path is not None and asset.storage_path != expect_path:
                raise CatalogError("RESOURCE_CONFLICT", f"The schema's managed storage moved while creating '{full}'; "
                                                        "try again.")
            authz.require_storage(state, asset)
            try:
                return await tx.put(asset)
            except KeyError:
                raise taken(kind, full) from None

        return await self.shard.write(caller.metastore(), write)

    @staticmethod
    def _url(location: str) -> str:
        try:
            return normalize_url(location)
        except InvalidUrl as e:
            raise IcebergError(400, "BadRequestException", f"Invalid location: {e}") from None

    async def _check_external(self, caller: Caller, url: str, what: str) -> None:
        """Before the catalog writes or reads a file at `url` for a new EXTERNAL table (or a view's own
        location): the rules its creation will check again in the write. One asset per path (no
        other asset's storage at, above or below it, managed roots included), inside an external
        location when the metastore has any, and CREATE EXTERNAL TABLE on that location."""
        authz = await authorizer(self.shard, caller)
        probe_id = str(uuid.uuid4())

        async def check(state: MetastoreState) -> None:
            hit = state.trie.first_overlap(url)
            if hit is not None:         # named only to who may see it
                raise IcebergError(400, "BadRequestException", f"The {what} '{url}' overlaps the storage of "
                                                               f"{await owner_label(self.shard, caller, hit[1])}.")
            require_external_location(state, url, what)
            probe = Asset(id=probe_id, metastore_id=state.id, type="table", namespace="table", parent_id=state.id,
                          name="", full_name="", storage_path=url, info={"table_type": "EXTERNAL"})
            authz.require_storage(state, probe)

        # A cold owner answers from the paths it loads, as the create's write will (path_waits.py).
        await self.shard.asking_paths(caller.metastore(), caller.min_version, check)
