"""A view's `view_dependencies`, checked as the open-source server (0.6) checks them.

A DependencyList (`{"dependencies": [{"table": {"table_full_name"}} | {"function":
{"function_full_name"}}]}`): each entry names exactly one three-level table (or view) or
function, which must exist when the view is created or its list replaced (NOT_FOUND naming it).
The list is optional for a VIEW and a MATERIALIZED_VIEW; a METRIC_VIEW needs at least one entry
(its dependencies are always the client's to give). Tables other than views keep no list.
"""

from __future__ import annotations

from ...entities.dependencies import check_dependency_list
from ...entities.types import DEFINED_BY_QUERY
from ...errors import invalid, not_found
from ...store.writes import WriteTx

async def check_view_dependencies(tx: WriteTx, info: dict) -> None:
    """Check `info["view_dependencies"]` in place (names validated and lower-cased), or drop it
    from a table that is not a view."""
    if info.get("table_type") not in DEFINED_BY_QUERY:
        info.pop("view_dependencies", None)
        return
    given = info.get("view_dependencies")
    if given is None:
        info.pop("view_dependencies", None)
        if info["table_type"] == "METRIC_VIEW":
            raise invalid("A METRIC_VIEW needs view_dependencies with at least one entry.")
        return
    deps = check_dependency_list(given, "view_dependencies")
    if info["table_type"] == "METRIC_VIEW" and not deps["dependencies"]:
        raise invalid("A METRIC_VIEW needs view_dependencies with at least one entry.")
    for d in deps["dependencies"]:
        kind = "table" if "table" in d else "function"
        name = d[kind][f"{kind}_full_name"]
        if await tx.get(kind, name) is None:
            raise not_found(f"View dependency {kind} '{name}' does not exist.")
    info["view_dependencies"] = deps
