"""System tables (catalog/features/system.py): enabled by an admin, read by name through the catalog by
DuckDB (its uc_catalog and delta extensions); audit and lineage for admins and those granted SELECT;
information_schema only for admins and trusted engines (one row per principal that may see each
securable); nothing in the system catalog written by anyone but the catalog, on any API, admins included."""

from __future__ import annotations

import asyncio

import deltalake
import duckdb
import pytest

from governance_users import grant, user
from shardcat.catalog.features import system
from test_engine_duckdb import extension_file, EXTENSIONS

SYSTEM_TABLES = {"access": ["audit", "table_lineage", "column_lineage"],
                 "information_schema": ["catalogs", "schemata", "tables", "columns", "views", "volumes", "privileges"],
                 "maintenance": ["runs"], "monitoring": ["alerts"]}


def attach(ws, token: str | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    for package in EXTENSIONS:
        con.execute(f"LOAD '{extension_file(package)}'")
    con.execute(f"CREATE SECRET (TYPE UC, TOKEN '{token or ws.token}', ENDPOINT '{ws.url}')")
    con.execute("ATTACH 'system' AS sys (TYPE UC_CATALOG, DEFAULT_SCHEMA 'access')")
    return con


def query(ws, sql: str, token: str | None = None) -> list[tuple]:
    return attach(ws, token).execute(sql).fetchall()


async def enabled(ws) -> dict:
    status, body = await ws.call("POST", "/shardcat/system-tables")
    assert status == 200, body
    return body


async def setup_world(ws):
    """main.s with tables a and b, lineage b -> a (and columns b.id -> a.id)."""
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"})):
        assert (await ws.call("POST", path, json=body))[0] == 200
    for name in ("a", "b"):
        status, body = await ws.call("POST", "/tables", json={
            "name": name, "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
        assert status == 200, body
    status, body = await ws.call("POST", "/shardcat/lineage", json={"target": "main.s.a",
                                                                   "sources": [{"name": "main.s.b"}], "job": "j1"})
    assert status == 200, body
    event = {"eventType": "COMPLETE", "eventTime": "2026-11-28T22:00:00Z", "producer": "tests",
             "run": {"runId": "0193b1d0-0000-7000-8000-000000000051"}, "job": {"namespace": "etl", "name": "j2"},
             "inputs": [{"namespace": "shardcat", "name": "main.s.b"}],
             "outputs": [{"namespace": "shardcat", "name": "main.s.a", "facets": {"columnLineage": {"fields": {
                 "id": {"inputFields": [{"namespace": "shardcat", "name": "main.s.b", "field": "id"}]}}}}}]}
    status, body = await ws.call("POST", "/openlineage/api/v1/lineage", json=event)
    assert status == 200 and body["column_edges"] == 1, body


async def refreshed_until(ws, check, tries: int = 20):
    """Refresh until `check()` holds: audit rows reach PostgreSQL from a buffer written every 0.2 s."""
    for _ in range(tries):
        status, body = await ws.call("POST", "/shardcat/system-tables/refresh")
        assert status == 200, body
        if await check():
            return
        await asyncio.sleep(0.3)
    raise AssertionError("the system tables never showed it")


async def test_only_admins_enable_and_the_tables_are_there(ws, server):
    nobody = await user(server, ws)
    status, body = await nobody.call("POST", "/shardcat/system-tables")
    assert status == 403 and body["error_code"] == "PERMISSION_DENIED"
    status, body = await ws.call("POST", "/shardcat/system-tables/refresh")
    assert status == 400 or body["error_code"] == "FAILED_PRECONDITION"
    for name in ("system", "System", "SYSTEM"):       # the name is the system tables' alone, admins included
        status, body = await ws.call("POST", "/catalogs", json={"name": name})
        assert status == 400 and "reserved" in body["message"], body
    status, _ = await ws.call("POST", "/catalogs", json={"name": "to_rename"})
    assert status == 200
    for name in ("system", "SYSTEM"):           # nor may a catalog take it by a rename, by either field
        for field in ("new_name", "name"):
            status, body = await ws.call("PATCH", "/catalogs/to_rename", json={field: name})
            assert status == 400 and "reserved" in body["message"], body
    status, body = await ws.call("GET", "/catalogs/to_rename")
    assert status == 200 and body["name"] == "to_rename", body
    await enabled(ws)
    await enabled(ws)          # idempotent
    for schema, tables in SYSTEM_TABLES.items():
        status, body = await ws.call("GET", "/tables", params={"catalog_name": "system", "schema_name": schema})
        assert status == 200 and sorted(t["name"] for t in body["tables"]) == sorted(tables), body
        for t in body["tables"]:
            assert t["owner"] == "System user" and t["data_source_format"] == "DELTA"
            assert deltalake.DeltaTable(t["storage_location"]).version() >= 0


async def test_duckdb_reads_audit_and_lineage_by_name(ws):
    await setup_world(ws)
    await enabled(ws)

    async def audit_has_it():
        rows = await asyncio.to_thread(query, ws, "SELECT action, securable_name FROM sys.access.audit "
                                                  "WHERE action = 'reportLineage'")
        return rows == [("reportLineage", "main.s.a")]

    await refreshed_until(ws, audit_has_it)
    lineage = await asyncio.to_thread(query, ws, "SELECT source_name, target_name, job FROM sys.access.table_lineage "
                                                 "ORDER BY job")
    assert lineage[0] == ("main.s.b", "main.s.a", "j1")
    columns = await asyncio.to_thread(query, ws, "SELECT source_name, source_column, target_name, target_column "
                                                 "FROM sys.access.column_lineage")
    assert columns == [("main.s.b", "id", "main.s.a", "id")]
    # appended from a cursor kept in the table's log: a second refresh adds no copy
    await ws.call("POST", "/shardcat/system-tables/refresh")
    again = await asyncio.to_thread(query, ws, "SELECT count(*) FROM sys.access.table_lineage")
    assert again == [(len(lineage),)]
    ids = await asyncio.to_thread(query, ws, "SELECT count(*), count(DISTINCT id) FROM sys.access.audit")
    assert ids[0][0] == ids[0][1] > 0


async def test_the_tables_refresh_on_their_own(ws, monkeypatch):
    """Every REFRESH_SECONDS, with no request to refresh (the suite's default is an hour: conftest.py)."""
    monkeypatch.setattr(system, "REFRESH_SECONDS", 0.2)     # read at each round of the metastore's loop
    await enabled(ws)
    await setup_world(ws)
    for _ in range(100):
        await asyncio.sleep(0.2)
        rows = await asyncio.to_thread(query, ws, "SELECT DISTINCT source_name, target_name "
                                                  "FROM sys.access.table_lineage")
        if rows:
            break
    assert rows == [("main.s.b", "main.s.a")]


async def test_audit_needs_a_grant_and_shows_only_this_metastore(ws, server, http, tmp_path):
    from tests.conftest import new_workspace
    await setup_world(ws)
    await enabled(ws)
    other = await new_workspace(server, http, tmp_path / "other")
    await other.call("POST", "/catalogs", json={"name": "elsewhere"})
    await enabled(other)
    reader = await user(server, ws)

    def read(token):
        return query(ws, "SELECT count(*) FROM sys.access.audit", token)

    with pytest.raises(duckdb.Error, match="does not exist|not found|PERMISSION"):
        await asyncio.to_thread(read, reader.token)
    await grant(ws, "catalog", "system", reader.name, "USE CATALOG")
    await grant(ws, "schema", "system.access", reader.name, "USE SCHEMA")
    with pytest.raises(duckdb.Error):
        await asyncio.to_thread(read, reader.token)
    await grant(ws, "table", "system.access.audit", reader.name, "SELECT")

    async def seen():
        return (await asyncio.to_thread(read, reader.token))[0][0] > 0

    await refreshed_until(ws, seen)
    names = await asyncio.to_thread(query, ws, "SELECT DISTINCT securable_name FROM sys.access.audit "
                                               "WHERE securable_name IS NOT NULL", reader.token)
    assert ("elsewhere",) not in names       # the other metastore's audit is in its own system catalog


async def test_information_schema_rows_per_principal_and_refused_to_untrusted_readers(ws, server):
    await setup_world(ws)
    reader = await user(server, ws)
    engine = await user(server, ws, trusted=True)
    for who in (reader, engine):
        await grant(ws, "catalog", "main", who.name, "USE CATALOG")
        await grant(ws, "schema", "main.s", who.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.a", reader.name, "SELECT")
    await grant(ws, "table", "main.s.b", engine.name, "SELECT")
    await enabled(ws)
    # the admin reads every principal's rows: each sees only its own table
    rows = await asyncio.to_thread(query, ws, "SELECT visible_to, table_name FROM sys.information_schema.tables "
                                              "WHERE table_catalog = 'main' ORDER BY 1, 2")
    mine = {r for r in rows if r[0] in (reader.name, engine.name)}
    assert mine == {(reader.name, "a"), (engine.name, "b")}
    assert ("admin", "a") in rows and ("admin", "b") in rows
    info_location = (await ws.call("GET", "/tables/system.information_schema.tables"))[1]["storage_location"]
    # a reader that is not a trusted engine is refused the table, even with SELECT granted
    for who in (reader,):
        await grant(ws, "catalog", "system", who.name, "USE CATALOG")
        await grant(ws, "schema", "system.information_schema", who.name, "USE SCHEMA", "SELECT")
        status, body = await who.call("GET", "/tables/system.information_schema.tables")
        assert status == 404, body
        status, body = await who.call("GET", "/tables", params={"catalog_name": "system",
                                                                "schema_name": "information_schema"})
        assert status == 200 and body.get("tables", []) == [], body
        status, body = await who.call("POST", "/resolve", json={"items": [
            {"name": "system.information_schema.tables"}, {"name": "SYSTEM.INFORMATION_SCHEMA.COLUMNS"},
            {"path": info_location}]})
        assert status == 200 and all("error" in item or not item["authorization"]["allowed"]
                                     for item in body["items"]), body
        assert not any("table" in item for item in body["items"]), body       # no storage details
        status, body = await who.call("POST", "/temporary-path-credentials",
                                      json={"url": info_location, "operation": "PATH_READ"})
        assert status in (403, 404), body
        status, body = await who.call("POST", "/table-summaries", json={"catalog_name": "system"})
        assert status == 200 and not any("information_schema" in t["full_name"] for t in body.get("tables", [])), body
        status, body = await who.call("POST", "/temporary-table-credentials", json={
            "table_id": "00000000-0000-0000-0000-000000000000", "operation": "READ"})
        assert status in (403, 404)
        with pytest.raises(duckdb.Error):
            await asyncio.to_thread(query, ws, "SELECT count(*) FROM sys.information_schema.tables", who.token)
    # a trusted engine sees the table with its row filter on the caller
    await grant(ws, "catalog", "system", engine.name, "USE CATALOG")
    await grant(ws, "schema", "system.information_schema", engine.name, "USE SCHEMA", "SELECT", "EXECUTE")
    status, body = await engine.call("GET", "/tables/system.information_schema.tables")
    assert status == 200 and body["row_filter"]["function_name"] == "system.information_schema.visible_to_caller"
    status, fn = await engine.call("GET", "/functions/system.information_schema.visible_to_caller")
    assert status == 200 and fn["routine_definition"] == "visible_to = current_user()"


async def test_nothing_in_the_system_catalog_is_written_by_anyone(ws, server):
    await enabled(ws)
    status, table = await ws.call("GET", "/tables/system.access.audit")
    assert status == 200
    attempts = [
        ("POST", "/tables", {"name": "x", "catalog_name": "system", "schema_name": "access", "table_type": "MANAGED",
                             "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]}),
        ("PATCH", "/tables/system.access.audit", {"comment": "mine"}),
        ("PATCH", "/tables/SYSTEM.Access.AUDIT", {"owner": "admin"}),
        ("DELETE", "/tables/system.access.audit", None),
        ("DELETE", "/schemas/system.access", None),
        ("DELETE", "/catalogs/system?force=true", None),
        ("PATCH", "/catalogs/system", {"comment": "mine"}),
        ("POST", "/schemas", {"name": "mine", "catalog_name": "system"}),
        ("POST", "/volumes", {"name": "v", "catalog_name": "system", "schema_name": "access",
                              "volume_type": "MANAGED"}),
        ("POST", "/functions", {"function_info": {"name": "f", "catalog_name": "system", "schema_name": "access",
                                                  "data_type": "INT", "full_data_type": "int",
                                                  "routine_body": "SQL", "routine_definition": "1",
                                                  "parameter_style": "S", "is_deterministic": True,
                                                  "sql_data_access": "NO_SQL", "is_null_call": False,
                                                  "security_type": "DEFINER", "specific_name": "f"}}),
        ("POST", "/temporary-table-credentials", {"table_id": table["table_id"], "operation": "READ_WRITE"}),
        ("POST", "/delta/preview/commits", {"table_id": table["table_id"], "table_uri": table["storage_location"],
                                            "commit_info": {"version": 1, "timestamp": 1, "file_name": "1.x.json",
                                                            "file_size": 1, "file_modification_timestamp": 1}}),
    ]
    for method, path, body in attempts:
        status, out = await ws.call(method, path, json=body)
        assert status in (400, 403) and out["error_code"] in ("PERMISSION_DENIED", "INVALID_PARAMETER_VALUE"), \
            (method, path, status, out)
    # the UC Delta API refuses too
    status, out = await ws.call("POST", "/delta/v1/catalogs/system/schemas/access/tables/audit",
                                json={"requirements": [], "updates": [{"action": "set-properties",
                                                                       "updates": {"k": "v"}}]})
    assert status in (400, 403, 404), out
    # DuckDB's insert goes through the same API: refused
    with pytest.raises(duckdb.Error):
        await asyncio.to_thread(query, ws, "INSERT INTO sys.access.audit (id) VALUES (1)")
    # granting SELECT stays possible (that is how others read them)
    reader = await user(server, ws)
    await grant(ws, "table", "system.access.audit", reader.name, "SELECT")
    status, again = await ws.call("GET", "/tables/system.access.audit")
    assert again["comment"] == table["comment"] and again["owner"] == "System user"
