"""Grants: the permissions and authorization APIs over them.

Grants are metastore state (table `grants`, migration 0005). Every change is one
`Shard.write`: the rows change in the transaction that bumps the metastore version, and the
change-log row names the securable, so every shard owning the metastore picks the change up
when it reconciles, exactly as it does for assets; each shard's privilege index follows them
(governance/index.py). The SQL is store/grants.py's and `WriteTx.set_grants`'.

Endpoints:
- `GET/PATCH/PUT /permissions/{securable_type}/{full_name}`: PermissionsList
  {privilege_assignments: [{principal, privileges}]}, UpdatePermissions {changes: [{principal,
  add, remove}]}; PUT replaces every grant on the securable. `principal` filters a GET.
- `GET /effective-permissions/{securable_type}/{full_name}`: what each principal holds there,
  with `inherited_from_type` / `inherited_from_name` for what comes from above.
- `POST /shardcat/authorize`: may a principal (self; anyone, for admins) use these securables, and how.
"""

from __future__ import annotations


from ..auth import Caller
from ..cache.ttl import TtlCache
from ..entities.asset import Asset
from ..entities.names import check_principal, split_full_name
from ..entities.types import TYPES
from ..errors import CatalogError, invalid, not_found
from ..store.writes import WriteTx
from ..store.grants import is_account_admin
from ..store.protocol import CatalogStore
from ..entities.values import now_ms
from . import privileges as P
from .authorize import Authz, authorizer, denied, label
from .index import privilege_index, request_index
from ..web.kit import json_body, ok
from ..web.routes import Handler, ShardServing

MAX_AUTHORIZE_ITEMS = 1000


# ---- the permissions API -------------------------------------------------------------------

def _assignments(held: dict[str, set[str]] | dict[str, frozenset[str]], principal: str | None = None) -> dict:
    return {"privilege_assignments": [
        {"principal": p, "privileges": sorted(privs)} for p, privs in sorted(held.items())
        if privs and (principal is None or p == principal)]}


def _changes(body: dict, kind: str) -> list[tuple[str, set[str], set[str]]]:
    changes = body.get("changes")
    if not isinstance(changes, list):
        raise invalid("Field 'changes' must be a list of {principal, add, remove} objects.")
    out = []
    for i, c in enumerate(changes):
        if not isinstance(c, dict) or not isinstance(c.get("principal"), str) or not c["principal"].strip():
            raise invalid(f"changes[{i}] must be an object with a non-empty string 'principal'.")
        principal = check_principal(c["principal"], f"changes[{i}].principal")
        lists = []
        for key in ("add", "remove"):
            value = c.get(key) or []
            if not isinstance(value, list):
                raise invalid(f"changes[{i}].{key} must be a list of privileges.")
            lists.append({P.privilege_name(v, kind) for v in value})
        out.append((principal, *lists))
    return out


def _missing(kind: str, full_name: str) -> CatalogError:
    """The answer for a securable that does not exist, and for one the caller may not see."""
    return not_found(f"{label(kind).capitalize()} '{full_name}' does not exist.")

class Subjects:
    """Who a principal other than the caller is, by name: itself and its groups (transitively), and
    whether it is an account admin (for admins who ask on its behalf, for a share's owner). Kept
    `ttl` seconds: as fresh as a caller's own identity (the authenticator's 5 s bound)."""

    def __init__(self, store, ttl: float = 5.0):
        self.store = store
        self._known = TtlCache(maxsize=10_000, ttl=ttl)

    async def of(self, principal: str) -> tuple[frozenset[str], bool]:
        found = self._known.get(principal)
        if found is None:
            found = (frozenset({principal, *await _groups_of(self.store, principal)}),
                     await _is_account_admin(self.store, principal))
            self._known.put(principal, found)
        return found


