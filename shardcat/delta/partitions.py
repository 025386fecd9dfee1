"""Partition columns of Delta tables: which columns may partition a table, their values as the
Delta log serializes them, and the Hive-style directories (`col=value/`) data files go in.

The log's `partitionValues` are the truth; the directories follow Spark's naming and escaping,
so that Spark, given the table's root as its base path, finds the same values in the paths.
An empty string is no value (null), as in Spark and Delta.
"""

from __future__ import annotations

import datetime

# Delta types a partition column may have: their values survive a trip through a directory name.
PARTITION_TYPES = ("string", "byte", "short", "integer", "long", "date", "boolean")
NULL_DIRECTORY = "__HIVE_DEFAULT_PARTITION__"
# The characters Spark escapes in a partition directory's value (as %XX).
_ESCAPED = frozenset(map(chr, range(1, 0x20))) | frozenset('"#%\'*/:=?\\\x7f{[]^')


def check_partition_columns(fields: dict[str, str], columns) -> list[str]:
    """`columns` as a list, after checking them against the table's fields (name -> Delta type)."""
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise ValueError("Partition columns must be a list of column names.")
    columns = list(columns)
    for name in columns:
        if name not in fields:
            raise ValueError(f"Partition column '{name}' is not a column of the table.")
        if fields[name] not in PARTITION_TYPES:
            raise ValueError(f"Partition column '{name}' has type {fields[name]}; a partition column must be one of "
                             f"{', '.join(PARTITION_TYPES)}.")
    if len(set(columns)) != len(columns):
        raise ValueError(f"Partition columns {columns} name a column twice.")
    if columns and len(columns) == len(fields):
        raise ValueError("Every column is a partition column; a table needs at least one other column.")
    return columns


def serialize(value) -> str | None:
    """A partition value as the log stores it."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def parse(text: str | None, delta_type: str):
    """The Python value of a serialized partition value of a column of `delta_type`."""
    if text is None:
        return None
    if delta_type == "boolean":
        return text.lower() == "true"
    if delta_type == "date":
        return datetime.date.fromisoformat(text)
    if delta_type == "string":
        return text
    return int(text)


def _escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        code = text[i + 1:i + 3]
        if text[i] == "%" and len(code) == 2 and all(c in "0123456789abcdefABCDEF" for c in code):
            out.append(chr(int(code, 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def directory(columns: list[str], values: dict[str, str | None]) -> str:
    """The relative directory of a data file with these partition values: `a=1/b=x`."""
    return "/".join(f"{_escape(c)}={NULL_DIRECTORY if values.get(c) is None else _escape(values[c])}"
                    for c in columns)


def values_in_path(path: str) -> dict[str, str | None]:
    """The partition values a data file's relative path names in its `col=value` directories."""
    out = {}
    for part in path.split("/")[:-1]:
        name, eq, value = part.partition("=")
        if eq:
            out[_unescape(name)] = None if value == NULL_DIRECTORY else _unescape(value)
    return out
