"""Delta Sharing catalog objects: shares, recipients and providers (the protocol server that
recipients read through is catalog/protocols/delta_sharing/).

A share lists data objects (tables, schemas, ... by full name) with how they are
shared; `PATCH /shares/{name}` adds, removes and updates them (`updates`, or the
whole `objects` list as the 2.1 spec has it). Which recipients may read a share is
kept on the share, by recipient id (so a renamed recipient keeps its grants and a
deleted one loses them). A TOKEN recipient gets bearer tokens: only their SHA-256
hash is stored; the plain token is shown once, in the answer that made it, and kept sealed
(store/sealing.py) only until the recipient retrieves its profile through the token's
`activation_url` (catalog/protocols/delta_sharing/activation.py), once.
A provider keeps the profile a data provider gave us; its bearer token is stored encrypted
(store/sealing.py) and never shown.
"""

from __future__ import annotations

import dataclasses

import ipaddress
import json
import secrets
import uuid


from ...auth import Caller, hash_token
from ...entities.asset import Asset
from ...entities.names import check_name
from ...store.sealing import SecretKeyError, seal_info
from ...entities.types import PROVIDER, RECIPIENT, SHARE
from ...errors import CatalogError, already_exists, invalid, not_found
from ...governance import privileges as P
from ...governance.authorize import Authz, Decision, authorizer, carries_policies, denied
from ...entities.values import now_ms
from ..tree.assets import render
from ...shards.shard import Shard
from ..tree.crud import MetastoreLevel, crud_handlers
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing

AUTH_TYPES = ("TOKEN", "DATABRICKS")
OBJECT_TYPES = ("TABLE", "SCHEMA", "VIEW", "MATERIALIZED_VIEW", "STREAMING_TABLE", "VOLUME", "MODEL", "FUNCTION",
                "NOTEBOOK_FILE")
# Where each data object type's name is looked up: (namespace, name parts).
_OBJECT_NAMES = {"TABLE": ("table", 3), "VIEW": ("table", 3), "MATERIALIZED_VIEW": ("table", 3),
                 "STREAMING_TABLE": ("table", 3), "SCHEMA": ("schema", 2), "VOLUME": ("volume", 3),
                 "MODEL": ("registered_model", 3), "FUNCTION": ("function", 3)}
ACTIONS = ("ADD", "REMOVE", "UPDATE")
HISTORY = ("ENABLED", "DISABLED")
OPS = ("EQUAL", "LIKE")
SHARE_PRIVILEGES = ("SELECT",)
_SCHEMA_DATA = P.Rule((P.SELECT,))   # sharing a schema shares its tables' data: SELECT on the schema
DEFAULT_TOKEN_LIFETIME_S = 365 * 24 * 3600
TOKEN_PREFIX = "dss_"
MAX_IPS = 100
# A token entry's fields no answer shows: its hash, and the sealed plain token awaiting activation.
HIDDEN_TOKEN_FIELDS = ("token_hash", "sealed_bearer_token")


def activation_code(metastore_id: str) -> str:
    """A token's activation_url: its metastore (so an unauthenticated retrieval finds the recipient)
    and 24 random bytes."""
    return f"{metastore_id}.{secrets.token_urlsafe(24)}"


# ---- shares ---------------------------------------------------------------------------


def _partitions(value) -> list:
    if not isinstance(value, list):
        raise invalid("Field 'partitions' must be a list of {values: [...]} objects.")
    out = []
    for p in value:
        values = p.get("values") if isinstance(p, dict) else None
        if not isinstance(values, list):
            raise invalid("Each partition must be an object with a list 'values'.")
        seen, kept = set(), []
        for v in values:
            if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not v["name"]:
                raise invalid("Each partition value needs a string 'name'.")
            if v["name"] in seen:
                raise invalid(f"Partition column '{v['name']}' appears twice in one partition.")
            seen.add(v["name"])
            op = v.get("op", "EQUAL")
            if op not in OPS:
                raise invalid(f"Unknown partition op '{op!s:.20}'; expected EQUAL or LIKE.")
            item = {"name": v["name"], "op": op}
            key = v.get("recipient_property_key")
            if key is not None:   # CURRENT_RECIPIENT().<key>: the value is the reading recipient's property
                if not isinstance(key, str) or not key or v.get("value") is not None:
                    raise invalid(f"Partition value of '{v['name']}' needs either a string 'value' or a "
                                  "'recipient_property_key', not both.")
                item["recipient_property_key"] = key
            elif v.get("value") is not None:
                if not isinstance(v["value"], str):
                    raise invalid(f"Partition value of '{v['name']}' must be a string.")
                item["value"] = v["value"]
            kept.append(item)
        out.append({"values": kept})
    return out


