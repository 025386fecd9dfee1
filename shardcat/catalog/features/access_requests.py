"""Access requests: a user who can see an asset but not use it asks for privileges on it; those who
may grant on it (its owner, a holder of MANAGE, an admin) approve (which grants them) or decline.

- `POST /shardcat/access-requests` {securable_type, full_name, privileges, reason}: the request,
  PENDING. An asset the caller may not see answers as a missing one (nothing is learnt by asking).
  Asking again for the same asset while a request is pending replaces that request.
- `GET /shardcat/access-requests[?state=PENDING]`: the caller's own requests and those on assets it
  may grant on, newest first; nobody else's.
- `PATCH /shardcat/access-requests/{id}` {state: APPROVED | DECLINED, comment}: by one who may grant
  on the asset; approving grants the privileges to the requester in the same write. A request the
  caller neither made nor may decide answers as missing.

Requests are kept in the metastore's record (like webhooks: catalog/features/events.py), at most
`MAX_PENDING` pending and the newest `KEEP_DECIDED` decided ones. Every change is a metastore write
whose change-log row names the asset with the change ACCESS_REQUESTED, ACCESS_DECLINED or (an
approval, which grants) PERMISSIONS, so each is a CloudEvent to the metastore's webhooks and event stream
(catalog/features/events.py): a receiver routes it to the asset's owner and reads the request here.
"""

from __future__ import annotations

import uuid

from ...auth import Caller
from ...entities.names import split_full_name
from ...entities.types import TYPES
from ...entities.values import now_ms
from ...errors import invalid, not_found
from ...governance import privileges as P
from ...governance.authorize import Authz, authorizer, denied, label
from ...shards.shard import MetastoreState, Shard
from ...store.writes import WriteTx
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing

MAX_PENDING = 1000          # pending requests per metastore
MAX_PENDING_PER_USER = 50
KEEP_DECIDED = 200          # decided requests kept, newest first
MAX_REASON = 1000
PENDING, APPROVED, DECLINED = "PENDING", "APPROVED", "DECLINED"
_REQUESTABLE = ("catalog", "schema", "table", "volume", "function", "registered_model")


def _missing(kind: str, full_name: str):
    return not_found(f"{label(kind).capitalize()} '{full_name:.255}' does not exist.")


def _request_missing(request_id: str):
    return not_found(f"Access request '{request_id:.60}' does not exist.")


def _short_text(body: dict, field: str) -> str:
    """The body's optional free-text `field` (a reason or a comment), at most MAX_REASON characters."""
    value = body.get(field) or ""
    if not isinstance(value, str) or len(value) > MAX_REASON:
        raise invalid(f"Field '{field}' must be a string of at most {MAX_REASON} characters.")
    return value

