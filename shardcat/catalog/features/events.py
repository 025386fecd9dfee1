"""Pushed change events: every committed metastore write as a CloudEvent, in metastore-version
order, delivered to registered webhooks and streamed as server-sent events.

An event is the change feed's entry for one version (catalog/features/changes.py): type
`io.shardcat.metastore.change`, source `/metastores/{id}`, id `{metastore id}:{version}`, time
of the write, data `{metastore_id, version, securables: [{id, securable_type, full_name,
change}]}`, encoded by the `cloudevents` package (structured JSON mode). Like the change feed,
it names every securable of the metastore, so only metastore admins and account admins may
register webhooks or open the stream: no event carries what its subscriber may not read.

Webhooks (`POST|GET /shardcat/webhooks`, `DELETE /shardcat/webhooks/{id}`) are kept in the
metastore's record (a metastore write). The shard serving the metastore runs one delivery task
per webhook, beside the write path (a write only wakes it): it reads the change log from its
cursor and posts each event in order, signed `X-Shardcat-Signature: sha256=<HMAC-SHA256 of the
body with the webhook's secret>`, retrying with exponential backoff (up to 5 s apart) until the
receiver answers 2xx; only then the next one. So delivery is at least once and in order per
metastore; a task starts from the version the webhook was registered at, so after a restart
(the cursor lives in memory) events are sent again, never skipped. A slow or dead receiver only
holds its own task back.

A webhook reaches public addresses only (web/destinations.py): its URL's host is resolved and
refused (400) at registration when any address is loopback, private, link-local, unspecified,
multicast or reserved, and again at every post, which goes to the address just vetted and follows
no redirect (a 3xx is a failed post). Hosts the operator allowed (`--webhook-allow-host`) are
exempt. Every post also checks that the webhook's creator is still an account admin or an admin of
the metastore; otherwise nothing is posted until it is again. `GET /shardcat/webhooks` shows each
webhook's `state`: ACTIVE, FAILING (the last try did not deliver, for whatever reason: one state,
so the answer maps no network) or SUSPENDED (its creator is no longer an admin).

`GET /shardcat/events?since_version=V` (or the `Last-Event-ID` header of an EventSource that
reconnects) answers the events after V as `text/event-stream` (up to 100), waiting up to
`wait_seconds` (10) for the first when there is none yet, then ends with `retry: 100`: an
EventSource reconnects at once with the last id it saw, so it follows the metastore as a stream
does, while the fronts (which relay whole answers) never hold a response open.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import logging
import secrets
import uuid

import aiohttp
from aiohttp import web
from cloudevents.core.bindings.http import to_structured_event
from cloudevents.core.v1.event import CloudEvent
from yarl import URL

from ...auth import Caller
from ...entities.values import bigint_text, now_ms
from ...errors import CatalogError, invalid, not_found
from ...governance.authorize import authorizer, denied, is_admin_now
from ...shards.shard import MetastoreState, Shard
from ...store.errors import MetastoreGone
from ...store.writes import WriteTx
from ...web.destinations import Refused, post, vetted_addresses
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from .changes import touched

log = logging.getLogger(__name__)

EVENT_TYPE = "io.shardcat.metastore.change"
SIGNATURE_HEADER = "X-Shardcat-Signature"
BATCH = 100
MAX_BACKOFF = 5.0
IDLE_POLL = 0.5          # seconds between looks at the change log when no local write woke the task
DELIVERY_TIMEOUT = 10.0
MAX_WEBHOOKS = 100
STREAM_WAIT = 10         # seconds a stream response waits for a first event (the fronts relay whole answers)
RECONNECT_MS = 100
NOT_PUBLIC = ("Field 'url' must name a host whose addresses are all public: webhooks are not sent to loopback, "
              "private, link-local, unspecified, multicast or reserved addresses, nor to names that do not resolve.")
ACTIVE, FAILING, SUSPENDED = "ACTIVE", "FAILING", "SUSPENDED"     # a webhook's state, as the API shows it


def cloud_event(metastore_id: str, row: dict, current: dict) -> tuple[dict, bytes]:
    """(headers, body) of one change-log row as a structured-mode CloudEvent."""
    at = datetime.datetime.fromtimestamp(row["at"] / 1000, datetime.timezone.utc)
    event = CloudEvent({"type": EVENT_TYPE, "source": f"/metastores/{metastore_id}", "specversion": "1.0",
                        "id": f"{metastore_id}:{row['version']}", "time": at, "datacontenttype": "application/json"},
                       {"metastore_id": metastore_id, "version": row["version"],
                        "securables": touched(row, current)})
    message = to_structured_event(event)
    return dict(message.headers), message.body


def opened_secret(shard: Shard, hook: dict) -> str:
    """A webhook's signing secret: stored sealed (one stored before sealing, in plain text, is itself)."""
    box = shard.store.secrets
    return box.open(hook["secret"]) if box is not None else hook["secret"]


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def _require_admin(shard: Shard, caller: Caller, what: str) -> None:
    if not (await authorizer(shard, caller)).admin:
        raise denied(f"Only account admins and metastore admins may {what}: events name every securable.")


