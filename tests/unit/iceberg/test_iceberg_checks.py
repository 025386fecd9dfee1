"""What the Iceberg REST catalog refuses or accepts in metadata updates, without a server (shardcat/iceberg/
checks.py and metadata.py): defaults that do not fit their type, view updates with wrongly typed fields,
a view version without SQL, removing a property that is not set, and format version 3 tables."""

from __future__ import annotations

import json

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from shardcat.errors import CatalogError
from shardcat.iceberg import metadata as md

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True))
SCHEMA_JSON = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


def table(**properties):
    return new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "file:///t",
                              properties=properties)


def refused(call, *args) -> str:
    with pytest.raises(CatalogError) as e:
        call(*args)
    assert e.value.status == 400, e.value.message
    return e.value.message


def field(type_: str, **default) -> dict:
    return {"type": "struct", "schema-id": 1, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "x", "type": type_, "required": False, **default}]}


@pytest.mark.parametrize("type_, value", [
    ("int", "abc"), ("int", True), ("int", 1 << 40), ("long", 1.5), ("boolean", 1), ("string", 5),
    ("double", "1.0"), ("decimal(4, 2)", "123.456"), ("uuid", "not-a-uuid"), ("date", "yesterday"),
    ("fixed[2]", "abcdef"), ("binary", "zz"), ("timestamp", "noon"), ("float", "x")])
def test_a_default_that_does_not_fit_its_type_is_a_400(type_, value):
    for key in ("initial-default", "write-default"):
        body = {"updates": [{"action": "add-schema", "schema": field(type_, **{key: value})}]}
        message = refused(md.changes, body)
        assert "CommitTableRequest" in message
        create = {"name": "t", "schema": field(type_, **{key: value})}
        assert "CreateTableRequest" in refused(md.create_request, create)


@pytest.mark.parametrize("type_, value", [("int", 7), ("long", -3), ("double", 1), ("string", "a"),
                                          ("decimal(4, 2)", "12.34"), ("date", "2026-01-02"), ("boolean", False),
                                          ("uuid", "f79c3e09-677c-4a9e-8c1f-6d4c6e7a6f3d"), ("fixed[2]", "abcd")])
def test_a_default_that_fits_is_applied(type_, value):
    requirements, updates = md.changes({"updates": [
        {"action": "upgrade-format-version", "format-version": 3},
        {"action": "add-schema", "schema": field(type_, **{"initial-default": value})},
        {"action": "set-current-schema", "schema-id": -1}]})
    metadata = md.updated(table(), "file:///t/metadata/00000-a.metadata.json", requirements, updates)
    assert metadata.format_version == 3
    assert md.metadata_json(metadata)["schemas"][-1]["fields"][1]["initial-default"] == value


def test_removing_a_property_that_is_not_set_is_no_error():
    base = table(a="1")
    requirements, updates = md.changes({"updates": [{"action": "remove-properties", "removals": ["nope", "a"]},
                                                    {"action": "set-properties", "updates": {"b": "2"}},
                                                    {"action": "remove-properties", "removals": ["a", "b"]}]})
    assert md.updated(base, "file:///t/metadata/00000-a.metadata.json", requirements, updates).properties == {}
    requirements, updates = md.changes({"updates": [{"action": "remove-properties", "removals": ["nope"]}]})
    assert md.updated(base, "file:///t/metadata/00000-a.metadata.json", requirements, updates).properties == {"a": "1"}


