"""Tags: key/value tags on catalogs, schemas, tables, views, volumes, functions, models and table
columns, through Databricks' entity-tag-assignments API, and governed tags (tag policies).

A tag is kept in the asset it is on (`info.tags`, `{key: value}`; a column's in its entry of
`info.columns`), so every asset answer shows its tags, and a tag write is an asset write: one
metastore write, versioned, in the change log, audited, replayed by every shard like any other.
Setting or removing a tag needs APPLY TAG on the asset (or above it) or administering it, with
USE CATALOG / USE SCHEMA above; reading tags needs reading the asset.

A tag policy (`/tag-policies`, kept in the metastore's own record) makes a key governed: its
`values` (when given) are the only values it may take, and only metastore admins and the
principals in its `assign_principals` (they hold ASSIGN on it, as Databricks names it) may set
or remove it, on top of APPLY TAG on the asset. Only metastore admins manage tag policies.
"""

from __future__ import annotations

import dataclasses


from ...auth import Caller
from ...entities.asset import Asset
from ...entities.names import full_name_key
from ...entities.types import TYPES
from ...errors import already_exists, invalid, not_found
from ...governance.authorize import authorizer, denied, is_metastore_admin
from ...shards.shard import MetastoreState, Shard
from ...store.writes import WriteTx
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ...web.paging import decode_page_token, encode_page_token, page_size
from ...entities.values import now_ms
from ..tree.assets import missing
from ...governance.tag_policies import (check_key, check_policy, check_value, policy_allows,
                                        require_tag_removal, tag_policies)

# The path's entity_type (Databricks' plural spelling; singular and any case taken too) -> asset type.
ENTITY_TYPES = {
    "catalogs": "catalog", "schemas": "schema", "tables": "table", "views": "table", "volumes": "volume",
    "functions": "function", "registered_models": "registered_model", "models": "registered_model",
    "columns": "column",
}
for _plural, _kind in list(ENTITY_TYPES.items()):
    ENTITY_TYPES.setdefault(_plural[:-1], _kind)
MAX_TAGS = 50                      # per asset or column, as Databricks allows
def entity_kind(entity_type) -> str:
    kind = ENTITY_TYPES.get(entity_type.lower()) if isinstance(entity_type, str) else None
    if kind is None:
        raise invalid(f"Unknown entity_type {entity_type!r:.40}; expected one of "
                      f"{', '.join(k for k in ENTITY_TYPES if k.endswith('s'))}.")
    return kind


def _target(entity_type, entity_name) -> tuple[str, str, str | None]:
    """(asset type, the asset's full-name key, the column name or None) of an entity."""
    kind = entity_kind(entity_type)
    if not isinstance(entity_name, str) or not entity_name:
        raise invalid("Field 'entity_name' must be the full name of the entity.")
    if kind == "column":
        table, _, column = entity_name.rpartition(".")
        if not table or not column:
            raise invalid(f"A column's entity_name is catalog.schema.table.column, got '{entity_name:.100}'.")
        return "table", full_name_key(table, 3, "table"), column
    t = TYPES[kind]
    return kind, full_name_key(entity_name, t.name_parts, kind), None


def _column(asset: Asset, name: str) -> int:
    for i, c in enumerate(asset.info.get("columns") or []):
        if c.get("name", "").lower() == name.lower():
            return i
    raise not_found(f"Column '{name}' does not exist in table '{asset.full_name}'.")


def tags_of(asset: Asset, column: str | None) -> dict:
    if column is None:
        return dict(asset.info.get("tags") or {})
    return dict(asset.info["columns"][_column(asset, column)].get("tags") or {})


def _index_terms(tags: dict | None) -> set[str]:
    return {t for k, v in (tags or {}).items() for t in ((k,) if v is None else (k, f"{k}={v}"))}


def with_tags(asset: Asset, column: str | None, tags: dict) -> Asset:
    """The asset with `tags` on itself (column None) or on a column, and its `tag_index` (what
    search's index reads: every key and key=value of it and its columns) kept a superset of them."""
    info = dict(asset.info)
    info["tag_index"] = sorted(set(info.get("tag_index") or ()) | _index_terms(tags))
    if column is None:
        if tags:
            info["tags"] = tags
        else:
            info.pop("tags", None)
    else:
        columns = [dict(c) for c in info["columns"]]
        col = columns[_column(asset, column)]
        if tags:
            col["tags"] = tags
        else:
            col.pop("tags", None)
        info["columns"] = columns
    return dataclasses.replace(asset, info=info)