class Deliveries:
    """One shard's webhook delivery tasks, and the follower that wakes them on its writes."""

    def __init__(self, shard: Shard, allowed_hosts: frozenset[str] = frozenset()):
        self.shard = shard
        self.allowed_hosts = allowed_hosts                        # reached although not public
        self.tasks: dict[tuple[str, str], asyncio.Task] = {}     # (metastore id, webhook id) -> its task
        self.wake: dict[str, asyncio.Event] = {}
        self.checked: set[str] = set()
        self.delivered: dict[str, int] = {}                       # webhook id -> last version delivered
        self.states: dict[str, str] = {}                          # webhook id -> ACTIVE, FAILING or SUSPENDED

    # -- the follower: no I/O, only wake-ups -------------------------------------------------
    def applied(self, state, tx) -> None:
        self._poke(state.id)

    async def reconciled(self, state, changes) -> None:
        self._poke(state.id)

    def rebuilt(self, state, version: int) -> None:
        self._poke(state.id)

    def _poke(self, metastore_id: str) -> None:
        self.wake.setdefault(metastore_id, asyncio.Event()).set()
        if metastore_id not in self.checked:      # first sight of this metastore: start its webhooks' tasks
            self.checked.add(metastore_id)
            asyncio.get_running_loop().create_task(self.ensure(metastore_id))

    async def ensure(self, metastore_id: str) -> None:
        """A task for every webhook of the metastore that has none."""
        try:
            meta = await self.shard.store.get_metastore(metastore_id)
        except Exception:       # noqa: BLE001 -- the store is away: the next write looks again
            self.checked.discard(metastore_id)
            return
        for hook in ((meta.info.get("webhooks") or {}).values() if meta else ()):
            key = (metastore_id, hook["id"])
            if key not in self.tasks or self.tasks[key].done():
                self.tasks[key] = asyncio.get_running_loop().create_task(self._deliver(metastore_id, hook))

    async def close(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)

    async def _still_registered(self, metastore_id: str, hook_id: str) -> bool:
        meta = await self.shard.store.get_metastore(metastore_id)
        return meta is not None and hook_id in (meta.info.get("webhooks") or {})

    async def _deliver(self, metastore_id: str, hook: dict) -> None:
        cursor = hook["from_version"]
        wake = self.wake.setdefault(metastore_id, asyncio.Event())
        # A session of its own: its pooled connections go to this webhook's vetted addresses only.
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DELIVERY_TIMEOUT)) as session:
            while True:
                try:
                    if not await self._still_registered(metastore_id, hook["id"]):
                        return
                    _, rows, current = await self.shard.store.change_feed(metastore_id, cursor, BATCH)
                except MetastoreGone:
                    return
                except Exception as e:       # noqa: BLE001 -- the store is away for a while: try again
                    log.warning("webhook %s: reading the change log failed: %s", hook["id"], e)
                    await asyncio.sleep(IDLE_POLL)
                    continue
                if not rows:
                    wake.clear()
                    try:
                        await asyncio.wait_for(wake.wait(), IDLE_POLL)
                    except asyncio.TimeoutError:
                        pass
                    continue
                for row in rows:
                    headers, body = cloud_event(metastore_id, row, current)
                    headers[SIGNATURE_HEADER] = sign(opened_secret(self.shard, hook), body)
                    if not await self._post_until_taken(session, metastore_id, hook, headers, body):
                        return
                    cursor = row["version"]
                    self.delivered[hook["id"]] = cursor

    async def _post_until_taken(self, session: aiohttp.ClientSession, metastore_id: str, hook: dict,
                                headers: dict, body: bytes) -> bool:
        """True once the receiver took the event; False when the webhook (or its metastore) is gone."""
        backoff = 0.05
        while True:
            state = await self._try_post(session, metastore_id, hook, headers, body)
            if state is None:
                return False
            self.states[hook["id"]] = state
            if state == ACTIVE:
                return True
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _try_post(self, session: aiohttp.ClientSession, metastore_id: str, hook: dict, headers: dict,
                        body: bytes) -> str | None:
        """One try: SUSPENDED when the creator is no longer an admin (nothing is sent), ACTIVE when
        the receiver took the event, FAILING for anything else, whatever it was; None: the webhook is gone."""
        try:
            meta = await self.shard.store.get_metastore(metastore_id)
            if meta is None or hook["id"] not in (meta.info.get("webhooks") or {}):
                return None
            creator_is_admin = await is_admin_now(self.shard.store, hook["created_by"], meta)
        except Exception as e:       # noqa: BLE001 -- the store is away for a while: try again
            log.warning("webhook %s: reading the metastore failed: %s", hook["id"], e)
            return FAILING
        if not creator_is_admin:
            return SUSPENDED
        try:
            status = await post(session, URL(hook["url"]), self.allowed_hosts, data=body, headers=headers)
        except (Refused, aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as e:
            log.info("webhook %s: not delivered: %s", hook["id"], type(e).__name__)
            return FAILING
        return ACTIVE if 200 <= status < 300 else FAILING


class EventService:
    def __init__(self, shard: Shard, allowed_hosts: frozenset[str] = frozenset()):
        self.shard = shard
        self.allowed_hosts = allowed_hosts
        self.deliveries = Deliveries(shard, allowed_hosts)
        shard.follow(self.deliveries)

    async def create_webhook(self, caller: Caller, body: dict) -> dict:
        await _require_admin(self.shard, caller, "register webhooks")
        url = body.get("url")
        try:
            parsed = URL(url) if isinstance(url, str) and len(url) <= 2000 else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.raw_host:
            raise invalid("Field 'url' must be an http:// or https:// URL of at most 2000 characters.")
        try:
            await vetted_addresses(parsed, self.allowed_hosts)       # checked again at every post
        except Refused:
            raise invalid(NOT_PUBLIC) from None
        secret = body.get("secret")
        if secret is not None and (not isinstance(secret, str) or not 16 <= len(secret) <= 256):
            raise invalid("Field 'secret' must be a string of 16 to 256 characters (or absent: one is made).")
        secret = secret or secrets.token_urlsafe(32)
        if self.shard.store.secrets is None:
            raise CatalogError("FAILED_PRECONDITION", "This server holds no secret key: it cannot keep a "
                                                      "webhook's secret.")
        sealed = self.shard.store.secrets.seal(secret)     # at rest like credential secrets (store/sealing.py)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            meta = await self.shard.store.get_metastore(state.id)
            hooks = dict(meta.info.get("webhooks") or {})
            if len(hooks) >= MAX_WEBHOOKS:
                raise invalid(f"A metastore has at most {MAX_WEBHOOKS} webhooks.")
            # events from this write on: the registration itself is the first one delivered
            hook = {"id": str(uuid.uuid4()), "url": url, "secret": sealed, "from_version": state.version,
                    "created_at": now, "created_by": caller.name}
            hooks[hook["id"]] = hook
            await tx.update_metastore({**meta.info, "webhooks": hooks}, meta.name)
            return {**hook, "secret": secret}

        hook = await self.shard.write(caller.metastore(), write)
        await self.deliveries.ensure(caller.metastore())
        return hook        # the secret is shown here, once

    async def list_webhooks(self, caller: Caller) -> dict:
        await _require_admin(self.shard, caller, "list webhooks")
        meta = await self.shard.store.get_metastore(caller.metastore())
        hooks = (meta.info.get("webhooks") or {}).values()
        return {"webhooks": [{k: v for k, v in h.items() if k != "secret"} |
                             {"delivered_version": self.deliveries.delivered.get(h["id"]),
                              "state": self.deliveries.states.get(h["id"], ACTIVE)} for h in hooks]}

    async def delete_webhook(self, caller: Caller, hook_id: str) -> None:
        await _require_admin(self.shard, caller, "remove webhooks")

        async def write(tx: WriteTx, state: MetastoreState):
            meta = await self.shard.store.get_metastore(state.id)
            hooks = dict(meta.info.get("webhooks") or {})
            if hooks.pop(hook_id, None) is None:
                raise not_found(f"Webhook '{hook_id:.60}' does not exist.")
            await tx.update_metastore({**meta.info, "webhooks": hooks}, meta.name)

        await self.shard.write(caller.metastore(), write)
        task = self.deliveries.tasks.pop((caller.metastore(), hook_id), None)
        if task is not None:
            task.cancel()

    async def stream(self, request: web.Request) -> web.StreamResponse:
        caller = request["caller"]
        await _require_admin(self.shard, caller, "read the event stream")
        since = request.headers.get("Last-Event-ID", request.query.get("since_version", "0"))
        cursor = bigint_text(since.rsplit(":", 1)[-1]) if isinstance(since, str) else None
        if cursor is None:
            raise invalid(f"since_version (or Last-Event-ID) must be a metastore version, got '{since:.40}'.")
        wait = request.query.get("wait_seconds", str(STREAM_WAIT))
        if not wait.isdecimal() or not 0 <= int(wait) <= STREAM_WAIT:
            raise invalid(f"wait_seconds must be an integer from 0 to {STREAM_WAIT}.")
        ms = caller.metastore()
        wake = self.deliveries.wake.setdefault(ms, asyncio.Event())
        deadline = asyncio.get_running_loop().time() + int(wait)
        while True:
            _, rows, current = await self.shard.store.change_feed(ms, cursor, BATCH)
            left = deadline - asyncio.get_running_loop().time()
            if rows or left <= 0:
                break
            wake.clear()
            try:
                await asyncio.wait_for(wake.wait(), min(IDLE_POLL, left))
            except asyncio.TimeoutError:
                pass
        # `retry`: the EventSource reconnects at once, sending the last id it saw as Last-Event-ID.
        parts = [f"retry: {RECONNECT_MS}\n\n".encode()]
        for row in rows:
            _, body = cloud_event(ms, row, current)
            parts.append(f"id: {ms}:{row['version']}\nevent: {EVENT_TYPE}\ndata: ".encode() + body + b"\n\n")
        return web.Response(body=b"".join(parts), headers={"Content-Type": "text/event-stream",
                                                           "Cache-Control": "no-cache"})


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = EventService(shard, serving.webhook_allow_hosts)

    async def create(request):
        return ok(await service.create_webhook(request["caller"], await json_body(request)))

    async def list_hooks(request):
        return ok(await service.list_webhooks(request["caller"]))

    async def delete(request):
        await service.delete_webhook(request["caller"], request.match_info["id"])
        return ok({})

    return {"createWebhook": create, "listWebhooks": list_hooks, "deleteWebhook": delete,
            "listEvents": service.stream}

