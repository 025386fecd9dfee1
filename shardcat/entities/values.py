"""Small value helpers every layer shares: the clock in milliseconds, and decimal text read as a bigint."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


def bigint_text(text: str | None) -> int | None:
    """The non-negative PostgreSQL bigint that `text` writes in decimal digits (18 at most, so it
    always fits), or None: how ids, versions and times arrive in paths, queries and headers."""
    return int(text) if text and text.isdecimal() and len(text) <= 18 else None
