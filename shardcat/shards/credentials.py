"""Temporary credentials for a table's, a volume's or a path's storage.

`POST /temporary-table-credentials`, `/temporary-volume-credentials` and
`/temporary-path-credentials` answer in the client's TemporaryCredentials shape
(`expiration_time`, `url`, and the cloud credential when there is one). For file://
storage there is no secret to hand out, so the answer carries none. Vending real
cloud credentials (STS, SAS, OAuth) comes with governance; until then s3://, gs://
and abfss:// paths get a clear FAILED_PRECONDITION.
"""

from __future__ import annotations

import uuid

from aiohttp import web

from ..auth import Caller
from ..errors import CatalogError, invalid, not_found
from ..store.db import now_ms
from .locations import location_of, require_external_location
from .shard import Shard
from .storage import storage_url

LIFETIME_MS = 60 * 60 * 1000   # one hour, what engines expect to cache a credential for

TABLE_OPERATIONS = ("READ", "READ_WRITE")
VOLUME_OPERATIONS = ("READ_VOLUME", "WRITE_VOLUME")
PATH_OPERATIONS = ("PATH_READ", "PATH_READ_WRITE", "PATH_CREATE_TABLE")
WRITES = ("READ_WRITE", "WRITE_VOLUME", "PATH_READ_WRITE", "PATH_CREATE_TABLE")


def _field(body: dict, name: str) -> str:
    value = body.get(name)
    if value is None:
        raise invalid(f"Missing required field '{name}'.")
    if not isinstance(value, str) or not value:
        raise invalid(f"Field '{name}' must be a non-empty string.")
    return value


def _operation(body: dict, allowed: tuple[str, ...]) -> str:
    op = _field(body, "operation")
    if op not in allowed:
        raise invalid(f"Unknown operation '{op:.40}'; expected one of {', '.join(allowed)}.")
    return op


def _asset_id(body: dict, name: str) -> str:
    value = _field(body, name)
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise invalid(f"Field '{name}' must be a UUID, got '{value:.60}'.") from None


class TemporaryCredentials:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    async def _vend(self, caller: Caller, url: str, operation: str) -> dict:
        state = await self.shard.state(caller.metastore(), caller.min_version)
        location = location_of(state, url)
        if operation in WRITES and location is not None:
            asset = await self.shard.lookup(state.id, "external_location", location.full_name, caller.min_version)
            if asset is not None and asset.info.get("read_only"):
                raise CatalogError("PERMISSION_DENIED", f"External location '{asset.name}' is read-only; "
                                                        f"no {operation} credentials for '{url}'.")
        # Whether the caller holds the privilege the operation needs comes with governance.
        scheme = url.split(":", 1)[0]
        if scheme != "file":
            raise CatalogError("FAILED_PRECONDITION",
                               f"shardcat does not vend {scheme}:// credentials yet (only file:// storage, which "
                               "needs none); cloud credential vending comes with governance.")
        return {"expiration_time": now_ms() + LIFETIME_MS, "url": url}

    async def _by_id(self, caller: Caller, asset_id: str, type_name: str, label: str):
        ms = caller.metastore()
        asset = await self.shard.read(ms, self.store.get_asset_by_id(ms, asset_id))
        if asset is None or asset.type != type_name:
            raise not_found(f"{label} with id '{asset_id}' does not exist.")
        return asset

    async def for_table(self, caller: Caller, body: dict) -> dict:
        table_id = _asset_id(body, "table_id")
        operation = _operation(body, TABLE_OPERATIONS)
        table = await self._by_id(caller, table_id, "table", "Table")
        if not table.storage_path:
            raise invalid(f"Table '{table.full_name}' is a {table.info.get('table_type')} and has no storage.")
        return await self._vend(caller, table.storage_path, operation)

    async def for_volume(self, caller: Caller, body: dict) -> dict:
        volume_id = _asset_id(body, "volume_id")
        operation = _operation(body, VOLUME_OPERATIONS)
        volume = await self._by_id(caller, volume_id, "volume", "Volume")
        if not volume.storage_path:
            raise invalid(f"Volume '{volume.full_name}' has no storage.")
        return await self._vend(caller, volume.storage_path, operation)

    async def for_path(self, caller: Caller, body: dict) -> dict:
        url = storage_url(_field(body, "url"))
        operation = _operation(body, PATH_OPERATIONS)
        state = await self.shard.state(caller.metastore(), caller.min_version)
        require_external_location(state, url, "url")
        owner = state.trie.owner(url)
        if owner is not None and owner[1].is_root:
            raise CatalogError("PERMISSION_DENIED", f"The url '{url}' lies in managed storage (of {owner[1].type} "
                                                    f"'{owner[1].full_name}'): ask for table or volume credentials.")
        if operation == "PATH_CREATE_TABLE":
            hit = state.trie.first_overlap(url)
            if hit is not None:
                raise invalid(f"The url '{url}' overlaps the storage of {hit[1].type} '{hit[1].full_name}' "
                              f"at '{hit[0]}': no new table can be created there.")
        return await self._vend(caller, url, operation)


def temporary_credentials_routes(shard: Shard, prefix: str) -> list[web.RouteDef]:
    from .http import json_body, ok

    service = TemporaryCredentials(shard)

    def handler(method):
        async def handle(request):
            return ok(await method(request["caller"], await json_body(request)))
        return handle

    return [web.post(f"{prefix}/temporary-table-credentials", handler(service.for_table)),
            web.post(f"{prefix}/temporary-volume-credentials", handler(service.for_volume)),
            web.post(f"{prefix}/temporary-path-credentials", handler(service.for_path))]
