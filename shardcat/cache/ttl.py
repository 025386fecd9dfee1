"""Bounded-staleness cache for metadata that is immutable or may lag a little (credentials, groups).

The paper's second kind of cache (section 4.5, "Performance"): no versions, no invalidation
protocol; an entry simply expires `ttl` seconds after it was put, so staleness is bounded.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable

import cachetools


class TtlCache:
    """At most `maxsize` entries, each living `ttl` seconds after it was put."""

    def __init__(self, maxsize: int, ttl: float, *, timer: Callable[[], float] = time.monotonic):
        self._cache = cachetools.TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)

    def get(self, key: Hashable, default=None):
        """The live value for `key`, or `default` (pass a sentinel if None is a real value)."""
        try:
            return self._cache[key]     # one expiry check; cachetools' get() makes two
        except KeyError:
            return default

    def put(self, key: Hashable, value) -> None:
        self._cache[key] = value

    def invalidate(self, key: Hashable) -> None:
        self._cache.pop(key, None)

    def clear(self) -> None:
        self._cache.clear()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        self._cache.expire()     # don't count entries that are dead but not yet collected
        return len(self._cache)
