"""Running a path query's plan (language.py) over a `Tree`, the caller's view of one snapshot: in a
fixed order (names at each level, columns in table order), from a cursor, within a bound on the nodes
it visits. No I/O."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from .language import Column, Entry, LIKE_WORK_PER_NODE, NAMESPACE, PSEUDO, PSEUDO_ON, Plan, RANK, Step, Tree, kind_of


class OverBudget(Exception):
    """The run visited as many nodes as it may (the hard bound) before finishing."""


class Unread(Exception):
    """Raised by a Tree that has not read a listing yet: the run ends its page before the node that
    needed it (its results so far hold), so that the caller can read it and go on from there."""

    def __init__(self, parent, namespace: str):
        super().__init__(namespace)
        self.parent, self.namespace = parent, namespace


class _Stop(Exception):
    def __init__(self, why: str):
        self.why = why


@dataclass
class Page:
    results: list            # nodes: assets and Columns
    after: list | None       # the cursor the next page starts after (None: the query is done, or,
                             # stopped "unread" before any progress, the cursor it started from)
    visited: int             # nodes visited
    stopped: str | None      # "max_results", "work_bound", "unread" (see `unread`) or None (done)
    unread: Unread | None = None


def entries(node, kind: str, tree: Tree) -> list:
    """A node's tag, grant or property entries."""
    if isinstance(node, Entry):
        return []
    if kind == "tag":
        tags = node.info.get("tags")
        return [Entry("tag", node, k, v) for k, v in tags.items()] if isinstance(tags, dict) else []
    if isinstance(node, Column):
        return []
    if kind == "property":
        if kind_of(node) not in PSEUDO_ON["property"]:
            return []
        props = node.info.get("properties")
        return [Entry("property", node, k, v) for k, v in props.items()] if isinstance(props, dict) else []
    return [Entry("grant", node, p, priv) for p, privs in sorted(tree.grants(node).items()) for priv in sorted(privs)]


def children(node, kinds: tuple[str, ...], tree: Tree) -> list:
    """A node's children of these kinds, in the query's order: (name, kind rank) for assets, the
    table's order for columns."""
    if isinstance(node, (Column, Entry)):
        return []
    if kinds == ("column",):
        if node is None or node.type != "table":
            return []
        cols = node.info.get("columns") or []
        return [Column(node, i, c) for i, c in enumerate(cols) if isinstance(c, dict)]
    namespaces = dict.fromkeys(NAMESPACE[k] for k in kinds if k in NAMESPACE)
    want = set(kinds)
    out = []
    for ns in namespaces:
        listed = tree.children(node, ns)
        if ns == "table" and not ({"table", "view"} <= want):
            listed = [a for a in listed if kind_of(a) in want]
        out.append(listed)
    if len(out) == 1:
        return out[0]
    return sorted((a for listed in out for a in listed), key=_key)


def named(kids: list, step: Step) -> list:
    """The children a step's filter may hold for: those of its `name_eq` when it has one (assets
    come sorted by name: two bisections instead of a scan, as TreeCat's planner bounds its scans)."""
    if step.name_eq is None or not kids:
        return kids
    lo = bisect.bisect_left(kids, step.name_eq, key=_name)
    return kids[lo:bisect.bisect_right(kids, step.name_eq, lo=lo, key=_name)]


def _name(node) -> str:
    return node.name


def _key(node) -> tuple:
    if isinstance(node, Column):
        return ("", node.index)
    return (node.name, RANK[kind_of(node)])


