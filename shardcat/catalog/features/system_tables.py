"""The system tables' shapes: each table of the `system` catalog, its schema (pyarrow) and its columns
as the catalog lists them, and how each is kept: appended from PostgreSQL rows after a cursor, replaced
by a fresh snapshot, or appended by the catalog's own jobs (maintenance runs, monitor alerts).

docs/system-tables.md is the reader's page; catalog/features/system.py writes them.
"""

from __future__ import annotations

import json

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")
APPENDED, SNAPSHOT, JOURNAL = "appended", "snapshot", "journal"   # how a table is kept

_UC = {pa.int64(): "LONG", pa.int32(): "INT", pa.string(): "STRING", pa.bool_(): "BOOLEAN", TS: "TIMESTAMP",
       pa.float64(): "DOUBLE"}
_JSON = {"LONG": "long", "INT": "integer", "STRING": "string", "BOOLEAN": "boolean", "TIMESTAMP": "timestamp",
         "DOUBLE": "double"}


def _s(*fields) -> pa.Schema:
    return pa.schema([pa.field(name, kind) for name, kind in fields])


S, L, B, I, D = pa.string(), pa.int64(), pa.bool_(), pa.int32(), pa.float64()

TABLES: dict[str, dict[str, tuple[str, pa.Schema, str]]] = {
    "access": {
        "audit": (APPENDED, _s(("id", L), ("event_time", TS), ("request_id", S), ("principal", S),
                               ("workspace_id", L), ("action", S), ("route", S), ("securable_type", S),
                               ("securable_name", S), ("securable_id", S), ("allowed", B), ("status", I),
                               ("error_code", S), ("message", S)),
                  "Every answered API request and access decision of this metastore (governance/audit.py)."),
        "table_lineage": (APPENDED, _s(("id", L), ("event_time", TS), ("source_id", S), ("source_type", S),
                                       ("source_name", S), ("target_id", S), ("target_name", S), ("job", S),
                                       ("principal", S)),
                          "Each reported write's (source, target) edge."),
        "column_lineage": (APPENDED, _s(("id", L), ("event_time", TS), ("source_id", S), ("source_type", S),
                                        ("source_name", S), ("source_column", S), ("target_id", S),
                                        ("target_name", S), ("target_column", S), ("job", S), ("principal", S)),
                           "Each reported write's (source column, target column) edge."),
    },
    "information_schema": {
        "catalogs": (SNAPSHOT, _s(("visible_to", S), ("catalog_name", S), ("catalog_owner", S), ("comment", S),
                                  ("created", TS)), "Catalogs, one row per principal that may see each."),
        "schemata": (SNAPSHOT, _s(("visible_to", S), ("catalog_name", S), ("schema_name", S), ("schema_owner", S),
                                  ("comment", S), ("created", TS)), "Schemas, one row per principal that may see each."),
        "tables": (SNAPSHOT, _s(("visible_to", S), ("table_catalog", S), ("table_schema", S), ("table_name", S),
                                ("table_type", S), ("data_source_format", S), ("table_owner", S), ("comment", S),
                                ("created", TS)), "Tables and views, one row per principal that may see each."),
        "columns": (SNAPSHOT, _s(("visible_to", S), ("table_catalog", S), ("table_schema", S), ("table_name", S),
                                 ("column_name", S), ("ordinal_position", I), ("data_type", S), ("is_nullable", S),
                                 ("comment", S)), "Columns of the tables each principal may see."),
        "views": (SNAPSHOT, _s(("visible_to", S), ("table_catalog", S), ("table_schema", S), ("table_name", S),
                               ("view_definition", S)), "Views and their SQL."),
        "volumes": (SNAPSHOT, _s(("visible_to", S), ("volume_catalog", S), ("volume_schema", S), ("volume_name", S),
                                 ("volume_type", S), ("volume_owner", S), ("storage_location", S), ("comment", S)),
                    "Volumes, one row per principal that may see each."),
        "privileges": (SNAPSHOT, _s(("visible_to", S), ("grantee", S), ("securable_type", S), ("securable_name", S),
                                    ("privilege_type", S)), "Grants on the securables each principal may see."),
    },
    "maintenance": {
        "runs": (JOURNAL, _s(("run_id", S), ("table_name", S), ("table_id", S), ("format", S), ("action", S),
                             ("trigger", S), ("status", S), ("attempt", I), ("started", TS), ("finished", TS),
                             ("files_before", L), ("files_after", L), ("node", S), ("detail", S)),
                 "Every maintenance run (catalog/features/maintenance.py): what ran where, and its outcome."),
    },
    "monitoring": {
        "alerts": (JOURNAL, _s(("alert_id", S), ("table_name", S), ("table_id", S), ("kind", S), ("raised", TS),
                               ("expected", S), ("observed", S), ("detail", S)),
                   "Freshness and volume alerts of the monitors (catalog/features/monitors.py)."),
    },
}
INFORMATION_SCHEMA = "information_schema"
FILTER_FUNCTION = "system.information_schema.visible_to_caller"
FILTER_BODY = "visible_to = current_user()"


def uc_columns(schema: pa.Schema) -> list[dict]:
    """A schema's columns as createTable takes them."""
    out = []
    for i, f in enumerate(schema):
        name = _UC[f.type]
        out.append({"name": f.name, "type_name": name, "type_text": "bigint" if name == "LONG" else name.lower(),
                    "type_json": json.dumps({"name": f.name, "type": _JSON[name], "nullable": True, "metadata": {}}),
                    "position": i, "nullable": True})
    return out


def filter_function(schema: str = INFORMATION_SCHEMA) -> dict:
    """createFunction's body for information_schema's row filter on the caller."""
    return {"function_info": {
        "name": "visible_to_caller", "catalog_name": "system", "schema_name": schema,
        "data_type": "BOOLEAN", "full_data_type": "boolean",
        "input_params": {"parameters": [{"name": "visible_to", "type_text": "string", "type_name": "STRING",
                                         "position": 0, "type_json": json.dumps(
                                             {"name": "visible_to", "type": "string", "nullable": True,
                                              "metadata": {}})}]},
        "routine_body": "SQL", "routine_definition": FILTER_BODY, "parameter_style": "S", "is_deterministic": True,
        "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER",
        "specific_name": "visible_to_caller",
        "comment": "information_schema's row filter: the rows of the principal the engine reads for."}}


def arrow(kind_schema: pa.Schema, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=kind_schema)
