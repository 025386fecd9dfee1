"""Validation and normalisation of a table's columns (Unity Catalog ColumnInfo), and what new columns
keep of the governance (tags, masks) of the columns they replace."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

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


@dataclass
class Replaced:
    """A table's new columns with the governance of the old ones they are (`carry_governance`)."""
    columns: list[dict]
    row_filter: dict | None
    lost_tags: list[tuple[str, str, str | None]] = field(default_factory=list)   # (column, key, value)
    lost_masks: list[str] = field(default_factory=list)                          # columns whose mask goes


def carry_governance(old_columns: list, new_columns: list, row_filter: dict | None = None, *,
                     renamed: dict[str, str] | None = None, masks_given: bool = False) -> Replaced:
    """New columns replacing a table's old ones, each with the tags and the mask of the old column
    it is: the one a writer's field ids say it is (`renamed`: old name -> new name), else the one
    of the same name (in any case). A writer never sets tags (only the tag API does); masks come
    from the old columns too unless the writer gives them (`masks_given`: updateTable, the mask
    API itself). A rename takes the names in the row filter and the masks along. What the old
    columns lose (the tags and mask of a column no longer there; a mask the writer leaves out) is
    reported, for the caller's rights to decide (catalog/tree/column_governance.py)."""
    renamed = {k.lower(): v for k, v in (renamed or {}).items()}
    new_by_name = {c["name"].lower(): c["name"] for c in new_columns}
    claimed = {v.lower() for v in renamed.values()}
    became: dict[str, str] = {}          # an old column's name (lower) -> the new column it is
    for old in old_columns:
        key = old["name"].lower()
        target = (renamed.get(key) or "").lower()
        if target not in new_by_name and key in new_by_name and key not in claimed:
            target = key
        if target in new_by_name:
            became[key] = new_by_name[target]
    follow = {k: v for k, v in became.items() if k != v.lower()}

    def names(spec: dict, field_name: str) -> dict:
        return {**spec, field_name: [follow.get(n.lower(), n) for n in spec.get(field_name) or []]}

    old_of = {became[o["name"].lower()].lower(): o for o in old_columns if o["name"].lower() in became}
    out = Replaced([], names(row_filter, "input_column_names") if row_filter else row_filter)
    for c in new_columns:
        c = {k: v for k, v in c.items() if k != "tags"}
        old = old_of.get(c["name"].lower(), {})
        if old.get("tags"):
            c["tags"] = old["tags"]
        if old.get("mask") and not masks_given:
            c["mask"] = names(old["mask"], "using_column_names")
        elif old.get("mask") and not c.get("mask"):
            out.lost_masks.append(old["name"])
        out.columns.append(c)
    for old in old_columns:
        if old["name"].lower() not in became:
            out.lost_tags += [(old["name"], k, v) for k, v in (old.get("tags") or {}).items()]
            if old.get("mask"):
                out.lost_masks.append(old["name"])
    _require_used_columns(out, masks_given)
    return out


def _require_used_columns(out: Replaced, masks_given: bool) -> None:
    """The row filter and the masks kept name only columns that are still there."""
    present = {c["name"].lower() for c in out.columns}
    used = [(n, "the row filter") for n in (out.row_filter or {}).get("input_column_names") or []]
    if not masks_given:       # given masks are checked with the rest of updateTable (governance/row_filters.py)
        used += [(n, f"the mask of column '{c['name']}'") for c in out.columns if c.get("mask")
                 for n in c["mask"].get("using_column_names") or []]
    for name, user in used:
        if name.lower() not in present:
            raise invalid(f"Column '{name}' cannot be removed: {user} uses it (change that first, with updateTable).")
