"""Spark reads an abfss:// table with a SAS shardcat vended (issue 49.4): Hadoop's ABFS driver, hadoop-azure 3.4.2
(jvm/azure: the version of pyspark 4.1's own Hadoop), in its flat-namespace mode, which talks to the Blob endpoint
Azurite serves (azure_spark_read.py has the settings). Spark runs as its own process: the suite's shared session
has no ABFS driver on its class path.

What 3.4.2 does with a read-only SAS, measured here: its getFileStatus of a directory without a marker blob (one a
Blob client wrote) writes the marker, which a read SAS may not (Azurite: 403 AuthorizationPermissionMismatch), and
the read fails; once a writer (with its read-write SAS, or ABFS creating the table) has left the marker, the read SAS
reads (docs/storage.md).
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from azure.storage.blob import ContainerClient

import jvm
from azurite import az  # noqa: F401  (the session's Azurite)
from test_storage_azure import COLS, adls, credential
from test_vending import ok

pytestmark = [pytest.mark.azurite, pytest.mark.spark_connectors]


async def test_spark_reads_the_table_with_the_vended_sas(ws, az):
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "az", "azure_storage_key": credential(az)})
    await ok(ws, "POST", "/external-locations", json={"name": "sp", "url": adls(az, "spark"), "credential_name": "az"})
    table = await ok(ws, "POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": adls(az, "spark/t")})
    sas = {}
    for operation in ("READ_WRITE", "READ"):
        answer = await ok(ws, "POST", "/temporary-table-credentials",
                          json={"table_id": table["table_id"], "operation": operation})
        sas[operation] = answer["azure_user_delegation_sas"]["sas_token"]
    data = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2, 3]}), data)
    ContainerClient(az.endpoint, "lake", credential=sas["READ_WRITE"]).upload_blob(
        "spark/t/part-0.parquet", data.getvalue(), overwrite=True)
    # The emulator speaks http: the same place as abfs:// (shardcat's abfss:// without TLS).
    path = adls(az, "spark/t").replace("abfss://", "abfs://")
    elsewhere = f"abfs://other@{az.account}.dfs.core.windows.net/x.csv"
    args = {"classpath": await asyncio.to_thread(jvm.classpath, "azure"), "blob_host": az.host, "account": az.account,
            "reads": [{"sas": sas["READ"], "path": path}, {"sas": sas["READ_WRITE"], "path": path},
                      {"sas": sas["READ"], "path": path}, {"sas": sas["READ"], "path": elsewhere}]}
    done = await asyncio.to_thread(subprocess.run, [sys.executable, str(Path(__file__).with_name("azure_spark_read.py")),
                                                    json.dumps(args)], capture_output=True, text=True, timeout=600)
    [line] = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")] or [done.stderr[-3000:]]
    before_marker, writer, reader, other_container = json.loads(line.removeprefix("RESULT "))
    # A directory a Blob client wrote has no marker blob; ABFS writes one, which a read SAS may not.
    assert "AuthorizationPermissionMismatch" in before_marker.get("error", ""), before_marker
    assert writer.get("rows") == [1, 2, 3], writer          # the writer's SAS reads (and leaves the marker)
    assert reader.get("rows") == [1, 2, 3], reader          # then the reader's read SAS reads
    assert "403" in other_container.get("error", ""), other_container       # Azurite refuses it elsewhere
