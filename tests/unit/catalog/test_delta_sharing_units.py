"""Delta Sharing, the parts without a server (catalog/protocols/delta_sharing/): JSON predicate hints on
partition values and statistics, best effort; a share's partition filters, enforced; signed file
URLs (files.py); the metastore a router reads from a sharing path (routing.py)."""

from __future__ import annotations

import json

import pytest

from shardcat.catalog.protocols.delta_sharing.predicates import FileFacts, may_match, parse_hint, partition_filter

COLUMNS = {"id": "long", "day": "date", "region": "string", "price": "double"}


def col(name, kind):
    return {"op": "column", "name": name, "valueType": kind}


def lit(value, kind):
    return {"op": "literal", "value": value, "valueType": kind}


def hint(tree) -> dict:
    parsed = parse_hint(json.dumps(tree), COLUMNS)
    assert parsed is not None
    return parsed


def facts(partitions=None, stats=None):
    return FileFacts(partitions or {}, json.dumps(stats) if stats is not None else None, ["region", "day"])


EU = facts({"region": "eu", "day": "2024-01-02"}, {"numRecords": 3, "minValues": {"id": 10, "price": 1.5},
                                                   "maxValues": {"id": 20, "price": 9.0}, "nullCount": {"id": 0}})


@pytest.mark.parametrize("tree, expected", [
    ({"op": "equal", "children": [col("region", "string"), lit("eu", "string")]}, True),
    ({"op": "equal", "children": [col("region", "string"), lit("us", "string")]}, False),
    ({"op": "greaterThan", "children": [col("day", "date"), lit("2024-01-01", "date")]}, True),
    ({"op": "lessThan", "children": [col("day", "date"), lit("2024-01-02", "date")]}, False),
    ({"op": "lessThan", "children": [col("id", "long"), lit("10", "long")]}, False),
    ({"op": "lessThanOrEqual", "children": [col("id", "long"), lit("10", "long")]}, True),
    ({"op": "greaterThan", "children": [col("id", "long"), lit("20", "long")]}, False),
    ({"op": "greaterThanOrEqual", "children": [lit("5", "long"), col("id", "long")]}, False),
    ({"op": "equal", "children": [col("id", "long"), lit("15", "long")]}, True),
    ({"op": "not", "children": [{"op": "equal", "children": [col("region", "string"), lit("eu", "string")]}]}, False),
    ({"op": "not", "children": [{"op": "equal", "children": [col("id", "long"), lit("15", "long")]}]}, True),
    ({"op": "and", "children": [{"op": "equal", "children": [col("region", "string"), lit("eu", "string")]},
                                {"op": "lessThan", "children": [col("id", "long"), lit("5", "long")]}]}, False),
    ({"op": "or", "children": [{"op": "equal", "children": [col("region", "string"), lit("us", "string")]},
                               {"op": "lessThan", "children": [col("price", "double"), lit("2", "double")]}]}, True),
    ({"op": "isNull", "children": [col("region", "string")]}, False),
    ({"op": "isNull", "children": [col("id", "long")]}, False),
    ({"op": "not", "children": [{"op": "isNull", "children": [col("id", "long")]}]}, True),
])
def test_hints_skip_only_files_that_cannot_match(tree, expected):
    assert may_match(hint(tree), EU) is expected


def test_files_without_statistics_are_kept():
    tree = hint({"op": "lessThan", "children": [col("id", "long"), lit("0", "long")]})
    assert may_match(tree, facts({"region": "eu"})) is True
    # String statistics are not trusted (a maximum may be truncated): kept.
    s = facts({}, {"minValues": {"name": "b"}, "maxValues": {"name": "c"}})
    assert may_match(parse_hint(json.dumps({"op": "equal", "children": [col("name", "string"), lit("z", "string")]}),
                                {"name": "string"}), s) is True


@pytest.mark.parametrize("text", [
    "{not json", "[]", json.dumps({"op": "equal", "children": [col("nope", "long"), lit("1", "long")]}),
    json.dumps({"op": "explode"}), json.dumps({"op": "and", "children": [col("id", "long")]}),
    json.dumps({"op": "equal", "children": [col("id", "long"), lit("x", "long")]}),
    json.dumps({"op": "equal", "children": [col("id", "long"), lit("1", "complex")]}),
])
def test_hints_that_cannot_be_used_filter_nothing(text):
    assert parse_hint(text, COLUMNS) is None
    assert may_match(parse_hint(text, COLUMNS), EU) is True


def test_a_deep_hint_is_refused_not_recursed():
    for depth in (100, 100_000):    # past the checked depth; past what the JSON parser recurses into
        text = '{"op":"not","children":[' * depth + json.dumps(col("id", "long")) + "]}" * depth
        assert parse_hint(text, COLUMNS) is None


