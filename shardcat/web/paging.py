"""Paging: the page size a list asks for, and the opaque token that carries where the next page starts
(every list's: names, search ranks, file names, audit ids)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

from ..errors import invalid

DEFAULT_PAGE = 1000
MAX_PAGE = 10000


def encode_token(value, key: str = "after") -> str:
    """A page token carrying `value` (JSON) under `key`: where the next page starts."""
    return base64.urlsafe_b64encode(json.dumps({key: value}).encode()).decode()


def decode_token(token: str, key: str, valid: Callable[[object], bool]):
    """The value a token of `encode_token` carries under `key`, if `valid` accepts it; a clear 400 otherwise."""
    try:
        value = json.loads(base64.urlsafe_b64decode(token.encode()))[key]
        if valid(value):
            return value
    except (ValueError, KeyError, TypeError):
        pass
    raise invalid(f"Invalid page_token '{token:.40}': use the next_page_token of a previous response.")


def encode_page_token(after: str) -> str:
    return encode_token(after)


def decode_page_token(token: str | None) -> str:
    return decode_token(token, "after", _text) if token else ""


def _text(value) -> bool:
    if isinstance(value, str) and "\x00" not in value:
        value.encode("utf-8")   # an unpaired surrogate raises UnicodeEncodeError, a ValueError
        return True
    return False


def page_size(max_results) -> int:
    if max_results is None:
        return DEFAULT_PAGE
    if isinstance(max_results, str):
        try:
            max_results = int(max_results)
        except ValueError:
            raise invalid(f"max_results must be an integer, got '{max_results:.40}'.") from None
    if not isinstance(max_results, int) or isinstance(max_results, bool) or max_results < 0:
        raise invalid(f"max_results must be a non-negative integer, got {max_results!r:.40}.")
    return min(max_results or DEFAULT_PAGE, MAX_PAGE)
