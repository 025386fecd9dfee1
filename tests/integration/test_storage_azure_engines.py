"""Engines read Azure tables with what shardcat vends, and only with it (issue 49): delta-rs and Polars
(object_store's Azure options), DuckDB (its azure extension from PyPI), pyiceberg (adlfs) through
shardcat's Iceberg REST catalog; the UC Delta API hands the same SAS. Azurite is the account
(azurite.py); its key stays with the storage credential.

The engines' Azure options for an emulator: object_store takes the vended endpoint as
`azure_storage_endpoint` (and `allow_http`); DuckDB and adlfs take a connection string
(BlobEndpoint + SharedAccessSignature). DuckDB addresses abfss:// through the DFS endpoint, which
Azurite does not serve, so it reads the same blobs as az://<container>/<path> (the Blob spelling).
"""

from __future__ import annotations

import asyncio
import glob
import importlib
import json
import os
from urllib.parse import parse_qs, urlsplit

import deltalake
import duckdb
import polars as pl
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import ForbiddenError, NoSuchTableError, RESTError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from azurite import az  # noqa: F401  (the session's Azurite)
from governance_users import grant, user
from test_storage_azure import COLS, adls, credential
from test_vending import ok

pytestmark = pytest.mark.azurite


def object_store_options(answer: dict) -> dict:
    """delta-rs / Polars storage options from a vended answer."""
    account = answer["url"].split("@", 1)[1].split(".", 1)[0]
    return {"azure_storage_account_name": account, "azure_storage_sas_key": answer["azure_user_delegation_sas"]["sas_token"],
            "azure_storage_endpoint": answer["endpoint_url"], "allow_http": "true"}


def connection_string(answer: dict) -> str:
    return f"BlobEndpoint={answer['endpoint_url']};SharedAccessSignature={answer['azure_user_delegation_sas']['sas_token']}"


async def setup(ws, az, path: str) -> None:
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "az", "azure_storage_key": credential(az)})
    await ok(ws, "POST", "/external-locations", json={"name": "eng", "url": adls(az, path), "credential_name": "az"})


async def reader_of(server, ws, table: str):
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")
    await grant(ws, "table", table, reader.name, "SELECT")
    return reader


