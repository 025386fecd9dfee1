"""Schemas between the UC Delta API, the Delta log and Unity Catalog columns (shardcat/delta/api_schema.py)."""

from __future__ import annotations

import json

import pytest

from shardcat.delta import api_schema as s
from shardcat.errors import CatalogError

NESTED = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {}},
    {"name": "price", "type": "decimal(10,2)", "nullable": True, "metadata": {"comment": "EUR"}},
    {"name": "tags", "type": {"type": "map", "key-type": "string", "value-type": {
        "type": "array", "element-type": "integer", "contains-null": False}, "value-contains-null": True},
     "nullable": True, "metadata": {}},
    {"name": "where", "type": {"type": "struct", "fields": [
        {"name": "lat", "type": "double", "nullable": True, "metadata": {}}]}, "nullable": True, "metadata": {}},
    {"name": "day", "type": "date", "nullable": True, "metadata": {}}]}


def test_api_log_and_uc_columns_round_trip():
    fields = s.log_fields(NESTED["fields"])
    assert fields[2]["type"] == {"type": "map", "keyType": "string", "valueContainsNull": True, "valueType": {
        "type": "array", "elementType": "integer", "containsNull": False}}
    columns = s.uc_columns(fields, ["DAY"])
    by_name = {c["name"]: c for c in columns}
    assert by_name["price"]["type_name"] == "DECIMAL" and by_name["price"]["type_precision"] == 10
    assert by_name["price"]["comment"] == "EUR"
    assert by_name["tags"]["type_text"] == "map<string,array<int>>"
    assert by_name["where"]["type_text"] == "struct<lat:double>" and by_name["id"]["type_text"] == "bigint"
    assert by_name["day"]["partition_index"] == 0 and "partition_index" not in by_name["id"]
    assert json.loads(by_name["tags"]["type_json"])["type"] == fields[2]["type"]
    assert s.api_columns(columns) == NESTED
    assert s.partition_columns_of(columns) == ["day"]


def test_columns_without_type_json_come_from_type_name():
    assert s.api_columns([{"name": "a", "type_name": "INT", "position": 0},
                          {"name": "b", "type_name": "DECIMAL", "type_precision": 5, "type_scale": 1,
                           "position": 1, "nullable": False}])["fields"] == [
        {"name": "a", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "b", "type": "decimal(5,1)", "nullable": False, "metadata": {}}]


@pytest.mark.parametrize("fields, where", [
    ([{"name": "a", "type": "quux", "nullable": True, "metadata": {}}], "unknown Delta type"),
    ([{"name": "a", "type": "decimal(40,2)", "nullable": True, "metadata": {}}], "precision"),
    ([{"name": "a", "type": "long"}, {"name": "A", "type": "long"}], "more than once"),
    ([{"name": "a", "type": {"type": "array", "element-type": "long"}}], "contains-null"),
    ([{"name": "", "type": "long"}], "name"),
    ([{"name": "a"}], "type"),
    ([{"name": "a", "type": "long", "nullable": "yes"}], "nullable"),
])
def test_bad_schemas_are_refused(fields, where):
    with pytest.raises(CatalogError, match=where) as e:
        s.log_fields(fields)
    assert e.value.code == "INVALID_PARAMETER_VALUE"


def test_partition_columns():
    fields = s.log_fields(NESTED["fields"])
    assert s.check_partition_columns(fields, ["Day", "ID"]) == ["day", "id"]
    for bad, why in ((["nope"], "not a column"), (["day", "DAY"], "more than once"), ("day", "list")):
        with pytest.raises(CatalogError, match=why):
            s.check_partition_columns(fields, bad)
    with pytest.raises(CatalogError, match="at least one column"):
        s.check_partition_columns(fields[:1], ["id"])