def _object_fields(obj: dict, into: dict) -> dict:
    """The mutable fields of a data object, checked, merged over `into`."""
    out = dict(into)
    for key, kind in (("comment", str), ("shared_as", str), ("cdf_enabled", bool), ("start_version", int),
                      ("history_data_sharing_status", str)):
        v = obj.get(key)
        if v is None:
            continue
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise invalid(f"Data object field '{key}' must be a {kind.__name__}.")
        out[key] = v
    if out.get("start_version", 0) < 0:
        raise invalid("Data object field 'start_version' must be >= 0.")
    if out.get("history_data_sharing_status", "DISABLED") not in HISTORY:
        raise invalid("Data object field 'history_data_sharing_status' must be ENABLED or DISABLED.")
    spec = obj.get("partitions")
    if spec is None and isinstance(obj.get("partition_specification"), dict):
        spec = obj["partition_specification"].get("partitions")   # the 2.1 spec's wrapping
    if spec is not None:
        out["partitions"] = _partitions(spec)
    return out


class Shares(MetastoreLevel):
    def __init__(self, shard: Shard):
        super().__init__(shard, SHARE, "Share")

    def output(self, asset: Asset) -> dict:
        out = render(asset)
        out.pop("permissions", None)
        out.setdefault("objects", [])
        return out

    async def on_create(self, tx, state, asset, parent, flags):
        return dataclasses.replace(asset, info={**asset.info, "objects": [], "permissions": {}})

    async def _new_object(self, tx, obj: dict, caller_name: str, now: int, authz: Authz) -> dict:
        name = obj.get("name")
        kind = obj.get("data_object_type") or "TABLE"
        if kind not in OBJECT_TYPES:
            raise invalid(f"Unknown data_object_type '{kind!s:.40}'; expected one of {', '.join(OBJECT_TYPES)}.")
        if not isinstance(name, str) or not name:
            raise invalid("A data object needs a 'name' (its full name).")
        namespace, parts = _OBJECT_NAMES.get(kind, (None, 0))
        if namespace:
            pieces = name.split(".")
            if len(pieces) != parts:
                raise invalid(f"A {kind} data object's name must have {parts} parts, got '{name:.80}'.")
            name = ".".join(check_name(p, kind.lower()) for p in pieces)
            target = await tx.get(namespace, name)
            await _may_share(tx, authz, kind, name, target)
            if kind in ("TABLE", "VIEW") and target.type == "table":
                kind = "VIEW" if target.info.get("table_type") == "VIEW" else "TABLE"
        out = _object_fields(obj, {"name": name, "data_object_type": kind})
        out.setdefault("shared_as", name.split(".", 1)[1] if kind in ("TABLE", "VIEW") and "." in name else name)
        out.setdefault("status", "ACTIVE")
        out.update(added_at=now, added_by=caller_name)
        return out

    async def on_update(self, tx, state, old, new, fields, flags):
        info = dict(new.info)
        now = info["updated_at"]
        caller_name = info["updated_by"]
        authz = flags["authz"]
        objects = list(old.info.get("objects", []))
        if "objects" in fields:   # the 2.1 form: the whole list; objects already shared keep their checks
            kept = {o["name"]: o for o in objects}
            objects = []
            for o in fields["objects"]:
                o = o if isinstance(o, dict) else {}
                same = kept.get(o["name"].lower()) if isinstance(o.get("name"), str) else None
                objects.append(_object_fields(o, same) if same is not None
                               else await self._new_object(tx, o, caller_name, now, authz))
        for change in fields.get("updates", []):
            if not isinstance(change, dict) or change.get("action") not in ACTIONS:
                raise invalid("Each update needs an 'action' of ADD, REMOVE or UPDATE and a 'data_object'.")
            obj = change.get("data_object")
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                raise invalid(f"The {change['action']} update needs a 'data_object' with a 'name'.")
            key = obj["name"].lower()
            at = next((i for i, o in enumerate(objects) if o["name"] == key), None)
            if change["action"] == "ADD":
                if at is not None:
                    raise already_exists(f"Data object '{key}' is already in share '{old.name}'.")
                objects.append(await self._new_object(tx, obj, caller_name, now, authz))
            elif at is None:
                raise not_found(f"Data object '{key}' is not in share '{old.name}'.")
            elif change["action"] == "REMOVE":
                objects.pop(at)
            else:
                objects[at] = _object_fields(obj, objects[at])
        aliases = [o["shared_as"] for o in objects]
        dup = next((a for a in aliases if aliases.count(a) > 1), None)
        if dup is not None:
            raise invalid(f"Two data objects in share '{old.name}' are shared as '{dup}'; shared_as must be unique.")
        info.pop("updates", None)
        info["objects"] = objects
        return dataclasses.replace(new, info=info)

    # ---- permissions: recipients with SELECT on the share ----

    async def _names_of(self, ms: str, ids: list[str]) -> dict[str, str]:
        found = await self.shard.read(ms, self.store.get_assets_by_ids(ms, ids)) if ids else []
        return {a.id: a.name for a in found if a.type == "recipient"}

    async def _assignments(self, ms: str, share: Asset) -> dict:
        grants = share.info.get("permissions", {})
        names = await self._names_of(ms, sorted(grants))
        out = [{"principal": names[i], "privileges": sorted(p)} for i, p in grants.items() if i in names and p]
        return {"privilege_assignments": sorted(out, key=lambda a: a["principal"])}

    async def permissions(self, caller: Caller, name: str) -> dict:
        return await self._assignments(caller.metastore(), await self.find(caller, name))

    async def update_permissions(self, caller: Caller, name: str, body: dict) -> dict:
        changes = body.get("changes")
        if not isinstance(changes, list):
            raise invalid("Missing required field 'changes' (a list of {principal, add, remove}).")
        for c in changes:
            if not isinstance(c, dict) or not isinstance(c.get("principal"), str):
                raise invalid("Each change needs a 'principal' (a recipient name).")
            c["principal"] = check_name(c["principal"], "recipient")   # a recipient's name: the asset name rule
            for key in ("add", "remove"):
                privs = c.get(key) or []
                if not isinstance(privs, list) or any(p not in SHARE_PRIVILEGES for p in privs):
                    raise invalid(f"'{key}' must be a list of privileges from {', '.join(SHARE_PRIVILEGES)}; "
                                  f"got {privs!r:.80}.")

        authz = await authorizer(self.shard, caller)

        async def write(tx, state):
            share = await self.find_in_tx(tx, name)
            # the 2.1 spec: a metastore admin or the share's owner
            authz.require_or_missing("share", "grant", share, self.missing(name))
            grants = {k: set(v) for k, v in share.info.get("permissions", {}).items()}
            for c in changes:
                recipient = await tx.get("recipient", c["principal"])
                gone = not_found(f"Recipient '{c['principal']}' does not exist.")
                # A recipient the caller may not see answers as missing, unless the share already names it.
                if recipient is None or (recipient.id not in grants and not authz.sees("recipient", recipient)):
                    raise gone
                if c.get("add"):      # the 2.1 spec: new grants also need the recipient's owner
                    authz.require_or_missing("recipient", "update", recipient, gone)
                held = grants.setdefault(recipient.id, set())
                held |= set(c.get("add") or [])
                held -= set(c.get("remove") or [])
            info = {**share.info, "permissions": {k: sorted(v) for k, v in grants.items() if v},
                    "updated_at": now_ms(), "updated_by": caller.name}
            return await tx.put(dataclasses.replace(share, info=info))

        share = await self.shard.write(caller.metastore(), write)
        return await self._assignments(caller.metastore(), share)


