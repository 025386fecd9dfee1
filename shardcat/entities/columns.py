"""Validation and normalisation of a table's columns (Unity Catalog ColumnInfo)."""

from __future__ import annotations

import json

from ..errors import invalid
from .manifest import KINDS
from .names import normal_text_name

TYPE_NAMES = (
    "BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ",
    "STRING", "BINARY", "DECIMAL", "INTERVAL", "ARRAY", "STRUCT", "MAP", "VARIANT", "CHAR", "NULL",
    "USER_DEFINED_TYPE", "TABLE_TYPE",
)

# Spark's JSON name for each simple type, used when a client leaves type_json out.
_SPARK_JSON = {
    "BOOLEAN": "boolean", "BYTE": "byte", "SHORT": "short", "INT": "integer", "LONG": "long",
    "FLOAT": "float", "DOUBLE": "double", "DATE": "date", "TIMESTAMP": "timestamp",
    "TIMESTAMP_NTZ": "timestamp_ntz", "STRING": "string", "BINARY": "binary", "VARIANT": "variant",
    "NULL": "void",
}
_SQL_TEXT = {"BYTE": "tinyint", "SHORT": "smallint", "INT": "int", "LONG": "bigint"}

_FIELDS = {
    "name": "string", "type_name": "string", "type_text": "string", "type_json": "string",
    "type_precision": "int", "type_scale": "int", "type_interval_type": "string", "position": "int",
    "comment": "string", "nullable": "bool", "partition_index": "int",
    "mask": "object",   # {function_name, using_column_names}: governance/row_filters.py checks it
}


def check_columns(columns: list) -> list[dict]:
    """Return the columns in position order with defaults filled in, or raise INVALID_PARAMETER_VALUE."""
    out = []
    seen = set()
    for i, col in enumerate(columns):
        if not isinstance(col, dict):
            raise invalid(f"columns[{i}] must be an object.")
        c = {}
        for key, kind in _FIELDS.items():
            value = col.get(key)
            if value is None:
                continue
            if not KINDS[kind](value):
                raise invalid(f"columns[{i}].{key} must be a {kind}, got {value!r:.60}.")
            c[key] = value
        name = c.get("name")
        if not name:
            raise invalid(f"columns[{i}] is missing its 'name'.")
        # NFC and no invisible characters, as every name; a column keeps its case and may hold spaces
        c["name"] = name = normal_text_name(name, f"columns[{i}]")
        if name.lower() in seen:
            raise invalid(f"Column '{name}' appears more than once.")
        seen.add(name.lower())
        type_name = c.get("type_name")
        if type_name is None:
            raise invalid(f"Column '{name}' is missing its 'type_name'.")
        if type_name not in TYPE_NAMES:
            raise invalid(f"Column '{name}' has unknown type_name '{type_name}'; expected one of {', '.join(TYPE_NAMES)}.")
        if type_name == "DECIMAL":
            precision, scale = c.setdefault("type_precision", 10), c.setdefault("type_scale", 0)
            if not 1 <= precision <= 38 or not 0 <= scale <= precision:
                raise invalid(f"Column '{name}': DECIMAL needs 1 <= precision <= 38 and 0 <= scale <= precision.")
        c.setdefault("position", i)
        c.setdefault("nullable", True)
        c.setdefault("type_text", _default_text(c))
        if "type_json" not in c:
            c["type_json"] = _default_json(c)
        else:
            try:
                json.loads(c["type_json"])
            except ValueError:
                raise invalid(f"Column '{name}': type_json is not valid JSON.") from None
        out.append(c)
    positions = sorted(c["position"] for c in out)
    if positions != list(range(len(out))):
        raise invalid(f"Column positions must be 0..{len(out) - 1} with no gaps or repeats, got {positions}.")
    return sorted(out, key=lambda c: c["position"])


def _default_text(c: dict) -> str:
    t = c["type_name"]
    if t == "DECIMAL":
        return f"decimal({c['type_precision']},{c['type_scale']})"
    return _SQL_TEXT.get(t, t.lower())


def _default_json(c: dict) -> str:
    t = c["type_name"]
    spark = f"decimal({c['type_precision']},{c['type_scale']})" if t == "DECIMAL" else _SPARK_JSON.get(t, c["type_text"])
    return json.dumps({"name": c["name"], "type": spark, "nullable": c["nullable"], "metadata": {}})
