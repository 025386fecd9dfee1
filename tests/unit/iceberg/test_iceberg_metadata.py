"""The Iceberg REST catalog's format rules (shardcat/iceberg/metadata.py), without a server: requirements,
view updates, the catalog row's columns, FileIO properties from vended credentials."""

from __future__ import annotations

import json

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import (DecimalType, IntegerType, ListType, LongType, MapType, NestedField, StringType,
                             StructType, TimestamptzType)

from shardcat.entities.columns import check_columns
from shardcat.errors import CatalogError
from shardcat.iceberg import metadata as md

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True))


def table():
    return new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "file:///t")


def test_requirements_are_checked_before_updates():
    base = table()
    requirements, updates = md.changes({
        "requirements": [{"type": "assert-table-uuid", "uuid": str(base.table_uuid)}],
        "updates": [{"action": "set-properties", "updates": {"a": "1"}}]})
    assert md.updated(base, "file:///t/metadata/00000-x.metadata.json", requirements, updates).properties == {"a": "1"}
    requirements, _ = md.changes({"requirements": [{"type": "assert-current-schema-id", "current-schema-id": 9}]})
    with pytest.raises(CatalogError) as refused:
        md.updated(base, None, requirements, updates)
    # In the reference catalog's words, which Java clients and Iceberg's compatibility kit read.
    assert refused.value.code == "RESOURCE_CONFLICT"
    assert refused.value.message == "Requirement failed: current schema changed: expected id 9 != 0"
    with pytest.raises(CatalogError) as bad:
        md.changes({"updates": [{"action": "no-such-action"}]})
    assert bad.value.code == "INVALID_PARAMETER_VALUE"


def test_the_next_metadata_file_is_numbered_after_the_current():
    base = table()
    assert md.next_location(base, None).startswith("file:///t/metadata/00000-")
    current = "file:///t/metadata/00007-6c97e413-d51b-4538-ac70-12fe2a85cb83.metadata.json"
    assert md.next_location(base, current).startswith("file:///t/metadata/00008-")
    # A file named otherwise (a registered table's) is followed by version 0, a new unique name all the same.
    assert md.next_location(base, "file:///t/metadata/v1.metadata.json").startswith("file:///t/metadata/00000-")


def _view(schema_id: int = 0):
    schema = {**json.loads(SCHEMA.model_dump_json()), "schema-id": schema_id}
    request = md.view_request({"name": "v", "schema": schema, "view-version": {
        "version-id": 1, "schema-id": schema_id, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}], "default-namespace": ["s"]}})
    return md.new_view_metadata(request, "file:///v")


def test_view_updates():
    view = _view()
    assert md.view_sql(view) == "SELECT 1"
    new_schema = json.loads(Schema(NestedField(1, "id", LongType()), NestedField(2, "x", StringType()),
                                   schema_id=1).model_dump_json())
    replaced = md.updated_view(view, [{"type": "assert-view-uuid", "uuid": view.view_uuid}], [
        {"action": "add-schema", "schema": new_schema},
        {"action": "add-view-version", "view-version": {
            "version-id": 99, "schema-id": -1, "timestamp-ms": 2, "summary": {},
            "representations": [{"type": "sql", "sql": "SELECT 1, 'x'", "dialect": "spark"}],
            "default-namespace": ["s"]}},
        {"action": "set-current-view-version", "view-version-id": -1},
        {"action": "set-properties", "updates": {"p": "1"}}])
    # The reference catalog keeps a new version's id when it is free, and numbers a new schema after the last.
    assert (replaced.current_version_id, md.view_sql(replaced), replaced.properties) == (99, "SELECT 1, 'x'", {"p": "1"})
    assert [v.schema_id for v in replaced.versions] == [0, 1]          # -1: the schema this commit added
    assert [e.version_id for e in replaced.version_log] == [1, 99]
    with pytest.raises(CatalogError) as refused:
        md.updated_view(view, [{"type": "assert-view-uuid", "uuid": "other"}], [])
    assert refused.value.code == "RESOURCE_CONFLICT"
    for bad in ({"action": "set-current-view-version", "view-version-id": -1}, {"action": "nope"},
                {"action": "set-current-view-version", "view-version-id": 5}):
        with pytest.raises(CatalogError):
            md.updated_view(view, [], [bad])