def owner_decision(authz: Authz, target: Asset) -> Decision:
    """Whether a share's owner (`authz`) may share `target`: what reading its data needs (SELECT on
    a table, on a schema for all its tables), with USE CATALOG and USE SCHEMA above. Decided when
    the object is added and again at every recipient request (delta_sharing/server.py): a share
    serves only what its owner may read now, as Databricks has it."""
    rule = _SCHEMA_DATA if target.type == "schema" else P.rule(target.type, "read_data")
    return authz.decide(target.type, "read_data", target, rule=rule)


async def _may_share(tx, authz: Authz, kind: str, name: str, target: Asset | None) -> None:
    """Whether the caller may add `target` (data object type `kind`, full name `name`) to a share
    it administers. The 2.1 spec: the share owner needs SELECT on each table it adds; Databricks
    adds USE CATALOG and USE SCHEMA above it, and READ VOLUME / EXECUTE for volumes, models and
    functions, SELECT on a schema for all of its tables. An asset the caller may not see answers
    as a missing one. Tables with row filters or column masks cannot be shared (the recipient
    would read them unfiltered), nor schemas holding one."""
    missing = not_found(f"{kind.capitalize()} '{name}' does not exist.")
    if target is None or not authz.sees(target.type, target):
        raise missing
    decision = owner_decision(authz, target)
    if not decision.allowed:
        raise denied(decision.reason + " Adding it to a share needs that.")
    guarded = [target] if carries_policies(target, authz.policies) else []
    if target.type == "schema":
        guarded = [a for a in await tx.descendants(target.id) if carries_policies(a, authz.policies)]
    if guarded:
        raise invalid(f"Table '{guarded[0].full_name}' has a row filter or column masks (its own or an ABAC "
                      "policy's): tables with row filters or column masks cannot be shared.")


