"""The one generic type service: create/get/list/update/delete of one asset type, with explicit hooks.

`TypeService` does what every type shares, from its manifest (entities/types.py): field rules,
names, the parent it lives under, privileges, paging, renames, one `Shard.write` per change,
validated inside the write's transaction. What a type adds is its own module's subclass, through
the hooks below (each one no-op by default): what creating and updating check and derive
(`on_create`, `on_update`), what follows a rename and what a delete needs (`on_rename`,
`on_delete`), which objects an endpoint family shows (`shows`) and how one is answered (`output`,
`read_outputs`, `written_output`). The types a shard serves are listed in catalog/tree/service.py
(the catalog tree), catalog/tree/storage.py and catalog/features/sharing.py (the metastore-level types).

Names: a type under the catalog tree is named by its full name (`catalog.schema.name`) and holds
what lies below it (renamed with it, refused or deleted with it); a `MetastoreLevel` type is
named by one plain name and holds nothing.
"""

from __future__ import annotations

import dataclasses

import uuid


from ...auth import Caller
from ...entities.asset import Asset
from ...entities.foreign import (GOVERNANCE_FIELDS, connection_of, in_foreign_catalog, is_foreign_catalog,
                                is_mirrored, only_masks_differ)
from ...entities.foreign import refused as foreign_refusal
from ...entities.manifest import AssetType
from ...entities.names import check_name, full_name_key
from ...entities.types import TYPES
from ...entities.values import now_ms
from ...errors import CatalogError, already_exists, not_found
from ...governance.authorize import authorizer
from ...shards.shard import MetastoreState, Shard
from ...store.writes import UNKNOWN, WriteTx
from ...web.kit import flag, json_body, ok
from ...web.routes import Handler
from ...web.paging import decode_page_token, encode_page_token, page_size
from .assets import PARENT_FIELDS, missing, render, type_label

INPUT_ONLY = ("skip_validation", "force")   # request flags, never stored
# The namespaces of the containers PARENT_FIELDS name, in their order: a catalog, then a schema.
_CONTAINER_NAMESPACES = (TYPES["catalog"].namespace, TYPES["schema"].namespace)


async def _taken_or_fail(tx: WriteTx, namespace: str, full_name: str, refused: CatalogError) -> bool:
    """Whether a name is taken, read after the write was refused for another reason; that refusal
    stands if the read cannot be made (the transaction is in error)."""
    try:
        return await tx.get(namespace, full_name) is not None
    except Exception:
        raise refused from None


