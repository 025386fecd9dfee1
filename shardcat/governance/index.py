"""Each shard's privilege index of a metastore: loaded on first need, then kept current as a follower.

A shard keeps, per metastore, a `PrivilegeIndex` (cache/privilege_index.py), loaded on first
need (`privilege_index`) and then kept current as one of the shard's followers
(shards/followers.py, `PrivilegeFollower`): `on_applied` (its own writes, no I/O; the grants a
write set are in `WriteTx.grants_set`) and `on_reconcile` (others' writes: re-read the grants
and assets the change log names). A rebuild drops the index. The SQL is store/grants.py's.

A metastore of more than `CacheConfig.privileges_aside_above` securables takes seconds to load
(docs/benchmarks.md, "Scale"): there a request's decisions do not wait for it. `request_index`
gives the request a partial index of its own (cache/partial_privilege_index.py) and starts the
whole one loading aside; a question the partial one cannot answer raises IndexNeeded, and
`answering` (around every request the app or its front answers) loads what it names and
answers the request again. Past `MAX_LOADS` loads, or asked about everything, the request waits for the whole.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from itertools import islice

from ..cache.partial_privilege_index import IndexNeeded, PartialPrivilegeIndex
from ..cache.privilege_index import PrivilegeIndex
from ..entities.asset import Asset
from ..errors import CatalogError
from ..shards.session import current as current_session, past_read
from ..shards.warm_pace import Pace
from ..store.writes import WriteTx
from ..store.grants import count_securables, grants_of, privilege_snapshot, securable_chains

MAX_LOADS = 16      # a request's partial loads; then it waits for the whole index
PUT_CHUNK = 500     # securables put between two looks at a paced load's clock (~1 ms)


async def load_index(store, metastore_id: str, pace=None) -> tuple[int, PrivilegeIndex]:
    """The metastore's securables, owners and grants at one version (one repeatable-read snapshot);
    `pace`: as background work, giving way to the requests in flight (shards/warm_pace.py)."""
    version, owner, assets, grants = await privilege_snapshot(store, metastore_id, pace)
    index = PrivilegeIndex(metastore_id, owner)
    # Parents first, so that dense ids follow the hierarchy (not needed for correctness): one pass, not a sort.
    order = {"catalog": 0, "schema": 1, "registered_model": 3}
    ranks: list[list] = [[], [], [], []]
    for r in assets:
        ranks[order.get(r["type"], 2)].append(r)
    # Types and owners are kept as codes, full names packed (cache/privilege_index.py): only the id stays a str.
    rows = ((r["id"], r["parent_id"], r["type"], r["owner"], r["full_name"]) for rank in ranks for r in rank)
    if pace is None:
        index.put_many(rows)
    else:
        while chunk := list(islice(rows, PUT_CHUNK)):
            index.put_many(chunk)
            if pace.due():
                await pace.give_way()
    for sid, held in grants.items():
        index.set_grants(sid, held)
    return version, index


async def privilege_index(shard, metastore_id: str, min_version: int = 0) -> PrivilegeIndex:
    """The shard's privilege index of a metastore, loaded on first use, at least as new as its state."""
    shard.follow(PRIVILEGES)      # keeps the index current once loaded (idempotent)
    for _ in range(3):
        state = await shard.state(metastore_id, min_version, paths=False)   # grants need no path index
        if state.privileges is None:
            behind = False
            async with state.reconcile_lock:
                if state.privileges is None:
                    version, state.privileges = await load_index(shard.store, metastore_id)
                    behind = version > state.version
            if behind:
                await shard.reconcile(state)      # replaying what the load already saw is harmless
        index = state.privileges
        if index is None:
            continue                              # a rebuild dropped it meanwhile
        if index.root_owner is _STALE:
            meta = await shard.store.get_metastore(metastore_id)
            index.root_owner = meta.info.get("owner") if meta else None
        return index
    raise CatalogError("RESOURCE_CONFLICT", "The metastore is changing too fast; try the request again.")


_STALE = object()   # the metastore's owner may have changed: read it again


@dataclass
class RequestPrivileges:
    """One request's partial index, in its session."""
    index: PartialPrivilegeIndex
    loads: int = 0
    whole: bool = False         # asked about everything, or loaded too often: wait for the whole index


async def request_index(shard, caller) -> PrivilegeIndex:
    """The index the caller's request decides with: the metastore's whole one when loaded, or small
    enough to load now; else, in a request (a session of this task), a partial one of its own while
    the whole one loads aside. Only the task answering the request decides with it: a group's write
    body runs in its committer's task, which decides with the whole index."""
    metastore_id = caller.metastore()
    session = current_session()
    if session is None or session.task is not asyncio.current_task() or session.caller != caller or \
            past_read() is not None or (session.privileges is not None and session.privileges.whole):
        return await privilege_index(shard, metastore_id, caller.min_version)
    mine = session.privileges
    # With the whole index loaded (the common case) privilege_index makes the one state() call needed.
    state = shard.states.get(metastore_id)
    if state is None or state.privileges is None:
        state = await shard.state(metastore_id, caller.min_version, paths=False)
    if state.privileges is not None or not await _loads_aside(shard, state):
        return await privilege_index(shard, metastore_id, caller.min_version)
    if mine is None or mine.index.root_id != metastore_id:
        meta = await shard.store.get_metastore(metastore_id)
        partial = PartialPrivilegeIndex(metastore_id, meta.info.get("owner") if meta else None)
        rows, grants = await securable_chains(shard.store, metastore_id, [])
        partial.load(rows, grants, ())
        mine = session.privileges = RequestPrivileges(partial)
    return mine.index


