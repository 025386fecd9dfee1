"""The endpoint registry: every endpoint of the API, once, with what each part of shardcat needs to know of it.

The one place a path is written. One line per endpoint: the app that serves it, method, path
(under its prefix), its operationId (the OpenAPI document's, the audit log's action, and its
handler's name), the module whose handler answers it (a shard's endpoints are grouped by module
with `served_in`), the securable type the audit row names (when the path says it), whether a
POST only reads (safe to send again, like a GET), whether the shard's fast front answers it
itself, whether it is served without a token, and whether a request to it is an audit event.
From it are derived, at start-up: each app's aiohttp routes and their order (web/routes.py
`routes`, each endpoint's handler from its module's `shard_handlers` table by operationId: a
handler no endpoint names, or an endpoint without a handler, stops the app), which
modules the shard app asks for handlers (`modules`: serving/app.py names none itself), the
router's resend rule (`read_only`), the audit action names and securables (governance/audit.py),
the shard front's fast paths (serving/front.py), the paths that need no token
(governance/authentication.py), those not audited, and the operation names of /metrics (web/metrics.py).
The OpenAPI document (shardcat/openapi/shardcat.yaml) stays the hand-written spec;
tests/unit/web/test_declared_once.py holds it, the served routes and this list to the same paths and
operationIds. Adding an endpoint: its line here, in its module's group, its handler under its
operationId, its operation in the document (docs/design.md); a new module: a new group. Pure
data: clients read it too.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from .wire import CONTROL_PREFIX as CONTROL, PREFIX, SHARING_PREFIX

SHARING = SHARING_PREFIX + "/metastores/{metastore_id}"     # a recipient's profile endpoint
SHARED_TABLE = "/shares/{share}/schemas/{schema}/tables/{table}"

SHARD = "shard"        # a metastore's endpoint: served by its shard (the router forwards it)
ACCOUNT = "account"    # account-level: served by the router (and by the one-process app)
ROUTER = "router"      # the router's own
EVERY = "every"        # every app


@dataclass(frozen=True)
class Endpoint:
    app: str
    method: str
    path: str                       # under `prefix`, with {parameters}
    action: str                     # its operationId in the OpenAPI document: the audit log's action, the
                                    # metrics' operation, and its handler's name in its module's table
    securable: str | None = None    # the securable type the path names (audit), None: the handler says
    read_only: bool = False         # a POST that changes nothing: safe to send again (GET and HEAD always are)
    fast: bool = False              # the shard's front answers it itself (serving/front.py); a write:
                                    # its module's `fast_writes(serving)` makes it
    public: bool = False            # served without an API token (names no securable, or checks its own token)
    audited: bool = True            # False: not an audit event (probes, metrics, the explorer's files)
    prefix: str = PREFIX
    module: str | None = None       # under shardcat: the module whose `shard_handlers(serving)` has the
                                    # shard app's handler; None for what each app builds itself (the
                                    # probes, the document, the explorer, the audit log, the account's)
    handler: str | None = None      # its handler's name in that table when endpoints share one; default `action`
    head: bool = True               # a GET answers HEAD too (aiohttp's); False where it must not

    @property
    def full_path(self) -> str:
        return self.prefix + self.path


E = Endpoint


def served_in(module: str, *endpoints: Endpoint) -> tuple[Endpoint, ...]:
    """`endpoints`, answered in the shard app by the handlers `module`'s `shard_handlers` makes."""
    return tuple(replace(e, module=module) for e in endpoints)