# ---- recipients -------------------------------------------------------------------------


def _ip_access_list(value) -> dict:
    ips = value.get("allowed_ip_addresses") if isinstance(value, dict) else None
    if not isinstance(ips, list) or not all(isinstance(i, str) for i in ips):
        raise invalid("ip_access_list must be {\"allowed_ip_addresses\": [CIDR or IP strings]}.")
    if len(ips) > MAX_IPS:
        raise invalid(f"ip_access_list has {len(ips)} addresses; the limit is {MAX_IPS}.")
    for ip in ips:
        try:
            ipaddress.ip_network(ip, strict=False)
        except ValueError:
            raise invalid(f"'{ip:.60}' in ip_access_list is not an IP address or CIDR block.") from None
    return {"allowed_ip_addresses": ips}


class Recipients(MetastoreLevel):
    def __init__(self, shard: Shard, shares: Shares):
        super().__init__(shard, RECIPIENT, "Recipient")
        self.shares = shares

    def output(self, asset: Asset) -> dict:
        out = render(asset)
        if "tokens" in out:
            out["tokens"] = [{k: v for k, v in t.items() if k not in HIDDEN_TOKEN_FIELDS} for t in out["tokens"]]
        out["activated"] = any(t.get("activated_at") for t in asset.info.get("tokens", []))
        return out

    def _new_token(self, metastore_id: str, caller_name: str, now: int, lifetime_s: int) -> tuple[dict, str]:
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = {"id": str(uuid.uuid4()), "token_hash": hash_token(plain).hex(),
                 "activation_url": activation_code(metastore_id),
                 "expiration_time": now + lifetime_s * 1000, "created_at": now, "created_by": caller_name,
                 "updated_at": now, "updated_by": caller_name}
        box = self.shard.store.secrets
        if box is not None:   # kept for the one retrieval of the profile, then dropped
            token["sealed_bearer_token"] = box.seal(plain)
        return token, plain

    async def _lifetime(self, ms: str) -> int:
        meta = await self.store.get_metastore(ms)
        lifetime = (meta.info if meta else {}).get("delta_sharing_recipient_token_lifetime_in_seconds")
        return lifetime if isinstance(lifetime, int) and lifetime > 0 else DEFAULT_TOKEN_LIFETIME_S

    async def on_create(self, tx, state, asset, parent, flags):
        info = dict(asset.info)
        kind = info["authentication_type"]
        if kind not in AUTH_TYPES:
            raise invalid(f"Unknown authentication_type '{kind:.40}'; expected TOKEN or DATABRICKS.")
        if "ip_access_list" in info:
            if kind != "TOKEN":
                raise invalid("ip_access_list applies to TOKEN recipients only.")
            info["ip_access_list"] = _ip_access_list(info["ip_access_list"])
        if kind == "DATABRICKS":
            gid = info.get("data_recipient_global_metastore_id")
            if not gid or len(gid.split(":")) != 3:
                raise invalid("A DATABRICKS recipient needs data_recipient_global_metastore_id "
                              "of the form <cloud>:<region>:<metastore-uuid>.")
        else:
            info.pop("data_recipient_global_metastore_id", None)
            token, plain = self._new_token(state.id, asset.info["created_by"], asset.info["created_at"],
                                           await self._lifetime(state.id))
            info["tokens"] = [token]
            flags["bearer_token"] = (token["id"], plain)
        return dataclasses.replace(asset, info=info)

    async def on_update(self, tx, state, old, new, fields, flags):
        info = dict(new.info)
        if "ip_access_list" in fields:
            if old.info.get("authentication_type") != "TOKEN":
                raise invalid("ip_access_list applies to TOKEN recipients only.")
            info["ip_access_list"] = _ip_access_list(fields["ip_access_list"])
        return dataclasses.replace(new, info=info)

    def written_output(self, caller: Caller, asset: Asset, flags: dict) -> dict:
        token_id, plain = flags.get("bearer_token", (None, None))
        return _show_tokens(self.output(asset), {token_id: plain} if token_id else {})

    async def rotate_token(self, caller: Caller, name: str, body: dict) -> dict:
        seconds = body.get("existing_token_expire_in_seconds")
        if seconds is None:
            raise invalid("Missing required field 'existing_token_expire_in_seconds'.")
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
            raise invalid("existing_token_expire_in_seconds must be a non-negative integer (0 expires it now).")
        shown = {}
        authz = await authorizer(self.shard, caller)

        async def write(tx, state):
            recipient = await self.find_in_tx(tx, name)
            # the recipient's owner (or an admin)
            authz.require_or_missing("recipient", "update", recipient, self.missing(name))
            if recipient.info.get("authentication_type") != "TOKEN":
                raise invalid(f"Recipient '{recipient.name}' does not use TOKEN authentication; it has no tokens.")
            now = now_ms()
            cutoff = now + seconds * 1000
            # The old token keeps working until the cutoff, but its activation link is spent.
            tokens = [{**{k: v for k, v in t.items() if k != "sealed_bearer_token"},
                       "expiration_time": min(t["expiration_time"], cutoff), "updated_at": now,
                       "updated_by": caller.name}
                      for t in recipient.info.get("tokens", []) if t["expiration_time"] > now][-1:]
            token, plain = self._new_token(state.id, caller.name, now, await self._lifetime(state.id))
            shown[token["id"]] = plain
            info = {**recipient.info, "tokens": [*tokens, token], "updated_at": now, "updated_by": caller.name}
            return await tx.put(dataclasses.replace(recipient, info=info))

        return _show_tokens(self.output(await self.shard.write(caller.metastore(), write)), shown)

    async def share_permissions(self, caller: Caller, name: str) -> dict:
        recipient = await self.find(caller, name)
        ms = caller.metastore()
        out, after = [], ""
        while True:
            batch = await self.shard.children(ms, ms, "share", after=after, limit=1000, min_version=caller.min_version)
            for share in batch:
                privileges = share.info.get("permissions", {}).get(recipient.id)
                if privileges:
                    out.append({"share_name": share.name, "privilege_assignments": [
                        {"principal": recipient.name, "privileges": privileges}]})
            if len(batch) < 1000:
                break
            after = batch[-1].name
        return {"permissions_out": out}


