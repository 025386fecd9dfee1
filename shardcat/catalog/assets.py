"""The generic asset operations: create/get/list/update/delete driven by the asset-type manifests.

`AssetService` does what every type shares (entities/types.py manifests: fields, names,
parents, privileges) and calls each type's own rules through two hooks, `CREATE_RULES` and
`UPDATE_RULES`, which catalog/service.py composes. Here too are the base rules they compose
from: containers, tables and views, staging tables (managed storage allocation, one asset per
storage path), and table summaries. Every operation is scoped to the caller's metastore;
writes go through `Shard.write` and are validated inside the write's transaction.
"""

from __future__ import annotations

import dataclasses

import uuid

import orjson

from ..auth import Caller
from ..entities.urls import InvalidUrl, join_url, normalize_url
from ..entities.asset import Asset
from ..entities.columns import check_columns, keep_column_tags
from ..entities.manifest import AssetType
from ..entities.names import check_name, full_name_key, split_full_name
from ..entities.types import CATALOG, DATA_SOURCE_FORMATS, DEFINED_BY_QUERY, TABLE_TYPES, TYPES
from ..errors import CatalogError, already_exists, invalid, not_found
from ..governance.authorize import authorizer, present_table
from ..store.db import WriteTx
from ..entities.values import now_ms
from ..web.kit import encode_json
from ..web.paging import decode_page_token, encode_page_token, page_size
from ..shards.locations import require_external_location
from ..shards.shard import MetastoreState, Shard
from .views import check_view_dependencies

PARENT_FIELDS = ("catalog_name", "schema_name")


def render(asset: Asset) -> dict:
    """An asset as the API returns it: stored fields plus names and ids derived from where it sits."""
    t = TYPES[asset.type]
    out = dict(asset.info)
    out.pop("tag_index", None)      # search's, not the asset's (catalog/tags.py)
    out["name"] = asset.name
    out[t.id_field] = asset.id
    out["metastore_id"] = asset.metastore_id
    parts = asset.full_name.split(".")
    for field_name, part in zip(PARENT_FIELDS, parts[:-1]):
        out[field_name] = part
    if asset.type != "staging_table":
        out["full_name"] = asset.full_name
    return out


def present(asset: Asset, caller: Caller, authz=None) -> orjson.Fragment:
    """`presented_json` as a part of answers built with `encode_json`."""
    return orjson.Fragment(presented_json(asset, caller, authz))


def presented_json(asset: Asset, caller: Caller, authz=None) -> bytes:
    """`render(asset)` as this caller may see it, as JSON encoded once per asset state and kind of
    caller (only trusted engines see a table's row filter and column masks). With `authz` (a trusted
    engine's), a table that ABAC policies govern for this caller gets theirs, encoded for it alone."""
    if authz is not None and asset.type == "table" and caller.trusted_engine and authz.effective(asset):
        return encode_json(authz.present_table(render(asset), asset))
    full = caller.trusted_engine or asset.type != "table"
    encoded = asset.memo.get(full)
    if encoded is None:
        shown = render(asset) if full else present_table(caller, render(asset))
        # A right-sized copy: orjson's result keeps its whole working buffer (16 KB for a 2 KB answer).
        encoded = asset.memo[full] = bytes(memoryview(encode_json(shown)))
    return encoded


def presented_page(assets: list[Asset], caller: Caller, authz=None) -> list[bytes]:
    """`presented_json` of each of a page's assets: a list's hot loop, so the encodings already
    kept (every one once the page has been served) are taken without a call per asset."""
    if authz is not None:
        return [presented_json(a, caller, authz) for a in assets]
    trusted = caller.trusted_engine
    return [a.memo.get(trusted or a.type != "table") or presented_json(a, caller) for a in assets]


def _storage_url(value: str, field_name: str) -> str:
    try:
        return normalize_url(value)
    except InvalidUrl as e:
        raise invalid(f"Invalid {field_name}: {e}") from None


def _label(t: AssetType) -> str:
    """A type's name for messages: "Registered model", not "Registered_model"."""
    return t.name.replace("_", " ").capitalize()