async def test_delta_rs_writes_and_polars_and_duckdb_read_with_vended_sas(ws, server, az):
    await setup(ws, az, "eng1")
    url = adls(az, "eng1/d")
    table = await ok(ws, "POST", "/tables", json={
        "name": "d", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": url})
    # The writer: delta-rs with a read-write SAS for the table (the admin owns it).
    write = await ok(ws, "POST", "/temporary-table-credentials",
                     json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    await asyncio.to_thread(deltalake.write_deltalake, write["url"], pa.table({"id": [1, 2, 3]}),
                            storage_options=object_store_options(write))
    # A reader with SELECT: a read SAS; delta-rs, Polars and DuckDB read with it.
    reader = await reader_of(server, ws, "main.s.d")
    read = await ok(reader, "POST", "/temporary-table-credentials",
                    json={"table_id": table["table_id"], "operation": "READ"})
    options = object_store_options(read)
    got = await asyncio.to_thread(lambda: deltalake.DeltaTable(read["url"], storage_options=options).to_pyarrow_table())
    assert sorted(got["id"].to_pylist()) == [1, 2, 3]
    frame = await asyncio.to_thread(pl.read_delta, read["url"], storage_options=options)
    assert sorted(frame["id"].to_list()) == [1, 2, 3]
    assert await asyncio.to_thread(duckdb_count, read, "lake", "eng1/d") == 3
    # The read SAS cannot commit: Azurite refuses delta-rs' write.
    with pytest.raises(Exception, match="(?i)AuthorizationPermissionMismatch|403|permission"):
        await asyncio.to_thread(deltalake.write_deltalake, read["url"], pa.table({"id": [4]}), mode="append",
                                storage_options=options)
    # Without SELECT: no SAS; and no SAS means no read.
    nobody = await user(server, ws)
    status, body = await nobody.call("POST", "/temporary-table-credentials",
                                     json={"table_id": table["table_id"], "operation": "READ"})
    assert status in (403, 404) and "sas_token" not in str(body), body
    with pytest.raises(Exception):
        await asyncio.to_thread(lambda: deltalake.DeltaTable(url, storage_options={
            **options, "azure_storage_sas_key": "sv=2020-02-10&sig=forged"}).to_pyarrow_table())


def duckdb_count(answer: dict, container: str, path: str) -> int:
    """DuckDB's azure extension (the pip package's file) reading the table's Parquet files with the SAS."""
    module = importlib.import_module("duckdb_extension_azure")
    [extension] = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "*", "*.duckdb_extension"))
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    try:
        con.execute(f"LOAD '{extension}'")
        con.execute(f"CREATE SECRET vended (TYPE azure, CONNECTION_STRING '{connection_string(answer)}')")
        return con.execute(f"SELECT count(*) FROM read_parquet('az://{container}/{path}/*.parquet')").fetchone()[0]
    finally:
        con.close()


async def test_the_uc_delta_api_hands_the_sas(ws, server, az):
    await setup(ws, az, "eng2")
    await ok(ws, "POST", "/tables", json={
        "name": "d", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": adls(az, "eng2/d")})
    reader = await reader_of(server, ws, "main.s.d")
    status, body = await reader.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/d/credentials",
                                     params={"operation": "READ_WRITE"})
    assert status == 403 and "sas" not in json.dumps(body).lower(), body          # SELECT only: no write SAS
    nobody = await user(server, ws)
    status, body = await nobody.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/d/credentials",
                                     params={"operation": "READ"})
    assert status in (403, 404) and "sas" not in json.dumps(body).lower(), body
    status, body = await reader.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/d/credentials",
                                     params={"operation": "READ"})
    assert status == 200, body
    [cred] = body["storage-credentials"]
    assert cred["prefix"] == adls(az, "eng2/d") and cred["operation"] == "READ"
    assert cred["config"]["azure.sas-token"] and cred["config"]["azure.endpoint"] == az.endpoint
    az.service().get_container_client("lake").upload_blob("eng2/d/x.parquet", b"x", overwrite=True)
    answer = {"endpoint_url": cred["config"]["azure.endpoint"],
              "azure_user_delegation_sas": {"sas_token": cred["config"]["azure.sas-token"]}}
    from azure.storage.blob import ContainerClient
    client = ContainerClient(answer["endpoint_url"], "lake", credential=cred["config"]["azure.sas-token"])
    assert client.download_blob("eng2/d/x.parquet").readall() == b"x"


