"""Metastore operations: create, read, update and delete metastores, and assign them to workspaces.

A metastore's own fields are a write to that metastore (its version moves), so updates
run through the owning shard. Creating metastores and assigning them to workspaces
are account-level operations for account admins.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from ...auth import Caller
from ...entities.urls import InvalidUrl, join_url, normalize_url
from ...entities.names import check_name
from ...entities.types import METASTORE
from ...errors import CatalogError, already_exists, invalid, not_found
from ...governance.authorize import is_metastore_admin
from ...store import homes
from ...store.db import Store
from ...store.errors import MetastoreGone
from ...store.rows import Metastore
from ...store.writes import WriteTx
from ...entities.values import now_ms
from ...shards.shard import MetastoreState, Shard

_CLOUDS = {"s3": "aws", "abfss": "azure", "abfs": "azure", "gs": "gcp", "file": "local"}


def render_metastore(m: Metastore) -> dict:
    scheme = m.info.get("storage_root", "").split(":", 1)[0]
    cloud, region = _CLOUDS.get(scheme, "local"), m.info.get("region", "local")
    # served by their own endpoints: /tag-policies (tags.py), /policies (policies.py), /shardcat/webhooks
    # (events.py; their secrets never leave but once)
    info = {k: v for k, v in m.info.items() if k not in ("tag_policies", "abac_policies", "webhooks")}
    return {
        **info,
        "metastore_id": m.id,
        "name": m.name,
        "cloud": cloud,
        "region": region,
        "global_metastore_id": f"{cloud}:{region}:{m.id}",
    }


def require_account_admin(caller: Caller, action: str) -> None:
    if not caller.is_account_admin:
        raise CatalogError("PERMISSION_DENIED", f"Only an account admin may {action}.")


def _workspace_id(value: str) -> int:
    try:
        workspace_id = int(value)
    except (TypeError, ValueError):
        raise invalid(f"workspace_id must be an integer, got '{value:.40}'.") from None
    if workspace_id < 0:
        raise invalid(f"workspace_id must not be negative, got {workspace_id}.")
    if workspace_id >= 1 << 63:
        raise invalid(f"workspace_id must be below 2^63, got '{value:.40}'.")
    return workspace_id


DELTA_SHARING_SCOPES = ("INTERNAL", "INTERNAL_AND_EXTERNAL")


def _check_delta_sharing(info: dict) -> None:
    """The spec's DeltaSharingScope values; the recipient token lifetime must be set for INTERNAL_AND_EXTERNAL."""
    scope = info.get("delta_sharing_scope")
    if scope is not None and scope not in DELTA_SHARING_SCOPES:
        raise invalid(f"delta_sharing_scope must be one of {', '.join(DELTA_SHARING_SCOPES)}, got '{scope:.40}'.")
    lifetime = info.get("delta_sharing_recipient_token_lifetime_in_seconds")
    if lifetime is not None and lifetime < 0:
        raise invalid(f"delta_sharing_recipient_token_lifetime_in_seconds must not be negative, got {lifetime}.")
    if scope == "INTERNAL_AND_EXTERNAL" and lifetime is None:
        raise invalid("delta_sharing_recipient_token_lifetime_in_seconds must be set when delta_sharing_scope "
                      "is INTERNAL_AND_EXTERNAL.")


async def find_metastore(store: Store, metastore_id: str) -> Metastore:
    try:
        uuid.UUID(metastore_id)
    except ValueError:
        raise invalid(f"Invalid metastore id '{metastore_id:.60}': expected a UUID.") from None
    m = await store.get_metastore(metastore_id)
    if m is None:
        raise not_found(f"Metastore '{metastore_id}' does not exist.")
    return m


def _elsewhere(metastore_id: str) -> CatalogError:
    """Another workspace's metastore, to a caller that is not an account admin: as if it did not exist."""
    return not_found(f"Metastore '{metastore_id}' does not exist.")