# Iceberg's REST catalog (catalog/protocols/iceberg/): the spec's operations as (method, path under
# /v1/{prefix}, the spec's operationId), each served under both bases, with the warehouse prefix
# catalogs/{catalog} and without one; GET /v1/config besides. Their operationIds in shardcat's
# document: the base's word, the spec's operationId, and "NoWarehouse" without the prefix
# (icebergLoadTable, icebergRestLoadTableNoWarehouse); the spec's operationId names the handler.
ICEBERG_BASES = {"/iceberg/v1": "iceberg", "/iceberg-rest/v1": "icebergRest"}
ICEBERG_OPERATIONS = (
    ("GET", "/namespaces", "listNamespaces"), ("POST", "/namespaces", "createNamespace"),
    ("GET", "/namespaces/{namespace}", "loadNamespaceMetadata"),
    ("HEAD", "/namespaces/{namespace}", "namespaceExists"), ("DELETE", "/namespaces/{namespace}", "dropNamespace"),
    ("POST", "/namespaces/{namespace}/properties", "updateProperties"),
    ("GET", "/namespaces/{namespace}/tables", "listTables"), ("POST", "/namespaces/{namespace}/tables", "createTable"),
    ("POST", "/namespaces/{namespace}/register", "registerTable"),
    ("POST", "/namespaces/{namespace}/register-view", "registerView"),
    ("GET", "/namespaces/{namespace}/tables/{table}", "loadTable"),
    ("HEAD", "/namespaces/{namespace}/tables/{table}", "tableExists"),
    ("POST", "/namespaces/{namespace}/tables/{table}", "updateTable"),
    ("DELETE", "/namespaces/{namespace}/tables/{table}", "dropTable"),
    ("GET", "/namespaces/{namespace}/tables/{table}/credentials", "loadCredentials"),
    ("POST", "/namespaces/{namespace}/tables/{table}/metrics", "reportMetrics"),
    ("POST", "/tables/rename", "renameTable"), ("POST", "/transactions/commit", "commitTransaction"),
    ("GET", "/namespaces/{namespace}/views", "listViews"), ("POST", "/namespaces/{namespace}/views", "createView"),
    ("GET", "/namespaces/{namespace}/views/{view}", "loadView"),
    ("HEAD", "/namespaces/{namespace}/views/{view}", "viewExists"),
    ("POST", "/namespaces/{namespace}/views/{view}", "replaceView"),
    ("DELETE", "/namespaces/{namespace}/views/{view}", "dropView"), ("POST", "/views/rename", "renameView"),
    ("POST", "/namespaces/{namespace}/tables/{table}/unregister", "unregisterTable"),
    ("POST", "/namespaces/{namespace}/tables/{table}/plan", "planTableScan"),
    ("GET", "/namespaces/{namespace}/tables/{table}/plan/{plan_id}", "fetchPlanningResult"),
    ("DELETE", "/namespaces/{namespace}/tables/{table}/plan/{plan_id}", "cancelPlanning"),
    ("POST", "/namespaces/{namespace}/tables/{table}/tasks", "fetchScanTasks"),
    ("POST", "/namespaces/{namespace}/tables/{table}/sign", "signRequest"),
    ("GET", "/namespaces/{namespace}/functions", "listFunctions"),
    ("GET", "/namespaces/{namespace}/functions/{function}", "loadFunction"),
)
ICEBERG_PREFIXES = {"/catalogs/{catalog}": "", "": "NoWarehouse"}     # with a warehouse (its catalog) and without


def _iceberg() -> tuple[Endpoint, ...]:
    out = []
    for base, word in ICEBERG_BASES.items():
        out.append(E(SHARD, "GET", f"{base}/config", f"{word}GetConfig", handler="getConfig", head=False))
        for method, path, operation in ICEBERG_OPERATIONS:
            out += [E(SHARD, method, f"{base}{prefix}{path}", word + operation[0].upper() + operation[1:] + suffix,
                      handler=operation) for prefix, suffix in ICEBERG_PREFIXES.items()]
    return tuple(out)