def test_partition_filters_are_enforced():
    test = partition_filter([{"values": [{"name": "region", "op": "EQUAL", "value": "eu"}]},
                             {"values": [{"name": "region", "op": "LIKE", "value": "u_"},
                                         {"name": "day", "op": "EQUAL", "value": "2024-01-01"}]}],
                            {}, ["region", "day"])
    assert test({"region": "eu", "day": "x"})
    assert test({"region": "us", "day": "2024-01-01"})
    assert not test({"region": "us", "day": "2024-01-02"})
    assert not test({"region": "asia", "day": "2024-01-01"})
    by_recipient = partition_filter([{"values": [{"name": "Region", "recipient_property_key": "zone"}]}],
                                    {"zone": "us"}, ["region"])
    assert by_recipient({"region": "us"}) and not by_recipient({"region": "eu"})
    assert partition_filter(None, {}, ["region"]) is None
    with pytest.raises(ValueError):      # not a partition column: cannot be enforced
        partition_filter([{"values": [{"name": "id", "value": "1"}]}], {}, ["region"])
    with pytest.raises(ValueError):      # the recipient lacks the property
        partition_filter([{"values": [{"name": "region", "recipient_property_key": "zone"}]}], {}, ["region"])


# ---- signed file URLs and the router's reading of a sharing path (files.py, routing.py) ----------


def test_signed_grants_verify_only_unchanged():
    from shardcat.catalog.protocols.delta_sharing import files
    from shardcat.store.sealing import SecretBox
    from cryptography.fernet import Fernet
    box = SecretBox([Fernet.generate_key()])
    grant = files.FileGrant("0b6b1d9e-4c1a-4c47-9d4e-6a1f0e2b3c4d", "s", "t", "r", "a=1/part-0.parquet", 123, "k")
    payload, mac = files.sign(box, grant)
    assert files.verify(box, payload, mac) == grant
    assert files.verify(SecretBox([Fernet.generate_key()]), payload, mac) is None        # another server's key
    other, _ = files.sign(box, files.FileGrant(*[*grant.__dict__.values()][:4], "a=2/part-0.parquet", 123, "k"))
    assert files.verify(box, other, mac) is None                                       # another file
    other, _ = files.sign(box, files.FileGrant(*[*grant.__dict__.values()][:6], "k2"))
    assert files.verify(box, other, mac) is None                                       # another token
    assert files.verify(box, payload, "") is None and files.verify(box, "x", mac) is None
    # A rotated key file (new key first, old after it) still opens the old URLs.
    rotated = SecretBox([Fernet.generate_key(), *box.keys])
    assert files.verify(rotated, payload, mac) == grant
    assert files.grant_metastore(payload) == grant.metastore_id and files.grant_metastore("%%") is None


def test_the_router_finds_the_metastore_of_a_sharing_path():
    from shardcat.catalog.protocols.delta_sharing import files
    from shardcat.catalog.protocols.delta_sharing.routing import metastore_of
    ms = "0b6b1d9e-4c1a-4c47-9d4e-6a1f0e2b3c4d"
    payload, _ = files.sign(None, files.FileGrant(ms, "s", "t", "r", "p", 1, "k"))
    assert metastore_of(f"/api/2.1/delta-sharing/metastores/{ms}/shares") == ms
    assert metastore_of(f"/api/2.1/delta-sharing/files/{payload}/p.parquet") == ms
    assert metastore_of(f"/api/2.1/unity-catalog/public/data_sharing_activation/{ms}.abc") == ms
    assert metastore_of(f"/api/2.1/unity-catalog/public/data_sharing_activation_info/{ms}.abc") == ms
    assert metastore_of("/api/2.1/delta-sharing/metastores/not-a-uuid/shares") is None
    assert metastore_of("/api/2.1/unity-catalog/tables") is None


def test_sql_predicate_hints_as_a_tree():
    from shardcat.catalog.protocols.delta_sharing.predicates import parse_sql_hints
    tree = parse_sql_hints(["region = 'eu'", "10 < id", "day >= '2024-01-01'", "nonsense ((", "nope = 1",
                            "price IS NOT NULL"], COLUMNS)
    assert tree["op"] == "and" and len(tree["children"]) == 4
    assert may_match(tree, EU) is True
    assert may_match(parse_sql_hints(["region <> 'eu'"], COLUMNS), EU) is False
    assert may_match(parse_sql_hints(["id > 20"], COLUMNS), EU) is False
    assert may_match(parse_sql_hints(["25 <= id"], COLUMNS), EU) is False
    assert may_match(parse_sql_hints(["region = 'it''s'"], COLUMNS), EU) is False
    assert parse_sql_hints(["garbage"], COLUMNS) is None and parse_sql_hints("x", COLUMNS) is None
