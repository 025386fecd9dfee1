"""The UC Delta API: `/api/2.1/unity-catalog/delta/v1/...` (the open-source Unity Catalog's api/delta.yaml).

Delta clients (DuckDB's unity_catalog extension, Delta Spark/Kernel) create, load, commit to,
rename and drop Delta tables through it, and get storage credentials. Everything maps onto
shardcat's own operations, so the grants, paths and serialization are the UC API's:

- tables are CatalogService tables (the same create / get / rename / delete and their checks);
- an `add-commit` or `set-latest-backfilled-version` goes through DeltaCommitService.ratify, the
  one ratification behind `/delta/preview/commits`, in the same metastore write as any metadata
  change of the request;
- credentials are governance/vending.py's, authorized as `/temporary-*-credentials` are.

Loading a catalog-managed table answers its metadata, latest ratified version and unpublished
commits (newest first) from one database snapshot, so a reader builds the snapshot from one call.
Errors are the API's `{"error": {"message", "type", "code"}}`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid

from aiohttp import web

from ..auth import Caller
from ..delta import api_schema as schema_of
from ..delta import commits as rules
from ..entities.asset import Asset
from ..entities.columns import check_columns
from ..entities.names import split_full_name
from ..entities.types import TYPES
from ..errors import CatalogError, invalid, not_found
from ..governance import audit
from ..governance.authorize import authorizer, require_data_access
from ..governance.vending import vend
from ..store.db import WriteTx, now_ms
from .credentials import TemporaryCredentials
from .delta_commits import DeltaCommitService
from .service import CatalogService, encode_json
from .shard import MetastoreState, Shard

PROTOCOL_VERSION = "1.0"
# The router sends a HEAD on to its shard as a GET with this header: tableExists is not loadTable.
HEAD_HEADER = "X-Shardcat-Head"
ENDPOINTS = [
    "GET /v1/config",
    "POST /v1/catalogs/{catalog}/schemas/{schema}/staging-tables",
    "POST /v1/catalogs/{catalog}/schemas/{schema}/tables",
    "GET /v1/catalogs/{catalog}/schemas/{schema}/tables",
    "GET /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
    "POST /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
    "DELETE /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
    "HEAD /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
    "POST /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}/rename",
    "GET /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}/credentials",
    "POST /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}/metrics",
    "GET /v1/staging-tables/{table_id}/credentials",
    "GET /v1/temporary-path-credentials",
]

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


# ---- errors ------------------------------------------------------------------------------

# CatalogError codes as the API's DeltaErrorType.
_TYPES = {
    "INVALID_PARAMETER_VALUE": "InvalidParameterValueException", "MALFORMED_REQUEST": "BadRequestException",
    "BAD_REQUEST": "BadRequestException", "FAILED_PRECONDITION": "BadRequestException",
    "UNAUTHENTICATED": "NotAuthorizedException", "PERMISSION_DENIED": "PermissionDeniedException",
    "NOT_FOUND": "NotFoundException", "ALREADY_EXISTS": "AlreadyExistsException",
    "RESOURCE_CONFLICT": "CommitVersionConflictException", "RESOURCE_EXHAUSTED": "ResourceExhaustedException",
    "REQUEST_TOO_LARGE": "BadRequestException", "TEMPORARILY_UNAVAILABLE": "InternalServerErrorException",
    "INTERNAL_ERROR": "InternalServerErrorException",
}
_NOT_FOUND = (("Catalog ", "NoSuchCatalogException"), ("Schema ", "NoSuchSchemaException"),
              ("Table ", "NoSuchTableException"), ("Staging table ", "NoSuchTableException"))


class DeltaApiError(CatalogError):
    """A CatalogError the API names by a more specific DeltaErrorType."""

    def __init__(self, code: str, delta_type: str, message: str):
        super().__init__(code, message)
        self.delta_type = delta_type


def _unsupported(message: str) -> DeltaApiError:
    return DeltaApiError("INVALID_PARAMETER_VALUE", "UnsupportedTableFormatException", message)


def _requirement_failed(message: str) -> DeltaApiError:
    return DeltaApiError("RESOURCE_CONFLICT", "UpdateRequirementConflictException", message)


def error_response(e: CatalogError) -> web.Response:
    kind = getattr(e, "delta_type", None) or _TYPES.get(e.code, "BadRequestException")
    if e.code == "NOT_FOUND" and kind == "NotFoundException":
        kind = next((t for prefix, t in _NOT_FOUND if e.message.startswith(prefix)), kind)
    return web.json_response({"error": {"message": e.message, "type": kind, "code": e.status}}, status=e.status)


def _delta_errors(handler):
    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except CatalogError as e:
            if e.code == "NOT_OWNER":      # the router's signal to re-route: keep Unity Catalog's shape
                raise
            return error_response(e)
    return handle


def _json(data) -> web.Response:
    return web.Response(body=encode_json(data), content_type="application/json")


def _no_content() -> web.Response:
    return web.Response(status=204)


# ---- request fields ------------------------------------------------------------------------


def _string(body: dict, key: str, where: str = "") -> str:
    value = body.get(key)
    if value is None:
        raise invalid(f"Missing required field '{where}{key}'.")
    if not isinstance(value, str) or not value:
        raise invalid(f"Field '{where}{key}' must be a non-empty string.")
    return value


def _int(value, where: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise invalid(f"Field '{where}' must be an integer >= {minimum}, got {value!r:.40}.")
    return value


def _uuid(value, where: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        raise invalid(f"Field '{where}' must be a UUID, got {value!r:.60}.") from None


def _string_map(value, where: str, *, nulls: bool = False) -> dict:
    if not isinstance(value, dict) or not all(isinstance(v, str) or (nulls and v is None) for v in value.values()):
        raise invalid(f"Field '{where}' must be a map of strings.")
    return value


def _strings(value, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"Field '{where}' must be a list of strings.")
    return value


def _operation(request: web.Request) -> str:
    op = request.query.get("operation")
    if op not in ("READ", "READ_WRITE"):
        raise invalid(f"Query parameter 'operation' must be READ or READ_WRITE, got {op!r:.40}.")
    return op


def _derived(key: str) -> bool:
    return key in DERIVED or key.startswith(FEATURE_PREFIX)


def _client_properties(props: dict, where: str) -> dict:
    """Properties a client sets: none of the catalog's derived keys."""
    bad = sorted(k for k in props if _derived(k))
    if bad:
        raise invalid(f"{where}: {', '.join(bad)[:200]} {'is' if len(bad) == 1 else 'are'} derived by the catalog "
                      "(from the protocol, domain metadata and commits) and cannot be set or removed directly.")
    return props


