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
    assert refused.value.code == "RESOURCE_CONFLICT" and "schema id" in refused.value.message
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


def _view():
    request = md.view_request({"name": "v", "schema": json.loads(SCHEMA.model_dump_json()), "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
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
    assert (replaced.current_version_id, md.view_sql(replaced), replaced.properties) == (2, "SELECT 1, 'x'", {"p": "1"})
    assert [v.schema_id for v in replaced.versions] == [0, 1]          # -1: the schema this commit added
    assert [e.version_id for e in replaced.version_log] == [1, 2]
    with pytest.raises(CatalogError) as refused:
        md.updated_view(view, [{"type": "assert-view-uuid", "uuid": "other"}], [])
    assert refused.value.code == "RESOURCE_CONFLICT"
    for bad in ({"action": "set-current-view-version", "view-version-id": -1}, {"action": "nope"},
                {"action": "set-current-view-version", "view-version-id": 5}):
        with pytest.raises(CatalogError):
            md.updated_view(view, [], [bad])


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