def missing(t: AssetType, full_name: str) -> CatalogError:
    """The answer for a name that does not exist, and for one the caller may not see."""
    return not_found(f"{_label(t)} '{full_name}' does not exist.")


def _parent_of(t: AssetType):
    return TYPES.get(t.parent)


class AssetService:
    """Assets of the metastores a shard owns; each type's own rules come from the hooks below
    (catalog/service.py's `CatalogService` sets them)."""

    # type name -> async rule(service, tx, state, asset, parent) -> the asset to write
    CREATE_RULES: dict = {}
    # type name -> async rule(service, tx, state, updated asset, the fields asked for) -> the asset to write
    UPDATE_RULES: dict = {}

    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    # ---- lookups ------------------------------------------------------------

    async def _get(self, caller: Caller, t: AssetType, full_name: str) -> Asset:
        key = full_name_key(full_name, t.name_parts, t.name)
        asset = await self.shard.lookup(caller.metastore(), t.namespace, key, caller.min_version)
        if asset is None:
            raise missing(t, full_name)
        return asset

    async def _parent_in_tx(self, tx: WriteTx, t: AssetType, parent_full: str) -> Asset | None:
        parent_type = _parent_of(t)
        if parent_type is None:
            return None
        parent = await tx.get(parent_type.namespace, parent_full)
        if parent is None:
            raise missing(parent_type, parent_full)
        return parent

    # ---- generic CRUD -------------------------------------------------------

    async def get(self, caller: Caller, type_name: str, full_name: str) -> dict:
        asset = await self.find(caller, type_name, full_name)
        if type_name != "table":
            return render(asset)
        return (await authorizer(self.shard, caller)).present_table(render(asset), asset)

    async def find(self, caller: Caller, type_name: str, full_name: str) -> Asset:
        """The asset, if the caller may read it."""
        t = TYPES[type_name]
        asset = await self._get(caller, t, full_name)
        (await authorizer(self.shard, caller)).require_or_missing(type_name, "read", asset,
                                                                  lambda: missing(t, full_name))
        return asset

    async def list(self, caller: Caller, type_name: str, parent_full: str | None,
                   max_results=None, page_token: str | None = None) -> dict:
        page, next_token = await self.list_page(caller, type_name, parent_full, max_results, page_token)
        if type_name == "table":
            authz = await authorizer(self.shard, caller)
            shown = [authz.present_table(render(a), a) for a in page]
        else:
            shown = [render(a) for a in page]
        out = {TYPES[type_name].list_key: shown}
        if next_token:
            out["next_page_token"] = next_token
        return out

    async def list_page(self, caller: Caller, type_name: str, parent_full: str | None,
                        max_results=None, page_token: str | None = None) -> tuple[list[Asset], str | None]:
        """A page of the children the caller may see, and the next page's token (None: the last page)."""
        t = TYPES[type_name]
        limit = page_size(max_results)
        after = decode_page_token(page_token)
        ms = caller.metastore()
        authz = await authorizer(self.shard, caller)
        parent = None
        if _parent_of(t) is not None:
            parent = await self._get(caller, _parent_of(t), parent_full)
            authz.require_or_missing(parent.type, "read", parent, lambda: missing(_parent_of(t), parent_full))
        visible = authz.visible_under(type_name, parent)   # None: all of them
        keep = None if visible is None else (lambda a: authz.index.find(a.id) in visible)
        page = await self.shard.children_where(ms, parent.id if parent else ms, t.namespace, keep, after=after,
                                               limit=limit + 1, min_version=caller.min_version)
        more = len(page) > limit
        page = page[:limit]
        return page, encode_page_token(page[-1].name) if more else None

    async def create(self, caller: Caller, type_name: str, body: dict) -> dict:
        t = TYPES[type_name]
        fields = t.check_create(body)
        fields.pop("new_name", None)
        name = check_name(fields.pop("name"), t.name)
        parent_names = [check_name(fields.pop(f), f.removesuffix("_name")) for f in PARENT_FIELDS[: t.name_parts - 1]]
        parent_full = ".".join(parent_names)
        full_name = ".".join([*parent_names, name])
        creating = self.CREATE_RULES[t.name]
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            parent = await self._parent_in_tx(tx, t, parent_full)
            gone = missing(_parent_of(t), parent_full) if parent is not None else None
            authz.require_or_missing(t.name, "create", None, gone, parent=parent)
            if await tx.get(t.namespace, full_name):
                raise already_exists(f"{_label(t)} '{full_name}' already exists.")
            info = {**fields, "owner": caller.name, "created_at": now, "created_by": caller.name,
                    "updated_at": now, "updated_by": caller.name}
            asset = Asset(
                id=str(uuid.uuid4()), metastore_id=state.id, type=t.name, namespace=t.namespace,
                parent_id=parent.id if parent else state.id, name=name, full_name=full_name,
                storage_path=None, info=info,
            )
            asset = await creating(self, tx, state, asset, parent)
            authz.require_storage(state, asset)     # storage inside an external location
            try:
                return render(await tx.put(asset))
            except KeyError:
                raise already_exists(f"{_label(t)} '{full_name}' already exists.") from None

        out = await self.shard.write(caller.metastore(), write)
        return present_table(caller, out) if t.name == "table" else out   # policies: trusted engines only

    async def update(self, caller: Caller, type_name: str, full_name: str, body: dict) -> dict:
        t = TYPES[type_name]
        names = split_full_name(full_name, t.name_parts, t.name)
        fields = t.check_update(body)
        new_name = fields.pop("new_name", None)
        requested = fields.pop("name", None)
        if new_name is None and requested is not None and requested.lower() != names[-1]:
            new_name = requested   # the 2.1 API renames through `name`
        if new_name is not None:
            new_name = check_name(new_name, t.name)
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            asset = await tx.get(t.namespace, ".".join(names))
            if asset is None:
                raise missing(t, full_name)
            authz.require_or_missing(t.name, "update", asset, missing(t, full_name))
            new_owner = fields.get("owner")
            if asset.info.get("table_type") == "VIEW" and new_owner not in (None, asset.info.get("owner")):
                authz.require_view_owner_change(asset, new_owner)
            info = {**asset.info, **fields, "updated_at": now, "updated_by": caller.name}
            updated = dataclasses.replace(asset, info=info)
            updated = await self.UPDATE_RULES.get(t.name, _no_rules)(self, tx, state, updated, fields)
            if updated.storage_path != asset.storage_path:
                authz.require_storage(state, updated)
            if new_name is not None and new_name != asset.name:
                # Renaming is creating under the new name too: the create privilege on the container.
                container = await self._parent_in_tx(tx, t, ".".join(names[:-1]))
                authz.require(t.name, "create", None, parent=container)
                return render(await self._rename(tx, t, updated, new_name))
            return render(await tx.put(updated))

        out = await self.shard.write(caller.metastore(), write)
        return present_table(caller, out) if t.name == "table" else out   # policies: trusted engines only

    async def _rename(self, tx: WriteTx, t: AssetType, asset: Asset, new_name: str) -> Asset:
        new_full = ".".join([*asset.full_name.split(".")[:-1], new_name])
        if await tx.get(t.namespace, new_full):
            raise already_exists(f"{_label(t)} '{new_full}' already exists.")
        old_prefix = asset.full_name + "."
        renamed = await tx.put(dataclasses.replace(asset, name=new_name, full_name=new_full))
        for child in await tx.descendants(asset.id):   # children's full names carry the old name
            child_full = new_full + "." + child.full_name.removeprefix(old_prefix)
            await tx.put(dataclasses.replace(child, full_name=child_full))
        return renamed

    async def delete(self, caller: Caller, type_name: str, full_name: str, force: bool = False) -> None:
        t = TYPES[type_name]
        names = split_full_name(full_name, t.name_parts, t.name)
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            asset = await tx.get(t.namespace, ".".join(names))
            if asset is None:
                raise missing(t, full_name)
            authz.require_or_missing(t.name, "delete", asset, missing(t, full_name))
            below = await tx.descendants(asset.id)
            visible = [a for a in below if a.type != "staging_table"]
            if visible and not force:
                raise CatalogError(
                    "FAILED_PRECONDITION",
                    f"{_label(t)} '{full_name}' is not empty: it contains {len(visible)} object(s), "
                    f"e.g. {visible[0].type} '{visible[0].full_name}'. Delete them first or pass force=true.",
                )
            await tx.delete([asset, *below])

        await self.shard.write(caller.metastore(), write)

    # ---- tables -------------------------------------------------------------

    async def create_staging_table(self, caller: Caller, body: dict) -> dict:
        out = await self.create(caller, "staging_table", body)
        out["staging_location"] = out.pop("storage_location")
        return out

    async def table_summaries(self, caller: Caller, body: dict) -> dict:
        catalog_name = body.get("catalog_name")
        if catalog_name is None:
            raise invalid("Missing required field 'catalog_name'.")
        for key in ("schema_name_pattern", "table_name_pattern", "page_token"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise invalid(f"Field '{key}' must be a string.")
        catalog_name = check_name(catalog_name, "catalog")
        catalog = await self._get(caller, CATALOG, catalog_name)
        authz = await authorizer(self.shard, caller)
        authz.require_or_missing("catalog", "read", catalog, missing(CATALOG, catalog_name))
        limit = page_size(body.get("max_results"))
        after = decode_page_token(body.get("page_token"))
        ms = caller.metastore()
        tables = await self.shard.read(ms, self.store.table_summaries(
            ms, catalog.id, (body.get("schema_name_pattern") or "%").lower(),
            (body.get("table_name_pattern") or "%").lower(), after, limit + 1,
        ))
        more = len(tables) > limit
        page = tables[:limit]
        shown = authz.filter_any("table", page)   # a page may come back short: the token still moves on
        out = {"tables": [{"full_name": a.full_name, "table_type": a.info.get("table_type")} for a in shown]}
        if more:
            out["next_page_token"] = encode_page_token(page[-1].full_name)
        return out


# ---- type-specific create and update rules ------------------------------------
# Each takes the asset about to be written and returns it, possibly with a storage path.


def _check_free(state: MetastoreState, url: str, what: str, *, inside_managed: bool) -> None:
    """One asset per path: refuse a url that overlaps another asset's (managed roots count unless inside_managed)."""
    hit = state.trie.first_overlap(url, ignore=(lambda o: o.is_root) if inside_managed else None)
    if hit is not None:
        hit_url, owner = hit
        raise invalid(f"The {what} '{url}' overlaps the storage of {owner.type} '{owner.full_name}' at '{hit_url}'.")


async def create_container(service: AssetService, tx: WriteTx, state: MetastoreState, asset: Asset, parent):
    root = asset.info.get("storage_root")
    if root is None:
        return asset
    root = _storage_url(root, "storage_root")
    location = join_url(root, "__unitystorage", f"{asset.type}s", asset.id)
    _check_free(state, location, "storage_root", inside_managed=True)
    info = {**asset.info, "storage_root": root, "storage_location": location}
    return dataclasses.replace(asset, info=info, storage_path=location)


async def _managed_root(tx: WriteTx, state: MetastoreState, schema: Asset) -> str:
    if schema.info.get("storage_location"):
        return schema.info["storage_location"]
    catalog = await tx.get("catalog", schema.full_name.split(".")[0])
    if catalog and catalog.info.get("storage_location"):
        return catalog.info["storage_location"]
    root = state.storage_root
    if root is None:
        raise CatalogError("FAILED_PRECONDITION", "No managed storage root is set on the schema, catalog or metastore.")
    return root


async def create_staging(service: AssetService, tx: WriteTx, state: MetastoreState, asset: Asset, schema):
    if await tx.get("table", asset.full_name):
        raise already_exists(f"Table '{asset.full_name}' already exists.")
    location = join_url(await _managed_root(tx, state, schema), "tables", asset.id)
    _check_free(state, location, "staging location", inside_managed=True)
    return dataclasses.replace(asset, storage_path=location, info={"storage_location": location})


async def create_table(service: AssetService, tx: WriteTx, state: MetastoreState, asset: Asset, schema):
    info = dict(asset.info)
    table_type = info["table_type"]
    if table_type not in TABLE_TYPES:
        raise invalid(f"Unknown table_type '{table_type}'; expected one of {', '.join(TABLE_TYPES)}.")
    fmt = info.get("data_source_format")
    if fmt is not None and fmt not in DATA_SOURCE_FORMATS:
        raise invalid(f"Unknown data_source_format '{fmt}'; expected one of {', '.join(DATA_SOURCE_FORMATS)}.")
    info["columns"] = check_columns(info.get("columns") or [])
    location = info.pop("storage_location", None)
    if table_type in DEFINED_BY_QUERY:
        if not info.get("view_definition"):
            raise invalid(f"A {table_type} needs a view_definition.")
        if location:
            raise invalid(f"A {table_type} has no storage_location.")
        await check_view_dependencies(tx, info)
        return dataclasses.replace(asset, info=info)
    if "columns" not in asset.info:
        raise invalid(f"Missing required field 'columns' to create a {table_type} table.")
    if fmt is None:
        raise invalid(f"Missing required field 'data_source_format' to create a {table_type} table.")
    info.pop("view_definition", None)
    info.pop("view_dependencies", None)
    table_id = asset.id
    if table_type == "EXTERNAL":
        if not location:
            raise invalid("Missing required field 'storage_location' to create an EXTERNAL table.")
        location = _storage_url(location, "storage_location")
        _check_free(state, location, "storage_location", inside_managed=False)
        require_external_location(state, location, "storage_location")
    elif location:
        # A MANAGED table may name a location only if it is the one its staging table reserved.
        location = _storage_url(location, "storage_location")
        staging = await tx.get("staging_table", asset.full_name)
        if staging is None or staging.storage_path != location:
            raise invalid(f"storage_location '{location}' of a MANAGED table must be the staging location "
                          f"that POST /staging-tables returned for '{asset.full_name}'.")
        await tx.delete([staging])
        table_id = staging.id
    else:
        location = join_url(await _managed_root(tx, state, schema), "tables", table_id)
        _check_free(state, location, "storage_location", inside_managed=True)
    info["storage_location"] = location
    return dataclasses.replace(asset, id=table_id, info=info, storage_path=location)


async def update_table(service: AssetService, tx: WriteTx, state: MetastoreState, asset: Asset, fields: dict):
    info = dict(asset.info)
    if "columns" in fields:   # new columns keep the tags of the old ones of the same name (catalog/tags.py)
        stored = await tx.get(asset.namespace, asset.full_name)
        info["columns"] = keep_column_tags(stored.info.get("columns") if stored else [], check_columns(fields["columns"]))
    fmt = fields.get("data_source_format")
    if fmt is not None and fmt not in DATA_SOURCE_FORMATS:
        raise invalid(f"Unknown data_source_format '{fmt}'.")
    is_view = info["table_type"] in DEFINED_BY_QUERY
    if "view_definition" in fields and not is_view:
        raise invalid("Only a view has a view_definition.")
    if "view_dependencies" in fields:
        await check_view_dependencies(tx, info)
    location = fields.get("storage_location")
    path = asset.storage_path
    if location is not None:
        location = _storage_url(location, "storage_location")
        if location != asset.storage_path:
            if info["table_type"] != "EXTERNAL":
                raise invalid(f"The storage_location of a {info['table_type']} table cannot change.")
            state.forget(asset.id)
            try:
                _check_free(state, location, "storage_location", inside_managed=False)
            finally:
                state.remember(asset)
            require_external_location(state, location, "storage_location")
            path = location
        info["storage_location"] = location
    return dataclasses.replace(asset, info=info, storage_path=path)


async def _no_rules(service, tx, state, asset, fields):
    return asset