def protocol_properties(protocol, where: str = "protocol") -> dict:
    """A DeltaProtocol as the derived table properties (minReader/WriterVersion, delta.feature.*)."""
    if not isinstance(protocol, dict):
        raise invalid(f"Field '{where}' must be an object.")
    reader = _int(protocol.get("min-reader-version"), f"{where}.min-reader-version", 1)
    writer = _int(protocol.get("min-writer-version"), f"{where}.min-writer-version", 1)
    readers = _strings(protocol.get("reader-features") or [], f"{where}.reader-features")
    writers = _strings(protocol.get("writer-features") or [], f"{where}.writer-features")
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
            out[CLUSTERING] = encode_json(columns).decode()
        else:
            out[ROW_ID_HIGH_WATER_MARK] = str(_int(value.get("rowIdHighWaterMark"),
                                                   f"{where}.{name}.rowIdHighWaterMark", -1))
    return out


def _credential(vended: dict, operation: str) -> dict:
    """A TemporaryCredentials answer (governance/vending.py) as a DeltaStorageCredential."""
    config = {}
    aws = vended.get("aws_temp_credentials")
    if aws:
        config = {"s3.access-key-id": aws["access_key_id"], "s3.secret-access-key": aws["secret_access_key"],
                  "s3.session-token": aws["session_token"]}
    return {"prefix": vended["url"], "operation": operation, "expiration-time-ms": vended["expiration_time"],
            "config": config}


def etag(table: Asset, latest: int | None) -> str:
    """Changes with every write to the table: its stored fields and its latest ratified version."""
    return hashlib.sha256(encode_json([table.info, table.full_name, latest])).hexdigest()[:32]


