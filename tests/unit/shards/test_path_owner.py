"""PathOwner, the trie's value packed in one bytes object: every field reads back as given, copies
and pickles keep it, and it is smaller than the object of four fields it replaced (issue #48)."""

from __future__ import annotations

import copy
import pickle
import sys
import uuid

import pytest

from shardcat.shards.state import PathOwner


@pytest.mark.parametrize("asset_id", [
    str(uuid.uuid4()),                  # canonical: kept as 16 bytes
    str(uuid.uuid4()).upper(),          # not canonical: kept as written
    "x", "a" * 255,
])
@pytest.mark.parametrize("type_, full_name, is_root", [
    ("table", "cat.sch.tbl_0001", False), ("catalog", "", True),
    ("volume", "ü.é.ß 名前", False), ("a_new_type_here", "m", True),
])
def test_fields_read_back(asset_id, type_, full_name, is_root):
    owner = PathOwner(asset_id, type_, full_name, is_root)
    assert (owner.asset_id, owner.type, owner.full_name, owner.is_root) == (asset_id, type_, full_name, is_root)
    for again in (pickle.loads(pickle.dumps(owner)), copy.copy(owner), copy.deepcopy(owner)):
        assert type(again) is PathOwner and again == owner
        assert (again.asset_id, again.type, again.full_name, again.is_root) == (asset_id, type_, full_name, is_root)
    assert repr(owner) == f"PathOwner({asset_id!r}, {type_!r}, {full_name!r}, is_root={is_root})"


def test_owners_differ_by_every_field():
    base = (str(uuid.uuid4()), "table", "c.s.t", False)
    owners = {PathOwner(*base)}
    for i, other in enumerate((str(uuid.uuid4()), "volume", "c.s.u", True)):
        fields = list(base)
        fields[i] = other
        owners.add(PathOwner(*fields))
    assert len(owners) == 5


def test_ids_that_do_not_fit_are_refused():
    with pytest.raises(ValueError):
        PathOwner("", "table", "c.s.t", False)
    with pytest.raises(ValueError):
        PathOwner("a" * 256, "table", "c.s.t", False)


def test_smaller_than_a_record_and_its_name():
    full_name = "catalog_one.schema_one.table_000001"
    owner = PathOwner(str(uuid.uuid4()), "table", full_name, False)
    # The record it replaced: an object of four slots (64 B with its GC header) plus the name's string.
    assert sys.getsizeof(owner) + 40 <= 64 + sys.getsizeof(full_name)
