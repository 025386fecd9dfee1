"""The ABAC policies API, shaped like Databricks': create, list, get, update and delete a policy
attached to a catalog, schema or table (governance/abac.py says what a policy is and does).

`POST /policies` takes a PolicyInfo; `GET /policies/{on_securable_type}/{on_securable_fullname}`
lists the policies attached there (`include_inherited=true`: also those on the catalog and schema
above, which is how a table's owner sees the policies in effect on it);
`GET|PATCH|DELETE /policies/{on_securable_type}/{on_securable_fullname}/{name}` one of them.
Every call needs administering the securable (its owner, or MANAGE on it or above), as
Databricks asks; the functions a policy names must exist. Policies are kept in the metastore's
record (a metastore write: versioned, in the change feed, audited), keyed by their id.
"""

from __future__ import annotations

import re
import uuid


from ...auth import Caller
from ...entities.names import check_principal, split_full_name
from ...entities.types import TYPES
from ...entities.values import now_ms
from ...errors import already_exists, invalid, not_found
from ...governance import abac
from ...governance.authorize import authorizer
from ...shards.shard import MetastoreState, Shard
from ...store.writes import WriteTx
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ...web.paging import decode_page_token, encode_page_token, page_size
from ..tree.assets import missing

_KIND = {"CATALOG": "catalog", "SCHEMA": "schema", "TABLE": "table"}
_ALIAS = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAX_PRINCIPALS = 1000
MAX_POLICIES = 10_000       # per metastore


def _kind(value) -> str:
    kind = _KIND.get(value.upper()) if isinstance(value, str) else None
    if kind is None:
        raise invalid(f"on_securable_type must be CATALOG, SCHEMA or TABLE, got {value!r:.40}.")
    return kind


def _key(kind: str, full_name) -> str:
    if not isinstance(full_name, str):
        raise invalid("on_securable_fullname must be a string.")
    return ".".join(split_full_name(full_name, TYPES[kind].name_parts, kind))


def _principals(value, where: str, required: bool) -> list[str]:
    if value is None and not required:
        return []
    if not isinstance(value, list) or (required and not value) or len(value) > MAX_PRINCIPALS:
        raise invalid(f"{where} must be a list of 1 to {MAX_PRINCIPALS} principal names.")
    return sorted({check_principal(p, where) for p in value})


def _using(spec: dict, where: str, aliases: set[str]) -> list[dict]:
    using = spec.get("using") or []
    if not isinstance(using, list):
        raise invalid(f"{where}.using must be a list of {{\"alias\": ...}}.")
    out = []
    for i, u in enumerate(using):
        if not isinstance(u, dict) or set(u) != {"alias"} or not isinstance(u["alias"], str):
            raise invalid(f"{where}.using[{i}] must be {{\"alias\": ...}}: constant arguments are not supported.")
        if u["alias"] not in aliases:
            raise invalid(f"{where}.using[{i}] names alias {u['alias']!r:.40}, which match_columns does not bind.")
        out.append({"alias": u["alias"]})
    return out


