"""Writes to foreign catalogs: which pass through to the foreign system (creating an Iceberg table in, and
committing to an Iceberg table of, a foreign catalog of an ICEBERG_REST connection), how, and the clear
refusal of every other one.

shardcat authorizes, the foreign catalog commits (it owns the truth). The callers (the Iceberg REST catalog,
protocols/iceberg/foreign_tables.py, and the Unity Catalog API's createTable, tables.py) decide first: the
caller's grants (CREATE TABLE on the schema, MODIFY on the table) and the storage rules (one asset per path,
external locations, what a commit may point at: `outside`). Then the create or commit goes to the foreign
catalog through pyiceberg's REST client with the connection's credentials, at the address vetted as for every
read (foreign_systems.py), and that one table is fetched again (foreign.py) so the next read sees it. Nothing
is written here before the foreign catalog has answered: when it cannot be reached the write fails with 503
naming the connection, and nothing changed. The other connection types are read-only (`READ_ONLY` says why).
"""

from __future__ import annotations

import dataclasses
import json
import uuid

from ...auth import Caller
from ...entities.asset import Asset
from ...entities.columns import check_columns
from ...entities.foreign import is_foreign_catalog, is_mirrored
from ...entities.names import check_name
from ...entities.urls import InvalidUrl, is_within, normalize_url
from ...errors import CatalogError, invalid
from ...governance.authorize import authorizer
from ...shards.locations import require_external_location
from ...shards.shard import MetastoreState, Shard
from .foreign_systems import Unreachable, threaded
from .path_access import owner_label

PASSES_THROUGH = "ICEBERG_REST"
# Why a foreign catalog of each other connection type takes no writes through shardcat.
READ_ONLY = {
    "UNITY_CATALOG": "another Unity Catalog commits its tables itself (Delta commits, its own API); shardcat "
                     "reads it",
    "GLUE": "AWS Glue's tables are written by the engines that own them, and Glue has no commit protocol for "
            "shardcat to pass a write through",
    "HIVE_METASTORE": "a Hive metastore's tables are written by the engines that own them, and the metastore has no "
                      "commit protocol for shardcat to pass a write through",
}
# Table properties that name where an Iceberg writer puts files: each must stay inside the table's storage.
PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path")


def read_only(what: str, full_name: str, connection: Asset) -> CatalogError:
    kind = connection.info.get("connection_type")
    why = READ_ONLY.get(kind, "its foreign system takes no writes through shardcat")
    return invalid(f"Cannot {what} '{full_name}': it lies in a foreign catalog of {kind} connection "
                   f"'{connection.name}', which is read-only here ({why}). Only creating Iceberg tables in, and "
                   f"committing to Iceberg tables of, foreign catalogs of {PASSES_THROUGH} connections pass through.")


def not_passed(what: str, full_name: str, why: str) -> CatalogError:
    """A write to an ICEBERG_REST foreign catalog that does not pass through (what does: the module's docstring)."""
    return invalid(f"Cannot {what} '{full_name}': it lies in a foreign catalog, and {why}. Creating Iceberg tables "
                   "and committing to them pass through to the foreign catalog; nothing else is written there "
                   "through shardcat.")


def unreachable_write(connection: str, catalog: str, why: str) -> CatalogError:
    return CatalogError("TEMPORARILY_UNAVAILABLE",
                        f"The foreign system of connection '{connection}' (catalog '{catalog}') cannot be reached "
                        f"({why}); nothing was written.")


def outside(location: str, named: list[tuple[str, str]]) -> str | None:
    """The first of (what, url) that lies outside `location` (said as the refusal's reason), else None. A
    new location must be the table's own: a table is not moved, not even within its storage."""
    for what, url in named:
        try:
            normal = normalize_url(url)
            inside = normal == location if what == "new location" else is_within(normal, location)
        except InvalidUrl:
            inside = False
        if not inside:
            return f"its {what} '{url:.200}' lies outside the table's storage '{location}'"
    return None