ENDPOINTS: tuple[Endpoint, ...] = (
    E(EVERY, "GET", "/healthz", "healthz", prefix="", public=True, audited=False),
    E(EVERY, "GET", "/livez", "livez", prefix="", public=True, audited=False),
    E(EVERY, "GET", "/readyz", "readyz", prefix="", public=True, audited=False),
    E(EVERY, "GET", "/metrics", "metrics", prefix="", public=True, audited=False),
    E(EVERY, "GET", "/", "explorer", prefix="", public=True, audited=False),    # the catalog explorer (web/explorer.py)
    E(EVERY, "GET", "/explorer/{file}", "explorerFile", prefix="", public=True, audited=False),
    E(EVERY, "GET", "/favicon.ico", "favicon", prefix="", public=True, audited=False),
    E(EVERY, "GET", "/openapi.json", "getOpenApiJson", public=True),     # the OpenAPI document (shardcat/openapi/)
    E(EVERY, "GET", "/openapi.yaml", "getOpenApiYaml", public=True),
    *served_in("serving.app",
        E(SHARD, "GET", "/metastores/{id}", "getMetastore", securable="METASTORE"),
        E(SHARD, "PATCH", "/metastores/{id}", "updateMetastore", securable="METASTORE"),
        E(SHARD, "DELETE", "/metastores/{id}", "deleteMetastore", securable="METASTORE"),
        E(SHARD, "GET", "/metastore_summary", "summary", securable="METASTORE"),
        E(SHARD, "POST", "/staging-tables", "createStagingTable", securable="TABLE"),
        E(SHARD, "POST", "/table-summaries", "listTableSummaries", securable="SCHEMA", read_only=True),
        E(SHARD, "POST", "/catalogs", "createCatalog", securable="CATALOG", fast=True),
        E(SHARD, "GET", "/catalogs", "listCatalogs", securable="CATALOG", fast=True),
        E(SHARD, "GET", "/catalogs/{name}", "getCatalog", securable="CATALOG", fast=True),
        E(SHARD, "PATCH", "/catalogs/{name}", "updateCatalog", securable="CATALOG"),
        E(SHARD, "DELETE", "/catalogs/{name}", "deleteCatalog", securable="CATALOG"),
        E(SHARD, "POST", "/schemas", "createSchema", securable="SCHEMA", fast=True),
        E(SHARD, "GET", "/schemas", "listSchemas", securable="SCHEMA", fast=True),
        E(SHARD, "GET", "/schemas/{full_name}", "getSchema", securable="SCHEMA", fast=True),
        E(SHARD, "PATCH", "/schemas/{full_name}", "updateSchema", securable="SCHEMA"),
        E(SHARD, "DELETE", "/schemas/{full_name}", "deleteSchema", securable="SCHEMA"),
        E(SHARD, "POST", "/tables", "createTable", securable="TABLE", fast=True),
        E(SHARD, "GET", "/tables", "listTables", securable="TABLE", fast=True),
        E(SHARD, "GET", "/tables/{full_name}", "getTable", securable="TABLE", fast=True),
        E(SHARD, "PATCH", "/tables/{full_name}", "updateTable", securable="TABLE"),
        E(SHARD, "DELETE", "/tables/{full_name}", "deleteTable", securable="TABLE"),
        E(SHARD, "POST", "/volumes", "createVolume", securable="VOLUME", fast=True),
        E(SHARD, "GET", "/volumes", "listVolumes", securable="VOLUME", fast=True),
        E(SHARD, "GET", "/volumes/{name}", "getVolume", securable="VOLUME", fast=True),
        E(SHARD, "PATCH", "/volumes/{name}", "updateVolume", securable="VOLUME"),
        E(SHARD, "DELETE", "/volumes/{name}", "deleteVolume", securable="VOLUME"),
    ),
    *served_in("catalog.tree.functions",
        E(SHARD, "POST", "/functions", "createFunction", securable="FUNCTION"),
        E(SHARD, "GET", "/functions", "listFunctions", securable="FUNCTION"),
        E(SHARD, "GET", "/functions/{name}", "getFunction", securable="FUNCTION"),
        E(SHARD, "PATCH", "/functions/{name}", "updateFunction", securable="FUNCTION"),
        E(SHARD, "DELETE", "/functions/{name}", "deleteFunction", securable="FUNCTION"),
    ),
    *served_in("catalog.tree.models",
        E(SHARD, "POST", "/models", "createRegisteredModel", securable="REGISTERED_MODEL"),
        E(SHARD, "GET", "/models", "listRegisteredModels", securable="REGISTERED_MODEL"),
        E(SHARD, "GET", "/models/{full_name}", "getRegisteredModel", securable="REGISTERED_MODEL"),
        E(SHARD, "PATCH", "/models/{full_name}", "updateRegisteredModel", securable="REGISTERED_MODEL"),
        E(SHARD, "DELETE", "/models/{full_name}", "deleteRegisteredModel", securable="REGISTERED_MODEL"),
        E(SHARD, "POST", "/models/versions", "createModelVersion", securable="REGISTERED_MODEL"),
        E(SHARD, "GET", "/models/{full_name}/versions", "listModelVersions", securable="REGISTERED_MODEL"),
        E(SHARD, "GET", "/models/{full_name}/versions/{version}", "getModelVersion", securable="REGISTERED_MODEL"),
        E(SHARD, "PATCH", "/models/{full_name}/versions/{version}", "updateModelVersion", securable="REGISTERED_MODEL"),
        E(SHARD, "DELETE", "/models/{full_name}/versions/{version}", "deleteModelVersion", securable="REGISTERED_MODEL"),
        E(SHARD, "PATCH", "/models/{full_name}/versions/{version}/finalize", "finalizeModelVersion", securable="REGISTERED_MODEL"),
        E(SHARD, "GET", "/models/{full_name}/aliases/{alias}", "getModelVersionByAlias", securable="REGISTERED_MODEL"),
        E(SHARD, "PUT", "/models/{full_name}/aliases/{alias}", "setRegisteredModelAlias", securable="REGISTERED_MODEL"),
        E(SHARD, "DELETE", "/models/{full_name}/aliases/{alias}", "deleteRegisteredModelAlias", securable="REGISTERED_MODEL"),
        E(SHARD, "POST", "/temporary-model-version-credentials", "generateTemporaryModelVersionCredentials"),
    ),
    *served_in("serving.app",
        E(SHARD, "POST", "/resolve", "resolve", read_only=True, fast=True),
        E(SHARD, "GET", "/resolve/stats", "resolveStats"),
    ),
    *served_in("catalog.tree.storage",
        E(SHARD, "POST", "/credentials", "createCredential", securable="CREDENTIAL"),
        E(SHARD, "GET", "/credentials", "listCredentials", securable="CREDENTIAL"),
        E(SHARD, "GET", "/credentials/{name}", "getCredential", securable="CREDENTIAL"),
        E(SHARD, "PATCH", "/credentials/{name}", "updateCredential", securable="CREDENTIAL"),
        E(SHARD, "DELETE", "/credentials/{name}", "deleteCredential", securable="CREDENTIAL"),
        E(SHARD, "POST", "/storage-credentials", "createStorageCredential", securable="STORAGE_CREDENTIAL"),
        E(SHARD, "GET", "/storage-credentials", "listStorageCredentials", securable="STORAGE_CREDENTIAL"),
        E(SHARD, "GET", "/storage-credentials/{name}", "getStorageCredential", securable="STORAGE_CREDENTIAL"),
        E(SHARD, "PATCH", "/storage-credentials/{name}", "updateStorageCredential", securable="STORAGE_CREDENTIAL"),
        E(SHARD, "DELETE", "/storage-credentials/{name}", "deleteStorageCredential", securable="STORAGE_CREDENTIAL"),
        E(SHARD, "POST", "/external-locations", "createExternalLocation", securable="EXTERNAL_LOCATION"),
        E(SHARD, "GET", "/external-locations", "listExternalLocations", securable="EXTERNAL_LOCATION"),
        E(SHARD, "GET", "/external-locations/{name}", "getExternalLocation", securable="EXTERNAL_LOCATION"),
        E(SHARD, "PATCH", "/external-locations/{name}", "updateExternalLocation", securable="EXTERNAL_LOCATION"),
        E(SHARD, "DELETE", "/external-locations/{name}", "deleteExternalLocation", securable="EXTERNAL_LOCATION"),
        E(SHARD, "GET", "/files", "listFiles", securable="EXTERNAL_LOCATION"),
    ),
    *served_in("catalog.tree.connections",     # federation: docs/federation.md
        E(SHARD, "POST", "/connections", "createConnection", securable="CONNECTION"),
        E(SHARD, "GET", "/connections", "listConnections", securable="CONNECTION"),
        E(SHARD, "GET", "/connections/{name}", "getConnection", securable="CONNECTION"),
        E(SHARD, "PATCH", "/connections/{name}", "updateConnection", securable="CONNECTION"),
        E(SHARD, "DELETE", "/connections/{name}", "deleteConnection", securable="CONNECTION"),
    ),
    *served_in("catalog.tree.foreign",
        E(SHARD, "POST", "/shardcat/foreign-catalogs/{name}/refresh", "refreshForeignCatalog", securable="CATALOG"),
    ),
    *served_in("catalog.features.credentials",
        E(SHARD, "POST", "/temporary-table-credentials", "generateTemporaryTableCredentials"),
        E(SHARD, "POST", "/temporary-volume-credentials", "generateTemporaryVolumeCredentials"),
        E(SHARD, "POST", "/temporary-path-credentials", "generateTemporaryPathCredentials"),
    ),
    *served_in("catalog.features.sharing",
        E(SHARD, "POST", "/shares", "createShare", securable="SHARE"),
        E(SHARD, "GET", "/shares", "listShares", securable="SHARE"),
        E(SHARD, "GET", "/shares/{name}", "getShare", securable="SHARE"),
        E(SHARD, "PATCH", "/shares/{name}", "updateShare", securable="SHARE"),
        E(SHARD, "DELETE", "/shares/{name}", "deleteShare", securable="SHARE"),
        E(SHARD, "GET", "/shares/{name}/permissions", "getSharePermissions", securable="SHARE"),
        E(SHARD, "PATCH", "/shares/{name}/permissions", "updateSharePermissions", securable="SHARE"),
        E(SHARD, "POST", "/recipients", "createRecipient", securable="RECIPIENT"),
        E(SHARD, "GET", "/recipients", "listRecipients", securable="RECIPIENT"),
        E(SHARD, "GET", "/recipients/{name}", "getRecipient", securable="RECIPIENT"),
        E(SHARD, "PATCH", "/recipients/{name}", "updateRecipient", securable="RECIPIENT"),
        E(SHARD, "DELETE", "/recipients/{name}", "deleteRecipient", securable="RECIPIENT"),
        E(SHARD, "POST", "/recipients/{name}/rotate-token", "rotateRecipientToken", securable="RECIPIENT"),
        E(SHARD, "GET", "/recipients/{name}/share-permissions", "getRecipientSharePermissions", securable="RECIPIENT"),
        E(SHARD, "POST", "/providers", "createProvider", securable="PROVIDER"),
        E(SHARD, "GET", "/providers", "listProviders", securable="PROVIDER"),
        E(SHARD, "GET", "/providers/{name}", "getProvider", securable="PROVIDER"),
        E(SHARD, "PATCH", "/providers/{name}", "updateProvider", securable="PROVIDER"),
        E(SHARD, "DELETE", "/providers/{name}", "deleteProvider", securable="PROVIDER"),
        E(SHARD, "GET", "/providers/{name}/shares", "listProviderShares", securable="PROVIDER"),
    ),
    # The Delta Sharing protocol (catalog/protocols/delta_sharing/): recipients' tokens, not the API's.
    *served_in("catalog.protocols.delta_sharing.server",
        E(SHARD, "GET", "/shares", "deltaSharingListShares", securable="SHARE", prefix=SHARING, public=True),
        E(SHARD, "GET", "/shares/{share}", "deltaSharingGetShare", securable="SHARE", prefix=SHARING, public=True),
        E(SHARD, "GET", "/shares/{share}/schemas", "deltaSharingListSchemas", securable="SHARE", prefix=SHARING, public=True),
        E(SHARD, "GET", "/shares/{share}/schemas/{schema}/tables", "deltaSharingListTables", securable="SHARE",
          prefix=SHARING, public=True),
        E(SHARD, "GET", "/shares/{share}/all-tables", "deltaSharingListAllTables", securable="SHARE", prefix=SHARING, public=True),
        E(SHARD, "GET", SHARED_TABLE, "deltaSharingGetTableVersionHead", securable="TABLE", prefix=SHARING, public=True),
        E(SHARD, "GET", SHARED_TABLE + "/version", "deltaSharingGetTableVersion", securable="TABLE", prefix=SHARING,
          public=True, head=False),
        E(SHARD, "GET", SHARED_TABLE + "/metadata", "deltaSharingGetTableMetadata", securable="TABLE",
          prefix=SHARING, public=True, head=False),
        E(SHARD, "POST", SHARED_TABLE + "/query", "deltaSharingQueryTable", securable="TABLE", read_only=True,
          prefix=SHARING, public=True),
        E(SHARD, "GET", SHARED_TABLE + "/changes", "deltaSharingQueryTableChanges", securable="TABLE",
          prefix=SHARING, public=True, head=False),
        E(SHARD, "GET", "/files/{token}/{name}", "deltaSharingGetFile", securable="TABLE", prefix=SHARING_PREFIX, public=True),
    ),
    *served_in("catalog.protocols.delta_sharing.activation",
        E(SHARD, "GET", "/public/data_sharing_activation/{activation_url}", "retrieveRecipientProfile",
          securable="RECIPIENT", public=True, head=False),
        E(SHARD, "GET", "/public/data_sharing_activation_info/{activation_url}", "getActivationUrlInfo",
          securable="RECIPIENT", public=True, head=False),
    ),
    *served_in("catalog.protocols.delta_commits",
        E(SHARD, "POST", "/delta/preview/commits", "commit", fast=True),
        E(SHARD, "GET", "/delta/preview/commits", "getCommits"),
    ),
    *served_in("catalog.protocols.iceberg.http", *_iceberg()),
    # The UC Delta API (catalog/protocols/delta_api.py), its actions the spec's operationIds; the handlers name the table.
    *served_in("catalog.protocols.delta_api",
        E(SHARD, "GET", "/delta/v1/config", "getDeltaConfig", head=False),
        E(SHARD, "POST", "/delta/v1/catalogs/{catalog}/schemas/{schema}/staging-tables", "createDeltaStagingTable"),
        E(SHARD, "POST", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables", "createDeltaTable"),
        E(SHARD, "GET", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables", "listDeltaTables", head=False),
        E(SHARD, "GET", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}", "loadDeltaTable", head=False),
        E(SHARD, "HEAD", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}", "deltaTableExists"),
        E(SHARD, "POST", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}", "updateDeltaTable"),
        E(SHARD, "DELETE", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}", "deleteDeltaTable"),
        E(SHARD, "POST", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}/rename", "renameDeltaTable"),
        E(SHARD, "POST", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}/metrics", "reportDeltaMetrics"),
        E(SHARD, "GET", "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}/credentials",
          "getDeltaTableCredentials", head=False),
        E(SHARD, "GET", "/delta/v1/staging-tables/{table_id}/credentials", "getDeltaStagingTableCredentials", head=False),
        E(SHARD, "GET", "/delta/v1/temporary-path-credentials", "getDeltaTemporaryPathCredentials", head=False),
    ),
    *served_in("catalog.features.search",
        E(SHARD, "GET", "/shardcat/search", "search"),
    ),
    *served_in("catalog.features.queries",
        E(SHARD, "POST", "/shardcat/query", "queryPaths", read_only=True),
    ),
    *served_in("catalog.features.tags",
        E(SHARD, "POST", "/entity-tag-assignments", "createEntityTagAssignment"),
        E(SHARD, "GET", "/entity-tag-assignments/{entity_type}/{entity_name}/tags", "listEntityTagAssignments"),
        E(SHARD, "GET", "/entity-tag-assignments/{entity_type}/{entity_name}/tags/{tag_key}", "getEntityTagAssignment"),
        E(SHARD, "PATCH", "/entity-tag-assignments/{entity_type}/{entity_name}/tags/{tag_key}",
          "updateEntityTagAssignment"),
        E(SHARD, "DELETE", "/entity-tag-assignments/{entity_type}/{entity_name}/tags/{tag_key}",
          "deleteEntityTagAssignment"),
        E(SHARD, "POST", "/tag-policies", "createTagPolicy"),
        E(SHARD, "GET", "/tag-policies", "listTagPolicies"),
        E(SHARD, "GET", "/tag-policies/{tag_key}", "getTagPolicy"),
        E(SHARD, "PATCH", "/tag-policies/{tag_key}", "updateTagPolicy"),
        E(SHARD, "DELETE", "/tag-policies/{tag_key}", "deleteTagPolicy"),
    ),
    *served_in("catalog.features.policies",
        E(SHARD, "POST", "/policies", "createPolicy"),
        E(SHARD, "GET", "/policies/{on_securable_type}/{on_securable_fullname}", "listPolicies"),
        E(SHARD, "GET", "/policies/{on_securable_type}/{on_securable_fullname}/{name}", "getPolicy"),
        E(SHARD, "PATCH", "/policies/{on_securable_type}/{on_securable_fullname}/{name}", "updatePolicy"),
        E(SHARD, "DELETE", "/policies/{on_securable_type}/{on_securable_fullname}/{name}", "deletePolicy"),
    ),
    *served_in("catalog.features.changes",
        E(SHARD, "GET", "/shardcat/changes", "listChanges"),
    ),
    # Versioned metadata (catalog/features/versions.py, docs/versions.md)
    *served_in("catalog.features.versions",
        E(SHARD, "GET", "/shardcat/history/{securable_type}/{full_name}", "getAssetHistory"),
        E(SHARD, "GET", "/shardcat/versions/settings", "getVersionSettings"),
        E(SHARD, "PATCH", "/shardcat/versions/settings", "updateVersionSettings"),
        E(SHARD, "GET", "/shardcat/dropped", "listDroppedAssets"),
        E(SHARD, "POST", "/shardcat/dropped/{id}/undrop", "undropAsset"),
        E(SHARD, "DELETE", "/shardcat/dropped/{id}", "purgeDroppedAsset"),
    ),
    *served_in("catalog.features.snapshots",
        E(SHARD, "POST", "/shardcat/snapshots", "createSnapshot"),
        E(SHARD, "GET", "/shardcat/snapshots", "listSnapshots"),
        E(SHARD, "GET", "/shardcat/snapshots/{name}", "getSnapshot"),
        E(SHARD, "DELETE", "/shardcat/snapshots/{name}", "deleteSnapshot"),
        E(SHARD, "POST", "/shardcat/snapshots/{name}/restore", "restoreSnapshot"),
        E(SHARD, "POST", "/shardcat/clones", "createClone"),
        E(SHARD, "POST", "/shardcat/vacuum", "vacuumTable"),
    ),
    *served_in("catalog.protocols.transactions",
        E(SHARD, "POST", "/shardcat/transactions", "applyTransaction"),
    ),
    *served_in("catalog.features.events",
        E(SHARD, "POST", "/shardcat/webhooks", "createWebhook"),
        E(SHARD, "GET", "/shardcat/webhooks", "listWebhooks"),
        E(SHARD, "DELETE", "/shardcat/webhooks/{id}", "deleteWebhook"),
        E(SHARD, "GET", "/shardcat/events", "listEvents"),
    ),
    *served_in("catalog.features.system",
        E(SHARD, "POST", "/shardcat/system-tables", "enableSystemTables"),
        E(SHARD, "GET", "/shardcat/system-tables", "getSystemTables"),
        E(SHARD, "POST", "/shardcat/system-tables/refresh", "refreshSystemTables"),
    ),
    *served_in("catalog.features.monitors",
        E(SHARD, "GET", "/shardcat/monitors/alerts", "listMonitorAlerts", securable="TABLE"),
        E(SHARD, "POST", "/shardcat/monitors/check", "checkMonitors"),
    ),
    *served_in("catalog.features.maintenance",
        E(SHARD, "GET", "/shardcat/maintenance/policies", "getMaintenancePolicy", securable="TABLE"),
        E(SHARD, "PUT", "/shardcat/maintenance/policies", "setMaintenancePolicy"),
        E(SHARD, "POST", "/shardcat/maintenance/runs", "runMaintenance", securable="TABLE"),
        E(SHARD, "GET", "/shardcat/maintenance/runs", "listMaintenanceRuns", securable="TABLE"),
    ),
    *served_in("catalog.features.lineage",
        E(SHARD, "POST", "/shardcat/lineage", "reportLineage"),
        E(SHARD, "GET", "/shardcat/lineage", "getLineage"),
    ),
    *served_in("catalog.protocols.openlineage",
        E(SHARD, "POST", "/openlineage/api/v1/lineage", "reportOpenLineage"),
        # the client's URL without its trailing slash
        E(SHARD, "POST", "/api/v1/lineage", "reportOpenLineageNoSlash", handler="reportOpenLineage"),
        E(SHARD, "GET", "/lineage-tracking/table-lineage", "getTableLineage", prefix="/api/2.0"),
        E(SHARD, "GET", "/lineage-tracking/column-lineage", "getColumnLineage", prefix="/api/2.0"),
    ),
    *served_in("catalog.protocols.workspace_settings",
        E(SHARD, "GET", "/settings/types/default_namespace_ws/names/default", "getDefaultNamespaceSetting",
          prefix="/api/2.0"),
    ),
    *served_in("catalog.features.samples",
        E(SHARD, "GET", "/shardcat/sample/{full_name}", "getTableSample", securable="TABLE"),
    ),
    *served_in("catalog.features.access_requests",
        E(SHARD, "POST", "/shardcat/access-requests", "createAccessRequest"),
        E(SHARD, "GET", "/shardcat/access-requests", "listAccessRequests"),
        E(SHARD, "PATCH", "/shardcat/access-requests/{id}", "decideAccessRequest"),
    ),
    E(EVERY, "GET", "/shardcat/audit", "listAuditEvents"),
    *served_in("governance.grants",
        E(SHARD, "GET", "/permissions/{securable_type}/{full_name}", "get"),
        E(SHARD, "PATCH", "/permissions/{securable_type}/{full_name}", "update"),
        E(SHARD, "PUT", "/permissions/{securable_type}/{full_name}", "replacePermissions"),
        E(SHARD, "GET", "/effective-permissions/{securable_type}/{full_name}", "getEffectivePermissions"),
        E(SHARD, "POST", "/shardcat/authorize", "authorize", read_only=True),
    ),
    E(ACCOUNT, "GET", "/metastores", "listMetastores", securable="METASTORE"),
    E(ACCOUNT, "POST", "/metastores", "createMetastore", securable="METASTORE"),
    E(ACCOUNT, "PUT", "/workspaces/{workspace_id}/metastore", "assignMetastore"),
    E(ACCOUNT, "PATCH", "/workspaces/{workspace_id}/metastore", "updateMetastoreAssignment"),
    E(ACCOUNT, "DELETE", "/workspaces/{workspace_id}/metastore", "unassignMetastore"),
    E(ACCOUNT, "GET", "/shardcat/databases", "listDatabases"),
    E(ACCOUNT, "POST", "/shardcat/metastores/{metastore}/move", "moveMetastore", securable="METASTORE"),
    E(ACCOUNT, "GET", "/user-info/me", "getCurrentUser"),
    E(ACCOUNT, "GET", "/user-info/my-groups", "getCurrentUserGroups"),
    E(ACCOUNT, "GET", "/scim2/Me", "scimMe", prefix=CONTROL),
    E(ACCOUNT, "POST", "/auth/tokens", "createToken", prefix=CONTROL),
    E(ACCOUNT, "GET", "/auth/tokens", "listTokens", prefix=CONTROL),
    E(ACCOUNT, "GET", "/auth/tokens/{token_id}", "getToken", prefix=CONTROL),
    E(ACCOUNT, "DELETE", "/auth/tokens/{token_id}", "revokeToken", prefix=CONTROL),
    E(ACCOUNT, "POST", "/auth/logout", "logout", prefix=CONTROL),
    E(ACCOUNT, "GET", "/scim2/Users", "listUsers", prefix=CONTROL),
    E(ACCOUNT, "POST", "/scim2/Users", "createUser", prefix=CONTROL),
    E(ACCOUNT, "GET", "/scim2/Users/{id}", "getUser", prefix=CONTROL),
    E(ACCOUNT, "PUT", "/scim2/Users/{id}", "replaceUser", prefix=CONTROL),
    E(ACCOUNT, "PATCH", "/scim2/Users/{id}", "patchUser", prefix=CONTROL),
    E(ACCOUNT, "DELETE", "/scim2/Users/{id}", "deleteUser", prefix=CONTROL),
    E(ACCOUNT, "GET", "/scim2/Groups", "listGroups", prefix=CONTROL),
    E(ACCOUNT, "POST", "/scim2/Groups", "createGroup", prefix=CONTROL),
    E(ACCOUNT, "GET", "/scim2/Groups/{id}", "getGroup", prefix=CONTROL),
    E(ACCOUNT, "PUT", "/scim2/Groups/{id}", "replaceGroup", prefix=CONTROL),
    E(ACCOUNT, "PATCH", "/scim2/Groups/{id}", "patchGroup", prefix=CONTROL),
    E(ACCOUNT, "DELETE", "/scim2/Groups/{id}", "deleteGroup", prefix=CONTROL),
    E(ACCOUNT, "GET", "/scim2/ServicePrincipals", "listServicePrincipals", prefix=CONTROL),
    E(ACCOUNT, "POST", "/scim2/ServicePrincipals", "createServicePrincipal", prefix=CONTROL),
    E(ACCOUNT, "GET", "/scim2/ServicePrincipals/{id}", "getServicePrincipal", prefix=CONTROL),
    E(ACCOUNT, "PUT", "/scim2/ServicePrincipals/{id}", "replaceServicePrincipal", prefix=CONTROL),
    E(ACCOUNT, "PATCH", "/scim2/ServicePrincipals/{id}", "patchServicePrincipal", prefix=CONTROL),
    E(ACCOUNT, "DELETE", "/scim2/ServicePrincipals/{id}", "deleteServicePrincipal", prefix=CONTROL),
    E(ROUTER, "GET", "/shardcat/routing", "getRouting"),
    E(ROUTER, "POST", "/shardcat/nodes/{node_id}/drain", "drainNode"),
)


# POST with a form: the RFC 8693 token exchange, authenticated by the identity provider's token it carries
TOKEN_EXCHANGE_PATH = CONTROL + "/auth/tokens"


def served_by(app: str) -> list[Endpoint]:
    """The endpoints an app serves ("shard", "account", "router"), in registry order."""
    return [e for e in ENDPOINTS if e.app in (app, EVERY)]


def modules(app: str) -> list[str]:
    """The modules (under shardcat) whose `shard_handlers` give an app's handlers, in registry order."""
    return list(dict.fromkeys(e.module for e in served_by(app) if e.module is not None))


_BY_ROUTE = {(e.method, e.full_path): e for e in ENDPOINTS}
_BY_OPERATION = {e.action: e for e in ENDPOINTS}


def operation(operation_id: str) -> Endpoint:
    """The endpoint of an operationId (each names one: tests/unit/web/test_declared_once.py)."""
    return _BY_OPERATION[operation_id]


def endpoint(method: str, full_path: str) -> Endpoint | None:
    """The endpoint of a route pattern (as the app registered it), or None."""
    return _BY_ROUTE.get((method, full_path))


def _pattern(e: Endpoint) -> re.Pattern:
    return re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(e.full_path)))


