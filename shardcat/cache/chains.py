"""The records a metastore cache (metastore_cache.py) is made of: one `Record` per cached asset (its
states over versions and what points at it), a name's `Chain` when more than one asset is in its
story, and a cached listing. Plain data, no logic of the cache's.

Memory (issue #48): a cached asset is one record, not a chain, a list, an entry and a name's chain
of its own: its newest state is held inline, the states it superseded (kept a timeout for readers
at older snapshots) in a list made only when there are some, and a name held by one cached asset
points at that asset's record (`MetastoreCache._names`), with no chain at all.
"""

from __future__ import annotations

from ..entities.asset import Asset

LISTING_OVERHEAD = 128   # rough bytes of a cached listing's own structures (the LRU bound counts them)


class Entry:
    """One link of a chain: `value` holds from version `at` until the next entry's `at`."""
    __slots__ = ("at", "value", "retired", "size")

    def __init__(self, at: int, value, size: int, retired: float | None = None):
        self.at = at
        self.value = value          # an asset's states: Asset or None (absent); name chains: id or None (free)
        self.retired = retired      # clock time a newer entry superseded this one
        self.size = size


class Chain:
    """A name's holders over versions, oldest first (Entry values: an id, or None when free); the
    newest holds up to the cache's version."""
    __slots__ = ("entries",)

    def __init__(self, entries: list[Entry] | None = None):
        self.entries: list[Entry] = entries if entries is not None else []

    @property
    def newest(self) -> Entry:
        return self.entries[-1]

    def find(self, at: int) -> Entry | None:
        # Chains are a few entries long (the timeout prunes them), so scan from the newest.
        for entry in reversed(self.entries):
            if entry.at <= at:
                return entry
        return None


class Record:
    """One cached asset. Its newest state is `value` (an Asset, or None: absent) from version `at`,
    `size` estimated bytes; `older` the states it superseded, oldest first (None when there are none,
    the common case). `names`: the name keys whose index may mention it (one key, or a list of them);
    `listings`: the cached listings it is a member of (None or a set). Its `at`/`value` make it
    usable as the newest entry of its own chain."""
    __slots__ = ("at", "value", "size", "older", "names", "listings")

    def __init__(self, at: int, value: Asset | None, size: int):
        self.at = at
        self.value = value
        self.size = size
        self.older: list[Entry] | None = None
        self.names: tuple[str, str] | list[tuple[str, str]] | None = None
        self.listings: set[tuple[str, str]] | None = None

    # ---- states ----

    def push(self, at: int, value: Asset | None, size: int, now: float) -> None:
        """A newer state; the one it supersedes is kept, retired at clock time `now`."""
        old = Entry(self.at, self.value, self.size, now)
        if self.older is None:
            self.older = [old]
        else:
            self.older.append(old)
        self.at, self.value, self.size = at, value, size

    def find(self, at: int):
        """The state (this record, or an Entry) holding at version `at`; None if none kept does."""
        if self.at <= at:
            return self
        older = self.older
        if older is not None:
            for entry in reversed(older):
                if entry.at <= at:
                    return entry
        return None

    def prune(self, deadline: float) -> tuple[int, int]:
        """Drop the superseded states retired before `deadline`: (how many, their bytes)."""
        older = self.older
        count = size = 0
        while older and older[0].retired < deadline:
            gone = older.pop(0)
            count += 1
            size += gone.size
        if not older:
            self.older = None
        return count, size

    def states(self) -> list:
        """Every kept state, oldest first (entries, then this record)."""
        return [*(self.older or ()), self]

    @property
    def oldest_at(self) -> int:
        return self.older[0].at if self.older else self.at

    @property
    def count(self) -> int:
        return 1 + len(self.older) if self.older else 1

    @property
    def total(self) -> int:
        """The estimated bytes of all its kept states."""
        return self.size + sum(e.size for e in self.older) if self.older else self.size

    def ever_in(self, parent_id: str, namespace: str) -> bool:
        return any(e.value is not None and e.value.parent_id == parent_id and e.value.namespace == namespace
                   for e in self.states())

    # ---- what points at it ----

    def add_name(self, key: tuple[str, str]) -> None:
        names = self.names
        if names is None:
            self.names = key
        elif type(names) is list:
            if key not in names:
                names.append(key)
        elif names != key:
            self.names = [names, key]

    def name_keys(self) -> tuple[tuple[str, str], ...]:
        names = self.names
        if names is None:
            return ()
        return tuple(names) if type(names) is list else (names,)

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


class Listing:
    """The children of (parent, namespace): complete for every snapshot >= `floor`.

    `members` are the ids that may be a child at some retained snapshot; which of them
    is a child at `at` is read off their own records. `sorted` keeps the last answer read at
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
