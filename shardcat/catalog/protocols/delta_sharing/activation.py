"""A recipient retrieves its credential file (profile) once, without authentication, through its
token's activation link, the way Databricks' open sharing hands it out.

`GET /public/data_sharing_activation/{activation_url}` answers the profile (shareCredentialsVersion,
bearerToken, endpoint, expirationTime) and drops the sealed plain token kept for it, in one
metastore write, so a second retrieval is refused; `..._activation_info/{activation_url}` says
whether it was retrieved. Rotating a recipient's token issues a new link (catalog/features/sharing.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid


from ....entities.asset import Asset
from ....entities.values import now_ms
from ....errors import CatalogError, not_found
from ....shards.shard import Shard
from ....store.errors import MetastoreGone
from ....store.sealing import SecretKeyError
from ....web.kit import ok
from ....web.routes import Handler, ShardServing
from ....web.client_address import public_origin
from ....web.wire import SHARING_PREFIX
from ...features.sharing import find_recipient_token

PROFILE_VERSION = 1


def _metastore_of(code: str) -> str | None:
    ms, dot, _ = code.partition(".")
    try:
        return str(uuid.UUID(ms)) if dot else None
    except ValueError:
        return None


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


class Activation:
    def __init__(self, shard: Shard):
        self.shard = shard

    async def _find(self, code: str) -> tuple[str, Asset, dict]:
        missing = not_found("This activation link is not valid.")
        ms = _metastore_of(code)
        if ms is None:
            raise missing
        try:
            found = await find_recipient_token(self.shard, ms, lambda r, t: t.get("activation_url") == code)
        except MetastoreGone:
            raise missing from None
        if found is None:
            raise missing
        return ms, *found

    async def info(self, code: str) -> dict:
        _, recipient, token = await self._find(code)
        out = {"activation_url": code, "retrieved": bool(token.get("activated_at")),
               "expiration_time": token["expiration_time"]}
        if token.get("activated_at"):
            out["retrieved_at"] = token["activated_at"]
        return out

    async def retrieve(self, code: str, origin: str) -> dict:
        ms, recipient, _ = await self._find(code)
        box = self.shard.store.secrets
        shown = {}

        async def write(tx, state):
            current = await tx.get("recipient", recipient.name)
            tokens = list((current.info if current else {}).get("tokens", []))
            at = next((i for i, t in enumerate(tokens) if t.get("activation_url") == code), None)
            if at is None:
                raise not_found("This activation link is not valid.")
            token = tokens[at]
            if token.get("activated_at") or not token.get("sealed_bearer_token"):
                raise CatalogError("PERMISSION_DENIED", "This activation link was already used: the credential "
                                                        "file can be retrieved only once. Ask the provider to "
                                                        "rotate the token for a new link.")
            if token["expiration_time"] <= now_ms():
                raise CatalogError("PERMISSION_DENIED", "The token of this activation link has expired.")
            if box is None:
                raise CatalogError("FAILED_PRECONDITION", "This server holds no secret key to open the token.")
            try:
                shown["token"] = box.open(token["sealed_bearer_token"])
            except SecretKeyError as e:
                raise CatalogError("FAILED_PRECONDITION", f"The token cannot be opened: {e}.") from None
            now = now_ms()
            tokens[at] = {**{k: v for k, v in token.items() if k != "sealed_bearer_token"}, "activated_at": now}
            shown["expiration_time"] = token["expiration_time"]
            return await tx.put(dataclasses.replace(current, info={**current.info, "tokens": tokens}))

        await self.shard.write(ms, write)
        return {"shareCredentialsVersion": PROFILE_VERSION, "bearerToken": shown["token"],
                "endpoint": f"{origin}{SHARING_PREFIX}/metastores/{ms}",
                "expirationTime": _iso(shown["expiration_time"])}


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    activation = Activation(shard)

    async def retrieve(request):
        return ok(await activation.retrieve(request.match_info["activation_url"], public_origin(request)))

    async def info(request):
        return ok(await activation.info(request.match_info["activation_url"]))

    return {"retrieveRecipientProfile": retrieve, "getActivationUrlInfo": info}
