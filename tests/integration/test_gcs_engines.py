"""Engines read gs:// tables with what shardcat vended, on fake-gcs-server behind the Google stand-in.

- DuckDB (httpfs, `CREATE SECRET (TYPE gcs, BEARER_TOKEN ...)`, XML API): a Parquet table by its
  vended token; another table's files refused by the proxy.
- pyiceberg through shardcat's Iceberg REST catalog: the catalog writes the metadata with a token it
  vends for the table, and the client's FileIO (PyArrowFileIO: pyarrow's GcsFileSystem, JSON API)
  writes and reads data with the table config's `gcs.oauth2.token` at `gcs.service.host`.
- Polars (its object_store: `google_bearer_token`, `google_base_url`).
What does not run here, and why, is in docs/storage.md (delta-rs takes no bearer token for GCS;
Spark's GCS connector takes a token only through a provider class of the user's).
"""

from __future__ import annotations

import asyncio
import io
import json

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from gcs_cloud import gcs, gcs_env  # noqa: F401  (fixtures)
from governance_users import grant, user
from test_engine_duckdb import extension_file
from test_storage_gcs import lake, store, token_of
from test_vending import ok

pytestmark = pytest.mark.gcs_emulator


def parquet(ids) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), out)
    return out.getvalue()


async def tables_with_data(ws, g):
    """lake() with a Parquet file in t (ids 1-3) and in u (ids 7-8), written with vended write tokens."""
    table = await lake(ws, g)
    u = await ok(ws, "GET", "/tables/main.s.u")
    for asset, ids in ((table, [1, 2, 3]), (u, [7, 8])):
        answer = await ok(ws, "POST", "/temporary-table-credentials",
                          json={"table_id": asset["table_id"], "operation": "READ_WRITE"})
        store(answer).pipe(f"{answer['url'][len('gs://'):]}/data-0.parquet", parquet(ids))
    return table


async def reader_of_t(server, ws):
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.t", reader.name, "SELECT")
    return reader


def duck(answer: dict) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    con.execute(f"LOAD '{extension_file('duckdb_extension_httpfs')}'")
    host = answer["endpoint_url"].split("://", 1)[1]
    con.execute(f"CREATE SECRET (TYPE gcs, BEARER_TOKEN '{token_of(answer)}', ENDPOINT '{host}', "
                "USE_SSL false, URL_STYLE 'path')")
    return con


