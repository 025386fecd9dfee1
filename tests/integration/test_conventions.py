"""Conventions engines assume of a Unity catalog: every new catalog has a schema `default` (as Databricks makes
it), which a catalog deleted without force may still hold while it is empty; DuckDB's Unity Catalog extension,
attached as its README says (no DEFAULT_SCHEMA), reads the suite's catalog-managed and plain Delta tables."""

from __future__ import annotations

import asyncio

import duckdb
import pytest
from governance_users import user

from engine_tables import engine_tables
from test_engine_duckdb import EXTENSIONS, extension_file


async def schemas(ws, catalog: str) -> list[str]:
    status, body = await ws.call("GET", "/schemas", params={"catalog_name": catalog})
    assert status == 200, body
    return sorted(s["name"] for s in body["schemas"])


async def test_a_new_catalog_has_a_default_schema_owned_by_its_owner(ws, server):
    maker = await user(server, ws, admin=True)
    status, made = await maker.call("POST", "/catalogs", json={"name": "sales"})
    assert status == 200, made
    assert await schemas(ws, "sales") == ["default"]
    status, default = await ws.call("GET", "/schemas/sales.default")
    assert status == 200 and default["owner"] == maker.name and default["catalog_name"] == "sales"
    # It is an ordinary schema: tables go in it, and then the catalog is not empty.
    status, table = await ws.call("POST", "/tables", json={
        "name": "t", "catalog_name": "sales", "schema_name": "default", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200, table
    status, body = await ws.call("DELETE", "/catalogs/sales")
    assert status == 400 and "not empty" in body["message"], body
    assert (await ws.call("DELETE", "/tables/sales.default.t"))[0] == 200
    assert (await ws.call("DELETE", "/catalogs/sales"))[0] == 200       # only its empty default schema left


async def test_the_default_schema_can_be_dropped_and_made_again(ws):
    assert (await ws.call("POST", "/catalogs", json={"name": "c"}))[0] == 200
    assert (await ws.call("DELETE", "/schemas/c.default"))[0] == 200
    assert await schemas(ws, "c") == []
    assert (await ws.call("POST", "/schemas", json={"name": "default", "catalog_name": "c"}))[0] == 200
    status, body = await ws.call("POST", "/schemas", json={"name": "default", "catalog_name": "c"})
    assert status == 409, body


async def test_an_iceberg_namespace_made_catalog_has_it_too(ws):
    status, body = await ws.call("POST", "/iceberg/v1/namespaces", json={"namespace": ["lake"]})
    assert status == 200, body
    status, body = await ws.call("GET", "/iceberg/v1/namespaces", params={"parent": "lake"})
    assert status == 200 and body["namespaces"] == [["lake", "default"]], body


def attach_without_default_schema(ws) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    for package in EXTENSIONS:
        con.execute(f"LOAD '{extension_file(package)}'")
    con.execute(f"CREATE SECRET (TYPE UC, TOKEN '{ws.token}', ENDPOINT '{ws.url}')")
    con.execute("ATTACH 'main' AS uc (TYPE UC_CATALOG)")        # as the extension's README says
    return con


async def test_duckdb_attached_without_default_schema_reads_catalog_managed_tables(ws):
    await engine_tables(ws)

    def run():
        con = attach_without_default_schema(ws)
        orders = con.execute("SELECT id, item FROM uc.s.orders ORDER BY id").fetchall()
        plain = con.execute("SELECT id FROM uc.s.plain ORDER BY id").fetchall()
        con.execute("INSERT INTO uc.s.orders VALUES (4, 'd')")
        return orders, plain, con.execute("SELECT count(*) FROM uc.s.orders").fetchone()[0]

    orders, plain, count = await asyncio.to_thread(run)
    assert orders == [(1, "a"), (2, "b"), (3, "c")]         # version 2 is the catalog's alone
    assert plain == [(10,), (20,)]
    assert count == 4
