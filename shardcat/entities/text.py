"""What text a request may bring in: refusals for what PostgreSQL cannot store or no parameter holds.

PostgreSQL refuses NUL in text and cannot encode an unpaired surrogate; a query parameter, a
path segment or a value decoded from a page token or a filter holds neither, nor any other
control character. Every such refusal is a 400 that names where the text came from.
"""

from __future__ import annotations

from ..errors import invalid


def bad_char(text: str, controls: bool = True) -> str | None:
    """What is wrong with `text` as request text (None: nothing). `controls`: refuse every control
    character, not only NUL."""
    if text.isascii():
        if text.isprintable() or not controls and "\x00" not in text:
            return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "an unpaired surrogate (not valid Unicode)"
    for c in text:
        if c == "\x00":
            return "a NUL character (U+0000)"
        if controls and (c < " " or "\x7f" <= c < "\xa0"):
            return f"a control character (U+{ord(c):04X})"
    return None


def check_text(text: str, what: str, controls: bool = True) -> str:
    """`text` unchanged if it is fit to reach the database; else a 400 naming `what` it is."""
    wrong = bad_char(text, controls)
    if wrong is not None:
        raise invalid(f"{what} contains {wrong}, which is not allowed.")
    return text
