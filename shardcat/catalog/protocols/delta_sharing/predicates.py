"""File skipping for Delta Sharing: the protocol's JSON predicate hints, evaluated on a file's
partition values and statistics, and a share's partition filters (pure; no I/O).

Predicate hints are best effort (PROTOCOL.md "JSON predicates for Filtering"): a file is dropped
only when its partition values or min/max statistics prove no row can match; a hint that does not
parse, or names a column the table lacks, filters nothing. A share's partition filter is the
opposite: an enforcement, so a file is kept only when its partition values match.
"""

from __future__ import annotations

import datetime as dt
import json
import re

from ....entities.like import LikePattern

_LEAVES = ("column", "literal")
_COMPARE = {"equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"}
_NUMERIC = {"int", "long", "float", "double"}
MAX_DEPTH = 64
MAX_NODES = 10_000


class PredicateError(ValueError):
    """A hint that cannot be evaluated: the server then filters nothing by it."""


def parse_hint(text: str | None, columns: dict[str, str]) -> dict | None:
    """A JSON predicate tree checked against the table's columns (name -> Delta type), or None when
    it is absent or cannot be used (best effort: such a hint skips no file)."""
    if not text:
        return None
    try:
        tree = json.loads(text) if isinstance(text, str) else None
        _check(tree, {c.lower() for c in columns}, 0, [0])
        return tree
    except (ValueError, TypeError, RecursionError):
        return None


def _check(node, columns: set[str], depth: int, count: list[int]) -> None:
    count[0] += 1
    if not isinstance(node, dict) or depth > MAX_DEPTH or count[0] > MAX_NODES:
        raise PredicateError("not a predicate tree")
    op, children = node.get("op"), node.get("children") or []
    if op == "column":
        if not isinstance(node.get("name"), str) or node["name"].lower() not in columns:
            raise PredicateError("unknown column")
        return
    if op == "literal":
        _cast(node.get("value"), node.get("valueType"))
        return
    arity = {"isNull": 1, "not": 1}.get(op, 2 if op in _COMPARE else None)
    if op in ("and", "or"):
        if len(children) < 2:
            raise PredicateError(f"{op} needs two children or more")
    elif arity is None or len(children) != arity:
        raise PredicateError(f"unknown op or wrong arity: {op!r}")
    if op in _COMPARE and not all(isinstance(c, dict) and c.get("op") in _LEAVES for c in children):
        raise PredicateError("comparisons take leaves")
    if op == "isNull" and not (isinstance(children[0], dict) and children[0].get("op") == "column"):
        raise PredicateError("isNull takes a column")
    for child in children:
        _check(child, columns, depth + 1, count)


def _cast(value, value_type):
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value) if isinstance(value, bool) else str(value)
    if value_type in ("int", "long"):
        return int(value)
    if value_type in ("float", "double"):
        return float(value)
    if value_type == "bool":
        if value.lower() not in ("true", "false"):
            raise PredicateError(f"not a bool: {value!r:.40}")
        return value.lower() == "true"
    if value_type == "date":
        return dt.date.fromisoformat(value[:10])
    if value_type == "timestamp":
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T"))
    if value_type == "string":
        return value
    raise PredicateError(f"unknown valueType {value_type!r:.40}")


class _Range:
    """What a leaf may be in one file: between lo and hi (None: unbounded), maybe null."""

    def __init__(self, lo=None, hi=None, nulls=True, values=True):
        self.lo, self.hi, self.nulls, self.values = lo, hi, nulls, values


class FileFacts:
    """A file's partition values and statistics, as the predicates see them."""

    def __init__(self, partition_values: dict, stats: str | dict | None, partition_columns: list[str]):
        self.partitions = {k.lower(): v for k, v in (partition_values or {}).items()}
        self.partition_columns = {c.lower() for c in partition_columns}
        try:
            self.stats = json.loads(stats) if isinstance(stats, str) else (stats or {})
        except ValueError:
            self.stats = {}

    def range_of(self, leaf: dict) -> _Range:
        if leaf["op"] == "literal":
            value = _cast(leaf.get("value"), leaf.get("valueType"))
            return _Range(value, value, nulls=value is None, values=value is not None)
        name, kind = leaf["name"].lower(), leaf.get("valueType")
        if name in self.partition_columns:
            value = _cast(self.partitions.get(name) or None, kind)
            return _Range(value, value, nulls=value is None, values=value is not None)
        # Statistics: numbers, dates and timestamps only (a string's max may be truncated).
        if kind not in _NUMERIC | {"date", "timestamp"}:
            return _Range()
        lo, hi = self._stat("minValues", name), self._stat("maxValues", name)
        try:
            lo, hi = _cast(lo, kind), _cast(hi, kind)
        except (ValueError, TypeError):
            return _Range()
        nulls = self._stat("nullCount", name)
        records = self.stats.get("numRecords")
        return _Range(lo, hi, nulls=nulls is None or nulls > 0,
                      values=not (isinstance(nulls, int) and isinstance(records, int) and nulls >= records))

    def _stat(self, section: str, name: str):
        values = self.stats.get(section) or {}
        for key, value in values.items():
            if key.lower() == name and not isinstance(value, dict):
                return value
        return None


def may_match(tree: dict | None, facts: FileFacts) -> bool:
    """Whether some row of the file may satisfy the hint (True when unsure)."""
    if tree is None:
        return True
    try:
        return _may(tree, facts, True)
    except (ValueError, TypeError, ArithmeticError):
        return True     # values the hint's types cannot compare: best effort keeps the file


