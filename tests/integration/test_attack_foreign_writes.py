"""Attacks on creates passed through to a foreign Iceberg REST catalog (catalog/tree/foreign_writes.py) by the
Unity Catalog API, whose createTable in a foreign catalog does not pass the native type checks: bad input is
a 400 naming the field, and nothing reaches the foreign catalog.

Found: a path property given as a number, a list or an object (`write.data.path: 5`) reached the storage
check as it was and answered 500; a property the check skipped as empty (`0`, `false`) was sent on as text.
"""

from __future__ import annotations

import asyncio

import pytest

from test_federation_writes import COLUMNS, federating, fws, lake  # noqa: F401  (the foreign catalog, mounted)


@pytest.mark.parametrize("properties", [
    {"write.data.path": 5}, {"write.data.path": ["file:///elsewhere"]}, {"write.metadata.path": {"a": 1}},
    {"write.data.path": 0}, {"write.object-storage.path": False}, {"comment": None}, ["not", "a", "map"],
])
async def test_a_create_with_properties_that_are_not_text_is_refused(lake, properties):
    fws, _, upstream, _ = lake
    status, body = await fws.call("POST", "/tables", json={
        "name": "odd", "catalog_name": "lake", "schema_name": "sales", "table_type": "MANAGED",
        "data_source_format": "ICEBERG", "columns": COLUMNS, "properties": properties})
    assert status == 400 and "properties" in body["message"], (properties, status, body)
    assert sorted(n[-1] for n in await asyncio.to_thread(upstream.list_tables, "sales")) == ["events"]
