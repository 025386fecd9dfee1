"""Partition values and directories of Delta tables (shardcat/delta/partitions.py): the names
Spark gives partition directories, values through the log and back."""

from __future__ import annotations

import datetime

import pytest

from shardcat.delta import partitions as P

# The directories Spark 4 writes for these values of a partition column `s` (copied from a live write;
# tests/spark/test_spark_delta.py writes such values through Spark too).
SPARK_NAMES = {"a:b/c": "a%3Ab%2Fc", "x y%z": "x y%25z", "plain-text_1.2": "plain-text_1.2",
               'q"#\'*=?\\{[]^': "q%22%23%27%2A%3D%3F%5C%7B%5B%5D%5E", "tab\there": "tab%09here"}


@pytest.mark.parametrize("value,escaped", SPARK_NAMES.items())
def test_directories_are_named_as_spark_names_them_and_read_back(value, escaped):
    path = P.directory(["s", "d"], {"s": value, "d": "2024-01-01"})
    assert path == f"s={escaped}/d=2024-01-01"
    assert P.values_in_path(path + "/part-0.parquet") == {"s": value, "d": "2024-01-01"}


def test_no_value_is_hives_default_partition_and_an_empty_string_is_no_value():
    assert P.directory(["s"], {"s": None}) == "s=__HIVE_DEFAULT_PARTITION__"
    assert P.values_in_path("s=__HIVE_DEFAULT_PARTITION__/f.parquet") == {"s": None}
    assert P.serialize("") is None and P.serialize(None) is None


def test_directories_that_are_not_partitions_are_ignored_and_a_stray_percent_stays():
    assert P.values_in_path("spark-0a1b/d=5/f.parquet") == {"d": "5"}
    assert P.values_in_path("f.parquet") == {}
    assert P.values_in_path("s=100%/s2=%zz%4/f.parquet") == {"s": "100%", "s2": "%zz%4"}


@pytest.mark.parametrize("value,delta_type,text", [
    (True, "boolean", "true"), (False, "boolean", "false"), (-7, "long", "-7"), (3, "byte", "3"),
    (datetime.date(2024, 2, 29), "date", "2024-02-29"), ("EU", "string", "EU"), (None, "integer", None)])
def test_values_serialize_as_the_log_stores_them_and_parse_back(value, delta_type, text):
    assert P.serialize(value) == text
    assert P.parse(text, delta_type) == value


FIELDS = {"id": "long", "day": "date", "score": "double", "name": "string"}


@pytest.mark.parametrize("columns,message", [
    (["nope"], "'nope' is not a column"), (["score"], "type double"), (["id", "id"], "twice"),
    ("id", "list of column names")])
def test_partition_columns_are_checked(columns, message):
    with pytest.raises(ValueError, match=message):
        P.check_partition_columns(FIELDS, columns)
    assert P.check_partition_columns(FIELDS, ("day", "name")) == ["day", "name"]


def test_a_table_needs_a_column_that_is_not_a_partition_column():
    with pytest.raises(ValueError, match="at least one other column"):
        P.check_partition_columns({"id": "long", "day": "date"}, ["day", "id"])
