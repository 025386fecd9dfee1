"""How an asset is shown, and the storage rules the catalog tree's types share.

`render` is an asset as the API returns it; `present`/`presented_json` the same, encoded once
per asset state for the read paths (the app's gets and lists, the shard front, resolve). The
storage helpers below are used by the types' own rules (tables.py, containers.py, volumes.py,
models.py): storage URLs, one asset per storage path, the managed storage root. The generic
create/get/list/update/delete is crud.py's `TypeService`.
"""

from __future__ import annotations

import orjson

from ...auth import Caller
from ...entities.urls import InvalidUrl, normalize_url
from ...entities.asset import Asset
from ...entities.manifest import AssetType
from ...entities.types import TYPES
from ...errors import CatalogError, invalid, not_found
from ...governance.authorize import present_table
from ...store.writes import WriteTx
from ...web.kit import encode_json
from ...shards.shard import MetastoreState

PARENT_FIELDS = ("catalog_name", "schema_name")


def render(asset: Asset) -> dict:
    """An asset as the API returns it: stored fields plus names and ids derived from where it sits."""
    t = TYPES[asset.type]
    out = dict(asset.info)
    out.pop("tag_index", None)      # search's, not the asset's (catalog/features/tags.py)
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


def checked_storage_url(value: str, field_name: str) -> str:
    try:
        return normalize_url(value)
    except InvalidUrl as e:
        raise invalid(f"Invalid {field_name}: {e}") from None


def type_label(t: AssetType) -> str:
    """A type's name for messages: "Registered model", not "Registered_model"."""
    return t.name.replace("_", " ").capitalize()


def missing(t: AssetType, full_name: str) -> CatalogError:
    """The answer for a name that does not exist, and for one the caller may not see."""
    return not_found(f"{type_label(t)} '{full_name}' does not exist.")


# ---- storage: what the types' create and update rules share ----------------------------


def check_free(state: MetastoreState, url: str, what: str, *, inside_managed: bool, moving: str | None = None) -> None:
    """One asset per path: refuse a url that overlaps another asset's (managed roots count unless
    inside_managed; `moving`: the id of the asset moving to `url`, whose own path does not count).
    It only reads the tries: a group's writes change them only through their undoable speculation."""
    ignore = None
    if inside_managed or moving is not None:
        ignore = lambda o: (inside_managed and o.is_root) or o.asset_id == moving    # noqa: E731
    hit = state.trie.first_overlap(url, ignore=ignore)
    if hit is not None:
        hit_url, owner = hit
        raise invalid(f"The {what} '{url}' overlaps the storage of {owner.type} '{owner.full_name}' at '{hit_url}'.")


async def managed_root(tx: WriteTx, state: MetastoreState, schema: Asset) -> str:
    if schema.info.get("storage_location"):
        return schema.info["storage_location"]
    catalog = await tx.get("catalog", schema.full_name.split(".")[0])
    if catalog and catalog.info.get("storage_location"):
        return catalog.info["storage_location"]
    root = state.storage_root
    if root is None:
        raise CatalogError("FAILED_PRECONDITION", "No managed storage root is set on the schema, catalog or metastore.")
    return root


