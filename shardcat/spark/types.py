"""Spark types <-> Unity Catalog columns (type_name, type_text, type_json), and Spark <-> Arrow.

type_json is the Spark StructField's JSON (`{"name", "type", "nullable", "metadata"}`), as the
open-source Unity Catalog Spark connector writes it; type_text is Spark's SQL spelling
(`bigint`, `array<int>`, `decimal(10,2)`); type_name is the Unity Catalog ColumnTypeName.
"""

from __future__ import annotations

import json

import pyarrow as pa
from pyspark.sql import types as T

_NAMES = [
    (T.BooleanType, "BOOLEAN"), (T.ByteType, "BYTE"), (T.ShortType, "SHORT"), (T.IntegerType, "INT"),
    (T.LongType, "LONG"), (T.FloatType, "FLOAT"), (T.DoubleType, "DOUBLE"), (T.DateType, "DATE"),
    (T.TimestampNTZType, "TIMESTAMP_NTZ"), (T.TimestampType, "TIMESTAMP"), (T.CharType, "CHAR"),
    (T.StringType, "STRING"), (T.VarcharType, "STRING"), (T.BinaryType, "BINARY"), (T.DecimalType, "DECIMAL"),
    (T.ArrayType, "ARRAY"), (T.MapType, "MAP"), (T.StructType, "STRUCT"), (T.NullType, "NULL"),
    (T.DayTimeIntervalType, "INTERVAL"), (T.YearMonthIntervalType, "INTERVAL"),
]
if hasattr(T, "VariantType"):
    _NAMES.append((T.VariantType, "VARIANT"))


def type_name(dt: T.DataType) -> str:
    """The Unity Catalog ColumnTypeName of a Spark type."""
    for cls, name in _NAMES:
        if isinstance(dt, cls):
            return name
    if isinstance(dt, T.UserDefinedType):
        return "USER_DEFINED_TYPE"
    raise ValueError(f"Spark type {dt.simpleString()} has no Unity Catalog type name.")


def to_columns(schema: T.StructType, partition_by: list[str] = ()) -> list[dict]:
    """Unity Catalog ColumnInfo list for a Spark schema (comments from the fields' metadata)."""
    parts = [p.lower() for p in partition_by]
    out = []
    for i, f in enumerate(schema.fields):
        col = {"name": f.name, "type_name": type_name(f.dataType), "type_text": f.dataType.simpleString(),
               "type_json": json.dumps(f.jsonValue()), "position": i, "nullable": f.nullable}
        if isinstance(f.dataType, T.DecimalType):
            col["type_precision"], col["type_scale"] = f.dataType.precision, f.dataType.scale
        if f.metadata.get("comment"):
            col["comment"] = f.metadata["comment"]
        if f.name.lower() in parts:
            col["partition_index"] = parts.index(f.name.lower())
        out.append(col)
    return out


def to_schema(columns: list[dict]) -> T.StructType:
    """The Spark schema of a table's Unity Catalog columns (from type_json, else type_text)."""
    fields = []
    for col in sorted(columns or [], key=lambda c: c.get("position", 0)):
        field = None
        if col.get("type_json"):
            try:
                field = T.StructField.fromJson(json.loads(col["type_json"]))
            except (ValueError, KeyError, TypeError):
                field = None
        if field is None:
            dt = T._parse_datatype_string(col.get("type_text") or col["type_name"].lower())
            field = T.StructField(col["name"], dt, col.get("nullable", True))
        metadata = dict(field.metadata)
        if col.get("comment"):
            metadata["comment"] = col["comment"]
        fields.append(T.StructField(col["name"], field.dataType, col.get("nullable", field.nullable), metadata))
    return T.StructType(fields)


def same_columns(schema: T.StructType, columns: list[dict]) -> str | None:
    """Why a DataFrame's schema does not fit a table's columns (names and types), or None."""
    want = [(f.name.lower(), f.dataType.simpleString()) for f in to_schema(columns).fields]
    have = [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]
    if want == have:
        return None
    return (f"the DataFrame has columns ({', '.join(f'{n} {t}' for n, t in have)}) but the table has "
            f"({', '.join(f'{n} {t}' for n, t in want)})")


_ARROW = {
    "boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(),
    "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
}


def to_arrow(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of a Spark schema of primitive types (what the Delta client writes)."""
    fields = []
    for f in schema.fields:
        dt = f.dataType
        if isinstance(dt, T.DecimalType):
            at = pa.decimal128(dt.precision, dt.scale)
        elif dt.typeName() in _ARROW:
            at = _ARROW[dt.typeName()]
        else:
            raise ValueError(f"Column '{f.name}' has type {dt.simpleString()}; Delta tables written through "
                             "shardcat.spark take primitive types only.")
        fields.append(pa.field(f.name, at, f.nullable))
    return pa.schema(fields)
