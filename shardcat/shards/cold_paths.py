"""A cold owner's path index, exact for the paths loaded so far: writes need not wait for the whole one.

Until a metastore's whole path index is built (state.py `warm_paths`), its state's tries are
`ColdTrie`s: each holds the entries of the storage paths it was asked about, read from PostgreSQL
(`Store.paths_near`: the assets at a path, above it and below it, and every external location),
and every change applied since (a write, a reconcile) is put in it as in the whole index, so what it
knows stays current. A question about a path it has not loaded raises `PathsNeeded` out of the
write's body; the shard rolls the write back, loads that path (`load_near`) and runs it again. So a
path question is always answered from entries complete for that path: exact, as the whole index
answers it (tests/unit/shards/test_cold_paths.py checks this against the full trie).

A path covers every path below it: what lies at, above or below a deeper path lies at, above or
below it. External locations are few, so the first question about them loads them all.

A metastore whose paths are kept in PostgreSQL (`MetastoreState.paths_in_db`: too many for a whole
index in memory) has cold tries for good, bounded: a load that finds its trie holding
COLD_PATHS_MAX entries starts it over (`forget_loaded`), and its questions load their paths again.
"""

from __future__ import annotations

from ..cache.url_trie import UrlTrie
from ..entities.urls import url_from_segments, url_segments
from .state import MetastoreState

# Entries a kept-in-PostgreSQL metastore's cold trie holds before a load starts it over (~40 MB).
COLD_PATHS_MAX = 100_000


class PathsNeeded(BaseException):
    """A write asked a cold trie about a path it has not loaded: roll back, `load_near`, run again.
    A BaseException so that no `except Exception` in a write's body takes it for the write's failure."""

    def __init__(self, trie: ColdTrie, url: str | None, more: tuple[str, ...] = (), below: bool = True):
        super().__init__(url)
        self.trie = trie
        self.url = url          # canonical; None: the whole trie (all of it is needed, e.g. its size)
        self.more = more        # further canonical urls to load in the same read
        self.below = below      # what lies below them too (False: at and above them, all an owner question needs)


class TriesChanged(BaseException):
    """The state's tries were swapped during a write (its whole index came, or a rebuild began): what
    the write asked may mix two of them, and its group's earlier writes are not in the new ones. Run it again."""


def same_tries(state: MetastoreState, tries: tuple) -> None:
    """Raise TriesChanged unless the state's tries are still `tries` (group_commit.tries_of)."""
    if tries[0] is not state.trie or tries[1] is not state.locations:
        raise TriesChanged()


async def load_paths(store, state: MetastoreState, need: PathsNeeded, reconcile, paths_whole) -> None:
    """What a write's `need` asks for, loaded into the state's cold tries (`load_near`) once the state
    has caught up with the database (`reconcile`); the whole trie asked for: `paths_whole` waits for it.
    Under the state's reconcile lock, so that no reconcile applies changes between the read and its use."""
    if need.url is None and need.trie is state.trie:
        if state.paths_in_db:
            raise RuntimeError(f"a question about the whole path index of {state.id}, whose paths are kept in "
                               "PostgreSQL")
        await paths_whole(state)
        return
    for _ in range(8):
        async with state.reconcile_lock:
            ahead = await load_near(store, state, need)
        if ahead is None:
            return
        await reconcile(state)
    # The database keeps moving ahead of every read: the whole index answers instead.
    await paths_whole(state)


