"""Table schemas between the UC Delta API, the Delta log and Unity Catalog columns (pure, no I/O).

The UC Delta API (`api/delta.yaml`) carries a table's schema as a DeltaStructType: primitive types
as bare strings ("long", "decimal(10,2)"), complex types as objects with kebab-case keys
("element-type", "contains-null", "key-type", "value-type", "value-contains-null"). The Delta log
(`metaData.schemaString`) spells the same types in camelCase; Unity Catalog keeps a table's columns
as ColumnInfo (`type_name`, `type_text`, `type_json` = the Delta log's field JSON, `partition_index`).
A mistake is an INVALID_PARAMETER_VALUE naming the field.
"""

from __future__ import annotations

import json
import re

from ..errors import invalid

PRIMITIVES = {
    "boolean": "BOOLEAN", "byte": "BYTE", "short": "SHORT", "integer": "INT", "long": "LONG", "float": "FLOAT",
    "double": "DOUBLE", "string": "STRING", "binary": "BINARY", "date": "DATE", "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ", "variant": "VARIANT", "void": "NULL",
}
_SQL = {"byte": "tinyint", "short": "smallint", "integer": "int", "long": "bigint"}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
# The keys of complex types: API (kebab-case) -> Delta log (camelCase).
_KEYS = {"element-type": "elementType", "contains-null": "containsNull", "key-type": "keyType",
         "value-type": "valueType", "value-contains-null": "valueContainsNull"}
_API_KEYS = {v: k for k, v in _KEYS.items()}


def _decimal(t: str, where: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t)
    if m is None:
        return None
    precision, scale = int(m.group(1)), int(m.group(2))
    if not 1 <= precision <= 38 or not 0 <= scale <= precision:
        raise invalid(f"{where}: {t} needs 1 <= precision <= 38 and 0 <= scale <= precision.")
    return precision, scale


def to_log_type(t, where: str):
    """A DeltaDataType (API) as the Delta log writes it."""
    if isinstance(t, str):
        if t in PRIMITIVES or _decimal(t, where):
            return t
        raise invalid(f"{where}: unknown Delta type {t!r:.60}.")
    if not isinstance(t, dict) or not isinstance(t.get("type"), str):
        raise invalid(f"{where}: a type is a type name or an object with a 'type'.")
    kind = t["type"]
    if kind == "struct":
        return {"type": "struct", "fields": log_fields(t.get("fields"), where)}
    if kind in ("array", "map"):
        needed = ("element-type", "contains-null") if kind == "array" else ("key-type", "value-type",
                                                                           "value-contains-null")
        out = {"type": kind}
        for key in needed:
            if key not in t:
                raise invalid(f"{where}: a {kind} type needs '{key}'.")
            value = t[key]
            if key.endswith("null"):
                if not isinstance(value, bool):
                    raise invalid(f"{where}.{key} must be true or false.")
                out[_KEYS[key]] = value
            else:
                out[_KEYS[key]] = to_log_type(value, f"{where}.{key}")
        return out
    if kind in PRIMITIVES or _decimal(kind, where):   # a primitive written as an object
        return kind
    raise invalid(f"{where}: unknown Delta type {kind!r:.60}.")


def log_fields(fields, where: str = "columns") -> list[dict]:
    """A DeltaStructType's fields (API) as Delta log fields; names unique regardless of case."""
    if not isinstance(fields, list):
        raise invalid(f"{where}.fields must be a list of fields.")
    out, seen = [], set()
    for i, f in enumerate(fields):
        w = f"{where}.fields[{i}]"
        if not isinstance(f, dict):
            raise invalid(f"{w} must be an object.")
        name = f.get("name")
        if not isinstance(name, str) or not name:
            raise invalid(f"{w}.name must be a non-empty string.")
        if name.lower() in seen:
            raise invalid(f"{w}: column '{name}' appears more than once (names compare case-insensitively).")
        seen.add(name.lower())
        nullable = f.get("nullable", True)
        if not isinstance(nullable, bool):
            raise invalid(f"{w}.nullable must be true or false.")
        metadata = f.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise invalid(f"{w}.metadata must be an object.")
        if "type" not in f:
            raise invalid(f"{w} is missing its 'type'.")
        out.append({"name": name, "type": to_log_type(f["type"], f"{w}.type"), "nullable": nullable,
                    "metadata": metadata})
    return out


