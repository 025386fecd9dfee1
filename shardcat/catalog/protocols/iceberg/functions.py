"""Functions in the Iceberg REST catalog (listFunctions, loadFunction): shardcat's SQL functions as the spec's UDF metadata.

A Unity Catalog function whose body is SQL (`routine_body` SQL) and whose parameter and result types all
have an Iceberg type is one UDF definition with one version whose representation is its SQL, in the
"spark" dialect (Databricks SQL, which Unity Catalog functions are written in); a function returning
TABLE_TYPE is a "udtf" whose return type is the struct of its result columns. Other functions (EXTERNAL
bodies such as Python, or a type with no Iceberg counterpart: INTERVAL, CHAR, NULL, USER_DEFINED_TYPE,
...) have no representation here: they are not listed, and loading one answers NoSuchFunctionException
saying why. Who may list or load a function is the Unity Catalog API's rule (the catalog service's find
and list). The definition's version id is 1 and its time the function's last update.
"""

from __future__ import annotations

import json

from ....auth import Caller
from ....errors import CatalogError
from .base import IcebergBase
from .errors import IcebergError
from .names import Name

# Unity Catalog's type names with an Iceberg primitive type (the spec's FunctionDataType strings).
PRIMITIVES = {"BOOLEAN": "boolean", "BYTE": "int", "SHORT": "int", "INT": "int", "LONG": "long", "FLOAT": "float",
              "DOUBLE": "double", "DATE": "date", "TIMESTAMP": "timestamptz", "TIMESTAMP_NTZ": "timestamp",
              "STRING": "string", "BINARY": "binary", "VARIANT": "variant"}


class NoRepresentation(ValueError):
    """The function has no representation in the spec's UDF metadata (the message says why)."""


def _type(param: dict):
    name = param.get("type_name")
    if name == "DECIMAL":
        return f"decimal({param.get('type_precision', 10)},{param.get('type_scale', 0)})"
    if name in PRIMITIVES:
        return PRIMITIVES[name]
    if name in ("ARRAY", "MAP", "STRUCT"):
        try:
            return _nested(json.loads(param.get("type_json") or "null"))
        except (ValueError, NoRepresentation):
            pass
    raise NoRepresentation(f"type {name} of '{param.get('name', '')}' has no Iceberg type here")


def _nested(spark_type):
    """A Spark JSON type (type_json's `type`) as the spec's FunctionDataType."""
    if isinstance(spark_type, dict) and "type" in spark_type and "name" in spark_type:     # a struct field
        spark_type = spark_type["type"]
    if isinstance(spark_type, str):
        simple = {"boolean": "boolean", "byte": "int", "short": "int", "integer": "int", "long": "long",
                  "float": "float", "double": "double", "date": "date", "timestamp": "timestamptz",
                  "timestamp_ntz": "timestamp", "string": "string", "binary": "binary", "variant": "variant"}
        if spark_type in simple:
            return simple[spark_type]
        if spark_type.startswith("decimal(") and " " not in spark_type:
            return spark_type
        raise NoRepresentation(spark_type)
    kind = spark_type.get("type") if isinstance(spark_type, dict) else None
    if kind == "array":
        return {"type": "list", "element": _nested(spark_type["elementType"])}
    if kind == "map":
        return {"type": "map", "key": _nested(spark_type["keyType"]), "value": _nested(spark_type["valueType"])}
    if kind == "struct":
        return {"type": "struct", "fields": [{"name": f["name"], "type": _nested(f["type"])}
                                             for f in spark_type["fields"]]}
    raise NoRepresentation(str(kind))


def function_metadata(function_id: str, info: dict) -> dict:
    """A Unity Catalog function (its id and info) as the spec's FunctionMetadata; NoRepresentation if it has none."""
    if info.get("routine_body") != "SQL":
        raise NoRepresentation(f"its body is {info.get('routine_body')} ({info.get('external_language', '')}), "
                               "not SQL")
    params = (info.get("input_params") or {}).get("parameters") or []
    parameters = [{"name": p["name"], "type": _type(p), **({"doc": p["comment"]} if p.get("comment") else {})}
                  for p in params]
    if info.get("data_type") == "TABLE_TYPE":
        columns = (info.get("return_params") or {}).get("parameters") or []
        returns = {"type": "struct", "fields": [{"name": c["name"], "type": _type(c)} for c in columns]}
        kind = "udtf"
    else:
        returns = _type({"name": "the result", "type_name": info.get("data_type"),
                         "type_precision": info.get("type_precision"), "type_scale": info.get("type_scale"),
                         "type_json": info.get("full_data_type")})
        kind = "udf"
    definition_id = ",".join(p["type"] if isinstance(p["type"], str) else json.dumps(p["type"], separators=(",", ":"))
                             for p in parameters)
    at = info.get("updated_at") or info.get("created_at") or 0
    definition = {"definition-id": definition_id, "parameters": parameters, "return-type": returns,
                  "function-type": kind, "current-version-id": 1,
                  "versions": [{"version-id": 1, "deterministic": bool(info.get("is_deterministic", False)),
                                "on-null-input": "return-null" if info.get("is_null_call") is False else "call",
                                "timestamp-ms": at,
                                "representations": [{"type": "sql", "dialect": "spark",
                                                     "sql": info.get("routine_definition", "")}]}]}
    if info.get("comment"):
        definition["doc"] = info["comment"]
    out = {"function-uuid": function_id, "format-version": 1, "definitions": [definition],
           "definition-log": [{"timestamp-ms": at, "definition-versions": [{"definition-id": definition_id,
                                                                             "version-id": 1}]}]}
    if info.get("comment"):
        out["doc"] = info["comment"]
    return out


def representable(asset) -> bool:
    try:
        function_metadata(asset.id, asset.info)
        return True
    except NoRepresentation:
        return False


class Functions(IcebergBase):
    """listFunctions and loadFunction."""

    async def list_functions(self, caller: Caller, warehouse: str | None, raw: str, page_size, page_token) -> dict:
        schema = self.schema_name(warehouse, self.namespace(warehouse, raw))
        await self._schema(caller, schema)
        try:
            page, token = await self.catalogs.list_page(caller, "function", schema, page_size, page_token)
        except CatalogError as e:
            if e.code == "NOT_FOUND":
                raise IcebergError(404, "NoSuchNamespaceException", f"Namespace does not exist: {schema.spelled}") \
                    from None
            raise
        namespace = self.shown(warehouse, schema)
        out = {"identifiers": [{"namespace": namespace, "name": a.name} for a in page if representable(a)]}
        if token:
            out["next-page-token"] = token
        return out

    async def load_function(self, caller: Caller, full_name: Name) -> dict:
        try:
            asset = await self.catalogs.find(caller, "function", full_name)
        except CatalogError as e:
            if e.code == "NOT_FOUND":
                raise IcebergError(404, "NoSuchFunctionException", f"Function does not exist: {full_name.spelled}") \
                    from None
            raise
        try:
            return {"metadata": function_metadata(asset.id, asset.info)}
        except NoRepresentation as e:
            raise IcebergError(404, "NoSuchFunctionException", f"Function {full_name.spelled} has no representation "
                                                               f"in Iceberg's function metadata: {e}.") from None
