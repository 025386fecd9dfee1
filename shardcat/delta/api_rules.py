"""The rules of the UC Delta API (`/delta/v1`, api/delta.yaml), as pure functions (no I/O).

Request shapes in (DeltaUpdateTableRequest, DeltaProtocol, domain metadata), the table as an
update leaves it, and answers out (DeltaTableMetadata, DeltaCommit, DeltaStorageCredential).
The protocol, domain metadata and commit versions are kept as table properties, the catalog's
derived keys, which clients read but may not write. shardcat/catalog/protocols/delta_api.py serves them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid

from ..entities.asset import Asset
from ..entities.columns import check_columns
from ..entities.vended import delta_config
from ..errors import CatalogError, invalid
from . import api_schema as schema_of
from . import commits as rules

# Table properties the catalog derives (from the protocol, domain metadata and commits): clients
# read them in loadTable, but may not set or remove them.
MIN_READER, MIN_WRITER = "delta.minReaderVersion", "delta.minWriterVersion"
FEATURE_PREFIX = "delta.feature."
CLUSTERING, ROW_ID_HIGH_WATER_MARK = "delta.clusteringColumns", "delta.rowTracking.rowIdHighWaterMark"
LAST_UPDATE_VERSION, LAST_COMMIT_TIMESTAMP = "delta.lastUpdateVersion", "delta.lastCommitTimestamp"
DERIVED = (MIN_READER, MIN_WRITER, CLUSTERING, ROW_ID_HIGH_WATER_MARK, LAST_UPDATE_VERSION, LAST_COMMIT_TIMESTAMP)
DOMAINS = {"delta.clustering": CLUSTERING, "delta.rowTracking": ROW_ID_HIGH_WATER_MARK}

# What a new catalog-managed table's version 0 must declare (the Delta protocol's catalogManaged
# feature needs in-commit timestamps), and what shardcat suggests on top.
REQUIRED_PROTOCOL = {"min-reader-version": 3, "min-writer-version": 7,
                     "reader-features": ["catalogManaged", "vacuumProtocolCheck"],
                     "writer-features": ["catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"]}
SUGGESTED_PROTOCOL = {"reader-features": ["deletionVectors", "v2Checkpoint"],
                      "writer-features": ["deletionVectors", "v2Checkpoint"]}
SUGGESTED_PROPERTIES = {"delta.enableDeletionVectors": "true", "delta.checkpointPolicy": "v2",
                        "delta.parquet.compression.codec": "zstd"}

UPDATE_ACTIONS = ("set-properties", "remove-properties", "set-columns", "set-table-comment", "add-commit",
                  "set-latest-backfilled-version", "set-protocol", "set-domain-metadata", "remove-domain-metadata",
                  "set-partition-columns", "update-metadata-snapshot-version")
COMMIT_ACTIONS = ("add-commit", "set-latest-backfilled-version")


class DeltaApiError(CatalogError):
    """A CatalogError the API names by a more specific DeltaErrorType."""

    def __init__(self, code: str, delta_type: str, message: str):
        super().__init__(code, message)
        self.delta_type = delta_type


def unsupported(message: str) -> DeltaApiError:
    return DeltaApiError("INVALID_PARAMETER_VALUE", "UnsupportedTableFormatException", message)


def requirement_failed(message: str) -> DeltaApiError:
    return DeltaApiError("RESOURCE_CONFLICT", "UpdateRequirementConflictException", message)


# ---- request fields ---------------------------------------------------------------------


def string_field(body: dict, key: str, where: str = "") -> str:
    value = body.get(key)
    if value is None:
        raise invalid(f"Missing required field '{where}{key}'.")
    if not isinstance(value, str) or not value:
        raise invalid(f"Field '{where}{key}' must be a non-empty string.")
    return value


def int_field(value, where: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise invalid(f"Field '{where}' must be an integer >= {minimum}, got {value!r:.40}.")
    return value


def uuid_field(value, where: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        raise invalid(f"Field '{where}' must be a UUID, got {value!r:.60}.") from None


def string_map(value, where: str, *, nulls: bool = False) -> dict:
    if not isinstance(value, dict) or not all(isinstance(v, str) or (nulls and v is None) for v in value.values()):
        raise invalid(f"Field '{where}' must be a map of strings.")
    return value


def strings(value, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"Field '{where}' must be a list of strings.")
    return value


def derived(key: str) -> bool:
    return key in DERIVED or key.startswith(FEATURE_PREFIX)


def client_properties(props: dict, where: str) -> dict:
    """Properties a client sets: none of the catalog's derived keys."""
    bad = sorted(k for k in props if derived(k))
    if bad:
        raise invalid(f"{where}: {', '.join(bad)[:200]} {'is' if len(bad) == 1 else 'are'} derived by the catalog "
                      "(from the protocol, domain metadata and commits) and cannot be set or removed directly.")
    return props


