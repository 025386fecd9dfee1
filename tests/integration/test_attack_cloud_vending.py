"""Attacks on gs:// and abfss:// vending (issue 49), tried by a user who may read files of an external
location (READ FILES) but no table in it.

By path as by name: a path request spelled to reach a table's storage (its folder in another case, with
`.`, `..`, `//`, an encoded letter, the `abfs://` alias, the account host in capitals) or a folder that
holds one (the location's root, a parent) is decided by the table, so it is refused, before any token
exchange; a path nothing owns gets a token, and that token reads nothing of a sibling asset whose name
merely starts the same (`t-old` beside `t`), as the emulator itself enforces (GCS: the Credential Access
Boundary checked by the loopback token service; the emulator refuses what it excludes).
"""

from __future__ import annotations

import pytest

from azurite import az  # noqa: F401  (the session's Azurite)
from gcs_cloud import gcs, gcs_env  # noqa: F401  (fixtures)
from governance_users import grant, user
from test_storage_azure import adls, lake as az_lake
from test_storage_gcs import lake as gcs_lake, no_token, refused, store
from test_vending import ok


@pytest.mark.gcs_emulator
async def test_gs_paths_spelled_to_reach_a_table_are_decided_by_the_table(ws, server, gcs_env):
    await gcs_lake(ws, gcs_env)
    reader = await user(server, ws)
    await grant(ws, "external_location", "data", reader.name, "READ FILES")
    exchanges = len(gcs_env.exchanges)
    for url in ("gs://lake/data/t", "gs://LAKE/data/t", "gs://lake/data/t/", "gs://lake/data/./t",
                "gs://lake/data//t/part-0.parquet", "gs://lake/data/x/../t", "gs://lake/data/%74",
                "gs://lake/data/t/_delta_log", "gs://lake/data", "gs://Lake/data/", "gs://lake/data/free/../"):
        status, body = await reader.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert status in (400, 403, 404) and no_token(body), (url, body)
    assert len(gcs_env.exchanges) == exchanges            # refused before any token was asked for
    # A folder nothing owns: a token, for exactly that folder (the sibling sharing its first letters included).
    answer = await ok(reader, "POST", "/temporary-path-credentials",
                      json={"url": "gs://lake/data/free", "operation": "PATH_READ"})
    fs = store(answer)
    assert fs.cat("lake/data/free/f.csv")
    for outside in ("lake/data/t/part-0.parquet", "lake/data/t-old/part-0.parquet", "lake/secret/x"):
        assert refused(lambda: fs.cat(outside)), outside
    # With SELECT on t, the token for t reads t and not t-old, nor u.
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.t", reader.name, "SELECT")
    answer = await ok(reader, "POST", "/temporary-path-credentials",
                      json={"url": "gs://LAKE/data/./t", "operation": "PATH_READ"})
    assert answer["url"] == "gs://lake/data/t"
    fs = store(answer)
    assert fs.cat("lake/data/t/part-0.parquet")
    for outside in ("lake/data/t-old/part-0.parquet", "lake/data/u/part-0.parquet"):
        assert refused(lambda: fs.cat(outside)), outside
    # ...and still nothing for the folder holding t and u.
    status, body = await reader.call("POST", "/temporary-path-credentials",
                                     json={"url": "gs://lake/data", "operation": "PATH_READ"})
    assert status == 403 and no_token(body), body


@pytest.mark.azurite
async def test_abfss_paths_spelled_to_reach_a_table_are_decided_by_the_table(ws, server, az):
    await az_lake(ws, az)
    reader = await user(server, ws)
    await grant(ws, "external_location", "data", reader.name, "READ FILES")
    host = f"{az.account}.dfs.core.windows.net"
    for url in (adls(az, "data/t"), f"abfs://lake@{host}/data/t", f"abfss://LAKE@{host.upper()}/data/t",
                f"abfss://lake@{host}/data/./t/", f"abfss://lake@{host}/data//x/../t", adls(az, "data/%74"),
                adls(az, "data"), adls(az, "data/free/.."), f"abfs://lake@{host}/data/"):
        status, body = await reader.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert status in (400, 403, 404) and "sas_token" not in str(body), (url, body)
    answer = await ok(reader, "POST", "/temporary-path-credentials",
                      json={"url": adls(az, "data/free"), "operation": "PATH_READ"})
    assert answer["url"] == adls(az, "data/free") and answer["azure_user_delegation_sas"]["sas_token"]
