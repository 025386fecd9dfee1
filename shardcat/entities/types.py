"""The asset types of a metastore, each a manifest: parent, namespace, fields and their rules."""

from __future__ import annotations

from .manifest import ERR, IGN, OPT, REQ, AssetType, Field

_COMMON = (
    Field("comment", "string", OPT, OPT),
    Field("properties", "map<string,string>", OPT, OPT),
    Field("owner", "principal", IGN, OPT),
)

CATALOG = AssetType(
    name="catalog", securable_type="CATALOG", parent="metastore", namespace="catalog", name_parts=1,
    id_field="id", list_key="catalogs",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        *_COMMON,
        Field("storage_root", "string", OPT, ERR),
        Field("provider_name", "string", OPT, IGN),
        Field("share_name", "string", OPT, IGN),
        Field("connection_name", "string", OPT, IGN),        # a foreign catalog's connection (federation)
        Field("options", "map<string,string>", OPT, OPT),    # a foreign catalog's options
    ),
)

SCHEMA = AssetType(
    name="schema", securable_type="SCHEMA", parent="catalog", namespace="schema", name_parts=2,
    id_field="schema_id", list_key="schemas",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("catalog_name", "string", REQ, IGN),
        *_COMMON,
        Field("storage_root", "string", OPT, ERR),
    ),
)

TABLE = AssetType(
    name="table", securable_type="TABLE", parent="schema", namespace="table", name_parts=3,
    id_field="table_id", list_key="tables",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("catalog_name", "string", REQ, IGN),
        Field("schema_name", "string", REQ, IGN),
        Field("table_type", "string", REQ, IGN),
        Field("data_source_format", "string", OPT, OPT),
        Field("columns", "list", OPT, OPT),
        Field("storage_location", "string", OPT, OPT),
        Field("storage_credential_name", "string", OPT, IGN),
        Field("view_definition", "string", OPT, OPT),
        Field("view_dependencies", "object", OPT, OPT),
        Field("sql_path", "string", OPT, OPT),
        Field("row_filter", "object", OPT, OPT),   # {function_name, input_column_names}: governance/row_filters.py
        *_COMMON,
    ),
)

# A reserved name and managed location that a later MANAGED createTable consumes.
STAGING_TABLE = AssetType(
    name="staging_table", securable_type="TABLE", parent="schema", namespace="staging_table", name_parts=3,
    id_field="id", list_key="staging_tables",
    fields=(
        Field("name", "string", REQ, IGN),
        Field("catalog_name", "string", REQ, IGN),
        Field("schema_name", "string", REQ, IGN),
    ),
)

TYPES = {t.name: t for t in (CATALOG, SCHEMA, TABLE, STAGING_TABLE)}

TABLE_TYPES = ("MANAGED", "EXTERNAL", "VIEW", "MATERIALIZED_VIEW", "STREAMING_TABLE", "METRIC_VIEW")
# The table types a query defines: each has a view_definition and no storage_location of its own.
DEFINED_BY_QUERY = ("VIEW", "MATERIALIZED_VIEW", "STREAMING_TABLE", "METRIC_VIEW")
# Of those, the ones an engine reads through their definition (a streaming table is read as a table).
VIEW_TYPES = ("VIEW", "MATERIALIZED_VIEW", "METRIC_VIEW")
DATA_SOURCE_FORMATS = (
    "DELTA", "ICEBERG", "HUDI", "PARQUET", "CSV", "JSON", "ORC", "AVRO", "TEXT", "UNITY_CATALOG",
    "DELTASHARING", "DATABRICKS_FORMAT",
)

# Metastores are not assets inside a metastore, but their fields follow the same rules.
METASTORE = AssetType(
    name="metastore", securable_type="METASTORE", parent="account", namespace="metastore", name_parts=1,
    id_field="metastore_id", list_key="metastores",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("storage_root", "string", REQ, ERR),
        Field("region", "string", OPT, IGN),
        Field("owner", "principal", IGN, OPT),
        Field("default_data_access_config_id", "string", IGN, OPT),
        Field("storage_root_credential_id", "string", IGN, OPT),
        Field("delta_sharing_enabled", "bool", IGN, OPT),
        Field("delta_sharing_scope", "string", IGN, OPT),
        Field("delta_sharing_recipient_token_lifetime_in_seconds", "int", IGN, OPT),
        Field("delta_sharing_organization_name", "string", IGN, OPT),
        Field("privilege_model_version", "string", IGN, OPT),
    ),
)


