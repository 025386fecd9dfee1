"""The path query language: a query's tokens, its parse into a plan of steps and filters, and the
fields a filter reads off a node (docs/queries.md). Running a plan is run.py's."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ...errors import invalid
from ..like import LikePattern
from ..types import VIEW_TYPES

MAX_QUERY_CHARS = 4000
MAX_NESTING = 32          # brackets, parentheses and exists() inside one another
# A `like` over a long text costs as many nodes visited as it makes character comparisons over this
# (about the time of one visit): a field of a few hundred characters costs nothing more.
LIKE_WORK_PER_NODE = 1000

# ---- the hierarchy ----------------------------------------------------------------------------

# A kind -> the asset namespace its nodes are listed from (columns, tags, grants, properties are
# read off their asset: no listing).
NAMESPACE = {"catalog": "catalog", "schema": "schema", "table": "table", "view": "table", "volume": "volume",
             "function": "function", "model": "registered_model"}
ASSET_KINDS = tuple(NAMESPACE)
# The order of kinds sharing a level (a step naming several walks them merged by name, then this).
RANK = {"catalog": 0, "schema": 0, "table": 0, "view": 0, "volume": 1, "function": 2, "model": 3, "column": 0}
CHILDREN = {"metastore": ("catalog",), "catalog": ("schema",), "schema": ("table", "view", "volume", "function", "model"),
            "table": ("column",), "view": ("column",)}
PSEUDO = ("tag", "grant", "property")
PSEUDO_ON = {"tag": ASSET_KINDS + ("column",), "grant": ASSET_KINDS,
             "property": ("catalog", "schema", "table", "view")}
_SPELLINGS = {**{k: k for k in (*ASSET_KINDS, "column", *PSEUDO)},
              **{k + "s": k for k in (*ASSET_KINDS, "column", "tag", "grant")},
              "properties": "property", "registered_model": "model", "registered_models": "model"}


def kind_of(asset) -> str:
    """The query kind of an asset: its type, a table whose type is a view's being a `view`."""
    t = asset.type
    if t == "table":
        return "view" if asset.info.get("table_type") in VIEW_TYPES else "table"
    return "model" if t == "registered_model" else t


class Column:
    """A table's column as a node: its table, its place in the table's list, its entry."""
    __slots__ = ("table", "index", "info")

    def __init__(self, table, index: int, info: dict):
        self.table, self.index, self.info = table, index, info


class Entry:
    """A tag, grant or property entry as a node (only inside filters)."""
    __slots__ = ("kind", "owner", "a", "b")

    def __init__(self, kind: str, owner, a: str, b):
        self.kind, self.owner, self.a, self.b = kind, owner, a, b


class Tree(Protocol):
    """The caller's view of one snapshot of a metastore: only what the caller may see."""

    def children(self, parent, namespace: str) -> list:
        """The visible children of an asset (None: the metastore) in a namespace, sorted by name."""

    def grants(self, asset) -> dict:
        """The grants on an asset the caller may read: {principal: privileges}; {} if it may not."""

    def owner_kind(self, principal: str | None) -> str | None:
        """"user", "group" or "service_principal"; None for no owner."""


# ---- fields -----------------------------------------------------------------------------------

