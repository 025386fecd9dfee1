"""Multi-asset transactions: `POST /shardcat/transactions` applies several writes to one metastore
atomically, with optimistic checks per asset (issue 32 item 4, docs/transactions.md).

A transaction is one `Shard.write`: one metastore version, one change-log row, one PostgreSQL
transaction (or one savepoint of a group commit). Each operation is the existing operation itself
(`CatalogService.create/update/delete`, `PermissionsService.update`, `DeltaCommitService.commit`,
`IcebergCatalog.commit`), called with a view of the shard (`_Joined`) whose writes run in the
transaction's own `WriteTx` and whose lookups read through it: the same validation and authorization
code, seeing what the earlier operations of the transaction did. Any failure rolls everything back
and the error names the operation.

Conflicts are checked per asset at commit time, inside the write (the metastore's row is held, so
the check and the writes are one step in the metastore's serial order): an asset the transaction
read (`read_versions`) or writes (other than ones it creates) that a write after the version the
transaction read at changed is a 409 naming it. A transaction whose assets nobody else touched
commits however many writes landed meanwhile: it is rebased on the newer version by running its
operations against it (`Shard.write` reruns it after a VersionConflict, with the same checks).
`"isolation": "metastore"` asks for the per-metastore check instead: any write after the version
read is a conflict.
"""

from __future__ import annotations

import dataclasses
import uuid


from ...auth import Caller
from ...entities.names import split_full_name
from ...entities.types import TYPES
from ...errors import CatalogError, invalid
from ...governance.authorize import Authz, authorizer
from ...governance.grants import PermissionsService
from ...shards.group_commit import PendingWrite, speculate, undo_speculation
from ...shards.shard import MetastoreState, Shard
from ...store.conflicts import MAX_READ_AGE, changed_after, first_change_after
from ...store.writes import WriteTx
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from .delta_commits import DeltaCommitService
from .iceberg import IcebergCatalog, IcebergError
from ..tree.service import CatalogService

MAX_OPERATIONS = 100
MAX_READS = 1000
ASSET_TYPES = ("catalog", "schema", "table", "volume")     # what create, update and delete take ("view": a table)
OPS = ("create", "update", "delete", "grant", "delta_commit", "iceberg_commit")
# A three-part name in read_versions: the first of these namespaces that holds it.
_THREE_PART = ("table", "volume", "function", "registered_model")


def conflict(message: str) -> CatalogError:
    return CatalogError("RESOURCE_CONFLICT", message)


@dataclasses.dataclass(frozen=True)
class Operation:
    index: int
    op: str
    type: str | None          # the asset type (create/update/delete), the securable type (grant)
    name: str | None          # the asset's full name (update/delete/grant/iceberg_commit)
    body: dict

    def label(self) -> str:
        what = f" {self.type}" if self.type else ""
        named = f" '{self.name}'" if self.name else ""
        if self.op == "create" and isinstance(self.body.get("name"), str):
            parents = [self.body.get(k) for k in ("catalog_name", "schema_name")]
            named = " '" + ".".join([p for p in parents if isinstance(p, str)] + [self.body["name"]]) + "'"
        if self.op == "delta_commit":
            named = f" on table {self.body.get('table_id')}"
        return f"operations[{self.index}] ({self.op}{what}{named})"


