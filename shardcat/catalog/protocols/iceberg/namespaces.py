"""The Iceberg REST catalog's config (the warehouse prefix, the endpoints served) and its namespace operations:
list, create, load, drop, and update properties of a catalog or schema.
"""

from __future__ import annotations

from ....auth import Caller
from ....entities.names import check_name
from ....errors import CatalogError
from ....iceberg.tables import props as properties_of
from ....web.registry import ICEBERG_OPERATIONS
from . import idempotency
from .base import IcebergBase
from .errors import IcebergError, taken


# What /v1/config lists: the operations of the endpoint registry (web/registry.py).
# ({plan_id} is the spec's {plan-id}: aiohttp's route parameters are identifiers.)
ENDPOINTS = [f"{method} /v1/{{prefix}}{path}".replace("{plan_id}", "{plan-id}")
             for method, path, _ in ICEBERG_OPERATIONS]


class Namespaces(IcebergBase):
    """config and the namespace operations."""

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
        return {"defaults": {}, "overrides": overrides, "endpoints": ENDPOINTS,
                "idempotency-key-lifetime": idempotency.LIFETIME}

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
        props = dict(properties_of(asset))
        if asset.info.get("comment"):          # an empty comment is none (a removed one)
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
        if "location" in updates or "location" in removals:
            raise IcebergError(400, "BadRequestException", "A namespace's 'location' is its storage root, set when "
                                                           "it is created; it cannot change.")
        asset = await self._container(caller, self.namespace_name(warehouse, levels))
        # `comment` is the catalog's or schema's comment (as load_namespace answers it), the rest its properties
        props = {k: v for k, v in properties_of(asset).items() if k != "comment"}
        had = dict(props, **({"comment": asset.info["comment"]} if asset.info.get("comment") else {}))
        absent = [k for k in removals if k not in had]
        for k in removals:
            props.pop(k, None)
        props.update({k: v for k, v in updates.items() if k != "comment"})
        fields = {"properties": props}
        if "comment" in updates or "comment" in removals:
            fields["comment"] = updates.get("comment", "")
        await self.catalogs.update(caller, asset.type, asset.full_name, fields)
        return {"updated": sorted(updates), "removed": sorted(set(removals) - set(absent)), "missing": absent}
