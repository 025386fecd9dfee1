"""The rules of the Delta commits API, as pure functions (no I/O).

A catalog-managed Delta table (Delta protocol, "Catalog-managed tables") is one the catalog
ratifies commits for: a writer proposes version `latest + 1`, staged as
`_delta_log/_staged_commits/<v>.<uuid>.json` or sent inline, and the catalog accepts exactly one
proposal per version. Ratified commits are served to readers until a client publishes them to
`_delta_log/<v>.json` and reports `latest_backfilled_version`. The request shapes are those of the
open-source Unity Catalog (`DeltaCommit`, `DeltaGetCommits`); `commit_info.inline_content` (the
commit's actions, newline-delimited JSON) is shardcat's extension for inline commits.
"""

from __future__ import annotations

import dataclasses

import re
import uuid
from dataclasses import dataclass

from ..entities.urls import InvalidUrl, normalize_url
from ..entities.asset import Asset
from ..entities.columns import check_columns
from ..errors import CatalogError, invalid, not_found

FEATURE_PROPERTY = "delta.feature.catalogManaged"   # "supported": the table opted in
TABLE_ID_PROPERTY = "io.unitycatalog.tableId"       # the catalog's table id, carried in the Delta metadata
MAX_UNPUBLISHED_PROPERTY = "shardcat.delta.maxUnpublishedCommits"   # a table may only lower the server's limit
DEFAULT_MAX_UNPUBLISHED = 50
MAX_COMMITS_PER_PAGE = 1000

_STAGED_NAME = re.compile(r"^(\d{20})\.[0-9a-fA-F-]{36}\.json$")


def is_catalog_managed(properties: dict | None) -> bool:
    return (properties or {}).get(FEATURE_PROPERTY) == "supported"


def wants_catalog_managed(properties: dict | None, *defaults: dict | None) -> bool:
    """A new managed Delta table opts in by its own property, or inherits the schema's or catalog's default."""
    if FEATURE_PROPERTY in (properties or {}):
        return is_catalog_managed(properties)
    return any(is_catalog_managed(d) for d in defaults)


def max_unpublished(table: Asset, server_limit: int) -> int:
    value = (table.info.get("properties") or {}).get(MAX_UNPUBLISHED_PROPERTY)
    try:
        return max(1, min(server_limit, int(value))) if value is not None else server_limit
    except ValueError:
        return server_limit


# ---- request parsing ------------------------------------------------------------


@dataclass(frozen=True)
class CommitInfo:
    version: int
    timestamp: int
    file_name: str
    file_size: int
    file_modification_timestamp: int
    inline_content: str | None = None

    def to_json(self) -> dict:
        out = {"version": self.version, "timestamp": self.timestamp, "file_name": self.file_name,
               "file_size": self.file_size, "file_modification_timestamp": self.file_modification_timestamp}
        if self.inline_content is not None:
            out["inline_content"] = self.inline_content
        return out


@dataclass(frozen=True)
class Commit:
    table_id: str
    table_uri: str
    info: CommitInfo | None
    latest_backfilled_version: int | None
    metadata: dict | None


@dataclass(frozen=True)
class GetCommits:
    table_id: str
    table_uri: str
    start_version: int
    end_version: int | None


MAX_BIGINT = (1 << 63) - 1


