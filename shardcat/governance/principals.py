"""Identity: users, groups and service principals in SCIM 2.0 shape, the caller's own info, and tokens.

Account-level (not per metastore): served by the fronts, never by shards. Who may do what:
account admins manage every principal, group and token; any authenticated principal reads
itself (`/scim2/Me`, `/user-info/me`, `/user-info/my-groups`) and manages its own tokens.

Names: a principal's `name` is what grants, owners and `Caller.principals` refer to. It is a
user's `userName`, a group's `displayName`, a service principal's `applicationId`; it cannot
change once made (grants would silently stop matching). Display names of users and service
principals are free text.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field

from ..auth import Caller, hash_token, new_token
from ..entities.names import MAX_PRINCIPAL_LENGTH, check_principal
from ..errors import CatalogError, invalid, not_found
from ..store.db import Store
from ..entities.values import bigint_text, now_ms
from ..store.principals import Membership, PrincipalInfo, TokenInfo
from ..web.wire import CONTROL_PREFIX
from . import scim_filter

SCIM_PREFIX = CONTROL_PREFIX + "/scim2"

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
SP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ServicePrincipal"
# shardcat's own attributes: the trusted-engine and account-admin marks.
EXTENSION = "urn:ietf:params:scim:schemas:extension:shardcat:2.0:Principal"
LIST_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"


@dataclass(frozen=True)
class Resource:
    """One SCIM resource type and how it maps onto principals."""
    path: str           # Users, Groups, ServicePrincipals
    kind: str           # principals.kind
    schema: str
    name_attr: str      # the SCIM attribute that is the principal's name
    noun: str


RESOURCES = {r.path: r for r in (
    Resource("Users", "user", USER_SCHEMA, "userName", "user"),
    Resource("Groups", "group", GROUP_SCHEMA, "displayName", "group"),
    Resource("ServicePrincipals", "service_principal", SP_SCHEMA, "applicationId", "service principal"),
)}
_BY_KIND = {r.kind: r for r in RESOURCES.values()}
_TYPE_OF_KIND = {"user": "User", "group": "Group", "service_principal": "ServicePrincipal"}

MAX_NAME = MAX_PRINCIPAL_LENGTH
MAX_TEXT = 1000
MAX_COUNT = 1000                 # SCIM page size cap
MAX_LIFETIME = 10 * 365 * 86400  # a token lives at most ten years


# ---- validation ------------------------------------------------------------------

def _text(value, what: str, *, max_len: int = MAX_TEXT, nullable: bool = True) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise invalid(f"'{what}' must be a string, got {type(value).__name__}.")
    if len(value) > max_len:
        raise invalid(f"'{what}' is longer than {max_len} characters.")
    return value


def check_principal_name(value, what: str) -> str:
    """The one rule for principal names (entities/names.py): grants and owners use it too."""
    return check_principal(value, what)


def _bool(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"'{what}' must be true or false, got {value!r:.40}.")
    return value


def _emails(value) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("'emails' must be a list of {value, primary, type} objects.")
    out = []
    for i, e in enumerate(value):
        if not isinstance(e, dict):
            raise invalid(f"'emails[{i}]' must be an object with a 'value'.")
        address = check_principal_name(e.get("value"), f"emails[{i}].value")
        if "@" not in address:
            raise invalid(f"'emails[{i}].value' is not an e-mail address: '{address:.80}'.")
        item = {"value": address}
        if "primary" in e:
            item["primary"] = _bool(e["primary"], f"emails[{i}].primary")
        if e.get("type") is not None:
            item["type"] = _text(e["type"], f"emails[{i}].type", max_len=MAX_NAME)
        out.append(item)
    if sum(1 for e in out if e.get("primary")) > 1:
        raise invalid("At most one of 'emails' may be primary.")
    return out


def _member_ids(value, what: str = "members") -> list[int]:
    if not isinstance(value, list):
        raise invalid(f"'{what}' must be a list of {{\"value\": \"<principal id>\"}} objects.")
    return [_id(m.get("value") if isinstance(m, dict) else None, f"{what}[{i}].value") for i, m in enumerate(value)]


def _id(value, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = bigint_text(value) if isinstance(value, str) else None
    if number is None:
        raise invalid(f"'{what}' must be a principal id (digits), got {value!r:.40}.")
    return number


@dataclass
class Changes:
    """What a create, replace or patch asks for, validated, before anything is written."""
    name: str | None = None
    fields: dict = field(default_factory=dict)
    add: list[int] = field(default_factory=list)
    remove: list[int] = field(default_factory=list)
    replace: list[int] | None = None


def _apply(resource: Resource, changes: Changes, attr: str, value, *, op: str = "replace") -> bool:
    """Record one attribute's new value; False if the attribute is not one this resource has."""
    key = attr.lower()
    if key.startswith(EXTENSION.lower() + ":"):
        key = key[len(EXTENSION) + 1:]
    elif key.startswith(resource.schema.lower() + ":"):
        key = key[len(resource.schema) + 1:]
    group = resource.kind == "group"
    if key == resource.name_attr.lower():
        changes.name = check_principal_name(value, resource.name_attr)
    elif key == "displayname":      # a group's displayName is its name: handled above
        changes.fields["display_name"] = _text(value, "displayName", max_len=MAX_NAME)
    elif key == "emails" and resource.kind == "user":
        emails = _emails(value)
        if op == "add":
            emails = changes.fields.get("emails", []) + emails
        changes.fields["emails"] = emails
    elif key == "active" and not group:
        changes.fields["active"] = _bool(value, "active")
    elif key == "externalid":
        changes.fields["external_id"] = _text(value, "externalId", max_len=MAX_NAME)
    elif key == "trustedengine" and not group:
        changes.fields["trusted_engine"] = _bool(value, f"{EXTENSION}:trustedEngine")
    elif key == "accountadmin" and not group:
        changes.fields["is_account_admin"] = _bool(value, f"{EXTENSION}:accountAdmin")
    elif key == EXTENSION.lower():
        if not isinstance(value, dict):
            raise invalid(f"'{EXTENSION}' must be an object.")
        for k, v in value.items():
            if not _apply(resource, changes, k, v, op=op):
                raise invalid(f"'{EXTENSION}' has no attribute '{k:.80}' for a {resource.noun}.")
    elif key == "members" and group:
        ids = _member_ids(value)
        if op == "add":
            changes.add += ids
        else:
            changes.replace = ids
    else:
        return False
    return True