def check_policy(body, old: dict | None = None) -> dict:
    """The stored form of a PolicyInfo (create: `old` None; update: the fields given replace old's)."""
    if not isinstance(body, dict):
        raise invalid("The body must be a PolicyInfo object.")
    merged = {**(old or {}), **{k: v for k, v in body.items() if v is not None}}
    name = merged.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 255 or name != name.strip():
        raise invalid("Field 'name' must be a string of 1 to 255 characters without surrounding spaces.")
    kind = _kind(merged.get("on_securable_type"))
    out = {"name": name, "on_securable_type": kind.upper(),
           "on_securable_fullname": _key(kind, merged.get("on_securable_fullname"))}
    if merged.get("policy_type") not in (abac.ROW_FILTER, abac.COLUMN_MASK):
        raise invalid(f"policy_type must be {abac.ROW_FILTER} or {abac.COLUMN_MASK}.")
    out["policy_type"] = merged["policy_type"]
    if str(merged.get("for_securable_type", "")).upper() != "TABLE":
        raise invalid("for_securable_type must be TABLE (the only kind policies act on here).")
    out["for_securable_type"] = "TABLE"
    out["to_principals"] = _principals(merged.get("to_principals"), "to_principals", True)
    out["except_principals"] = _principals(merged.get("except_principals"), "except_principals", False)
    if merged.get("comment") is not None:
        if not isinstance(merged["comment"], str) or len(merged["comment"]) > 10_000:
            raise invalid("Field 'comment' must be a string of at most 10000 characters.")
        out["comment"] = merged["comment"]
    if merged.get("when_condition") is not None:
        abac.parse_condition(merged["when_condition"], "when_condition")
        out["when_condition"] = merged["when_condition"]
    matches = merged.get("match_columns") or []
    if not isinstance(matches, list) or len(matches) > 100:
        raise invalid("match_columns must be a list of at most 100 {\"condition\", \"alias\"}.")
    aliases = set()
    out["match_columns"] = []
    for i, m in enumerate(matches):
        if not isinstance(m, dict) or not isinstance(m.get("alias"), str) or not _ALIAS.fullmatch(m["alias"]):
            raise invalid(f"match_columns[{i}] must have an 'alias' (letters, digits, _) and a 'condition'.")
        if m["alias"] in aliases:
            raise invalid(f"match_columns[{i}]: alias '{m['alias']}' appears twice.")
        abac.parse_condition(m.get("condition"), f"match_columns[{i}].condition")
        aliases.add(m["alias"])
        out["match_columns"].append({"condition": m.get("condition"), "alias": m["alias"]})
    field_name = "row_filter" if out["policy_type"] == abac.ROW_FILTER else "column_mask"
    spec = merged.get(field_name)
    if not isinstance(spec, dict) or not isinstance(spec.get("function_name"), str):
        raise invalid(f"A {out['policy_type']} policy needs {field_name} {{\"function_name\", ...}}.")
    checked = {"function_name": ".".join(split_full_name(spec["function_name"], 3, "function")),
               "using": _using(spec, field_name, aliases)}
    if field_name == "column_mask":
        if not isinstance(spec.get("on_column"), str) or spec["on_column"] not in aliases:
            raise invalid("column_mask.on_column must be an alias that match_columns binds.")
        checked["on_column"] = spec["on_column"]
    out[field_name] = checked
    return out