class _Run:
    def __init__(self, plan: Plan, tree: Tree, *, limit: int, budget: int, hard: int):
        self.plan, self.tree = plan, tree
        self.limit, self.budget, self.hard = limit, budget, hard
        self.visited = 0
        self.results: list = []
        self.last: tuple | None = None
        self.progress = False

    def visit(self) -> None:
        self.visited += 1
        if self.visited > self.hard:
            raise _Stop("hard")

    def charge(self, comparisons: int) -> None:
        """Count the character comparisons of a `like` as nodes visited (LIKE_WORK_PER_NODE each)."""
        if comparisons >= LIKE_WORK_PER_NODE:
            self.visited += comparisons // LIKE_WORK_PER_NODE
            if self.visited > self.hard:
                raise _Stop("hard")

    def exists(self, node, path: list[Step], i: int) -> bool:
        step = path[i]
        kinds = step.kinds
        kids = entries(node, kinds[0], self.tree) if kinds[0] in PSEUDO else named(children(node, kinds, self.tree), step)
        last = i == len(path) - 1
        for kid in kids:
            self.visit()
            if (step.test is None or step.test(kid, self.tree, self)) and (last or self.exists(kid, path, i + 1)):
                return True
        return False

    def walk(self, depth: int, parent, path: tuple, cursor: tuple | None) -> None:
        step = self.plan.steps[depth]
        kids = named(children(parent, step.kinds, self.tree), step)
        start = bisect.bisect_left(kids, cursor[0], key=_key) if cursor else 0
        final = depth == len(self.plan.steps) - 1
        for node in kids[start:] if start else kids:
            key = _key(node)
            below = None
            if cursor and key == cursor[0]:
                if len(cursor) == 1:
                    continue            # done on an earlier page
                below = cursor[1:]
            if self.progress and self.visited >= self.budget:
                raise _Stop("budget")
            self.visit()
            here = path + (key,)
            if step.test is None or step.test(node, self.tree, self):
                if final:
                    self.results.append(node)
                    self.last, self.progress = here, True
                    if len(self.results) >= self.limit:
                        raise _Stop("limit")
                    continue
                self.walk(depth + 1, node, here, below)
            self.last, self.progress = here, True


def run(plan: Plan, tree: Tree, *, after: list | None = None, limit: int = 1000, budget: int = 100_000,
        hard: int | None = None) -> Page:
    """Run `plan` over `tree` from just after the cursor `after` (None: from the start): at most
    `limit` results. Past `budget` visited nodes the page ends at the last node done (at least one
    is always done: a page makes progress); past `hard` (default: `budget`) it ends even inside a
    node, and if no node was done yet, `OverBudget`. A listing the tree has not read (`Unread`)
    ends the page before the node that needed it, stopped "unread"."""
    r = _Run(plan, tree, limit=limit, budget=budget, hard=max(hard or budget, budget))
    cursor = tuple(tuple(k) for k in after) if after else None
    try:
        r.walk(0, None, (), cursor)
    except Unread as unread:
        return Page(r.results, [list(k) for k in r.last] if r.progress else after, r.visited, "unread", unread)
    except _Stop as stop:
        if stop.why == "hard" and not r.progress:
            raise OverBudget(r.visited) from None
        return Page(r.results, [list(k) for k in r.last], r.visited,
                    "max_results" if stop.why == "limit" else "work_bound")
    return Page(r.results, None, r.visited, None)


def valid_cursor(value, plan: Plan) -> bool:
    """Whether a decoded cursor has the shape `run` gives: at most one [name, rank] per step."""
    return (isinstance(value, list) and 0 < len(value) <= len(plan.steps)
            and all(isinstance(k, list) and len(k) == 2 and isinstance(k[0], str) and type(k[1]) is int
                    for k in value))


def describe(node) -> dict:
    """A result as the API answers it."""
    if isinstance(node, Column):
        c, table = node.info, node.table
        out = {"kind": "column", "full_name": f"{table.full_name}.{c.get('name')}", "name": c.get("name"),
               "table_full_name": table.full_name, "table_id": table.id, "position": node.index}
        for key in ("type_name", "type_text", "comment", "nullable", "tags"):
            if c.get(key) is not None:
                out[key] = c[key]
        return out
    kind = kind_of(node)
    out = {"kind": kind, "securable_type": "REGISTERED_MODEL" if kind == "model" else node.type.upper(),
           "full_name": node.full_name, "name": node.name, "id": node.id}
    for key in ("owner", "comment", "table_type", "data_source_format", "volume_type", "created_at", "updated_at",
                "tags"):
        if node.info.get(key) is not None:
            out[key] = node.info[key]
    return out