# ---- the service ---------------------------------------------------------------------------


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
    table_uuid = _uuid(asserted["assert-table-uuid"].get("uuid"), "requirements.assert-table-uuid.uuid")
    tag = None
    if "assert-etag" in asserted:
        tag = _string(asserted["assert-etag"], "etag", "requirements.assert-etag.")
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
            if add.get("uniform") is not None:
                raise invalid("UniForm (Iceberg) metadata in commits is not supported by this catalog.")
            raw = add.get("commit")
            if not isinstance(raw, dict):
                raise invalid("add-commit needs a 'commit' object.")
            request["commit_info"] = {k.replace("-", "_"): v for k, v in raw.items()}
        if "set-latest-backfilled-version" in actions:
            value = actions["set-latest-backfilled-version"].get("latest-published-version")
            request["latest_backfilled_version"] = _int(value, "latest-published-version")
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
        masks = {c["name"].lower(): c["mask"] for c in columns if c.get("mask")}
        new = schema_of.uc_columns(fields, parts)
        for c in new:
            if c["name"].lower() in masks:     # a column mask stays with its column
                c["mask"] = masks[c["name"].lower()]
        info["columns"] = check_columns(new)
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
        props = {k: v for k, v in props.items() if k not in (MIN_READER, MIN_WRITER) and not k.startswith(FEATURE_PREFIX)}
        props.update(derived)
    if "set-properties" in a:
        updates = _client_properties(_string_map(a["set-properties"].get("updates"), "set-properties.updates"),
                                     "set-properties")
        if updates.get(rules.TABLE_ID_PROPERTY, table.id) != table.id:
            raise invalid(f"Property '{rules.TABLE_ID_PROPERTY}' must be the table's id {table.id}.")
        props.update(updates)
    if "remove-properties" in a:
        removals = _strings(a["remove-properties"].get("removals"), "remove-properties.removals")
        _client_properties(dict.fromkeys(removals), "remove-properties")
        if managed and rules.TABLE_ID_PROPERTY in removals:
            raise invalid(f"Property '{rules.TABLE_ID_PROPERTY}' of a catalog-managed table cannot be removed.")
        for key in removals:
            props.pop(key, None)
    if "set-domain-metadata" in a:
        props.update(domain_properties(a["set-domain-metadata"].get("updates"), "set-domain-metadata.updates"))
    if "remove-domain-metadata" in a:
        for domain in _strings(a["remove-domain-metadata"].get("domains"), "remove-domain-metadata.domains"):
            if domain not in DOMAINS:
                raise invalid(f"Unknown domain in remove-domain-metadata: '{domain:.60}'.")
            props.pop(DOMAINS[domain], None)
    if "update-metadata-snapshot-version" in a:
        if info.get("table_type") != "EXTERNAL":
            raise invalid("update-metadata-snapshot-version is for EXTERNAL tables; a MANAGED table's versions are "
                          "the catalog's commits.")
        u = a["update-metadata-snapshot-version"]
        props[LAST_UPDATE_VERSION] = str(_int(u.get("last-commit-version"), "last-commit-version"))
        props[LAST_COMMIT_TIMESTAMP] = str(_int(u.get("last-commit-timestamp-ms"), "last-commit-timestamp-ms"))
    if req.commit is not None:        # a metadata-changing commit: the version that last changed metadata
        props[LAST_UPDATE_VERSION] = str(req.commit.version)
        props[LAST_COMMIT_TIMESTAMP] = str(req.commit.timestamp)
    info["properties"] = props
    info["updated_at"], info["updated_by"] = now, who
    return dataclasses.replace(table, info=info)


def _commit_json(row: dict) -> dict:
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


