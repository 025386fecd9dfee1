"""What new columns keep of the governance of the ones they replace (entities/columns.py
`carry_governance`): by name in any case, by field id where the writer has one (a rename), the
names in the row filter and masks following a rename, and what goes reported for the caller's rights."""

from __future__ import annotations

import pytest

from shardcat.entities.columns import carry_governance
from shardcat.errors import CatalogError

MASK = {"function_name": "c.s.redact", "using_column_names": ["ssn"]}
OLD = [{"name": "id", "type_name": "LONG"},
       {"name": "ssn", "type_name": "STRING", "tags": {"pii": "yes"}},
       {"name": "email", "type_name": "STRING", "tags": {"note": "x"}, "mask": MASK}]


def _cols(*names):
    return [{"name": n, "type_name": "STRING"} for n in names]


def test_columns_that_stay_keep_tags_and_masks_by_name_in_any_case():
    kept = carry_governance(OLD, _cols("ID", "SSN", "email", "new"))
    by = {c["name"]: c for c in kept.columns}
    assert by["SSN"]["tags"] == {"pii": "yes"} and by["email"]["mask"] == MASK and by["email"]["tags"] == {"note": "x"}
    assert "tags" not in by["new"] and (kept.lost_tags, kept.lost_masks) == ([], [])


def test_a_writer_sets_no_tags_and_what_goes_is_reported():
    kept = carry_governance(OLD, [{"name": "id", "type_name": "LONG", "tags": {"pii": "no"}}] + _cols("ssn"))
    assert "tags" not in kept.columns[0]
    assert kept.lost_tags == [("email", "note", "x")] and kept.lost_masks == ["email"]


def test_a_rename_by_field_id_keeps_governance_and_the_names_that_use_the_column_follow():
    row_filter = {"function_name": "c.s.f", "input_column_names": ["SSN", "id"]}
    kept = carry_governance(OLD, _cols("id", "tax_id", "email", "ssn"), row_filter,
                            renamed={"id": "id", "ssn": "tax_id", "email": "email"})
    by = {c["name"]: c for c in kept.columns}
    assert by["tax_id"]["tags"] == {"pii": "yes"} and "tags" not in by["ssn"]     # a new column of the old name
    assert by["email"]["mask"]["using_column_names"] == ["tax_id"]
    assert kept.row_filter["input_column_names"] == ["tax_id", "id"] and kept.lost_tags == []


def test_a_column_the_row_filter_or_a_mask_uses_cannot_go():
    with pytest.raises(CatalogError) as e:
        carry_governance(OLD, _cols("id", "email"))          # email's mask uses ssn
    assert e.value.code == "INVALID_PARAMETER_VALUE" and "'ssn'" in e.value.message
    with pytest.raises(CatalogError):
        carry_governance(OLD[:2], _cols("ssn"), {"function_name": "c.s.f", "input_column_names": ["id"]})


def test_given_masks_are_the_writers_own():
    kept = carry_governance(OLD, _cols("id", "ssn", "email"), masks_given=True)
    assert "mask" not in kept.columns[2] and kept.lost_masks == ["email"] and kept.lost_tags == []
