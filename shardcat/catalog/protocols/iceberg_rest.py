"""The Iceberg REST catalog: Iceberg's REST OpenAPI over a metastore's catalogs, schemas and tables.

Served at `/api/2.1/unity-catalog/iceberg/v1/...` and `/api/2.1/unity-catalog/iceberg-rest/v1/...`.
The warehouse is a catalog's name: `GET /v1/config?warehouse=<catalog>` answers the prefix
`catalogs/<catalog>`, under which a one-level namespace is a schema of that catalog. Without a
warehouse the routes have no prefix and namespaces have two levels: catalog, then schema.

Iceberg tables are shardcat tables (`data_source_format` ICEBERG, MANAGED under the schema's or
catalog's managed storage, or EXTERNAL where `location` says), governed by the same grants and
the one-asset-per-path rule; Iceberg views are VIEW rows. A row's `metadata_location` property is
its current metadata file. A commit writes the new metadata file, then makes one metastore write
(`Shard.write`: serialized per metastore, version-conditioned) that moves the pointer if it still
is the one the commit was based on; if it moved meanwhile, the commit is redone on the newer
metadata inside that write, and refused (409 CommitFailedException) when its requirements no
longer hold. A multi-table transaction moves all its pointers in that one write, or none.
Metadata work is pyiceberg's (shardcat/iceberg/metadata.py). Errors answer in Iceberg's error model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid

from aiohttp import web

from ...auth import Caller
from ...entities.urls import InvalidUrl, is_within, join_url, local_path, normalize_url
from ...entities.asset import Asset
from ...entities.names import check_name
from ...errors import CatalogError
from ...governance import audit
from ...governance.authorize import authorizer, data_decision, denied
from ...governance import vending
from ...governance.vending import vend
from ...iceberg import metadata as md
from ...iceberg.tables import POINTER_KEYS, is_iceberg_table, is_iceberg_view
from ...iceberg.tables import props as _props
from ...entities.values import now_ms
from ...shards.locations import require_external_location
from ...shards.session import current
from ...shards.shard import MetastoreState, Shard
from ...store import history
from ...store.writes import WriteTx
from ...web.kit import json_body, ok, ShardServing, Handler
from ...web.iceberg_errors import iceberg_response, iceberg_type
from ...web.registry import ICEBERG_OPERATIONS
from ..tree import assets
from ..tree.path_access import authorize_path, owner_label
from ..tree.column_governance import keep_column_governance
from ..tree.service import CatalogService

SEPARATOR = "\x1f"             # Iceberg's namespace separator in paths (url-encoded %1F)
# What /v1/config lists: the operations of the endpoint registry (web/registry.py).
ENDPOINTS = [f"{method} /v1/{{prefix}}{path}" for method, path, _ in ICEBERG_OPERATIONS]


class IcebergError(Exception):
    """An error in Iceberg's error model: `{"error": {"message", "type", "code"}}`."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class Name(str):
    """A namespace's, table's or view's full name in the metastore (catalog.schema.name, lower case) that
    keeps the client's spelling: `spelled`, its namespace levels (the warehouse left out) and name as
    sent, dot-joined, as Iceberg's clients and catalogs name it in messages."""

    spelled: str

    def __new__(cls, full_name: str, spelled: str) -> "Name":
        name = super().__new__(cls, full_name)
        name.spelled = spelled
        return name


def spelled(name: str) -> str:
    """How the client named `name` (a Name); a plain full name as it is."""
    return getattr(name, "spelled", name)


def schema_of(name: str) -> Name:
    """The schema of a table's (view's) name, spelled as the client named its namespace."""
    return Name(name.rsplit(".", 1)[0], spelled(name).rsplit(".", 1)[0])


# The messages say what Iceberg's reference catalog says (its clients and compatibility kit match them).

def missing(kind: str, name: str, why: str = "") -> IcebergError:
    """A missing namespace, table or view: "Table does not exist: ns.tbl"."""
    return IcebergError(404, f"NoSuch{kind}Exception", f"{kind} does not exist: {spelled(name)}{why}")