def test_format_version_3_tables_are_created_upgraded_written_and_read(tmp_path):
    request = md.create_request({"name": "t", "schema": SCHEMA_JSON, "properties": {"format-version": "3"}})
    created = md.new_metadata(request, f"file://{tmp_path}/t")
    assert (created.format_version, created.next_row_id) == (3, 0)
    location = md.next_location(created, None)
    md.write_metadata(created, location, {})
    md._READ.clear()                                    # read back from the file, not the catalog's memory
    again = md.read_metadata(location, {})
    assert (again.format_version, again.next_row_id, again.table_uuid) == (3, 0, created.table_uuid)
    raw = json.loads(PyArrowFileIO().new_input(location).open().read())
    assert raw["format-version"] == 3 and raw["next-row-id"] == 0
    assert FromInputFile.table_metadata(PyArrowFileIO().new_input(location)).format_version == 3

    requirements, updates = md.changes({"updates": [{"action": "set-properties", "updates": {"k": "v"}},
                                                    {"action": "upgrade-format-version", "format-version": 3}]})
    upgraded = md.updated(table(), "file:///t/metadata/00000-a.metadata.json", requirements, updates)
    assert (upgraded.format_version, upgraded.next_row_id, upgraded.properties) == (3, 0, {"k": "v"})
    # A create transaction (stage-create's commit) made as v3 from its first update.
    requirements, updates = md.changes({"requirements": [{"type": "assert-create"}], "updates": [
        {"action": "assign-uuid", "uuid": "f79c3e09-677c-4a9e-8c1f-6d4c6e7a6f3d"},
        {"action": "upgrade-format-version", "format-version": 3},
        {"action": "add-schema", "schema": SCHEMA_JSON}, {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}}, {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": "file:///t"}]})
    assert md.updated(None, None, requirements, updates).format_version == 3
    requirements, updates = md.changes({"updates": [{"action": "upgrade-format-version", "format-version": 4}]})
    assert "format version 4" in refused(md.updated, upgraded, None, requirements, updates)
    requirements, updates = md.changes({"updates": [{"action": "upgrade-format-version", "format-version": 2}]})
    assert "downgrade" in refused(md.updated, upgraded, None, requirements, updates)


def view():
    request = md.view_request({"name": "v", "schema": SCHEMA_JSON, "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {}, "default-namespace": ["s"],
        "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}]}})
    return md.new_view_metadata(request, "file:///v")


@pytest.mark.parametrize("update", [
    {"action": "set-properties", "updates": 5}, {"action": "set-properties", "updates": {"a": 1}},
    {"action": "remove-properties", "removals": "ab"}, {"action": "remove-properties", "removals": [1]},
    {"action": "set-location", "location": 5}, {"action": "assign-uuid", "uuid": 5},
    {"action": "upgrade-format-version", "format-version": "1"}, {"action": "add-schema", "schema": 5},
    {"action": "add-schema", "schema": {"type": "struct", "fields": 3}},
    {"action": "add-schema", "schema": field("int", **{"initial-default": "abc"})},
    {"action": "add-view-version", "view-version": 5},
    {"action": "add-view-version", "view-version": {"version-id": "x", "schema-id": 0, "representations": 3}},
    {"action": "add-view-version", "view-version": {"version-id": 2, "schema-id": 0, "timestamp-ms": 1,
                                                    "default-namespace": ["s"], "representations": []}},
    {"action": "set-current-view-version", "view-version-id": "x"}, {"action": 5}, "set-properties"])
def test_view_updates_with_wrongly_typed_fields_are_400s(update):
    refused(md.updated_view, view(), [], [update])


def test_a_view_without_sql_is_a_400():
    request = md.view_request({"name": "v", "schema": SCHEMA_JSON, "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {}, "default-namespace": ["s"],
        "representations": []}})
    assert "representation" in refused(md.new_view_metadata, request, "file:///v")
    assert "initial-default" in refused(md.view_request, {"name": "v", "schema": field("int", **{
        "initial-default": "abc"}), "view-version": {"schema-id": 1, "default-namespace": ["s"], "representations": [
            {"type": "sql", "sql": "SELECT 1", "dialect": "spark"}]}})


def test_view_removals_of_an_unset_property_and_good_updates_apply():
    after = md.updated_view(view(), [], [{"action": "set-properties", "updates": {"a": "1"}},
                                         {"action": "remove-properties", "removals": ["nope", "a"]}])
    assert after.properties == {}


def test_a_new_tables_column_defaults_are_kept():
    """pyiceberg's renumbering of a new table's schema drops defaults; shardcat puts them back (defaults.py)."""
    request = md.create_request({"name": "t", "properties": {"format-version": "3"}, "schema": {
        "type": "struct", "schema-id": 0, "fields": [
            {"id": 5, "name": "a", "type": "int", "required": True, "initial-default": 42, "write-default": 7},
            {"id": 7, "name": "s", "type": {"type": "struct", "fields": [
                {"id": 9, "name": "x", "type": "string", "required": False, "write-default": "w"}]},
             "required": False}]}})
    fields = md.metadata_json(md.new_metadata(request, "file:///t"))["schemas"][0]["fields"]
    assert (fields[0]["id"], fields[0]["initial-default"], fields[0]["write-default"]) == (1, 42, 7)
    assert fields[1]["type"]["fields"][0]["write-default"] == "w" and "initial-default" not in fields[1]
