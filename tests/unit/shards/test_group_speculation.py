"""A group's speculated storage paths (shards/group_commit.py) are undone only in the tries they were put in."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError
from shardcat.shards.group_commit import PendingWrite, speculate, tries_of, undo_speculation
from shardcat.shards.state import MetastoreState


def _table(path: str, asset_id: str | None = None) -> Asset:
    return Asset(id=asset_id or str(uuid.uuid4()), metastore_id="m", type="table", namespace="table", parent_id="s",
                 name="t", full_name="c.s.t", storage_path=path,
                 info={"table_type": "EXTERNAL", "storage_location": path})


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


def _moving_rule_reads_only(state: MetastoreState, table: Asset, to: str):
    """The update rule for a table's storage location, with the state's tries made read-only: a
    group's write may change them only through its speculation, which is undone with it."""
    from shardcat.catalog.tree.tables import updated_storage_and_columns

    def refuse(*_):
        raise AssertionError("the update rule changed the state's tries")
    state.forget, state.remember = refuse, refuse
    return asyncio.run(updated_storage_and_columns(None, state, table, {"storage_location": to}))


def test_moving_a_table_checks_its_new_path_without_touching_the_tries():
    """It used to take the table out of the tries and put it back: done on tries swapped in during the
    write's body, that put a path the group had not committed into them, for good once the undo left them alone."""
    state = MetastoreState("m")
    table, other = _table("s3://b/t"), _table("s3://b/u")
    state.remember(table)
    state.remember(other)
    before = state.urls()
    assert _moving_rule_reads_only(state, table, "s3://b/t2").storage_path == "s3://b/t2"
    assert _moving_rule_reads_only(state, table, "s3://b/t/inner").storage_path == "s3://b/t/inner"  # its own path is free to it
    assert state.urls() == before


def test_moving_a_table_onto_another_tables_path_is_refused_by_every_spelling():
    state = MetastoreState("m")
    table, other = _table("s3://b/t"), _table("s3://b/u")
    state.remember(table)
    state.remember(other)
    for to in ("s3://b/u", "s3://b/u/", "s3://b/u/x", "s3://b//u/x", "s3://b"):
        with pytest.raises(CatalogError) as e:
            _moving_rule_reads_only(state, table, to)
        assert e.value.code == "INVALID_PARAMETER_VALUE", to
