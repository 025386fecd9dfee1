"""Path queries over a metastore's hierarchy: parse a query into a plan (language.py), and run a plan
over a tree (run.py).

The language (docs/queries.md) is TreeCat's path navigation (seed 002, section 4.2) adapted to
Unity Catalog: a query is a path of steps from the metastore down, each step naming the kinds of
children it walks into and an optional filter in brackets:

    /catalog[name = "main"]/schema/table[owner_kind = "group" and exists(column[tags["pii"]]) and not comment]

Levels: the metastore > catalogs > schemas > tables, views, volumes, functions, models > columns.
Filters compare fields (`name`, `owner`, `comment`, `created_at`, ...; `tags["k"]`,
`properties["k"]`) with `= != < <= > >= like in`, combine with `and or not`, and test for
children with `exists(path)`, whose path may also walk into an asset's `tag`, `grant` and
`property` entries. No I/O here: the plan runs over a `Tree` (the caller's view of one snapshot),
in a fixed order (names at each level, columns in table order), from a cursor, within a bound on
the nodes it visits.
"""

from .language import LIKE_WORK_PER_NODE, Plan, parse
from .run import OverBudget, Page, Unread, describe, run, valid_cursor

__all__ = ["LIKE_WORK_PER_NODE", "OverBudget", "Page", "Plan", "Unread", "describe", "parse", "run", "valid_cursor"]
