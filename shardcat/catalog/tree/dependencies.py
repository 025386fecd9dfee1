"""What views and functions depend on, for batched resolve: parsed, expanded, checked.

A view's SQL (and a SQL function's body) is parsed with sqlglot to find the tables, views and
catalog functions it names; names are qualified with the view's own catalog and schema. A
table's row filter and column masks name functions too. Expansion walks these references level
by level, each level one `Shard.snapshot` call pinned to the version of the first, so the whole
closure comes from one metastore snapshot. Per requested item, a cycle, a chain deeper than the
limit, a definition that does not parse or a dependency that does not exist is reported on that
item with the culprit named; nothing loops.
"""

from __future__ import annotations

from ...entities.asset import Asset
from ...entities.sql import qualify as _qualify, sql_references
from ...entities.types import TYPES, VIEW_TYPES

MAX_DEPTH = 32          # the deepest chain of views/functions a request may expand (Spark allows 100)
MAX_ASSETS = 10_000     # at most this many assets expanded per request: the work stays bounded

Key = tuple[str, str]   # (namespace, full name), as Shard.snapshot takes it


class SnapshotMoved(Exception):
    """A level of the expansion was answered at another metastore version: start again."""


class DependencyError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def direct_dependencies(asset: Asset) -> list[Key]:
    """The assets `asset` names directly, parsed once per asset state (kept in its memo). Raises
    ValueError when its definition does not parse."""
    hit = asset.memo.get("dependencies")
    if hit is None:
        try:
            hit = _parse_dependencies(asset)
        except ValueError as e:
            hit = e
        asset.memo["dependencies"] = hit
    if isinstance(hit, ValueError):
        raise hit
    return hit


def _parse_dependencies(asset: Asset) -> list[Key]:
    info = asset.info
    catalog, schema, _ = asset.full_name.split(".")
    tables: list[str] = []
    functions: list[str] = []
    if asset.type == "table":
        if info.get("table_type") in VIEW_TYPES and info.get("view_definition"):
            tables, functions = sql_references(info["view_definition"], catalog, schema, query=True)
        listed = info.get("view_dependencies")
        # A row filter and column masks are catalog functions the engine must fetch too.
        row_filter = info.get("row_filter") or {}
        if row_filter.get("function_name"):
            functions.append(_qualify(row_filter["function_name"].split("."), catalog, schema))
        for col in info.get("columns") or []:
            mask = (col or {}).get("mask") or {}
            if mask.get("function_name"):
                functions.append(_qualify(mask["function_name"].split("."), catalog, schema))
    elif asset.type == "function":
        if (info.get("routine_body") or "").upper() == "SQL" and info.get("routine_definition"):
            tables, functions = sql_references(info["routine_definition"], catalog, schema, query=False)
        listed = info.get("routine_dependencies")
    else:
        return []
    # Dependencies the creator listed (Unity Catalog's DependencyList) count as well.
    listed = listed.get("dependencies") if isinstance(listed, dict) else None
    for dep in listed if isinstance(listed, list) else []:
        if isinstance(dep, dict):
            if (dep.get("table") or {}).get("table_full_name"):
                tables.append(dep["table"]["table_full_name"].lower())
            if (dep.get("function") or {}).get("function_full_name"):
                functions.append(dep["function"]["function_full_name"].lower())
    keys = [("table", t) for t in tables if t] + [("function", f) for f in functions if f]
    return list(dict.fromkeys(keys))


class Node:
    """One asset of an expansion and what it names directly (a plain class: one per resolved item)."""
    __slots__ = ("asset", "deps", "error", "truncated")

    def __init__(self, asset: Asset | None, deps: list[Key] = (), error: str | None = None,
                 truncated: bool = False):
        self.asset = asset
        self.deps = deps
        self.error = error              # its definition does not parse
        self.truncated = truncated      # past the depth or size limit: not looked up