def _from_resource(resource: Resource, body: dict) -> Changes:
    """The attributes of a POSTed or PUT resource. Read-only and unknown attributes (id, meta,
    groups, name parts...) are ignored, as SCIM clients send them freely."""
    changes = Changes()
    for attr, value in body.items():
        if attr.lower() in ("schemas", "id", "meta", "groups", "members") and not (
                attr.lower() == "members" and resource.kind == "group"):
            continue
        _apply(resource, changes, attr, value)
    return changes


def _from_patch(resource: Resource, body: dict) -> Changes:
    """A PatchOp body (RFC 7644 section 3.5.2): add, replace, remove; with or without a path."""
    schemas = body.get("schemas")
    if schemas is not None and PATCH_SCHEMA not in (schemas if isinstance(schemas, list) else [schemas]):
        raise invalid(f"A PATCH body's 'schemas' must contain '{PATCH_SCHEMA}'.")
    ops = body.get("Operations", body.get("operations"))
    if not isinstance(ops, list) or not ops:
        raise invalid("A PATCH body needs 'Operations': a non-empty list of {op, path, value}.")
    changes = Changes()
    for i, operation in enumerate(ops):
        if not isinstance(operation, dict):
            raise invalid(f"'Operations[{i}]' must be an object.")
        op = str(operation.get("op", "")).lower()
        path = operation.get("path")
        value = operation.get("value")
        if op not in ("add", "replace", "remove"):
            raise invalid(f"'Operations[{i}].op' must be add, replace or remove, got {operation.get('op')!r:.40}.")
        if path is not None and not isinstance(path, str):
            raise invalid(f"'Operations[{i}].path' must be a string.")
        if path is None:
            if op == "remove":
                raise invalid(f"'Operations[{i}]': remove needs a path.")
            if not isinstance(value, dict):
                raise invalid(f"'Operations[{i}].value' must be an object of attributes when there is no path.")
            for attr, v in value.items():
                if attr.lower() not in ("schemas", "id", "meta") and not _apply(resource, changes, attr, v, op=op):
                    raise invalid(f"A {resource.noun} has no attribute '{attr:.80}' that can be changed.")
            continue
        if resource.kind == "group" and path.lower().startswith("members"):
            _patch_members(changes, i, op, path, value)
            continue
        if op == "remove":
            if path.lower() in ("displayname", "externalid"):
                value = None
            elif path.lower() == "emails" and resource.kind == "user":
                value = []
            else:
                raise invalid(f"'Operations[{i}]': '{path:.80}' cannot be removed from a {resource.noun}.")
        if not _apply(resource, changes, path, value, op=op):
            raise invalid(f"'Operations[{i}].path': a {resource.noun} has no attribute '{path:.80}' to change.")
    return changes