_READ_ONLY_POSTS = [(e.full_path, _pattern(e)) for e in ENDPOINTS if e.read_only]


@functools.lru_cache(maxsize=1024)
def read_only(method: str, path: str) -> bool:
    """Whether a request (a concrete path) only reads: sent again after a lost connection, it changes nothing."""
    if method in ("GET", "HEAD"):
        return True
    return any(path == full or pattern.fullmatch(path) for full, pattern in _READ_ONLY_POSTS)


def _paths(endpoints) -> tuple[frozenset[str], tuple[str, ...]]:
    """(exact paths, prefixes) of endpoints: a path with parameters covers what is under its
    part before the first one."""
    paths = [e.full_path for e in endpoints]
    return (frozenset(p for p in paths if "{" not in p),
            tuple(sorted({p.partition("{")[0] for p in paths if "{" in p})))


_PUBLIC = _paths(e for e in ENDPOINTS if e.public)
_UNAUDITED = _paths(e for e in ENDPOINTS if not e.audited)


def public(path: str) -> bool:
    """Whether a request path is an endpoint's served without a token."""
    return path in _PUBLIC[0] or (bool(_PUBLIC[1]) and path.startswith(_PUBLIC[1]))


def audited(path: str) -> bool:
    """Whether a request to this path is an audit event (probes, metrics, static files are not)."""
    return not (path in _UNAUDITED[0] or (bool(_UNAUDITED[1]) and path.startswith(_UNAUDITED[1])))


def securables() -> dict[str, str]:
    """The securable type of each first path segment under the API prefix (the audit log's fallback)."""
    out: dict[str, str] = {}
    for e in ENDPOINTS:
        if e.securable and e.prefix == PREFIX:
            out.setdefault(e.path.split("/")[1], e.securable)
    return out
