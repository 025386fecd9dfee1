"""Temporary credentials for a table's, a volume's or a path's storage.

`POST /temporary-table-credentials`, `/temporary-volume-credentials` and
`/temporary-path-credentials` answer in the client's TemporaryCredentials shape
(`expiration_time`, `url`, and the cloud credential when there is one); table credentials
also serve a staging table's id (its reserved location, for whoever may create the table). For file://
storage there is no secret to hand out, so the answer carries none; s3:// gets STS
credentials down-scoped to the path, abfss:// a SAS on its directory, gs:// an access token
down-scoped to its prefix (governance/vending.py and its cloud modules, docs/storage.md). The caller's privilege on the asset (a path: the asset that
owns it, else its external location) decides first (governance/authorize.py).
"""

from __future__ import annotations

import uuid


from ...auth import Caller
from ...errors import invalid, not_found
from ...governance import audit
from ...governance.authorize import authorizer, require_data_access
from ...governance.vending import vend
from ...shards.locations import require_external_location
from ...shards.shard import Shard
from ..tree.path_access import authorize_path, authorize_subtree, owner_label, refuse_managed_root
from ..tree.storage import storage_url
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing

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

    async def _vend(self, caller: Caller, url: str, operation: str) -> dict:
        return await vend(self.shard, caller, url, write=operation in WRITES)

    async def _by_id(self, caller: Caller, asset_id: str, type_name: str, label: str):
        ms = caller.metastore()
        asset = await self.shard.lookup_id(ms, asset_id, caller.min_version)
        if asset is None or asset.type != type_name:
            raise not_found(f"{label} with id '{asset_id}' does not exist.")
        audit.annotate(type_name.upper(), asset.full_name, asset.id)
        return asset

    async def for_table(self, caller: Caller, body: dict) -> dict:
        return await self._for_asset(caller, body, "table", "Table", TABLE_OPERATIONS)

    async def for_volume(self, caller: Caller, body: dict) -> dict:
        return await self._for_asset(caller, body, "volume", "Volume", VOLUME_OPERATIONS)

    async def _for_asset(self, caller: Caller, body: dict, type_name: str, label: str, operations) -> dict:
        asset_id = _asset_id(body, f"{type_name}_id")
        operation = _operation(body, operations)
        if type_name == "table":
            staging = await self._staging(caller, asset_id)
            if staging is not None:
                return await self._vend(caller, staging.storage_path, operation)
        asset = await self._by_id(caller, asset_id, type_name, label)
        await require_data_access(self.shard, caller, asset, write=operation in WRITES,
                                  missing=not_found(f"{label} with id '{asset_id}' does not exist."))
        if not asset.storage_path:
            kind = f" is a {asset.info.get('table_type')} and" if type_name == "table" else ""
            raise invalid(f"{label} '{asset.full_name}'{kind} has no storage.")
        return await self._vend(caller, asset.storage_path, operation)

    async def _staging(self, caller: Caller, asset_id: str):
        """A staging table with this id, authorized: writing its location before the table exists is
        for whoever may create the table (CREATE TABLE, USE SCHEMA, USE CATALOG), as reserving it was."""
        ms = caller.metastore()
        staging = await self.shard.lookup_id(ms, asset_id, caller.min_version)
        if staging is None or staging.type != "staging_table":
            return None
        audit.annotate("TABLE", staging.full_name, staging.id)
        schema = await self.shard.lookup_id(ms, staging.parent_id, caller.min_version)
        (await authorizer(self.shard, caller)).require("staging_table", "create", None, parent=schema)
        return staging

    async def for_path(self, caller: Caller, body: dict) -> dict:
        url = storage_url(_field(body, "url"))
        operation = _operation(body, PATH_OPERATIONS)

        async def check(state) -> None:
            require_external_location(state, url, "url")
            refuse_managed_root(state, url)
            if operation == "PATH_CREATE_TABLE":
                hit = state.trie.first_overlap(url)
                if hit is not None:
                    raise invalid(f"The url '{url}' overlaps the storage of "
                                  f"{await owner_label(self.shard, caller, hit[1])}: no new table can be created there.")
            # Same rules by path as by name (path_access.py), for everything the credentials reach.
            await authorize_path(self.shard, caller, state, url, write=operation in WRITES)
            await authorize_subtree(self.shard, caller, state, url, write=operation in WRITES)

        # A cold owner answers from the paths it loads (shards/path_waits.py); a path an asset owns is
        # then read as every read by path is, once the whole index is in (Shard.snapshot).
        await self.shard.asking_paths(caller.metastore(), caller.min_version, check)
        return await self._vend(caller, url, operation)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = TemporaryCredentials(shard)

    def handler(method):
        async def handle(request):
            return ok(await method(request["caller"], await json_body(request)))
        return handle

    return {"generateTemporaryTableCredentials": handler(service.for_table),
            "generateTemporaryVolumeCredentials": handler(service.for_volume),
            "generateTemporaryPathCredentials": handler(service.for_path)}