def _patch_members(changes: Changes, i: int, op: str, path: str, value) -> None:
    what = f"Operations[{i}].value"
    if path.lower() == "members":
        if op == "remove":
            if value is None:
                changes.replace = []                    # remove every member
            else:
                changes.remove += _member_ids(value, what)
        elif op == "add":
            changes.add += _member_ids(value, what)
        else:
            changes.replace = _member_ids(value, what)
        return
    # members[value eq "12"]: the one member a remove names (what Azure AD and Okta send)
    inner = path[len("members"):].strip()
    if op != "remove" or not (inner.startswith("[") and inner.endswith("]")):
        raise invalid(f"'Operations[{i}].path' '{path:.80}' is not supported; use 'members' or, to remove one, "
                      f"'members[value eq \"<id>\"]'.")
    parts = inner[1:-1].split()
    if len(parts) != 3 or parts[0].lower() != "value" or parts[1].lower() != "eq":
        raise invalid(f"'Operations[{i}].path': only 'members[value eq \"<id>\"]' selects a member.")
    changes.remove.append(_id(parts[2].strip('"'), f"Operations[{i}].path"))


# ---- rendering ----------------------------------------------------------------------

def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")


def _location(p: PrincipalInfo) -> str:
    return f"{SCIM_PREFIX}/{_BY_KIND[p.kind].path}/{p.id}"


def render(p: PrincipalInfo, groups: list[Membership] = (), members: list[PrincipalInfo] = ()) -> dict:
    """A principal as its SCIM resource."""
    resource = _BY_KIND[p.kind]
    out = {"schemas": [resource.schema], "id": str(p.id)}
    if p.kind == "group":
        out["displayName"] = p.name
        out["members"] = [{"value": str(m.id), "display": m.name, "type": _TYPE_OF_KIND[m.kind],
                           "$ref": _location(m)} for m in members]
    else:
        out["schemas"].append(EXTENSION)
        out[resource.name_attr] = p.name
        out["displayName"] = p.display_name if p.display_name is not None else p.name
        out["active"] = p.active
        if p.kind == "user":
            out["emails"] = p.emails
        out[EXTENSION] = {"trustedEngine": p.trusted_engine, "accountAdmin": p.is_account_admin}
    if p.external_id is not None:
        out["externalId"] = p.external_id
    out["groups"] = [{"value": str(g.group_id), "display": g.group_name, "type": "direct" if g.direct else "indirect",
                      "$ref": f"{SCIM_PREFIX}/Groups/{g.group_id}"} for g in groups]
    out["meta"] = {"resourceType": _TYPE_OF_KIND[p.kind], "created": _iso(p.created_at),
                   "lastModified": _iso(p.updated_at or p.created_at), "location": _location(p)}
    return out


def token_info(t: TokenInfo) -> dict:
    """A token as listed: never its secret."""
    expired = t.expires_at is not None and t.expires_at <= now_ms()
    return {"token_id": str(t.id), "principal": t.principal_name, "workspace_id": t.workspace_id,
            "comment": t.comment, "creation_time": t.created_at, "expiry_time": t.expires_at,
            "state": "EXPIRED" if expired else "ACTIVE"}


def _require_admin(caller: Caller, what: str) -> None:
    if not caller.is_account_admin:
        raise CatalogError("PERMISSION_DENIED", f"Only an account admin may {what}; '{caller.name}' is not one.")


