"""The Iceberg REST catalog's writes in foreign catalogs: createTable and updateTable (a commit: an append, a
schema change, ...) pass through to a foreign Iceberg REST catalog, authorized here first
(catalog/tree/foreign_writes.py sends them); every other write into a foreign catalog is refused, saying why.

Placed first among IcebergCatalog's bases, so each method here decides for foreign catalogs and hands
everything else to the operation it overrides. What a pass-through checks, before the foreign catalog hears of
it: CREATE TABLE on the schema (a create) or MODIFY on the table (a commit, as for a native table: USE CATALOG,
USE SCHEMA, a trusted engine for a filtered or masked table); the new table's location by the rules a new
external table meets (one asset per path, external locations, CREATE EXTERNAL TABLE on it); a commit's
location, path properties, manifest lists and statistics files inside the table's storage. A loaded foreign
table's vended credentials are read-write for who may commit to it, for its storage only.
"""

from __future__ import annotations

from ....auth import Caller
from ....entities.asset import Asset
from ....entities.foreign import is_mirrored
from ....governance.authorize import authorizer, data_decision
from ....iceberg import metadata as md
from ....shards.locations import require_external_location
from ...tree.foreign_writes import ForeignWrites, commit_paths, not_passed, outside, property_paths
from .base import IcebergBase
from .errors import IcebergError, missing, taken_by
from .names import schema_of