class DeltaApi:
    """The API's operations for one shard, on the caller's metastore."""

    def __init__(self, shard: Shard, commits: DeltaCommitService):
        self.shard = shard
        self.catalogs = CatalogService(shard)
        self.commits = commits
        self.credentials = TemporaryCredentials(shard)

    # ---- lookups ----------------------------------------------------------------------

    async def _table(self, caller: Caller, c: str, s: str, t: str) -> Asset:
        """The table, if the caller may read its metadata (the UC API's getTable rule)."""
        try:
            table = await self.catalogs.find(caller, "table", f"{c}.{s}.{t}")
        except CatalogError as e:
            if e.code == "NOT_FOUND":
                await self._parents(caller, c, s)     # say which part is missing
            raise
        audit.annotate("TABLE", table.full_name, table.id)
        return table

    async def _parents(self, caller: Caller, c: str, s: str) -> None:
        """NOT_FOUND naming the catalog or schema if one of them does not exist."""
        ms = caller.metastore()
        for kind, name in (("catalog", c), ("schema", f"{c}.{s}")):
            if await self.shard.lookup(ms, TYPES[kind].namespace, name.lower(), caller.min_version) is None:
                raise not_found(f"{kind.capitalize()} '{name}' does not exist.")

    @staticmethod
    def _require_delta(table: Asset) -> None:
        info = table.info
        if info.get("data_source_format") != "DELTA" or info.get("table_type") not in ("MANAGED", "EXTERNAL"):
            raise _unsupported(f"Table '{table.full_name}' is a {info.get('table_type')} "
                               f"{info.get('data_source_format') or ''} table, not a Delta table: use the Unity "
                               "Catalog API (/tables) for it.")

    @staticmethod
    def _catalog_managed(table: Asset) -> bool:
        return table.info.get("table_type") == "MANAGED" and rules.is_catalog_managed(table.info.get("properties"))

    # ---- configuration ----------------------------------------------------------------

    async def config(self, caller: Caller, catalog: str | None, versions: str | None) -> dict:
        if not catalog:
            raise invalid("Missing required query parameter 'catalog'.")
        if not versions:
            raise invalid("Missing required query parameter 'protocol-versions' (e.g. 1.0).")
        majors = set()
        for v in versions.split(","):
            major, _, minor = v.strip().partition(".")
            if not major.isdecimal() or not (minor == "" or minor.isdecimal()):
                raise invalid(f"protocol-versions must be a comma-separated list of versions like 1.0, got "
                              f"'{versions:.60}'.")
            majors.add(int(major))
        await self.catalogs.find(caller, "catalog", catalog)
        if 1 not in majors:
            raise invalid(f"This catalog speaks UC Delta API protocol {PROTOCOL_VERSION}; the client supports only "
                          f"{versions:.60}.")
        return {"endpoints": ENDPOINTS, "protocol-version": PROTOCOL_VERSION}

    # ---- tables -----------------------------------------------------------------------

    async def list_tables(self, caller: Caller, c: str, s: str, max_results: str | None, token: str | None) -> dict:
        page, next_token = await self.catalogs.list_page(caller, "table", f"{c}.{s}", max_results, token)
        out = {"identifiers": [{"namespace": [c, s], "name": t.name} for t in page
                               if t.info.get("data_source_format") == "DELTA"]}
        if next_token:
            out["next-page-token"] = next_token
        return out

    async def load(self, caller: Caller, c: str, s: str, t: str) -> dict:
        table = await self._table(caller, c, s, t)
        self._require_delta(table)
        if not self._catalog_managed(table):
            return {"metadata": table_metadata(table, None)}
        # Unpublished commits are data (get-commits needs SELECT): so does loading them.
        await require_data_access(self.shard, caller, table, write=False)
        ms = caller.metastore()
        # All of them (LIMIT NULL): the spec wants them complete; the unpublished-commit limit bounds them.
        version, current, latest, _, rows = await self.shard.store.delta_commits(ms, table.id, 0, None, None)
        await self.shard.observed(ms, version)
        if current is None or current.type != "table":
            raise not_found(f"Table '{c}.{s}.{t}' does not exist.")
        return {"metadata": table_metadata(current, latest), "commits": [_commit_json(r) for r in reversed(rows)],
                "latest-table-version": latest or 0}

    async def exists(self, caller: Caller, c: str, s: str, t: str) -> None:
        await self._table(caller, c, s, t)

    async def create_staging(self, caller: Caller, c: str, s: str, body: dict) -> dict:
        name = _string(body, "name")
        staging = await self.catalogs.create_staging_table(caller, {"name": name, "catalog_name": c,
                                                                    "schema_name": s})
        table_id, location = staging["id"], staging["staging_location"]
        audit.annotate("TABLE", f"{c}.{s}.{staging['name']}", table_id)
        vended = await vend(self.shard, caller, location, write=True)
        return {"table-id": table_id, "table-type": "MANAGED", "location": location,
                "storage-credentials": [_credential(vended, "READ_WRITE")],
                "required-protocol": REQUIRED_PROTOCOL, "suggested-protocol": SUGGESTED_PROTOCOL,
                "required-properties": {"delta.enableInCommitTimestamps": "true", rules.TABLE_ID_PROPERTY: table_id},
                "suggested-properties": SUGGESTED_PROPERTIES}

    async def create(self, caller: Caller, c: str, s: str, body: dict) -> dict:
        name = _string(body, "name")
        table_type = body.get("table-type")
        if table_type not in ("MANAGED", "EXTERNAL"):
            raise invalid(f"Field 'table-type' must be MANAGED or EXTERNAL, got {table_type!r:.40}.")
        location = _string(body, "location")
        struct = body.get("columns")
        if not isinstance(struct, dict):
            raise invalid("Missing required field 'columns' (a DeltaStructType).")
        fields = schema_of.log_fields(struct.get("fields"), "columns")
        if not fields:
            raise invalid("Field 'columns' needs at least one field.")
        parts = schema_of.check_partition_columns(fields, body.get("partition-columns") or [])
        if body.get("protocol") is None:
            raise invalid("Missing required field 'protocol'.")
        derived = protocol_properties(body["protocol"])
        if body.get("properties") is None:
            raise invalid("Missing required field 'properties'.")
        props = _client_properties(dict(_string_map(body["properties"], "properties")), "properties")
        if body.get("domain-metadata") is not None:
            derived.update(domain_properties(body["domain-metadata"], "domain-metadata"))
        committed = _int(body.get("last-commit-timestamp-ms"), "last-commit-timestamp-ms")
        if body.get("uniform") is not None:
            raise invalid("UniForm (Iceberg) metadata is not supported by this catalog.")
        if body.get("comment") is not None and not isinstance(body["comment"], str):
            raise invalid("Field 'comment' must be a string.")
        catalog_managed = rules.is_catalog_managed(derived)
        if table_type == "MANAGED" and not catalog_managed:
            raise invalid("A MANAGED table created through the Delta API is catalog-managed: its protocol must list "
                          "the catalogManaged reader and writer feature (the staging table's required-protocol).")
        if catalog_managed and FEATURE_PREFIX + "inCommitTimestamp" not in derived:
            raise invalid("A catalog-managed table's protocol needs the inCommitTimestamp writer feature.")
        props.update(derived)
        props[LAST_UPDATE_VERSION], props[LAST_COMMIT_TIMESTAMP] = "0", str(committed)
        uc = {"name": name, "catalog_name": c, "schema_name": s, "table_type": table_type,
              "data_source_format": "DELTA", "columns": schema_of.uc_columns(fields, parts),
              "storage_location": location, "properties": props}
        if body.get("comment") is not None:
            uc["comment"] = body["comment"]
        created = await self.catalogs.create(caller, "table", uc)
        audit.annotate("TABLE", created["full_name"], created["table_id"])
        return await self.load(caller, c, s, created["name"])

    async def update(self, caller: Caller, c: str, s: str, t: str, body: dict) -> dict:
        req = parse_update(body)
        full = ".".join(split_full_name(f"{c}.{s}.{t}", 3, "table"))
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            table = await tx.get(TYPES["table"].namespace, full)
            if table is None:
                raise not_found(f"Table '{c}.{s}.{t}' does not exist.")
            commits = req.commit is not None or req.backfilled is not None
            if commits:
                authz.require_data(table, write=True)      # MODIFY, as /delta/preview/commits
            else:
                authz.require("table", "update", table)    # metadata alone: as PATCH /tables
            self._require_delta(table)
            if req.table_uuid != table.id:
                raise _requirement_failed(f"assert-table-uuid failed: table '{table.full_name}' is {table.id}, "
                                          f"not {req.table_uuid}.")
            latest, _ = await tx.delta_head(table.id)
            before = etag(table, latest)
            changed = apply_updates(table, req, caller.name, now)
            if commits:
                rules.check_table(table, table.id, table.storage_path)   # catalog-managed MANAGED Delta only
                await self.commits.ratify(tx, table, req.commit, req.backfilled,
                                          changed if req.commit is not None else None)
                if req.commit is None and changed is not None:
                    await tx.put(changed)
            elif changed is not None:
                await tx.put(changed)
            if req.etag is not None and req.etag != before:
                raise _requirement_failed(f"assert-etag failed: table '{table.full_name}' changed since etag "
                                          f"'{req.etag:.40}' was read; load the table again and retry.")
            return None

        try:
            await self.shard.write(caller.metastore(), write)
        except rules.AlreadyRatified:
            pass        # a replay of the accepted commit: the request rolled back, answer the table as it is
        return await self.load(caller, c, s, t)

    async def delete(self, caller: Caller, c: str, s: str, t: str) -> None:
        await self.catalogs.delete(caller, "table", f"{c}.{s}.{t}")

    async def rename(self, caller: Caller, c: str, s: str, t: str, body: dict) -> None:
        new_name = _string(body, "new-name")
        await self.catalogs.update(caller, "table", f"{c}.{s}.{t}", {"new_name": new_name})

    async def report_metrics(self, caller: Caller, c: str, s: str, t: str, body: dict) -> None:
        table_id = _uuid(body.get("table-id"), "table-id")
        if body.get("report") is not None and not isinstance(body["report"], dict):
            raise invalid("Field 'report' must be an object.")
        table = await self._table(caller, c, s, t)
        await require_data_access(self.shard, caller, table, write=True)
        if table.id != table_id:
            raise invalid(f"table-id {table_id} does not match table '{table.full_name}' ({table.id}).")
        # Acknowledged, not kept: shardcat keeps no client telemetry.

    # ---- credentials ------------------------------------------------------------------

    async def table_credentials(self, caller: Caller, c: str, s: str, t: str, operation: str) -> dict:
        table = await self._table(caller, c, s, t)
        await require_data_access(self.shard, caller, table, write=operation == "READ_WRITE")
        if not table.storage_path:
            raise invalid(f"Table '{table.full_name}' has no storage.")
        vended = await vend(self.shard, caller, table.storage_path, write=operation == "READ_WRITE")
        return {"storage-credentials": [_credential(vended, operation)]}

    async def staging_credentials(self, caller: Caller, table_id: str) -> dict:
        table_id = _uuid(table_id, "table_id")
        ms = caller.metastore()
        staging = await self.shard.lookup_id(ms, table_id, caller.min_version)
        if staging is None or staging.type != "staging_table":
            raise not_found(f"Staging table with id '{table_id}' does not exist.")
        schema = await self.shard.lookup_id(ms, staging.parent_id, caller.min_version)
        # Who may create the table there may write its first commit (the staging table keeps no owner).
        (await authorizer(self.shard, caller)).require("table", "create", None, parent=schema)
        vended = await vend(self.shard, caller, staging.storage_path, write=True)
        return {"storage-credentials": [_credential(vended, "READ_WRITE")]}

    async def path_credentials(self, caller: Caller, location: str | None, operation: str) -> dict:
        if not location:
            raise invalid("Missing required query parameter 'location'.")
        vended = await self.credentials.for_path(caller, {
            "url": location, "operation": "PATH_READ" if operation == "READ" else "PATH_READ_WRITE"})
        return {"storage-credentials": [_credential(vended, operation)]}


