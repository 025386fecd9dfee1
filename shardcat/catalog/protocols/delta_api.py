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
Errors are the API's `{"error": {"message", "type", "code"}}`. The request and answer rules are
shardcat/delta/api_rules.py's (pure); this module does the lookups, the grants and the writes.
"""

from __future__ import annotations

from aiohttp import web

from ...auth import Caller
from ...delta import api_schema as schema_of
from ...delta import commits as rules
from ...delta.api_rules import (FEATURE_PREFIX, LAST_COMMIT_TIMESTAMP, LAST_UPDATE_VERSION, REQUIRED_PROTOCOL,
                               SUGGESTED_PROPERTIES, SUGGESTED_PROTOCOL, apply_updates, client_properties,
                               commit_json, credential_json, domain_properties, etag, int_field, parse_update,
                               protocol_properties, requirement_failed, string_field, string_map, table_metadata,
                               unsupported, uuid_field)
from ...entities.asset import Asset
from ...entities.names import split_full_name
from ...entities.types import TYPES
from ...errors import CatalogError, invalid, not_found
from ...governance import audit
from ...governance.authorize import authorizer, require_data_access
from ...entities.values import now_ms
from ...governance.vending import vend
from ...shards.shard import MetastoreState, Shard
from ...store.writes import WriteTx
from ...web.kit import encode_json, json_body
from ...web.routes import Handler, ShardServing
from ...web.wire import HEAD_HEADER
from ..tree.column_governance import keep_column_governance
from ..features.credentials import TemporaryCredentials
from .delta_commits import MAX_UNPUBLISHED, DeltaCommitService
from ..tree.service import CatalogService

PROTOCOL_VERSION = "1.0"
ENDPOINTS = [     # the versioned endpoints config negotiates (config itself is not one: delta.yaml's example)
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


def _operation(request: web.Request) -> str:
    op = request.query.get("operation")
    if op not in ("READ", "READ_WRITE"):
        raise invalid(f"Query parameter 'operation' must be READ or READ_WRITE, got {op!r:.40}.")
    return op


# ---- the service ---------------------------------------------------------------------------


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
        """NOT_FOUND naming the catalog or schema if one of them does not exist, or is one the caller
        may not see (which answers as missing: docs/security.md)."""
        for kind, name in (("catalog", c), ("schema", f"{c}.{s}")):
            try:
                await self.catalogs.find(caller, kind, name)
            except CatalogError as e:
                if e.code == "NOT_FOUND":
                    raise
                return      # there, and visible, but not readable: the table's own answer stands

    @staticmethod
    def _require_delta(table: Asset) -> None:
        info = table.info
        if info.get("data_source_format") != "DELTA" or info.get("table_type") not in ("MANAGED", "EXTERNAL"):
            raise unsupported(f"Table '{table.full_name}' is a {info.get('table_type')} "
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
        return {"metadata": table_metadata(current, latest), "commits": [commit_json(r) for r in reversed(rows)],
                "latest-table-version": latest or 0}

    async def exists(self, caller: Caller, c: str, s: str, t: str) -> None:
        await self._table(caller, c, s, t)

    async def create_staging(self, caller: Caller, c: str, s: str, body: dict) -> dict:
        name = string_field(body, "name")
        staging = await self.catalogs.create_staging_table(caller, {"name": name, "catalog_name": c,
                                                                    "schema_name": s})
        table_id, location = staging["id"], staging["staging_location"]
        audit.annotate("TABLE", f"{c}.{s}.{staging['name']}", table_id)
        try:
            credentials = [credential_json(await vend(self.shard, caller, location, write=True), "READ_WRITE")]
        except CatalogError as e:
            if e.code != "FAILED_PRECONDITION":
                raise
            # Nothing can be vended there (no STS, another cloud): the reservation stands, and a client
            # with credentials of its own goes on; GET .../staging-tables/{id}/credentials says why.
            credentials = []
        return {"table-id": table_id, "table-type": "MANAGED", "location": location,
                "storage-credentials": credentials,
                "required-protocol": REQUIRED_PROTOCOL, "suggested-protocol": SUGGESTED_PROTOCOL,
                "required-properties": {"delta.enableInCommitTimestamps": "true", rules.TABLE_ID_PROPERTY: table_id},
                "suggested-properties": SUGGESTED_PROPERTIES}

    async def create(self, caller: Caller, c: str, s: str, body: dict) -> dict:
        name = string_field(body, "name")
        table_type = body.get("table-type")
        if table_type not in ("MANAGED", "EXTERNAL"):
            raise invalid(f"Field 'table-type' must be MANAGED or EXTERNAL, got {table_type!r:.40}.")
        location = string_field(body, "location")
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
        props = client_properties(dict(string_map(body["properties"], "properties")), "properties")
        if body.get("domain-metadata") is not None:
            derived.update(domain_properties(body["domain-metadata"], "domain-metadata"))
        committed = int_field(body.get("last-commit-timestamp-ms"), "last-commit-timestamp-ms")
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
            missing = not_found(f"Table '{c}.{s}.{t}' does not exist.")
            if table is None:
                raise missing
            commits = req.commit is not None or req.backfilled is not None
            if commits:       # MODIFY, as /delta/preview/commits
                authz.require_data(table, write=True, missing=missing)
            else:             # metadata alone: as PATCH /tables
                authz.require_or_missing("table", "update", table, missing)
            self._require_delta(table)
            if req.table_uuid != table.id:
                raise requirement_failed(f"assert-table-uuid failed: table '{table.full_name}' is {table.id}, "
                                          f"not {req.table_uuid}.")
            head = await tx.delta_head(table.id)
            before = etag(table, head[0])
            changed = apply_updates(table, req, caller.name, now)
            if changed is not None:     # new columns keep their tags and masks, or the request is refused
                changed = await keep_column_governance(self.shard.store, authz, table, changed)
            if commits:
                rules.check_table(table, table.id, table.storage_path)   # catalog-managed MANAGED Delta only
                await self.commits.ratify(tx, table, req.commit, req.backfilled,
                                          changed if req.commit is not None else None, head=head)
                if req.commit is None and changed is not None:
                    await tx.put(changed)
            elif changed is not None:
                await tx.put(changed)
            if req.etag is not None and req.etag != before:
                raise requirement_failed(f"assert-etag failed: table '{table.full_name}' changed since etag "
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
        new_name = string_field(body, "new-name")
        await self.catalogs.update(caller, "table", f"{c}.{s}.{t}", {"new_name": new_name})

    async def report_metrics(self, caller: Caller, c: str, s: str, t: str, body: dict) -> None:
        table_id = uuid_field(body.get("table-id"), "table-id")
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
        return {"storage-credentials": [credential_json(vended, operation)]}

    async def staging_credentials(self, caller: Caller, table_id: str) -> dict:
        table_id = uuid_field(table_id, "table_id")
        ms = caller.metastore()
        staging = await self.shard.lookup_id(ms, table_id, caller.min_version)
        missing = not_found(f"Staging table with id '{table_id}' does not exist.")
        if staging is None or staging.type != "staging_table":
            raise missing
        schema = await self.shard.lookup_id(ms, staging.parent_id, caller.min_version)
        # Who may create the table there may write its first commit (the staging table keeps no owner).
        (await authorizer(self.shard, caller)).require_or_missing("table", "create", None, missing, parent=schema)
        vended = await vend(self.shard, caller, staging.storage_path, write=True)
        return {"storage-credentials": [credential_json(vended, "READ_WRITE")]}

    async def path_credentials(self, caller: Caller, location: str | None, operation: str) -> dict:
        if not location:
            raise invalid("Missing required query parameter 'location'.")
        vended = await self.credentials.for_path(caller, {
            "url": location, "operation": "PATH_READ" if operation == "READ" else "PATH_READ_WRITE"})
        return {"storage-credentials": [credential_json(vended, operation)]}


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """The UC Delta API's handlers by operationId (web/registry.py declares their paths under /delta/v1)."""
    shard = serving.shard
    api = DeltaApi(shard, DeltaCommitService(shard, MAX_UNPUBLISHED))
    def route(handler, *, body: bool = False) -> Handler:
        """handler(caller, path parameters..., [body | request]) -> the answer's JSON, or None for 204."""
        async def handle(request: web.Request) -> web.StreamResponse:
            args = [request["caller"], *request.match_info.values()]
            out = await handler(*args, await json_body(request) if body else request)
            return _no_content() if out is None else _json(out)
        return _delta_errors(handle)

    q = lambda r, name: r.query.get(name)   # noqa: E731
    return {
        "getDeltaConfig": route(lambda caller, r: api.config(caller, q(r, "catalog"), q(r, "protocol-versions"))),
        "createDeltaStagingTable": route(api.create_staging, body=True),
        "createDeltaTable": route(api.create, body=True),
        "listDeltaTables": route(lambda caller, c, s, r: api.list_tables(
            caller, c, s, q(r, "max-results") or q(r, "max_results"), q(r, "page-token") or q(r, "page_token"))),
        "loadDeltaTable": route(lambda caller, c, s, t, r: api.exists(caller, c, s, t) if HEAD_HEADER in r.headers
                                else api.load(caller, c, s, t)),
        "deltaTableExists": route(lambda caller, c, s, t, r: api.exists(caller, c, s, t)),
        "updateDeltaTable": route(api.update, body=True),
        "deleteDeltaTable": route(lambda caller, c, s, t, r: api.delete(caller, c, s, t)),
        "renameDeltaTable": route(api.rename, body=True),
        "reportDeltaMetrics": route(api.report_metrics, body=True),
        "getDeltaTableCredentials": route(lambda caller, c, s, t, r: api.table_credentials(
            caller, c, s, t, _operation(r))),
        "getDeltaStagingTableCredentials": route(lambda caller, table_id, r: api.staging_credentials(caller, table_id)),
        "getDeltaTemporaryPathCredentials": route(lambda caller, r: api.path_credentials(
            caller, q(r, "location"), _operation(r))),
    }