def _time(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _info(key: str):
    return lambda n, tree: n.info.get(key)


def _storage(n, tree):
    return n.info.get("storage_location") or n.info.get("storage_root")


def _column_type(n, tree):
    return n.info.get("type_name")


def _position(n, tree):
    p = n.info.get("position")
    return p if isinstance(p, int) and not isinstance(p, bool) else n.index


_ANY = ASSET_KINDS + ("column",)
_TABLES = ("table", "view")
# field -> {kinds it applies to: getter(node, tree)}; a field absent for a node's kind reads as null.
FIELDS: dict[str, dict[tuple, Callable]] = {
    "name": {ASSET_KINDS: lambda n, t: n.name, ("column",): lambda n, t: n.info.get("name"),
             ("tag", "property"): lambda n, t: n.a},
    "full_name": {ASSET_KINDS: lambda n, t: n.full_name,
                  ("column",): lambda n, t: f"{n.table.full_name}.{n.info.get('name')}"},
    "kind": {_ANY: lambda n, t: "column" if isinstance(n, Column) else kind_of(n),
             PSEUDO: lambda n, t: n.kind},
    "id": {ASSET_KINDS: lambda n, t: n.id},
    "owner": {ASSET_KINDS: lambda n, t: n.info.get("owner")},
    "owner_kind": {ASSET_KINDS: lambda n, t: t.owner_kind(n.info.get("owner"))},
    "comment": {_ANY: lambda n, t: n.info.get("comment")},
    "created_at": {ASSET_KINDS: lambda n, t: _time(n.info.get("created_at"))},
    "updated_at": {ASSET_KINDS: lambda n, t: _time(n.info.get("updated_at"))},
    "created_by": {ASSET_KINDS: _info("created_by")},
    "updated_by": {ASSET_KINDS: _info("updated_by")},
    "storage": {("catalog", "schema", "table", "volume", "model"): _storage},
    "table_type": {_TABLES: _info("table_type")},
    "format": {_TABLES: _info("data_source_format")},
    "volume_type": {("volume",): _info("volume_type")},
    "data_type": {("function",): _info("data_type")},
    "type": {("column",): _column_type},
    "type_text": {("column",): _info("type_text")},
    "nullable": {("column",): lambda n, t: n.info.get("nullable", True) is not False},
    "position": {("column",): _position},
    "partition_index": {("column",): _info("partition_index")},
    "key": {("tag", "property"): lambda n, t: n.a},
    "value": {("tag", "property"): lambda n, t: n.b},
    "principal": {("grant",): lambda n, t: n.a},
    "privilege": {("grant",): lambda n, t: n.b},
}
TIME_FIELDS = ("created_at", "updated_at")
MAPS = {"tags": _ANY, "properties": ("catalog", "schema", "table", "view")}


def _node_kind(n) -> str:
    if isinstance(n, Column):
        return "column"
    if isinstance(n, Entry):
        return n.kind
    return kind_of(n)


def _getter(name: str, kinds: tuple[str, ...], where: int) -> Callable:
    table = FIELDS.get(name)
    if table is None:
        raise _error(where, f"unknown field '{name}'; the fields are {', '.join(FIELDS)} and "
                            "tags[\"key\"], properties[\"key\"]")
    by_kind = {k: get for applies, get in table.items() for k in applies}
    if not set(kinds) & set(by_kind):
        usable = sorted(f for f, t in FIELDS.items() if set(kinds) & {k for a in t for k in a})
        raise _error(where, f"field '{name}' does not apply to {' or '.join(kinds)}; "
                            f"{'its' if len(kinds) == 1 else 'their'} fields are {', '.join(usable)}")
    if len(kinds) == 1:
        get = by_kind.get(kinds[0])
        return get if get is not None else (lambda n, t: None)
    return lambda n, t: (by_kind.get(_node_kind(n)) or (lambda n, t: None))(n, t)


_ABSENT = object()      # a map key not held (a tag may be held without a value: that is None)


def _map_getter(name: str, key: str, kinds: tuple[str, ...], where: int) -> Callable:
    """The value under `key` of a node's tags or properties, or _ABSENT."""
    if not set(kinds) & set(MAPS[name]):
        raise _error(where, f"'{name}' does not apply to {' or '.join(kinds)}")

    def get(n, t):
        if isinstance(n, Entry) or (name == "properties" and _node_kind(n) not in MAPS[name]):
            return _ABSENT
        m = n.info.get(name)
        return m.get(key, _ABSENT) if isinstance(m, dict) else _ABSENT
    return get


# ---- tokens -----------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<op>!=|<>|<=|>=|=|<|>)
  | (?P<punct>[/\[\]()|,*])
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.VERBOSE)
_KEYWORDS = {"and", "or", "not", "exists", "like", "in", "true", "false", "null"}
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True)
class _Tok:
    kind: str       # string number op punct ident keyword end
    text: str
    value: object
    at: int         # 1-based character position


def _error(at: int, message: str):
    return invalid(f"Invalid query at character {at}: {message}.")