async def test_pyiceberg_through_the_iceberg_rest_catalog(ws, server, az):
    """A managed Iceberg table whose storage root is on Azure: the catalog writes its metadata and pyiceberg
    its data files with SAS it vends; another user reads with SELECT only, and without it gets nothing."""
    await ok(ws, "POST", "/storage-credentials", json={"name": "az", "azure_storage_key": credential(az)})
    await ok(ws, "POST", "/external-locations", json={"name": "eng", "url": adls(az, "eng3"), "credential_name": "az"})
    await ok(ws, "POST", "/catalogs", json={"name": "main", "storage_root": adls(az, "eng3/main")})
    ice = await asyncio.to_thread(load_catalog, "shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse="main",
                                  token=ws.token)
    await asyncio.to_thread(ice.create_namespace, "s")
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    table = await asyncio.to_thread(ice.create_table, "s.t", schema)
    assert table.location().startswith(adls(az, "eng3/main"))
    assert any(k.startswith("adls.sas-token.") for k in table.io.properties)
    await asyncio.to_thread(table.append, pa.table({"id": pa.array([1, 2], pa.int64())}))
    blobs = [b.name for b in az.service().get_container_client("lake").list_blobs(name_starts_with="eng3/main/")]
    assert any(b.endswith(".parquet") for b in blobs) and any(b.endswith(".metadata.json") for b in blobs)

    reader = await reader_of(server, ws, "main.s.t")
    mine = await asyncio.to_thread(load_catalog, "reader", type="rest", uri=f"{ws.api}/iceberg", warehouse="main",
                                   token=reader.token)
    loaded = await asyncio.to_thread(mine.load_table, "s.t")
    rows = await asyncio.to_thread(lambda: loaded.scan().to_arrow())
    assert sorted(rows["id"].to_pylist()) == [1, 2]
    # Its SAS is read-only: Azurite refuses the data file before any commit reaches the catalog.
    with pytest.raises(Exception, match="AuthorizationPermissionMismatch"):
        await asyncio.to_thread(loaded.append, pa.table({"id": pa.array([3], pa.int64())}))
    # Without any grant the warehouse itself answers as missing: no table, no SAS.
    nobody = await user(server, ws)
    with pytest.raises(RESTError, match="NoSuchWarehouse"):
        await asyncio.to_thread(load_catalog, "nobody", type="rest", uri=f"{ws.api}/iceberg", warehouse="main",
                                token=nobody.token)
    # With USE CATALOG / USE SCHEMA but no SELECT: the load is refused.
    browser = await user(server, ws)
    await grant(ws, "catalog", "main", browser.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", browser.name, "USE SCHEMA")
    theirs = await asyncio.to_thread(load_catalog, "browser", type="rest", uri=f"{ws.api}/iceberg", warehouse="main",
                                     token=browser.token)
    with pytest.raises((ForbiddenError, NoSuchTableError)):
        await asyncio.to_thread(theirs.load_table, "s.t")


async def test_delta_sharing_answers_sas_urls(ws, server, az, tmp_path):
    """A shared Delta table on Azure: the server reads its log with a SAS vended for its location and
    hands the recipient one read-only blob SAS URL per file; the official connector reads with them."""
    import delta_sharing
    import requests
    from test_delta_sharing import activate, call

    await setup(ws, az, "eng4")
    table = await ok(ws, "POST", "/tables", json={
        "name": "d", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": adls(az, "eng4/d")})
    write = await ok(ws, "POST", "/temporary-table-credentials",
                     json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    await asyncio.to_thread(deltalake.write_deltalake, write["url"], pa.table({"id": [1, 2, 3]}),
                            storage_options=object_store_options(write))
    await ok(ws, "POST", "/shares", json={"name": "trade"})
    await ok(ws, "PATCH", "/shares/trade", json={"updates": [{"action": "ADD", "data_object": {"name": "main.s.d"}}]})
    made = await ok(ws, "POST", "/recipients", json={"name": "acme", "authentication_type": "TOKEN"})
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    profile = await activate(ws, made, tmp_path)

    frame = await asyncio.to_thread(delta_sharing.load_as_pandas, f"{profile}#trade.s.d")
    assert sorted(frame["id"].tolist()) == [1, 2, 3]
    status, text, _ = await call(profile, "POST", "/shares/trade/schemas/s/tables/d/query", json={})
    files = [json.loads(line)["file"] for line in text.splitlines()[2:]]
    assert status == 200 and files
    for f in files:
        assert f["url"].startswith(f"{az.endpoint}/lake/eng4/d/")
        signed = parse_qs(urlsplit(f["url"]).query)
        assert (signed["sr"], signed["sp"]) == (["b"], ["r"])
        assert (await asyncio.to_thread(requests.get, f["url"], timeout=30)).status_code == 200
    # A SAS URL is for its one blob: pointed at another, Azurite refuses it.
    other = files[0]["url"].replace("/eng4/d/", "/eng4/d/_delta_log/00000000000000000000.json?", 1).split("?")[0]
    forged = other + "?" + urlsplit(files[0]["url"]).query
    assert (await asyncio.to_thread(requests.get, forged, timeout=30)).status_code == 403