async def _loads_aside(shard, state) -> bool:
    """Whether the metastore is large enough to load its whole index aside; if so, that load is under way."""
    aside = state.privileges_aside
    if aside is None or (aside is not False and aside.done() and state.privileges is None):   # failed, or a rebuild dropped it
        most = shard.cache_config.privileges_aside_above
        if aside is None and await count_securables(shard.store, state.id, most + 1) <= most:
            state.privileges_aside = False
            return False
        aside = state.privileges_aside = asyncio.create_task(load_whole_aside(shard, state.id))
        # A failure is met again by the next request that needs the whole index.
        aside.add_done_callback(lambda t: t.cancelled() or t.exception())
    return aside is not False


async def load_whole_aside(shard, metastore_id: str) -> None:
    """The whole index for the requests to come, read without the state's reconcile lock (its writes
    are acknowledged meanwhile), then brought forward over the changes the state went through since
    and swapped in, as the path index is (shards/state.py `warm_paths`). Tests hold it back."""
    shard.follow(PRIVILEGES)
    for _ in range(3):
        state = await shard.state(metastore_id, paths=False)
        version, index = await load_index(shard.store, metastore_id, Pace())
        async with state.reconcile_lock:
            if shard.states.get(metastore_id) is not state or state.privileges is not None:
                return                            # moved away, gone cold, or loaded meanwhile
            if state.version > version:
                changes = await shard.store.changes(metastore_id, version, CATCH_UP_MOST)
                if len(changes) >= CATCH_UP_MOST or not changes or changes[0].version != version + 1:
                    continue                      # too far behind: read again
                changed = sorted({i for c in changes for i in c.changed})
                _, assets = await shard.store.get_assets_by_ids(metastore_id, [i for i in changed if i != metastore_id])
                state.privileges = index
                await on_reconcile(shard.store, state, changed, assets)
            else:
                state.privileges = index
        if version > state.version:
            await shard.reconcile(state)          # replaying what the load already saw is harmless
        return
    await privilege_index(shard, metastore_id)


CATCH_UP_MOST = 1000    # changes replayed onto an index read aside; more, and it is read again


async def answering(shard, session, attempt):
    """`attempt()`'s answer, made again after each load of what the request's partial index lacked
    (the app's innermost middleware and the front's own answers run requests through it). The writes
    of an attempt that asked were rolled back: a decision comes before the rows it allows."""
    while True:
        try:
            return await attempt()
        except IndexNeeded as need:
            if session is None or session.privileges is None or session.privileges.whole:
                raise       # not a partial index's question: a fault
            if session.written_version is not None:
                raise       # asked after a write committed: going again would write twice (a fault)
            await _load_needed(shard, session, need)


async def _load_needed(shard, session, need: IndexNeeded) -> None:
    """What a request's partial index was asked about and lacked, loaded into it; the whole index
    wanted (or too many loads) marks the request to wait for it."""
    mine = session.privileges
    mine.loads += 1
    if need.sids is None or mine.loads > MAX_LOADS:
        mine.whole = True
        return
    rows, grants = await securable_chains(shard.store, mine.index.root_id, list(need.sids))
    mine.index.load(rows, grants, need.sids)
    shard.stats["privilege_chain_loads"] += len(need.sids)


def on_applied(state, tx: WriteTx) -> None:
    """This shard's own write, applied to its index (no I/O): assets written or deleted, grants set."""
    index = state.privileges
    if index is None:
        return
    for asset_id in tx.deleted:
        index.remove(asset_id)
    for a in tx.written.values():
        if a.type != "staging_table":
            index.put(a.id, a.parent_id, a.type, a.info.get("owner"), a.full_name)
    updates = tx.grants_set
    for sid, held in updates.items():
        index.set_grants(sid, held)
    if state.id in tx.changed and state.id not in updates:
        index.root_owner = _STALE


async def on_reconcile(store, state, changed: list[str], assets: list[Asset]) -> None:
    """Others' writes (from the change log): re-read the grants of every changed securable."""
    index = state.privileges
    if index is None or not changed:
        return
    held = await grants_of(store, state.id, changed)
    found = {a.id for a in assets}
    for a in assets:
        if a.type != "staging_table":
            index.put(a.id, a.parent_id, a.type, a.info.get("owner"), a.full_name)
    for sid in changed:
        if sid != state.id and sid not in found:
            index.remove(sid)
        else:
            index.set_grants(sid, held.get(sid, {}))
    if state.id in changed:
        index.root_owner = _STALE


class PrivilegeFollower:
    """The shard's follower (shards/followers.py) that keeps each metastore's privilege index current."""

    def applied(self, state, tx: WriteTx) -> None:
        on_applied(state, tx)

    async def reconciled(self, state, changes) -> None:
        await on_reconcile(changes.store, state, changes.touched, changes.assets)

    def rebuilt(self, state, version: int) -> None:
        state.privileges = None     # reloaded on first use, at the new version


PRIVILEGES = PrivilegeFollower()