def taken(kind: str, name: str, holder: str | None = None) -> IcebergError:
    """A name already taken: "Table already exists: ns.tbl", or by the other kind (`holder`), "View with
    same name already exists: ns.tbl"."""
    if holder is not None and holder != kind:
        return IcebergError(409, "AlreadyExistsException", f"{holder} with same name already exists: {spelled(name)}")
    return IcebergError(409, "AlreadyExistsException", f"{kind} already exists: {spelled(name)}")


def _kind(asset: Asset) -> str:
    return "View" if asset.info.get("table_type") == "VIEW" else "Table"


def _taken_by(authz, kind: str, name: str, existing: Asset) -> IcebergError:
    """Creating a `kind` over an existing table or view: its kind is named only to who may see it."""
    return taken(kind, name, _kind(existing) if authz.sees(existing.type, existing) else None)


def require_data(authz, asset: Asset, *, write: bool) -> None:
    """SELECT (MODIFY with `write`) on a table or view, with USE CATALOG and USE SCHEMA; a caller who may
    not even know the asset exists gets the answer a missing one gives (docs/security.md)."""
    decision = data_decision(authz, asset, write=write)
    if not decision.allowed:
        _refuse(authz, asset, decision.reason)


def require(authz, op: str, asset: Asset) -> None:
    """`op` ("read", "update") on a table or view; an asset the caller may not see answers as missing."""
    decision = authz.decide("table", op, asset)
    if not decision.allowed:
        _refuse(authz, asset, decision.reason)


def _refuse(authz, asset: Asset, reason: str):
    if not authz.sees(asset.type, asset):
        raise missing(_kind(asset), asset.full_name)
    raise denied(reason)


def _iceberg(e: CatalogError) -> IcebergError:
    if isinstance(e, md.InvalidViewVersion):        # the reference's precondition failure, which Java clients raise
        return IcebergError(e.status, "IllegalArgumentException", e.message)
    return IcebergError(e.status, iceberg_type(e.code, e.status), e.message)


class _Lookups:
    """`tx.get` over the shard's cached lookups, so the managed-root rule can run before a write."""

    def __init__(self, shard: Shard, caller: Caller):
        self.shard, self.caller = shard, caller

    async def get(self, namespace: str, full_name: str):
        return await self.shard.lookup(self.caller.metastore(), namespace, full_name, self.caller.min_version)


def _local_path(url: str) -> str | None:
    """A file:// URL's local path (decoded the one way, cache/urls.py); None for other storage."""
    return local_path(url) if url.startswith("file:") else None


