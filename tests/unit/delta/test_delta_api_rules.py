"""The UC Delta API's update rules (shardcat/delta/api_rules.py): any JSON a client sends is either
applied or refused with a CatalogError (never another exception, which would be a 500), and
the rules that decide what a table becomes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardcat.delta import api_rules as r
from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError

TABLE_ID = str(uuid.uuid4())
KEYS = ["action", "updates", "removals", "columns", "comment", "protocol", "commit", "domains", "partition-columns",
        "latest-published-version", "last-commit-version", "last-commit-timestamp-ms", "type", "fields", "name",
        "nullable", "metadata", "min-reader-version", "min-writer-version", "reader-features", "writer-features",
        "version", "timestamp", "file-name", "file-size", "file-modification-timestamp", "delta.clustering",
        "delta.rowTracking", "clusteringColumns", "rowIdHighWaterMark", "element-type", "contains-null"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**65), st.text(max_size=8),
                    st.sampled_from(r.UPDATE_ACTIONS), st.sampled_from(["long", "string", "decimal(5,2)", "struct"]))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)), max_leaves=12)
updates = st.lists(st.one_of(
    st.fixed_dictionaries({"action": st.sampled_from(r.UPDATE_ACTIONS)},
                          optional={k: json_values for k in KEYS[1:12]}), json_values), max_size=4)


def table(**props) -> Asset:
    return Asset(id=TABLE_ID, metastore_id=str(uuid.uuid4()), type="table", namespace="table", parent_id="p",
                 name="t", full_name="c.s.t", storage_path="file:///x", info={
                     "table_type": "MANAGED", "data_source_format": "DELTA",
                     "columns": [{"name": "id", "type_name": "LONG", "position": 0}],
                     "properties": {"delta.feature.catalogManaged": "supported",
                                    "io.unitycatalog.tableId": TABLE_ID, **props}})


@given(updates)
def test_any_update_is_applied_or_refused_cleanly(ups):
    body = {"requirements": [{"type": "assert-table-uuid", "uuid": TABLE_ID}], "updates": ups}
    try:
        req = r.parse_update(body)
        r.apply_updates(table(), req, "me", 1)
    except CatalogError:
        pass


@given(json_values)
def test_any_body_is_parsed_or_refused_cleanly(body):
    try:
        r.parse_update(body if isinstance(body, dict) else {"requirements": body, "updates": body})
    except CatalogError:
        pass


def req(*ups):
    return r.parse_update({"requirements": [{"type": "assert-table-uuid", "uuid": TABLE_ID}], "updates": list(ups)})


def test_protocol_and_domains_become_derived_properties():
    after = r.apply_updates(table(), req(
        {"action": "set-protocol", "protocol": {"min-reader-version": 3, "min-writer-version": 7,
                                                "reader-features": ["catalogManaged"],
                                                "writer-features": ["catalogManaged", "rowTracking"]}},
        {"action": "set-domain-metadata", "updates": {"delta.rowTracking": {"rowIdHighWaterMark": 41}}}), "me", 5)
    props = after.info["properties"]
    assert props["delta.minReaderVersion"] == "3" and props["delta.feature.rowTracking"] == "supported"
    assert props["delta.rowTracking.rowIdHighWaterMark"] == "41"
    assert after.info["updated_at"] == 5 and after.info["updated_by"] == "me"
    with pytest.raises(CatalogError, match="writer features"):
        r.protocol_properties({"min-reader-version": 3, "min-writer-version": 7, "reader-features": ["x"]})


def test_a_data_only_commit_changes_no_metadata_and_a_metadata_commit_records_its_version():
    commit = {"action": "add-commit", "commit": {"version": 4, "timestamp": 9, "file-size": 1,
                                                  "file-name": f"{4:020d}.{uuid.uuid4()}.json",
                                                  "file-modification-timestamp": 9}}
    assert r.apply_updates(table(), req(commit), "me", 5) is None
    after = r.apply_updates(table(), req(commit, {"action": "set-table-comment", "comment": "c"}), "me", 5)
    assert after.info["properties"]["delta.lastUpdateVersion"] == "4" and after.info["comment"] == "c"


def test_etag_follows_the_table_and_its_version():
    t = table()
    assert r.etag(t, 1) == r.etag(table(), 1) != r.etag(t, 2)
    assert r.etag(table(x="1"), 1) != r.etag(t, 1)
