"""SCIM 2.0 filters (RFC 7644 section 3.4.2.2), parsed and evaluated over SCIM resources (dicts).

    userName eq "alice"    emails.value co "@example.com"    active eq true and not (displayName sw "X")
    emails[type eq "work" and value ew ".org"]    members.display eq "admins"    externalId pr

Operators eq ne co sw ew gt ge lt le pr; `and` binds tighter than `or`; `not ( ... )`; value
paths `attr[filter]` over multi-valued attributes. Attribute names and string comparisons are
case-insensitive (the caseExact=false default of RFC 7643), a multi-valued attribute matches if
any of its values does. Full schema URNs are accepted as attribute prefixes.

The listings this serves are an account's principals, small enough to filter in memory; that
keeps multi-valued attributes (emails, groups, members) and extension attributes uniform.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ..errors import invalid

Predicate = Callable[[dict], bool]

_TOKEN = re.compile(r'''\s*(?:(?P<punct>[()\[\]])|(?P<string>"(?:[^"\\]|\\.)*")|(?P<word>[^\s()\[\]"]+))''')
_OPERATORS = {"eq", "ne", "co", "sw", "ew", "gt", "ge", "lt", "le"}
_MISSING = object()


def parse(text: str) -> Predicate:
    """A predicate over SCIM resources; INVALID_PARAMETER_VALUE (400) naming the problem if `text` is not a filter."""
    tokens = _tokenize(text)
    parser = _Parser(tokens, text)
    predicate = parser.disjunction()
    if parser.pos != len(tokens):
        parser.fail(f"unexpected '{tokens[parser.pos][1]}'")
    return predicate


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise invalid(f"Invalid SCIM filter '{text:.200}': cannot read it at position {pos}.")
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], text: str):
        self.tokens = tokens
        self.text = text
        self.pos = 0

    def fail(self, why: str):
        raise invalid(f"Invalid SCIM filter '{self.text:.200}': {why}.")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            self.fail("it ends too early")
        self.pos += 1
        return token

    def expect(self, punct: str) -> None:
        token = self.peek()
        if token != ("punct", punct):
            self.fail(f"expected '{punct}'" + (f", got '{token[1]}'" if token else " before the end"))
        self.pos += 1

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token and token[0] == "word" and token[1].lower() == word:
            self.pos += 1
            return True
        return False

    def disjunction(self) -> Predicate:
        parts = [self.conjunction()]
        while self.keyword("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda r: any(p(r) for p in parts))

    def conjunction(self) -> Predicate:
        parts = [self.term()]
        while self.keyword("and"):
            parts.append(self.term())
        return parts[0] if len(parts) == 1 else (lambda r: all(p(r) for p in parts))

    def term(self) -> Predicate:
        if self.keyword("not"):
            self.expect("(")
            inner = self.disjunction()
            self.expect(")")
            return lambda r: not inner(r)
        if self.peek() == ("punct", "("):
            self.take()
            inner = self.disjunction()
            self.expect(")")
            return inner
        kind, path = self.take()
        if kind != "word":
            self.fail(f"expected an attribute name, got {path}")
        if self.peek() == ("punct", "["):       # attr[filter]: some element of attr satisfies filter
            self.take()
            inner = self.disjunction()
            self.expect("]")
            rest = self._subattribute()
            if rest:
                self.fail("a sub-attribute after a value path is not supported in filters")
            return lambda r: any(isinstance(v, dict) and inner(v) for v in _values(r, path, complex_=True))
        op_kind, op = self.take()
        op = op.lower()
        if op_kind != "word" or (op != "pr" and op not in _OPERATORS):
            self.fail(f"'{op}' is not an operator (eq ne co sw ew gt ge lt le pr)")
        if op == "pr":
            return lambda r: any(v not in (None, "", [], {}) for v in _values(r, path))
        value = self._value()
        if op == "ne":
            return lambda r: not any(_compare("eq", v, value) for v in _values(r, path))
        return lambda r: any(_compare(op, v, value) for v in _values(r, path))

    def _subattribute(self) -> str | None:
        token = self.peek()
        if token and token[0] == "word" and token[1].startswith("."):
            self.pos += 1
            return token[1]
        return None

    def _value(self) -> Any:
        kind, raw = self.take()
        if kind == "string":
            return json.loads(raw)
        if kind == "word":
            low = raw.lower()
            if low in ("true", "false"):
                return low == "true"
            if low == "null":
                return None
            try:
                return float(raw) if any(c in raw for c in ".eE") else int(raw)
            except ValueError:
                pass
        self.fail(f"expected a value (a \"string\", a number, true, false or null), got {raw}")


def _get(obj: Any, name: str) -> Any:
    if not isinstance(obj, dict):
        return _MISSING
    for key, value in obj.items():
        if key.lower() == name.lower():
            return value
    return _MISSING


def _values(resource: dict, path: str, *, complex_: bool = False) -> list:
    """Every value `path` reaches in `resource`, flattening multi-valued attributes; complex values
    stand for their "value" sub-attribute unless `complex_` (a value path filters them whole)."""
    current: list = [resource]
    if path.lower().startswith("urn:"):
        # The longest schema URN the path starts with: an extension key, or a core schema (top level).
        schemas = [k for k in resource if k.lower().startswith("urn:")] + list(resource.get("schemas") or [])
        prefix = max((s for s in schemas if path.lower().startswith(s.lower() + ":")), key=len, default=None)
        if prefix is None:
            return []
        extension = _get(resource, prefix)
        current = [extension] if extension is not _MISSING else [resource]
        path = path[len(prefix) + 1:]
    for name in path.split("."):
        found = []
        for obj in current:
            value = _get(obj, name)
            if value is _MISSING or value is None:
                continue
            found.extend(value if isinstance(value, list) else [value])
        current = found
    if complex_:
        return current
    return [_get(v, "value") if isinstance(v, dict) and _get(v, "value") is not _MISSING else v for v in current]


def _compare(op: str, actual: Any, expected: Any) -> bool:
    if expected is None:
        return op == "eq" and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return op == "eq" and actual is expected
    if isinstance(expected, (int, float)) and not isinstance(actual, bool):
        try:
            a = float(actual)
        except (TypeError, ValueError):
            return False
        return _ORDER[op](a, float(expected)) if op in _ORDER else (op == "eq" and a == expected)
    if not isinstance(actual, (str, int, float)):
        return False
    a, e = str(actual).lower(), str(expected).lower()
    if op == "eq":
        return a == e
    if op == "co":
        return e in a
    if op == "sw":
        return a.startswith(e)
    if op == "ew":
        return a.endswith(e)
    return _ORDER[op](a, e) if op in _ORDER else False


_ORDER = {"gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}
