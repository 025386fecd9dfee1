"""Named snapshots of a catalog or schema, restore to a snapshot, and clones (docs/versions.md).

A snapshot pins a catalog or schema at a metastore version; the history's purge keeps every
state current at a pinned version, so the snapshot outlives the retention window until dropped.
Restore brings the subtree's metadata back to the snapshot in one metastore write. A clone is a
new catalog or schema made from another's state at a version or snapshot: metadata only, owned
by the caller, no grants copied; its Delta tables are shallow clones (delta/clone.py) whose logs
reference the source's files, which the source's purge and vacuum then keep.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid


from ...auth import Caller
from ...delta import clone as delta_clone
from ...delta import vacuum as delta_vacuum
from ...delta.commits import is_catalog_managed
from ...entities.asset import Asset, name_today
from ...entities.names import check_name, full_name_key
from ...entities.types import TYPES
from ...entities.urls import join_url
from ...entities.values import now_ms
from ...errors import CatalogError, already_exists, invalid, not_found
from ...governance import abac
from ...governance.authorize import authorizer, carries_policies
from ...shards.session import reading_at
from ...shards.shard import MetastoreState, Shard
from ...store import history
from ...store.writes import WriteTx
from ...store.history import PastRead
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ...web.paging import decode_page_token, encode_page_token, page_size
from ..tree.column_governance import keep_column_governance
from .versions import AS_OF_TIMESTAMP, AS_OF_VERSION, version_asked

PINNABLE = ("catalog", "schema")
# Table properties that make a table catalog-managed: a clone's plain log is not.
_MANAGED_KEYS = ("delta.feature.catalogManaged", "delta.feature.catalogOwned-preview", "io.unitycatalog.tableId")


def _kind(value) -> str:
    kind = str(value or "").lower()
    if kind not in PINNABLE:
        raise invalid("Field 'securable_type' must be CATALOG or SCHEMA.")
    return kind


def _missing(kind: str, full_name: str) -> CatalogError:
    return not_found(f"{kind.capitalize()} '{full_name}' does not exist.")


class SnapshotService:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    async def _at(self, caller: Caller, kind: str, full_name: str):
        """(the catalog or schema as it was at the version the session reads at (`reading_at`), an
        Authz for reads then, to be used while still reading at it); 404 as a read would."""
        key = full_name_key(full_name, TYPES[kind].name_parts, kind)
        asset = await self.shard.lookup(caller.metastore(), TYPES[kind].namespace, key, caller.min_version)
        authz = await authorizer(self.shard, caller)
        if asset is None:
            raise _missing(kind, full_name)
        authz.require_or_missing(kind, "read", asset, _missing(kind, full_name))
        return asset, authz

    async def _version(self, caller: Caller, body: dict) -> int:
        v, ts = body.get(AS_OF_VERSION), body.get(AS_OF_TIMESTAMP)
        for name, value in ((AS_OF_VERSION, v), (AS_OF_TIMESTAMP, ts)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise invalid(f"Field '{name}' must be a non-negative integer.")
        if v is None and ts is None:
            await self.shard.state(caller.metastore(), caller.min_version, paths=False)    # caught up
            return await self.store.metastore_version(caller.metastore())
        return await version_asked(self.shard, caller, v, ts)

    # ---- snapshots ----------------------------------------------------------------------------

    async def create(self, caller: Caller, body: dict) -> dict:
        name = check_name(body.get("name"), "snapshot")
        kind = _kind(body.get("securable_type"))
        full_name = body.get("full_name")
        if not isinstance(full_name, str):
            raise invalid("Missing required field 'full_name'.")
        comment = body.get("comment")
        if comment is not None and not isinstance(comment, str):
            raise invalid("Field 'comment' must be a string.")
        version = await self._version(caller, body)
        with reading_at(PastRead(version)):
            asset, authz = await self._at(caller, kind, full_name)
            # Pinning keeps history past the window: the owner's (or MANAGE, or an admin's) call.
            authz.require(kind, "update", asset)
        made = await history.add_snapshot(self.store, caller.metastore(), name, kind, asset.id, asset.full_name,
                                          version, comment, caller.name)
        if made is None:
            raise already_exists(f"Snapshot '{name}' already exists.")
        return made

    async def get(self, caller: Caller, name: str) -> dict:
        found = await history.get_snapshot(self.store, caller.metastore(), name.lower())
        if found is None or not await self._sees(caller, found):
            raise not_found(f"Snapshot '{name}' does not exist.")
        return found

    async def _sees(self, caller: Caller, snap: dict) -> bool:
        """Whoever may read the pinned catalog or schema as it was then may see its snapshot."""
        with reading_at(PastRead(snap["version"])):
            try:
                await self._at(caller, snap["securable_type"].lower(), snap["full_name"])
                return True
            except CatalogError:
                return False

    async def list(self, caller: Caller, max_results=None, page_token: str | None = None) -> dict:
        limit = page_size(max_results)
        found = await history.list_snapshots(self.store, caller.metastore(), decode_page_token(page_token), limit + 1)
        page = found[:limit]
        out = {"snapshots": [s for s in page if await self._sees(caller, s)]}
        if len(found) > limit:
            out["next_page_token"] = encode_page_token(page[-1]["name"])
        return out

    async def delete(self, caller: Caller, name: str) -> None:
        snap = await self.get(caller, name)
        if snap["created_by"] != caller.name:
            with reading_at(PastRead(snap["version"])):
                asset, authz = await self._at(caller, snap["securable_type"].lower(), snap["full_name"])
                authz.require(asset.type, "update", asset)
        await history.delete_snapshot(self.store, caller.metastore(), snap["name"])

    # ---- restore ------------------------------------------------------------------------------

    async def restore(self, caller: Caller, name: str) -> dict:
        """The snapshot's catalog or schema, and everything below it, back as they were, in one
        metastore write: what was created since is deleted, what changed is put back, what was
        dropped comes back (same ids, with the grants it held). Metadata only: a Delta table's data
        is its log's."""
        snap = await self.get(caller, name)
        ms = caller.metastore()
        past = await history.subtree_at(self.store, ms, snap["version"], snap["securable_id"])
        if not past:
            raise not_found(f"Snapshot '{name}' pins nothing that is kept.")
        root = past[0]
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            current = await tx.get_by_id(root.id)
            if current is not None:
                authz.require(root.type, "update", current)
            elif not authz.admin:
                raise CatalogError("PERMISSION_DENIED", f"{root.type.capitalize()} '{root.full_name}' was dropped: "
                                                        "only an admin may restore it from a snapshot.")
            elif root.parent_id != state.id and await tx.get_by_id(root.parent_id) is None:
                raise CatalogError("FAILED_PRECONDITION", f"The container of '{root.full_name}' does not exist now.")
            present = ([current] if current else []) + (await tx.descendants(root.id) if current else [])
            kept = {a.id for a in past}
            gone = [a for a in present if a.id not in kept]
            if gone:
                await tx.delete(gone)
            now = {a.id: a for a in present}
            # what was dropped since comes back with the grants it held when dropped, as an undrop
            regranted = await history.grants_at_drop(tx, ms, [a.id for a in past if a.id not in now])
            changed = 0
            for a in past:
                today = now.get(a.id)
                if today is None or today.written_at != a.written_at:
                    if today is not None:
                        # metadata goes back, governance stays today's: removing a tag or mask needs its rights
                        governed = dataclasses.replace(history.governed_as_today(a, today), storage_path=a.storage_path)
                        a = await keep_column_governance(self.store, authz, today, governed)
                    try:
                        await tx.put(a)
                    except KeyError:
                        raise already_exists(f"Cannot restore: the name '{a.full_name}' is taken now.") from None
                    changed += 1
                if a.id in regranted:
                    await history.restore_grants(tx, a, regranted[a.id])
            return changed, len(gone)

        changed, deleted = await self.shard.write(ms, write)
        return {"name": snap["name"], "restored_to_version": snap["version"], "put_back": changed,
                "deleted": deleted}

    # ---- clone ----------------------------------------------------------------------------------

    async def clone(self, caller: Caller, body: dict) -> dict:
        """A new catalog or schema `name` made from `source` as it was at a version, a time or a
        snapshot, governed as the source is today. Only what the caller may read there is cloned
        (a table: with SELECT on it; one with a row filter, column masks or an ABAC policy: by who
        administers it, and only where its ABAC policies follow it); the caller owns every clone,
        and no grant is copied. Delta tables become shallow clones; other tables with storage,
        external volumes and registered models are skipped (listed in the answer, which names
        nothing the caller may not see)."""
        snapshot = body.get("snapshot")
        if snapshot is not None:
            snap = await self.get(caller, str(snapshot))
            kind, source_name, version = snap["securable_type"].lower(), snap["full_name"], snap["version"]
            if body.get("source") not in (None, source_name):
                raise invalid(f"Snapshot '{snapshot}' pins {kind} '{source_name}', not '{body.get('source')}'.")
        else:
            kind = _kind(body.get("securable_type"))
            source_name = body.get("source")
            if not isinstance(source_name, str):
                raise invalid("Missing required field 'source'.")
            version = await self._version(caller, body)
        target = body.get("name")
        if not isinstance(target, str):
            raise invalid("Missing required field 'name'.")
        parts = [check_name(p, "catalog" if i == 0 else "schema") for i, p in enumerate(target.split("."))]
        if len(parts) != TYPES[kind].name_parts:
            raise invalid(f"A {kind}'s clone is named {'catalog' if kind == 'catalog' else 'catalog.schema'}.")
        comment = body.get("comment")
        ms = caller.metastore()
        with reading_at(PastRead(version)) as past:
            root, past_authz = await self._at(caller, kind, source_name)
            tree = await history.subtree_at(self.store, ms, version, root.id)
            await history.with_ancestors(self.store, ms, past, tree)
            bounds = await history.version_bounds(self.store, ms, version, None)
            if bounds["ended_at"] is not None:      # an old state: today's governance and storage on it
                tree = await self.shard.governed_today(ms, tree, caller.min_version)
            chosen, skipped = _clonable(tree, past_authz, lambda a: ".".join(parts) + a.full_name[len(root.full_name):])
        until = bounds["ended_at"]          # the source's Delta data as of when `version` was current
        sources = await self._delta_sources(ms, chosen, skipped, until)
        authz = await authorizer(self.shard, caller)
        when = now_ms()

        async def write(tx: WriteTx, state: MetastoreState):
            parent = None
            if kind == "schema":
                parent = await tx.get("catalog", parts[0])
                if parent is None:
                    raise _missing("catalog", parts[0])
                authz.require_or_missing("schema", "create", None, _missing("catalog", parts[0]), parent=parent)
            else:
                authz.require("catalog", "create", None)
            if await tx.get(TYPES[kind].namespace, ".".join(parts)) is not None:
                raise already_exists(f"{kind.capitalize()} '{'.'.join(parts)}' already exists.")
            ids = {a.id: str(uuid.uuid4()) for a in chosen}
            made, shallow, refs = {}, [], []
            for a in chosen:
                new_id = ids[a.id]
                if a.id == root.id:
                    full = ".".join(parts)
                    name, parent_id = parts[-1], parent.id if parent else state.id
                else:
                    full = ".".join(parts) + a.full_name[len(root.full_name):]
                    name, parent_id = a.name, ids[a.parent_id]
                info = {k: v for k, v in a.info.items() if k not in ("storage_location", "table_id", "volume_id",
                                                                      "schema_id", "catalog_id", "function_id")}
                info.update(owner=caller.name, created_at=when, created_by=caller.name, updated_at=when,
                            updated_by=caller.name)
                if a.id == root.id and isinstance(comment, str):
                    info["comment"] = comment
                new = Asset(id=new_id, metastore_id=state.id, type=a.type, namespace=a.namespace,
                            parent_id=parent_id, name=name, full_name=full, storage_path=None, info=info)
                if a.type in PINNABLE and info.get("storage_root"):
                    # its own managed storage under the same root, as a create makes it (containers.py)
                    location = join_url(info["storage_root"], "__unitystorage", f"{a.type}s", new_id)
                    new = dataclasses.replace(new, info={**info, "storage_location": location},
                                              storage_path=location)
                elif a.storage_path and a.type in ("table", "volume"):
                    location = join_url(_managed_root(made[parent_id], made, parent, state), f"{a.type}s", new_id)
                    info = {**new.info, "storage_location": location}
                    if a.type == "table":
                        info["table_type"] = "MANAGED"
                        props = {k: v for k, v in (info.get("properties") or {}).items() if k not in _MANAGED_KEYS}
                        info["properties"] = {**props, "shardcat.clone.source": a.full_name,
                                              "shardcat.clone.source_id": a.id}
                        shallow.append((a, location, new_id))
                        # what the clone references: the source's files, and those the source itself clones
                        refs += [(new_id, a.id, a.storage_path), *((new_id, *r) for r in sources[a.id][1])]
                    new = dataclasses.replace(new, info=info, storage_path=location)
                made[new_id] = new
            try:
                await tx.insert_new(list(made.values()))      # one statement, however large the clone
            except KeyError:
                raise already_exists(f"{kind.capitalize()} '{'.'.join(parts)}' already exists.") from None
            if refs:
                await history.add_clone_references(tx, refs)
            # The shallow clones' logs, before the write commits: a failure leaves no table without its log.
            def logs() -> int:
                return sum(delta_clone.shallow_clone(source.storage_path, location, new_id, state=sources[source.id][0],
                                                     source_name=source.full_name) is not None
                           for source, location, new_id in shallow)
            return len(made), await asyncio.to_thread(logs)

        count, cloned = await self.shard.write(ms, write)
        return {"securable_type": kind.upper(), "full_name": ".".join(parts), "source": source_name,
                "source_version": version, "cloned": count, "shallow_clones": cloned, "skipped": skipped}

    async def _delta_sources(self, ms: str, chosen: list[Asset], skipped: list[dict], until: int | None) -> dict:
        """The Delta state (as of `until`) of each chosen table to shallow-clone, read before the
        clone's write, with what its clone will reference: source id -> (state or None without a
        log, [(source id, path)] of what the source itself shallow-clones). A table whose log names
        a file outside its storage (and outside what it clones) moves from `chosen` to `skipped`:
        no clone ever references a file its source's grants do not cover."""
        tables = [a for a in chosen if a.type == "table" and a.storage_path]
        cloned_by = await history.clone_sources(self.store, ms, [a.id for a in tables])
        out = {}
        for a in tables:
            within = cloned_by.get(a.id, [])
            try:
                state = await asyncio.to_thread(delta_clone.read_source, a.storage_path, until_ms=until,
                                                within=[path for _, path in within])
            except delta_clone.NotClonable as e:
                chosen.remove(a)
                skipped.append({"securable_type": "TABLE", "full_name": a.full_name, "reason": str(e)})
                continue
            out[a.id] = (state, within)
        return out

    # ---- vacuum ---------------------------------------------------------------------------------

    async def vacuum(self, caller: Caller, body: dict) -> dict:
        """Delete the data files a table's own Delta log removed (delta/vacuum.py), longer ago than
        `retention_hours` (default 168), that no shallow clone references. The table's owner or MODIFY."""
        full_name = body.get("table")
        if not isinstance(full_name, str):
            raise invalid("Missing required field 'table'.")
        hours = body.get("retention_hours", 168)
        if not isinstance(hours, (int, float)) or isinstance(hours, bool) or not 0 <= hours <= 1_000_000:
            raise invalid("Field 'retention_hours' must be a number from 0 to 1000000.")
        key = full_name_key(full_name, 3, "table")
        table = await self.shard.lookup(caller.metastore(), "table", key, caller.min_version)
        authz = await authorizer(self.shard, caller)
        missing = not_found(f"Table '{full_name}' does not exist.")
        if table is None:
            raise missing
        authz.require_data(table, write=True, missing=missing)
        if not table.storage_path or (table.info.get("data_source_format") or "DELTA") != "DELTA":
            raise invalid(f"Table '{full_name}' is not a Delta table with storage.")
        if table.info.get("table_type") == "MANAGED" and is_catalog_managed(table.info.get("properties")):
            # A ratified commit not in the log yet may add a removed file back: publish first.
            _, _, latest, published, _ = await self.store.delta_commits(caller.metastore(), table.id, 0, None, 1)
            if latest is not None and latest != published:
                raise CatalogError("FAILED_PRECONDITION", f"Table '{full_name}' has commits up to version {latest} "
                                                          "not yet published to its _delta_log: publish them first.")
        keep = set()
        for clone_id in (await history.clone_references(self.store, caller.metastore(), [table.id])).get(table.id, []):
            clone = await self.shard.lookup_id(caller.metastore(), clone_id, caller.min_version)
            if clone is not None and clone.storage_path:
                try:
                    keep |= await asyncio.to_thread(delta_clone.referenced, clone.storage_path)
                except (ValueError, LookupError, TypeError, AttributeError, OSError):
                    # not knowing which files the clone needs, delete none
                    raise CatalogError("FAILED_PRECONDITION", f"Table '{full_name}' has a shallow clone whose Delta "
                                                              "log cannot be read: nothing is vacuumed until it can.") from None
        try:
            out = await asyncio.to_thread(delta_vacuum.vacuum, table.storage_path, keep,
                                          older_than_ms=now_ms() - int(hours * 3600_000),
                                          dry_run=bool(body.get("dry_run")))
        except delta_vacuum.NoDeltaLog as e:
            raise invalid(f"Table '{full_name}' cannot be vacuumed: {e}; a vacuum deletes only files a Delta "
                          "log removed.") from None
        return {"table": key, **out}


