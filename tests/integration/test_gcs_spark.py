"""Spark reads a gs:// table with what shardcat vends (Google's GCS connector, on fake-gcs-server behind the stand-in).

The GCS connector has no setting for a plain token: it takes one from an AccessTokenProvider class. The
open-source Unity Catalog's unitycatalog-hadoop ships one, GcsVendedTokenProvider, which starts from the
token in the Hadoop configuration and renews it from the catalog's /temporary-table-credentials: here
shardcat's. Spark runs as its own process (gcs_spark_read.py: the suite's shared Spark session has no
GCS connector on its class path), so the module is marked spark_connectors as well.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import jvm
from gcs_cloud import gcs, gcs_env  # noqa: F401  (fixtures)
from test_gcs_engines import reader_of_t, tables_with_data
from test_storage_gcs import token_of
from test_vending import ok

pytestmark = [pytest.mark.gcs_emulator, pytest.mark.spark_connectors]


async def test_spark_reads_the_granted_table_only(ws, server, gcs_env):
    table = await tables_with_data(ws, gcs_env)
    reader = await reader_of_t(server, ws)
    answer = await ok(reader, "POST", "/temporary-table-credentials", json={"table_id": table["table_id"], "operation": "READ"})
    args = {"classpath": await asyncio.to_thread(jvm.classpath, "gcs"), "uc": server.url, "token": reader.token,
            "table_id": table["table_id"], "endpoint": gcs_env.storage_url, "gcs_token": token_of(answer),
            "expires": answer["expiration_time"], "prefix": answer["url"], "path": "gs://lake/data/t/data-0.parquet",
            "refused": ["gs://lake/data/u/data-0.parquet"]}
    done = await asyncio.to_thread(subprocess.run, [sys.executable, str(Path(__file__).with_name("gcs_spark_read.py")),
                                                    json.dumps(args)], capture_output=True, text=True, timeout=600)
    [line] = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")] or [done.stderr[-3000:]]
    result = json.loads(line.removeprefix("RESULT "))
    assert result.get("rows") == [1, 2, 3], result          # read with the token shardcat vended
    # Another table's file: the connector's request carries the same token, and the stand-in refuses it.
    assert result["refused"] and all(r and "403 Forbidden" in r for r in result["refused"]), result