async def find_recipient_token(shard, metastore_id: str, matches) -> tuple[Asset, dict] | None:
    """The first recipient of a metastore, and its token, for which `matches(recipient, token)`
    holds (a bearer token's hash, an activation link); None when none does."""
    after = ""
    while True:
        batch = await shard.children(metastore_id, metastore_id, "recipient", after=after, limit=1000)
        for r in batch:
            for t in r.info.get("tokens", []):
                if matches(r, t):
                    return r, t
        if len(batch) < 1000:
            return None
        after = batch[-1].name


def _show_tokens(out: dict, shown: dict) -> dict:
    """The plain bearer token, once, on the token entry it belongs to (the activation link gives it once more)."""
    for t in out.get("tokens", []):
        if t["id"] in shown:
            t["bearer_token"] = shown[t["id"]]
    return out


# ---- providers --------------------------------------------------------------------------


def _profile(text: str) -> dict:
    try:
        profile = json.loads(text)
    except ValueError:
        raise invalid("recipient_profile_str must be a Delta Sharing profile file (JSON).") from None
    if not isinstance(profile, dict) or not isinstance(profile.get("endpoint"), str) \
            or not isinstance(profile.get("bearerToken"), str):
        raise invalid("recipient_profile_str needs 'endpoint' and 'bearerToken' (a Delta Sharing profile).")
    version = profile.get("shareCredentialsVersion", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise invalid("shareCredentialsVersion in recipient_profile_str must be an integer.")
    return profile


class Providers(MetastoreLevel):
    def __init__(self, shard: Shard):
        super().__init__(shard, PROVIDER, "Provider")

    def output(self, asset: Asset) -> dict:
        out = render(asset)
        text = out.pop("recipient_profile_str", None)
        if text is not None:
            profile = json.loads(text)
            out["recipient_profile"] = {"endpoint": profile["endpoint"],
                                        "share_credentials_version": profile.get("shareCredentialsVersion", 1)}
            redacted = {k: v for k, v in profile.items() if k != "bearerToken"}
            out["recipient_profile_str"] = json.dumps(redacted)
        return out

    async def on_create(self, tx, state, asset, parent, flags):
        info = dict(asset.info)
        kind = info["authentication_type"]
        if kind not in AUTH_TYPES:
            raise invalid(f"Unknown authentication_type '{kind:.40}'; expected TOKEN or DATABRICKS.")
        if kind == "TOKEN":
            if not info.get("recipient_profile_str"):
                raise invalid("A TOKEN provider needs recipient_profile_str (the profile file it gave you).")
            _profile(info["recipient_profile_str"])
        elif "recipient_profile_str" in info:
            raise invalid("recipient_profile_str applies to TOKEN providers only.")
        return dataclasses.replace(asset, info=self._sealed(info))

    def _sealed(self, info: dict) -> dict:
        """The profile's bearer token is encrypted before it reaches the database (store/sealing.py)."""
        try:
            return seal_info(self.shard.store.secrets, "provider", info)
        except SecretKeyError as e:
            raise CatalogError("FAILED_PRECONDITION", f"This server cannot store secrets: {e}.") from None

    async def on_update(self, tx, state, old, new, fields, flags):
        if "recipient_profile_str" in fields:
            if old.info.get("authentication_type") != "TOKEN":
                raise invalid("recipient_profile_str applies to TOKEN providers only.")
            _profile(fields["recipient_profile_str"])
            return dataclasses.replace(new, info=self._sealed(new.info))
        return new

    async def shares(self, caller: Caller, name: str) -> dict:
        """The provider's shares this metastore knows of: those its catalogs were created from."""
        provider = await self.find(caller, name)
        ms = caller.metastore()
        names, after = set(), ""
        while True:
            batch = await self.shard.children(ms, ms, "catalog", after=after, limit=1000,
                                              min_version=caller.min_version)
            names |= {c.info["share_name"] for c in batch
                      if c.info.get("provider_name", "").lower() == provider.name and c.info.get("share_name")}
            if len(batch) < 1000:
                break
            after = batch[-1].name
        return {"shares": [{"name": n} for n in sorted(names)]}


# ---- routes -----------------------------------------------------------------------------


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:


    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    shares = Shares(shard)
    recipients = Recipients(shard, shares)
    providers = Providers(shard)

    async def share_permissions(request):
        return ok(await shares.permissions(request["caller"], request.match_info["name"]))

    async def update_share_permissions(request):
        return ok(await shares.update_permissions(request["caller"], request.match_info["name"],
                                                  await json_body(request)))

    async def rotate(request):
        return ok(await recipients.rotate_token(request["caller"], request.match_info["name"],
                                                await json_body(request)))

    async def recipient_shares(request):
        return ok(await recipients.share_permissions(request["caller"], request.match_info["name"]))

    async def provider_shares(request):
        return ok(await providers.shares(request["caller"], request.match_info["name"]))

    return {
        **crud_handlers(shares, "Share"), "getSharePermissions": share_permissions,
        "updateSharePermissions": update_share_permissions,
        **crud_handlers(recipients, "Recipient"), "rotateRecipientToken": rotate,
        "getRecipientSharePermissions": recipient_shares,
        **crud_handlers(providers, "Provider"), "listProviderShares": provider_shares,
    }