def protocol_properties(protocol, where: str = "protocol") -> dict:
    """A DeltaProtocol as the derived table properties (minReader/WriterVersion, delta.feature.*)."""
    if not isinstance(protocol, dict):
        raise invalid(f"Field '{where}' must be an object.")
    reader = int_field(protocol.get("min-reader-version"), f"{where}.min-reader-version", 1)
    writer = int_field(protocol.get("min-writer-version"), f"{where}.min-writer-version", 1)
    readers = strings(protocol.get("reader-features") or [], f"{where}.reader-features")
    writers = strings(protocol.get("writer-features") or [], f"{where}.writer-features")
    missing = sorted(set(readers) - set(writers))
    if missing:
        raise invalid(f"{where}: reader features {missing} must also be writer features (Delta protocol).")
    out = {MIN_READER: str(reader), MIN_WRITER: str(writer)}
    out.update({FEATURE_PREFIX + f: "supported" for f in writers})
    return out


def domain_properties(domains, where: str) -> dict:
    """DeltaDomainMetadataUpdates as their table properties (clustering columns, row-id high-water mark)."""
    if not isinstance(domains, dict):
        raise invalid(f"Field '{where}' must be an object keyed by domain name.")
    out = {}
    for name, value in domains.items():
        if name not in DOMAINS:
            raise invalid(f"{where}: unknown domain '{name:.60}'; known: {', '.join(DOMAINS)}.")
        if not isinstance(value, dict):
            raise invalid(f"{where}.{name} must be an object.")
        if name == "delta.clustering":
            columns = value.get("clusteringColumns")
            if not isinstance(columns, list) or not all(
                    isinstance(c, list) and c and all(isinstance(p, str) for p in c) for c in columns):
                raise invalid(f"{where}.{name}.clusteringColumns must be a list of column paths (lists of names).")
            out[CLUSTERING] = json.dumps(columns, separators=(",", ":"))
        else:
            out[ROW_ID_HIGH_WATER_MARK] = str(int_field(value.get("rowIdHighWaterMark"),
                                                   f"{where}.{name}.rowIdHighWaterMark", -1))
    return out


def credential_json(vended: dict, operation: str) -> dict:
    """A TemporaryCredentials answer (governance/vending.py) as a DeltaStorageCredential."""
    config = delta_config(vended)      # Azure's SAS (entities/vended.py); S3's keys below
    aws = vended.get("aws_temp_credentials")
    if aws:
        config = {"s3.access-key-id": aws["access_key_id"], "s3.secret-access-key": aws["secret_access_key"],
                  "s3.session-token": aws["session_token"]}
    return {"prefix": vended["url"], "operation": operation, "expiration-time-ms": vended["expiration_time"],
            "config": config}


def etag(table: Asset, latest: int | None) -> str:
    """Changes with every write to the table: its stored fields and its latest ratified version."""
    state = json.dumps([table.info, table.full_name, latest], sort_keys=True, default=str)
    return hashlib.sha256(state.encode()).hexdigest()[:32]


# ---- updates ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class UpdateRequest:
    """A DeltaUpdateTableRequest, checked for shape (contents are checked against the table)."""
    table_uuid: str
    etag: str | None
    actions: dict[str, dict]                 # action name -> its update
    commit: rules.CommitInfo | None          # add-commit
    backfilled: int | None                   # set-latest-backfilled-version

    @property
    def changes_metadata(self) -> bool:
        return any(a not in COMMIT_ACTIONS for a in self.actions)