class IcebergCatalog:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.catalogs = CatalogService(shard)

    # ---- names ------------------------------------------------------------------------------

    @staticmethod
    def namespace(warehouse: str | None, raw: str | list) -> list[str]:
        """A namespace's levels, with the warehouse catalog in front (a one-level namespace under
        a warehouse is a schema of it)."""
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

    # ---- config -----------------------------------------------------------------------------

    async def config(self, caller: Caller, warehouse: str | None) -> dict:
        overrides = {}
        if warehouse:
            try:
                catalog = await self.catalogs.find(caller, "catalog", check_name(warehouse, "catalog"))
            except CatalogError as e:
                if e.code != "NOT_FOUND":
                    raise
                raise IcebergError(404, "NoSuchWarehouseException",
                                   f"Warehouse '{warehouse}' is not a catalog of this metastore.") from None
            overrides["prefix"] = f"catalogs/{catalog.name}"
        return {"defaults": {}, "overrides": overrides, "endpoints": ENDPOINTS}

    # ---- namespaces ---------------------------------------------------------------------------

    async def _container(self, caller: Caller, name: str) -> Asset:
        """The catalog or schema a namespace is (`name`: its full name); a missing or invisible one is
        NoSuchNamespaceException."""
        levels = name.split(".")
        if len(levels) > 2:
            raise missing("Namespace", name, " (namespaces have at most two levels, catalog and schema)")
        try:
            return await self.catalogs.find(caller, "catalog" if len(levels) == 1 else "schema", name)
        except CatalogError as e:
            if e.code == "NOT_FOUND":
                raise missing("Namespace", name) from None
            raise

    async def list_namespaces(self, caller: Caller, warehouse: str | None, parent: str | None,
                              page_size, page_token) -> dict:
        levels = self.namespace(warehouse, parent) if parent else ([warehouse] if warehouse else [])
        if len(levels) >= 2:
            await self._container(caller, self.namespace_name(warehouse, levels))
            return {"namespaces": []}         # schemas hold no namespaces
        kind, under = ("schema", levels[0].lower()) if levels else ("catalog", None)
        if under is not None:
            await self._container(caller, self.namespace_name(warehouse, levels))
        page, token = await self.catalogs.list_page(caller, kind, under, page_size, page_token)
        out = {"namespaces": [self.shown(warehouse, a.full_name) for a in page]}
        if token:
            out["next-page-token"] = token
        return out

    async def create_namespace(self, caller: Caller, warehouse: str | None, body: dict) -> dict:
        levels = self.namespace(warehouse, body.get("namespace") or [])
        props = body.get("properties") or {}
        if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
            raise IcebergError(400, "BadRequestException", "Field 'properties' must be a map of strings.")
        if len(levels) > 2:
            raise IcebergError(400, "BadRequestException", "Namespaces have at most two levels: catalog and schema.")
        own = {k: v for k, v in props.items() if k not in ("comment", "location")}
        fields = {"name": levels[-1], "properties": own}
        if "comment" in props:
            fields["comment"] = props["comment"]
        if "location" in props:
            fields["storage_root"] = props["location"]
        kind = "catalog" if len(levels) == 1 else "schema"
        if kind == "schema":
            fields["catalog_name"] = levels[0]
        try:
            await self.catalogs.create(caller, kind, fields)
        except CatalogError as e:
            if e.code == "ALREADY_EXISTS":
                raise taken("Namespace", self.namespace_name(warehouse, levels)) from None
            raise
        return {"namespace": levels if warehouse is None else levels[1:], "properties": props}

    async def load_namespace(self, caller: Caller, warehouse: str | None, raw: str) -> dict:
        levels = self.namespace(warehouse, raw)
        asset = await self._container(caller, self.namespace_name(warehouse, levels))
        props = dict(_props(asset))
        if asset.info.get("comment") is not None:
            props["comment"] = asset.info["comment"]
        if asset.info.get("storage_root"):
            props["location"] = asset.info["storage_root"]
        return {"namespace": self.shown(warehouse, asset.full_name), "properties": props}

    async def drop_namespace(self, caller: Caller, warehouse: str | None, raw: str) -> None:
        levels = self.namespace(warehouse, raw)
        asset = await self._container(caller, self.namespace_name(warehouse, levels))
        try:
            await self.catalogs.delete(caller, asset.type, asset.full_name)
        except CatalogError as e:
            if e.code == "FAILED_PRECONDITION":
                raise IcebergError(409, "NamespaceNotEmptyException", e.message) from None
            raise

    async def update_properties(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        levels = self.namespace(warehouse, raw)
        removals, updates = body.get("removals") or [], body.get("updates") or {}
        if not isinstance(removals, list) or not isinstance(updates, dict) or \
                not all(isinstance(v, str) for v in [*removals, *updates.values()]):
            raise IcebergError(400, "BadRequestException", "'removals' must be a list and 'updates' a map of strings.")
        both = set(removals) & set(updates)
        if both:
            raise IcebergError(422, "UnprocessableEntityException",
                               f"Properties {sorted(both)} are both removed and updated.")
        asset = await self._container(caller, self.namespace_name(warehouse, levels))
        props = dict(_props(asset))
        absent = [k for k in removals if k not in props]
        for k in removals:
            props.pop(k, None)
        props.update(updates)
        await self.catalogs.update(caller, asset.type, asset.full_name, {"properties": props})
        return {"updated": sorted(updates), "removed": sorted(set(removals) - set(absent)), "missing": absent}

    # ---- tables: reads ------------------------------------------------------------------------

    async def _table(self, caller: Caller, full_name: str, view: bool = False) -> Asset:
        """The Iceberg table (view). One the caller may not see answers exactly as a missing one, and so
        does one in a missing namespace (as in Iceberg's reference catalog); only who may see a table
        hears it is not an Iceberg one."""
        asset = await self.shard.lookup(caller.metastore(), "table", full_name, caller.min_version)
        if asset is not None and not (await authorizer(self.shard, caller)).sees(asset.type, asset):
            asset = None
        if not (is_iceberg_view(asset) if view else is_iceberg_table(asset)):
            kind = "View" if view else "Table"
            raise missing(kind, full_name, "" if asset is None else f" (it is not an Iceberg {kind.lower()})")
        audit.annotate("TABLE", asset.full_name, asset.id)
        return asset

    async def list_tables(self, caller: Caller, warehouse: str | None, raw: str, page_size, page_token,
                          views: bool = False) -> dict:
        schema = self.schema_name(warehouse, self.namespace(warehouse, raw))
        try:
            page, token = await self.catalogs.list_page(caller, "table", schema, page_size, page_token)
        except CatalogError as e:
            if e.code == "NOT_FOUND":
                raise missing("Namespace", schema) from None
            raise
        wanted = is_iceberg_view if views else is_iceberg_table
        namespace = self.shown(warehouse, schema)
        out = {"identifiers": [{"namespace": namespace, "name": a.name} for a in page if wanted(a)]}
        if token:
            out["next-page-token"] = token
        return out

    async def exists(self, caller: Caller, full_name: str, view: bool = False) -> None:
        asset = await self._table(caller, full_name, view)
        require(await authorizer(self.shard, caller), "read", asset)

    async def _io(self, caller: Caller, url: str, *, write: bool) -> dict:
        """FileIO properties for the catalog's own metadata reads and writes at `url` (authorized by the
        caller): the same vended, down-scoped credentials an engine gets; none for file://."""
        if url.startswith("file:"):
            return {}
        return md.storage_properties(await vend(self.shard, caller, url, write=write),
                                     os.environ.get("SHARDCAT_S3_ENDPOINT"), vending.region())

    async def _read_registered(self, caller: Caller, metadata_location: str, read, kind: str):
        """(metadata, its location) of a table's or view's metadata file to register: read only where
        the caller may read by path (path_access.py), so what no one may read is refused before it is
        opened; and the file must lie in the location it names (it registers its own metadata only)."""
        state = await self.shard.state(caller.metastore(), caller.min_version)
        await authorize_path(self.shard, caller, state, metadata_location, write=False)
        io = await self._io(caller, metadata_location.rsplit("/", 1)[0], write=False)    # its folder
        metadata = await asyncio.to_thread(read, metadata_location, io)
        location = self._url(metadata.location)
        if not is_within(metadata_location, location):
            raise IcebergError(400, "BadRequestException", f"The metadata file '{metadata_location}' lies outside "
                                                           f"the location of its {kind}, '{location}'.")
        return metadata, location

    async def _credentials(self, caller: Caller, asset: Asset, authz) -> list[dict]:
        """The table's vended storage credentials as Iceberg storage-credentials (none for file://):
        read-write for a caller who may MODIFY the table, else read-only."""
        write = data_decision(authz, asset, write=True).allowed
        config = await self._io(caller, asset.storage_path, write=write)
        return [{"prefix": asset.storage_path, "config": config}] if config else []

    async def load_table(self, caller: Caller, full_name: str) -> dict:
        asset = await self._table(caller, full_name)
        authz = await authorizer(self.shard, caller)
        require_data(authz, asset, write=False)                 # SELECT (and USE CATALOG / USE SCHEMA)
        location = _props(asset)[md.METADATA_LOCATION]
        credentials = await self._credentials(caller, asset, authz)
        io = credentials[0]["config"] if credentials else {}
        metadata = await asyncio.to_thread(md.read_metadata, location, io)
        return {"metadata-location": location, "metadata": md.metadata_json(metadata),
                "config": dict(credentials[0]["config"]) if credentials else {},
                "storage-credentials": credentials}

    async def load_credentials(self, caller: Caller, full_name: str) -> dict:
        asset = await self._table(caller, full_name)
        authz = await authorizer(self.shard, caller)
        require_data(authz, asset, write=False)
        return {"storage-credentials": await self._credentials(caller, asset, authz)}

    async def report_metrics(self, caller: Caller, full_name: str) -> None:
        asset = await self._table(caller, full_name)          # acknowledged, not kept
        require_data(await authorizer(self.shard, caller), asset, write=False)

    # ---- tables: creation -----------------------------------------------------------------------

    async def _schema(self, caller: Caller, schema_full: str) -> Asset:
        return await self._container(caller, schema_full)

    async def _managed_location(self, caller: Caller, schema: Asset, table_id: str, kind: str = "tables") -> str:
        state = await self.shard.state(caller.metastore(), caller.min_version)
        root = await assets._managed_root(_Lookups(self.shard, caller), state, schema)
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
                raise _taken_by(authz, kind, full, existing)
            # The table rules see the row without its metadata pointer (they refuse one: see below).
            props = info.get("properties") or {}
            bare = {**info, "properties": {k: v for k, v in props.items() if k not in POINTER_KEYS}}
            row = self._row(caller, schema, name, table_id, bare, now, state)
            asset = await self.catalogs.tables.on_create(tx, state, row, schema, {})     # the table rules (tables.py)
            pointer = {k: v for k, v in props.items() if k in POINTER_KEYS}
            asset = dataclasses.replace(asset, info={**asset.info, "properties": {**_props(asset), **pointer}})
            if expect_path is not None and asset.storage_path != expect_path:
                raise CatalogError("RESOURCE_CONFLICT", f"The schema's managed storage moved while creating '{full}'; "
                                                        "try again.")
            authz.require_storage(state, asset)
            try:
                return await tx.put(asset)
            except KeyError:
                raise taken(kind, full) from None

        return await self.shard.write(caller.metastore(), write)

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
            raise _taken_by(authz, "Table", full, existing)
        io = await self._io(caller, location, write=True)
        await asyncio.to_thread(md.write_metadata, metadata, metadata_location, io)
        info = self._table_info(metadata, metadata_location, None if managed else location, managed)
        await self._insert(caller, full, table_id, info, location)
        return await self.load_table(caller, full)

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
        state = await self.shard.state(caller.metastore(), caller.min_version)
        hit = state.trie.first_overlap(url)
        if hit is not None:         # named only to who may see it
            raise IcebergError(400, "BadRequestException", f"The {what} '{url}' overlaps the storage of "
                                                           f"{await owner_label(self.shard, caller, hit[1])}.")
        require_external_location(state, url, what)
        probe = Asset(id=str(uuid.uuid4()), metastore_id=state.id, type="table", namespace="table",
                      parent_id=state.id, name="", full_name="", storage_path=url, info={"table_type": "EXTERNAL"})
        (await authorizer(self.shard, caller)).require_storage(state, probe)

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
        local = _local_path(location)
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
        if existing is None:        # nothing is read where no new external table could be
            await self._check_external(caller, metadata_location, "metadata-location")
        elif not request.overwrite:
            raise _taken_by(authz, "Table", full, existing)
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
                existing.id: (_props(existing)[md.METADATA_LOCATION], metadata, metadata_location)})
        else:
            info = self._table_info(metadata, metadata_location, location, managed=False)
            await self._insert(caller, full, str(uuid.uuid4()), info, location)
        return await self.load_table(caller, full)

    # ---- tables: commits --------------------------------------------------------------------------

    async def commit(self, caller: Caller, full_name: str, body: dict) -> dict:
        requirements, updates = md.changes(body)
        if md.asserts_create(requirements):
            current = await self.shard.lookup(caller.metastore(), "table", full_name, caller.min_version)
            authz = await authorizer(self.shard, caller)
            # A table the caller may not see is created over as a missing one would be (and meets "already exists").
            if current is None or not authz.sees(current.type, current):
                return await self._commit_create(caller, full_name, requirements, updates)
            if not is_iceberg_table(current):            # a view or a Delta table has the name
                raise _taken_by(authz, "Table", full_name, current)
        (done,) = await self._commit_all(caller, [(full_name, requirements, updates)])
        metadata, location = done
        return {"metadata-location": location, "metadata": md.metadata_json(metadata)}

    async def _commit_create(self, caller: Caller, full_name: str, requirements, updates) -> dict:
        """A create transaction's commit (after stage-create): the table is created with its first metadata."""
        schema = await self._schema(caller, schema_of(full_name))
        (await authorizer(self.shard, caller)).require("table", "create", None, parent=schema)
        metadata = md.updated(None, None, requirements, updates)
        location = self._url(metadata.location)
        staging = await self.shard.lookup(caller.metastore(), "staging_table", full_name, caller.min_version)
        managed = staging is not None and staging.storage_path == location
        if not managed:
            await self._check_external(caller, location, "location")
        metadata_location = md.next_location(metadata, None)
        io = await self._io(caller, location, write=True)
        await asyncio.to_thread(md.write_metadata, metadata, metadata_location, io)
        info = self._table_info(metadata, metadata_location, location, managed)
        await self._insert(caller, full_name, staging.id if managed else str(uuid.uuid4()), info, location)
        return {"metadata-location": metadata_location, "metadata": md.metadata_json(metadata)}

    async def transaction(self, caller: Caller, warehouse: str | None, body: dict) -> None:
        changes = body.get("table-changes")
        if not isinstance(changes, list) or not changes:
            raise IcebergError(400, "BadRequestException", "Field 'table-changes' must be a non-empty list.")
        planned, seen = [], set()
        for change in changes:
            identifier = change.get("identifier") if isinstance(change, dict) else None
            if not isinstance(identifier, dict) or not isinstance(identifier.get("name"), str):
                raise IcebergError(400, "BadRequestException", "Each table change needs an identifier "
                                                               "{namespace, name}.")
            full = self.table_name(warehouse, identifier.get("namespace") or [], identifier["name"])
            if full in seen:
                raise IcebergError(400, "BadRequestException", f"Table '{full}' appears twice in the transaction.")
            seen.add(full)
            requirements, updates = md.changes(change)
            if md.asserts_create(requirements):
                raise IcebergError(400, "BadRequestException", "A multi-table transaction cannot create tables.")
            planned.append((full, requirements, updates))
        await self._commit_all(caller, planned)

    async def _prepare(self, caller: Caller, asset: Asset, requirements, updates) -> tuple[str, object, str, dict]:
        """A commit against the table's current metadata: (base location, new metadata, its new file,
        its columns renamed by field id), the file written unless the new schema drops governance the
        caller may not drop. Requirements that do not hold raise RESOURCE_CONFLICT (409)."""
        io = await self._io(caller, asset.storage_path, write=True)
        base_location = _props(asset)[md.METADATA_LOCATION]
        base = await asyncio.to_thread(md.read_metadata, base_location, io)
        metadata = md.updated(base, base_location, requirements, updates)
        if self._url(metadata.location) != asset.storage_path:
            raise IcebergError(400, "BadRequestException", f"Table '{asset.full_name}' is at '{asset.storage_path}'; "
                                                           f"a commit cannot move it to '{metadata.location}'.")
        renamed = md.renamed_fields(base.schema(), metadata.schema())
        # a schema that drops governance the caller may not drop is refused before its file is written
        await self._with_schema(await authorizer(self.shard, caller), asset, metadata.schema(), renamed)
        location = md.next_location(metadata, base_location)
        await asyncio.to_thread(md.write_metadata, metadata, location, io)
        return base_location, metadata, location, renamed

    async def _with_schema(self, authz, table: Asset, schema, renamed: dict | None = None) -> Asset:
        """The table (or view) with `schema` as its columns, each that stays with its tags and mask
        (by field id: `renamed`); refused if it drops governance the caller may not drop."""
        new = dataclasses.replace(table, info={**table.info, "columns": md.columns_of(schema)})
        return await keep_column_governance(self.shard.store, authz, table, new, renamed=renamed)

    async def _commit_all(self, caller: Caller, planned: list, preset: dict | None = None) -> list:
        """Commit each (table, requirements, updates) in one metastore write. Each new metadata file is
        written before the write, against the table as cached; inside the write, a table whose pointer
        moved meanwhile has its commit redone on the newer metadata (serialized under the metastore's
        write, so concurrent writers all land unless their requirements conflict). `preset`: a table
        id's ready (base, metadata, file) that cannot be redone (register with overwrite)."""
        authz = await authorizer(self.shard, caller)
        prepared = {table_id: (*ready, None) for table_id, ready in (preset or {}).items()}   # columns by name
        ids = []
        for full_name, requirements, updates in planned:
            asset = await self._table(caller, full_name)
            require_data(authz, asset, write=True)                        # MODIFY
            ids.append(asset.id)
            if asset.id not in prepared:
                prepared[asset.id] = await self._prepare(caller, asset, requirements, updates)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            out = []
            for (full_name, requirements, updates), table_id in zip(planned, ids):
                current = await tx.get_by_id(table_id)
                if not is_iceberg_table(current) or current.full_name != full_name:
                    raise missing("Table", full_name, " (dropped or renamed while committing)")
                require_data(authz, current, write=True)
                base_location, metadata, location, renamed = prepared[table_id]
                if _props(current)[md.METADATA_LOCATION] != base_location:
                    if preset and table_id in preset:
                        raise IcebergError(409, "CommitFailedException", f"Table '{full_name}' changed meanwhile.")
                    base_location, metadata, location, renamed = prepared[table_id] = \
                        await self._prepare(caller, current, requirements, updates)
                props = {**_props(current), md.METADATA_LOCATION: location,
                         md.PREVIOUS_METADATA_LOCATION: base_location}
                governed = await self._with_schema(authz, current, metadata.schema(), renamed)
                info = {**governed.info, "properties": props, "updated_at": now, "updated_by": caller.name}
                await tx.put(dataclasses.replace(current, info=info))
                out.append((metadata, location))
            return out

        return await self.shard.write(caller.metastore(), write)

    # ---- tables: drop and rename ------------------------------------------------------------------

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
            await self._schema(caller, schema_of(dst))
            raise IcebergError(400, "BadRequestException", "A table or view can be renamed within its namespace, "
                                                           "not moved to another one.")
        try:
            await self.catalogs.update(caller, "table", src, {"new_name": dst.rsplit(".", 1)[1]})
        except CatalogError as e:
            if e.code != "ALREADY_EXISTS":
                raise
            # the destination's kind, said only to who may see it
            holder = await self.shard.lookup(caller.metastore(), "table", dst, caller.min_version)
            visible = holder is not None and (await authorizer(self.shard, caller)).sees(holder.type, holder)
            kind = _kind(holder) if visible else ("View" if view else "Table")
            raise IcebergError(409, "AlreadyExistsException", f"Cannot rename {src.spelled} to {dst.spelled}. "
                                                              f"{kind} already exists") from None

    # ---- views ---------------------------------------------------------------------------------------

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
            raise _taken_by(authz, "View", full, existing)
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
            raise _taken_by(authz, "View", full, existing)
        await self._check_external(caller, metadata_location, "metadata-location")
        view, location = await self._read_registered(caller, metadata_location, md.read_view, "view")
        await self._check_external(caller, location, "location")
        await self._insert(caller, full, str(uuid.uuid4()), self._view_info(view, metadata_location), None)
        return {"metadata-location": metadata_location, "metadata": md.metadata_json(view), "config": {}}

    @staticmethod
    def _view_schema(view):
        schema_id = next(v for v in view.versions if v.version_id == view.current_version_id).schema_id
        return next(s for s in view.schemas if s.schema_id == schema_id)

    async def load_view(self, caller: Caller, full_name: str) -> dict:
        asset = await self._table(caller, full_name, view=True)
        require_data(await authorizer(self.shard, caller), asset, write=False)    # SELECT on the view
        location = _props(asset)[md.METADATA_LOCATION]
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
            base_location = _props(current)[md.METADATA_LOCATION]
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
            if _props(current)[md.METADATA_LOCATION] != prepared[0]:
                prepared = await prepare(current)                   # redone on the newer view, under the write
            base_location, view, location = prepared
            governed = await self._with_schema(authz, current, self._view_schema(view))
            info = {**governed.info, "view_definition": md.view_sql(view),
                    "properties": {**_props(current), md.METADATA_LOCATION: location,
                                   md.PREVIOUS_METADATA_LOCATION: base_location},
                    "updated_at": now, "updated_by": caller.name}
            await tx.put(dataclasses.replace(current, info=info))
            return {"metadata-location": location, "metadata": md.metadata_json(view), "config": {}}

        return await self.shard.write(caller.metastore(), write)


