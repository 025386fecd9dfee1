"""Functions: their type service (crud.py) with the checks of a function's signature and body
beyond the manifest's field rules, and their routes (/functions).

POST /functions wraps the fields in {"function_info": {...}} (open-source API and 2.1 alike).
The rules checked here are the ones the open-source API states: the enums, parameters with
distinct names and positions 0..n-1, EXTERNAL routines naming their language with no SQL
access and no table result, TABLE_TYPE results describing their columns in return_params,
`properties` a JSON-encoded map of strings, dependencies naming three-level tables or functions.
"""

from __future__ import annotations

import dataclasses

import json


from ...auth import Caller
from ...entities.asset import Asset
from ...entities.columns import TYPE_NAMES
from ...entities.dependencies import check_dependency_list
from ...entities.manifest import KINDS
from ...errors import invalid
from ...store.writes import WriteTx
from ...entities.types import FUNCTION
from .crud import TypeService
from ...shards.shard import MetastoreState, Shard
from ...web.kit import json_body, ok, required_query
from ...web.routes import Handler, ShardServing

ROUTINE_BODIES = ("SQL", "EXTERNAL")
PARAMETER_STYLES = ("S",)
SQL_DATA_ACCESS = ("CONTAINS_SQL", "READS_SQL_DATA", "NO_SQL")
SECURITY_TYPES = ("DEFINER",)
PARAMETER_MODES = ("IN",)
PARAMETER_TYPES = ("PARAM", "COLUMN")

_PARAM_FIELDS = {
    "name": "string", "type_text": "string", "type_json": "string", "type_name": "string",
    "type_precision": "int", "type_scale": "int", "type_interval_type": "string", "position": "int",
    "parameter_mode": "string", "parameter_type": "string", "parameter_default": "string", "comment": "string",
}
_PARAM_REQUIRED = ("name", "type_text", "type_json", "type_name", "position")


async def create_function(functions: "Functions", caller: Caller, body: dict) -> dict:
    """POST /functions: the fields inside `function_info`."""
    info = body.get("function_info")
    if info is None:
        raise invalid("Missing required field 'function_info': POST /functions takes {\"function_info\": {...}}.")
    if not isinstance(info, dict):
        raise invalid(f"Field 'function_info' must be an object, got {type(info).__name__}.")
    return await functions.create(caller, info)


def _one_of(value: str, allowed: tuple[str, ...], field: str) -> None:
    if value not in allowed:
        raise invalid(f"Unknown {field} '{value:.80}'; expected one of {', '.join(allowed)}.")


def check_parameters(params: dict, field: str) -> dict:
    """A FunctionParameterInfos object: {"parameters": [...]}, each parameter checked, in position order."""
    unknown = set(params) - {"parameters"}
    if unknown:
        raise invalid(f"Field '{field}' has unknown key(s) {sorted(unknown)}; it holds only 'parameters'.")
    items = params.get("parameters") or []
    if not isinstance(items, list):
        raise invalid(f"Field '{field}.parameters' must be a list.")
    out, names = [], set()
    for i, p in enumerate(items):
        where = f"{field}.parameters[{i}]"
        if not isinstance(p, dict):
            raise invalid(f"{where} must be an object.")
        kept = {}
        for key, kind in _PARAM_FIELDS.items():
            value = p.get(key)
            if value is None:
                if key in _PARAM_REQUIRED:
                    raise invalid(f"{where} is missing its '{key}'.")
                continue
            if not KINDS[kind](value):
                raise invalid(f"{where}.{key} must be a {kind}, got {value!r:.60}.")
            kept[key] = value
        if not kept["name"]:
            raise invalid(f"{where}.name must not be empty.")
        if kept["name"].lower() in names:
            raise invalid(f"Parameter '{kept['name']}' appears more than once in {field}.")
        names.add(kept["name"].lower())
        _one_of(kept["type_name"], TYPE_NAMES, f"{where}.type_name")
        if "parameter_mode" in kept:
            _one_of(kept["parameter_mode"], PARAMETER_MODES, f"{where}.parameter_mode")
        if "parameter_type" in kept:
            _one_of(kept["parameter_type"], PARAMETER_TYPES, f"{where}.parameter_type")
        try:
            json.loads(kept["type_json"])
        except ValueError:
            raise invalid(f"{where}.type_json is not valid JSON.") from None
        out.append(kept)
    positions = sorted(p["position"] for p in out)
    if positions != list(range(len(out))):
        raise invalid(f"The positions in {field} must be 0..{len(out) - 1} with no gaps or repeats, got {positions}.")
    return {"parameters": sorted(out, key=lambda p: p["position"])}


