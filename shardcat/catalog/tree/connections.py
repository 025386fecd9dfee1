"""Connections: how shardcat reaches a foreign catalog system, in the Unity Catalog API's shapes (Databricks' ConnectionInfo).

`/connections` creates, lists, gets, updates and deletes them; `connection_type` is one of
HIVE_METASTORE, GLUE, ICEBERG_REST, UNITY_CATALOG (any other is refused); `options` say where the
system is and how to sign in. Options that hold secrets (a token, a password, a secret key:
store/sealing.py `secret_options`) are sealed at rest like a credential's and never shown: answers
leave them out, and an update that leaves one out keeps it. The address a connection names is
vetted at create and update by web/destinations.py's rules (public addresses only, or a host the
operator allowed) and again at every use (foreign_systems.py). A connection is deleted
only while no foreign catalog uses it (or with force=true). Privileges: CREATE CONNECTION on the
metastore to create one; USE CONNECTION and CREATE FOREIGN CATALOG on it (governance/privileges.py).
"""

from __future__ import annotations

import dataclasses

from ...entities.asset import Asset
from ...entities.types import CONNECTION, CONNECTION_TYPES
from ...errors import CatalogError, invalid
from ...store.sealing import SecretKeyError, seal_info, secret_options
from ...web.routes import Handler, ShardServing
from .foreign_systems import connection_address, pinned
from .foreign_writes import PASSES_THROUGH
from .assets import render
from .crud import MetastoreLevel, crud_handlers


class Connections(MetastoreLevel):
    """`allowed`: hosts reached although not public (the operator's `--webhook-allow-host`)."""

    def __init__(self, shard, allowed=frozenset()):
        super().__init__(shard, CONNECTION, "Connection")
        self.allowed = allowed

    def output(self, asset: Asset) -> dict:
        out = render(asset)
        options = dict(out.get("options") or {})
        for key in secret_options(options):
            del options[key]
        # Writes pass through to an Iceberg REST catalog only (foreign_writes.py, docs/federation.md#writes).
        out.update(options=options, full_name=asset.name, securable_type="CONNECTION",
                   read_only=asset.info.get("connection_type") != PASSES_THROUGH)
        url = options.get("url") or options.get("uri") or options.get("endpoint_url")
        if url:
            out["url"] = url
        return out

    async def _vet(self, connection_type, options) -> None:
        if not isinstance(options, dict):
            return      # the manifest's check answers it
        address = connection_address(connection_type, options)
        if address is not None:
            await pinned(address, self.allowed)

    async def create(self, caller, body: dict) -> dict:
        connection_type = body.get("connection_type") if isinstance(body, dict) else None
        if isinstance(connection_type, str) and connection_type not in CONNECTION_TYPES:
            raise invalid(f"Unknown connection_type '{connection_type:.40}'; shardcat connects to "
                          f"{', '.join(CONNECTION_TYPES)}.")
        if isinstance(connection_type, str):
            await self._vet(connection_type, body.get("options"))
        return await super().create(caller, body)

    async def update(self, caller, name, body: dict) -> dict:
        if isinstance(body, dict) and isinstance(body.get("options"), dict):
            old = await self.find(caller, name)
            await self._vet(old.info.get("connection_type"), self._merged(old, body["options"]))
        return await super().update(caller, name, body)

    @staticmethod
    def _merged(old: Asset, options: dict) -> dict:
        """New options; the secret ones left out keep their sealed values (answers never show them)."""
        kept = old.info.get("options") or {}
        return {**{k: kept[k] for k in secret_options(kept) if k not in options}, **options}

    def _sealed(self, info: dict) -> dict:
        try:
            return seal_info(self.shard.store.secrets, "connection", info)
        except SecretKeyError as e:
            raise CatalogError("FAILED_PRECONDITION", f"This server cannot store connection secrets: {e}.") from None

    async def on_create(self, tx, state, asset, parent, flags):
        info = dict(asset.info)
        if info["connection_type"] not in CONNECTION_TYPES:
            raise invalid(f"Unknown connection_type '{info['connection_type']:.40}'; shardcat connects to "
                          f"{', '.join(CONNECTION_TYPES)}.")
        connection_address(info["connection_type"], info["options"])
        return dataclasses.replace(asset, info=self._sealed(info))

    async def on_update(self, tx, state, old, new, fields, flags):
        info = dict(new.info)
        if "options" in fields:
            info["options"] = self._merged(old, fields["options"])
            connection_address(info["connection_type"], info["options"])
        return dataclasses.replace(new, info=self._sealed(info))

    async def _users(self, state, connection: Asset) -> list[Asset]:
        catalogs = await self.shard.children_where(state.id, state.id, "catalog",
                                                   lambda a: a.info.get("connection_name") == connection.name,
                                                   after="", limit=1000)
        return catalogs

    async def on_rename(self, tx, state, old, new):
        for catalog in await self._users(state, old):
            await tx.put(dataclasses.replace(catalog, info={**catalog.info, "connection_name": new.name}))

    async def on_delete(self, tx, state, asset, force):
        users = await self._users(state, asset)
        if users and not force:
            raise CatalogError("FAILED_PRECONDITION",
                               f"Connection '{asset.name}' is used by {len(users)} foreign catalog(s), e.g. "
                               f"'{users[0].name}'. Delete them first or pass force=true.")


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    return crud_handlers(Connections(serving.shard, serving.webhook_allow_hosts), "Connection")
