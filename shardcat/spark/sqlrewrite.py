"""Rewriting SQL for Spark: catalog names to the job's temporary views, catalog SQL functions
inlined (also into row filters and column masks). Pure sqlglot, no Spark, no I/O."""

from __future__ import annotations

from sqlglot import exp

from ..entities.sql import DIALECT, cte_names, function_call_name, parse, table_name

OUT = "spark"


def _params(function: dict) -> list[str]:
    params = (function.get("input_params") or {}).get("parameters") or []
    return [p["name"].lower() for p in sorted(params, key=lambda p: p.get("position", 0))]


def inline(function: dict, args: list[exp.Expression]) -> exp.Expression:
    """A catalog SQL function's body with its parameters replaced by `args` (each parenthesised)."""
    name = function.get("full_name") or function.get("name")
    if (function.get("routine_body") or "").upper() != "SQL":
        raise ValueError(f"Function '{name}' is not a SQL function; shardcat.spark inlines SQL functions only.")
    params = _params(function)
    if len(args) != len(params):
        raise ValueError(f"Function '{name}' takes {len(params)} argument(s), got {len(args)}.")
    body = parse(function["routine_definition"], query=False)
    values = dict(zip(params, args))
    for col in list(body.find_all(exp.Column)):
        if not col.table and col.name.lower() in values:
            col.replace(exp.Paren(this=values[col.name.lower()].copy()))
    return exp.Paren(this=body) if not isinstance(body, exp.Paren) else body


def rewrite(sql: str, views: dict[str, str], functions: dict[str, dict], *, catalog: str | None = None,
            schema: str | None = None) -> str:
    """`sql` in Spark's dialect with each catalog table/view replaced by its temporary view
    (`views`: full name -> view name; the original name stays as the alias, so `t.col` still
    works) and each catalog function call inlined (`functions`: full name -> FunctionInfo).
    Names are qualified with `catalog` and `schema` (a view's own); without them only
    three-part names are the catalog's."""
    tree = parse(sql, query=True)
    _rewrite_tree(tree, views, functions, catalog, schema)
    return tree.sql(dialect=OUT)


def _rewrite_tree(tree, views, functions, catalog, schema) -> None:
    ctes = cte_names(tree)
    for call in list(tree.find_all(exp.Anonymous)):
        full = function_call_name(call, catalog, schema)
        if full is None:
            continue
        if full not in functions:
            raise KeyError(full)
        fn = functions[full]
        body = inline(fn, list(call.expressions))
        # the body's own names are relative to the function's schema
        f_catalog, f_schema, _ = full.split(".")
        _rewrite_tree(body, views, functions, f_catalog, f_schema)
        call.parent.replace(body)
    for table in list(tree.find_all(exp.Table)):
        full = table_name(table, catalog, schema, ctes)
        if full is None or full not in views:
            continue
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name))
        table.replace(exp.Table(this=exp.to_identifier(views[full]), alias=alias.copy()))


def to_spark(expression: exp.Expression) -> str:
    """An expression in Spark SQL, for `pyspark.sql.functions.expr`."""
    return expression.sql(dialect=OUT)


def column_args(names: list[str]) -> list[exp.Expression]:
    return [exp.column(n, quoted=True) for n in names]


__all__ = ["rewrite", "inline", "to_spark", "column_args", "DIALECT"]