class TypeService:
    """One asset type of the metastores a shard owns; `label` names it in messages
    ("Table 'c.s.t' does not exist.")."""

    holds_children = True       # what lies below an asset is renamed and deleted with it

    def __init__(self, shard: Shard, t: AssetType, label: str | None = None):
        self.shard = shard
        self.store = shard.store
        self.t = t
        self.label = label or type_label(t)
        self.list_key = t.list_key
        self.parent_type = TYPES.get(t.parent)     # None: the metastore
        # Which objects this endpoint family shows (None: all; the 2.1 storage credentials: STORAGE ones).
        self.shows = None
        # Schemas and tables: the foreign catalogs' mirror (foreign.py), made fresh before a read.
        self.foreign = None

    # ---- hooks ---------------------------------------------------------------

    def key(self, name) -> str:
        """The stored key of a name in a request's path, validated."""
        return full_name_key(name, self.t.name_parts, self.t.name)

    async def on_create(self, tx: WriteTx, state: MetastoreState, asset: Asset, parent: Asset | None,
                        flags: dict) -> Asset:
        """The asset about to be created, checked and completed (a storage path...). `flags`: the
        request's input-only flags; what is left in it reaches `written_output`."""
        return asset

    async def on_update(self, tx: WriteTx, state: MetastoreState, old: Asset, new: Asset, fields: dict,
                        flags: dict) -> Asset:
        """The asset about to be written, `new` being `old` with the fields asked for. `flags`: the
        request's flags, and "authz", the caller's Authz (for checks on what the update names)."""
        return new

    async def on_rename(self, tx: WriteTx, state: MetastoreState, old: Asset, new: Asset) -> None:
        """What follows a rename, once the renamed asset is written: by default, what lies below it
        (its full name leads theirs)."""
        if not self.holds_children:
            return
        old_prefix = old.full_name + "."
        for child in await tx.descendants(old.id):
            child_full = new.full_name + "." + child.full_name.removeprefix(old_prefix)
            await tx.put(dataclasses.replace(child, full_name=child_full))

    async def on_delete(self, tx: WriteTx, state: MetastoreState, asset: Asset, force: bool) -> None:
        """Refuse (or clean up) while other objects depend on this one."""

    async def after_create(self, tx: WriteTx, state: MetastoreState, asset: Asset) -> None:
        """What the new asset comes with, written in its creation's transaction once it is put."""

    def comes_with(self, asset: Asset, below: list[Asset]) -> bool:
        """Whether `asset`, below the one being deleted, is part of it (deleted without force)."""
        return asset.type == "staging_table"

    def output(self, asset: Asset) -> dict:
        """An asset as its answers show it."""
        return render(asset)

    async def read_outputs(self, caller: Caller, assets: list[Asset]) -> list[dict]:
        """Assets as a get or a list answers them to this caller."""
        return [self.output(a) for a in assets]

    def written_output(self, caller: Caller, asset: Asset, flags: dict) -> dict:
        """The answer of a create or update: `flags` holds what on_create left for it (a plain token shown once)."""
        return self.output(asset)

    # ---- lookups -------------------------------------------------------------

    def missing(self, name: str) -> CatalogError:
        """The answer for a name that does not exist, and for one the caller may not see."""
        return not_found(f"{self.label} '{name}' does not exist.")

    def _shown(self, asset: Asset | None) -> bool:
        return asset is not None and (self.shows is None or self.shows(asset))

    async def find(self, caller: Caller, name: str, op: str = "read") -> Asset:
        """The asset, if the caller may do `op` on it (governance/privileges.py has the rules)."""
        key = self.key(name)
        if self.foreign is not None:
            await self.foreign.before_read(caller, self.t.name, key, False)
        asset = await self.shard.lookup(caller.metastore(), self.t.namespace, key, caller.min_version)
        if asset is None or (self.shows is not None and not self.shows(asset)):
            raise self.missing(name)
        (await authorizer(self.shard, caller)).require_or_missing(self.t.name, op, asset, lambda: self.missing(name))
        return asset

    async def find_in_tx(self, tx: WriteTx, name: str, key: str | None = None) -> Asset:
        asset = await tx.get(self.t.namespace, key if key is not None else self.key(name))
        if not self._shown(asset):
            raise self.missing(name)
        return asset

    async def _parent_in_tx(self, tx: WriteTx, parent_full: str) -> Asset | None:
        if self.parent_type is None:
            return None
        parent = await tx.get(self.parent_type.namespace, parent_full)
        if parent is None:
            raise missing(self.parent_type, parent_full)
        return parent

    # ---- reads ---------------------------------------------------------------

    async def get(self, caller: Caller, name: str) -> dict:
        return (await self.read_outputs(caller, [await self.find(caller, name)]))[0]

    async def list(self, caller: Caller, parent_full: str | None = None, max_results=None,
                   page_token: str | None = None) -> dict:
        page, next_token = await self.list_page(caller, parent_full, max_results, page_token)
        out = {self.list_key: await self.read_outputs(caller, page)}
        if next_token:
            out["next_page_token"] = next_token
        return out

    async def list_page(self, caller: Caller, parent_full: str | None, max_results=None,
                        page_token: str | None = None) -> tuple[list[Asset], str | None]:
        """A page of the assets the caller may see (under `parent_full`, for a type with a parent),
        and the next page's token (None: the last page)."""
        limit = page_size(max_results)
        after = decode_page_token(page_token)
        ms = caller.metastore()
        authz = await authorizer(self.shard, caller)
        parent = None
        if self.parent_type is not None:
            parent_type = self.parent_type
            key = full_name_key(parent_full, parent_type.name_parts, parent_type.name)
            if self.foreign is not None:
                await self.foreign.before_read(caller, self.t.name, key, True)
            parent = await self.shard.lookup(ms, parent_type.namespace, key, caller.min_version)
            if parent is None:
                raise missing(parent_type, parent_full)
            authz.require_or_missing(parent.type, "read", parent, lambda: missing(parent_type, parent_full))
        visible = authz.visible_under(self.t.name, parent)   # None: all of them
        shows = self.shows
        if visible is None:
            keep = shows
        elif shows is None:
            keep = lambda a: authz.index.find(a.id) in visible   # noqa: E731
        else:
            keep = lambda a: shows(a) and authz.index.find(a.id) in visible   # noqa: E731
        page = await self.shard.children_where(ms, parent.id if parent else ms, self.t.namespace, keep, after=after,
                                               limit=limit + 1, min_version=caller.min_version)
        more = len(page) > limit
        page = page[:limit]
        return page, encode_page_token(page[-1].name) if more else None

    # ---- writes --------------------------------------------------------------

    async def create(self, caller: Caller, body: dict) -> dict:
        t = self.t
        fields = t.check_create(body)
        flags = {k: fields.pop(k) for k in INPUT_ONLY if k in fields}
        fields.pop("new_name", None)
        name = check_name(fields.pop("name"), t.name)
        parent_names = [check_name(fields.pop(f), f.removesuffix("_name")) for f in PARENT_FIELDS[: t.name_parts - 1]]
        parent_full = ".".join(parent_names)
        full_name = ".".join([*parent_names, name])
        now = now_ms()
        authz = await authorizer(self.shard, caller)
        # One id for every attempt: a managed path ends in it, and a cold owner loads that path once
        # (shards/cold_paths.py), not a new one each time the write runs again.
        fresh = str(uuid.uuid4())

        async def write(tx: WriteTx, state: MetastoreState):
            parent = await self._parent_in_tx(tx, parent_full)
            gone = missing(self.parent_type, parent_full) if parent is not None else None
            authz.require_or_missing(t.name, "create", None, gone, parent=parent)
            if in_foreign_catalog(parent):
                raise foreign_refusal(f"create {self.label.lower()} in", parent.full_name, connection_of(parent))
            taken = tx.known(t.namespace, full_name)
            if taken is not UNKNOWN and taken is not None:
                raise already_exists(f"{self.label} '{full_name}' already exists.")
            # Not read yet: the names' unique constraint decides it as the asset is put (one round
            # trip less); a refusal before that still answers "already exists" first, as if read.
            info = {**fields, "owner": caller.name, "created_at": now, "created_by": caller.name,
                    "updated_at": now, "updated_by": caller.name}
            asset = Asset(id=fresh, metastore_id=state.id, type=t.name, namespace=t.namespace,
                          parent_id=parent.id if parent else state.id, name=name, full_name=full_name,
                          storage_path=None, info=info)
            try:
                asset = await self.on_create(tx, state, asset, parent, flags)   # what it adds to flags is answered
                authz.require_storage(state, asset)     # storage inside an external location
            except CatalogError as refused:
                if taken is UNKNOWN and await _taken_or_fail(tx, t.namespace, full_name, refused):
                    raise already_exists(f"{self.label} '{full_name}' already exists.") from None
                raise
            try:
                created = await tx.put(asset, new=asset.id == fresh)     # not a staging table's id
            except KeyError:
                raise already_exists(f"{self.label} '{full_name}' already exists.") from None
            await self.after_create(tx, state, created)
            return created

        flags["authz"] = authz      # for on_create's checks on what the asset names (not answered)
        # Its group reads the containers up the tree at once (the table's catalog too: its defaults).
        above = tuple(("asset", ns, ".".join(parent_names[:i + 1]))
                      for i, ns in enumerate(_CONTAINER_NAMESPACES[:len(parent_names)]))
        written = await self.shard.write(caller.metastore(), write, prefetch=above)
        flags.pop("authz")
        return self.written_output(caller, written, flags)

    async def update(self, caller: Caller, name: str, body: dict) -> dict:
        t = self.t
        key = self.key(name)
        fields = t.check_update(body)
        flags = {k: fields.pop(k) for k in INPUT_ONLY if k in fields}
        new_name = fields.pop("new_name", None)
        requested = fields.pop("name", None)
        if new_name is None and requested is not None and requested.lower() != key.rpartition(".")[2]:
            new_name = requested   # the 2.1 API renames through `name`
        if new_name is not None:
            new_name = check_name(new_name, t.name)
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            old = await self.find_in_tx(tx, name, key)
            authz.require_or_missing(t.name, "update", old, self.missing(name))
            if is_mirrored(old) and (new_name is not None or not _governance_only(old, fields)):
                raise foreign_refusal("change", old.full_name, connection_of(old))
            info = {**old.info, **fields, "updated_at": now, "updated_by": caller.name}
            new = await self.on_update(tx, state, old, dataclasses.replace(old, info=info), fields,
                                       {**flags, "authz": authz})
            if new.storage_path != old.storage_path:
                authz.require_storage(state, new)
            if new_name is None or new_name == old.name:
                return await tx.put(new)
            # Renaming is creating under the new name too: the create privilege on the container.
            container = await self._parent_in_tx(tx, key.rpartition(".")[0])
            authz.require(t.name, "create", None, parent=container)
            new_full = ".".join([*old.full_name.split(".")[:-1], new_name])
            if await tx.get(t.namespace, new_full):
                raise already_exists(f"{self.label} '{new_full}' already exists.")
            renamed = await tx.put(dataclasses.replace(new, name=new_name, full_name=new_full))
            await self.on_rename(tx, state, old, renamed)
            return renamed

        return self.written_output(caller, await self.shard.write(caller.metastore(), write), flags)

    async def delete(self, caller: Caller, name: str, force: bool = False) -> None:
        key = self.key(name)
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            asset = await self.find_in_tx(tx, name, key)
            authz.require_or_missing(self.t.name, "delete", asset, self.missing(name))
            if is_mirrored(asset):
                raise foreign_refusal("delete", asset.full_name, connection_of(asset))
            below = await tx.descendants(asset.id) if self.holds_children else []
            visible = [a for a in below if not self.comes_with(a, below)]
            if visible and not force and not is_foreign_catalog(asset):     # a mirror goes with its catalog
                raise CatalogError(
                    "FAILED_PRECONDITION",
                    f"{self.label} '{name}' is not empty: it contains {len(visible)} object(s), "
                    f"e.g. {visible[0].type} '{visible[0].full_name}'. Delete them first or pass force=true.",
                )
            await self.on_delete(tx, state, asset, force)
            await tx.delete([asset, *below])

        await self.shard.write(caller.metastore(), write)


