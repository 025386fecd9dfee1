"""Tables and views, and staging tables: their rules, composed here in one visible place, and their own operations.

A table's create rule is where the table features meet, in this order (`Tables.on_create`):
an Iceberg table's metadata pointer is the Iceberg catalog's alone (iceberg/tables.py); type,
format, columns and storage (`storage_and_columns` below: managed, external inside an external
location, or the location its staging table reserved, one asset per storage path); Delta's
catalog-managed commits (`catalog_managed`, the rules in delta/commits.py); then row filters and column masks
(governance/row_filters.py). An update (`Tables.on_update`) checks a view's new owner, then the
same parts that the update names; new columns keep the governance of the old ones
(column_governance.py). What a caller sees of a table (a row filter and column masks
for trusted engines only, ABAC policies) is `read_outputs` / `written_output`.

A staging table reserves a managed table's storage location before the table is created
(`POST /staging-tables`). `table_summaries` lists a catalog's tables by name pattern.
"""

from __future__ import annotations

import dataclasses

from ...auth import Caller
from ...delta import commits as delta_rules
from ...entities.asset import Asset
from ...entities.columns import check_columns
from ...entities.names import check_name
from ...entities.types import CATALOG, DATA_SOURCE_FORMATS, DEFINED_BY_QUERY, STAGING_TABLE, TABLE, TABLE_TYPES
from ...entities.urls import join_url
from ...errors import CatalogError, already_exists, invalid
from ...governance.authorize import authorizer, present_table
from ...governance.row_filters import check_policies
from ...iceberg import tables as iceberg_tables
from ...shards.locations import require_external_location
from ...shards.shard import MetastoreState, Shard
from ...store.writes import WriteTx
from ...web.paging import decode_page_token, encode_page_token, page_size
from .assets import check_free, checked_storage_url, managed_root, missing, render
from .column_governance import keep_column_governance
from .crud import TypeService
from .foreign_writes import ForeignWrites
from .views import check_view_dependencies


