"""Commits of the Iceberg REST catalog: one table's (updateTable, and a create transaction's), and the
multi-table transaction, each moving its tables' metadata pointers in one metastore write.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from ....auth import Caller
from ....entities.asset import Asset
from ....governance.authorize import authorizer
from ....iceberg import metadata as md
from ....iceberg.tables import is_iceberg_table
from ....iceberg.tables import props as properties_of
from ....entities.values import now_ms
from ....shards.shard import MetastoreState
from ....store.writes import WriteTx
from ...tree.column_governance import keep_column_governance
from ...tree.foreign_writes import commit_paths, outside
from .base import IcebergBase
from .errors import IcebergError, taken_by, missing, require_data
from .names import schema_of


class Commits(IcebergBase):
    """updateTable and commitTransaction."""

    async def commit(self, caller: Caller, full_name: str, body: dict) -> dict:
        requirements, updates = md.changes(body)
        if md.asserts_create(requirements):
            current = await self.shard.lookup(caller.metastore(), "table", full_name, caller.min_version)
            authz = await authorizer(self.shard, caller)
            # A table the caller may not see is created over as a missing one would be (and meets "already exists").
            if current is None or not authz.sees(current.type, current):
                return await self._commit_create(caller, full_name, requirements, updates)
            if not is_iceberg_table(current):            # a view or a Delta table has the name
                raise taken_by(authz, "Table", full_name, current)
        (done,) = await self._commit_all(caller, [(full_name, requirements, updates)])
        metadata, location = done
        return {"metadata-location": location, "metadata": md.metadata_json(metadata)}

    async def _commit_create(self, caller: Caller, full_name: str, requirements, updates) -> dict:
        """A create transaction's commit (after stage-create): the table is created with its first metadata."""
        schema = await self._schema(caller, schema_of(full_name))
        (await authorizer(self.shard, caller)).require("table", "create", None, parent=schema)
        metadata = md.updated(None, None, requirements, updates)
        location = self._url(metadata.location)
        staging = await self.shard.lookup(caller.metastore(), "staging_table", full_name, caller.min_version)
        managed = staging is not None and staging.storage_path == location
        if not managed:
            await self._check_external(caller, location, "location")
        metadata_location = md.next_location(metadata, None)
        io = await self._io(caller, location, write=True)
        await asyncio.to_thread(md.write_metadata, metadata, metadata_location, io)
        info = self._table_info(metadata, metadata_location, location, managed)
        await self._insert(caller, full_name, staging.id if managed else str(uuid.uuid4()), info, location)
        return {"metadata-location": metadata_location, "metadata": md.metadata_json(metadata)}

    async def transaction(self, caller: Caller, warehouse: str | None, body: dict) -> None:
        changes = body.get("table-changes")
        if not isinstance(changes, list) or not changes:
            raise IcebergError(400, "BadRequestException", "Field 'table-changes' must be a non-empty list.")
        planned, seen = [], set()
        for change in changes:
            identifier = change.get("identifier") if isinstance(change, dict) else None
            if not isinstance(identifier, dict) or not isinstance(identifier.get("name"), str):
                raise IcebergError(400, "BadRequestException", "Each table change needs an identifier "
                                                               "{namespace, name}.")
            full = self.table_name(warehouse, identifier.get("namespace") or [], identifier["name"])
            if full in seen:
                raise IcebergError(400, "BadRequestException", f"Table '{full}' appears twice in the transaction.")
            seen.add(full)
            requirements, updates = md.changes(change)
            if md.asserts_create(requirements):
                raise IcebergError(400, "BadRequestException", "A multi-table transaction cannot create tables.")
            planned.append((full, requirements, updates))
        await self._commit_all(caller, planned)

    async def _prepare(self, caller: Caller, asset: Asset, requirements, updates) -> tuple[str, object, str, dict]:
        """A commit against the table's current metadata: (base location, new metadata, its new file,
        its columns renamed by field id), the file written unless the new schema drops governance the
        caller may not drop. Requirements that do not hold raise RESOURCE_CONFLICT (409)."""
        io = await self._io(caller, asset.storage_path, write=True)
        base_location = properties_of(asset)[md.METADATA_LOCATION]
        base = await asyncio.to_thread(md.read_metadata, base_location, io)
        metadata = md.updated(base, base_location, requirements, updates)
        # A snapshot's manifest list and statistics are the table's own: the catalog reads them (planning) with
        # its own rights, and another table's would answer that table's files and bounds to this one's readers.
        # Checked after the requirements: a conflict answers 409 first, as engines retry on it.
        why = outside(asset.storage_path, [(what, url) for what, url in commit_paths(updates) if what.endswith(
            ("manifest list", "statistics file"))])
        if why is not None:
            raise IcebergError(400, "BadRequestException", f"Cannot commit to {asset.full_name}: {why}.")
        if self._url(metadata.location) != asset.storage_path:
            raise IcebergError(400, "BadRequestException", f"Table '{asset.full_name}' is at '{asset.storage_path}'; "
                                                           f"a commit cannot move it to '{metadata.location}'.")
        renamed = md.renamed_fields(base.schema(), metadata.schema())
        # a schema that drops governance the caller may not drop is refused before its file is written
        await self._with_schema(await authorizer(self.shard, caller), asset, metadata.schema(), renamed)
        location = md.next_location(metadata, base_location)
        await asyncio.to_thread(md.write_metadata, metadata, location, io)
        return base_location, metadata, location, renamed

    async def _with_schema(self, authz, table: Asset, schema, renamed: dict | None = None) -> Asset:
        """The table (or view) with `schema` as its columns, each that stays with its tags and mask
        (by field id: `renamed`); refused if it drops governance the caller may not drop."""
        new = dataclasses.replace(table, info={**table.info, "columns": md.columns_of(schema)})
        return await keep_column_governance(self.shard.store, authz, table, new, renamed=renamed)

    async def _commit_all(self, caller: Caller, planned: list, preset: dict | None = None) -> list:
        """Commit each (table, requirements, updates) in one metastore write. Each new metadata file is
        written before the write, against the table as cached; inside the write, a table whose pointer
        moved meanwhile has its commit redone on the newer metadata (serialized under the metastore's
        write, so concurrent writers all land unless their requirements conflict). `preset`: a table
        id's ready (base, metadata, file) that cannot be redone (register with overwrite)."""
        authz = await authorizer(self.shard, caller)
        prepared = {table_id: (*ready, None) for table_id, ready in (preset or {}).items()}   # columns by name
        ids = []
        for full_name, requirements, updates in planned:
            asset = await self._table(caller, full_name)
            require_data(authz, asset, write=True)                        # MODIFY
            ids.append(asset.id)
            if asset.id not in prepared:
                prepared[asset.id] = await self._prepare(caller, asset, requirements, updates)
        now = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            out = []
            for (full_name, requirements, updates), table_id in zip(planned, ids):
                current = await tx.get_by_id(table_id)
                if not is_iceberg_table(current) or current.full_name != full_name:
                    raise missing("Table", full_name, " (dropped or renamed while committing)")
                require_data(authz, current, write=True)
                base_location, metadata, location, renamed = prepared[table_id]
                if properties_of(current)[md.METADATA_LOCATION] != base_location:
                    if preset and table_id in preset:
                        raise IcebergError(409, "CommitFailedException", f"Table '{full_name}' changed meanwhile.")
                    base_location, metadata, location, renamed = prepared[table_id] = \
                        await self._prepare(caller, current, requirements, updates)
                props = {**properties_of(current), md.METADATA_LOCATION: location,
                         md.PREVIOUS_METADATA_LOCATION: base_location}
                governed = await self._with_schema(authz, current, metadata.schema(), renamed)
                info = {**governed.info, "properties": props, "updated_at": now, "updated_by": caller.name}
                await tx.put(dataclasses.replace(current, info=info))
                out.append((metadata, location))
            return out

        return await self.shard.write(caller.metastore(), write)
