"""The request's caller (shardcat/auth.py): the copy the session middleware makes per request."""

from __future__ import annotations

import dataclasses

import pytest

from shardcat.auth import Caller


def test_reading_at_least_is_a_copy_with_only_the_version_changed():
    caller = Caller("ana", 7, False, 3, "m1", groups=frozenset({"eng"}), trusted_engine=True)
    later = caller.reading_at_least(42)
    assert later == dataclasses.replace(caller, min_version=42) and type(later) is Caller
    assert later.min_version == 42 and caller.min_version == 0       # the cached original is untouched
    assert later.principals == {"ana", "eng"} and later.metastore() == "m1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        later.min_version = 1
    assert hash(later) == hash(dataclasses.replace(caller, min_version=42))
