"""A group's speculated storage paths (shards/group_commit.py) are undone only in the tries they were put in."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from shardcat.entities.asset import Asset
from shardcat.shards.group_commit import PendingWrite, speculate, tries_of, undo_speculation
from shardcat.shards.state import MetastoreState


def _table(path: str, asset_id: str | None = None) -> Asset:
    return Asset(id=asset_id or str(uuid.uuid4()), metastore_id="m", type="table", namespace="table", parent_id="s",
                 name="t", full_name="c.s.t", storage_path=path, info={})


def _speculated(state: MetastoreState, asset: Asset) -> PendingWrite:
    pending = PendingWrite(body=None, done=None)
    pending.undo = speculate(state, SimpleNamespace(deleted=[], written={asset.id: asset}))
    pending.tries = tries_of(state)
    return pending


def test_undone_in_the_tries_it_was_put_in():
    state = MetastoreState("m")
    old = _table("s3://b/old")
    state.remember(old)
    pending = _speculated(state, _table("s3://b/new", old.id))       # a move, not committed
    assert state.trie.owner("s3://b/new/x")[1].asset_id == old.id
    undo_speculation(state, [pending])
    assert state.trie.owner("s3://b/new/x") is None and state.trie.owner("s3://b/old/x")[1].asset_id == old.id


def test_tries_swapped_in_meanwhile_keep_what_the_database_holds():
    """The moved table was not in the tries the group wrote in (a cold trie that had not loaded it); the
    tries swapped in before the group rolled back were read from the database and hold it at its old
    path: undoing there must not drop it (the path would look free to the next create)."""
    state = MetastoreState("m")
    committed = _table("s3://b/old")
    pending = _speculated(state, _table("s3://b/new", committed.id))
    fresh = MetastoreState("m")              # what the database holds, built aside
    fresh.remember(committed)
    state.trie, state.path_of = fresh.trie, fresh.path_of
    state.locations, state.location_of = fresh.locations, fresh.location_of
    undo_speculation(state, [pending])
    assert state.trie.owner("s3://b/old/x")[1].asset_id == committed.id
    assert state.trie.owner("s3://b/new/x") is None
