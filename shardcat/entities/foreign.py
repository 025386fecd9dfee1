"""Foreign catalogs' marks on assets, and the one answer to a write that would change what a foreign system owns.

A catalog mounted from a connection (`catalog_type` FOREIGN_CATALOG) holds schemas and tables that
mirror the foreign system's (catalog/tree/foreign.py): each carries `info.foreign` (the connection and
its name there). Only the mirror writes them; through shardcat's APIs they take governance only (an
owner, grants, tags, a row filter, column masks), and nothing is created inside them.
"""

from __future__ import annotations

from ..errors import invalid

FOREIGN_CATALOG = "FOREIGN_CATALOG"
# What a mirrored table or schema takes through the Unity Catalog API: shardcat's own governance.
GOVERNANCE_FIELDS = frozenset({"owner", "row_filter"})


def is_foreign_catalog(asset) -> bool:
    return asset is not None and asset.type == "catalog" and asset.info.get("catalog_type") == FOREIGN_CATALOG


def is_mirrored(asset) -> bool:
    """A schema or table of a foreign catalog (written by the mirror only)."""
    return asset is not None and isinstance(asset.info.get("foreign"), dict)


def in_foreign_catalog(container) -> bool:
    """Whether a container (the parent of something about to be created) is a foreign catalog or lies in one."""
    return is_foreign_catalog(container) or is_mirrored(container)


def refused(what: str, full_name: str, connection: str | None) -> Exception:
    through = f" (connection '{connection}')" if connection else ""
    return invalid(f"Cannot {what} '{full_name}': it lies in a foreign catalog{through}, whose schemas and tables "
                   "are written in the foreign system and read through shardcat; only governance (owner, grants, "
                   "tags, row filters, column masks) is set here.")


def connection_of(asset) -> str | None:
    if is_foreign_catalog(asset):
        return asset.info.get("connection_name")
    return asset.info["foreign"].get("connection") if is_mirrored(asset) else None


def only_masks_differ(old_columns: list, new_columns) -> bool:
    """Whether new columns are the old ones with only their masks changed (a mask is governance)."""
    if not isinstance(new_columns, list) or len(new_columns) != len(old_columns):
        return False
    for old, new in zip(old_columns, new_columns):
        if not isinstance(new, dict) or new.get("name", "").lower() != old.get("name", "").lower() \
                or new.get("type_name", old.get("type_name")) != old.get("type_name"):
            return False
    return True
