"""One memory bound for all the metastore caches of a shard (`--cache-mb`), whatever their number.

Each cache (metastore_cache.py) reports its estimated bytes here as they change (`settle`) and says
when it was used (`touch`). When the sum passes `max_bytes`, entries go from the cache of the
metastore used least recently, its own least recently used first; an idle metastore's cache thus
empties before a busy one loses anything, and one hot metastore may use the whole bound. Pure data
structure: no I/O, no locks (a shard uses it from one event loop).
"""

from __future__ import annotations

from collections import OrderedDict


class CacheBudget:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.used = 0
        self._reported: dict[int, int] = {}              # id(cache) -> the bytes it last reported
        self._order: OrderedDict[int, object] = OrderedDict()   # caches by last use, the oldest first
        self.evictions = 0

    def touch(self, cache) -> None:
        key = id(cache)
        order = self._order
        if key in order:
            order.move_to_end(key)
        else:
            order[key] = cache

    def settle(self, cache) -> None:
        """Take the cache's size now into the sum; evict from the least recently used caches while over."""
        key = id(cache)
        self.used += cache.bytes - self._reported.get(key, 0)
        self._reported[key] = cache.bytes
        self.touch(cache)
        while self.used > self.max_bytes and self._order:
            oldest_key, oldest = next(iter(self._order.items()))
            freed = oldest.evict_oldest()
            if freed is None:                   # nothing left in it: the next one
                del self._order[oldest_key]
                continue
            self.evictions += 1
            self.used -= freed
            self._reported[oldest_key] -= freed

    def forget(self, cache) -> None:
        """A cache no longer in use (its metastore went cold, was rebuilt or moved away): its bytes leave the sum."""
        key = id(cache)
        self.used -= self._reported.pop(key, 0)
        self._order.pop(key, None)
