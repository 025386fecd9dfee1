"""Daft 0.7 (`daft[unity]`: its Unity Catalog client, reading through delta-rs) against shardcat: list,
read a plain Delta table written by delta-rs (not write it: file:// storage), and catalog-managed tables: refused with
the Delta protocol's catalogManaged feature (delta-rs needs the catalog's version, which Daft cannot
pass), read pinned at the catalog's latest version from the UC Delta API without it. The grants:
without SELECT it reads nothing.
"""

from __future__ import annotations

import asyncio

import daft
import pytest
from daft.catalog import Catalog
from daft.catalog.__unity import UnityCatalogClient
from daft.io import IOConfig

from engine_tables import catalog_version, engine_tables
from governance_users import grant, user

REFUSED = "Max catalog version is required when loading a catalog-managed table"


def client(ws, token: str | None = None) -> UnityCatalogClient:
    return UnityCatalogClient(ws.url, token=token or ws.token)


async def test_list_read_write_and_catalog_managed(ws):
    await engine_tables(ws)
    version, _ = await catalog_version(ws, "interop")

    def run():
        unity = client(ws)
        catalog = Catalog.from_unity(unity)
        listed = sorted(unity.list_tables("main.s"))
        plain = catalog.get_table("main.s.plain")
        before = sorted(plain.read().to_pydict()["id"])
        # Daft writes a Unity table with the io_config it makes from vended cloud credentials (even when
        # given one): file:// storage vends none, so Daft cannot write it (see docs/engines.md).
        with pytest.raises(ValueError, match="io_config was not provided"):
            daft.from_pydict({"id": [30]}).write_deltalake(unity.load_table("main.s.plain"), mode="append",
                                                           io_config=IOConfig())
        after = sorted(catalog.get_table("main.s.plain").read().to_pydict()["id"])
        with pytest.raises(Exception, match=REFUSED):
            daft.read_deltalake(unity.load_table("main.s.orders", operation="READ")).collect()
        interop = daft.read_deltalake(unity.load_table("main.s.interop", operation="READ"), version=version).to_pydict()
        return listed, before, after, sorted(interop["id"])

    listed, before, after, interop = await asyncio.to_thread(run)
    assert listed == ["main.s.interop", "main.s.orders", "main.s.plain"]
    assert before == after == [10, 20]
    assert interop == [1, 2, 3]


async def test_without_select_daft_reads_nothing(ws, server):
    await engine_tables(ws)
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")

    def read():
        return daft.read_deltalake(client(ws, reader.token).load_table("main.s.plain", operation="READ")).to_pydict()

    with pytest.raises(Exception, match="is not an existing table"):     # invisible answers as missing
        await asyncio.to_thread(read)
    await grant(ws, "table", "main.s.plain", reader.name, "SELECT")
    assert sorted((await asyncio.to_thread(read))["id"]) == [10, 20]
