"""Row filters and column masks on tables, as Unity Catalog has them.

A table may carry `row_filter` {function_name, input_column_names} and, per column, `mask`
{function_name, using_column_names}: SQL functions of the catalog, applied by the engine that
reads the table; an empty object ({}) removes one. They are set through createTable /
updateTable (whose authorization is the table's: its owner or an admin); this module checks
them there, inside the write: the function exists, the columns it names are the table's
(`check_policies`, part of a table's create and update rules in catalog/tree/tables.py).
Only trusted engines receive them (governance/authorize.py `present_table`), and an
untrusted engine gets no access to the data of a table that has them (`data_decision`).
"""

from __future__ import annotations

import dataclasses

from ..entities.asset import Asset
from ..entities.names import split_full_name
from ..errors import invalid


def _names(value, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise invalid(f"{where} must be a list of column names.")
    return value


async def _check_function(tx, spec, where: str, columns: set[str], list_key: str) -> dict:
    if not isinstance(spec, dict) or not isinstance(spec.get("function_name"), str):
        raise invalid(f"{where} must be an object with a string 'function_name'.")
    unknown = set(spec) - {"function_name", list_key}
    if unknown:
        raise invalid(f"{where} has unknown field(s) {sorted(unknown)}; it takes function_name and {list_key}.")
    name = ".".join(split_full_name(spec["function_name"], 3, "function"))
    if await tx.get("function", name) is None:
        raise invalid(f"{where}.function_name: function '{spec['function_name']}' does not exist.")
    used = _names(spec.get(list_key), f"{where}.{list_key}")
    missing = [c for c in used if c.lower() not in columns]
    if missing:
        raise invalid(f"{where}.{list_key} names column '{missing[0]}', which the table does not have.")
    return {"function_name": name, list_key: used}


async def check_policies(tx, table: Asset) -> Asset:
    info = dict(table.info)
    columns = info.get("columns") or []
    names = {c["name"].lower() for c in columns}
    if info.get("row_filter") == {}:        # an empty object drops the filter
        info.pop("row_filter")
    if info.get("row_filter") is not None:
        info["row_filter"] = await _check_function(tx, info["row_filter"], "row_filter", names, "input_column_names")
    if any(c.get("mask") is not None for c in columns):
        checked = []
        for c in columns:
            if c.get("mask") == {}:
                c = {k: v for k, v in c.items() if k != "mask"}
            if c.get("mask") is not None:
                c = {**c, "mask": await _check_function(tx, c["mask"], f"Column '{c['name']}' mask", names,
                                                        "using_column_names")}
            checked.append(c)
        info["columns"] = checked
    return dataclasses.replace(table, info=info)
