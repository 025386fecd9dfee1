"""The names a piece of SQL refers to: tables and views, and catalog functions (sqlglot).

Shared by the server (batched resolve expands views and functions) and shardcat.spark (which
finds a query's catalog references and rewrites them). Pure: no I/O.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

DIALECT = "databricks"  # Unity Catalog view text is Spark/Databricks SQL


def qualify(parts: list[str], catalog: str | None, schema: str | None) -> str | None:
    """`catalog.schema.name` for a one-, two- or three-part name; None if it cannot be completed."""
    parts = [p.lower() for p in parts if p]
    if len(parts) == 1 and catalog and schema:
        parts = [catalog, schema, *parts]
    elif len(parts) == 2 and catalog:
        parts = [catalog, *parts]
    return ".".join(parts) if len(parts) == 3 else None


def function_call_name(call: exp.Anonymous, catalog: str | None, schema: str | None) -> str | None:
    """The full name of a qualified call like `c.s.f(x)` (an Anonymous under a Dot), else None."""
    parent = call.parent
    if isinstance(parent, exp.Dot) and parent.expression is call:
        return qualify(dotted(parent.this) + [call.name], catalog, schema)
    return None


def table_name(table: exp.Table, catalog: str | None, schema: str | None, ctes: set[str]) -> str | None:
    """The full name a FROM/JOIN table refers to, or None (a CTE, or not completable)."""
    if not table.name or (not table.catalog and not table.db and table.name.lower() in ctes):
        return None
    return qualify([table.catalog, table.db, table.name], catalog, schema)


def cte_names(tree: exp.Expression) -> set[str]:
    return {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}


def dotted(node) -> list[str]:
    """The name parts of a dotted chain like `c.s` (sqlglot Dot/Column/Identifier nodes)."""
    if isinstance(node, exp.Dot):
        return dotted(node.this) + dotted(node.expression)
    if isinstance(node, exp.Column):
        return [p.name for p in node.parts]
    if isinstance(node, (exp.Identifier, exp.Anonymous)):
        return [node.name]
    return [node.sql()]


def parse(sql: str, *, query: bool) -> exp.Expression:
    """The sqlglot tree of `sql`; ValueError if it does not parse (or, with `query`, is not a query)."""
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except SqlglotError as e:
        raise ValueError(str(e).splitlines()[0]) from None
    if tree is None or (query and not isinstance(tree, exp.Query)):
        raise ValueError(f"not a query: {sql[:80]!r}")
    return tree


def sql_references(sql: str, catalog: str | None, schema: str | None, *, query: bool) -> tuple[list[str], list[str]]:
    """(table full names, function full names) that `sql` names, qualified with `catalog` and
    `schema`; with neither, only three-part names count. Raises ValueError if it does not parse
    (or, with `query`, is not a query). Unqualified function calls are taken as built-ins."""
    tree = parse(sql, query=query)
    ctes = cte_names(tree)
    tables = [table_name(t, catalog, schema, ctes) for t in tree.find_all(exp.Table)]
    functions = [function_call_name(c, catalog, schema) for c in tree.find_all(exp.Anonymous)]
    return list(dict.fromkeys(n for n in tables if n)), list(dict.fromkeys(n for n in functions if n))
