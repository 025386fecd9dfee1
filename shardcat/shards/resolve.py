"""Batched resolve: everything an engine needs for a query, from one metastore snapshot.

An engine sends the names (three-level: tables and views, and every other three-level
type the manifests define) and storage paths a query touches, with the operation for
each; one `Shard.snapshot` answers them all, and the response names that version. A
problem with one item (a bad name, a missing table) is reported on that item alone.
"""

from __future__ import annotations

from ..auth import Caller
from ..cache.urls import InvalidUrl, normalize_url
from ..entities.names import split_full_name
from ..entities.types import TYPES
from ..errors import CatalogError, invalid
from .service import render
from .shard import Shard

MAX_ITEMS = 1000
OPERATIONS = ("READ", "WRITE")


def _resolvable() -> dict:
    """Securable type -> manifest, for the three-level types an engine can name."""
    return {t.securable_type: t for t in TYPES.values() if t.name_parts == 3 and t.name != "staging_table"}


def _error(code: str, message: str) -> dict:
    return {"error_code": code, "message": message}


class ResolveService:
    def __init__(self, shard: Shard):
        self.shard = shard

    async def resolve(self, caller: Caller, body: dict) -> dict:
        items = self._check(body)
        types = _resolvable()
        names, paths, out = [], [], []
        for item in items:
            entry = {"operation": item.get("operation", "READ").upper()}
            try:
                if "name" in item:
                    t = types.get(item.get("securable_type", "TABLE").upper())
                    if t is None:
                        raise invalid(f"securable_type must be one of {', '.join(sorted(types))}, "
                                      f"got {item.get('securable_type')!r:.40}.")
                    entry.update(name=item["name"], securable_type=t.securable_type)
                    key = (t.namespace, ".".join(split_full_name(item["name"], 3, t.name)))
                    names.append(key)
                    entry["_key"] = key
                else:
                    entry["path"] = item["path"]
                    try:
                        entry["_path"] = normalize_url(item["path"])
                    except InvalidUrl as e:
                        raise invalid(f"Invalid path: {e}") from None
                    paths.append(entry["_path"])
            except CatalogError as e:
                entry["error"] = _error(e.code, e.message)
            out.append(entry)

        snap = await self.shard.snapshot(caller.metastore(), names, paths, caller.min_version)
        for entry in out:
            if "_key" in entry:
                asset = snap.by_name[entry.pop("_key")]
                if asset is None:
                    entry["error"] = _error("NOT_FOUND", f"{entry['securable_type'].capitalize()} "
                                                         f"'{entry['name']}' does not exist.")
                else:
                    entry[asset.type] = render(asset)
            elif "_path" in entry:
                self._path_answer(entry, snap.by_path[entry.pop("_path")])
        return {"metastore_id": caller.metastore(), "metastore_version": snap.version, "items": out}

    @staticmethod
    def _path_answer(entry: dict, owned) -> None:
        owner, asset = owned if owned is not None else (None, None)
        if owner is None or owner.is_root or asset is None:
            where = f"; it lies in the managed storage of {owner.type} '{owner.full_name}'" if owner else ""
            entry["error"] = _error("NOT_FOUND", f"No table or volume owns path '{entry['path']}'{where}.")
            return
        entry.update(name=asset.full_name, securable_type=TYPES[asset.type].securable_type)
        entry[asset.type] = render(asset)

    @staticmethod
    def _check(body: dict) -> list[dict]:
        items = body.get("items")
        if not isinstance(items, list) or not items:
            raise invalid("Field 'items' must be a non-empty list of {\"name\": ...} or {\"path\": ...} objects.")
        if len(items) > MAX_ITEMS:
            raise invalid(f"At most {MAX_ITEMS} items per resolve request, got {len(items)}.")
        for i, item in enumerate(items):
            if not isinstance(item, dict) or ("name" in item) == ("path" in item):
                raise invalid(f"items[{i}] must be an object with exactly one of 'name' or 'path'.")
            for field_name in ("name", "path", "securable_type", "operation"):
                if field_name in item and not isinstance(item[field_name], str):
                    raise invalid(f"items[{i}].{field_name} must be a string.")
            if item.get("operation", "READ").upper() not in OPERATIONS:
                raise invalid(f"items[{i}].operation must be READ or WRITE, got {item['operation']!r:.40}.")
        return items
