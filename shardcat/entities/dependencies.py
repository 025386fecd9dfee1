"""A DependencyList, the shape views (`view_dependencies`) and functions (`routine_dependencies`)
name what they depend on with: `{"dependencies": [{"table": {"table_full_name"}} |
{"function": {"function_full_name"}}]}`, each entry naming exactly one three-level name."""

from __future__ import annotations

from ..errors import invalid
from .names import split_full_name


def check_dependency_list(deps, field: str) -> dict:
    """The list `deps` (the value of `field`) checked, its names validated and lower-cased."""
    if not isinstance(deps, dict):
        raise invalid(f"Field '{field}' must be an object with a list 'dependencies'.")
    items = deps.get("dependencies") or []
    if not isinstance(items, list):
        raise invalid(f"Field '{field}.dependencies' must be a list.")
    out = []
    for i, d in enumerate(items):
        where = f"{field}.dependencies[{i}]"
        kinds = [k for k in ("table", "function") if isinstance(d, dict) and d.get(k) is not None]
        if len(kinds) != 1 or len(d) != 1:
            raise invalid(f"{where} must have exactly one of 'table' or 'function'.")
        kind = kinds[0]
        key = f"{kind}_full_name"
        target = d[kind]
        if not isinstance(target, dict) or not isinstance(target.get(key), str):
            raise invalid(f"{where}.{kind} must be an object with a string '{key}'.")
        out.append({kind: {key: ".".join(split_full_name(target[key], 3, kind))}})
    return {"dependencies": out}
