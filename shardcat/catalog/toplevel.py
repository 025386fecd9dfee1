"""Create/get/list/update/delete for the metastore-level objects that are not catalogs.

Credentials, external locations, shares, recipients and providers sit directly under
the metastore, each in its own name namespace. `TopLevel` runs the generic part from
the type's manifest (field rules, names, paging, rename, one write per change) and
calls hooks that the type-specific services (storage.py, sharing.py) override: what
to check and derive on create and update, what follows a rename, what a delete needs,
and how an object is shown (secrets left out).
"""

from __future__ import annotations

import dataclasses

import uuid

from aiohttp import web

from ..auth import Caller
from ..entities.asset import Asset
from ..entities.manifest import AssetType
from ..entities.names import check_name
from ..errors import already_exists, not_found
from ..governance.authorize import authorizer
from ..store.db import WriteTx
from ..entities.values import now_ms
from ..web.paging import decode_page_token, encode_page_token, page_size
from .assets import render
from ..shards.shard import MetastoreState, Shard
from ..web.kit import flag, json_body, ok

INPUT_ONLY = ("skip_validation", "force")   # request flags, never stored


class TopLevel:
    """One metastore-level type; `label` names it in messages ("Credential 'x' does not exist.")."""

    def __init__(self, shard: Shard, t: AssetType, label: str):
        self.shard = shard
        self.store = shard.store
        self.t = t
        self.label = label
        self.list_key = t.list_key

    # ---- hooks ---------------------------------------------------------------

    async def on_create(self, tx: WriteTx, state: MetastoreState, asset: Asset, flags: dict) -> Asset:
        return asset

    async def on_update(self, tx: WriteTx, state: MetastoreState, old: Asset, new: Asset, fields: dict,
                        flags: dict) -> Asset:
        """`flags`: the request's flags, and "authz", the caller's Authz (for checks on what the update names)."""
        return new

    async def on_rename(self, tx: WriteTx, state: MetastoreState, old: Asset, new: Asset) -> None:
        """Objects that refer to this one by name follow the rename."""

    async def on_delete(self, tx: WriteTx, state: MetastoreState, asset: Asset, force: bool) -> None:
        """Refuse (or clean up) while other objects depend on this one."""

    def visible(self, asset: Asset) -> bool:
        """Whether this endpoint family shows the object (the 2.1 storage-credentials show STORAGE ones only)."""
        return True

    def output(self, asset: Asset) -> dict:
        return render(asset)

    def created_output(self, asset: Asset, flags: dict) -> dict:
        """The create answer: `flags` holds what on_create left for it (a plain token shown once)."""
        return self.output(asset)

    # ---- operations ------------------------------------------------------------

    def missing(self, name: str):
        return not_found(f"{self.label} '{name}' does not exist.")

    async def find(self, caller: Caller, name: str, op: str = "read") -> Asset:
        """The object, if the caller may do `op` on it (governance/privileges.py has the rules)."""
        asset = await self.shard.lookup(caller.metastore(), self.t.namespace, check_name(name, self.t.name),
                                        caller.min_version)
        if asset is None or not self.visible(asset):
            raise self.missing(name)
        (await authorizer(self.shard, caller)).require_or_missing(self.t.name, op, asset, self.missing(name))
        return asset

    async def find_in_tx(self, tx: WriteTx, name: str) -> Asset:
        asset = await tx.get(self.t.namespace, check_name(name, self.t.name))
        if asset is None or not self.visible(asset):
            raise self.missing(name)
        return asset

    async def get(self, caller: Caller, name: str) -> dict:
        return self.output(await self.find(caller, name))

    async def list(self, caller: Caller, max_results=None, page_token: str | None = None) -> dict:
        limit = page_size(max_results)
        after = decode_page_token(page_token)
        ms = caller.metastore()
        authz = await authorizer(self.shard, caller)
        allowed = authz.visible_under(self.t.name, None)   # None: all of them

        def keep(a: Asset) -> bool:
            return self.visible(a) and (allowed is None or authz.index.find(a.id) in allowed)

        page = await self.shard.children_where(ms, ms, self.t.namespace, keep, after=after, limit=limit + 1,
                                               min_version=caller.min_version)
        more = len(page) > limit
        page = page[:limit]
        out = {self.list_key: [self.output(a) for a in page]}
        if more:
            out["next_page_token"] = encode_page_token(page[-1].name)
        return out

    async def create(self, caller: Caller, body: dict) -> dict:
        fields = self.t.check_create(body)
        flags = {k: fields.pop(k) for k in INPUT_ONLY if k in fields}
        fields.pop("new_name", None)
        name = check_name(fields.pop("name"), self.t.name)
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            authz.require(self.t.name, "create", None)
            if await tx.get(self.t.namespace, name):
                raise already_exists(f"{self.label} '{name}' already exists.")
            info = {**fields, "owner": caller.name, "created_at": now, "created_by": caller.name,
                    "updated_at": now, "updated_by": caller.name}
            asset = Asset(id=str(uuid.uuid4()), metastore_id=state.id, type=self.t.name, namespace=self.t.namespace,
                          parent_id=state.id, name=name, full_name=name, storage_path=None, info=info)
            asset = await self.on_create(tx, state, asset, flags)
            try:
                return await tx.put(asset)
            except KeyError:
                raise already_exists(f"{self.label} '{name}' already exists.") from None

        return self.created_output(await self.shard.write(caller.metastore(), write), flags)

    async def update(self, caller: Caller, name: str, body: dict) -> dict:
        fields = self.t.check_update(body)
        flags = {k: fields.pop(k) for k in INPUT_ONLY if k in fields}
        new_name = fields.pop("new_name", None)
        requested = fields.pop("name", None)
        if new_name is None and requested is not None and requested.lower() != name.lower():
            new_name = requested   # the 2.1 API renames through `name`
        if new_name is not None:
            new_name = check_name(new_name, self.t.name)
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            old = await self.find_in_tx(tx, name)
            authz.require_or_missing(self.t.name, "update", old, self.missing(name))
            info = {**old.info, **fields, "updated_at": now, "updated_by": caller.name}
            new = await self.on_update(tx, state, old, dataclasses.replace(old, info=info), fields,
                                       {**flags, "authz": authz})
            if new_name is not None and new_name != old.name:
                authz.require(self.t.name, "create", None)   # renaming: the create privilege too
                if await tx.get(self.t.namespace, new_name):
                    raise already_exists(f"{self.label} '{new_name}' already exists.")
                new = dataclasses.replace(new, name=new_name, full_name=new_name)
                written = await tx.put(new)
                await self.on_rename(tx, state, old, written)
                return written
            return await tx.put(new)

        return self.output(await self.shard.write(caller.metastore(), write))

    async def delete(self, caller: Caller, name: str, force: bool = False) -> None:
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            asset = await self.find_in_tx(tx, name)
            authz.require_or_missing(self.t.name, "delete", asset, self.missing(name))
            await self.on_delete(tx, state, asset, force)
            await tx.delete([asset])

        await self.shard.write(caller.metastore(), write)


def crud_routes(service: TopLevel, base: str) -> list[web.RouteDef]:
    async def create(request):
        return ok(await service.create(request["caller"], await json_body(request)))

    async def list_(request):
        return ok(await service.list(request["caller"], request.query.get("max_results"),
                                     request.query.get("page_token")))

    async def get(request):
        return ok(await service.get(request["caller"], request.match_info["name"]))

    async def update(request):
        return ok(await service.update(request["caller"], request.match_info["name"], await json_body(request)))

    async def delete(request):
        await service.delete(request["caller"], request.match_info["name"], flag(request, "force"))
        return ok()

    item = base + "/{name}"
    return [web.post(base, create), web.get(base, list_), web.get(item, get),
            web.patch(item, update), web.delete(item, delete)]
