"""The chains a metastore cache (metastore_cache.py) is made of: states of one thing over versions,
an asset's chain with what points at it, and a cached listing. Plain data, no logic of the cache's."""

from __future__ import annotations

from ..entities.asset import Asset

LISTING_OVERHEAD = 128   # rough bytes of a cached listing's own structures (the LRU bound counts them)


class Entry:
    """One link of a chain: `value` holds from version `at` until the next entry's `at`."""
    __slots__ = ("at", "value", "retired", "size")

    def __init__(self, at: int, value, size: int):
        self.at = at
        self.value = value          # asset chains: Asset or None (absent); name chains: id or None (free)
        self.retired: float | None = None   # clock time a newer entry superseded this one
        self.size = size


class Chain:
    """States of one thing over versions, oldest first; the newest holds up to the cache's version."""
    __slots__ = ("entries",)

    def __init__(self):
        self.entries: list[Entry] = []

    @property
    def newest(self) -> Entry:
        return self.entries[-1]

    def find(self, at: int) -> Entry | None:
        # Chains are a few entries long (the timeout prunes them), so scan from the newest.
        for entry in reversed(self.entries):
            if entry.at <= at:
                return entry
        return None


class History(Chain):
    """An asset's chain plus what points at it (so evicting it can clean up). Both are almost
    always one name and no listing or one: a tuple and a set made on first use, not two sets
    (a set costs 216 bytes empty, and a cache holds one history per cached asset)."""
    __slots__ = ("size", "names", "listings")

    def __init__(self):
        super().__init__()
        self.size = 0
        self.names: tuple[tuple[str, str], ...] = ()    # name chains that may mention this id
        self.listings: set[tuple[str, str]] | None = None   # cached listings it is a member of

    def add_name(self, key: tuple[str, str]) -> None:
        if key not in self.names:
            self.names += (key,)

    def add_listing(self, key: tuple[str, str]) -> None:
        if self.listings is None:
            self.listings = set()
        self.listings.add(key)

    def drop_listing(self, key: tuple[str, str]) -> None:
        if self.listings is not None:
            self.listings.discard(key)
            if not self.listings:
                self.listings = None

    def listing_keys(self) -> tuple[tuple[str, str], ...]:
        """The listings it is a member of, as a copy (the caller may leave them meanwhile)."""
        return tuple(self.listings) if self.listings else ()

    def ever_in(self, parent_id: str, namespace: str) -> bool:
        return any(e.value is not None and e.value.parent_id == parent_id and e.value.namespace == namespace
                   for e in self.entries)


class Listing:
    """The children of (parent, namespace): complete for every snapshot >= `floor`.

    `members` are the ids that may be a child at some retained snapshot; which of them
    is a child at `at` is read off their own chains. `sorted` keeps the last answer read at
    the cache's version, for every snapshot from `changed_at` (the last write to a member or
    to the membership) on: pages of a long listing then cost a bisect, not a sort.
    """
    __slots__ = ("floor", "members", "size", "changed_at", "sorted")

    def __init__(self, floor: int):
        self.floor = floor
        self.members: dict[str, None] = {}   # insertion-ordered, so eviction order is reproducible
        self.size = LISTING_OVERHEAD
        self.changed_at = floor
        self.sorted: list[Asset] | None = None

    def changed(self, at: int) -> None:
        self.changed_at = at
        self.sorted = None