# ---- metastore-level storage and Delta Sharing objects (catalog/tree/storage.py, catalog/features/sharing.py) ----
# One "credential" namespace serves both /credentials (open-source naming) and /storage-credentials (2.1).
CREDENTIAL_KINDS = ("aws_iam_role", "azure_service_principal", "azure_managed_identity", "azure_storage_key",
                    "databricks_gcp_service_account", "gcp_service_account_key", "s3_compatible")

CREDENTIAL = AssetType(
    name="credential", securable_type="CREDENTIAL", parent="metastore", namespace="credential", name_parts=1,
    id_field="id", list_key="credentials",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("comment", "string", OPT, OPT),
        Field("owner", "principal", IGN, OPT),
        Field("purpose", "string", OPT, IGN),
        Field("read_only", "bool", OPT, OPT),
        Field("skip_validation", "bool", OPT, OPT),   # input only: nothing is validated against the cloud yet
        Field("force", "bool", IGN, OPT),             # input only
        *(Field(kind, "object", OPT, OPT) for kind in CREDENTIAL_KINDS),
    ),
)

EXTERNAL_LOCATION = AssetType(
    name="external_location", securable_type="EXTERNAL_LOCATION", parent="metastore", namespace="external_location",
    name_parts=1, id_field="id", list_key="external_locations",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("url", "string", REQ, OPT),
        Field("credential_name", "string", REQ, OPT),
        Field("comment", "string", OPT, OPT),
        Field("owner", "principal", IGN, OPT),
        Field("read_only", "bool", OPT, OPT),
        Field("skip_validation", "bool", OPT, OPT),   # input only
        Field("force", "bool", IGN, OPT),             # input only
    ),
)

SHARE = AssetType(
    name="share", securable_type="SHARE", parent="metastore", namespace="share", name_parts=1,
    id_field="id", list_key="shares",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("comment", "string", OPT, OPT),
        Field("owner", "principal", IGN, OPT),
        Field("objects", "list", IGN, OPT),    # 2.1: the whole list of shared data objects
        Field("updates", "list", IGN, OPT),    # ADD / REMOVE / UPDATE one data object each
    ),
)

RECIPIENT = AssetType(
    name="recipient", securable_type="RECIPIENT", parent="metastore", namespace="recipient", name_parts=1,
    id_field="id", list_key="recipients",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("authentication_type", "string", REQ, IGN),
        Field("comment", "string", OPT, OPT),
        Field("owner", "principal", IGN, OPT),
        Field("data_recipient_global_metastore_id", "string", OPT, IGN),
        Field("ip_access_list", "object", OPT, OPT),
        Field("properties_kv_pairs", "object", OPT, OPT),
    ),
)

PROVIDER = AssetType(
    name="provider", securable_type="PROVIDER", parent="metastore", namespace="provider", name_parts=1,
    id_field="id", list_key="providers",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("authentication_type", "string", REQ, IGN),
        Field("comment", "string", OPT, OPT),
        Field("owner", "principal", IGN, OPT),
        Field("recipient_profile_str", "string", OPT, OPT),
        Field("data_provider_global_metastore_id", "string", OPT, IGN),
    ),
)

# A connection to a foreign catalog system (federation: catalog/tree/connections.py); its
# secret options are sealed at rest and never shown (store/sealing.py).
CONNECTION_TYPES = ("HIVE_METASTORE", "GLUE", "ICEBERG_REST", "UNITY_CATALOG")
CONNECTION = AssetType(
    name="connection", securable_type="CONNECTION", parent="metastore", namespace="connection", name_parts=1,
    id_field="connection_id", list_key="connections",
    fields=(
        Field("name", "string", REQ, OPT),
        Field("new_name", "string", IGN, OPT),
        Field("connection_type", "string", REQ, IGN),
        Field("options", "map<string,string>", REQ, OPT),
        Field("comment", "string", OPT, OPT),
        Field("properties", "map<string,string>", OPT, IGN),
        Field("read_only", "bool", OPT, IGN),
        Field("owner", "principal", IGN, OPT),
    ),
)