def _may(node: dict, facts: FileFacts, want: bool) -> bool:
    """Whether the node may evaluate to `want` for some row of the file."""
    op, children = node["op"], node.get("children") or []
    if op == "not":
        return _may(children[0], facts, not want)
    if op in ("and", "or"):
        every = (op == "and") == want
        results = (_may(c, facts, want) for c in children)
        return all(results) if every else any(results)
    if op == "isNull":
        r = facts.range_of(children[0])
        return r.nulls if want else r.values
    a, b = facts.range_of(children[0]), facts.range_of(children[1])
    if not (a.values and b.values):
        return False        # a comparison with null is neither true nor false
    if op in ("greaterThan", "greaterThanOrEqual"):
        a, b = b, a
        op = "lessThan" if op == "greaterThan" else "lessThanOrEqual"
    unbounded = None in (a.lo, a.hi, b.lo, b.hi)
    if unbounded:
        return True
    if op == "equal":
        return a.lo <= b.hi and b.lo <= a.hi if want else not (a.lo == a.hi == b.lo == b.hi)
    if op == "lessThan":
        return a.lo < b.hi if want else a.hi >= b.lo
    return a.lo <= b.hi if want else a.hi > b.lo     # lessThanOrEqual


# ---- a share's partition filters ---------------------------------------------------------


def partition_filter(partitions: list[dict] | None, recipient_properties: dict[str, str],
                     partition_columns: list[str]):
    """A share object's `partitions` as a test of a file's partition values (None: every file).
    A file is shared when one of the partitions matches all of its values (EQUAL, or LIKE with
    SQL's % and _); a value may be the reading recipient's property (CURRENT_RECIPIENT()).
    ValueError when the filter names a column the table is not partitioned by, or a recipient
    property the recipient does not have: the share cannot be enforced, so nothing is read."""
    if not partitions:
        return None
    columns = {c.lower(): c for c in partition_columns}
    specs = []
    for p in partitions:
        tests = []
        for v in p.get("values", []):
            column = columns.get(v["name"].lower())
            if column is None:
                raise ValueError(f"the share filters on '{v['name']}', which does not partition the table")
            if "recipient_property_key" in v:
                value = recipient_properties.get(v["recipient_property_key"])
                if value is None:
                    raise ValueError(f"the share filters on recipient property "
                                     f"'{v['recipient_property_key']}', which this recipient lacks")
            else:
                value = v.get("value")
            op = v.get("op", "EQUAL")
            # compiled once per filter, matched without backtracking (a pattern is its share owner's text)
            tests.append((column, op, LikePattern(value) if op == "LIKE" and value is not None else value))
        specs.append(tests)

    def test(values: dict) -> bool:
        return any(all(_partition_matches(values.get(c), op, value) for c, op, value in tests) for tests in specs)

    return test


def _partition_matches(actual: str | None, op: str, expected: str | LikePattern | None) -> bool:
    if expected is None:
        return actual is None or actual == ""
    if actual is None:
        return False
    if op == "LIKE":
        return expected.matches(actual)
    return actual == expected


# ---- the deprecated SQL predicate hints ----------------------------------------------------

_SQL = re.compile(r"""^\s*(?:(?P<col>[A-Za-z_][\w]*)\s*(?P<op><>|<=|>=|!=|=|<|>)\s*(?P<lit>'(?:[^']|'')*'|[-+\w.:]+)
                      |(?P<lit2>'(?:[^']|'')*'|[-+\w.:]+)\s*(?P<op2><>|<=|>=|!=|=|<|>)\s*(?P<col2>[A-Za-z_][\w]*)
                      |(?P<col3>[A-Za-z_][\w]*)\s+IS\s+(?P<not>NOT\s+)?NULL)\s*$""", re.X | re.I)
_VALUE_TYPES = {"byte": "int", "short": "int", "integer": "int", "long": "long", "float": "float", "double": "double",
                "string": "string", "date": "date", "timestamp": "timestamp", "timestamp_ntz": "timestamp",
                "boolean": "bool"}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "<>": "<>", "!=": "<>"}
_OPS = {"=": "equal", "<": "lessThan", "<=": "lessThanOrEqual", ">": "greaterThan", ">=": "greaterThanOrEqual"}


def parse_sql_hints(hints, columns: dict[str, str]) -> dict | None:
    """The protocol's SQL predicate hints (`col op literal`, `literal op col`, `col IS [NOT] NULL`,
    AND-ed) as one JSON predicate tree; those that do not parse, or name an unknown column or a
    type without a value type, are left out (best effort)."""
    if not isinstance(hints, list):
        return None
    types = {name.lower(): (name, _VALUE_TYPES.get(kind)) for name, kind in columns.items()}
    trees = []
    for hint in hints[:100]:
        m = _SQL.match(hint) if isinstance(hint, str) and len(hint) < 1000 else None
        if m is None:
            continue
        if m["col3"]:
            name, kind = types.get(m["col3"].lower(), (None, None))
            if name is None or kind is None:
                continue
            tree = {"op": "isNull", "children": [{"op": "column", "name": name, "valueType": kind}]}
            trees.append({"op": "not", "children": [tree]} if m["not"] else tree)
            continue
        col, op, lit = (m["col"], m["op"], m["lit"]) if m["col"] else (m["col2"], _FLIP[m["op2"]], m["lit2"])
        name, kind = types.get(col.lower(), (None, None))
        if name is None or kind is None:
            continue
        value = lit[1:-1].replace("''", "'") if lit.startswith("'") else lit
        try:
            _cast(value, kind)
        except (ValueError, PredicateError):
            continue
        leaves = [{"op": "column", "name": name, "valueType": kind}, {"op": "literal", "value": value, "valueType": kind}]
        if op in ("<>", "!="):
            trees.append({"op": "not", "children": [{"op": "equal", "children": leaves}]})
        else:
            trees.append({"op": _OPS[op], "children": leaves})
    if not trees:
        return None
    return trees[0] if len(trees) == 1 else {"op": "and", "children": trees}
