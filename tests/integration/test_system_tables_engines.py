"""System tables read by Polars (`pl.Catalog`, through delta-rs with the catalog's vended credential) and
pyiceberg (through the Iceberg REST catalog: the system tables are UniForm tables, their Iceberg
metadata written by the catalog) by name: the audit log and lineage for a user granted SELECT, the same
rows as Delta has, refused to one without; information_schema for a trusted engine and admins only,
refused to any other reader whatever the spelling (DuckDB and Spark: test_system_tables.py and
tests/spark/test_spark_system_tables.py)."""

from __future__ import annotations

import asyncio

import deltalake
import polars as pl
import pytest
from pyiceberg.catalog import load_catalog

from governance_users import grant, user
from test_system_tables import enabled, refreshed_until, setup_world


def polars(ws, token: str) -> pl.Catalog:
    return pl.Catalog(ws.url, bearer_token=token, require_https=False)


def iceberg(ws, token: str, warehouse: str = "system"):
    return load_catalog("system", type="rest", uri=f"{ws.api}/iceberg", warehouse=warehouse, token=token)


def delta_rows(location: str) -> list[dict]:
    return deltalake.DeltaTable(location).to_pyarrow_table().to_pylist()


def key(rows: list[dict], *columns: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in rows)


async def test_polars_and_pyiceberg_read_audit_and_lineage_with_a_grant(ws, server):
    await setup_world(ws)
    await enabled(ws)
    analyst = await user(server, ws)
    stranger = await user(server, ws)
    for who in (analyst, stranger):
        await grant(ws, "catalog", "system", who.name, "USE CATALOG")
        await grant(ws, "schema", "system.access", who.name, "USE SCHEMA")
    for table in ("audit", "table_lineage", "column_lineage"):
        await grant(ws, "table", f"system.access.{table}", analyst.name, "SELECT")
    audit_at = (await ws.call("GET", "/tables/system.access.audit"))[1]["storage_location"]

    async def audited():
        return "reportLineage" in [r["action"] for r in await asyncio.to_thread(delta_rows, audit_at)]

    await refreshed_until(ws, audited)
    locations = {t: (await ws.call("GET", f"/tables/system.access.{t}"))[1]["storage_location"]
                 for t in ("audit", "table_lineage", "column_lineage")}

    def read_all(token: str):
        cat, ice = polars(ws, token), iceberg(ws, token)
        out = {}
        for t in locations:
            out[t] = (cat.scan_table("system", "access", t).collect().to_dicts(),
                      ice.load_table(f"access.{t}").scan().to_arrow().to_pylist())
        return out

    read = await asyncio.to_thread(read_all, analyst.token)
    for t, location in locations.items():
        expected = await asyncio.to_thread(delta_rows, location)
        by_polars, by_pyiceberg = read[t]
        assert expected and len(by_polars) == len(by_pyiceberg) == len(expected), t
        assert key(by_polars, "id") == key(by_pyiceberg, "id") == key(expected, "id"), t
    polars_lineage, iceberg_lineage = read["table_lineage"]
    assert ("main.s.b", "main.s.a", "j1") in key(polars_lineage, "source_name", "target_name", "job")
    assert key(polars_lineage, "source_name", "target_name", "job") == \
        key(iceberg_lineage, "source_name", "target_name", "job")
    assert key(read["column_lineage"][1], "source_column", "target_column") == [("id", "id")]
    assert any(r["action"] == "reportLineage" and r["securable_name"] == "main.s.a" for r in read["audit"][1])

    def refused(token: str, how: str, table: str):
        if how == "polars":
            return polars(ws, token).scan_table("system", "access", table).collect()
        return iceberg(ws, token).load_table(f"access.{table}").scan().to_arrow()

    for how in ("polars", "pyiceberg"):
        for table in ("audit", "table_lineage"):
            with pytest.raises(Exception, match="(?i)does not exist|not found|forbidden|permission"):
                await asyncio.to_thread(refused, stranger.token, how, table)
    # nobody writes them through Iceberg either, admins included
    admin_table = await asyncio.to_thread(lambda: iceberg(ws, ws.token).load_table("access.audit"))
    with pytest.raises(Exception, match="(?i)forbidden|read-only|permission|not allowed"):
        await asyncio.to_thread(admin_table.append, admin_table.scan(limit=1).to_arrow())