def _assignment(entity_type: str, entity_name: str, key: str, value, who: str | None = None,
                at: int | None = None) -> dict:
    out = {"entity_type": entity_type, "entity_name": entity_name, "tag_key": key}
    if value is not None:
        out["tag_value"] = value
    if who is not None:
        out["updated_by"] = who
    if at is not None:
        out["update_time"] = at
    return out


class TagService:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    # ---- assignments ------------------------------------------------------------------------

    async def _read(self, caller: Caller, entity_type: str, entity_name: str) -> tuple[Asset, str | None]:
        kind, key, column = _target(entity_type, entity_name)
        t = TYPES[kind]
        asset = await self.shard.lookup(caller.metastore(), t.namespace, key, caller.min_version)
        gone = missing(t, key)
        if asset is None or (kind != "table" and asset.type != kind):
            raise gone
        authz = await authorizer(self.shard, caller)
        authz.require_or_missing(kind, "read", asset, gone)
        return asset, column

    async def get(self, caller: Caller, entity_type: str, entity_name: str, tag_key: str) -> dict:
        asset, column = await self._read(caller, entity_type, entity_name)
        tags = tags_of(asset, column)
        if tag_key not in tags:
            raise not_found(f"Tag '{tag_key:.100}' is not assigned to {entity_type} '{entity_name:.200}'.")
        return _assignment(entity_type, entity_name, tag_key, tags[tag_key])

    async def list(self, caller: Caller, entity_type: str, entity_name: str, query) -> dict:
        asset, column = await self._read(caller, entity_type, entity_name)
        limit = page_size(query.get("max_results"))
        after = decode_page_token(query.get("page_token"))
        keys = sorted(k for k in tags_of(asset, column) if k > after)
        tags = tags_of(asset, column)
        out = {"tag_assignments": [_assignment(entity_type, entity_name, k, tags[k]) for k in keys[:limit]]}
        if len(keys) > limit:
            out["next_page_token"] = encode_page_token(keys[limit - 1])
        return out

    async def set(self, caller: Caller, entity_type: str, entity_name: str, key: str, value, *,
                  create: bool) -> dict:
        """Create (`create`: refused if the key is there) or update (refused if not) one tag."""
        kind, full, column = _target(entity_type, entity_name)
        key = check_key(key)
        value = check_value(value)
        t = TYPES[kind]
        authz = await authorizer(self.shard, caller)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            asset = await tx.get(t.namespace, full)
            if asset is None or (kind != "table" and asset.type != kind):
                raise missing(t, full)
            authz.require_or_missing(kind, "apply_tag", asset, missing(t, full))
            meta = await self.store.get_metastore(state.id)
            policy = (meta.info.get("tag_policies") or {}).get(key)
            policy_allows(policy, caller, bool(authz.admin), key, value)
            tags = tags_of(asset, column)
            if create and key in tags:
                raise already_exists(f"Tag '{key}' is already assigned to {entity_type} '{entity_name:.200}'; "
                                     "update it with PATCH.")
            if not create and key not in tags:
                raise not_found(f"Tag '{key}' is not assigned to {entity_type} '{entity_name:.200}'.")
            if key not in tags and len(tags) >= MAX_TAGS:
                raise invalid(f"{entity_type} '{entity_name:.200}' already has {MAX_TAGS} tags, the most it may.")
            tags[key] = value
            updated = with_tags(asset, column, tags)
            updated = dataclasses.replace(updated, info={**updated.info, "updated_at": now,
                                                         "updated_by": caller.name})
            await tx.put(updated)

        await self.shard.write(caller.metastore(), write)
        return _assignment(entity_type, entity_name, key, value, caller.name, now)

    async def delete(self, caller: Caller, entity_type: str, entity_name: str, key: str) -> None:
        kind, full, column = _target(entity_type, entity_name)
        t = TYPES[kind]
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            asset = await tx.get(t.namespace, full)
            if asset is None or (kind != "table" and asset.type != kind):
                raise missing(t, full)
            authz.require_or_missing(kind, "apply_tag", asset, missing(t, full))    # before naming a column
            tags = tags_of(asset, column)
            if key not in tags:
                raise not_found(f"Tag '{key:.100}' is not assigned to {entity_type} '{entity_name:.200}'.")
            require_tag_removal(authz, kind, asset, key, tags[key], await tag_policies(self.store, state.id))
            del tags[key]
            await tx.put(with_tags(asset, column, tags))

        await self.shard.write(caller.metastore(), write)

    # ---- tag policies -----------------------------------------------------------------------

    async def _policies(self, caller: Caller) -> dict:
        ms = caller.metastore()
        await self.shard.state(ms, caller.min_version, paths=False)     # caught up; no path asked
        meta = await self.store.get_metastore(ms)
        return meta.info.get("tag_policies") or {}

    async def get_policy(self, caller: Caller, key: str) -> dict:
        policy = (await self._policies(caller)).get(key)
        if policy is None:
            raise not_found(f"Tag policy '{key:.100}' does not exist.")
        return policy

    async def list_policies(self, caller: Caller, query) -> dict:
        policies = await self._policies(caller)
        limit = page_size(query.get("max_results"))
        after = decode_page_token(query.get("page_token"))
        keys = sorted(k for k in policies if k > after)
        out = {"tag_policies": [policies[k] for k in keys[:limit]]}
        if len(keys) > limit:
            out["next_page_token"] = encode_page_token(keys[limit - 1])
        return out

    async def put_policy(self, caller: Caller, body: dict, key: str | None, *, create: bool) -> dict:
        fields = check_policy(body, key)
        key = fields["tag_key"]
        authz = await authorizer(self.shard, caller)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            meta = await self.store.get_metastore(state.id)
            if not (authz.admin or is_metastore_admin(caller, meta)):
                raise denied(f"Principal '{caller.name}' may not manage tag policies: only metastore admins may.")
            policies = dict(meta.info.get("tag_policies") or {})
            if create and key in policies:
                raise already_exists(f"Tag policy '{key}' already exists.")
            if not create and key not in policies:
                raise not_found(f"Tag policy '{key}' does not exist.")
            old = policies.get(key) or {"created_at": now, "created_by": caller.name}
            policy = {**old, **fields, "updated_at": now, "updated_by": caller.name}
            policies[key] = policy
            await tx.update_metastore({**meta.info, "tag_policies": policies}, meta.name)
            return policy

        return await self.shard.write(caller.metastore(), write)

    async def delete_policy(self, caller: Caller, key: str) -> None:
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            meta = await self.store.get_metastore(state.id)
            if not (authz.admin or is_metastore_admin(caller, meta)):
                raise denied(f"Principal '{caller.name}' may not manage tag policies: only metastore admins may.")
            policies = dict(meta.info.get("tag_policies") or {})
            if key not in policies:
                raise not_found(f"Tag policy '{key:.100}' does not exist.")
            del policies[key]
            await tx.update_metastore({**meta.info, "tag_policies": policies}, meta.name)

        await self.shard.write(caller.metastore(), write)