def commit_paths(updates: list) -> list[tuple[str, str]]:
    """What an Iceberg commit's updates point at: (what, url) for a new location, a path property, a
    snapshot's manifest list, statistics files."""
    from pyiceberg.table.update import (AddSnapshotUpdate, SetLocationUpdate, SetPartitionStatisticsUpdate,
                                        SetPropertiesUpdate, SetStatisticsUpdate)
    out = []
    for u in updates:
        if isinstance(u, SetLocationUpdate):
            out.append(("new location", u.location))
        elif isinstance(u, SetPropertiesUpdate):
            out += property_paths(u.updates)
        elif isinstance(u, AddSnapshotUpdate):
            out.append(("manifest list", u.snapshot.manifest_list))
        elif isinstance(u, SetStatisticsUpdate):
            out.append(("statistics file", u.statistics.statistics_path))
        elif isinstance(u, SetPartitionStatisticsUpdate):
            out.append(("partition statistics file", u.partition_statistics.statistics_path))
    return out


def property_paths(properties: dict) -> list[tuple[str, str]]:
    return [(f"property '{k}'", properties[k]) for k in PATH_PROPERTIES if properties.get(k)]


def iceberg_schema_of(columns) -> object:
    """The Iceberg schema of a Unity Catalog createTable's columns (their Spark types, as UniForm maps them)."""
    from ...delta.replay import Unconvertible
    from ...iceberg.uniform import iceberg_schema
    checked = check_columns(columns)
    if not checked:
        raise invalid("An Iceberg table created in a foreign catalog needs columns.")
    fields = [{**json.loads(c["type_json"]), "name": c["name"], "nullable": c.get("nullable", True)} for c in checked]
    try:
        schema, _ = iceberg_schema(json.dumps({"type": "struct", "fields": fields}), 0, None, 0)
    except Unconvertible as e:
        raise invalid(f"A column has no Iceberg type: {e}.") from None
    return schema


# ---- pyiceberg's REST client, in a worker thread (foreign_systems.threaded) ------------------------------


def _answered(e: Exception, connection: str) -> Exception:
    """What the foreign catalog's refusal is here (its message quoted), or the exception itself (threaded()
    makes anything else `Unreachable`: a server error, a lost connection, an unknown commit state)."""
    from pyiceberg import exceptions as ice
    said = f"{str(e):.300}"
    there = f"the foreign catalog of connection '{connection}'"
    if isinstance(e, ice.TableAlreadyExistsError):
        return CatalogError("ALREADY_EXISTS", f"Table already exists in {there}: {said}")
    if isinstance(e, (ice.NoSuchTableError, ice.NoSuchNamespaceError)):
        return CatalogError("NOT_FOUND", f"Not found in {there}: {said}")
    if isinstance(e, ice.CommitStateUnknownException):
        return CatalogError("TEMPORARILY_UNAVAILABLE", f"{there.capitalize()} could not say whether the commit "
                                                       f"landed ({said}); refresh the foreign catalog to see.")
    if isinstance(e, ice.CommitFailedException):
        return CatalogError("RESOURCE_CONFLICT", f"{there.capitalize()} refused the commit: {said}")
    if isinstance(e, (ice.BadRequestError, ice.ValidationError)):
        return invalid(f"{there.capitalize()} refused the write: {said}")
    if isinstance(e, (ice.ForbiddenError, ice.UnauthorizedError)):
        return CatalogError("PERMISSION_DENIED", f"{there.capitalize()} refused the connection's credentials: {said}")
    return e


def _stage(rest, connection: str, identifier: tuple, schema, location, spec, order, properties):
    """Stage the create in the foreign catalog (nothing made there yet): its answer says the table's location."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    try:
        return rest.create_table_transaction(identifier, schema, location, spec or UNPARTITIONED_PARTITION_SPEC,
                                             order or UNSORTED_SORT_ORDER, properties or {})
    except Exception as e:
        raise _answered(e, connection) from None


def _create_staged(transaction, connection: str) -> None:
    try:
        transaction.commit_transaction()
    except Exception as e:
        raise _answered(e, connection) from None


def _commit(rest, connection: str, identifier: tuple, location: str, requirements: list, updates: list):
    """Commit to the foreign catalog's table, if it still lies where shardcat authorized the write."""
    try:
        table = rest.load_table(identifier)
        if normalize_url(table.metadata.location) != location:
            raise CatalogError("RESOURCE_CONFLICT", f"The table moved to '{table.metadata.location:.200}' in the "
                                                    f"foreign catalog of connection '{connection}'; refresh the "
                                                    "foreign catalog and try again.")
        return rest.commit_table(table, tuple(requirements), tuple(updates))
    except CatalogError:
        raise
    except Exception as e:
        raise _answered(e, connection) from None