def _managed_root(schema: Asset, made: dict[str, Asset], catalog: Asset | None, state: MetastoreState) -> str:
    """Where a cloned schema's managed tables and volumes go, as assets.py `managed_root` decides
    it for a create, from the clone's own new assets (not written yet)."""
    holder = made.get(schema.parent_id) or catalog
    for container in (schema, holder):
        if container is not None and container.info.get("storage_location"):
            return container.info["storage_location"]
    if state.storage_root is None:
        raise CatalogError("FAILED_PRECONDITION", "No managed storage root is set on the schema, catalog or metastore.")
    return state.storage_root


def _clonable(tree: list[Asset], authz, clone_name) -> tuple[list[Asset], list[dict]]:
    """What of a subtree (parents first) a clone takes, whose container is taken too; and what it
    leaves out, with why. What the caller may not see is left out unnamed (issue 42.14).
    `clone_name(asset)`: the full name its clone would have."""
    chosen, taken, skipped = [], set(), []
    for i, a in enumerate(tree):
        if a.type == "staging_table" or i > 0 and (a.parent_id not in taken or not authz.sees(a.type, a)):
            continue
        why = _not_clonable(a, authz, clone_name(a)) if i > 0 else None
        if why:
            skipped.append({"securable_type": a.type.upper(), "full_name": a.full_name, "reason": why})
            continue
        chosen.append(a)
        taken.add(a.id)
    return chosen, skipped