def delta_api_routes(shard: Shard, prefix: str) -> list[web.RouteDef]:
    """The UC Delta API's routes under `prefix`/delta/v1."""
    from .delta_commits import MAX_UNPUBLISHED
    from .http import json_body     # http.py imports this module

    api = DeltaApi(shard, DeltaCommitService(shard, MAX_UNPUBLISHED))
    base = f"{prefix}/delta/v1"
    schema = f"{base}/catalogs/{{catalog}}/schemas/{{schema}}"
    table = f"{schema}/tables/{{table}}"

    def route(method: str, path: str, handler, *, body: bool = False) -> web.RouteDef:
        """handler(caller, path parameters..., [body | request]) -> the answer's JSON, or None for 204."""
        async def handle(request: web.Request) -> web.StreamResponse:
            args = [request["caller"], *request.match_info.values()]
            out = await handler(*args, await json_body(request) if body else request)
            return _no_content() if out is None else _json(out)
        kwargs = {"allow_head": False} if method == "GET" else {}
        return web.route(method, path, _delta_errors(handle), **kwargs)

    q = lambda r, name: r.query.get(name)   # noqa: E731
    return [
        route("GET", f"{base}/config", lambda caller, r: api.config(caller, q(r, "catalog"), q(r, "protocol-versions"))),
        route("POST", f"{schema}/staging-tables", api.create_staging, body=True),
        route("POST", f"{schema}/tables", api.create, body=True),
        route("GET", f"{schema}/tables", lambda caller, c, s, r: api.list_tables(
            caller, c, s, q(r, "max-results") or q(r, "max_results"), q(r, "page-token") or q(r, "page_token"))),
        route("GET", table, lambda caller, c, s, t, r: api.exists(caller, c, s, t) if HEAD_HEADER in r.headers
              else api.load(caller, c, s, t)),
        route("HEAD", table, lambda caller, c, s, t, r: api.exists(caller, c, s, t)),
        route("POST", table, api.update, body=True),
        route("DELETE", table, lambda caller, c, s, t, r: api.delete(caller, c, s, t)),
        route("POST", f"{table}/rename", api.rename, body=True),
        route("POST", f"{table}/metrics", api.report_metrics, body=True),
        route("GET", f"{table}/credentials", lambda caller, c, s, t, r: api.table_credentials(
            caller, c, s, t, _operation(r))),
        route("GET", f"{base}/staging-tables/{{table_id}}/credentials",
              lambda caller, table_id, r: api.staging_credentials(caller, table_id)),
        route("GET", f"{base}/temporary-path-credentials", lambda caller, r: api.path_credentials(
            caller, q(r, "location"), _operation(r))),
    ]