class Tables(TypeService):
    """Tables and views (`table_type` VIEW, MATERIALIZED_VIEW, ...)."""

    def __init__(self, shard: Shard):
        super().__init__(shard, TABLE)

    async def create(self, caller: Caller, body: dict) -> dict:
        # A table in a foreign catalog is made by the foreign system, if its writes pass through (foreign_writes.py).
        catalog_name = body.get("catalog_name") if isinstance(body, dict) else None
        if self.foreign is not None and isinstance(catalog_name, str):
            writes = ForeignWrites(self.shard, self.foreign)
            catalog = await writes.catalog_of(caller, catalog_name)
            if catalog is not None:
                return await self.get(caller, await writes.create_from_unity_catalog(caller, catalog, body))
        return await super().create(caller, body)

    async def on_create(self, tx, state, asset, parent, flags):
        iceberg_tables.refuse_pointer(asset)       # an Iceberg table's metadata pointer is the Iceberg catalog's alone
        table = await storage_and_columns(tx, state, asset, parent)
        table = await catalog_managed(tx, table, parent)
        return await check_policies(tx, table)

    async def on_update(self, tx, state, old, new, fields, flags):
        new_owner = fields.get("owner")
        if old.info.get("table_type") == "VIEW" and new_owner not in (None, old.info.get("owner")):
            flags["authz"].require_view_owner_change(old, new_owner)
        table = await updated_storage_and_columns(tx, state, new, fields)
        if "columns" in fields:
            table = await keep_column_governance(self.store, flags["authz"], old, table, masks_given=True)
        if "properties" in fields or "data_source_format" in fields:
            table = iceberg_tables.keep_pointer(await tx.get_by_id(old.id), table)
        return await check_policies(tx, table) if "row_filter" in fields or "columns" in fields else table

    async def read_outputs(self, caller, assets):
        authz = await authorizer(self.shard, caller)
        return [authz.present_table(render(a), a) for a in assets]

    def written_output(self, caller, asset, flags):
        return present_table(caller, render(asset))    # policies: trusted engines only

    async def table_summaries(self, caller: Caller, body: dict) -> dict:
        catalog_name = body.get("catalog_name")
        if catalog_name is None:
            raise invalid("Missing required field 'catalog_name'.")
        for key in ("schema_name_pattern", "table_name_pattern", "page_token"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise invalid(f"Field '{key}' must be a string.")
        catalog_name = check_name(catalog_name, "catalog")
        ms = caller.metastore()
        catalog = await self.shard.lookup(ms, CATALOG.namespace, catalog_name, caller.min_version)
        if catalog is None:
            raise missing(CATALOG, catalog_name)
        authz = await authorizer(self.shard, caller)
        authz.require_or_missing("catalog", "read", catalog, missing(CATALOG, catalog_name))
        limit = page_size(body.get("max_results"))
        after = decode_page_token(body.get("page_token"))
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


class StagingTables(TypeService):
    """A managed table's storage, reserved before the table is created."""

    def __init__(self, shard: Shard):
        super().__init__(shard, STAGING_TABLE)

    async def on_create(self, tx, state, asset, schema, flags):
        if await tx.get("table", asset.full_name):
            raise already_exists(f"Table '{asset.full_name}' already exists.")
        location = join_url(await managed_root(tx, state, schema), "tables", asset.id)
        check_free(state, location, "staging location", inside_managed=True)
        return dataclasses.replace(asset, storage_path=location, info={"storage_location": location})

    async def create_staging_table(self, caller: Caller, body: dict) -> dict:
        out = await self.create(caller, body)
        out["staging_location"] = out.pop("storage_location")
        return out


# ---- a table's storage and columns --------------------------------------------------------


async def storage_and_columns(tx: WriteTx, state: MetastoreState, asset: Asset, schema: Asset) -> Asset:
    """A new table's type, format, columns and storage (managed, external, or its staging table's); a view's definition."""
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
        location = checked_storage_url(location, "storage_location")
        check_free(state, location, "storage_location", inside_managed=False)
        require_external_location(state, location, "storage_location")
    elif location:
        # A MANAGED table may name a location only if it is the one its staging table reserved.
        location = checked_storage_url(location, "storage_location")
        staging = await tx.get("staging_table", asset.full_name)
        if staging is None or staging.storage_path != location:
            raise invalid(f"storage_location '{location}' of a MANAGED table must be the staging location "
                          f"that POST /staging-tables returned for '{asset.full_name}'.")
        await tx.delete([staging])
        table_id = staging.id
    else:
        location = join_url(await managed_root(tx, state, schema), "tables", table_id)
        check_free(state, location, "storage_location", inside_managed=True)
    info["storage_location"] = location
    return dataclasses.replace(asset, id=table_id, info=info, storage_path=location)


async def updated_storage_and_columns(tx: WriteTx, state: MetastoreState, asset: Asset, fields: dict) -> Asset:
    """An update's columns (their governance: `Tables.on_update`), format, view dependencies and storage location."""
    info = dict(asset.info)
    if "columns" in fields:   # what they keep of the old ones' governance: on_update (catalog/tree/column_governance.py)
        info["columns"] = check_columns(fields["columns"])
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
        location = checked_storage_url(location, "storage_location")
        if location != asset.storage_path:
            if info["table_type"] != "EXTERNAL":
                raise invalid(f"The storage_location of a {info['table_type']} table cannot change.")
            check_free(state, location, "storage_location", inside_managed=False, moving=asset.id)
            require_external_location(state, location, "storage_location")
            path = location
        info["storage_location"] = location
    return dataclasses.replace(asset, info=info, storage_path=path)


async def catalog_managed(tx: WriteTx, table: Asset, schema: Asset) -> Asset:
    """A new table, as catalog-managed if it is a managed Delta table that asks for it (its own
    `delta.feature.catalogManaged` property, or its schema's or catalog's as the default)."""
    info = table.info
    if info.get("table_type") != "MANAGED" or info.get("data_source_format") != "DELTA":
        if delta_rules.is_catalog_managed(info.get("properties")):
            raise CatalogError("INVALID_PARAMETER_VALUE",
                               f"{delta_rules.FEATURE_PROPERTY}=supported is only for MANAGED DELTA tables.")
        return table
    catalog = await tx.get("catalog", schema.full_name.split(".")[0])
    props = dict(info.get("properties") or {})
    if not delta_rules.wants_catalog_managed(props, schema.info.get("properties"),
                                       catalog.info.get("properties") if catalog else None):
        return table
    if props.get(delta_rules.TABLE_ID_PROPERTY, table.id) != table.id:
        raise CatalogError("INVALID_PARAMETER_VALUE",
                           f"Property {delta_rules.TABLE_ID_PROPERTY} is '{props[delta_rules.TABLE_ID_PROPERTY]:.60}', but the "
                           f"table's id is {table.id} (the staging table's id).")
    props.update({delta_rules.FEATURE_PROPERTY: "supported", delta_rules.TABLE_ID_PROPERTY: table.id})
    return dataclasses.replace(table, info={**info, "properties": props})