# ---- HTTP -------------------------------------------------------------------------------------------


def _error_response(e: IcebergError) -> web.Response:
    return iceberg_response(e.status, e.kind, e.message)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """The Iceberg REST catalog's handlers by the spec's operationIds (and getConfig): web/registry.py
    serves each under each base, with and without a warehouse prefix."""
    shard = serving.shard

    ice = IcebergCatalog(shard)

    def handler(method):
        async def handle(request: web.Request):
            try:
                result = await method(request, request["caller"], request.match_info.get("catalog"))
            except CatalogError as e:
                if e.code == "NOT_OWNER":
                    raise           # shardcat's own shard-to-router signal, answered as everywhere else
                return _error_response(_iceberg(e))
            except IcebergError as e:
                return _error_response(e)
            return web.Response(status=204) if result is None else ok(result)
        return handle

    def table(request, warehouse):
        m = request.match_info
        name, levels = m.get("table") or m.get("view"), ice.namespace(warehouse, m["namespace"])
        if len(levels) != 2:
            # Tables and views live in schemas only, so the table (view) is missing, the answer the spec gives
            # routes that name one. Iceberg's Java client then loads `ns.t.snapshots` as t's metadata table.
            shown = ice.namespace_name(warehouse, levels).spelled
            raise missing("View" if "view" in m else "Table", f"{shown}.{name}")
        return ice.table_name(warehouse, m["namespace"], name)

    def ns(request):
        return request.match_info["namespace"]

    def page(request):
        return request.query.get("pageSize"), request.query.get("pageToken")

    async def config(r, c, w):
        return await ice.config(c, r.query.get("warehouse") or None)

    async def purge(r):
        value = r.query.get("purgeRequested", "false").lower()
        if value not in ("true", "false"):
            raise IcebergError(400, "BadRequestException", "purgeRequested must be true or false.")
        return value == "true"

    handlers = {
        "listNamespaces": lambda r, c, w: ice.list_namespaces(c, w, r.query.get("parent"), *page(r)),
        "createNamespace": lambda r, c, w: _with_body(r, lambda b: ice.create_namespace(c, w, b)),
        "loadNamespaceMetadata": lambda r, c, w: ice.load_namespace(c, w, ns(r)),
        "namespaceExists": lambda r, c, w: _none(ice.load_namespace(c, w, ns(r))),
        "dropNamespace": lambda r, c, w: ice.drop_namespace(c, w, ns(r)),
        "updateProperties": lambda r, c, w: _with_body(r, lambda b: ice.update_properties(c, w, ns(r), b)),
        "listTables": lambda r, c, w: ice.list_tables(c, w, ns(r), *page(r)),
        "createTable": lambda r, c, w: _with_body(r, lambda b: ice.create_table(c, w, ns(r), b)),
        "registerTable": lambda r, c, w: _with_body(r, lambda b: ice.register_table(c, w, ns(r), b)),
        "registerView": lambda r, c, w: _with_body(r, lambda b: ice.register_view(c, w, ns(r), b)),
        "loadTable": lambda r, c, w: ice.load_table(c, table(r, w)),
        "tableExists": lambda r, c, w: ice.exists(c, table(r, w)),
        "updateTable": lambda r, c, w: _with_body(r, lambda b: ice.commit(c, table(r, w), b)),
        "dropTable": lambda r, c, w: _then(purge(r), lambda p: ice.drop(c, table(r, w), p)),
        "loadCredentials": lambda r, c, w: ice.load_credentials(c, table(r, w)),
        "reportMetrics": lambda r, c, w: ice.report_metrics(c, table(r, w)),
        "renameTable": lambda r, c, w: _with_body(r, lambda b: ice.rename(c, w, b)),
        "commitTransaction": lambda r, c, w: _with_body(r, lambda b: ice.transaction(c, w, b)),
        "listViews": lambda r, c, w: ice.list_tables(c, w, ns(r), *page(r), views=True),
        "createView": lambda r, c, w: _with_body(r, lambda b: ice.create_view(c, w, ns(r), b)),
        "loadView": lambda r, c, w: ice.load_view(c, table(r, w)),
        "viewExists": lambda r, c, w: ice.exists(c, table(r, w), view=True),
        "replaceView": lambda r, c, w: _with_body(r, lambda b: ice.replace_view(c, table(r, w), b)),
        "dropView": lambda r, c, w: ice.drop(c, table(r, w), False, view=True),
        "renameView": lambda r, c, w: _with_body(r, lambda b: ice.rename(c, w, b, view=True)),
    }

    async def _with_body(request, call):
        return await call(await json_body(request))

    return {"getConfig": handler(config), **{name: handler(_call(call)) for name, call in handlers.items()}}


def _call(call):
    async def run(request, caller, warehouse):
        return await call(request, caller, warehouse)
    return run


async def _none(awaitable) -> None:
    await awaitable


async def _then(first, then):
    return await then(await first)
