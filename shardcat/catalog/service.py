"""The catalog operations a shard serves, with every type's rules composed here and nowhere else.

`CatalogService` is the generic asset service (assets.py) with its hooks filled in: for each
type, what creating it checks and adds, and for tables what an update checks. A table's
create rule is the one place where the table features meet, in this order: storage and
columns (assets.py), Delta's catalog-managed commits (delta_commits.py), then row filters
and column masks (governance/row_filters.py). A new type or rule is one line here.
"""

from __future__ import annotations

from ..entities.asset import Asset
from ..governance.row_filters import check_policies
from ..iceberg import tables as iceberg_tables
from . import assets, delta_commits, functions, models, volumes
from .assets import AssetService


async def create_table(service, tx, state, asset: Asset, schema: Asset) -> Asset:
    iceberg_tables.refuse_pointer(asset)       # an Iceberg table's metadata pointer is the Iceberg catalog's alone
    table = await assets.create_table(service, tx, state, asset, schema)
    table = await delta_commits.catalog_managed(tx, table, schema)
    return await check_policies(tx, table)


async def update_table(service, tx, state, asset: Asset, fields: dict) -> Asset:
    table = await assets.update_table(service, tx, state, asset, fields)
    if "properties" in fields or "data_source_format" in fields:
        table = iceberg_tables.keep_pointer(await tx.get_by_id(asset.id), table)
    return await check_policies(tx, table) if "row_filter" in fields or "columns" in fields else table


class CatalogService(AssetService):
    """Catalogs, schemas, tables, staging tables, volumes, functions and registered models."""

    CREATE_RULES = {
        "catalog": assets.create_container,
        "schema": assets.create_container,
        "table": create_table,
        "staging_table": assets.create_staging,
        "volume": volumes.create_volume,
        "function": functions.create_function_rule,
        "registered_model": models.create_model,
    }
    UPDATE_RULES = {"table": update_table}
