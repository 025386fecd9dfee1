"""One string object for equal strings that many records repeat (types, owners, parents' ids,
property keys): `shared(s)` returns the pool's equal string, so a shard's thousands of assets
hold one copy each, not one per record (issue #48, bytes per asset).

Not `sys.intern`: on Python 3.12 interned strings are immortal, and what is pooled here comes
from the catalog (names, comments), without bound over a server's life. The pool is a plain dict
emptied whenever it reaches `POOL_STRINGS`: the strings in use come back at their next read,
and nothing is ever kept by the pool alone for long. No I/O.
"""

from __future__ import annotations

POOL_STRINGS = 1 << 16      # at most this many distinct strings (a few MB) before the pool starts over

_pool: dict[str, str] = {}


def shared(s: str) -> str:
    """The pool's string equal to `s` (`s` itself, pooled, the first time)."""
    found = _pool.get(s)
    if found is not None:
        return found
    if len(_pool) >= POOL_STRINGS:
        _pool.clear()
    _pool[s] = s
    return s
