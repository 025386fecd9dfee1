"""How rows and values map: the asset columns and the rows read as `Asset`s, the records reads
return (metastores, change-log rows, storage paths), and the jsonb codec every connection uses."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass

import orjson

from ..entities.asset import Asset
from ..entities.shared_strings import shared
from .errors import MetastoreGone


@dataclass(frozen=True)
class Metastore:
    id: str
    name: str
    version: int
    info: dict


@dataclass(frozen=True)
class Change:
    version: int
    changed: list[str]
    parents: list[str]


ASSET_COLUMNS = "id, metastore_id, type, namespace, parent_id, name, full_name, storage_path, info, written_at"


@dataclass(frozen=True)
class StoragePath:
    """Where an asset's data lies: what a shard's URL tries hold, without the asset's body."""
    id: str
    type: str
    full_name: str
    storage_path: str


def asset_from(row) -> Asset:
    # What siblings repeat (their metastore, parent, type and namespace) is one string for all of
    # them: a shard keeps many assets (issue #48, bytes per cached asset).
    return Asset(
        id=str(row["id"]), metastore_id=shared(str(row["metastore_id"])), type=shared(row["type"]),
        namespace=shared(row["namespace"]), parent_id=shared(str(row["parent_id"])), name=row["name"],
        full_name=row["full_name"], storage_path=row["storage_path"], info=row["info"],
        written_at=row["written_at"],
    )


def asset_of(metastore_id: str, row) -> Asset | None:
    """The row's asset if it is one of this metastore's. Reads by id check the metastore here, not in
    SQL: there the id stays the only condition an index can take, where a plan PostgreSQL caches
    while a metastore is small could take the metastore's names index and, once it grows, walk
    every asset of the metastore for one id."""
    if row is None or row["id"] is None or row["metastore_id"] != uuid.UUID(str(metastore_id)):
        return None
    return asset_from(row)


def metastore_from(row) -> Metastore:
    return Metastore(id=str(row["id"]), name=row["name"], version=row["version"], info=row["info"])


def jsonb_text(value) -> str:
    """A value as jsonb's text: orjson's (a tenth of json.dumps' CPU; an asset's info and each change-log
    row are encoded on every write), json.dumps' for what orjson refuses (integers past 64 bits, lone
    surrogates, keys that are not strings) or would write otherwise (NaN and infinities: null)."""
    try:
        text = orjson.dumps(value)
    except TypeError:                   # orjson.JSONEncodeError is one
        return json.dumps(value)
    if b"null" in text and non_finite(value):
        return json.dumps(value)
    return text.decode()


def non_finite(value) -> bool:
    """Whether a JSON value holds a float that is NaN or infinite, at any depth."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


def versioned_many(metastore_id: str, rows) -> tuple[int, list[Asset]]:
    """A read's rows, each the metastore's version beside an asset (or nulls): (version, the assets of
    this metastore). No row: no metastore (MetastoreGone)."""
    if not rows:
        raise MetastoreGone(metastore_id)
    return rows[0]["ms_version"], [a for a in (asset_of(metastore_id, r) for r in rows) if a is not None]


def versioned_one(metastore_id: str, rows) -> tuple[int, Asset | None]:
    version, assets = versioned_many(metastore_id, rows)
    return version, (assets[0] if assets else None)