class AccessRequests:
    def __init__(self, shard: Shard):
        self.shard = shard

    def _key(self, type_name, full_name) -> tuple[str, str, str]:
        if not isinstance(type_name, str) or not isinstance(full_name, str) or not full_name:
            raise invalid("Fields 'securable_type' and 'full_name' must be strings.")
        kind = P.securable_type(type_name)
        if kind not in _REQUESTABLE:
            raise invalid(f"Access can be requested on {', '.join(_REQUESTABLE)}, not on a {label(kind)}.")
        t = TYPES[kind]
        return kind, t.namespace, ".".join(split_full_name(full_name, t.name_parts, t.name))

    async def _requests(self, metastore_id: str) -> dict:
        meta = await self.shard.store.get_metastore(metastore_id)
        return dict((meta.info.get("access_requests") or {}) if meta else {})

    @staticmethod
    def _may_decide(authz: Authz, kind: str, asset) -> bool:
        return asset is not None and authz.decide(kind, "grant", asset).allowed

    async def create(self, caller: Caller, body: dict) -> dict:
        kind, namespace, key = self._key(body.get("securable_type"), body.get("full_name"))
        privileges = body.get("privileges")
        if not isinstance(privileges, list) or not privileges or len(privileges) > 20:
            raise invalid("Field 'privileges' must be a list of 1 to 20 privileges.")
        wanted = sorted({P.privilege_name(p, kind) for p in privileges})
        reason = _short_text(body, "reason")
        authz = await authorizer(self.shard, caller)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            asset = await tx.get(namespace, key)
            if asset is None or (kind != "table" and asset.type != kind) or not authz.sees(kind, asset):
                raise _missing(kind, key)
            meta = await self.shard.store.get_metastore(state.id)
            requests = dict(meta.info.get("access_requests") or {})
            for old in [r for r in requests.values() if r["state"] == PENDING and r["securable_id"] == asset.id
                        and r["requested_by"] == caller.name]:
                del requests[old["id"]]         # asked again: the new request replaces the pending one
            pending = [r for r in requests.values() if r["state"] == PENDING]
            if len(pending) >= MAX_PENDING or sum(r["requested_by"] == caller.name for r in pending) \
                    >= MAX_PENDING_PER_USER:
                raise invalid("Too many access requests are pending; wait until some are decided.")
            request = {"id": str(uuid.uuid4()), "securable_type": P.SECURABLE_TYPE_NAMES[kind],
                       "full_name": asset.full_name, "securable_id": asset.id, "privileges": wanted,
                       "reason": reason, "requested_by": caller.name, "requested_at": now, "state": PENDING}
            requests[request["id"]] = request
            await tx.update_metastore({**meta.info, "access_requests": requests}, meta.name)
            tx.touch(asset.id, "ACCESS_REQUESTED", asset.type, asset.full_name)
            return request

        return await self.shard.write(caller.metastore(), write)

    async def list(self, caller: Caller, state_filter: str | None) -> dict:
        if state_filter is not None and state_filter not in (PENDING, APPROVED, DECLINED):
            raise invalid("Query parameter 'state' must be PENDING, APPROVED or DECLINED.")
        ms = caller.metastore()
        await self.shard.state(ms, caller.min_version, paths=False)     # caught up; no path asked
        requests = await self._requests(ms)
        authz = await authorizer(self.shard, caller)
        out = []
        for r in sorted(requests.values(), key=lambda r: r["requested_at"], reverse=True):
            if state_filter is not None and r["state"] != state_filter:
                continue
            mine = r["requested_by"] == caller.name
            kind = P.securable_type(r["securable_type"])
            if not mine:
                asset = await self.shard.lookup(ms, TYPES[kind].namespace, r["full_name"], caller.min_version)
                if asset is None or asset.id != r["securable_id"] or not self._may_decide(authz, kind, asset):
                    continue
            out.append({k: v for k, v in r.items() if k != "securable_id"})
        return {"access_requests": out}

    async def decide(self, caller: Caller, request_id: str, body: dict) -> dict:
        decision = body.get("state")
        if decision not in (APPROVED, DECLINED):
            raise invalid("Field 'state' must be APPROVED or DECLINED.")
        comment = _short_text(body, "comment")
        authz = await authorizer(self.shard, caller)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            meta = await self.shard.store.get_metastore(state.id)
            requests = dict(meta.info.get("access_requests") or {})
            request = requests.get(request_id)
            if request is None:
                raise _request_missing(request_id)
            kind = P.securable_type(request["securable_type"])
            asset = await tx.get_by_id(request["securable_id"])
            if not self._may_decide(authz, kind, asset):
                if request["requested_by"] != caller.name:
                    raise _request_missing(request_id)      # others' requests are not shown to those who cannot decide
                raise denied(f"Principal '{caller.name}' may not decide access requests on {request['full_name']}: "
                             "that needs ownership or MANAGE on it.")
            if request["state"] != PENDING:
                raise invalid(f"Access request '{request_id}' is already {request['state']}.")
            if decision == APPROVED:
                held = await tx.grants_on(asset.id)
                held = {p: set(v) for p, v in held.items()}
                held[request["requested_by"]] = held.get(request["requested_by"], set()) | set(request["privileges"])
                await tx.set_grants(asset.id, held, is_asset=True, granted_by=caller.name, at=now)
            request = {**request, "state": decision, "decided_by": caller.name, "decided_at": now,
                       "comment": comment}
            requests[request_id] = request
            decided = sorted((r for r in requests.values() if r["state"] != PENDING),
                             key=lambda r: r["decided_at"], reverse=True)
            for old in decided[KEEP_DECIDED:]:
                del requests[old["id"]]
            await tx.update_metastore({**meta.info, "access_requests": requests}, meta.name)
            # an approval changed the asset's grants: PERMISSIONS, as any grant is
            tx.touch(asset.id, "PERMISSIONS" if decision == APPROVED else "ACCESS_DECLINED", asset.type, asset.full_name)
            return {k: v for k, v in request.items() if k != "securable_id"}

        return await self.shard.write(caller.metastore(), write)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    service = AccessRequests(serving.shard)

    async def create(request):
        return ok(await service.create(request["caller"], await json_body(request)))

    async def list_requests(request):
        return ok(await service.list(request["caller"], request.query.get("state")))

    async def decide(request):
        return ok(await service.decide(request["caller"], request.match_info["id"], await json_body(request)))

    return {"createAccessRequest": create, "listAccessRequests": list_requests, "decideAccessRequest": decide}
