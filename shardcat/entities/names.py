"""Name rules for securables and principals, and the parsing of dotted full names.

Every asset name (and every principal name) passes through here, on create and on lookup
alike: a name is normalised to Unicode NFC, so `café` typed precomposed or decomposed is one
name, and characters that look like nothing are refused (format characters such as zero-width
spaces, bidi overrides, soft hyphens and the byte-order mark; controls; unpaired surrogates;
noncharacters), so two names that look the same are the same name. An asset's name may not begin
with a combining mark (it would combine with the character before it in a full name).
"""

from __future__ import annotations

import functools
import re
import unicodedata

from ..errors import invalid

MAX_NAME_LENGTH = 255
MAX_PRINCIPAL_LENGTH = 255      # principal names (users' emails, group names, application ids)
# Unity Catalog refuses periods, spaces, slashes and control characters in a name.
_BAD = re.compile(r"[.\s/\x00-\x1f\x7f]")
# Categories no name may hold: Cc controls, Cf format (ZWSP, bidi marks and overrides, soft hyphen,
# BOM...), Cs unpaired surrogates, Co private use, Cn unassigned (noncharacters included), and the
# line and paragraph separators.
_REFUSED_CATEGORIES = {"Cc": "a control character", "Cf": "an invisible format character",
                       "Cs": "an unpaired surrogate", "Co": "a private-use character",
                       "Cn": "an unassigned code point or noncharacter", "Zl": "a line separator",
                       "Zp": "a paragraph separator"}


def _refused_char(text: str) -> tuple[str, str] | None:
    """(the first character no name may hold, what it is), or None. ASCII beyond the controls is fine."""
    if text.isascii():
        if text.isprintable():      # the common case, without a loop in Python
            return None
        for c in text:
            if c < " " or c == "\x7f":
                return c, "a control character"
        return None
    for c in text:
        what = _REFUSED_CATEGORIES.get(unicodedata.category(c))
        if what is not None:
            return c, what
    return None


def normal_text_name(name, what: str, max_length: int = MAX_NAME_LENGTH) -> str:
    """A name as stored and looked up: NFC, no invisible or control characters, at most `max_length`
    characters. Case and other characters are kept (column and principal names use this)."""
    if not isinstance(name, str) or not name:
        raise invalid(f"The {what} name must be a non-empty string.")
    if not name.isascii():
        refused = _refused_char(name)      # before NFC: normalising would fail on a lone surrogate
        if refused is None:
            name = unicodedata.normalize("NFC", name)
    else:
        refused = _refused_char(name)
    if refused is not None:
        char, kind = refused
        raise invalid(f"The {what} name contains an invalid character, {kind} (U+{ord(char):04X}): "
                      "names may not hold control or invisible characters.")
    if len(name) > max_length:
        raise invalid(f"The {what} name is {len(name)} characters long; the limit is {max_length}.")
    return name


def check_name(name, what: str) -> str:
    """Validate one name part; names are NFC, case-insensitive and stored lower-case."""
    name = normal_text_name(name, what)
    bad = _BAD.search(name)
    if bad:
        raise invalid(f"The {what} name '{name}' contains an invalid character {bad.group()!r}: "
                      "names may not contain periods, spaces, slashes or control characters.")
    # a mark with nothing to combine with draws over what comes before it (the dot of a full name)
    if not name.isascii() and unicodedata.category(name[0]).startswith("M"):
        raise invalid(f"The {what} name begins with a combining mark (U+{ord(name[0]):04X}): a name must "
                      "begin with a letter, digit or symbol of its own.")
    # lower-casing can leave NFC (a few letters lower to a letter and a combining mark): normalise again
    return name.lower() if name.isascii() else unicodedata.normalize("NFC", name.lower())


def check_principal(value, what: str) -> str:
    """A principal name wherever one enters (SCIM, grants, owners, share changes): NFC, at most
    MAX_PRINCIPAL_LENGTH characters, no control or invisible characters, no surrounding spaces."""
    if not isinstance(value, str):
        raise invalid(f"'{what}' must be a string, got {type(value).__name__}.")
    if len(value) > MAX_PRINCIPAL_LENGTH:
        raise invalid(f"'{what}' is longer than {MAX_PRINCIPAL_LENGTH} characters.")
    if not value.strip() or value != value.strip():
        raise invalid(f"'{what}' must be non-empty, without leading or trailing spaces, got '{value:.80}'.")
    refused = _refused_char(value)
    if refused is not None:
        raise invalid(f"'{what}' must not contain control or invisible characters "
                      f"({refused[1]}, U+{ord(refused[0]):04X}).")
    return unicodedata.normalize("NFC", value) if not value.isascii() else value


def split_full_name(full_name: str, parts: int, what: str) -> list[str]:
    """Split and validate a dotted full name that must have exactly `parts` parts."""
    pieces = full_name.split(".") if isinstance(full_name, str) else []
    if len(pieces) != parts:
        shape = ".".join(("catalog", "schema", "name", "version")[:parts]) if parts > 1 else "name"
        raise invalid(f"Invalid {what} name '{full_name}': expected the form {shape}.")
    return [check_name(p, what) for p in pieces]


@functools.lru_cache(maxsize=65536)
def full_name_key(full_name: str, parts: int, what: str) -> str:
    """A full name (a str) validated and lower-cased, as assets are keyed; cached, because engines
    name the same tables over and over."""
    return ".".join(split_full_name(full_name, parts, what))
