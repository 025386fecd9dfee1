"""The session policy of a planned scan's credential (governance/vending.py objects_policy, policy_batches):
exactly the planned objects, read-only, no listing, each policy within AWS's packed size."""

from __future__ import annotations

import json

import pytest

from shardcat.errors import CatalogError
from shardcat.governance.vending import POLICY_CHARS, objects_policy, policy_batches


def test_the_policy_names_exactly_the_objects_read_only():
    policy = objects_policy("lake", ["data/t/data/a.parquet", "data/t/data/b.parquet"])
    (statement,) = policy["Statement"]
    assert statement["Action"] == ["s3:GetObject"]
    assert statement["Resource"] == ["arn:aws:s3:::lake/data/t/data/a.parquet", "arn:aws:s3:::lake/data/t/data/b.parquet"]
    assert "*" not in json.dumps(policy)


def test_batches_keep_every_key_once_in_order_and_each_policy_fits():
    keys = [f"warehouse/sales/orders/data/part-{i:05d}-{'x' * 60}.parquet" for i in range(300)]
    batches = policy_batches("lake", keys)
    assert len(batches) > 1 and [k for b in batches for k in b] == keys
    for batch in batches:
        assert len(json.dumps(objects_policy("lake", batch), separators=(",", ":"))) <= POLICY_CHARS


@pytest.mark.parametrize("key", ["t/data/*.parquet", "t/data/a?.parquet", "t/data/${aws:username}"])
def test_a_key_iam_would_read_as_a_wildcard_is_refused(key):
    with pytest.raises(CatalogError) as e:
        objects_policy("lake", ["t/data/ok.parquet", key])
    assert e.value.code == "INVALID_PARAMETER_VALUE"