async def test_duckdb_reads_the_granted_table_only(ws, server, gcs_env):
    table = await tables_with_data(ws, gcs_env)
    reader = await reader_of_t(server, ws)
    answer = await ok(reader, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ"})

    def run():
        con = duck(answer)
        got = con.execute("SELECT id FROM read_parquet('gs://lake/data/t/data-*.parquet') ORDER BY id").fetchall()
        try:
            con.execute("SELECT id FROM read_parquet('gs://lake/data/u/data-0.parquet')").fetchall()
            other = "read"
        except duckdb.Error as e:
            other = str(e)
        try:
            con.execute("COPY (SELECT 1 AS id) TO 'gs://lake/data/t/dd.parquet' (FORMAT parquet)")
            wrote = "wrote"
        except duckdb.Error as e:
            wrote = str(e)
        return got, other, wrote

    got, other, wrote = await asyncio.to_thread(run)
    assert got == [(1,), (2,), (3,)]
    assert "403" in other, other
    assert wrote != "wrote" and "data/t/dd.parquet" not in gcs_env.objects("lake", "data/t/")


async def test_polars_reads_with_the_vended_token(ws, server, gcs_env):
    table = await tables_with_data(ws, gcs_env)
    reader = await reader_of_t(server, ws)
    answer = await ok(reader, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ"})
    options = {"google_bearer_token": token_of(answer), "google_base_url": answer["endpoint_url"]}

    def run():
        frame = pl.scan_parquet("gs://lake/data/t/data-*.parquet", storage_options=options).collect()
        try:
            pl.read_parquet("gs://lake/data/u/data-0.parquet", storage_options=options)
            other = "read"
        except Exception as e:          # polars wraps the store's refusal in its own error types
            other = str(e)
        return sorted(frame["id"].to_list()), other

    ids, other = await asyncio.to_thread(run)
    assert ids == [1, 2, 3]
    assert other != "read" and "403" in other, other


async def test_pyiceberg_writes_and_reads_through_the_iceberg_catalog(ws, server, gcs_env):
    await lake(ws, gcs_env)
    schema = Schema(NestedField(1, "id", LongType(), required=False))

    def owner_writes():
        ice = load_catalog("shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse="main", token=ws.token)
        table = ice.create_table("s.ice", schema, location="gs://lake/data/ice")
        io_props = table.io.properties
        table.append(pa.table({"id": pa.array([4, 5], pa.int64())}))
        return io_props, table.metadata_location

    props, metadata_location = await asyncio.to_thread(owner_writes)
    assert props["gcs.service.host"] == gcs_env.storage_url and props["gcs.oauth2.token"]
    assert int(props["gcs.oauth2.token-expires-at"]) > 0
    assert metadata_location.startswith("gs://lake/data/ice/metadata/")
    assert any(n.startswith("data/ice/data/") for n in gcs_env.objects("lake", "data/ice/"))
    # The owner's token is read-write on the table's prefix, and only there.
    rules = gcs_env.token(props["gcs.oauth2.token"])["rules"]
    assert rules[0]["terms"][0] == ["name", "projects/_/buckets/lake/objects/data/ice/"]
    assert "storage.objects.create" in rules[0]["permissions"]

    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "main.s.ice", reader.name, "SELECT")

    def reader_reads():
        ice = load_catalog("reader", type="rest", uri=f"{ws.api}/iceberg", warehouse="main", token=reader.token)
        table = ice.load_table("s.ice")
        ids = sorted(table.scan().to_arrow()["id"].to_pylist())
        try:
            table.append(pa.table({"id": pa.array([6], pa.int64())}))
            appended = "appended"
        except Exception as e:
            appended = f"{type(e).__name__}: {e}"
        return ids, table.io.properties["gcs.oauth2.token"], appended

    ids, token, appended = await asyncio.to_thread(reader_reads)
    assert ids == [4, 5]
    assert "storage.objects.create" not in gcs_env.token(token)["rules"][0]["permissions"]   # a read-only token
    assert appended != "appended", appended
    status, body = await ws.call("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/ice")
    assert status == 200 and json.dumps(body).count("gcs.oauth2.token") >= 1
    (credential,) = body["storage-credentials"]
    assert credential["prefix"] == "gs://lake/data/ice" and credential["config"]["gcs.oauth2.token"]
    # Without a grant: no table, no token, whichever Iceberg route asks.
    nobody = await user(server, ws)
    for method, path in (("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/ice"),
                         ("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/ice/credentials")):
        status, body = await nobody.call(method, path)
        assert status in (403, 404) and "gcs.oauth2.token" not in json.dumps(body), (path, status, body)


async def test_delta_sharing_answers_v4_signed_urls(ws, server, gcs_env, tmp_path):
    """A shared Delta table on gs://: the server reads its log with a token vended for its location and
    answers each file as a V4 signed URL made with the covering key; the official connector reads them,
    and the stand-in checks each signature (a URL moved to another object is refused)."""
    import delta_sharing
    import deltalake
    import requests
    from urllib.parse import parse_qs, urlsplit
    from test_delta_sharing import activate, call

    await lake(ws, gcs_env)
    table = await ok(ws, "POST", "/tables", json={
        "name": "d", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG", "type_text": "bigint",
                                                    "type_json": '"long"', "position": 0}],
        "storage_location": "gs://lake/data/d"})
    # delta-rs takes no bearer token for GCS (docs/storage.md): the table is written locally, then put in place
    # with the token vended for it.
    await asyncio.to_thread(deltalake.write_deltalake, str(tmp_path / "d"), pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    write = await ok(ws, "POST", "/temporary-table-credentials", json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    fs = store(write)
    for path in (tmp_path / "d").rglob("*"):
        if path.is_file():
            fs.pipe(f"lake/data/d/{path.relative_to(tmp_path / 'd').as_posix()}", path.read_bytes())
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
        assert f["url"].startswith(f"{gcs_env.storage_url}/lake/data/d/")
        signed = parse_qs(urlsplit(f["url"]).query)
        assert signed["X-Goog-Algorithm"] == ["GOOG4-RSA-SHA256"] and signed["X-Goog-SignedHeaders"] == ["host"]
        assert signed["X-Goog-Credential"][0].startswith(gcs_env.account.email + "/")
        assert (await asyncio.to_thread(requests.get, f["url"], timeout=30)).status_code == 200
    path, query = files[0]["url"].split("?", 1)
    forged = path.rsplit("/", 1)[0] + "/_delta_log/00000000000000000000.json?" + query
    assert (await asyncio.to_thread(requests.get, forged, timeout=30)).status_code == 403
