"""Serve snapshot reads of one metastore's assets from memory: a multi-version write-through cache.

docs/design.md invariants 2-4 and section 4.5 of the Unity Catalog paper. The cache knows the
metastore `version`; everything it holds is the latest as of that version. Each asset keeps
a short chain of states, each tagged with the metastore version it was written at, so a
reader at an older snapshot keeps its view while writes go on. The same chain idea indexes
names (`(namespace, full_name)` -> id over versions; a name held by one cached asset points at
that asset's record instead: chains.py) and child listings. Any question the
cache cannot answer for certain comes back as `MISS`: go to the database.

Eviction: a superseded state goes lazily, on the next access once it has been superseded for
longer than `version_timeout` (no request lives longer than that); whole assets leave in
LRU order when the estimated size passes `max_bytes`, or when the shard's caches together pass
their `budget` (budget.py: the least recently used metastore's cache gives first). Using a
listing counts as using its members once the cache nears that bound (`NEAR_FULL`): an evicted member takes the listing with it.

What it caches shares its repeated strings and columns with other cached assets (compact.py).

Pure data structure: no I/O, no locks (a shard uses it from one event loop).
"""

from __future__ import annotations

import bisect
import time
from collections import OrderedDict
from typing import Callable, Iterable

from ..entities.asset import Asset
from .chains import LISTING_OVERHEAD, Chain, Entry, Listing, Record
from .compact import share_asset
from .sizes import (  # noqa: F401 (asset_size and the sizes are this module's API too)
    ASSET_OVERHEAD, DECODED_EXPANSION, JSON_EXPANSION, MEMBER_SIZE, TOMBSTONE_SIZE, asset_size,
)

# Past this share of `max_bytes` eviction is near: a listing's use then refreshes its members too.
NEAR_FULL = 0.75

# "Before any version": where the absence of an asset this shard created begins.
_BEGINNING = -(1 << 62)


class _Miss:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISS"

    def __bool__(self) -> bool:
        # `if result:` would confuse MISS with an asset or with None; make that a loud bug.
        raise TypeError("compare with `is MISS`; MISS has no truth value")

    def __reduce__(self):
        return "MISS"


MISS = _Miss()
"""The cache cannot answer (not cached, or not for that snapshot): read the database."""


def _holder_id(holder: Record | Chain) -> str | None:
    """The id holding a name now (None: free): a record's own, or its chain's newest entry's."""
    return holder.value.id if type(holder) is Record else holder.newest.value


class StaleCache(Exception):
    """A write does not follow the cache's version: reconcile (advance or clear) first."""


def page_after(children: list[Asset], after: str, limit: int) -> list[Asset]:
    """Up to `limit` of a listing's children (sorted, one parent) named after `after` ("": from the start)."""
    start = bisect.bisect_right(children, after, key=lambda a: a.name) if after else 0
    return children[start:start + limit]


