"""External locations sit in the shard state's own trie, apart from the one-asset-per-path trie."""

from shardcat.entities.asset import Asset
from shardcat.shards.locations import location_of, require_external_location
from shardcat.shards.shard import MetastoreState

import pytest

from shardcat.errors import CatalogError


def asset(type_, name, path, id_=None):
    return Asset(id=id_ or name, metastore_id="ms", type=type_, namespace=type_, parent_id="ms", name=name,
                 full_name=name, storage_path=path, info={})


def test_locations_and_tables_live_in_separate_tries():
    state = MetastoreState("ms")
    assert require_external_location(state, "s3://b/anything", "x") is None   # local mode
    state.remember(asset("external_location", "loc", "s3://b/loc"))
    state.remember(asset("table", "c.s.t", "s3://b/loc/t"))
    assert len(state.locations) == 1 and len(state.trie) == 1
    assert state.trie.first_overlap("s3://b/loc/t/x")[1].full_name == "c.s.t"
    assert location_of(state, "s3://b/loc/t/x").full_name == "loc"
    with pytest.raises(CatalogError) as e:
        require_external_location(state, "s3://b/elsewhere", "storage_location")
    assert "not inside any external location" in e.value.message
    # Moving a location: remember replaces its old url; forget removes it from the right trie.
    state.remember(asset("external_location", "loc", "s3://b/moved"))
    assert location_of(state, "s3://b/loc/t") is None and location_of(state, "s3://b/moved/x").full_name == "loc"
    state.forget("loc")
    assert len(state.locations) == 0 and len(state.trie) == 1
    assert require_external_location(state, "s3://b/elsewhere", "x") is None
