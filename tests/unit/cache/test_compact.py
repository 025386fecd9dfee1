"""Tests for cache/compact.py: shared strings and columns leave every info equal, as JSON too."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from shardcat.cache.compact import SHORT, ColumnPool, share_info
from shardcat.cache.metastore_cache import MetastoreCache
from shardcat.entities.asset import Asset


def table_info(comment: str, **column_extra) -> dict:
    """Decoded afresh from text, as the store reads it: no object shared with another call."""
    info = {"table_type": "MANAGED", "owner": "alice", "comment": comment,
            "properties": {"owner_team": "benchmarks"},
            "columns": [{"name": "id", "type_name": "LONG", "nullable": False, "position": 0, **column_extra},
                        {"name": "amount", "type_name": "DECIMAL", "type_precision": 18, "type_scale": 2,
                         "position": 1, "nullable": True}]}
    return json.loads(json.dumps(info))


def test_equal_columns_and_strings_become_one_object():
    pool = ColumnPool()
    a, b = table_info("first"), table_info("second")
    share_info(a, pool)
    share_info(b, pool)
    assert a["columns"][0] is b["columns"][0] and a["columns"][1] is b["columns"][1]
    assert a["owner"] is b["owner"] and a["properties"]["owner_team"] is b["properties"]["owner_team"]
    assert next(iter(a["properties"])) is next(iter(b["properties"]))      # keys too
    assert a == table_info("first") and b == table_info("second")
    assert list(a) == list(table_info("first"))                          # key order kept


def test_values_of_other_types_are_not_taken_for_one_another():
    """True == 1 == 1.0 in Python; a column with one must not come back with another."""
    pool = ColumnPool()
    infos = [table_info("c", flag=v) for v in (True, 1, 1.0, False, 0)]
    texts = [json.dumps(i) for i in infos]
    for info in infos:
        share_info(info, pool)
    assert [json.dumps(i) for i in infos] == texts
    assert len({id(i["columns"][0]) for i in infos}) == 5


def test_columns_holding_lists_or_dicts_are_kept_unpooled_and_equal():
    pool = ColumnPool()
    a = table_info("x", tags=[{"key": "pii", "value": "yes"}], mask={"function_name": "m.s.f"})
    b = table_info("x", tags=[{"key": "pii", "value": "yes"}], mask={"function_name": "m.s.f"})
    share_info(a, pool)
    share_info(b, pool)
    assert a == b == table_info("x", tags=[{"key": "pii", "value": "yes"}], mask={"function_name": "m.s.f"})
    assert a["columns"][0] is not b["columns"][0]
    assert a["columns"][0]["tags"][0]["key"] is b["columns"][0]["tags"][0]["key"]


def test_long_strings_are_left_alone():
    long = "v" * (SHORT + 1)
    a, b = {"view_definition": long + ""}, {"view_definition": "".join(["v"] * (SHORT + 1))}
    assert a["view_definition"] is not b["view_definition"]
    share_info(a)
    share_info(b)
    assert a["view_definition"] == b["view_definition"] == long
    assert a["view_definition"] is not b["view_definition"]


def test_the_pool_is_bounded():
    pool = ColumnPool(size=3)
    for i in range(10):
        share_info({"columns": [{"name": f"c{i}", "type_name": "LONG"}]}, pool)
    assert len(pool) == 3
    seen = {"name": "c9", "type_name": "LONG"}
    kept, saved = pool.column(seen)
    assert kept == seen and kept is not seen and saved == len('{"name":"c9","type_name":"LONG"}')   # the pooled one
    first = {"name": "c0", "type_name": "LONG"}
    assert pool.column(first) == (first, 0)         # gone from the pool: pooled again as new


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)
columns = st.lists(st.dictionaries(st.sampled_from(["name", "type_name", "nullable", "position", "comment", "tags"]),
                                   json_values, max_size=6), max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({"columns": columns}, optional={"owner": st.text(max_size=5),
                                                                      "properties": json_values}), max_size=6))
def test_any_info_stays_equal_as_json(infos):
    """Whatever the infos, sharing leaves each one's JSON as it was (values, types and key order)."""
    before = [json.dumps(i) for i in infos]
    pool = ColumnPool(size=4)
    for info in infos:
        share_info(info, pool)
    assert [json.dumps(i) for i in infos] == before


def _table(i: int, comment: str) -> Asset:
    return Asset(id=f"t{i}", metastore_id="m", type="table", namespace="table", parent_id="s", name=f"t{i}",
                 full_name=f"c.s.t{i}", storage_path=None, info=table_info(comment), written_at=1)


def test_a_cache_shares_its_tables_columns_and_serves_them_unchanged():
    cache = MetastoreCache(1)
    assert cache.fill([_table(1, "one"), _table(2, "two")], 1)
    one, two = cache.get("t1", 1), cache.get("t2", 1)
    assert one.info == table_info("one") and two.info == table_info("two")
    assert one.info["columns"][0] is two.info["columns"][0]
    three = dataclasses.replace(_table(3, "three"), written_at=2)
    cache.apply_write(2, [three], [], created=["t3"])
    assert cache.get("t3", 2).info["columns"][1] is one.info["columns"][1]
    assert cache.get("t3", 1) is None
    cache._audit()


def test_a_cached_tables_location_is_its_path_string():
    path = "s3://bucket/root/tables/" + "t9"
    info = table_info("nine")
    info["storage_location"] = "".join(["s3://bucket/root/tables/", "t9"])
    table = dataclasses.replace(_table(9, "nine"), storage_path=path, info=info)
    assert table.info["storage_location"] is not path
    cache = MetastoreCache(1)
    cache.fill([table], 1)
    assert cache.get("t9", 1).info["storage_location"] is path
