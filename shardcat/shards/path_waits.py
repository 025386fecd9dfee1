"""How a shard's requests get the path answers they need (the Shard's part that waits for or loads paths).

On a cold owner neither reads by path nor writes wait for the whole path index: they ask cold tries
(cold_paths.py). A write that asked about a path not loaded yet is rolled back, the path is loaded
and the write runs again (`_cold_again`); a read's questions, and a write's checks made before it (an
Iceberg create's overlap check before it writes the metadata file), are asked the same way
(`asking_paths`), or have their paths loaded first (`with_paths`). Only a question about the whole
trie, or more than COLD_LOADS loads for one request, waits for the whole index (`_paths_whole`).
"""

from __future__ import annotations

import asyncio

from ..errors import CatalogError
from .cold_paths import ColdTrie, PathsNeeded, TriesChanged, load_paths, same_tries
from .group_commit import tries_of
from .state import MetastoreState

# A cold write loads at most this many paths before it waits for the whole index instead; where
# there is none (paths kept in PostgreSQL), at most COLD_LOADS_IN_DB, a round trip each.
COLD_LOADS = 16
COLD_LOADS_IN_DB = 1024


class PathWaits:
    """Mixed into Shard: uses its store, stats, state(), reconcile() and _start_warming()."""

    async def warmed(self, metastore_id: str) -> MetastoreState:
        """The metastore's state once its path index is whole, or known to be kept in PostgreSQL
        (`paths_in_db`: cold tries for good); benchmarks and tests wait for it."""
        return await self.state(metastore_id, paths=True)

    async def asking_paths(self, metastore_id: str, min_version: int, question):
        """`await question(state)` with the metastore's state, its path questions answered as a write's
        are: on a cold owner from cold tries, a path not loaded yet loaded and the question asked again
        (so `question` must only read). For the checks a write makes before it runs (the write checks
        again); the answer is exact at the state's version, as the whole index's would be."""
        state = await self.state(metastore_id, min_version, paths=False)
        loads = 0
        while True:
            tries = await self._write_tries(state)
            try:
                answer = await question(state)
                same_tries(state, tries)
                return answer
            except (PathsNeeded, TriesChanged) as again:
                await self._cold_again(state, again, loads := loads + 1)

    async def with_paths(self, metastore_id: str, min_version: int, urls, *, below: bool,
                         locations: bool = False) -> MetastoreState:
        """The metastore's state, its trie able to answer now about each of `urls` (its owner; with
        `below`, what lies below it too), and with `locations` its external locations' trie: a cold
        owner's loaded, a warm one's whole. For a read that asks them with no await in between (across
        an await the tries may change: ask inside `asking_paths` instead)."""
        if not urls and not locations:
            return await self.state(metastore_id, min_version, paths=False)

        async def ask(state):
            if isinstance(state.trie, ColdTrie):
                state.trie.need_all_of(urls, below)     # one read for all of them
            if locations:
                len(state.locations)
            return state
        return await self.asking_paths(metastore_id, min_version, ask)

    async def _paths_whole(self, state: MetastoreState) -> None:
        """Wait until the state's path index is whole; a build that failed (the database away) is
        started again by the next one who needs it, and its error is this caller's."""
        while not state.paths_ready.is_set() and not state.paths_in_db:
            task = state.warming
            if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
                task = self._start_warming(state)
            await asyncio.wait([task])
            if state.warming is task and not task.cancelled() and task.exception() is not None:
                state.warming = None
                raise task.exception()

    async def _write_tries(self, state: MetastoreState) -> tuple:
        """The tries a write attempt asks (group_commit.tries_of): cold ones as they are; a warm
        state's being rebuilt (its old tries stale) once they are whole again."""
        if not state.paths_ready.is_set() and not isinstance(state.trie, ColdTrie):
            await self._paths_whole(state)
        return tries_of(state)

    async def _cold_again(self, state: MetastoreState, again: BaseException, loads: int) -> None:
        """A write rolled back on cold tries: load the path it asked about (PathsNeeded) or just go
        again (TriesChanged); past COLD_LOADS loads, wait for the whole index instead, or where there
        is none (paths kept in PostgreSQL) refuse the request past COLD_LOADS_IN_DB."""
        if loads > COLD_LOADS_IN_DB and state.paths_in_db:
            raise CatalogError("RESOURCE_EXHAUSTED", "The request asks about more storage paths at once than the "
                                                     "catalog loads for one request; ask about fewer.")
        if loads > COLD_LOADS and not state.paths_in_db:
            await self._paths_whole(state)
        elif isinstance(again, PathsNeeded):
            self.stats["cold_path_loads"] += 1
            await load_paths(self.store, state, again, self.reconcile, self._paths_whole)
