"""ABAC evaluation (governance/abac.py), pure: conditions, who a policy is for, binding columns,
precedence and conflicts."""

from __future__ import annotations

import pytest

from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError
from shardcat.governance import abac


def _table(tags=None, columns=()):
    return Asset(id="t", metastore_id="m", type="table", namespace="table", parent_id="s", name="t",
                 full_name="c.s.t", storage_path=None, info={"tags": tags or {}, "columns": list(columns)})


def _mask(name="p", to=("analysts",), excepted=(), when=None, on="c"):
    return abac.Policy.of({"name": name, "on_securable_type": "CATALOG", "on_securable_fullname": on,
                           "policy_type": abac.COLUMN_MASK, "for_securable_type": "TABLE",
                           "to_principals": list(to), "except_principals": list(excepted), "when_condition": when,
                           "match_columns": [{"condition": "hasTag('pii')", "alias": "x"}],
                           "column_mask": {"function_name": "c.s.f", "on_column": "x", "using": []}})


def test_conditions_parse_and_hold():
    cond = abac.parse_condition("hasTag('a') AND hasTagValue('b', 'v') OR hasTag('c')", "w")
    assert cond == [[("a", None), ("b", "v")], [("c", None)]]
    assert abac.holds(cond, {"c": None}) and abac.holds(cond, {"a": "x", "b": "v"})
    assert not abac.holds(cond, {"a": "x", "b": "w"})
    assert abac.holds(abac.parse_condition(None, "w"), {})
    for bad in ("isMember('x')", "hasTag('a') XOR hasTag('b')", "hasTagValue('a')", "hasTag('a', 'b')", 3):
        with pytest.raises(CatalogError):
            abac.parse_condition(bad, "w")


def test_a_mask_goes_to_the_matching_columns_for_the_named_callers_only():
    table = _table(columns=[{"name": "email", "tags": {"pii": None}}, {"name": "id"}])
    eff = abac.effective(table, [_mask(excepted=["auditors"])], frozenset({"bob", "analysts"}))
    assert eff.masks == {"email": {"function_name": "c.s.f", "using_column_names": []}} and not eff.conflict
    assert not abac.effective(table, [_mask()], frozenset({"bob"}))                        # not for bob
    assert not abac.effective(table, [_mask(excepted=["auditors"])], frozenset({"analysts", "auditors"}))
    assert abac.effective(table, [_mask(to=["account users"])], frozenset({"anyone"}))
    assert not abac.effective(table, [_mask(on="other")], frozenset({"analysts"}))          # another catalog
    assert not abac.effective(table, [_mask(when="hasTag('restricted')")], frozenset({"analysts"}))


def test_two_policies_masking_one_column_conflict_and_a_policy_replaces_the_tables_own():
    table = _table(columns=[{"name": "email", "tags": {"pii": None}, "mask": {"function_name": "c.s.own"}}])
    eff = abac.effective(table, [_mask("a"), _mask("b")], frozenset({"analysts"}))
    assert eff.conflict and "'a'" in eff.conflict and "'b'" in eff.conflict
    eff = abac.effective(table, [_mask("a")], frozenset({"analysts"}))
    shown = abac.apply({"columns": [{"name": "email", "mask": {"function_name": "c.s.own"}}]}, eff)
    assert shown["columns"][0]["mask"]["function_name"] == "c.s.f" and shown["effective_policies"] == ["a"]
