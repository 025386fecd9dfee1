"""An asset's answer is encoded once per state and kind of caller (shards/service.py: present)."""

from __future__ import annotations

import dataclasses

import orjson

from shardcat.auth import Caller
from shardcat.entities.asset import Asset
from shardcat.web.kit import encode_json
from shardcat.catalog.tree.assets import present, presented_json, presented_page

TRUSTED = Caller("engine", 2, False, 1, "m", trusted_engine=True)
USER = Caller("alice", 3, False, 1, "m")


def _table(comment: str) -> Asset:
    info = {"table_type": "MANAGED", "data_source_format": "DELTA", "comment": comment,
            "row_filter": {"function_name": "c.s.only_eu", "input_column_names": ["country"]},
            "columns": [{"name": "id", "type_name": "LONG", "position": 0},
                        {"name": "email", "type_name": "STRING", "position": 1,
                         "mask": {"function_name": "c.s.hide", "using_column_names": []}}]}
    return Asset("t1", "m", "table", "table", "s1", "t", "c.s.t", "file:///x/t", info, 3)


def _shown(asset: Asset, caller: Caller) -> dict:
    return orjson.loads(encode_json({"table": present(asset, caller)}))["table"]


def test_row_filters_and_masks_only_for_trusted_engines_in_either_order():
    table = _table("first")
    for caller in (TRUSTED, USER, TRUSTED, USER):
        shown = _shown(table, caller)
        assert shown["full_name"] == "c.s.t" and shown["table_id"] == "t1" and shown["comment"] == "first"
        if caller is TRUSTED:
            assert shown["row_filter"]["function_name"] == "c.s.only_eu"
            assert shown["columns"][1]["mask"]["function_name"] == "c.s.hide"
        else:
            assert "row_filter" not in shown and all("mask" not in c for c in shown["columns"])
    assert set(table.memo) == {True, False}
    assert "mask" in table.info["columns"][1], "presenting must not change the stored state"


def test_a_new_state_of_an_asset_is_encoded_afresh():
    old = _table("first")
    assert _shown(old, USER)["comment"] == "first"
    new = dataclasses.replace(old, info={**old.info, "comment": "second"}, written_at=4)
    assert new.memo == {} and _shown(new, USER)["comment"] == "second"
    assert _shown(old, USER)["comment"] == "first"


def test_answers_orjson_cannot_carry_exactly_fall_back_to_json():
    assert orjson.loads(encode_json({"n": 1})) == {"n": 1}
    assert encode_json({"n": 2 ** 70}) == b'{"n": 1180591620717411303424}'


def test_a_page_is_presented_as_each_of_its_assets_whichever_was_encoded_first():
    """A list's page (presented_page) takes kept encodings without a call per asset: the same bytes
    as presenting each, for trusted engines and users, encoded before or not, a schema among tables."""
    schema = Asset("s1", "m", "schema", "schema", "c1", "s", "c.s", None, {"comment": "a schema"}, 3)
    for caller, other in ((USER, TRUSTED), (TRUSTED, USER)):
        page = [_table("one"), _table("two"), schema]
        presented_json(page[1], other)              # kept for the other kind of caller only
        presented_json(page[0], caller)             # kept for this one
        got = presented_page(page, caller)
        assert got == [presented_json(a, caller) for a in page]
        shown = orjson.loads(got[1])
        assert ("row_filter" in shown) == (caller is TRUSTED) and shown["comment"] == "two"