class ForeignTables(IcebergBase):
    """createTable, updateTable and the credentials of foreign catalogs' tables; the other writes refused there."""

    @property
    def foreign_writes(self) -> ForeignWrites:
        return ForeignWrites(self.shard, self.catalogs.federation)

    async def create_table(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        request = md.create_request(body)
        schema_full, full = self.new_name(warehouse, raw, request.name)
        catalog = await self.foreign_writes.catalog_of(caller, schema_full)
        if catalog is None:
            return await super().create_table(caller, warehouse, raw, body)
        authz = await authorizer(self.shard, caller)
        if not authz.sees("catalog", catalog):
            raise missing("Namespace", schema_full)
        # A read-only connection's refusal comes first: nothing is fetched from its system for a write.
        target = await self.foreign_writes.target(caller, catalog, "create a table in", schema_full)
        schema = await self._schema(caller, schema_full)
        authz.require("table", "create", None, parent=schema)
        if request.stage_create:
            raise not_passed("stage a table in", schema.full_name, "a create transaction (stage-create) does not pass "
                             "through: create the table, then commit to it")
        existing = await self.shard.lookup(caller.metastore(), "table", full, caller.min_version)
        if existing is not None:
            raise taken_by(authz, "Table", full, existing)
        properties = dict(request.properties or {})

        async def check(location: str) -> None:
            await self.foreign_writes.check_new_location(caller, location, property_paths(properties))

        if request.location:
            await check(request.location)
        await self.foreign_writes.create_table(caller, target, schema, full.rsplit(".", 1)[1], request.table_schema,
                                               request.location, request.partition_spec, request.write_order,
                                               properties, check)
        return await self.load_table(caller, full)

    async def commit(self, caller: Caller, full_name: str, body: dict) -> dict:
        catalog = await self.foreign_writes.catalog_of(caller, full_name)
        if catalog is None:
            return await super().commit(caller, full_name, body)
        requirements, updates = md.changes(body)
        if md.asserts_create(requirements):
            raise not_passed("create", full_name, "a create transaction (stage-create) does not pass through: "
                             "create the table, then commit to it")
        table = await self._table(caller, full_name)
        authz = await authorizer(self.shard, caller)
        # MODIFY, as for a native table (who may not see the table hears it is missing)
        authz.require_data(table, write=True, missing=missing("Table", full_name), passing_through=True)
        target = await self.foreign_writes.target(caller, catalog, "commit to", table.full_name)
        location = table.storage_path
        if location is None:
            why = (table.info.get("foreign") or {}).get("storage") or "it has no storage location"
            raise IcebergError(400, "BadRequestException", f"Cannot commit to {full_name}: its storage is not "
                                                           f"served here ({why}).")
        async def inside(state) -> None:      # a cold owner loads the locations alone (shards/path_waits.py)
            require_external_location(state, location, f"location of table '{table.full_name}'")
        await self.shard.asking_paths(caller.metastore(), caller.min_version, inside)
        why = outside(location, commit_paths(updates))
        if why is not None:
            raise IcebergError(400, "BadRequestException", f"Cannot commit to {full_name}: {why}.")
        answer = await self.foreign_writes.commit(caller, target, table, requirements, updates)
        return {"metadata-location": answer.metadata_location, "metadata": md.metadata_json(answer.metadata)}

    async def transaction(self, caller: Caller, warehouse: str | None, body: dict) -> None:
        changes = body.get("table-changes") if isinstance(body, dict) else None
        for change in changes if isinstance(changes, list) else []:
            identifier = change.get("identifier") if isinstance(change, dict) else None
            if isinstance(identifier, dict) and isinstance(identifier.get("name"), str):
                full = self.table_name(warehouse, identifier.get("namespace") or [], identifier["name"])
                if await self.foreign_writes.catalog_of(caller, full) is not None:
                    raise not_passed("commit to", full, "a multi-table transaction does not pass through (commit "
                                     "to each table on its own)")
        return await super().transaction(caller, warehouse, body)

    async def register_table(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        await self._refuse_making(caller, warehouse, raw, "register a table in")
        return await super().register_table(caller, warehouse, raw, body)

    async def create_view(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        await self._refuse_making(caller, warehouse, raw, "create a view in")
        return await super().create_view(caller, warehouse, raw, body)

    async def register_view(self, caller: Caller, warehouse: str | None, raw: str, body: dict) -> dict:
        await self._refuse_making(caller, warehouse, raw, "register a view in")
        return await super().register_view(caller, warehouse, raw, body)

    async def _refuse_making(self, caller: Caller, warehouse: str | None, raw, what: str) -> None:
        """Refuse a table or view made otherwise than by createTable in a foreign catalog the caller sees
        (one it may not see is left to the operation, which answers as for a missing namespace)."""
        schema_full = self.schema_name(warehouse, self.namespace(warehouse, raw))
        catalog = await self.foreign_writes.catalog_of(caller, schema_full)
        if catalog is not None and (await authorizer(self.shard, caller)).sees("catalog", catalog):
            raise not_passed(what, schema_full, "only createTable and commits pass through")

    async def _insert(self, caller: Caller, full: str, table_id: str, info: dict, expect_path: str | None) -> Asset:
        # Every other row made by this catalog (register, a view, a create transaction's commit) stays out.
        if await self.foreign_writes.catalog_of(caller, full) is not None:
            kind = "a view" if info.get("table_type") == "VIEW" else "a table"
            raise not_passed(f"make {kind} in", schema_of(full), "only createTable and commits pass through")
        return await super()._insert(caller, full, table_id, info, expect_path)

    async def _move(self, caller: Caller, src, dst, view: bool) -> None:
        if await self.foreign_writes.catalog_of(caller, src) is not None:
            raise not_passed("move", src, "its foreign catalog names its tables")
        return await super()._move(caller, src, dst, view)

    async def _credentials(self, caller: Caller, asset: Asset, authz) -> list[dict]:
        """A foreign table whose commits pass through: read-write credentials for who may commit, for its
        storage only (none when shardcat does not serve its storage)."""
        if not is_mirrored(asset):
            return await super()._credentials(caller, asset, authz)
        if asset.storage_path is None:
            return []
        write = await self.foreign_writes.passes_writes(caller, asset) and \
            data_decision(authz, asset, write=True, passing_through=True).allowed
        config = await self._io(caller, asset.storage_path, write=write, own=False)
        return [{"prefix": asset.storage_path, "config": config}] if config else []