def to_api_type(t):
    """A Delta log type as the API spells it."""
    if isinstance(t, str):
        return t
    if t.get("type") == "struct":
        return {"type": "struct", "fields": [api_field(f) for f in t.get("fields", [])]}
    out = {"type": t["type"]}
    for key, value in t.items():
        if key in _API_KEYS:
            out[_API_KEYS[key]] = to_api_type(value) if key.endswith("Type") else value
    return out


def api_field(f: dict) -> dict:
    return {"name": f["name"], "type": to_api_type(f["type"]), "nullable": f.get("nullable", True),
            "metadata": f.get("metadata") or {}}


def sql_text(t) -> str:
    """Spark's catalog string of a Delta log type (what Unity Catalog keeps as type_text)."""
    if isinstance(t, str):
        return _SQL.get(t, t)
    kind = t["type"]
    if kind == "array":
        return f"array<{sql_text(t['elementType'])}>"
    if kind == "map":
        return f"map<{sql_text(t['keyType'])},{sql_text(t['valueType'])}>"
    return "struct<" + ",".join(f"{f['name']}:{sql_text(f['type'])}" for f in t["fields"]) + ">"


def _type_name(t) -> str:
    if isinstance(t, dict):
        return t["type"].upper()
    return "DECIMAL" if t.startswith("decimal") else PRIMITIVES[t]


def uc_columns(fields: list[dict], partition_columns: list[str]) -> list[dict]:
    """Delta log fields as Unity Catalog ColumnInfo; partition columns (matched case-insensitively)
    carry their partition_index."""
    index = {name.lower(): i for i, name in enumerate(partition_columns)}
    columns = []
    for i, f in enumerate(fields):
        c = {"name": f["name"], "type_name": _type_name(f["type"]), "type_text": sql_text(f["type"]),
             "type_json": json.dumps(f), "position": i, "nullable": f["nullable"]}
        if isinstance(f["type"], str) and f["type"].startswith("decimal"):
            c["type_precision"], c["type_scale"] = _decimal(f["type"], f["name"])
        if isinstance(f["metadata"].get("comment"), str):
            c["comment"] = f["metadata"]["comment"]
        if f["name"].lower() in index:
            c["partition_index"] = index[f["name"].lower()]
        columns.append(c)
    return columns


def check_partition_columns(fields: list[dict], partition_columns, where: str = "partition-columns") -> list[str]:
    """Partition column names, as the schema spells them; each must be a top-level column, once."""
    if not isinstance(partition_columns, list) or not all(isinstance(p, str) for p in partition_columns):
        raise invalid(f"{where} must be a list of column names.")
    names = {f["name"].lower(): f["name"] for f in fields}
    out = []
    for p in partition_columns:
        if p.lower() not in names:
            raise invalid(f"{where}: '{p:.80}' is not a column of the table.")
        if names[p.lower()] in out:
            raise invalid(f"{where}: '{p:.80}' appears more than once.")
        out.append(names[p.lower()])
    if out and len(out) == len(fields):
        raise invalid(f"{where}: at least one column must not be a partition column.")
    return out


def log_field_of(column: dict) -> dict:
    """A stored ColumnInfo as a Delta log field (from its type_json when it has one)."""
    raw = column.get("type_json")
    if raw:
        try:
            f = json.loads(raw)
            if isinstance(f, dict) and "type" in f:
                return {"name": column["name"], "type": f["type"], "nullable": column.get("nullable", True),
                        "metadata": f.get("metadata") or {}}
        except ValueError:
            pass
    type_name = column.get("type_name", "STRING")
    t = f"decimal({column.get('type_precision', 10)},{column.get('type_scale', 0)})" if type_name == "DECIMAL" \
        else {v: k for k, v in PRIMITIVES.items()}.get(type_name, (column.get("type_text") or "string").lower())
    return {"name": column["name"], "type": t, "nullable": column.get("nullable", True), "metadata": {}}


def api_columns(columns: list[dict]) -> dict:
    """A table's stored ColumnInfo list as the API's DeltaStructType (column comments in metadata)."""
    fields = []
    for c in sorted(columns, key=lambda c: c.get("position", 0)):
        f = api_field(log_field_of(c))
        if c.get("comment") is not None:
            f["metadata"] = {**f["metadata"], "comment": c["comment"]}
        fields.append(f)
    return {"type": "struct", "fields": fields}


def partition_columns_of(columns: list[dict]) -> list[str]:
    parts = sorted((c for c in columns if c.get("partition_index") is not None), key=lambda c: c["partition_index"])
    return [c["name"] for c in parts]