async def test_information_schema_for_trusted_engines_and_admins_only(ws, server):
    await setup_world(ws)
    await enabled(ws)
    reader = await user(server, ws)
    engine = await user(server, ws, trusted=True)
    for who in (reader, engine):
        await grant(ws, "catalog", "main", who.name, "USE CATALOG")
        await grant(ws, "schema", "main.s", who.name, "USE SCHEMA")
        await grant(ws, "catalog", "system", who.name, "USE CATALOG")
        await grant(ws, "schema", "system.information_schema", who.name, "USE SCHEMA", "SELECT", "EXECUTE")
    await grant(ws, "table", "main.s.a", reader.name, "SELECT")
    await grant(ws, "table", "main.s.b", engine.name, "SELECT")
    assert (await ws.call("POST", "/shardcat/system-tables/refresh"))[0] == 200     # the grants' rows

    def polars_tables(token: str, catalog="system", schema="information_schema", table="tables"):
        return polars(ws, token).scan_table(catalog, schema, table).collect().to_dicts()

    def iceberg_tables(token: str, warehouse="system", name="information_schema.tables"):
        return iceberg(ws, token, warehouse).load_table(name).scan().to_arrow().to_pylist()

    # a reader that is not a trusted engine: refused, SELECT granted or not, however it spells the name
    for args in (("system", "information_schema", "tables"), ("SYSTEM", "Information_Schema", "TABLES"),
                 ("system", "information_schema", "privileges")):
        with pytest.raises(Exception, match="(?i)does not exist|not found"):
            await asyncio.to_thread(polars_tables, reader.token, *args)
    for warehouse, name in (("system", "information_schema.tables"), ("SYSTEM", "INFORMATION_SCHEMA.TABLES"),
                            ("system", "information_schema.columns")):
        with pytest.raises(Exception, match="(?i)does not exist|not found|NoSuch"):
            await asyncio.to_thread(iceberg_tables, reader.token, warehouse, name)
    listed = await asyncio.to_thread(lambda: iceberg(ws, reader.token).list_tables("information_schema"))
    assert listed == []

    # a trusted engine gets the table and applies the row filter on the caller itself, as for any filtered
    # table (Polars and pyiceberg know no row filters: they get every principal's rows)
    by_polars = await asyncio.to_thread(polars_tables, engine.token)
    by_pyiceberg = await asyncio.to_thread(iceberg_tables, engine.token)
    for rows in (by_polars, by_pyiceberg):
        mine = sorted(r["table_name"] for r in rows if r["visible_to"] == engine.name and r["table_catalog"] == "main")
        assert mine == ["b"]
    assert key(by_polars, "visible_to", "table_catalog", "table_name") == \
        key(by_pyiceberg, "visible_to", "table_catalog", "table_name")
    seen = {(r["visible_to"], r["table_name"]) for r in by_pyiceberg if r["table_catalog"] == "main"}
    assert {(reader.name, "a"), (engine.name, "b")} <= seen and (reader.name, "b") not in seen
    # an admin that is not a trusted engine: refused the data of a filtered table, as everywhere: pyiceberg's
    # loadTable and a credential for Polars are data access
    with pytest.raises(Exception, match="(?i)trusted engine"):
        await asyncio.to_thread(iceberg_tables, ws.token)
    table_id = (await ws.call("GET", "/tables/system.information_schema.tables"))[1]["table_id"]
    status, body = await ws.call("POST", "/temporary-table-credentials", json={"table_id": table_id,
                                                                               "operation": "READ"})
    assert status == 403 and "trusted engine" in body["message"], body
    # ... but Polars, refused the credential, reads file:// storage without one (an admin may see every row:
    # the table's metadata and location are the admin's to see); cloud storage would need the credential
    assert key(await asyncio.to_thread(polars_tables, ws.token), "visible_to", "table_catalog", "table_name") == \
        key(by_pyiceberg, "visible_to", "table_catalog", "table_name")
