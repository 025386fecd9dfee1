"""The package's layers, read from its own imports: no import circle, no upward import, aiohttp only at or above the HTTP kit.

Every import is read with `ast`, those inside functions too (an import placed inside a
function to dodge a circle is still a dependency). A module's layer is its first folder
under shardcat/ (or its own name for a top-level module). The layers, top to bottom; a
module may import from its own layer and from any layer below it, never from above:
"""

from __future__ import annotations

import ast
from pathlib import Path

import shardcat

PACKAGE = Path(shardcat.__file__).parent

LAYERS = [
    {"__main__", "cluster"},      # processes: the server, its Ray shards, the CLI
    {"client", "spark"},          # clients of the API (the CLI client, the Spark session)
    {"router", "serving"},        # the apps: the router's and a shard's (aiohttp apps and their fast fronts)
    {"catalog"},                  # catalog operations, each type's rules and routes
    {"governance"},               # decisions (privileges, audit, identity, vending) and their APIs
    {"maintenance"},              # table maintenance as Ray tasks: below the catalog that schedules and records
                                  # the runs, above the table formats whose files the jobs rewrite
    {"delta", "iceberg"},         # table formats: the Delta protocol's rules (and a Delta client), Iceberg metadata
    {"web", "openapi", "shards"},  # the HTTP kit, endpoint registry and API document; the shard core (versions,
                                   # reconcile, followers)
    {"cache", "store"},           # pure data structures; PostgreSQL
    {"entities", "errors", "auth"},   # values: asset types, names, errors, callers
]
# The catalog's inner rooms, top to bottom: wire protocols over features over the types of the tree.
CATALOG_ROOMS = ["protocols", "features", "tree"]
# aiohttp is the HTTP kit's and the layers' above it; below the kit nothing speaks HTTP.
NO_AIOHTTP = {"shards", "cache", "store", "entities", "errors", "auth"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Everything `name` imports (modules of shardcat and third-party top-level names), anywhere in it."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            submodules = {f"{target}.{a.name}" for a in node.names} & modules.keys()
            found |= submodules          # `from . import x`, x a module: x, not the package's __init__
            if len(submodules) < len(node.names):
                found.add(target)
    return found


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(each shardcat module -> the shardcat modules it imports, each module -> all it imports)."""
    modules = _modules()
    everything = {m: _imports(m, p, modules) for m, p in modules.items()}
    inner = {m: {i for i in imports if i in modules and i != m and i != "shardcat"} for m, imports in everything.items()}
    return inner, everything


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "shardcat"


def _rank(layer: str) -> int:
    for i, names in enumerate(LAYERS):
        if layer in names:
            return i
    raise AssertionError(f"layer {layer!r} is not in LAYERS: place it there")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_layer_is_placed():
    for module in _modules():
        if module != "shardcat":
            _rank(_layer(module))


def test_no_import_circle():
    inner, _ = _graph()
    assert _cycles(inner) == []


def test_no_upward_import():
    inner, _ = _graph()
    upward = sorted(f"{m} -> {i}" for m, imports in inner.items() for i in imports
                    if m != "shardcat" and _rank(_layer(i)) < _rank(_layer(m)))
    assert upward == []


def _catalog_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "catalog" else None


def test_catalog_modules_live_in_its_rooms():
    loose = sorted(m for m in _modules() if _layer(m) == "catalog" and m != "shardcat.catalog"
                   and _catalog_room(m) not in CATALOG_ROOMS)
    assert loose == []


def test_no_upward_import_between_the_catalog_rooms():
    inner, _ = _graph()
    upward = sorted(f"{m} -> {i}" for m, imports in inner.items() for i in imports
                    if _catalog_room(m) in CATALOG_ROOMS and _catalog_room(i) in CATALOG_ROOMS
                    and CATALOG_ROOMS.index(_catalog_room(i)) < CATALOG_ROOMS.index(_catalog_room(m)))
    assert upward == []


def test_no_aiohttp_below_the_http_kit():
    _, everything = _graph()
    below = sorted(m for m, imports in everything.items()
                   if _layer(m) in NO_AIOHTTP and any(i == "aiohttp" or i.startswith("aiohttp.") for i in imports))
    assert below == []


def test_the_checks_see_what_they_look_for():
    """The helpers find a circle, and read imports inside functions."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    inner, _ = _graph()
    assert inner, "no modules read"