def _keys(value) -> set:
    """The names a map's keys or a list's strings are (anything else: none; its own check refuses it)."""
    if isinstance(value, dict):
        return set(value)
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def parse_update(body: dict) -> UpdateRequest:
    requirements, updates = body.get("requirements"), body.get("updates")
    if not isinstance(requirements, list) or not requirements:
        raise invalid("Field 'requirements' must be a non-empty list; an assert-table-uuid requirement is required.")
    if not isinstance(updates, list) or not updates:
        raise invalid("Field 'updates' must be a non-empty list of updates.")
    asserted: dict[str, dict] = {}
    for i, r in enumerate(requirements):
        kind = r.get("type") if isinstance(r, dict) else None
        if kind not in ("assert-table-uuid", "assert-etag"):
            raise invalid(f"requirements[{i}].type must be assert-table-uuid or assert-etag, got {kind!r:.40}.")
        if kind in asserted:
            raise invalid(f"At most one {kind} requirement per request.")
        asserted[kind] = r
    if "assert-table-uuid" not in asserted:
        raise invalid("An assert-table-uuid requirement is required.")
    table_uuid = uuid_field(asserted["assert-table-uuid"].get("uuid"), "requirements.assert-table-uuid.uuid")
    tag = None
    if "assert-etag" in asserted:
        tag = string_field(asserted["assert-etag"], "etag", "requirements.assert-etag.")
    actions: dict[str, dict] = {}
    for i, u in enumerate(updates):
        action = u.get("action") if isinstance(u, dict) else None
        if action not in UPDATE_ACTIONS:
            raise invalid(f"updates[{i}].action {action!r:.40} is not one of {', '.join(UPDATE_ACTIONS)}.")
        if action in actions:
            raise invalid(f"At most one {action} update per request.")
        actions[action] = u
    for setting, removing, field, what in (("set-properties", "remove-properties", "removals", "key"),
                                           ("set-domain-metadata", "remove-domain-metadata", "domains", "domain")):
        both = _keys(actions.get(setting, {}).get("updates")) & _keys(actions.get(removing, {}).get(field))
        if both:
            raise invalid(f"{setting} and {removing} both touch the {what}s {sorted(both)[:5]}.")
    commit = backfilled = None
    if "add-commit" in actions or "set-latest-backfilled-version" in actions:
        request = {"table_id": table_uuid, "table_uri": "-"}
        if "add-commit" in actions:
            add = actions["add-commit"]
            rules.check_uniform(add.get("uniform"))
            raw = add.get("commit")
            if not isinstance(raw, dict):
                raise invalid("add-commit needs a 'commit' object.")
            request["commit_info"] = {k.replace("-", "_"): v for k, v in raw.items()}
        if "set-latest-backfilled-version" in actions:
            value = actions["set-latest-backfilled-version"].get("latest-published-version")
            request["latest_backfilled_version"] = int_field(value, "latest-published-version")
        parsed = rules.parse_commit(request)
        commit, backfilled = parsed.info, parsed.latest_backfilled_version
    return UpdateRequest(table_uuid, tag, actions, commit, backfilled)