async def expand(shard, metastore_id: str, version: int, roots: dict[Key, Asset | None],
                 min_version: int, max_depth: int = MAX_DEPTH, governed=None) -> dict[Key, Node]:
    """Every asset reachable from `roots` (already read at `version`) within `max_depth` levels,
    each level one snapshot call. Raises SnapshotMoved if a level came from another version.
    `governed(asset)`: the asset as the caller's ABAC policies make it (their functions are
    dependencies too)."""
    nodes: dict[Key, Node] = {}
    level: dict[Key, Asset | None] = dict(roots)
    for depth in range(max_depth + 2):
        wanted: set[Key] = set()
        for key, asset in level.items():
            if governed is not None and asset is not None:
                asset = governed(asset)
            node = nodes[key] = Node(asset)
            if asset is not None:
                try:
                    node.deps = direct_dependencies(asset)
                except ValueError as e:
                    node.error = str(e)
                if node.deps:
                    wanted.update(d for d in node.deps if d not in nodes and d not in level)
        if not wanted:
            break
        if depth >= max_depth or len(nodes) + len(wanted) > MAX_ASSETS:
            for key in wanted:
                nodes[key] = Node(None, truncated=True)
            break
        snap = await shard.snapshot(metastore_id, sorted(wanted), [], min_version)
        if snap.version != version:
            raise SnapshotMoved()
        level = {k: snap.by_name.get(k) for k in wanted}
    return nodes


def _label(key: Key, node: Node | None) -> str:
    if node is not None and node.asset is not None and node.asset.type == "table":
        kind = "View" if node.asset.info.get("table_type") in VIEW_TYPES else "Table"
    else:
        kind = "Function" if key[0] == "function" else "Table"
    return f"{kind} '{key[1]}'"


def closure(root: Key, nodes: dict[Key, Node], max_depth: int = MAX_DEPTH) -> list[Key]:
    """The dependencies of `root`, deepest first (each after everything it depends on).
    Raises DependencyError naming the culprit: a cycle, a chain deeper than `max_depth`, a
    definition that does not parse, or a dependency that does not exist."""
    order: list[Key] = []
    height: dict[Key, int] = {}

    def chain(path: list[Key], last: Key) -> str:
        return " -> ".join(k[1] for k in [*path, last])

    def visit(key: Key, path: list[Key]) -> int:
        if key in path:
            raise DependencyError("INVALID_PARAMETER_VALUE",
                                  f"Dependency cycle: {chain(path[path.index(key):], key)}.")
        node = nodes.get(key)
        if node is None or node.truncated or len(path) > max_depth:
            raise DependencyError("INVALID_PARAMETER_VALUE",
                                  f"{_label(*path[:1], nodes.get(path[0]))} nests deeper than {max_depth} "
                                  f"levels of views and functions: {chain(path, key)}.")
        if node.asset is None:
            raise DependencyError("NOT_FOUND", f"{_label(key, node)}, needed through {chain(path, key)}, "
                                               "does not exist.")
        if node.error is not None:
            raise DependencyError("INVALID_PARAMETER_VALUE",
                                  f"The definition of {_label(key, node).lower()} does not parse: {node.error}"
                                  + (f" (needed through {chain(path, key)})." if path else ""))
        if key in height:
            if len(path) + height[key] > max_depth:     # reached again, deeper than before
                raise DependencyError("INVALID_PARAMETER_VALUE",
                                      f"{_label(path[0], nodes.get(path[0]))} nests deeper than {max_depth} "
                                      f"levels of views and functions (through {chain(path, key)}).")
            return height[key]
        h = 0
        for dep in node.deps:
            h = max(h, 1 + visit(dep, path + [key]))
        height[key] = h
        if path:
            order.append(key)
        return h

    visit(root, [])
    return order


def dependency_entry(key: Key, node: Node) -> dict:
    """One dependency as resolve returns it: name, type, and what it names directly (resolve adds
    the caller's decision and, if allowed, the asset)."""
    asset = node.asset
    t = TYPES[asset.type]
    return {"name": asset.full_name, "securable_type": t.securable_type, "operation": "READ",
            "depends_on": depends_on(node)}


def depends_on(node: Node) -> list[dict]:
    return [{"name": name, "securable_type": "FUNCTION" if ns == "function" else "TABLE"} for ns, name in node.deps]