class MetastoreCache:
    """The cached assets of one metastore, current as of `version`."""

    def __init__(self, version: int, *, max_bytes: int = 256 << 20, version_timeout: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, budget=None):
        self.max_bytes = max_bytes
        self._budget = budget       # the shard's bound over all its caches (budget.py), if any
        self.version_timeout = version_timeout
        self._clock = clock
        self._counts = {"hits": 0, "misses": 0, "evictions": 0, "invalidations": 0, "pruned": 0}
        self._reset(version)

    def _reset(self, version: int) -> None:
        self._version = version
        # Each cached asset's record by id, and the cached listings' keys (tuples, never an id): in
        # LRU order, the oldest first. One map for both, and no second one of ids (issue #48).
        self._ids: OrderedDict[object, Record | None] = OrderedDict()
        # A name held by one cached asset points at its record; a name with more in its story (freed,
        # or held by another before) has a Chain of holders' ids.
        self._names: dict[tuple[str, str], Record | Chain] = {}
        self._free_names: set[tuple[str, str]] = set()   # name chains whose newest entry says "free"
        self._listings: dict[tuple[str, str], Listing] = {}
        self._listings_of: dict[str, set[str]] = {}      # parent id -> namespaces of its cached listings
        self._bytes = 0
        self._versions = 0

    @property
    def version(self) -> int:
        return self._version

    @property
    def bytes(self) -> int:
        return self._bytes

    # ---- reads -------------------------------------------------------------

    def get(self, asset_id: str, at: int):
        """The asset's state at snapshot `at`: a Asset, None (absent at `at`) or MISS."""
        if self._budget is not None:
            self._budget.touch(self)
        value = self._state_at(asset_id, at)
        if value is MISS:
            return self._miss()
        self._ids.move_to_end(asset_id)
        return self._hit(value)

    def get_by_name(self, namespace: str, full_name: str, at: int):
        """The asset holding `full_name` in `namespace` at `at`: a Asset, None or MISS."""
        key = (namespace, full_name)
        return self.get_many_by_name((key,), at).get(key, MISS)

    def get_many_by_name(self, keys, at: int) -> dict:
        """`get_by_name` for many (namespace, full_name) keys at one snapshot, in one pass (a batched
        resolve names hundreds): {key: Asset or None}; a key the cache cannot answer is left out."""
        found = {}
        if self._budget is not None:
            self._budget.touch(self)
        if at > self._version:
            self._counts["misses"] += len(keys)
            return found
        names, ids, lru = self._names, self._ids, self._ids
        deadline = self._clock() - self.version_timeout     # states superseded before it can go
        hits = 0
        for key in keys:
            rec = names.get(key)
            if rec is None:
                continue
            if type(rec) is not Record:     # a Chain: the name's holder at `at`, if known
                entries = rec.entries
                entry = entries[0] if len(entries) == 1 and entries[0].at <= at else self._newest_at(rec, at, deadline, key)
                if entry is None:
                    continue
                if entry.value is None:
                    found[key] = None
                    hits += 1
                    continue
                rec = ids.get(entry.value)
                if rec is None:
                    continue
            # one state (the common case): no call, nothing to prune
            state = rec if rec.older is None and rec.at <= at else self._record_at(rec, at, deadline)
            asset = None if state is None else state.value
            if asset is None or asset.full_name != key[1] or asset.namespace != key[0]:
                continue        # the holder's state at `at` was pruned (or disagrees: be safe)
            lru.move_to_end(asset.id)
            found[key] = asset
            hits += 1
        self._counts["hits"] += hits
        self._counts["misses"] += len(keys) - hits
        return found

    def _newest_at(self, chain: Chain, at: int, deadline: float, key: tuple[str, str]) -> Entry | None:
        """The name chain's entry holding at `at`, after dropping entries superseded before `deadline`."""
        entries = chain.entries
        if len(entries) == 1:       # the common case: nothing to prune
            return entries[0] if entries[0].at <= at else None
        self._prune_chain(key, chain, deadline)
        return chain.find(at)

    def _record_at(self, rec: Record, at: int, deadline: float):
        """The record's state (it, or an Entry) holding at `at`, after dropping states superseded
        before `deadline`; None if no kept state does."""
        self._prune(rec, deadline)
        return rec.find(at)

    def children(self, parent_id: str, namespace: str, at: int):
        """The children of (parent_id, namespace) visible at `at`, sorted by full_name; or MISS.
        The list is shared: callers must not change it."""
        key = (parent_id, namespace)
        if self._budget is not None:
            self._budget.touch(self)
        listing = self._listings.get(key)
        if listing is None or not listing.floor <= at <= self._version:
            return self._miss()
        found = listing.sorted if at >= listing.changed_at else None
        if found is None:
            found = self._read_listing(key, listing, at)
            if found is MISS:
                return self._miss()
            if at == self._version:
                listing.sorted = found
        if self._bytes > self.max_bytes * NEAR_FULL:
            # The listing needs every member to answer: near the bound they must not age without it.
            # Far from it nothing is evicted, and a page of a large listing costs O(page), not O(members).
            for member in listing.members:
                self._ids.move_to_end(member)
        self._ids.move_to_end(key)
        return self._hit(found)

    def _read_listing(self, key: tuple[str, str], listing: Listing, at: int):
        parent_id, namespace = key
        found = []
        for member in list(listing.members):
            value = self._state_at(member, at)
            if value is MISS:
                return MISS
            if value is not None and value.parent_id == parent_id and value.namespace == namespace:
                found.append(value)
            elif not self._ids[member].ever_in(parent_id, namespace):
                # Pruning left no state of it under this parent: it can't show up at any snapshot
                # from its oldest state on, so drop it and stop answering for older snapshots.
                self._leave(key, member, floor=self._ids[member].oldest_at)
        found.sort(key=lambda a: a.full_name)
        return found

    # ---- filling from the database ---------------------------------------

    def fill(self, assets: Iterable[Asset], read_version: int) -> bool:
        """Cache assets read from the database at metastore version `read_version`.

        Ignored (False) unless `read_version == version`: only then is the read known to be
        the latest. Assets already cached are kept as they are (they are the latest too).
        """
        if read_version != self._version:
            return False
        for asset in assets:
            self._fill_one(asset)
        self._shrink()
        return True

    def fill_children(self, parent_id: str, namespace: str, assets: list[Asset], read_version: int) -> bool:
        """Cache the complete list of children of (parent_id, namespace) read at `read_version`."""
        if read_version != self._version:
            return False
        key = (parent_id, namespace)
        for asset in assets:
            if (asset.parent_id, asset.namespace) != key:
                raise ValueError(f"{asset.full_name} is not a child of {key}")
            self._fill_one(asset)
        if key not in self._listings:    # an existing listing is just as current and knows more history
            self._listings[key] = Listing(read_version)
            self._listings_of.setdefault(parent_id, set()).add(namespace)
            self._ids[key] = None
            self._bytes += LISTING_OVERHEAD
            for asset in assets:
                self._join(key, asset.id)
        self._shrink()
        return True

    def _fill_one(self, asset: Asset) -> None:
        if asset.written_at > self._version:
            raise ValueError(f"{asset.id} written at {asset.written_at}, after version {self._version}")
        if asset.id in self._ids:
            return
        rec = self._new_record(asset.id, asset.written_at, asset, asset_size(asset, share_asset(asset)))
        key = asset.name_key
        holder = self._names.get(key)
        if holder is not None and _holder_id(holder) != asset.id:
            # The database disagrees with what we knew of this name: trust it, forget the rest.
            self._drop_name(key)
            holder = None
        if holder is None:
            self._name_push(key, asset.written_at, asset.id)
        rec.add_name(key)

    # ---- writes ------------------------------------------------------------

    def apply_write(self, new_version: int, changed: Iterable[Asset], deleted: Iterable[str],
                    *, created: Iterable[str] = ()) -> None:
        """Record this shard's write that produced `new_version` (must be `version + 1`).

        `changed` are the new states (written_at == new_version), `deleted` the ids removed.
        `created` names the ids in `changed` that are new: the cache then knows they were
        absent at older snapshots (without it, older reads of them are MISS). Every asset whose
        full_name changed (e.g. the tables under a renamed schema) must be in `changed`.
        """
        if new_version != self._version + 1:
            raise StaleCache(f"write at {new_version} does not follow cached version {self._version}")
        changes = {a.id: a for a in changed}
        deleted = [i for i in deleted if i not in changes]
        created = set(created)
        for asset in changes.values():
            if asset.written_at != new_version:
                raise ValueError(f"{asset.id} written at {asset.written_at}, expected {new_version}")

        # The states being replaced, to know which names this write frees; the listings they are
        # in change from this version on.
        before = {}
        for asset_id in (*changes, *deleted):
            rec = self._ids.get(asset_id)
            if rec is not None:
                self._prune(rec)
                before[asset_id] = rec.value
                for key in rec.listing_keys():
                    self._listings[key].changed(new_version)

        # Free names first, so a name freed and taken in one write ends up taken.
        for asset_id, old in before.items():
            if old is None:
                continue
            new = changes.get(asset_id)
            if new is None or new.name_key != old.name_key:
                holder = self._names.get(old.name_key)
                if holder is not None and _holder_id(holder) == asset_id:
                    self._name_push(old.name_key, new_version, None)

        for asset_id in deleted:
            rec = self._ids.get(asset_id)
            if rec is None:
                self._new_record(asset_id, new_version, None, TOMBSTONE_SIZE)
            elif rec.value is not None:
                self._push(rec, new_version, None, TOMBSTONE_SIZE)
                self._ids.move_to_end(asset_id)

        for asset in changes.values():
            rec = self._ids.get(asset.id)
            size = asset_size(asset, share_asset(asset))
            if rec is None:
                if asset.id in created:   # ids are never reused: it did not exist at any older snapshot
                    rec = self._new_record(asset.id, _BEGINNING, None, TOMBSTONE_SIZE)
                    self._push(rec, new_version, asset, size)
                else:
                    rec = self._new_record(asset.id, new_version, asset, size)
            else:
                self._ids.move_to_end(asset.id)
                self._push(rec, new_version, asset, size)

            key = asset.name_key
            holder = self._names.get(key)
            if holder is None or _holder_id(holder) != asset.id:
                self._name_push(key, new_version, asset.id)
            rec.add_name(key)

            # A listing that is cached must show the newcomer from now on.
            lkey = (asset.parent_id, asset.namespace)
            listing = self._listings.get(lkey)
            if listing is not None and asset.id not in listing.members:
                self._join(lkey, asset.id)
                listing.changed(new_version)

        self._version = new_version
        self._shrink()

    def advance(self, new_version: int, changed_ids: Iterable[str], touched_parents: Iterable[str] = ()) -> None:
        """Catch up with versions written elsewhere: forget what changed in (version, new_version].

        `changed_ids` lose all their states, name entries and the listings they are in;
        `touched_parents` (old and new parents of the changes) lose their cached listings.
        """
        if new_version < self._version:
            raise ValueError(f"cannot go back from version {self._version} to {new_version}")
        for asset_id in changed_ids:
            if self._evict(asset_id):
                self._counts["invalidations"] += 1
        for parent_id in touched_parents:
            for namespace in list(self._listings_of.get(parent_id, ())):
                self._drop_listing((parent_id, namespace))
        if new_version > self._version:
            # A foreign write may have given a name we knew as free to an asset we never saw.
            for key in list(self._free_names):
                self._drop_name(key)
        self._version = new_version
        self._shrink()

    def clear(self, new_version: int) -> None:
        """Forget everything (e.g. the change log gap is too large) and start at `new_version`."""
        self._counts["invalidations"] += len(self._ids) - len(self._listings)
        self._reset(new_version)
        self._shrink()

    def stats(self) -> dict:
        return {"entries": len(self._ids) - len(self._listings), "versions": self._versions, "bytes": self._bytes,
                "listings": len(self._listings), "names": len(self._names), **self._counts}

    # ---- internals ---------------------------------------------------------

    def _hit(self, value):
        self._counts["hits"] += 1
        return value

    def _miss(self):
        self._counts["misses"] += 1
        return MISS

    def _state_at(self, asset_id: str, at: int):
        """The asset's state at `at` (Asset or None) or MISS, pruning old states on the way."""
        rec = self._ids.get(asset_id)
        if rec is None or at > self._version:
            return MISS
        if rec.older is not None:
            self._prune(rec)
        entry = rec.find(at)
        return MISS if entry is None else entry.value

    def _new_record(self, asset_id: str, at: int, value, size: int) -> Record:
        rec = self._ids[asset_id] = Record(at, value, size)
        self._bytes += size
        self._versions += 1
        return rec

    def _push(self, rec: Record, at: int, value, size: int) -> None:
        rec.push(at, value, size, self._clock())    # in-flight readers may use the old one for one more timeout
        self._bytes += size
        self._versions += 1

    def _prune(self, rec: Record, deadline: float | None = None) -> None:
        """Drop states superseded for longer than the timeout (before `deadline`); never the newest."""
        if rec.older is None:       # the common case: no clock read
            return
        if deadline is None:
            deadline = self._clock() - self.version_timeout
        count, size = rec.prune(deadline)
        self._bytes -= size
        self._versions -= count
        self._counts["pruned"] += count

    def _prune_chain(self, key: tuple[str, str], chain: Chain, deadline: float | None = None) -> None:
        if len(chain.entries) == 1:
            return
        if deadline is None:
            deadline = self._clock() - self.version_timeout
        while len(chain.entries) > 1 and chain.entries[0].retired < deadline:
            chain.entries.pop(0)
        holder = chain.entries[0].value
        if len(chain.entries) == 1 and holder is not None:
            # One holder left: the name can point at its record again, if it still holds the name.
            rec = self._ids.get(holder)
            if rec is not None and rec.value is not None and rec.value.name_key == key:
                self._names[key] = rec

    def _name_push(self, key: tuple[str, str], at: int, holder: str | None) -> None:
        chain = self._names.get(key)
        if chain is None:
            if holder is None:
                return
            # Held by one cached asset (whose newest state has this name): its record is the entry.
            self._names[key] = self._ids[holder]
            self._free_names.discard(key)
            return
        if type(chain) is Record:
            # Another holder, or the name freed: from now on the name needs a chain. Its holder so far
            # answers for any snapshot at which its own kept state bears the name (readers check).
            chain = self._names[key] = Chain([Entry(_BEGINNING, chain.value.id, 0)])
        else:
            self._prune_chain(key, chain)
            chain = self._names[key]
            if type(chain) is Record:
                chain = self._names[key] = Chain([Entry(_BEGINNING, chain.value.id, 0)])
        if chain.entries and chain.newest.at == at:
            chain.entries.pop()       # freed and taken again in the same write: the taking wins
        if chain.entries:
            chain.newest.retired = self._clock()
        chain.entries.append(Entry(at, holder, 0))
        if holder is None:
            self._free_names.add(key)
        else:
            self._free_names.discard(key)

    def _drop_name(self, key: tuple[str, str]) -> None:
        self._names.pop(key, None)
        self._free_names.discard(key)

    def _forget_name(self, key: tuple[str, str], asset_id: str) -> None:
        """An evicted id leaves a name chain: what came before its last entry goes with it."""
        chain = self._names.get(key)
        if chain is None:
            return
        if type(chain) is Record:
            if chain.value is not None and chain.value.id == asset_id:
                self._drop_name(key)
            return
        entries = chain.entries
        last = max((i for i, e in enumerate(entries) if e.value == asset_id), default=-1)
        del entries[:last + 1]
        # Knowing a name is free is only worth keeping while some holder is still cached.
        if not any(e.value is not None for e in entries):
            self._drop_name(key)

    def _join(self, key: tuple[str, str], asset_id: str) -> None:
        self._listings[key].members[asset_id] = None
        self._listings[key].size += MEMBER_SIZE
        self._bytes += MEMBER_SIZE
        self._ids[asset_id].add_listing(key)

    def _leave(self, key: tuple[str, str], asset_id: str, floor: int) -> None:
        listing = self._listings[key]
        del listing.members[asset_id]
        listing.size -= MEMBER_SIZE
        self._bytes -= MEMBER_SIZE
        listing.floor = max(listing.floor, floor)
        self._ids[asset_id].drop_listing(key)

    def _drop_listing(self, key: tuple[str, str]) -> None:
        listing = self._listings.pop(key, None)
        if listing is None:
            return
        del self._ids[key]
        self._bytes -= listing.size
        parent_id, namespace = key
        namespaces = self._listings_of[parent_id]
        namespaces.discard(namespace)
        if not namespaces:
            del self._listings_of[parent_id]
        for member in listing.members:
            hist = self._ids.get(member)
            if hist is not None:
                hist.drop_listing(key)

    def _evict(self, asset_id: str) -> bool:
        """Forget an asset entirely: all its states, its name entries, and the listings it is a child
        of in its newest state (a listing it had left before then still answers from then on)."""
        rec = self._ids.get(asset_id)
        if rec is None:
            return False
        newest = rec.value
        for key in rec.listing_keys():
            if newest is not None and (newest.parent_id, newest.namespace) == key:
                self._drop_listing(key)
            else:
                self._leave(key, asset_id, floor=rec.at)
        del self._ids[asset_id]
        self._bytes -= rec.total
        self._versions -= rec.count
        for key in rec.name_keys():
            self._forget_name(key, asset_id)
        return True

    def _shrink(self) -> None:
        while self._bytes > self.max_bytes and self._ids:
            self.evict_oldest()
        if self._budget is not None:
            self._budget.settle(self)

    def evict_oldest(self) -> int | None:
        """Evict the least recently used asset or listing: the bytes it freed (None: nothing is cached)."""
        if not self._ids:
            return None
        before = self._bytes
        key = next(iter(self._ids))
        if isinstance(key, str):
            self._evict(key)
            self._counts["evictions"] += 1
        else:
            self._drop_listing(key)
        return before - self._bytes

    def _audit(self) -> None:
        """Check the internal bookkeeping (tests call this; O(size))."""
        assert {k for k in self._ids if type(k) is tuple} == set(self._listings)
        assert all(self._ids[k] is None for k in self._listings)
        total = versions = 0
        for asset_id, rec in self._ids.items():
            if type(asset_id) is tuple:
                continue
            states = rec.states()
            assert rec.older is None or rec.older
            assert all(a.at < b.at for a, b in zip(states, states[1:]))
            assert all(e.value is None or e.value.id == asset_id for e in states)
            total += rec.total
            versions += rec.count
        for key, listing in self._listings.items():
            assert listing.size == LISTING_OVERHEAD + MEMBER_SIZE * len(listing.members)
            assert key[1] in self._listings_of[key[0]]
            for member in listing.members:
                assert key in self._ids[member].listing_keys()
            total += listing.size
        for key, chain in self._names.items():
            if type(chain) is Record:   # held by one cached asset, whose newest state bears the name
                assert chain.value is not None and chain.value.name_key == key
                assert self._ids.get(chain.value.id) is chain and key in chain.name_keys()
                assert key not in self._free_names
                continue
            assert chain.entries
            assert (chain.newest.value is None) == (key in self._free_names)
            for e in chain.entries:
                assert e.value is None or key in self._ids[e.value].name_keys()
        assert self._free_names <= set(self._names)
        assert total == self._bytes and versions == self._versions