def test_a_views_schemas_and_versions_are_numbered_as_the_reference_numbers_them():
    view = _view(schema_id=7)                       # a new view's schema is 0 whatever the client sent
    assert [s.schema_id for s in view.schemas] == [0] and view.versions[0].schema_id == 0
    same = json.loads(SCHEMA.model_dump_json())     # the same schema again: its id is kept, nothing added
    other = json.loads(Schema(NestedField(3, "y", StringType()), schema_id=0).model_dump_json())   # id 0 is taken
    version = {"version-id": 1, "schema-id": -1, "timestamp-ms": 5, "summary": {},
               "representations": [{"type": "sql", "sql": "SELECT 2", "dialect": "spark"}], "default-namespace": ["s"]}
    replaced = md.updated_view(view, [], [{"action": "add-schema", "schema": same},
                                          {"action": "add-schema", "schema": other},
                                          {"action": "add-view-version", "view-version": version},
                                          {"action": "set-current-view-version", "view-version-id": -1}])
    assert [s.schema_id for s in replaced.schemas] == [0, 1]
    assert (replaced.current_version_id, replaced.versions[-1].schema_id) == (2, 1)     # id 1 was taken
    assert replaced.version_log[-1].timestamp_ms == 5                                    # the version's own time
    twice = {**version, "schema-id": 0, "representations": [{"type": "sql", "sql": "a", "dialect": "trino"},
                                                            {"type": "sql", "sql": "b", "dialect": "Trino"}]}
    with pytest.raises(md.InvalidViewVersion, match="Cannot add multiple queries for dialect trino"):
        md.updated_view(view, [], [{"action": "add-view-version", "view-version": twice}])


def test_a_sort_order_added_against_an_older_base_gets_a_free_id():
    base = table()
    field = {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
    _, first = md.changes({"updates": [{"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [field]}},
                                       {"action": "set-default-sort-order", "sort-order-id": -1}]})
    once = md.updated(base, None, [], first)
    # A concurrent replace added its own order 1 from the same base: it becomes order 2, and the default.
    _, second = md.changes({"updates": [
        {"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [{**field, "direction": "desc"}]}},
        {"action": "set-default-sort-order", "sort-order-id": -1}]})
    twice = md.updated(once, None, [], second)
    assert [o.order_id for o in twice.sort_orders] == [0, 1, 2] and twice.default_sort_order_id == 2
    # The same order again is the one the table has.
    assert md.updated(twice, None, [], first).default_sort_order_id == 1


def test_columns_of_nested_types_are_valid_unity_catalog_columns():
    schema = Schema(
        NestedField(1, "id", LongType(), required=True), NestedField(2, "price", DecimalType(10, 2)),
        NestedField(3, "at", TimestamptzType()), NestedField(4, "tags", ListType(5, StringType())),
        NestedField(6, "attrs", MapType(7, StringType(), 8, IntegerType())),
        NestedField(9, "who", StructType(NestedField(10, "name", StringType())), doc="the person"))
    columns = check_columns(md.columns_of(schema))
    assert [(c["name"], c["type_name"], c["nullable"]) for c in columns] == [
        ("id", "LONG", False), ("price", "DECIMAL", True), ("at", "TIMESTAMP", True), ("tags", "ARRAY", True),
        ("attrs", "MAP", True), ("who", "STRUCT", True)]
    assert (columns[1]["type_precision"], columns[1]["type_scale"]) == (10, 2)
    assert json.loads(columns[4]["type_json"])["type"] == {"type": "map", "keyType": "string", "valueType": "integer",
                                                           "valueContainsNull": False}
    assert columns[5]["comment"] == "the person"


def test_storage_properties_from_vended_credentials():
    assert md.storage_properties({"url": "file:///t", "expiration_time": 1}, None, "us-east-1") == {}
    vended = {"aws_temp_credentials": {"access_key_id": "A", "secret_access_key": "S", "session_token": "T"},
              "expiration_time": 123, "url": "s3://b/t"}
    assert md.storage_properties(vended, "http://127.0.0.1:9000", "eu-west-1") == {
        "s3.access-key-id": "A", "s3.secret-access-key": "S", "s3.session-token": "T", "s3.region": "eu-west-1",
        "s3.session-token-expires-at-ms": "123", "s3.endpoint": "http://127.0.0.1:9000"}
    # An S3-compatible store's static keys (no session token), with its own endpoint, region and addressing.
    static = {"aws_temp_credentials": {"access_key_id": "K", "secret_access_key": "S2"}, "expiration_time": 9,
              "url": "s3://b/t", "endpoint_url": "http://minio:9000", "region": "auto", "path_style_access": True}
    assert md.storage_properties(static, "http://ignored", "us-east-1") == {
        "s3.access-key-id": "K", "s3.secret-access-key": "S2", "s3.region": "auto",
        "s3.session-token-expires-at-ms": "9", "s3.endpoint": "http://minio:9000", "s3.force-virtual-addressing": "false"}


def test_odd_requests_are_400s():
    """pyiceberg's own validators raise more than pydantic's errors on odd input (found by fuzzing)."""
    for body in ({"name": "v", "schema": {}, "view-version": {}, "properties": ["not", "a", "map"]},
                 {"name": "v", "schema": {}, "view-version": {}, "properties": 7}):
        with pytest.raises(CatalogError) as refused:
            md.view_request(body)
        assert refused.value.code == "INVALID_PARAMETER_VALUE"
        with pytest.raises(CatalogError):
            md.create_request({**body, "schema": json.loads(SCHEMA.model_dump_json())})