class ColdTrie:
    """A UrlTrie's interface over the entries loaded so far; questions outside them raise PathsNeeded."""

    def __init__(self, whole_on_first_use: bool = False) -> None:
        self.known = UrlTrie()
        self.covered: set[str] = set()          # canonical urls whose surroundings are all in `known`
        # Canonical urls whose entries at and above them are in `known` (what `owner` and `get` ask):
        # a path's owner is loaded without what lies below it, which may be the whole metastore.
        self.above: set[str] = set()
        self.whole = False                      # every entry is in `known`
        self.whole_on_first_use = whole_on_first_use   # the external locations' trie: load all at once

    def _covers(self, segments) -> bool:
        return self.whole or (not self.whole_on_first_use and any(
            url_from_segments(segments[:depth]) in self.covered for depth in range(1, len(segments) + 1)))

    def _need(self, url: str, below: bool = True) -> None:
        segments = url_segments(url)
        if self._covers(segments):
            return
        canonical = url_from_segments(segments)
        if not below and canonical in self.above:
            return
        raise PathsNeeded(self, None if self.whole_on_first_use else canonical, below=below)

    def need_all_of(self, urls, below: bool) -> None:
        """Raise PathsNeeded for every one of `urls` not loaded yet (its owner; with `below`, what lies
        below it too), all at once: one read loads them all."""
        canonical = {url_from_segments(url_segments(url)) for url in urls}
        missing = sorted(u for u in canonical
                         if not self._covers(url_segments(u)) and (below or u not in self.above))
        if missing:
            raise PathsNeeded(self, missing[0], tuple(missing[1:]), below=below)

    def _need_all(self) -> None:
        if not self.whole:
            raise PathsNeeded(self, None)

    # Questions: answered only where complete.
    def get(self, url):
        self._need(url, below=False)
        return self.known.get(url)

    def owner(self, url):
        self._need(url, below=False)
        return self.known.owner(url)

    def first_overlap(self, url, ignore=None):
        self._need(url)
        return self.known.first_overlap(url, ignore)

    def descendants(self, url):
        self._need(url)
        return self.known.descendants(url)

    def __contains__(self, url) -> bool:
        self._need(url, below=False)
        return url in self.known

    def items(self):
        self._need_all()
        return self.known.items()

    def __len__(self) -> int:
        self._need_all()
        return len(self.known)

    # Changes: always kept (a change to a path not loaded yet is as true as the rest).
    def insert(self, url, value):
        return self.known.insert(url, value)

    def insert_node(self, url, value, share=None):
        return self.known.insert_node(url, value, share)

    def remove(self, url):
        return self.known.remove(url)

    def remove_node(self, node):
        return self.known.remove_node(node)

    @staticmethod
    def url_of(node) -> str:
        return UrlTrie.url_of(node)

    def __repr__(self) -> str:
        return (f"<ColdTrie {len(self.known)} known, {len(self.covered)} paths loaded, {len(self.above)} owners"
                f"{', whole' if self.whole else ''}>")


def cold_tries(state: MetastoreState, root_owner=None) -> None:
    """Give the state empty cold tries (its path index is being built aside); `root_owner`: the
    metastore's managed storage root's PathOwner, at `state.storage_root`, as the whole index has it."""
    state.trie, state.path_of = ColdTrie(), {}
    state.locations, state.location_of = ColdTrie(whole_on_first_use=True), {}
    if root_owner is not None and state.storage_root:
        state.trie.insert(state.storage_root, root_owner)


def near(url: str) -> tuple[list[str], str]:
    """The canonical urls at and above `url` (its ancestors, whole segments), and the prefix every
    url strictly below it starts with."""
    segments = url_segments(url)
    at = [url_from_segments(segments[:depth]) for depth in range(1, len(segments) + 1)]
    return at, at[-1] if at[-1].endswith("/") else at[-1] + "/"


async def load_near(store, state: MetastoreState, need: PathsNeeded) -> int | None:
    """Read what `need` asks for into the state's cold tries, as of the database's version now.
    Returns that version when it is ahead of the state's (nothing loaded: the caller catches up
    first, so that entries newer than the state never mix with older ones), else None. A trie that
    is no longer the state's (the whole index came meanwhile) needs nothing."""
    trie = need.trie
    if trie is not state.trie and trie is not state.locations:
        return None
    wants_locations = trie is state.locations
    urls = [] if wants_locations or need.url is None else [need.url, *need.more]
    at, below = [], []
    for url in urls:
        above, under = near(url)
        at += above
        if need.below:
            below.append(under)
    version, found = await store.paths_near(state.id, sorted(set(at)), below, wants_locations)
    if version > state.version:
        return version
    if trie is not state.trie and trie is not state.locations:
        return None
    if not wants_locations and state.paths_in_db and len(trie.known) >= COLD_PATHS_MAX:
        trie = forget_loaded(state)
    for path in found:
        _remember(state, path)
    if wants_locations:
        trie.whole = True
    else:
        (trie.covered if need.below else trie.above).update(urls)
    return None


def forget_loaded(state: MetastoreState) -> ColdTrie:
    """Start the state's cold trie of paths over (what it loaded is read again when asked): a new
    trie object, so a write or a read asking across the change runs again (TriesChanged)."""
    root = state.trie.known.get(state.storage_root) if state.storage_root else None
    state.trie, state.path_of = ColdTrie(), {}
    if root is not None:
        state.trie.insert(state.storage_root, root)
    return state.trie


def _remember(state: MetastoreState, path) -> None:
    """`state.remember`, unless the state knows it already (a write applied since holds it)."""
    known = state.location_of if path.type == "external_location" else state.path_of
    if path.id in known:
        return
    state.remember(path)
