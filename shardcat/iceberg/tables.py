"""Which shardcat tables are Iceberg tables and views, and the rule that keeps their metadata pointer theirs.

An Iceberg table is a MANAGED or EXTERNAL table with `data_source_format` ICEBERG whose properties
hold `metadata_location`, the file the catalog reads as its current metadata; an Iceberg view is a
VIEW with one. Only the Iceberg REST catalog (catalog/protocols/iceberg_rest.py) sets the pointer: through the
Unity Catalog API no table is created holding one, and an update keeps an Iceberg table's pointer
and format (a properties map without the pointer keeps it). Pure functions over assets.
"""

from __future__ import annotations

import dataclasses

from ..entities.asset import Asset
from ..errors import invalid
from .metadata import METADATA_LOCATION, PREVIOUS_METADATA_LOCATION

POINTER_KEYS = (METADATA_LOCATION, PREVIOUS_METADATA_LOCATION)


def props(asset: Asset) -> dict:
    return asset.info.get("properties") or {}


def is_iceberg_table(asset: Asset | None) -> bool:
    return asset is not None and asset.info.get("data_source_format") == "ICEBERG" and \
        asset.info.get("table_type") in ("MANAGED", "EXTERNAL") and METADATA_LOCATION in props(asset)


def is_iceberg_view(asset: Asset | None) -> bool:
    return asset is not None and asset.info.get("table_type") == "VIEW" and METADATA_LOCATION in props(asset)


def refuse_pointer(table: Asset) -> None:
    """A table created through the Unity Catalog API names no metadata file."""
    given = [k for k in POINTER_KEYS if k in props(table)]
    if given:
        raise invalid(f"Property '{given[0]}' is set by the Iceberg REST catalog (create or register the table "
                      "there, at /api/2.1/unity-catalog/iceberg/v1); it cannot be given.")


def keep_pointer(before: Asset | None, table: Asset) -> Asset:
    """`table` as an update through the Unity Catalog API may leave it, `before` being its stored row."""
    if not (is_iceberg_table(before) or is_iceberg_view(before)):
        refuse_pointer(table)
        return table
    old, new = props(before), dict(props(table))
    for key in POINTER_KEYS:
        if key in new and new[key] != old.get(key):
            raise invalid(f"Property '{key}' of Iceberg {before.info.get('table_type', '').lower()} "
                          f"'{before.full_name}' moves only with its commits (the Iceberg REST catalog).")
        if key in old:
            new[key] = old[key]
    if table.info.get("data_source_format") != before.info.get("data_source_format"):
        raise invalid(f"The data_source_format of Iceberg table '{before.full_name}' cannot change.")
    return dataclasses.replace(table, info={**table.info, "properties": new})