def _governance_only(old: Asset, fields: dict) -> bool:
    """Whether an update of a mirrored schema or table sets governance only (an owner, a row filter,
    the columns' masks): the rest is the foreign system's."""
    for key, value in fields.items():
        if key in GOVERNANCE_FIELDS:
            continue
        if key == "columns" and only_masks_differ(old.info.get("columns") or [], value):
            continue
        if old.info.get(key) != value:
            return False
    return True


class MetastoreLevel(TypeService):
    """A type directly under the metastore besides catalogs (credentials, external locations, shares,
    recipients, providers): named by one plain name, holding nothing below it."""

    holds_children = False

    def key(self, name) -> str:
        return check_name(name, self.t.name)


def crud_handlers(service: TypeService, noun: str) -> dict[str, Handler]:
    """The five handlers of a metastore-level type, by operationId: create`noun`, list`noun`s, get`noun`...
    (the catalog tree's are serving/app.py's, with their fast encodings)."""
    async def create(request):
        return ok(await service.create(request["caller"], await json_body(request)))

    async def list_(request):
        return ok(await service.list(request["caller"], None, request.query.get("max_results"),
                                     request.query.get("page_token")))

    async def get(request):
        return ok(await service.get(request["caller"], request.match_info["name"]))

    async def update(request):
        return ok(await service.update(request["caller"], request.match_info["name"], await json_body(request)))

    async def delete(request):
        await service.delete(request["caller"], request.match_info["name"], flag(request, "force"))
        return ok()

    return {f"create{noun}": create, f"list{noun}s": list_, f"get{noun}": get, f"update{noun}": update,
            f"delete{noun}": delete}
