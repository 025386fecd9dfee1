"""Attacks by path on a metastore whose path index is kept in PostgreSQL (`--path-index-max`,
shards/cold_paths.py), beside the same attacks on one whose index is whole in memory.

A cold or kept-in-PostgreSQL index answers each path question from the paths it loaded for it, a
table's owner without what lies below it. A user with fewer rights asks about a table's storage in
several spellings through every API that reads by path (POST /resolve, GET /files, temporary path
credentials) and tries to claim paths in and above it with external tables: every answer must be
the whole index's, refusals included, and nothing is written.
"""

from __future__ import annotations

import os

import pytest

from conftest import new_workspace, serving
from governance_users import grant, user
from shardcat.shards.state import CacheConfig

in_db = serving("paths-in-db", cache=CacheConfig(path_index_max=-1))    # every metastore: even no path is too many
ROLE = {"role_arn": "arn:aws:iam::123456789012:role/r"}
COLUMNS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}',
            "position": 0, "nullable": True}]


@pytest.fixture(params=["whole index", "kept in PostgreSQL"])
async def world(request, server, in_db, http, tmp_path):
    running = server if request.param == "whole index" else in_db
    ws = await new_workspace(running, http, tmp_path)
    lake = f"file://{tmp_path}/lake"
    os.makedirs(f"{tmp_path}/lake/t", exist_ok=True)
    open(f"{tmp_path}/lake/t/part-0.parquet", "w").close()
    for path, body in (("/storage-credentials", {"name": "cred", "aws_iam_role": ROLE}),
                       ("/external-locations", {"name": "lake", "url": lake, "credential_name": "cred"}),
                       ("/catalogs", {"name": "c"}), ("/schemas", {"name": "s", "catalog_name": "c"}),
                       ("/tables", {"name": "t", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
                                    "data_source_format": "DELTA", "storage_location": f"{lake}/t",
                                    "columns": COLUMNS})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer
    return running, ws, lake, request.param


def spellings(url: str) -> list[str]:
    return [url, url + "/", url.replace("/t", "//t"), url + "/./", url + "/sub/..", url + "/part-0.parquet",
            url.upper().replace("FILE://", "file://"), url.replace("file://", "FILE://")]


async def test_a_user_without_rights_learns_and_gets_nothing_by_path(world):
    running, ws, lake, _ = world
    bob = await user(running, ws)
    for url in spellings(f"{lake}/t"):
        status, body = await bob.call("POST", "/resolve", json={"items": [{"path": url}], "credentials": False})
        assert status in (200, 400), body
        if status == 200:
            [item] = body["items"]
            assert "table" not in item and (item.get("error") or not item["authorization"]["allowed"]), (url, item)
        status, body = await bob.call("GET", "/files", params={"url": url})
        assert status in (400, 403, 404) and "files" not in body, (url, body)
        status, body = await bob.call("POST", "/temporary-path-credentials", json={"url": url,
                                                                                  "operation": "PATH_READ"})
        assert status in (400, 403, 404) and "url" not in body, (url, body)


async def test_a_reader_of_the_table_reads_it_by_path(world):
    running, ws, lake, _ = world
    alice = await user(running, ws)
    await grant(ws, "catalog", "c", alice.name, "USE CATALOG")
    await grant(ws, "schema", "c.s", alice.name, "USE SCHEMA")
    await grant(ws, "table", "c.s.t", alice.name, "SELECT")
    status, body = await alice.call("POST", "/resolve", json={"items": [{"path": f"{lake}/t/part-0.parquet"}],
                                                             "credentials": False})
    assert status == 200 and body["items"][0]["table"]["full_name"] == "c.s.t", body
    status, body = await alice.call("GET", "/files", params={"url": f"{lake}/t"})
    assert status == 200 and [f["name"] for f in body["files"]] == ["part-0.parquet"], body


async def test_no_external_table_claims_a_path_in_or_above_another(world):
    running, ws, lake, mode = world
    mallory = await user(running, ws)
    await grant(ws, "catalog", "c", mallory.name, "USE CATALOG")
    await grant(ws, "schema", "c.s", mallory.name, "USE SCHEMA", "CREATE TABLE")
    await grant(ws, "external_location", "lake", mallory.name, "CREATE EXTERNAL TABLE")
    targets = [*spellings(f"{lake}/t/sub"), f"{lake}/t", f"{lake}/t/", lake, lake + "/"]
    for n, url in enumerate(targets):
        status, body = await mallory.call("POST", "/tables", json={
            "name": f"m{n}", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
            "data_source_format": "DELTA", "storage_location": url, "columns": COLUMNS})
        assert status == 400, (url, body)
    status, body = await ws.call("GET", "/tables", params={"catalog_name": "c", "schema_name": "s"})
    assert [t["name"] for t in body["tables"]] == ["t"], body                  # nothing was written
    # Beside it, not in it: taken.
    status, body = await mallory.call("POST", "/tables", json={
        "name": "beside", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "storage_location": f"{lake}/t2", "columns": COLUMNS})
    assert status == 200, body
    if mode == "kept in PostgreSQL":
        async with ws.session.get(running.url + "/metrics") as r:
            text = await r.text()
        assert any(line.startswith("shardcat_metastores_paths_in_db ") and float(line.split()[1]) >= 1
                   for line in text.splitlines()), "the metastore's path index was not kept in PostgreSQL"