def _int_param(value: str | None, what: str, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise invalid(f"'{what}' must be an integer, got '{value:.40}'.") from None


def _bool_param(value: str | None, what: str) -> bool:
    """A true/false query parameter: anything else is a 400, not a silent false."""
    if value is None or value.lower() in ("false", ""):
        return False
    if value.lower() == "true":
        return True
    raise invalid(f"'{what}' must be true or false, got '{value:.40}'.")


# ---- the service --------------------------------------------------------------------

class IdentityService:
    """Principals, groups, tokens and the caller's own info over the store.

    `forget_token(digest)` and `forget_identities()` tell the front's authentication cache what
    changed, so this front sees changes at once; other fronts and shards within its TTL.
    """

    def __init__(self, store: Store, authenticator):
        self.store = store
        self.db = store.principals
        self.authenticator = authenticator

    async def _render_many(self, principals: list[PrincipalInfo]) -> list[dict]:
        ids = [p.id for p in principals]
        groups = await self.db.memberships(ids)
        members = await self.db.members([p.id for p in principals if p.kind == "group"])
        return [render(p, groups[p.id], members.get(p.id, ())) for p in principals]

    async def _render(self, p: PrincipalInfo) -> dict:
        return (await self._render_many([p]))[0]

    async def _get(self, resource: Resource, principal_id: str) -> PrincipalInfo:
        number = bigint_text(principal_id)
        found = await self.db.get(number, resource.kind) if number is not None else None
        if found is None:
            raise not_found(f"No {resource.noun} with id '{principal_id:.40}'.")
        return found

    # SCIM collections

    async def list(self, caller: Caller, resource: Resource, query) -> dict:
        _require_admin(caller, f"list {resource.noun}s")
        start = max(1, _int_param(query.get("startIndex"), "startIndex", 1))
        count = min(MAX_COUNT, max(0, _int_param(query.get("count"), "count", 50)))
        text = query.get("filter")
        predicate = scim_filter.parse(text) if text else None
        everyone = await self._render_many(await self.db.list(resource.kind))
        matching = [r for r in everyone if predicate is None or predicate(r)]
        page = matching[start - 1:start - 1 + count]
        return {"schemas": [LIST_SCHEMA], "totalResults": len(matching), "startIndex": start,
                "itemsPerPage": len(page), "Resources": page}

    async def create(self, caller: Caller, resource: Resource, body: dict) -> dict:
        _require_admin(caller, f"create {resource.noun}s")
        changes = _from_resource(resource, body)
        if changes.name is None and resource.kind == "user":
            emails = changes.fields.get("emails") or []
            primary = next((e for e in emails if e.get("primary")), emails[0] if emails else None)
            changes.name = primary["value"] if primary else None
        if changes.name is None and resource.kind == "service_principal":
            changes.name = str(uuid.uuid4())
        if changes.name is None:
            raise invalid(f"A {resource.noun} needs '{resource.name_attr}'"
                          + (" (or a primary e-mail)." if resource.kind == "user" else "."))
        members = (changes.replace or []) + changes.add
        created = await self.db.create(changes.name, resource.kind, changes.fields, members)
        self.authenticator.forget_identities()
        return await self._render(created)

    async def get(self, caller: Caller, resource: Resource, principal_id: str) -> dict:
        _require_admin(caller, f"read other {resource.noun}s")
        return await self._render(await self._get(resource, principal_id))

    async def replace(self, caller: Caller, resource: Resource, principal_id: str, body: dict) -> dict:
        _require_admin(caller, f"change {resource.noun}s")
        current = await self._get(resource, principal_id)
        if "id" in body and str(body["id"]) != str(current.id):
            raise invalid(f"The body's id '{body['id']!s:.40}' does not match the path's '{principal_id:.40}'.")
        return await self._update(caller, current, _from_resource(resource, body))

    async def patch(self, caller: Caller, resource: Resource, principal_id: str, body: dict) -> dict:
        _require_admin(caller, f"change {resource.noun}s")
        current = await self._get(resource, principal_id)
        return await self._update(caller, current, _from_patch(resource, body))

    async def _update(self, caller: Caller, current: PrincipalInfo, changes: Changes) -> dict:
        if changes.name is not None and changes.name != current.name:
            raise invalid(f"'{_BY_KIND[current.kind].name_attr}' cannot change ('{current.name}'): grants and "
                          "ownership refer to principals by name. Make a new principal instead.")
        if current.id == caller.principal_id and (changes.fields.get("active") is False
                                                  or changes.fields.get("is_account_admin") is False):
            raise CatalogError("FAILED_PRECONDITION",
                               "You cannot deactivate yourself or drop your own account-admin mark.")
        updated = await self.db.update(current.id, changes.fields, add=changes.add, remove=changes.remove,
                                       replace=changes.replace)
        self.authenticator.forget_identities()
        return await self._render(updated)

    async def delete(self, caller: Caller, resource: Resource, principal_id: str) -> None:
        _require_admin(caller, f"delete {resource.noun}s")
        current = await self._get(resource, principal_id)
        if current.id == caller.principal_id:
            raise CatalogError("FAILED_PRECONDITION", "You cannot delete yourself.")
        if not await self.db.delete(current.id, resource.kind):
            raise not_found(f"No {resource.noun} with id '{principal_id:.40}'.")
        self.authenticator.forget_identities()

    # the caller itself

    async def _self(self, caller: Caller) -> PrincipalInfo:
        me = await self.db.get(caller.principal_id)
        if me is None:      # deleted since its identity was cached
            raise CatalogError("UNAUTHENTICATED", f"Principal '{caller.name}' no longer exists.")
        return me

    async def me_scim(self, caller: Caller) -> dict:
        return await self._render(await self._self(caller))

    async def user_info(self, caller: Caller) -> dict:
        """The 2.1 spec's GetMyInfoResp (is_metastore_admin), plus who the caller is to shardcat."""
        me = await self._self(caller)
        is_metastore_admin = False
        if caller.metastore_id:
            metastore = await self.store.get_metastore(caller.metastore_id)
            owner = (metastore.info or {}).get("owner") if metastore else None
            is_metastore_admin = owner is not None and owner in caller.principals
        return {"is_metastore_admin": is_metastore_admin, "name": caller.name, "principal_id": caller.principal_id,
                "principal_type": _TYPE_OF_KIND[me.kind], "display_name": me.display_name or me.name,
                "is_account_admin": caller.is_account_admin, "trusted_engine": caller.trusted_engine,
                "groups": sorted(caller.groups), "workspace_id": caller.workspace_id,
                "metastore_id": caller.metastore_id}

    @staticmethod
    def my_groups(caller: Caller) -> dict:
        return {"group_names": sorted(caller.groups)}

    # tokens

    async def create_token(self, caller: Caller, body: dict) -> dict:
        comment = _text(body.get("comment"), "comment")
        lifetime = body.get("lifetime_seconds")
        if lifetime is not None and (isinstance(lifetime, bool) or not isinstance(lifetime, int)
                                     or not 0 < lifetime <= MAX_LIFETIME):
            raise invalid(f"'lifetime_seconds' must be an integer from 1 to {MAX_LIFETIME}, got {lifetime!r:.40}.")
        workspace_id = body.get("workspace_id", caller.workspace_id)
        if isinstance(workspace_id, bool) or not isinstance(workspace_id, int) or not 0 <= workspace_id < 1 << 63:
            raise invalid(f"'workspace_id' must be a non-negative integer, got {workspace_id!r:.40}.")
        owner_name = check_principal_name(body.get("principal", caller.name), "principal")
        if owner_name != caller.name or workspace_id != caller.workspace_id:
            _require_admin(caller, "make tokens for other principals or workspaces")
        owner = await self.db.get_by_name(owner_name)
        if owner is None:
            raise invalid(f"Principal '{owner_name:.80}' does not exist.")
        if owner.kind == "group" or not owner.active:
            raise invalid(f"'{owner_name}' cannot hold tokens: it is a group or deactivated.")
        secret = new_token()
        expires_at = now_ms() + lifetime * 1000 if lifetime is not None else None
        info = await self.db.create_token(owner.id, hash_token(secret), workspace_id, comment, expires_at)
        return {"token_value": secret, "token_info": token_info(info)}

    async def list_tokens(self, caller: Caller, query) -> dict:
        if _bool_param(query.get("all"), "all"):
            _require_admin(caller, "list everyone's tokens")
            return {"token_infos": [token_info(t) for t in await self.db.list_tokens(None)]}
        name = query.get("principal", caller.name)
        if name != caller.name:
            _require_admin(caller, "list other principals' tokens")
        owner = await self.db.get_by_name(name)
        if owner is None:
            raise not_found(f"Principal '{name:.80}' does not exist.")
        return {"token_infos": [token_info(t) for t in await self.db.list_tokens(owner.id)]}

    async def _token(self, caller: Caller, token_id: str) -> TokenInfo:
        number = bigint_text(token_id)
        found = await self.db.get_token(number) if number is not None else None
        if found is None or found.revoked_at is not None:
            raise not_found(f"No live token with id '{token_id:.40}'.")
        if found.principal_id != caller.principal_id:
            _require_admin(caller, "see or revoke other principals' tokens")
        return found

    async def get_token(self, caller: Caller, token_id: str) -> dict:
        return token_info(await self._token(caller, token_id))

    async def revoke_token(self, caller: Caller, token_id: str) -> None:
        found = await self._token(caller, token_id)
        digest = await self.db.revoke_token(found.id)
        if digest is None:
            raise not_found(f"No live token with id '{token_id:.40}'.")
        self.authenticator.forget_token(bytes(digest))