def _not_clonable(a: Asset, authz, clone_name: str) -> str | None:
    """Why the caller may not clone `a` (one it may see), or None. The clone is the caller's own,
    so cloning must not give it what it could not have from the source: a table's data needs
    SELECT; a governed table's clone (carrying today's filter, masks and tags) its owner could
    strip, so it needs administering the source (who could strip them anyway), and its ABAC
    policies must govern the clone where it lands."""
    decision = authz.decide(a.type, "read", a)
    if not decision.allowed:
        return decision.reason
    if a.type in ("registered_model", "model_version"):
        return "registered models are not cloned"
    if a.type == "volume" and a.info.get("volume_type") == "EXTERNAL":
        return "an external volume's storage cannot be shared"
    if a.type != "table":
        return None
    if a.storage_path and (a.info.get("data_source_format") or "DELTA") != "DELTA":
        return "only Delta tables are shallow-cloned"
    decision = authz.decide("table", "read_data", a)
    if not decision.allowed:
        return f"cloning a table needs SELECT on it: {decision.reason}"
    if name_today(a) is None and a.info.get("storage_location"):
        return "it was dropped after the version cloned: its storage is no longer a table's"
    if not carries_policies(a, authz.policies):
        return None
    if not authz.decide("table", "update", a).allowed:
        return ("it has a row filter, column masks or an ABAC policy, which its clone's owner could lift: "
                "only who administers it (its owner, MANAGE) may clone it")
    source = abac.effective(a, authz.policies, frozenset(), everyone=True)
    clone = abac.effective(a, authz.policies, frozenset(), everyone=True, name=clone_name)
    lost = [n for n, i in zip(source.policies, source.ids) if i not in clone.ids]
    if lost or source.conflict and not clone.conflict:
        return (f"the ABAC policies that govern it ({', '.join(lost) or 'in conflict'}) would not govern its clone "
                f"'{clone_name}'")
    return None


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = SnapshotService(shard)

    async def create(request):
        return ok(await service.create(request["caller"], await json_body(request)))

    async def list_(request):
        return ok(await service.list(request["caller"], request.query.get("max_results"),
                                     request.query.get("page_token")))

    async def get(request):
        return ok(await service.get(request["caller"], request.match_info["name"]))

    async def delete(request):
        await service.delete(request["caller"], request.match_info["name"])
        return ok()

    async def restore(request):
        return ok(await service.restore(request["caller"], request.match_info["name"]))

    async def clone(request):
        return ok(await service.clone(request["caller"], await json_body(request)))

    async def vacuum(request):
        return ok(await service.vacuum(request["caller"], await json_body(request)))

    return {"createSnapshot": create, "listSnapshots": list_, "getSnapshot": get, "deleteSnapshot": delete,
            "restoreSnapshot": restore, "createClone": clone, "vacuumTable": vacuum}
