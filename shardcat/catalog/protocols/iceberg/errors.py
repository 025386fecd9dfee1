"""Iceberg's error model for the REST catalog: IcebergError, the reference catalog's messages for a missing or
taken name, and the data-access checks that answer a hidden table as a missing one.
"""

from __future__ import annotations

from ....entities.asset import Asset
from ....errors import CatalogError
from ....governance.authorize import data_decision, denied
from ....iceberg import metadata as md
from ....web.iceberg_errors import iceberg_type
from .names import spelled


class IcebergError(Exception):
    """An error in Iceberg's error model: `{"error": {"message", "type", "code"}}`."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def missing(kind: str, name: str, why: str = "") -> IcebergError:
    """A missing namespace, table or view: "Table does not exist: ns.tbl"."""
    return IcebergError(404, f"NoSuch{kind}Exception", f"{kind} does not exist: {spelled(name)}{why}")


def taken(kind: str, name: str, holder: str | None = None) -> IcebergError:
    """A name already taken: "Table already exists: ns.tbl", or by the other kind (`holder`), "View with
    same name already exists: ns.tbl"."""
    if holder is not None and holder != kind:
        return IcebergError(409, "AlreadyExistsException", f"{holder} with same name already exists: {spelled(name)}")
    return IcebergError(409, "AlreadyExistsException", f"{kind} already exists: {spelled(name)}")


def kind_of(asset: Asset) -> str:
    return "View" if asset.info.get("table_type") == "VIEW" else "Table"


def taken_by(authz, kind: str, name: str, existing: Asset) -> IcebergError:
    """Creating a `kind` over an existing table or view: its kind is named only to who may see it."""
    return taken(kind, name, kind_of(existing) if authz.sees(existing.type, existing) else None)


def require_data(authz, asset: Asset, *, write: bool) -> None:
    """SELECT (MODIFY with `write`) on a table or view, with USE CATALOG and USE SCHEMA; a caller who may
    not even know the asset exists gets the answer a missing one gives (docs/security.md)."""
    decision = data_decision(authz, asset, write=write)
    if not decision.allowed:
        _refuse(authz, asset, decision.reason)


def require(authz, op: str, asset: Asset) -> None:
    """`op` ("read", "update") on a table or view; an asset the caller may not see answers as missing."""
    decision = authz.decide("table", op, asset)
    if not decision.allowed:
        _refuse(authz, asset, decision.reason)


def _refuse(authz, asset: Asset, reason: str):
    if not authz.sees(asset.type, asset):
        raise missing(kind_of(asset), asset.full_name)
    raise denied(reason)


def iceberg_error(e: CatalogError) -> IcebergError:
    if isinstance(e, md.InvalidViewVersion):        # the reference's precondition failure, which Java clients raise
        return IcebergError(e.status, "IllegalArgumentException", e.message)
    return IcebergError(e.status, iceberg_type(e.code, e.status), e.message)
