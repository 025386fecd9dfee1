"""delta-rs (`deltalake` 1.6) and catalog-managed tables, given the catalog's version from the UC Delta
API: with the Delta protocol's catalogManaged feature it refuses the table whatever it is given (its
Python API cannot pass the catalog's version: Delta Kernel's with_max_catalog_version); without the
feature (shardcat's interop protocol) it reads the table pinned at the catalog's latest version, and
so ignores a commit a filesystem-only writer put past the catalog.
"""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardcat.delta import log as dlog

from engine_tables import catalog_version, engine_tables

REFUSED = "Max catalog version is required when loading a catalog-managed table"
UNPUBLISHED = "LogSegment end version 1 not the same as the specified end version 2"


async def test_catalog_managed_protocol_is_refused_even_with_the_version(ws):
    await engine_tables(ws)
    version, location = await catalog_version(ws, "orders")
    with pytest.raises(deltalake.exceptions.DeltaError, match=UNPUBLISHED):
        deltalake.DeltaTable(location, version=version)      # the catalog's latest: not published yet
    for v in (version - 1, None):                            # the published one, or none
        with pytest.raises(deltalake.exceptions.DeltaError, match=REFUSED):
            deltalake.DeltaTable(location, version=v)


async def test_interop_table_read_at_the_catalogs_version(ws):
    await engine_tables(ws)
    version, location = await catalog_version(ws, "interop")
    # A writer that bypasses the catalog publishes version 3 itself: the catalog never ratified it.
    storage = dlog.Storage(location)
    with storage.fs.open_output_stream(storage.path("rogue.parquet")) as f:
        pq.write_table(pa.table({"id": [99], "item": ["rogue"]}), f)
    storage.write(dlog.commit_file(version + 1), dlog.encode_actions([
        dlog.commit_info(dlog.now_ms(), "WRITE"), dlog.add("rogue.parquet", 100, 1, dlog.now_ms())]))
    assert deltalake.DeltaTable(location).version() == version + 1
    pinned = deltalake.DeltaTable(location, version=version)
    assert sorted(pinned.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]
    status, loaded = await ws.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/interop")
    assert loaded["latest-table-version"] == version       # the catalog's answer did not move
