"""Paging: the page size a list asks for, and the opaque token that carries where the next page starts."""

from __future__ import annotations

import base64
import json

from ..errors import invalid

DEFAULT_PAGE = 1000
MAX_PAGE = 10000


def encode_page_token(after: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode()


def decode_page_token(token: str | None) -> str:
    if not token:
        return ""
    try:
        after = json.loads(base64.urlsafe_b64decode(token.encode()))["after"]
        if isinstance(after, str) and "\x00" not in after:
            after.encode("utf-8")   # an unpaired surrogate raises UnicodeEncodeError, a ValueError
            return after
    except (ValueError, KeyError, TypeError):
        pass
    raise invalid(f"Invalid page_token '{token:.40}': use the next_page_token of a previous response.")


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
