"""Each shard's privilege index of a metastore: loaded on first need, then kept current as a follower.

A shard keeps, per metastore, a `PrivilegeIndex` (cache/privilege_index.py), loaded on first
need (`privilege_index`) and then kept current as one of the shard's followers
(shards/followers.py, `PrivilegeFollower`): `on_applied` (its own writes, no I/O; the grants a
write set are in `WriteTx.grants_set`) and `on_reconcile` (others' writes: re-read the grants
and assets the change log names). A rebuild drops the index. The SQL is store/grants.py's.
"""

from __future__ import annotations

from ..cache.privilege_index import PrivilegeIndex
from ..entities.asset import Asset
from ..errors import CatalogError
from ..store.writes import WriteTx
from ..store.grants import grants_of, privilege_snapshot


async def load_index(store, metastore_id: str) -> tuple[int, PrivilegeIndex]:
    """The metastore's securables, owners and grants at one version (one repeatable-read snapshot)."""
    version, owner, assets, grants = await privilege_snapshot(store, metastore_id)
    index = PrivilegeIndex(metastore_id, owner)
    # Parents first, so that dense ids follow the hierarchy (not needed for correctness): one pass, not a sort.
    order = {"catalog": 0, "schema": 1, "registered_model": 3}
    ranks: list[list] = [[], [], [], []]
    for r in assets:
        ranks[order.get(r["type"], 2)].append(r)
    # Types and owners are kept as codes, full names packed (cache/privilege_index.py): only the id stays a str.
    index.put_many((r["id"], r["parent_id"], r["type"], r["owner"], r["full_name"]) for rank in ranks for r in rank)
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