def check_dependencies(deps: dict) -> dict:
    """A DependencyList: each dependency names exactly one three-level table or function."""
    return check_dependency_list(deps, "routine_dependencies")


class Functions(TypeService):
    def __init__(self, shard: Shard):
        super().__init__(shard, FUNCTION)

    async def on_create(self, tx, state, asset, schema, flags):
        return await create_function_rule(tx, state, asset, schema)


async def create_function_rule(tx: WriteTx, state: MetastoreState, asset: Asset, schema: Asset) -> Asset:
    info = dict(asset.info)
    _one_of(info["routine_body"], ROUTINE_BODIES, "routine_body")
    _one_of(info["parameter_style"], PARAMETER_STYLES, "parameter_style")
    _one_of(info["sql_data_access"], SQL_DATA_ACCESS, "sql_data_access")
    _one_of(info["security_type"], SECURITY_TYPES, "security_type")
    _one_of(info["data_type"], TYPE_NAMES, "data_type")
    info["input_params"] = check_parameters(info["input_params"], "input_params")
    if "return_params" in info:
        info["return_params"] = check_parameters(info["return_params"], "return_params")
    if info["data_type"] == "TABLE_TYPE" and not (info.get("return_params") or {}).get("parameters"):
        raise invalid("A function returning TABLE_TYPE must describe its columns in return_params.")
    if info["routine_body"] == "EXTERNAL":
        if not info.get("external_language"):
            raise invalid("An EXTERNAL function must name its language in external_language.")
        if info["sql_data_access"] != "NO_SQL":
            raise invalid("An EXTERNAL function must have sql_data_access NO_SQL.")
        if info.get("return_params"):
            raise invalid("An EXTERNAL function cannot return a table: leave return_params out.")
    elif info.get("external_language"):
        raise invalid("external_language is only for EXTERNAL functions (routine_body SQL has none).")
    if not info["routine_definition"].strip():
        raise invalid("routine_definition must not be empty.")
    if info.get("properties") == "null":
        # A JSON-encoded null (unitycatalog-ai's default) means no properties.
        info.pop("properties")
    if "properties" in info:
        try:
            props = json.loads(info["properties"])
        except ValueError:
            props = None
        if not KINDS["map<string,string>"](props):
            raise invalid("Field 'properties' must be a JSON-encoded map of strings to strings, "
                          "e.g. '{\"key\": \"value\"}'.")
    if "routine_dependencies" in info:
        info["routine_dependencies"] = check_dependencies(info["routine_dependencies"])
    return dataclasses.replace(asset, info=info)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    functions = Functions(shard)

    async def create(request):
        return ok(await create_function(functions, request["caller"], await json_body(request)))

    async def list_(request):
        schema = f"{required_query(request, 'catalog_name')}.{required_query(request, 'schema_name')}"
        return ok(await functions.list(request["caller"], schema, request.query.get("max_results"),
                                       request.query.get("page_token")))

    async def get(request):
        return ok(await functions.get(request["caller"], request.match_info["name"]))

    async def update(request):
        """The 2.1 API's updateFunction: only the owner changes (the manifest ignores every other field)."""
        return ok(await functions.update(request["caller"], request.match_info["name"], await json_body(request)))

    async def delete(request):
        await functions.delete(request["caller"], request.match_info["name"])
        return ok()

    return {"createFunction": create, "listFunctions": list_, "getFunction": get, "updateFunction": update,
            "deleteFunction": delete}
