"""SCIM filter parsing and evaluation (shardcat/governance/scim_filter.py), over plain dicts."""

from __future__ import annotations

import pytest

from shardcat.errors import CatalogError
from shardcat.governance.scim_filter import parse

EXT = "urn:ietf:params:scim:schemas:extension:shardcat:2.0:Principal"
ALICE = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User", EXT], "id": "7", "userName": "Alice",
         "displayName": "Alice Liddell", "active": True,
         "emails": [{"value": "alice@corp.org", "primary": True, "type": "work"},
                    {"value": "al@home.net", "type": "home"}],
         "groups": [{"value": "3", "display": "readers", "type": "direct"}],
         EXT: {"trustedEngine": False}, "meta": {"resourceType": "User"}}
BOB = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "id": "12", "userName": "bob",
       "active": False, "emails": [], "externalId": "x-1", "groups": []}


@pytest.mark.parametrize("text,matches", [
    ('userName eq "alice"', {"7"}),                                   # case-insensitive value
    ('USERNAME EQ "BOB"', {"12"}),                                    # and attribute and operator names
    ('userName ne "alice"', {"12"}),
    ('displayName co "lid"', {"7"}),
    ('userName sw "b" or userName ew "CE"', {"7", "12"}),
    ('emails co "home"', {"7"}),                                      # multi-valued: any value
    ('emails.value ew "corp.org"', {"7"}),
    ('emails[type eq "work" and value co "corp"]', {"7"}),
    ('emails[type eq "home" and value co "corp"]', set()),            # both in the same element
    ('groups.display eq "readers"', {"7"}),
    ('active eq false', {"12"}),
    ('active eq true and not (userName eq "bob")', {"7"}),
    ('externalId pr', {"12"}),
    ('displayName pr', {"7"}),
    ('id gt 10', {"12"}),
    ('id le 7', {"7"}),
    (f'{EXT}:trustedEngine eq false', {"7"}),
    ('urn:ietf:params:scim:schemas:core:2.0:User:userName eq "bob"', {"12"}),
    ('meta.resourceType eq "User"', {"7"}),
    ('userName eq "a" or userName eq "b" and active eq true', set()),  # and binds tighter than or
    ('(userName eq "alice" or userName eq "bob") and active eq true', {"7"}),
    ('userName eq "al\\"ice"', set()),
])
def test_filters(text, matches):
    predicate = parse(text)
    assert {r["id"] for r in (ALICE, BOB) if predicate(r)} == matches


@pytest.mark.parametrize("text,says", [
    ('userName xx "a"', "not an operator"),
    ('userName eq', "ends too early"),
    ('(userName eq "a"', "expected ')'"),
    ('userName eq "a")', "unexpected ')'"),
    ('userName eq "a" and', "ends too early"),
    ('userName eq bare', "expected a value"),
    ('not userName eq "a"', "expected '('"),
    ('"userName" eq "a"', "attribute name"),
    ('emails[type eq "work"', "expected ']'"),
    ('userName eq "unterminated', "cannot read"),
])
def test_bad_filters(text, says):
    with pytest.raises(CatalogError) as e:
        parse(text)
    assert e.value.code == "INVALID_PARAMETER_VALUE"
    assert says in e.value.message and "Invalid SCIM filter" in e.value.message