class AccountService:
    """Account-level operations, served by whoever fronts the cluster: no metastore's version moves."""

    def __init__(self, store: Store, measured_load: Callable[[], dict[str, float] | None] = lambda: None):
        self.store = store
        # Each metastore's measured load, where one is kept (the router's routing table; None
        # elsewhere): a new metastore's home database is the least loaded (store/databases.py `home_order`).
        self.measured_load = measured_load

    async def create(self, caller: Caller, body: dict) -> dict:
        require_account_admin(caller, "create a metastore")
        fields = METASTORE.check_create(body)
        name = check_name(fields.pop("name"), "metastore")
        metastore_id = str(uuid.uuid4())
        try:
            # The spec appends the new metastore's id to the storage root it was given.
            fields["storage_root"] = join_url(normalize_url(fields["storage_root"]), metastore_id)
        except InvalidUrl as e:
            raise invalid(f"Invalid storage_root: {e}") from None
        now = now_ms()
        info = {**fields, "owner": caller.name, "created_at": now, "created_by": caller.name,
                "updated_at": now, "updated_by": caller.name, "delta_sharing_scope": "INTERNAL",
                "privilege_model_version": "1.0"}
        try:
            m = await self.store.create_metastore(metastore_id, name, info, load=self.measured_load())
        except KeyError:
            raise already_exists(f"Metastore '{name}' already exists.") from None
        return render_metastore(m)

    async def list(self, caller: Caller) -> dict:
        # As the spec says: a workspace sees the one metastore assigned to it, if any.
        if caller.metastore_id is None:
            return {"metastores": []}
        m = await self.store.get_metastore(caller.metastore_id)
        return {"metastores": [render_metastore(m)] if m else []}

    async def assign(self, caller: Caller, workspace_id: str, body: dict, *, replace: bool) -> None:
        """PUT (replace=True) creates or overwrites the assignment; PATCH updates an existing one."""
        require_account_admin(caller, "assign a metastore to a workspace")
        workspace = _workspace_id(workspace_id)
        current = await self.store.assignment(workspace)
        metastore_id = body.get("metastore_id")
        default_catalog = body.get("default_catalog_name")
        if replace:
            if metastore_id is None:
                raise invalid("Missing required field 'metastore_id'.")
        elif current is None:
            raise not_found(f"Workspace {workspace} has no metastore assigned.")
        else:
            metastore_id = metastore_id or current[0]
            default_catalog = default_catalog if default_catalog is not None else current[1]
        if not isinstance(metastore_id, str) or (default_catalog is not None and not isinstance(default_catalog, str)):
            raise invalid("metastore_id and default_catalog_name must be strings.")
        await find_metastore(self.store, metastore_id)
        try:
            await self.store.assign(workspace, metastore_id, default_catalog)
        except MetastoreGone:
            raise not_found(f"Metastore '{metastore_id}' does not exist.") from None

    async def databases(self, caller: Caller) -> dict:
        """The PostgreSQL servers metastores live in (docs/cluster.md "Home databases")."""
        require_account_admin(caller, "list the databases")
        return {"databases": await homes.databases(self.store, self.measured_load())}

    async def move(self, caller: Caller, metastore: str, body: dict) -> dict:
        """Move a metastore (by id or name) to another home database, online; the move's timeline."""
        require_account_admin(caller, "move a metastore between databases")
        target = body.get("database")
        if not isinstance(target, str) or not target:
            raise invalid("Missing required field 'database' (the name of the database to move the metastore to).")
        metastore_id = await self.store.metastore_named(metastore)
        if metastore_id is None:
            raise not_found(f"Metastore '{metastore:.60}' does not exist.")
        if target not in self.store.databases:
            raise invalid(f"No database is named '{target:.40}'; the databases are {', '.join(self.store.databases)}.")
        try:
            return await homes.move_metastore(self.store, metastore_id, target)
        except homes.MoveError as e:
            raise CatalogError("FAILED_PRECONDITION", str(e)) from None
        except MetastoreGone:
            raise not_found(f"Metastore '{metastore:.60}' does not exist.") from None

    async def unassign(self, caller: Caller, workspace_id: str, metastore_id: str | None) -> None:
        require_account_admin(caller, "remove a workspace's metastore")
        workspace = _workspace_id(workspace_id)
        if not metastore_id:
            raise invalid("Missing required parameter 'metastore_id'.")
        if not isinstance(metastore_id, str):
            raise invalid("metastore_id must be a string.")
        try:
            uuid.UUID(metastore_id)
        except ValueError:
            raise invalid(f"Invalid metastore id '{metastore_id:.60}': expected a UUID.") from None
        if not await self.store.unassign(workspace, metastore_id):
            raise not_found(f"Workspace {workspace} is not assigned metastore '{metastore_id}'.")


class MetastoreService:
    """Operations on one metastore's own fields, served by the shard that owns it."""

    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    async def get(self, caller: Caller, metastore_id: str) -> dict:
        m = await find_metastore(self.store, metastore_id)
        if not caller.is_account_admin and m.id != caller.metastore_id:
            raise _elsewhere(metastore_id)
        return render_metastore(m)

    async def summary(self, caller: Caller) -> dict:
        if caller.metastore_id is None:
            raise not_found(f"No metastore is assigned to workspace {caller.workspace_id}.")
        m = await find_metastore(self.store, caller.metastore_id)
        out = render_metastore(m)
        keys = ("metastore_id", "name", "cloud", "region", "global_metastore_id", "storage_root",
                "storage_root_credential_id", "default_data_access_config_id")
        return {k: out[k] for k in keys if k in out}

    async def update(self, caller: Caller, metastore_id: str, body: dict) -> dict:
        m = await find_metastore(self.store, metastore_id)
        if not caller.is_account_admin and m.id != caller.metastore_id:
            raise _elsewhere(metastore_id)
        if not caller.is_account_admin and not is_metastore_admin(caller, m):
            raise CatalogError("PERMISSION_DENIED", "Only an account admin or a metastore admin (the metastore's "
                                                    "owner) may update a metastore.")
        fields = METASTORE.check_update(body)
        name = check_name(fields.pop("name"), "metastore") if "name" in fields else m.name
        now = now_ms()
        if name != m.name:
            try:        # the account's names are unique in the directory (its home may be another database)
                await self.store.rename_in_directory(m.id, name)
            except KeyError:
                raise already_exists(f"Metastore '{name}' already exists.") from None

        async def write(tx: WriteTx, state: MetastoreState):
            current = await self.store.get_metastore(metastore_id)
            info = {**current.info, **fields, "updated_at": now, "updated_by": caller.name}
            _check_delta_sharing(info)
            try:
                await tx.update_metastore(info, name)
            except KeyError:
                raise already_exists(f"Metastore '{name}' already exists.") from None
            return Metastore(current.id, name, tx.version, info)

        return render_metastore(await self.shard.write(m.id, write))

    async def delete(self, caller: Caller, metastore_id: str, force: bool) -> None:
        require_account_admin(caller, "delete a metastore")
        m = await find_metastore(self.store, metastore_id)
        if not force and await self.store.has_assets(m.id):
            raise CatalogError("FAILED_PRECONDITION",
                               f"Metastore '{m.name}' is not empty; delete its catalogs first or pass force=true.")
        await self.store.delete_metastore(m.id)
        self.shard.drop(m.id)
