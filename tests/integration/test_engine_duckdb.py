"""DuckDB (duckdb 1.5.5 with its unity_catalog, delta and httpfs extensions, loaded from their pip
packages' files, no network) against shardcat: attach a catalog, list it, read a plain Delta table
written by delta-rs and a catalog-managed one written by shardcat's Delta client (with a ratified,
unpublished commit that only the catalog knows), insert into the catalog-managed table (a commit
through the UC Delta API that shardcat's client then reads), and the grants: a caller without
SELECT reads nothing.
"""

from __future__ import annotations

import asyncio
import glob
import importlib
import os

import deltalake
import duckdb
import pytest

from shardcat.delta.client import DeltaCatalogClient

from engine_tables import engine_tables
from governance_users import grant, user

EXTENSIONS = ("duckdb_extension_httpfs", "duckdb_extension_delta", "duckdb_extension_unity_catalog")


def extension_file(package: str) -> str:
    """The .duckdb_extension file a pip package ships (extensions/v<version>/<name>.duckdb_extension)."""
    module = importlib.import_module(package)
    [path] = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "*", "*.duckdb_extension"))
    return path


def attach(ws, token: str | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    for package in EXTENSIONS:
        con.execute(f"LOAD '{extension_file(package)}'")
    con.execute(f"CREATE SECRET (TYPE UC, TOKEN '{token or ws.token}', ENDPOINT '{ws.url}')")
    con.execute("ATTACH 'main' AS uc (TYPE UC_CATALOG, DEFAULT_SCHEMA 's')")
    return con


async def test_attach_list_read_and_insert(ws):
    made = await engine_tables(ws)

    def run():
        con = attach(ws)
        plain = con.execute("SELECT id FROM uc.s.plain ORDER BY id").fetchall()
        orders = con.execute("SELECT id, item FROM uc.s.orders ORDER BY id").fetchall()
        with pytest.raises(duckdb.Error, match="max_catalog_version must not be set"):
            con.execute("SELECT count(*) FROM uc.s.interop")      # see docs/engines.md
        con.execute("INSERT INTO uc.s.orders VALUES (4, 'd')")
        con.execute("INSERT INTO uc.s.plain VALUES (30)")
        # Listed after the reads: once, in a long run on a loaded machine, a SHOW ALL TABLES right after
        # ATTACH came back empty (cause not found; see docs/engines.md).
        listed = sorted((r[1], r[2]) for r in con.execute("SHOW ALL TABLES").fetchall() if r[0] == "uc")
        return listed, plain, orders, con.execute("SELECT count(*) FROM uc.s.orders").fetchone()[0]

    listed, plain, orders, count = await asyncio.to_thread(run)
    assert listed == [("s", "interop"), ("s", "orders"), ("s", "plain")]
    assert plain == [(10,), (20,)]
    assert orders == [(1, "a"), (2, "b"), (3, "c")]        # version 2 is the catalog's alone
    assert count == 4
    # DuckDB's insert is a commit the catalog ratified (version 3): shardcat's client reads it.
    status, loaded = await ws.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/orders")
    assert loaded["latest-table-version"] == 3
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        rows = await client.read("main.s.orders")
    assert sorted(rows.to_pylist(), key=lambda r: r["id"])[-1] == {"id": 4, "item": "d"}
    assert sorted(deltalake.DeltaTable(made["plain"]["storage_location"]).to_pyarrow_table()["id"].to_pylist()) \
        == [10, 20, 30]


async def test_without_select_duckdb_reads_nothing(ws, server):
    await engine_tables(ws)
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")

    def read(table: str):
        con = attach(ws, reader.token)
        return con.execute(f"SELECT count(*) FROM uc.s.{table}").fetchone()[0]

    async def refused(table: str) -> str:
        with pytest.raises(duckdb.Error) as e:
            await asyncio.to_thread(read, table)
        return str(e.value)

    for table in ("orders", "plain"):     # the catalog's listing hides what the caller may not see
        assert "does not exist" in await refused(table)
    # BROWSE shows the tables' metadata, not their data: a catalog-managed table's commits need SELECT.
    # (A plain table's files on file:// storage need no vended credential, so BROWSE, which shows its
    # location, is enough there: see docs/engines.md.)
    await grant(ws, "schema", "main.s", reader.name, "BROWSE")
    assert "PermissionDeniedException" in await refused("orders")
    await grant(ws, "schema", "main.s", reader.name, "SELECT")
    assert await asyncio.to_thread(read, "orders") == 3
    assert await asyncio.to_thread(read, "plain") == 2
