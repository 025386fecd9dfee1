"""Polars 2.1 (`pl.Catalog`) against shardcat: list, read a plain Delta table written by delta-rs,
create and write one (read back by delta-rs at the location shardcat allocated), and what it can
and cannot do with catalog-managed tables: it reads through delta-rs, which refuses the Delta
protocol's catalogManaged feature without the catalog's version (Polars has no way to pass it), so
a catalog-managed table is readable only without that feature, pinned at the catalog's latest
version from the UC Delta API. The grants: without SELECT it reads nothing.
"""

from __future__ import annotations

import asyncio

import deltalake
import polars as pl
import pytest

from engine_tables import catalog_version, engine_tables
from governance_users import grant, user

REFUSED = "Max catalog version is required when loading a catalog-managed table"


def catalog(ws, token: str | None = None) -> pl.Catalog:
    return pl.Catalog(ws.url, bearer_token=token or ws.token, require_https=False)


async def test_list_read_create_write(ws):
    await engine_tables(ws)

    def run():
        cat = catalog(ws)
        listed = sorted(t.name for t in cat.list_tables("main", "s"))
        plain = cat.scan_table("main", "s", "plain").collect()["id"].to_list()
        cat.create_table("main", "s", "made", schema={"id": pl.Int64, "name": pl.String}, table_type="MANAGED",
                         data_source_format="DELTA")
        cat.write_table(pl.DataFrame({"id": [7, 8], "name": ["x", "y"]}), "main", "s", "made", delta_mode="append")
        return listed, sorted(plain), cat.get_table_info("main", "s", "made").storage_location

    listed, plain, location = await asyncio.to_thread(run)
    assert listed == ["interop", "orders", "plain"]
    assert plain == [10, 20]
    # Another engine reads what Polars wrote, where shardcat put it.
    status, table = await ws.call("GET", "/tables/main.s.made")
    assert status == 200 and table["storage_location"] == location
    assert sorted(deltalake.DeltaTable(location).to_pyarrow_table()["id"].to_pylist()) == [7, 8]


async def test_catalog_managed_tables(ws):
    await engine_tables(ws)
    version, _ = await catalog_version(ws, "interop")

    def run():
        cat = catalog(ws)
        with pytest.raises(Exception, match=REFUSED):       # the protocol feature: delta-rs refuses to read
            cat.scan_table("main", "s", "orders").collect()
        with pytest.raises(Exception, match=REFUSED):       # ... and to write (it would bypass the catalog)
            cat.write_table(pl.DataFrame({"id": [9], "item": ["z"]}), "main", "s", "orders", delta_mode="append")
        return cat.scan_table("main", "s", "interop", delta_table_version=version).collect().sort("id")

    rows = await asyncio.to_thread(run)
    assert version == 2 and rows["id"].to_list() == [1, 2, 3]


async def test_without_select_polars_reads_nothing(ws, server):
    await engine_tables(ws)
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")

    def read():
        return catalog(ws, reader.token).scan_table("main", "s", "plain").collect()

    with pytest.raises(Exception, match="404 Not Found.*does not exist"):     # invisible answers as missing
        await asyncio.to_thread(read)
    await grant(ws, "table", "main.s.plain", reader.name, "SELECT")
    assert sorted((await asyncio.to_thread(read))["id"].to_list()) == [10, 20]
