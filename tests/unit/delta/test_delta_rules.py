"""The pure commit rules (shardcat/delta/commits.py) and the Delta log format (shardcat/delta/log.py)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardcat.delta import commits as rules
from shardcat.delta import log as dlog
from shardcat.errors import CatalogError


def proposal(version: int, name: str | None = None) -> rules.CommitInfo:
    return rules.CommitInfo(version, 1, name or dlog.staged_file_name(version), 10, 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.booleans(), st.sampled_from([None, 0, 2, 5])), max_size=40),
       st.integers(1, 4))
def test_ratification_model(steps, limit):
    """Random proposals (fresh or replays of accepted ones) and reports against a model: versions are
    ratified in order, at most once; replays are no-ops; the unpublished count never passes the limit."""
    accepted: dict[int, str] = {}
    published = 0
    for version, replay, backfilled in steps:
        head = rules.Head(max(accepted, default=0), published)
        info = proposal(version, accepted.get(version) if replay else None)
        existing = {"file_name": accepted[version]} if version in accepted else None
        try:
            rules.check_proposal(head, info, existing, backfilled, limit)
        except rules.AlreadyRatified:
            assert replay and accepted.get(version) == info.file_name
            continue
        except CatalogError as e:
            if version <= head.latest:
                assert e.code == "RESOURCE_CONFLICT"
            elif version > head.latest + 1 or (backfilled or 0) > head.latest:
                assert e.code == "INVALID_PARAMETER_VALUE"
            else:
                assert e.code == "RESOURCE_EXHAUSTED"
                assert version - max(published, backfilled or 0) > limit
            continue
        assert version == head.latest + 1 and version not in accepted
        accepted[version] = info.file_name
        published = max(published, backfilled or 0)
        assert version - published <= limit
    assert sorted(accepted) == list(range(1, len(accepted) + 1))


def test_parse_commit_rules():
    table_id = str(uuid.uuid4())
    base = {"table_id": table_id, "table_uri": "file:///t"}
    c = rules.parse_commit({**base, "commit_info": proposal(3).to_json(), "latest_backfilled_version": 1})
    assert c.info.version == 3 and c.latest_backfilled_version == 1 and c.metadata is None
    with pytest.raises(CatalogError, match="names version 4"):
        rules.parse_commit({**base, "commit_info": {**proposal(3).to_json(), "file_name": dlog.staged_file_name(4)}})
    with pytest.raises(CatalogError, match="Either commit_info"):
        rules.parse_commit(base)
    md = rules.parse_commit({**base, "commit_info": proposal(1).to_json(), "metadata": {
        "description": "d", "properties": {"properties": {"a": "b"}}}}).metadata
    assert md == {"comment": "d", "properties": {"a": "b"}}
    with pytest.raises(CatalogError, match="query parameters"):
        rules.parse_get_commits({})


def test_catalog_default():
    on = {rules.FEATURE_PROPERTY: "supported"}
    assert rules.wants_catalog_managed(on)
    assert rules.wants_catalog_managed({}, None, on)
    assert not rules.wants_catalog_managed({rules.FEATURE_PROPERTY: "no"}, on)
    assert not rules.wants_catalog_managed(None, {}, None)


def test_checkpoint_round_trip(tmp_path):
    storage = dlog.Storage(f"file://{tmp_path}")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("t", pa.timestamp("us", tz="UTC"))])
    state = dlog.TableState()
    state.apply(0, [dlog.commit_info(5, "CREATE TABLE"), dlog.protocol(True),
                    dlog.metadata("abc", schema, {"k": "v"}, description="d")])
    state.apply(1, [dlog.commit_info(6, "WRITE"), dlog.add("a.parquet", 10, 2, 7), dlog.add("b.parquet", 11, 3, 7)])
    state.apply(2, [dlog.commit_info(7, "DELETE"), dlog.remove({"path": "a.parquet", "size": 10}, 8)])
    dlog.write_checkpoint(storage, state)
    back = dlog.read_checkpoint(storage, 2)
    assert back.version == 2 and back.protocol == state.protocol
    assert back.metadata == state.metadata and back.schema == schema
    assert back.files == state.files and list(back.files) == ["b.parquet"]
    assert storage.list_log() == (set(), {2})
