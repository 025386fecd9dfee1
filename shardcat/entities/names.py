"""Name rules for securables and the parsing of dotted full names."""

from __future__ import annotations

import functools
import re

from ..errors import invalid

MAX_NAME_LENGTH = 255
# Unity Catalog refuses periods, spaces, slashes and control characters in a name.
_BAD = re.compile(r"[.\s/\x00-\x1f\x7f]")


def check_name(name, what: str) -> str:
    """Validate one name part; names are case-insensitive and stored lower-case."""
    if not isinstance(name, str) or not name:
        raise invalid(f"The {what} name must be a non-empty string.")
    if len(name) > MAX_NAME_LENGTH:
        raise invalid(f"The {what} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}.")
    bad = _BAD.search(name)
    if bad:
        raise invalid(f"The {what} name '{name}' contains an invalid character {bad.group()!r}: "
                      "names may not contain periods, spaces, slashes or control characters.")
    return name.lower()


def split_full_name(full_name: str, parts: int, what: str) -> list[str]:
    """Split and validate a dotted full name that must have exactly `parts` parts."""
    pieces = full_name.split(".") if isinstance(full_name, str) else []
    if len(pieces) != parts:
        shape = {1: "name", 2: "catalog.schema", 3: "catalog.schema.name"}[parts]
        raise invalid(f"Invalid {what} name '{full_name}': expected the form {shape}.")
    return [check_name(p, what) for p in pieces]


@functools.lru_cache(maxsize=65536)
def full_name_key(full_name: str, parts: int, what: str) -> str:
    """A full name (a str) validated and lower-cased, as assets are keyed; cached, because engines
    name the same tables over and over."""
    return ".".join(split_full_name(full_name, parts, what))
