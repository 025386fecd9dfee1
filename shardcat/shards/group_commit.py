"""Group commit: a metastore's writes that arrive while one of its transactions is in flight go
together into the next one (issue 33).

Each write keeps its own version bump and change-log row (`Store.write_batch`), so the log, the
version headers and the invariants of docs/design.md stay as they are; what the group shares is
one transaction and one commit (one fsync). The writes run in arrival order, first without a
savepoint each (a round trip less per write): a write whose body fails before it changed any row
fails alone, nothing of it to undo. One that fails after, or on a database error (a unique
violation, say), spoils the group: its transaction is rolled back and the group runs again with a
savepoint per write, where the failing write is rolled back alone and fails alone (store/writes.py
`WriteBatch`). A later write validates against everything the earlier ones did (their rows
through the transaction, their storage paths through the state's tries, applied as each write
ends and undone if the group does not commit). Every write of a group is acknowledged after the commit, and only then; the
cache, the followers and the version move only then too. The one thing visible earlier is a
storage path in the tries, for the few milliseconds the group's transaction lasts: a path lookup
then may name an asset whose write is not acknowledged yet (reading the asset itself finds
nothing until it is).

Every write queues, a lone one too, and the metastore's committer task takes what is queued
when it starts and whenever its last transaction ends, bounded (`max_batch`), and waits for
nothing more: a lone writer waits one turn of the event loop, no timer (`max_wait` can trade
latency for bigger groups). That turn matters when a group's answers wake its writers at once:
they queue together for the next group. Before, the first of them wrote alone and the rest
waited on it: a transaction more per group, 6-32% of the in-process throughput at 32 writers
(docs/benchmarks.md, "what made them faster"). A group of one is a plain write, as without
group commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GroupCommitConfig:
    enabled: bool = True       # off: one transaction per write, queued on the metastore (for comparison)
    max_batch: int = 128       # writes per transaction at most
    max_wait: float = 0.0      # seconds the committer waits for more writes once a second one queued


@dataclass
class PendingWrite:
    """One write waiting for, or inside, a group: its body, the future its writer awaits, and
    what happened to it in the group's latest attempt."""
    body: object
    done: object                      # asyncio.Future the writer awaits
    prefetch: tuple = ()              # what its body reads first, read for the whole group at once
    tx: object = None                 # its WriteTx, once its body ended without an error
    result: object = None
    error: BaseException | None = None
    undo: list = field(default_factory=list)   # the state's storage paths as they were before it
    tries: tuple | None = None        # the state's tries its storage paths were put in (speculate)

    def reset(self) -> None:
        self.tx, self.result, self.error, self.undo, self.tries = None, None, None, [], None

    def speculated_in(self, state) -> bool:
        """Whether its storage paths are in the state's tries now (not rebuilt since): applied after
        the commit, it needs not put them there again."""
        return self.tries is not None and self.tries[0] is state.trie and self.tries[1] is state.locations

    def settle(self, error: BaseException | None = None) -> None:
        error = error or self.error
        if self.done.done():
            return
        if error is not None:
            self.done.set_exception(error)
        else:
            self.done.set_result(self.result)


def speculate(state, tx) -> list:
    """Put a write's storage paths into the state's tries before its group commits (the next write
    of the group validates against them); returns what undoes that."""
    undo = []
    for asset_id in [*tx.deleted, *tx.written]:
        node = state.path_of.get(asset_id)
        loc = state.location_of.get(asset_id)
        undo.append((asset_id, state.trie.url_of(node) if node else None, node.value if node else None,
                     state.locations.url_of(loc) if loc else None, loc.value if loc else None))
    for asset_id in tx.deleted:
        state.forget(asset_id)
    for asset in tx.written.values():
        state.remember(asset)
    return undo


def tries_of(state) -> tuple:
    """The state's tries, as `PendingWrite.tries` records them."""
    return state.trie, state.locations


def undo_speculation(state, batch: list[PendingWrite]) -> None:
    """The group did not commit: put the state's storage paths back as they were, latest write first.
    Tries swapped in since (the whole index arrived, a cold trie started over) were read from the
    database, which never held the speculation: they are left as they are."""
    for pending in reversed(batch):
        if pending.tries is not None and not pending.speculated_in(state):
            pending.undo = []
            continue
        for asset_id, url, owner, loc, loc_owner in reversed(pending.undo):
            state.forget(asset_id)
            if url is not None and owner is not None:
                state.path_of[asset_id] = state.trie.insert_node(url, owner, share=asset_id)
            if loc is not None and loc_owner is not None:
                state.location_of[asset_id] = state.locations.insert_node(loc, loc_owner)
        pending.undo = []