TYPES.update({t.name: t for t in (CREDENTIAL, EXTERNAL_LOCATION, SHARE, RECIPIENT, PROVIDER, CONNECTION)})


# ---- schema-level assets: volumes, functions, registered models and their versions ----
# (rules in catalog/tree/volumes.py, catalog/tree/functions.py, catalog/tree/models.py). Each has a namespace of its
# own, as in the open-source Unity Catalog: a volume, a function and a model may share a table's name.
VOLUME = AssetType(
    name="volume", securable_type="VOLUME", parent="schema", namespace="volume", name_parts=3,
    id_field="volume_id", list_key="volumes",
    fields=(
        Field("name", "string", REQ, IGN),
        Field("new_name", "string", IGN, OPT),
        Field("catalog_name", "string", REQ, IGN),
        Field("schema_name", "string", REQ, IGN),
        Field("volume_type", "string", REQ, ERR),
        Field("storage_location", "string", OPT, ERR),
        Field("comment", "string", OPT, OPT),
        Field("owner", "principal", IGN, OPT),
    ),
)

# The body of POST /functions is {"function_info": {...}}; these are the fields inside it.
FUNCTION = AssetType(
    name="function", securable_type="FUNCTION", parent="schema", namespace="function", name_parts=3,
    id_field="function_id", list_key="functions",
    fields=(
        Field("name", "string", REQ, IGN),
        Field("catalog_name", "string", REQ, IGN),
        Field("schema_name", "string", REQ, IGN),
        Field("input_params", "object", REQ, IGN),
        Field("data_type", "string", REQ, IGN),
        Field("full_data_type", "string", REQ, IGN),
        Field("return_params", "object", OPT, IGN),
        Field("routine_body", "string", REQ, IGN),
        Field("routine_definition", "string", REQ, IGN),
        Field("routine_dependencies", "object", OPT, IGN),
        Field("parameter_style", "string", REQ, IGN),
        Field("is_deterministic", "bool", REQ, IGN),
        Field("sql_data_access", "string", REQ, IGN),
        Field("is_null_call", "bool", REQ, IGN),
        Field("security_type", "string", REQ, IGN),
        Field("specific_name", "string", REQ, IGN),
        Field("external_language", "string", OPT, IGN),
        Field("properties", "string", OPT, IGN),      # a JSON-encoded map, as the open-source API has it
        Field("comment", "string", OPT, IGN),
        Field("owner", "principal", IGN, OPT),
    ),
)

REGISTERED_MODEL = AssetType(
    name="registered_model", securable_type="REGISTERED_MODEL", parent="schema", namespace="registered_model",
    name_parts=3, id_field="id", list_key="registered_models",
    fields=(
        Field("name", "string", REQ, IGN),
        Field("new_name", "string", IGN, OPT),
        Field("catalog_name", "string", REQ, IGN),
        Field("schema_name", "string", REQ, IGN),
        Field("comment", "string", OPT, OPT),
        Field("owner", "principal", IGN, OPT),
        Field("storage_location", "string", ERR, ERR),   # always managed, under the schema's storage
    ),
)

# A model version is a child of its registered model; its full name is "<model full name>.<version>".
MODEL_VERSION = AssetType(
    name="model_version", securable_type="REGISTERED_MODEL", parent="registered_model", namespace="model_version",
    name_parts=4, id_field="id", list_key="model_versions",
    fields=(
        Field("model_name", "string", REQ, IGN),
        Field("catalog_name", "string", REQ, IGN),
        Field("schema_name", "string", REQ, IGN),
        Field("source", "string", REQ, IGN),
        Field("run_id", "string", OPT, IGN),
        Field("run_link", "string", OPT, IGN),
        Field("comment", "string", OPT, OPT),
    ),
)

TYPES.update({t.name: t for t in (VOLUME, FUNCTION, REGISTERED_MODEL, MODEL_VERSION)})