class PermissionsService:
    def __init__(self, shard, identity_ttl: float = 5.0, foreign=None):
        self.shard = shard
        self.store = shard.store
        self.subjects = Subjects(self.store, identity_ttl)
        # A foreign catalog's schemas and tables are fetched before their grants are read or changed
        # (catalog/tree/foreign.py's Federation, handed in by the app): granting SELECT on a table of a
        # catalog just mounted, which nothing read yet, finds it.
        self.foreign = foreign

    async def _fetched(self, caller: Caller, kind: str, key) -> None:
        if self.foreign is not None and key is not None and kind in ("schema", "table"):
            await self.foreign.before_read(caller, kind, key[1], False)

    def _key(self, caller: Caller, type_name: str, full_name: str) -> tuple[str, tuple[str, str] | None]:
        kind = P.securable_type(type_name)
        if kind == "metastore":
            if full_name != caller.metastore():
                raise not_found(f"Metastore '{full_name:.60}' is not this workspace's metastore.")
            return kind, None
        t = TYPES[kind]
        return kind, (t.namespace, ".".join(split_full_name(full_name, t.name_parts, t.name)))

    async def _securable(self, caller: Caller, type_name: str, full_name: str) -> tuple[str, Asset | None]:
        kind, key = self._key(caller, type_name, full_name)
        if key is None:
            return kind, None
        await self._fetched(caller, kind, key)
        asset = await self.shard.lookup(caller.metastore(), *key, caller.min_version)
        if asset is None or (kind != "table" and asset.type != kind):
            raise _missing(kind, full_name)
        return kind, asset

    async def _authz(self, caller: Caller) -> Authz:
        """With the index even for account admins: these answers read it (a securable's chain: a
        partial index answers them, governance/index.py)."""
        return Authz(caller, await request_index(self.shard, caller))

    async def get(self, caller: Caller, type_name: str, full_name: str, principal: str | None) -> dict:
        kind, asset = await self._securable(caller, type_name, full_name)
        authz = await self._authz(caller)
        authz.require_or_missing(kind, "read", asset, _missing(kind, full_name))
        n = authz.node(asset)
        return _assignments(authz.index.grants.get(n, {}), principal)

    async def update(self, caller: Caller, type_name: str, full_name: str, body: dict) -> dict:
        kind, key = self._key(caller, type_name, full_name)
        changes = _changes(body, kind)

        def apply(held: dict[str, set[str]]) -> dict[str, set[str]]:
            for principal, add, remove in changes:
                held[principal] = (held.get(principal, set()) | add) - remove
            return held

        return _assignments(await self._write(caller, kind, key, full_name, apply))

    async def replace(self, caller: Caller, type_name: str, full_name: str, body: dict) -> dict:
        kind, key = self._key(caller, type_name, full_name)
        assignments = body.get("privilege_assignments")
        if not isinstance(assignments, list):
            raise invalid("Field 'privilege_assignments' must be a list of {principal, privileges} objects.")
        new: dict[str, set[str]] = {}
        for i, a in enumerate(assignments):
            if not isinstance(a, dict) or not isinstance(a.get("principal"), str) or not a["principal"].strip() \
                    or not isinstance(a.get("privileges"), list):
                raise invalid(f"privilege_assignments[{i}] must be {{principal: string, privileges: list}}.")
            principal = check_principal(a["principal"], f"privilege_assignments[{i}].principal")
            new.setdefault(principal, set()).update(P.privilege_name(p, kind) for p in a["privileges"])
        return _assignments(await self._write(caller, kind, key, full_name, lambda held: new))

    async def _write(self, caller: Caller, kind: str, key, full_name: str, change) -> dict:
        await self._fetched(caller, kind, key)
        authz = await authorizer(self.shard, caller)
        now = now_ms()

        async def write(tx: WriteTx, state):
            asset = None
            if key is not None:
                asset = await tx.get(*key)
                if asset is None or (kind != "table" and asset.type != kind):
                    raise _missing(kind, full_name)
            authz.require_or_missing(kind, "grant", asset, _missing(kind, full_name))
            sid = asset.id if asset else state.id
            held = await tx.grants_on(sid)
            new = {p: set(v) for p, v in change({p: set(v) for p, v in held.items()}).items() if v}
            await tx.set_grants(sid, new, is_asset=asset is not None, granted_by=caller.name, at=now)
            tx.touch(sid, "PERMISSIONS", asset.type if asset else "metastore", asset.full_name if asset else None)
            return new

        return await self.shard.write(caller.metastore(), write)

    async def effective(self, caller: Caller, type_name: str, full_name: str, principal: str | None) -> dict:
        kind, asset = await self._securable(caller, type_name, full_name)
        authz = await self._authz(caller)
        authz.require_or_missing(kind, "read", asset, _missing(kind, full_name))
        ix = authz.index
        n = authz.node(asset)
        kind_of_n = ix.kind.get(n, "metastore")
        out: dict[str, list[dict]] = {}
        for m in ix.chain(n) if n else [0]:
            for p, privs in sorted(ix.grants.get(m, {}).items()):
                if principal is not None and p != principal:
                    continue
                for priv in sorted(privs):
                    if priv not in P.APPLICABLE.get(kind_of_n, ()):
                        continue    # a privilege for other types (CREATE SCHEMA seen from a table)
                    entry = {"privilege": priv}
                    if m != n:
                        entry.update(inherited_from_type=ix.kind.get(m, "metastore").upper(),
                                     inherited_from_name=ix.name.get(m) if m else ix.root_id)
                    out.setdefault(p, []).append(entry)
        return {"privilege_assignments": [{"principal": p, "privileges": privs} for p, privs in sorted(out.items())]}

    # ---- the authorization API ----------------------------------------------------------

    async def authorize(self, caller: Caller, body: dict) -> dict:
        """Per item {securable_type, full_name, privilege}: allowed and how (owner, admin, a grant on
        it or inherited from an ancestor, directly or via a group), or the reason it is not."""
        items = body.get("items")
        if not isinstance(items, list) or not items:
            raise invalid("Field 'items' must be a non-empty list of {securable_type, full_name, privilege}.")
        if len(items) > MAX_AUTHORIZE_ITEMS:
            raise invalid(f"At most {MAX_AUTHORIZE_ITEMS} items per request, got {len(items)}.")
        ms = caller.metastore()
        index = await privilege_index(self.shard, ms, caller.min_version)
        me = Authz(caller, index)
        principal = body.get("principal")
        if principal is None or principal == caller.name:
            authz = me
        else:
            if not isinstance(principal, str) or not principal:
                raise invalid("Field 'principal' must be a non-empty string.")
            principal = check_principal(principal, "principal")
            if not me.admin:
                raise denied("Only account admins and metastore admins may ask about another principal.")
            principals, is_account_admin = await self.subjects.of(principal)
            authz = Authz(caller, index, principals, is_account_admin=is_account_admin, subject=principal)
        parsed, names = [], []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not all(isinstance(item.get(k), str)
                                                     for k in ("securable_type", "full_name", "privilege")):
                raise invalid(f"items[{i}] must have string securable_type, full_name and privilege.")
            kind, key = self._key(caller, item["securable_type"], item["full_name"])
            privilege = item["privilege"]
            if privilege.lower() not in P.OPERATIONS:
                privilege = P.privilege_name(privilege, kind)
            parsed.append((item, kind, key, privilege))
            if key is not None:
                names.append(key)
        snap = await self.shard.snapshot(ms, names, [], caller.min_version)
        out = []
        for item, kind, key, privilege in parsed:
            answer = {k: item[k] for k in ("securable_type", "full_name", "privilege")}
            asset = snap.by_name.get(key) if key is not None else None
            gone = {"allowed": False, "reason": f"{label(kind).capitalize()} '{item['full_name']}' does not exist."}
            if key is not None and (asset is None or (kind != "table" and asset.type != kind)):
                answer.update(gone)
            else:
                if privilege.lower() in P.OPERATIONS:
                    decision = authz.decide(kind, privilege.lower(), asset, parent=None)
                else:
                    use = privilege not in (P.USE_CATALOG, P.USE_SCHEMA, P.BROWSE)
                    decision = authz.decide(kind, "check", asset, rule=P.Rule((P.OWNER, privilege), use=use))
                # a securable the caller may not see answers as a missing one (admins see everything)
                hidden = not decision.allowed and asset is not None and not me.sees(asset.type, asset)
                answer.update(gone if hidden else decision.json())
            out.append(answer)
        return {"metastore_version": snap.version, "principal": principal or caller.name, "items": out}


async def _groups_of(store: CatalogStore, principal: str) -> set[str]:
    """The groups a principal is in, transitively (identity's store/principals.py)."""
    principals = store.principals
    info = await principals.get_by_name(principal)
    if info is None:
        return set()
    return {m.group_name for m in (await principals.memberships([info.id]))[info.id]}


async def _is_account_admin(store, principal: str) -> bool:
    return await is_account_admin(store, principal)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = PermissionsService(shard, foreign=serving.catalogs.federation)

    def args(request):
        return request["caller"], request.match_info["securable_type"], request.match_info["full_name"]

    def principal_of(request) -> str | None:
        principal = request.query.get("principal")
        return check_principal(principal, "principal") if principal is not None else None

    async def get(request):
        return ok(await service.get(*args(request), principal_of(request)))

    async def patch(request):
        return ok(await service.update(*args(request), await json_body(request)))

    async def put(request):
        return ok(await service.replace(*args(request), await json_body(request)))

    async def effective(request):
        return ok(await service.effective(*args(request), principal_of(request)))

    async def authorize(request):
        return ok(await service.authorize(request["caller"], await json_body(request)))

    return {"get": get, "update": patch, "replacePermissions": put, "getEffectivePermissions": effective,
            "authorize": authorize}