def apply_updates(table: Asset, req: UpdateRequest, who: str, now: int) -> Asset | None:
    """The table as the request's metadata updates leave it (None: they change nothing). Pure."""
    if not req.changes_metadata:
        return None
    a = req.actions
    info = dict(table.info)
    props = dict(info.get("properties") or {})
    managed = rules.is_catalog_managed(props)
    columns = info.get("columns") or []
    if "set-columns" in a or "set-partition-columns" in a:
        if "set-columns" in a:
            struct = a["set-columns"].get("columns")
            if not isinstance(struct, dict):
                raise invalid("set-columns needs 'columns' (a DeltaStructType).")
            fields = schema_of.log_fields(struct.get("fields"), "set-columns.columns")
            if not fields:
                raise invalid("set-columns requires at least one column.")
        else:
            fields = [schema_of.log_field_of(c) for c in sorted(columns, key=lambda c: c.get("position", 0))]
        parts = a["set-partition-columns"].get("partition-columns") if "set-partition-columns" in a \
            else schema_of.partition_columns_of(columns)
        parts = schema_of.check_partition_columns(fields, parts, "partition-columns")
        # the tags and masks of the columns that stay: catalog/tree/column_governance.py
        info["columns"] = check_columns(schema_of.uc_columns(fields, parts))
    if "set-table-comment" in a:
        comment = a["set-table-comment"].get("comment")
        if not isinstance(comment, str):
            raise invalid("set-table-comment needs 'comment' (a string).")
        info["comment"] = comment
    if "set-protocol" in a:
        derived = protocol_properties(a["set-protocol"].get("protocol"), "set-protocol.protocol")
        if rules.is_catalog_managed(derived) != managed:
            raise invalid("set-protocol cannot add or drop the catalogManaged feature: a table is catalog-managed "
                          "from its creation to its end.")
        props = {k: v for k, v in props.items()
                 if k not in (MIN_READER, MIN_WRITER) and not k.startswith(FEATURE_PREFIX)}
        props.update(derived)
    if "set-properties" in a:
        updates = client_properties(string_map(a["set-properties"].get("updates"), "set-properties.updates"),
                                     "set-properties")
        if updates.get(rules.TABLE_ID_PROPERTY, table.id) != table.id:
            raise invalid(f"Property '{rules.TABLE_ID_PROPERTY}' must be the table's id {table.id}.")
        props.update(updates)
    if "remove-properties" in a:
        removals = strings(a["remove-properties"].get("removals"), "remove-properties.removals")
        client_properties(dict.fromkeys(removals), "remove-properties")
        if managed and rules.TABLE_ID_PROPERTY in removals:
            raise invalid(f"Property '{rules.TABLE_ID_PROPERTY}' of a catalog-managed table cannot be removed.")
        for key in removals:
            props.pop(key, None)
    if "set-domain-metadata" in a:
        props.update(domain_properties(a["set-domain-metadata"].get("updates"), "set-domain-metadata.updates"))
    if "remove-domain-metadata" in a:
        for domain in strings(a["remove-domain-metadata"].get("domains"), "remove-domain-metadata.domains"):
            if domain not in DOMAINS:
                raise invalid(f"Unknown domain in remove-domain-metadata: '{domain:.60}'.")
            props.pop(DOMAINS[domain], None)
    if "update-metadata-snapshot-version" in a:
        if info.get("table_type") != "EXTERNAL":
            raise invalid("update-metadata-snapshot-version is for EXTERNAL tables; a MANAGED table's versions are "
                          "the catalog's commits.")
        u = a["update-metadata-snapshot-version"]
        props[LAST_UPDATE_VERSION] = str(int_field(u.get("last-commit-version"), "last-commit-version"))
        props[LAST_COMMIT_TIMESTAMP] = str(int_field(u.get("last-commit-timestamp-ms"), "last-commit-timestamp-ms"))
    if req.commit is not None:        # a metadata-changing commit: the version that last changed metadata
        props[LAST_UPDATE_VERSION] = str(req.commit.version)
        props[LAST_COMMIT_TIMESTAMP] = str(req.commit.timestamp)
    info["properties"] = props
    info["updated_at"], info["updated_by"] = now, who
    return dataclasses.replace(table, info=info)


def commit_json(row: dict) -> dict:
    out = {"version": row["version"], "timestamp": row["commit_timestamp"], "file-name": row["file_name"],
           "file-size": row["file_size"], "file-modification-timestamp": row["file_modification_timestamp"]}
    if row.get("content") is not None:
        out["inline-content"] = row["content"]       # shardcat's inline commits
    return out


def table_metadata(table: Asset, latest: int | None) -> dict:
    """A table as a DeltaTableMetadata."""
    info = table.info
    props = {k: v for k, v in (info.get("properties") or {}).items() if isinstance(v, str)}
    columns = info.get("columns") or []
    out = {"etag": etag(table, latest), "table-type": info.get("table_type"), "table-uuid": table.id,
           "location": table.storage_path, "created-time": info.get("created_at"),
           "updated-time": info.get("updated_at"), "columns": schema_of.api_columns(columns),
           "partition-columns": schema_of.partition_columns_of(columns), "properties": props}
    for key, field in ((LAST_UPDATE_VERSION, "last-commit-version"),
                       (LAST_COMMIT_TIMESTAMP, "last-commit-timestamp-ms")):
        if props.get(key, "").isdecimal():
            out[field] = int(props[key])
    return out