def _string(item: dict, key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{where}.{key} must be a non-empty string.")
    return value


def parse_operations(body: dict) -> list[Operation]:
    """The request's operations, each checked for its shape (each operation's own rules check the rest)."""
    raw = body.get("operations")
    if not isinstance(raw, list) or not raw:
        raise invalid("Field 'operations' must be a non-empty list.")
    if len(raw) > MAX_OPERATIONS:
        raise invalid(f"A transaction has at most {MAX_OPERATIONS} operations; this one has {len(raw)}.")
    out = []
    for i, item in enumerate(raw):
        where = f"operations[{i}]"
        if not isinstance(item, dict):
            raise invalid(f"{where} must be an object.")
        op = item.get("op")
        if op not in OPS:
            raise invalid(f"{where}.op must be one of {', '.join(OPS)}.")
        type_name = name = None
        inner = item.get("body") if op in ("create", "update", "delta_commit") else item
        if op in ("create", "update", "delete"):
            type_name = _string(item, "type", where).lower()
            type_name = "table" if type_name == "view" else type_name
            if type_name not in ASSET_TYPES:
                raise invalid(f"{where}.type must be one of {', '.join(ASSET_TYPES)} or view.")
        if op in ("update", "delete", "grant", "iceberg_commit"):
            name = _string(item, "name", where)
        if op == "grant":
            type_name = _string(item, "securable_type", where).lower()
        if op == "delete" and item.get("force") is not None and not isinstance(item["force"], bool):
            raise invalid(f"{where}.force must be a boolean.")
        if inner is None and op in ("create", "update", "delta_commit"):
            raise invalid(f"{where}.body must be an object.")
        if not isinstance(inner, dict):
            raise invalid(f"{where}.body must be an object.")
        out.append(Operation(i, op, type_name, name, inner))
    return out


def parse_reads(body: dict) -> dict[str, int]:
    reads = body.get("read_versions") or {}
    if not isinstance(reads, dict):
        raise invalid("Field 'read_versions' must be an object {asset full name or id: version}.")
    if len(reads) > MAX_READS:
        raise invalid(f"A transaction reads at most {MAX_READS} assets.")
    for key, version in reads.items():
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise invalid(f"read_versions['{key:.100}'] must be a non-negative integer version.")
    return reads


def _version_field(body: dict, key: str) -> int | None:
    value = body.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise invalid(f"Field '{key}' must be a non-negative integer version.")
    return value


class _Joined:
    """The shard as the operations of one transaction see it: a write joins the transaction's `tx`
    (in a savepoint: an operation that fails and whose caller goes on leaves nothing), a lookup
    reads through it (the earlier operations' writes included); everything else is the shard's."""

    def __init__(self, shard: Shard, tx: WriteTx, state: MetastoreState):
        self._shard, self._tx, self._state = shard, tx, state

    def __getattr__(self, name):
        return getattr(self._shard, name)

    async def write(self, metastore_id: str, body, *, prefetch=()):
        """As `Shard.write`, inside the transaction's write (there is no group to read ahead for)."""
        if metastore_id != self._state.id:
            raise invalid("A transaction writes one metastore.")
        tx = self._tx
        kept = (set(tx.changed), set(tx.parents), dict(tx.written), set(tx.created), dict(tx.deleted),
                {k: dict(v) for k, v in tx.touched.items()}, dict(tx.grants_set))
        try:
            async with tx.conn.transaction():      # a savepoint inside the write's transaction
                return await body(tx, self._state)
        except BaseException:
            (tx.changed, tx.parents, tx.written, tx.created, tx.deleted, tx.touched, tx.grants_set) = kept
            tx.forget_reads()
            raise

    async def lookup(self, metastore_id: str, namespace: str, full_name: str, min_version: int = 0):
        return await self._tx.get(namespace, full_name)

    async def lookup_id(self, metastore_id: str, asset_id: str, min_version: int = 0):
        try:
            asset_id = str(uuid.UUID(asset_id))
        except (TypeError, ValueError):
            return None
        return await self._tx.get_by_id(asset_id)


def _as_catalog_error(e: IcebergError) -> CatalogError:
    by_status = {400: "INVALID_PARAMETER_VALUE", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "RESOURCE_CONFLICT",
                 401: "UNAUTHENTICATED", 503: "TEMPORARILY_UNAVAILABLE"}
    code = by_status.get(e.status, "INTERNAL_ERROR")
    if e.kind == "AlreadyExistsException":
        code = "ALREADY_EXISTS"
    return CatalogError(code, e.message)


class TransactionService:
    def __init__(self, shard: Shard):
        self.shard = shard

    async def apply(self, caller: Caller, body: dict) -> dict:
        operations = parse_operations(body)
        reads = parse_reads(body)
        isolation = body.get("isolation", "asset")
        if isolation not in ("asset", "metastore"):
            raise invalid("Field 'isolation' must be 'asset' or 'metastore'.")
        read_at = _version_field(body, "read_at")
        ms = caller.metastore()
        state = await self.shard.state(ms, max(caller.min_version, read_at or 0), paths=False)   # its version
        if read_at is None:
            read_at = state.version      # the version the transaction starts from: what raced it comes after
        shard = self.shard
        authz = await authorizer(shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            if read_at >= tx.version:
                raise invalid(f"read_at {read_at} is not a version of this metastore yet (it is at {tx.version - 1}).")
            if tx.version - read_at > MAX_READ_AGE:
                raise conflict(f"The transaction read at version {read_at}, more than {MAX_READ_AGE} versions ago; "
                               "read again. Nothing was written.")
            if isolation == "metastore":
                await _check_metastore(tx, read_at)
            read_ids = await _resolve_reads(tx, authz, reads)
            await _check_reads(tx, reads, read_ids)
            joined = _Joined(shard, tx, state)
            catalogs, undo, results, wrote_by = CatalogService(joined), [], [], {}
            try:
                for operation in operations:
                    before = set(tx.changed)
                    try:
                        results.append(await _run(joined, catalogs, caller, operation))
                    except CatalogError as e:
                        raise CatalogError(e.code, f"{operation.label()} failed: {e.message} "
                                                   "Nothing of the transaction was written.") from None
                    except IcebergError as e:
                        e = _as_catalog_error(e)
                        raise CatalogError(e.code, f"{operation.label()} failed: {e.message} "
                                                   "Nothing of the transaction was written.") from None
                    for i in tx.changed - before:
                        wrote_by.setdefault(i, operation)
                    undo.append(PendingWrite(None, None, undo=speculate(state, tx)))   # the next one sees its paths
                await _check_writes(tx, read_at, wrote_by)
            finally:
                undo_speculation(state, undo)
            return results

        results, version = await self.shard.write_made(ms, write)
        return {"version": version, "read_at": read_at, "results": results}


async def _run(joined: _Joined, catalogs: CatalogService, caller: Caller, operation: Operation):
    body = operation.body
    if operation.op == "create":
        return await catalogs.create(caller, operation.type, body)
    if operation.op == "update":
        return await catalogs.update(caller, operation.type, operation.name, body)
    if operation.op == "delete":
        await catalogs.delete(caller, operation.type, operation.name, bool(body.get("force")))
        return {}
    if operation.op == "grant":
        return await PermissionsService(joined).update(caller, operation.type, operation.name, body)
    if operation.op == "delta_commit":
        return await DeltaCommitService(joined).commit(caller, body)
    if operation.op == "iceberg_commit":
        return await IcebergCatalog(joined).commit(caller, operation.name, body)
    raise AssertionError(operation.op)


async def _visible(tx: WriteTx, authz: Authz, asset) -> bool:
    """Whether the caller may know that `asset` exists (governance's rule for every answer): a model
    version as its model does; a staging table (a step of a create, no securable) only to admins."""
    if asset.type == "model_version":
        asset = await tx.get_by_id(asset.parent_id)
        return asset is not None and authz.sees(asset.type, asset)
    if asset.type == "staging_table":
        return authz.admin is not None
    return authz.sees(asset.type, asset)


async def _resolve_reads(tx: WriteTx, authz: Authz, reads: dict[str, int]) -> dict[str, str]:
    """{read_versions key: the asset's id}; an asset that no longer exists is a conflict, and so is
    one the caller may not see: the same answer, so that no version or existence leaks."""
    ids = {}
    for key in reads:
        asset = None
        try:
            asset_id = str(uuid.UUID(key))
        except ValueError:
            parts = key.split(".")
            kinds = {1: ("catalog",), 2: ("schema",), 3: _THREE_PART}.get(len(parts))
            if kinds is None:
                raise invalid(f"read_versions key '{key:.200}' is neither an asset id nor a full name.") from None
            for kind in kinds:
                t = TYPES[kind]
                asset = await tx.get(t.namespace, ".".join(split_full_name(key, t.name_parts, t.name)))
                if asset is not None and await _visible(tx, authz, asset):
                    break
                asset = None        # not there, or not for this caller: the next namespace, as if missing
        else:
            asset = await tx.get_by_id(asset_id)
            if asset is not None and not await _visible(tx, authz, asset):
                asset = None
        if asset is None:
            raise conflict(f"Conflict on '{key:.200}': it does not exist (any more) at version {tx.version - 1}; "
                           "nothing was written.")
        ids[key] = asset.id
    return ids


async def _check_reads(tx: WriteTx, reads: dict[str, int], ids: dict[str, str]) -> None:
    """Every asset read is unchanged since the version it was read at."""
    for key, version in reads.items():
        if version >= tx.version:
            raise invalid(f"read_versions['{key:.200}'] = {version} is not a version of this metastore yet.")
        if tx.version - version > MAX_READ_AGE:
            raise conflict(f"read_versions['{key:.200}'] = {version} is more than {MAX_READ_AGE} versions ago; read "
                           "it again. Nothing was written.")
    by_version: dict[int, set[str]] = {}
    for key, version in reads.items():
        by_version.setdefault(version, set()).add(ids[key])
    for version in sorted(by_version):
        changed = await changed_after(tx, version, by_version[version])
        for key in reads:
            if reads[key] == version and ids[key] in changed:
                raise conflict(f"Conflict on '{key}': it changed at version {changed[ids[key]]}, after version "
                               f"{version} that the transaction read; nothing was written.")


async def _check_writes(tx: WriteTx, read_at: int, wrote_by: dict[str, Operation]) -> None:
    """Every asset written (but not created) is unchanged since the version the transaction read at."""
    ids = {i for i in tx.changed if i not in tx.created}
    changed = await changed_after(tx, read_at, ids)
    for i in sorted(changed, key=lambda i: changed[i]):
        touched = tx.touched.get(i, {})
        what = f"{touched.get('type') or 'securable'} '{touched.get('full_name') or i}'"
        operation = wrote_by.get(i)
        by = f" (written by {operation.label()})" if operation else ""
        raise conflict(f"Conflict on {what}{by}: another write changed it at version {changed[i]}, after version "
                       f"{read_at} that the transaction read; nothing was written.")


async def _check_metastore(tx: WriteTx, read_at: int) -> None:
    first = await first_change_after(tx, read_at)
    if first is not None:
        version, _ = first      # which securable changed is not said: the caller may not see it
        raise conflict(f"Conflict on the metastore: it changed at version {version}, "
                       f"after version {read_at} that the transaction read; nothing was written.")


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = TransactionService(shard)

    async def post(request):
        return ok(await service.apply(request["caller"], await json_body(request)))

    return {"applyTransaction": post}