def _unquote(text: str, at: int) -> str:
    out, i, body = [], 0, text[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\":
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise _error(at + i + 1, f"unknown escape '\\{nxt}' in a string (use \\\\ \\\" \\' \\n \\t)")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokens(query: str) -> list[_Tok]:
    out, i = [], 0
    while i < len(query):
        m = _TOKEN.match(query, i)
        if m is None:
            c = query[i]
            if c in "\"'":
                raise _error(i + 1, "a string is not closed")
            raise _error(i + 1, f"unexpected character {c!r}")
        kind, text = m.lastgroup, m.group()
        if kind == "string":
            out.append(_Tok("string", text, _unquote(text, i + 1), i + 1))
        elif kind == "number":
            out.append(_Tok("number", text, float(text) if "." in text else int(text), i + 1))
        elif kind == "ident" and text.lower() in _KEYWORDS:
            out.append(_Tok("keyword", text, text.lower(), i + 1))
        elif kind != "ws":
            out.append(_Tok(kind, text, text, i + 1))
        i = m.end()
    out.append(_Tok("end", "", None, len(query) + 1))
    return out


# ---- the plan -----------------------------------------------------------------------------------

@dataclass
class Step:
    kinds: tuple[str, ...]
    test: Callable | None            # (node, tree, run) -> bool; None: every node
    source: str = ""
    name_eq: str | None = None       # the filter holds only for nodes of this name: look them up, no scan


@dataclass
class Plan:
    """A parsed query: its main path (steps from the metastore down) and what it uses."""
    text: str
    steps: list[Step]
    uses: set[str] = field(default_factory=set)     # fields used (e.g. owner_kind: the service loads kinds)

    @property
    def result_kinds(self) -> tuple[str, ...]:
        return self.steps[-1].kinds


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = tokens(text)
        self.i = 0
        self.depth = 0
        self.uses: set[str] = set()

    # token helpers
    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def _describe(self, t: _Tok) -> str:
        return "the end of the query" if t.kind == "end" else f"'{t.text}'"

    def take(self, kind: str, text: str | None = None, what: str | None = None) -> _Tok:
        t = self.tok
        if t.kind != kind or (text is not None and t.value != text):
            raise _error(t.at, f"expected {what or repr(text or kind)} but found {self._describe(t)}")
        self.i += 1
        return t

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.tok
        return t.kind == kind and (text is None or t.value == text)

    def nest(self, t: _Tok):
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _error(t.at, f"filters nest more than {MAX_NESTING} deep")

    # grammar
    def query(self) -> Plan:
        if self.at("end"):
            raise invalid("Invalid query: it is empty; a query is a path such as /catalog/schema/table.")
        steps, parent = [], ("metastore",)
        while not self.at("end"):
            if not self.at("punct", "/"):
                raise _error(self.tok.at, f"expected '/' to start the next step but found {self._describe(self.tok)}")
            self.i += 1
            steps.append(self.step(parent, pseudo=False))
            parent = steps[-1].kinds
        return Plan(self.text, steps, self.uses)

    def test(self, parent: tuple[str, ...], pseudo: bool) -> tuple[tuple[str, ...], int]:
        t = self.tok
        allowed = tuple(dict.fromkeys(k for p in parent for k in CHILDREN.get(p, ())))
        if pseudo:
            allowed += tuple(k for k in PSEUDO if set(parent) & set(PSEUDO_ON[k]))
        where = " or ".join(parent)
        if not allowed:
            raise _error(t.at, f"{where} has no children to walk into")
        if self.at("punct", "*"):
            self.i += 1
            real = tuple(k for k in allowed if k not in PSEUDO)
            if not real:
                raise _error(t.at, f"{where} has no children to walk into with '*' (name tag, grant or property)")
            return real, t.at
        kinds = []
        while True:
            name = self.take("ident", what="a kind (catalog, schema, table, view, volume, function, model, column"
                                          + (", tag, grant, property" if pseudo else "") + ") or '*'")
            kind = _SPELLINGS.get(name.text.lower())
            if kind is None:
                raise _error(name.at, f"unknown kind '{name.text}'; the kinds are catalog, schema, table, view, "
                                      "volume, function, model, column" + (", tag, grant, property" if pseudo else ""))
            if kind not in allowed:
                if kind in PSEUDO and not pseudo:
                    raise _error(name.at, f"'{kind}' entries can only be tested inside a filter, "
                                          f"e.g. [exists({kind}[...])]")
                raise _error(name.at, f"a {kind} is not a child of {'the metastore' if parent == ('metastore',) else where}"
                                      f"; here the path can walk into {', '.join(allowed)}")
            kinds.append(kind)
            if not self.at("punct", "|"):
                break
            self.i += 1
        if len(set(kinds)) > 1 and set(kinds) & set(PSEUDO):
            raise _error(t.at, "a tag, grant or property step names that kind alone")
        return tuple(dict.fromkeys(kinds)), t.at

    def step(self, parent: tuple[str, ...], pseudo: bool) -> Step:
        start = self.tok.at
        kinds, _ = self.test(parent, pseudo)
        test = None
        if self.at("punct", "["):
            open_ = self.take("punct", "[")
            self.nest(open_)
            test = self.expr(kinds)
            if not self.at("punct", "]"):
                raise _error(self.tok.at, f"expected ']' to close the filter opened at character {open_.at} "
                                          f"but found {self._describe(self.tok)}")
            self.i += 1
            self.depth -= 1
        name_eq = getattr(test, "name_eq", None) if "column" not in kinds else None
        return Step(kinds, test, self.text[start - 1:self.tok.at - 1].strip(), name_eq)

    def expr(self, kinds):
        left = self.conj(kinds)
        while self.at("keyword", "or"):
            self.i += 1
            right = self.conj(kinds)
            left = (lambda a, b: lambda n, t, r: a(n, t, r) or b(n, t, r))(left, right)
        return left

    def conj(self, kinds):
        left = self.unary(kinds)
        while self.at("keyword", "and"):
            self.i += 1
            right = self.unary(kinds)
            name_eq = getattr(left, "name_eq", None) or getattr(right, "name_eq", None)
            left = (lambda a, b: lambda n, t, r: a(n, t, r) and b(n, t, r))(left, right)
            if name_eq is not None:     # `name = "x" and ...` holds only for nodes named x
                left.name_eq = name_eq
        return left

    def unary(self, kinds):
        if self.at("keyword", "not"):
            t = self.take("keyword", "not")
            self.nest(t)
            inner = self.unary(kinds)
            self.depth -= 1
            return lambda n, tr, r: not inner(n, tr, r)
        if self.at("punct", "("):
            open_ = self.take("punct", "(")
            self.nest(open_)
            inner = self.expr(kinds)
            if not self.at("punct", ")"):
                raise _error(self.tok.at, f"expected ')' to close the '(' at character {open_.at} "
                                          f"but found {self._describe(self.tok)}")
            self.i += 1
            self.depth -= 1
            return inner
        if self.at("keyword", "exists"):
            return self.exists(kinds)
        return self.comparison(kinds)

    def exists(self, kinds):
        t = self.take("keyword", "exists")
        open_ = self.take("punct", "(", "'(' after exists")
        self.nest(open_)
        path, parent = [], kinds
        while True:
            step = self.step(parent, pseudo=True)
            path.append(step)
            parent = step.kinds
            if not self.at("punct", "/"):
                break
            if set(step.kinds) & set(PSEUDO):
                raise _error(self.tok.at, f"a {step.kinds[0]} has no children to walk into")
            self.i += 1
        if not self.at("punct", ")"):
            raise _error(self.tok.at, f"expected ')' to close exists( at character {t.at} "
                                      f"but found {self._describe(self.tok)}")
        self.i += 1
        self.depth -= 1
        return lambda n, tr, r: r.exists(n, path, 0)

    def operand(self, kinds):
        """(getter(node, tree), literal or _NOT_LITERAL, field name or None, the map getter or None)."""
        t = self.tok
        if t.kind in ("string", "number"):
            self.i += 1
            return (lambda n, tr, v=t.value: v), t.value, None, None
        if t.kind == "keyword" and t.value in ("true", "false", "null"):
            self.i += 1
            value = {"true": True, "false": False, "null": None}[t.value]
            return (lambda n, tr, v=value: v), value, None, None
        if t.kind != "ident":
            raise _error(t.at, f"expected a field, a string, a number, true, false or null but found {self._describe(t)}")
        self.i += 1
        name = t.text.lower()
        if name in MAPS:
            self.take("punct", "[", f"'[' after {name} (as in {name}[\"key\"])")
            key = self.take("string", what=f"a key in quotes (as in {name}[\"key\"])")
            self.take("punct", "]", "']'")
            get = _map_getter(name, key.value, kinds, t.at)
            self.uses.add(name)
            value = lambda n, tr: (lambda v: None if v is _ABSENT else v)(get(n, tr))   # noqa: E731
            return value, _NOT_LITERAL, None, get
        get = _getter(name, kinds, t.at)
        self.uses.add(name)
        return get, _NOT_LITERAL, name, None

    def comparison(self, kinds):
        start = self.tok
        left, left_lit, left_field, left_map = self.operand(kinds)
        t = self.tok
        if t.kind == "op":
            self.i += 1
            right_tok = self.tok
            right, right_lit, right_field, _ = self.operand(kinds)
            left, right = self._times(left, left_lit, left_field, right, right_lit, right_field, right_tok, start)
            op = _OPS["!=" if t.value == "<>" else t.value]
            test = lambda n, tr, r: op(left(n, tr), right(n, tr))     # noqa: E731
            if t.value == "=" and {left_field, right_field} & {"name"} and \
                    isinstance(right_lit if left_field == "name" else left_lit, str):
                test.name_eq = right_lit if left_field == "name" else left_lit
            return test
        if t.kind == "keyword" and t.value == "like":
            self.i += 1
            pat = self.take("string", what="a pattern in quotes after like (% any text, _ one character)")
            return _like_test(left, LikePattern(pat.value, ignore_case=True))
        if t.kind == "keyword" and t.value == "not" and self.toks[self.i + 1].value in ("like", "in"):
            raise _error(t.at, "write not (x like \"...\") or not (x in (...)) instead of x not like / x not in")
        if t.kind == "keyword" and t.value == "in":
            self.i += 1
            self.take("punct", "(", "'(' after in")
            values = []
            while True:
                v_tok = self.tok
                _, lit, _, _ = self.operand(kinds)
                if lit is _NOT_LITERAL:
                    raise _error(v_tok.at, "the list after in holds literals only (strings, numbers, true, false, null)")
                if left_field in TIME_FIELDS and isinstance(lit, str):
                    lit = _parse_time(lit, v_tok.at)
                values.append(lit)
                if not self.at("punct", ","):
                    break
                self.i += 1
            self.take("punct", ")", "')' to close the list after in")
            return lambda n, tr, r: (lambda v: any(_eq(v, x) for x in values))(left(n, tr))
        # a bare operand: true when present and not empty (a map key: when held at all)
        if left_lit is not _NOT_LITERAL:
            raise _error(start.at, f"a literal alone is not a condition; compare it, as in name = {start.text}")
        if left_map is not None:
            return lambda n, tr, r: left_map(n, tr) is not _ABSENT
        return lambda n, tr, r: _truthy(left(n, tr))

    def _times(self, left, left_lit, left_field, right, right_lit, right_field, right_tok, left_tok):
        """A time field compared with a string reads the string as a date or time (UTC)."""
        if left_field in TIME_FIELDS and isinstance(right_lit, str):
            ms = _parse_time(right_lit, right_tok.at)
            right = lambda n, tr: ms    # noqa: E731
        if right_field in TIME_FIELDS and isinstance(left_lit, str):
            ms = _parse_time(left_lit, left_tok.at)
            left = lambda n, tr: ms     # noqa: E731
        return left, right


_NOT_LITERAL = object()


def _parse_time(text: str, at: int) -> int:
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        return int(when.timestamp() * 1000)
    except (ValueError, OverflowError):
        raise _error(at, f"'{text[:40]}' is not a date or time; write 2026-11-27 or 2026-11-27T10:00:00Z") from None


def _like_test(left, pattern: LikePattern):
    """`left like pattern`: matched without backtracking (entities/like.py), its work counted in the
    run's bound on work before it is done, so that no text and pattern stall the server."""
    def test(n, tr, r) -> bool:
        v = left(n, tr)
        if not isinstance(v, str):
            return False
        r.charge(pattern.work(len(v)))
        return pattern.matches(v)
    return test


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _eq(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) and _number(b):
        return a == b
    return type(a) is type(b) and a == b


def _ordered(a, b) -> bool:
    return (_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str))


_OPS = {
    "=": _eq,
    "!=": lambda a, b: not _eq(a, b),
    "<": lambda a, b: _ordered(a, b) and a < b,
    "<=": lambda a, b: _ordered(a, b) and a <= b,
    ">": lambda a, b: _ordered(a, b) and a > b,
    ">=": lambda a, b: _ordered(a, b) and a >= b,
}


def _truthy(v) -> bool:
    return v is not None and v is not False and v != "" and v != {} and v != []


def parse(text) -> Plan:
    """A query's plan; INVALID_PARAMETER_VALUE (400) naming the character where it went wrong."""
    if not isinstance(text, str):
        raise invalid("Field 'query' must be a string, such as \"/catalog/schema/table\".")
    if len(text) > MAX_QUERY_CHARS:
        raise invalid(f"Field 'query' may hold at most {MAX_QUERY_CHARS} characters.")
    return _Parser(text).query()
