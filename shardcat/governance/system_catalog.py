"""The `system` catalog is the catalog's own: which assets lie in it, and what anyone but the catalog may do there.

Every metastore has a catalog named `system` (the name is reserved) whose tables the catalog writes
itself: the audit log, lineage, information_schema, maintenance runs, monitor alerts
(catalog/features/system.py, docs/system-tables.md). The rules, decided here for every API at once
(governance/authorize.py asks `refusal` before anything else, admins included):

- nobody but the catalog's own writer (`SYSTEM_CALLER_ID`, a caller no token can name: principal ids
  are positive) creates, changes, drops or writes the data of anything in it; reading and granting
  (an admin hands out SELECT) stay as for any securable;
- `system.information_schema` holds one row per (securable, principal that may see it) and carries
  a row filter on the caller (`visible_to = current_user()`): only a trusted engine, which applies
  it, or an admin, who may see every row, may see or read those tables. Any other caller is refused
  (the tables answer as missing), because an engine that does not apply the filter would show
  everyone's rows.
"""

from __future__ import annotations

from ..auth import Caller
from ..entities.asset import Asset

SYSTEM_CATALOG = "system"
SYSTEM_PRINCIPAL = "System user"     # the owner of the system catalog and its writer's name in logs
SYSTEM_CALLER_ID = -1                # no principal row has it: no token authenticates as it
INFORMATION_SCHEMA = "information_schema"
READ_OPS = frozenset({"read", "read_data", "grant"})     # what others may do in the system catalog


def system_caller(metastore_id: str) -> Caller:
    """The catalog's own writer of its system tables, acting on one metastore."""
    return Caller(SYSTEM_PRINCIPAL, SYSTEM_CALLER_ID, True, 0, metastore_id)


def is_system_caller(caller: Caller) -> bool:
    return caller.principal_id == SYSTEM_CALLER_ID


def _parts(asset: Asset | None) -> list[str]:
    if not in_system_catalog(asset):
        return []
    return asset.full_name.lower().split(".")


def in_system_catalog(asset: Asset | None) -> bool:
    """Whether an asset is the system catalog or lies in it (asked on every decision: a prefix test first)."""
    if asset is None or asset.type == "metastore":
        return False
    name = asset.full_name
    return bool(name) and name[:6].lower() == SYSTEM_CATALOG and (len(name) == 6 or name[6] == ".")


def is_reserved_catalog_name(name) -> bool:
    return isinstance(name, str) and name.strip().lower() == SYSTEM_CATALOG


def trusted_only(asset: Asset | None) -> bool:
    """Whether an asset is an information_schema table (or the schema): shown to trusted engines and admins only."""
    parts = _parts(asset)
    return len(parts) >= 2 and parts[0] == SYSTEM_CATALOG and parts[1] == INFORMATION_SCHEMA


def is_information_schema(full_name: str | None) -> bool:
    """Whether a full name is the system catalog's information_schema (the schema itself)."""
    return isinstance(full_name, str) and full_name.lower() == f"{SYSTEM_CATALOG}.{INFORMATION_SCHEMA}"


def refusal(caller: Caller, op: str, asset: Asset | None, parent: Asset | None, admin: bool) -> str | None:
    """Why `caller` may not do `op` on `asset` (for a create: in `parent`) of the system catalog; None
    when these rules do not object (the ordinary rules then decide)."""
    target = parent if op == "create" else asset
    if not in_system_catalog(target) or is_system_caller(caller):
        return None
    if op not in READ_OPS:
        return (f"'{target.full_name}' is in the system catalog, which only the catalog itself writes: "
                f"its tables are read-only for everyone.")
    if op != "grant" and trusted_only(target) and target.type == "table" and not (admin or caller.trusted_engine):
        return (f"'{target.full_name}' shows each reader the rows it may see through a row filter on the "
                "caller: only trusted engines (which apply it) and admins may read it.")
    return None