@dataclasses.dataclass
class Target:
    """Where a write to a foreign catalog goes: the catalog, its connection, and the caller's metastore."""
    ms: str
    catalog: Asset
    connection: Asset


class ForeignWrites:
    """The writes that pass through to foreign catalogs, over the shard's Federation (foreign.py), whose
    fetching, connections and clients it uses."""

    def __init__(self, shard, federation):
        self.shard, self.federation = shard, federation

    async def catalog_of(self, caller: Caller, asset_or_name) -> Asset | None:
        """The foreign catalog an asset (or a full name) lies in; None for a native one."""
        name = asset_or_name if isinstance(asset_or_name, str) else asset_or_name.full_name
        catalog = await self.shard.lookup(caller.metastore(), "catalog", name.split(".")[0].lower(), caller.min_version)
        return catalog if is_foreign_catalog(catalog) else None

    async def target(self, caller: Caller, catalog: Asset, what: str, full_name: str) -> Target:
        """The write's target, or the refusal naming the connection when its type is read-only."""
        if not isinstance(self.shard, Shard):       # a multi-asset transaction's view of the shard
            raise not_passed(what, full_name, "a multi-asset transaction does not pass through to a foreign system "
                             "(its writes would land there whatever became of the transaction)")
        ms = caller.metastore()
        connection = await self.federation.connection_of(ms, catalog)
        if connection.info.get("connection_type") != PASSES_THROUGH:
            raise read_only(what, full_name, connection)
        return Target(ms, catalog, connection)

    async def passes_writes(self, caller: Caller, table: Asset) -> bool:
        """Whether `table` is an Iceberg table of a foreign catalog whose writes pass through."""
        if not is_mirrored(table) or table.info.get("data_source_format") != "ICEBERG":
            return False
        connection = await self.shard.lookup(caller.metastore(), "connection", table.info["foreign"]["connection"])
        return connection is not None and connection.info.get("connection_type") == PASSES_THROUGH

    async def _client(self, target: Target):
        system = self.federation.client_of(target.connection, target.catalog)
        try:
            return await system.rest_catalog()
        except Unreachable as e:
            raise unreachable_write(target.connection.name, target.catalog.name, str(e)) from None

    async def _run(self, target: Target, fn, *args):
        try:
            return await threaded(fn, *args)
        except Unreachable as e:
            raise unreachable_write(target.connection.name, target.catalog.name, str(e)) from None

    async def create_table(self, caller: Caller, target: Target, schema: Asset, name: str, iceberg_schema,
                           location: str | None, spec, order, properties: dict, check) -> None:
        """Create the table in the foreign catalog: staged there first, so that `check(location)` (the caller's
        storage rules) sees where the foreign catalog puts it before anything is made; then created, fetched
        here, and owned by its creator as a native table is."""
        rest = await self._client(target)
        identifier = (schema.info["foreign"]["name"], name)
        staged = await self._run(target, _stage, rest, target.connection.name, identifier, iceberg_schema,
                                 location, spec, order, properties)
        await check(staged.table_metadata.location)
        await self._run(target, _create_staged, staged, target.connection.name)
        await self.federation.fetch_table(target.ms, target.catalog, schema.name, name)
        await self._owned(target.ms, f"{schema.full_name}.{name}", caller.name)

    async def commit(self, caller: Caller, target: Target, table: Asset, requirements: list, updates: list):
        """Commit to the foreign catalog's table (its answer: metadata location and metadata), then fetch it."""
        rest = await self._client(target)
        schema_name = table.full_name.split(".")[1]
        schema = await self.shard.lookup(target.ms, "schema", f"{target.catalog.name}.{schema_name}")
        identifier = (schema.info["foreign"]["name"], table.info["foreign"]["name"])
        answer = await self._run(target, _commit, rest, target.connection.name, identifier, table.storage_path,
                                 requirements, updates)
        await self.federation.fetch_table(target.ms, target.catalog, schema_name, table.name)
        return answer

    async def _owned(self, ms: str, full_name: str, owner: str) -> None:
        async def write(tx, state):
            table = await tx.get("table", full_name)
            if table is not None and is_mirrored(table) and table.info.get("owner") != owner:
                await tx.put(dataclasses.replace(table, info={**table.info, "owner": owner}))
        await self.shard.write(ms, write)

    # ---- the Unity Catalog API's createTable ----------------------------------------------------------

    async def create_from_unity_catalog(self, caller: Caller, catalog: Asset, body: dict) -> str:
        """A createTable whose catalog is foreign: an Iceberg table (MANAGED: where the foreign catalog puts
        it; EXTERNAL: at `storage_location`) passes through; anything else is refused. Its full name."""
        schema_name = check_name(body.get("schema_name"), "schema")
        name = check_name(body.get("name"), "table")
        full_name = f"{catalog.name}.{schema_name}.{name}"
        authz = await authorizer(self.shard, caller)
        missing = CatalogError("NOT_FOUND", f"Schema '{catalog.name}.{schema_name}' does not exist.")
        if not authz.sees("catalog", catalog):
            raise missing               # as a native create answers: nothing said of what the caller may not see
        target = await self.target(caller, catalog, "create a table in", f"{catalog.name}.{schema_name}")
        await self.federation.before_read(caller, "schema", f"{catalog.name}.{schema_name}", False)
        schema = await self.shard.lookup(target.ms, "schema", f"{catalog.name}.{schema_name}", caller.min_version)
        if schema is None:
            raise missing
        authz.require_or_missing("table", "create", None, missing, parent=schema)
        if (body.get("data_source_format") or "").upper() != "ICEBERG":
            raise not_passed("create a table in", schema.full_name, "only Iceberg tables (data_source_format "
                             "ICEBERG) are created in a foreign Iceberg REST catalog")
        table_type = (body.get("table_type") or "MANAGED").upper()
        if table_type not in ("MANAGED", "EXTERNAL"):
            raise not_passed("create a table in", schema.full_name, f"a {table_type} is not an Iceberg table")
        location = body.get("storage_location")
        if (table_type == "EXTERNAL") != bool(location):
            raise invalid("An EXTERNAL table needs storage_location; a MANAGED one takes none (the foreign catalog "
                          "places it).")
        properties = body.get("properties") or {}
        # Checked here as sent on: the native type checks are not on this path, and a path property that
        # is not text would reach the storage rules as something else.
        if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
            raise invalid("Field 'properties' must be an object whose values are strings.")
        if await self.shard.lookup(target.ms, "table", full_name, caller.min_version) is not None:
            raise CatalogError("ALREADY_EXISTS", f"Table '{full_name}' already exists.")

        async def check(url: str) -> None:
            await self.check_new_location(caller, url, property_paths(properties))

        if location:
            await check(location)
        await self.create_table(caller, target, schema, name, iceberg_schema_of(body.get("columns")), location,
                                None, None, dict(properties), check)
        return full_name

    async def check_new_location(self, caller: Caller, location: str, paths: list) -> None:
        """A new foreign table's location, before the foreign catalog makes it: one asset per path, inside an
        external location when the metastore has any, CREATE EXTERNAL TABLE on it, and its path properties
        inside it."""
        try:
            url = normalize_url(location)
        except InvalidUrl as e:
            raise invalid(f"Invalid location: {e}") from None
        authz = await authorizer(self.shard, caller)
        probe_id = str(uuid.uuid4())

        async def check(state: MetastoreState) -> None:
            hit = state.trie.first_overlap(url)
            if hit is not None:
                raise invalid(f"The location '{url}' overlaps the storage of "
                              f"{await owner_label(self.shard, caller, hit[1])}.")
            require_external_location(state, url, "location")
            probe = Asset(id=probe_id, metastore_id=state.id, type="table", namespace="table", parent_id=state.id,
                          name="", full_name="", storage_path=url, info={"table_type": "EXTERNAL"})
            authz.require_storage(state, probe)

        # A cold owner answers from the paths it loads, as the create's write will (shards/path_waits.py).
        await self.shard.asking_paths(caller.metastore(), caller.min_version, check)
        why = outside(url, paths)
        if why is not None:
            raise invalid(f"Cannot create a table at '{url}': {why}.")
