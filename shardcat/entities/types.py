"""The asset types of a metastore, each a manifest: parent, namespace, fields and their rules."""

from __future__ import annotations

from .manifest import ERR, IGN, OPT, REQ, AssetType, Field

_COMMON = (
    Field("comment", "string", OPT, OPT),
    Field("properties", "map<string,string>", OPT, OPT),
    Field("owner", "string", IGN, OPT),
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
        Field("owner", "string", IGN, OPT),
        Field("default_data_access_config_id", "string", IGN, OPT),
        Field("storage_root_credential_id", "string", IGN, OPT),
        Field("delta_sharing_enabled", "bool", IGN, OPT),
        Field("delta_sharing_scope", "string", IGN, OPT),
        Field("delta_sharing_recipient_token_lifetime_in_seconds", "int", IGN, OPT),
        Field("delta_sharing_organization_name", "string", IGN, OPT),
        Field("privilege_model_version", "string", IGN, OPT),
    ),
)