def _body_assignment(body: dict) -> dict:
    """The assignment of a create or update body: its fields at the top, or under `tag_assignment`."""
    inner = body.get("tag_assignment")
    return inner if isinstance(inner, dict) else body


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = TagService(shard)

    async def create(request):
        body = _body_assignment(await json_body(request))
        return ok(await service.set(request["caller"], body.get("entity_type"), body.get("entity_name"),
                                    body.get("tag_key"), body.get("tag_value"), create=True))

    async def get(request):
        m = request.match_info
        return ok(await service.get(request["caller"], m["entity_type"], m["entity_name"], m["tag_key"]))

    async def update(request):
        m = request.match_info
        body = _body_assignment(await json_body(request))
        return ok(await service.set(request["caller"], m["entity_type"], m["entity_name"], m["tag_key"],
                                    body.get("tag_value"), create=False))

    async def delete(request):
        m = request.match_info
        await service.delete(request["caller"], m["entity_type"], m["entity_name"], m["tag_key"])
        return ok({})

    async def list_tags(request):
        m = request.match_info
        return ok(await service.list(request["caller"], m["entity_type"], m["entity_name"], request.query))

    async def create_policy(request):
        body = await json_body(request)
        return ok(await service.put_policy(request["caller"], body.get("tag_policy", body), None, create=True))

    async def list_policies(request):
        return ok(await service.list_policies(request["caller"], request.query))

    async def get_policy(request):
        return ok(await service.get_policy(request["caller"], request.match_info["tag_key"]))

    async def update_policy(request):
        body = await json_body(request)
        body = body.get("tag_policy", body)
        return ok(await service.put_policy(request["caller"], body, check_key(request.match_info["tag_key"]),
                                           create=False))

    async def delete_policy(request):
        await service.delete_policy(request["caller"], request.match_info["tag_key"])
        return ok({})

    return {
        "createEntityTagAssignment": create, "listEntityTagAssignments": list_tags, "getEntityTagAssignment": get,
        "updateEntityTagAssignment": update, "deleteEntityTagAssignment": delete,
        "createTagPolicy": create_policy, "listTagPolicies": list_policies, "getTagPolicy": get_policy,
        "updateTagPolicy": update_policy, "deleteTagPolicy": delete_policy,
    }

