"""catalog/tree/foreign_writes.py's pure parts: what a commit points at and whether it stays inside a table's
storage, the refusals' words, and a Unity Catalog createTable's columns as an Iceberg schema."""

from __future__ import annotations

import pytest
from pyiceberg.types import DecimalType, DoubleType, ListType, LongType, StringType

from shardcat.catalog.tree.foreign_writes import (READ_ONLY, commit_paths, iceberg_schema_of, outside,
                                                  property_paths, read_only)
from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError
from shardcat.iceberg import metadata as md

TABLE = "file:///data/lake/sales/events"


def updates(*raw):
    return md.changes({"requirements": [], "updates": list(raw)})[1]


def snapshot(manifest_list: str) -> dict:
    return {"action": "add-snapshot", "snapshot": {"snapshot-id": 1, "timestamp-ms": 1, "sequence-number": 1,
                                                   "manifest-list": manifest_list, "summary": {"operation": "append"}}}


def test_what_a_commit_points_at():
    found = commit_paths(updates(
        {"action": "set-location", "location": "file:///x"},
        {"action": "set-properties", "updates": {"write.data.path": "file:///d", "owner": "me"}},
        snapshot(f"{TABLE}/metadata/snap-1.avro"),
        {"action": "set-statistics", "snapshot-id": 1, "statistics": {
            "snapshot-id": 1, "statistics-path": f"{TABLE}/metadata/s.puffin", "file-size-in-bytes": 1,
            "file-footer-size-in-bytes": 1, "blob-metadata": []}},
        {"action": "remove-properties", "removals": ["owner"]}))
    assert found == [("new location", "file:///x"), ("property 'write.data.path'", "file:///d"),
                     ("manifest list", f"{TABLE}/metadata/snap-1.avro"),
                     ("statistics file", f"{TABLE}/metadata/s.puffin")]


@pytest.mark.parametrize("url", [
    "file:///data/lake/sales/other/snap.avro", "file:///data/lake/sales/events-2/snap.avro",
    "file:///data/lake/sales/events/../other/snap.avro", "file:///elsewhere/snap.avro", "s3://bucket/snap.avro",
    "not a url", "/data/lake/sales/events/../../x",
])
def test_anything_outside_the_tables_storage_is_named(url):
    why = outside(TABLE, [("manifest list", url)])
    assert why is not None and "outside the table's storage" in why


def test_inside_the_tables_storage_passes():
    assert outside(TABLE, [("manifest list", f"{TABLE}/metadata/snap.avro"), ("new location", TABLE)]) is None
    assert outside(TABLE, []) is None


def test_path_properties():
    assert property_paths({"write.metadata.path": "file:///m", "comment": "x"}) == \
        [("property 'write.metadata.path'", "file:///m")]


def test_read_only_refusals_name_the_connection_its_type_and_why():
    for kind in ("UNITY_CATALOG", "GLUE", "HIVE_METASTORE"):
        connection = Asset(id="1", metastore_id="m", type="connection", namespace="connection", parent_id="m",
                           name="conn", full_name="conn", storage_path=None, info={"connection_type": kind})
        error = read_only("create a table in", "c.s", connection)
        assert error.status == 400 and kind in error.message and "'conn'" in error.message
        assert "read-only" in error.message and READ_ONLY[kind] in error.message


def test_uc_columns_as_an_iceberg_schema():
    schema = iceberg_schema_of([
        {"name": "id", "type_name": "LONG", "nullable": False},
        {"name": "price", "type_name": "DECIMAL", "type_precision": 10, "type_scale": 2},
        {"name": "tags", "type_name": "ARRAY", "type_text": "array<string>",
         "type_json": '{"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": true}, '
                      '"nullable": true, "metadata": {}}'},
        {"name": "total", "type_name": "DOUBLE"}])
    fields = schema.fields
    assert [f.name for f in fields] == ["id", "price", "tags", "total"]
    assert fields[0].field_type == LongType() and fields[0].required
    assert fields[1].field_type == DecimalType(10, 2) and fields[3].field_type == DoubleType()
    assert isinstance(fields[2].field_type, ListType) and fields[2].field_type.element_type == StringType()
    assert len({f.field_id for f in fields}) == 4


def test_uc_columns_with_no_iceberg_type_or_none_are_refused():
    with pytest.raises(CatalogError, match="needs columns"):
        iceberg_schema_of([])
    with pytest.raises(CatalogError, match="no Iceberg type"):
        iceberg_schema_of([{"name": "i", "type_name": "INTERVAL", "type_text": "interval"}])