class PolicyService:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    async def _securable(self, caller: Caller, kind: str, key: str, *, tx: WriteTx | None = None):
        """The securable a policy is attached to, if the caller administers it."""
        t = TYPES[kind]
        if tx is not None:
            asset = await tx.get(t.namespace, key)
        else:
            asset = await self.shard.lookup(caller.metastore(), t.namespace, key, caller.min_version)
        if asset is None or (kind != "table" and asset.type != kind):
            raise missing(t, key)
        authz = await authorizer(self.shard, caller)
        authz.require_or_missing(kind, "update", asset, missing(t, key))
        return asset

    async def _stored(self, metastore_id: str) -> dict:
        meta = await self.store.get_metastore(metastore_id)
        return dict(meta.info.get("abac_policies") or {}), meta

    async def create(self, caller: Caller, body: dict) -> dict:
        policy = check_policy(body)
        kind = policy["on_securable_type"].lower()
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            await self._securable(caller, kind, policy["on_securable_fullname"], tx=tx)
            fn = policy.get("row_filter", policy.get("column_mask"))["function_name"]
            if await tx.get("function", fn) is None:
                raise invalid(f"Function '{fn}' does not exist.")
            stored, meta = await self._stored(state.id)
            if any(_same(p, policy) for p in stored.values()):
                raise already_exists(f"Policy '{policy['name']}' already exists on "
                                     f"{kind} '{policy['on_securable_fullname']}'.")
            if len(stored) >= MAX_POLICIES:
                raise invalid(f"A metastore holds at most {MAX_POLICIES} policies.")
            new = {**policy, "id": str(uuid.uuid4()), "created_at": now, "created_by": caller.name,
                   "updated_at": now, "updated_by": caller.name}
            stored[new["id"]] = new
            await tx.update_metastore({**meta.info, "abac_policies": stored}, meta.name)
            return new

        return await self.shard.write(caller.metastore(), write)

    async def list(self, caller: Caller, on_type: str, on_name: str, query) -> dict:
        kind = _kind(on_type)
        key = _key(kind, on_name)
        await self._securable(caller, kind, key)
        inherited = flag_value(query.get("include_inherited"))
        parts = key.split(".")
        where = {".".join(parts[:i]) for i in range(1, len(parts) + 1)} if inherited else {key}
        policies = await abac.policies_of(self.shard, caller.metastore(), caller.min_version)
        found = sorted((p.info for p in policies if p.info["on_securable_fullname"] in where),
                       key=lambda p: (p["on_securable_fullname"], p["name"]))
        limit = page_size(query.get("max_results"))
        after = decode_page_token(query.get("page_token"))
        rest = [p for p in found if f"{p['on_securable_fullname']}\x00{p['name']}" > after] if after else found
        out = {"policies": rest[:limit]}
        if len(rest) > limit:
            last = rest[limit - 1]
            out["next_page_token"] = encode_page_token(f"{last['on_securable_fullname']}\x00{last['name']}")
        return out

    async def get(self, caller: Caller, on_type: str, on_name: str, name: str) -> dict:
        kind = _kind(on_type)
        key = _key(kind, on_name)
        await self._securable(caller, kind, key)
        policies = await abac.policies_of(self.shard, caller.metastore(), caller.min_version)
        for p in policies:
            if p.info["on_securable_fullname"] == key and p.info["on_securable_type"] == kind.upper() \
                    and p.info["name"] == name:
                return p.info
        raise not_found(f"Policy '{name:.100}' does not exist on {kind} '{key}'.")

    async def update(self, caller: Caller, on_type: str, on_name: str, name: str, body: dict) -> dict:
        kind = _kind(on_type)
        key = _key(kind, on_name)
        if not isinstance(body, dict):
            raise invalid("The body must be a PolicyInfo object.")
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            await self._securable(caller, kind, key, tx=tx)
            stored, meta = await self._stored(state.id)
            old = _find(stored, kind, key, name)
            changes = {k: v for k, v in body.items() if k not in ("on_securable_type", "on_securable_fullname", "id")}
            policy = check_policy(changes, old)
            fn = policy.get("row_filter", policy.get("column_mask"))["function_name"]
            if await tx.get("function", fn) is None:
                raise invalid(f"Function '{fn}' does not exist.")
            if policy["name"] != name and any(_same(p, policy) for p in stored.values()):
                raise already_exists(f"Policy '{policy['name']}' already exists on {kind} '{key}'.")
            new = {**policy, "id": old["id"], "created_at": old["created_at"], "created_by": old["created_by"],
                   "updated_at": now, "updated_by": caller.name}
            stored[old["id"]] = new
            await tx.update_metastore({**meta.info, "abac_policies": stored}, meta.name)
            return new

        return await self.shard.write(caller.metastore(), write)

    async def delete(self, caller: Caller, on_type: str, on_name: str, name: str) -> None:
        kind = _kind(on_type)
        key = _key(kind, on_name)

        async def write(tx: WriteTx, state: MetastoreState):
            await self._securable(caller, kind, key, tx=tx)
            stored, meta = await self._stored(state.id)
            del stored[_find(stored, kind, key, name)["id"]]
            await tx.update_metastore({**meta.info, "abac_policies": stored}, meta.name)

        await self.shard.write(caller.metastore(), write)


def flag_value(value) -> bool:
    return isinstance(value, str) and value.lower() == "true"


def _same(a: dict, b: dict) -> bool:
    return (a["on_securable_type"], a["on_securable_fullname"], a["name"]) == \
        (b["on_securable_type"], b["on_securable_fullname"], b["name"])


def _find(stored: dict, kind: str, key: str, name: str) -> dict:
    for p in stored.values():
        if p["on_securable_type"] == kind.upper() and p["on_securable_fullname"] == key and p["name"] == name:
            return p
    raise not_found(f"Policy '{name:.100}' does not exist on {kind} '{key}'.")


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = PolicyService(shard)

    async def create(request):
        body = await json_body(request)
        return ok(await service.create(request["caller"], body.get("policy_info", body)))

    async def list_policies(request):
        m = request.match_info
        return ok(await service.list(request["caller"], m["on_securable_type"], m["on_securable_fullname"],
                                     request.query))

    async def get(request):
        m = request.match_info
        return ok(await service.get(request["caller"], m["on_securable_type"], m["on_securable_fullname"], m["name"]))

    async def update(request):
        m = request.match_info
        body = await json_body(request)
        return ok(await service.update(request["caller"], m["on_securable_type"], m["on_securable_fullname"],
                                       m["name"], body.get("policy_info", body)))

    async def delete(request):
        m = request.match_info
        await service.delete(request["caller"], m["on_securable_type"], m["on_securable_fullname"], m["name"])
        return ok({})

    return {"createPolicy": create, "listPolicies": list_policies, "getPolicy": get, "updatePolicy": update,
            "deletePolicy": delete}