def _int(body: dict, key: str, where: str, *, minimum: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdecimal():
        if len(value) > 20:    # past any bigint (and past what int() reads at all, at 4,300 digits)
            raise invalid(f"Field '{where}{key}' must be at most {MAX_BIGINT}, got {value:.40}...")
        value = int(value)     # query parameters arrive as text
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(f"Field '{where}{key}' must be an integer, got {value!r:.40}.")
    if value < minimum:
        raise invalid(f"Field '{where}{key}' must be >= {minimum}, got {value}.")
    if value > MAX_BIGINT:      # versions, sizes and times are PostgreSQL bigints
        raise invalid(f"Field '{where}{key}' must be at most {MAX_BIGINT}, got {value!s:.40}.")
    return value


def _required_int(body: dict, key: str, where: str = "", *, minimum: int) -> int:
    value = _int(body, key, where, minimum=minimum)
    if value is None:
        raise invalid(f"Missing required field '{where}{key}'.")
    return value


def _table_ref(body: dict) -> tuple[str, str]:
    if not body:
        raise invalid("Missing required fields 'table_id', 'table_uri' (and 'start_version' to get commits): send "
                      "them as a JSON body or, with GET, as query parameters (the unitycatalog-client SDK "
                      "sends no body with GET).")
    table_id, table_uri = body.get("table_id"), body.get("table_uri")
    if not isinstance(table_id, str) or not table_id:
        raise invalid("Missing required field 'table_id'.")
    try:
        table_id = str(uuid.UUID(table_id))
    except ValueError:
        raise invalid(f"Field 'table_id' must be a table id (a UUID), got '{table_id:.60}'.") from None
    if not isinstance(table_uri, str) or not table_uri:
        raise invalid("Missing required field 'table_uri'.")
    return table_id, table_uri


def parse_commit(body: dict) -> Commit:
    table_id, table_uri = _table_ref(body)
    raw = body.get("commit_info")
    info = None
    if raw is not None:
        if not isinstance(raw, dict):
            raise invalid("Field 'commit_info' must be an object.")
        w = "commit_info."
        info = CommitInfo(
            version=_required_int(raw, "version", w, minimum=1),
            timestamp=_required_int(raw, "timestamp", w, minimum=1),
            file_name=raw.get("file_name"),
            file_size=_required_int(raw, "file_size", w, minimum=1),
            file_modification_timestamp=_required_int(raw, "file_modification_timestamp", w, minimum=1),
            inline_content=raw.get("inline_content"),
        )
        _check_file_name(info)
    backfilled = _int(body, "latest_backfilled_version", "", minimum=0)
    metadata = body.get("metadata")
    if info is None:
        if backfilled is None:
            raise invalid("Either commit_info or latest_backfilled_version must be set.")
        if metadata is not None:
            raise invalid("A request that only reports latest_backfilled_version cannot carry metadata.")
    if metadata is not None:
        metadata = _check_metadata(metadata, table_id)
    check_uniform(body.get("uniform"))
    return Commit(table_id, table_uri, info, backfilled, metadata)


def check_uniform(uniform) -> None:
    """A commit's `uniform` (a writer's report of Iceberg metadata it wrote itself): an object, accepted and
    not used. The catalog writes a UniForm table's Iceberg metadata itself (iceberg/uniform.py), so no
    metadata file a writer names is ever served."""
    if uniform is not None and not isinstance(uniform, dict):
        raise invalid("Field 'uniform' must be an object.")


def _check_file_name(info: CommitInfo) -> None:
    name = info.file_name
    if not isinstance(name, str) or not name:
        raise invalid("Missing required field 'commit_info.file_name'.")
    match = _STAGED_NAME.match(name)
    if match is None:
        raise invalid(f"Field 'commit_info.file_name' must be a staged commit file name '<version, 20 digits>."
                      f"<uuid>.json' (one path segment), got '{name:.80}'.")
    if int(match.group(1)) != info.version:
        raise invalid(f"commit_info.file_name '{name}' names version {int(match.group(1))}, "
                      f"but commit_info.version is {info.version}.")
    content = info.inline_content
    if content is not None:
        if not isinstance(content, str) or not content.strip():
            raise invalid("Field 'commit_info.inline_content' must be the commit's actions as non-empty text.")
        if len(content.encode()) != info.file_size:
            raise invalid(f"commit_info.file_size is {info.file_size}, but the inline content has "
                          f"{len(content.encode())} bytes.")


def _check_metadata(metadata, table_id: str) -> dict:
    if not isinstance(metadata, dict):
        raise invalid("Field 'metadata' must be an object.")
    out = {}
    if metadata.get("description") is not None:
        if not isinstance(metadata["description"], str):
            raise invalid("Field 'metadata.description' must be a string.")
        out["comment"] = metadata["description"]
    schema = metadata.get("schema")
    if schema is not None:
        columns = schema.get("columns") if isinstance(schema, dict) else None
        if not isinstance(columns, list) or not columns:
            raise invalid("Field 'metadata.schema.columns' must be a non-empty list of columns.")
        out["columns"] = check_columns(columns)
    props = metadata.get("properties")
    if props is not None:
        props = props.get("properties") if isinstance(props, dict) else None
        if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
            raise invalid("Field 'metadata.properties.properties' must be a map of strings.")
        if props.get(TABLE_ID_PROPERTY, table_id) != table_id:
            raise invalid(f"Property '{TABLE_ID_PROPERTY}' is '{props[TABLE_ID_PROPERTY]:.60}', "
                          f"but the commit is for table {table_id}.")
        if props:
            out["properties"] = props
    if not out:
        raise invalid("At least one of description, properties or schema must be set in commit.metadata.")
    return out


def parse_get_commits(body: dict) -> GetCommits:
    table_id, table_uri = _table_ref(body)
    start = _required_int(body, "start_version", minimum=0)
    end = _int(body, "end_version", "", minimum=0)
    if end is not None and end < start:
        raise invalid(f"end_version ({end}) must be >= start_version ({start}).")
    return GetCommits(table_id, table_uri, start, end)


# ---- the table ---------------------------------------------------------------------


def missing_table(table_id: str) -> CatalogError:
    """The answer for a table id that names no table, and for a table the caller may not see."""
    return not_found(f"Table with id '{table_id}' does not exist.")


def check_table(table: Asset | None, table_id: str, table_uri: str) -> Asset:
    """The table a commit or read names must exist, be a catalog-managed MANAGED Delta table, at that uri.
    Callers authorize before this check: its messages name the table and its type."""
    if table is None or table.type != "table":
        raise missing_table(table_id)
    info = table.info
    if info.get("table_type") != "MANAGED" or info.get("data_source_format") != "DELTA":
        raise invalid(f"Table '{table.full_name}' is {info.get('table_type')} {info.get('data_source_format')}; "
                      "Delta commits are only for MANAGED DELTA tables.")
    if not is_catalog_managed(info.get("properties")):
        raise invalid(f"Table '{table.full_name}' is not catalog-managed: set property {FEATURE_PROPERTY}=supported "
                      "when creating it.")
    try:
        uri = normalize_url(table_uri)
    except InvalidUrl as e:
        raise invalid(f"Invalid table_uri: {e}") from None
    if uri != table.storage_path:
        raise invalid(f"table_uri '{table_uri:.200}' does not match the location of table '{table.full_name}' "
                      f"('{table.storage_path}').")
    return table


# ---- ratification -------------------------------------------------------------------


class AlreadyRatified(Exception):
    """An idempotent replay: raised inside the write so it rolls back, reported as success."""


@dataclass(frozen=True)
class Head:
    latest: int            # latest ratified version; 0 for a new table (version 0 is its creation commit)
    published: int         # latest version known published

    @classmethod
    def of(cls, latest: int | None, published: int | None) -> "Head":
        return cls(latest or 0, published if published is not None else 0)


def check_proposal(head: Head, info: CommitInfo, existing: dict | None, backfilled: int | None,
                   limit: int) -> None:
    """Decide a proposed commit against the table's head. Returns if it may be ratified; raises
    AlreadyRatified for a replay of the accepted commit, CatalogError otherwise.

    `existing` is the stored commit at info.version if that version is taken."""
    v = info.version
    if v <= head.latest:
        if existing is not None and existing["file_name"] == info.file_name:
            raise AlreadyRatified()
        winner = f" with commit file {existing['file_name']}" if existing is not None else ""
        raise CatalogError("RESOURCE_CONFLICT",
                           f"Commit version conflict: version {v} was already ratified{winner}; the latest "
                           f"version is {head.latest}. Rebase on it and propose version {head.latest + 1}.")
    if v != head.latest + 1:
        raise invalid(f"Commit version must be the next version after the latest ratified version "
                      f"{head.latest}, but got {v}.")
    if backfilled is not None and backfilled > head.latest:
        raise invalid(f"latest_backfilled_version {backfilled} cannot be greater than the latest ratified "
                      f"version {head.latest}.")
    published = max(head.published, backfilled or 0)
    if v - published > limit:
        raise CatalogError("RESOURCE_EXHAUSTED",
                           f"Table has {head.latest - published} unpublished commits, the limit is {limit}: "
                           f"publish commits to _delta_log and report latest_backfilled_version first.")


def check_backfill(head: Head, backfilled: int, has_commits: bool) -> None:
    if not has_commits:
        raise invalid("latest_backfilled_version needs a prior commit: the table has no ratified commits.")
    if backfilled > head.latest:
        raise invalid(f"Cannot report version {backfilled} as published: the latest ratified version is "
                      f"{head.latest}.")


def apply_metadata(table: Asset, metadata: dict, who: str, now: int) -> Asset:
    """The table as a commit's metadata change leaves it: columns, comment, properties (replaced whole,
    but the catalog's own keys stay so the table remains catalog-managed)."""
    info = dict(table.info)
    if "columns" in metadata:
        info["columns"] = metadata["columns"]
    if "comment" in metadata:
        info["comment"] = metadata["comment"]
    if "properties" in metadata:
        old = info.get("properties") or {}
        kept = {k: old[k] for k in (FEATURE_PROPERTY, TABLE_ID_PROPERTY, MAX_UNPUBLISHED_PROPERTY) if k in old}
        info["properties"] = {**metadata["properties"], **kept}
    info["updated_at"], info["updated_by"] = now, who
    return dataclasses.replace(table, info=info)


def commit_info_json(row: dict) -> dict:
    """A stored commit as a DeltaCommitInfo (plus inline_content for inline commits)."""
    return CommitInfo(row["version"], row["commit_timestamp"], row["file_name"], row["file_size"],
                      row["file_modification_timestamp"], row["content"]).to_json()
