"""Delta Sharing over s3:// storage (moto's S3 on loopback): a table written by delta-rs
(`deltalake`, with per-file statistics and a change data feed), registered as an external table,
read by the official connector through S3 pre-signed URLs; file skipping on statistics.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import boto3
import delta_sharing
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from requests import HTTPError

from test_delta_sharing import activate, call, connector, ok

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type": "long"}', "position": 0},
        {"name": "region", "type_name": "STRING", "type_text": "string", "type_json": '{"type": "string"}',
         "position": 1, "partition_index": 0}]


@pytest.fixture
def s3(monkeypatch):
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    for name, value in {"AWS_ACCESS_KEY_ID": "moto", "AWS_SECRET_ACCESS_KEY": "moto", "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_ENDPOINT_URL": url, "SHARDCAT_S3_ENDPOINT": url}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=url, region_name="us-east-1").create_bucket(Bucket=bucket)
    yield {"url": url, "bucket": bucket, "options": {
        "AWS_ENDPOINT_URL": url, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "AWS_ACCESS_KEY_ID": "moto", "AWS_SECRET_ACCESS_KEY": "moto", "AWS_REGION": "us-east-1"}}
    server.stop()


def write_table(location: str, options: dict) -> None:
    """v0: ids 1-3; v1: ids 4-5 appended; v2: id 1 deleted (delta-rs writes its change data)."""
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    write_deltalake(location, pa.table({"id": [1, 2, 3], "region": ["eu", "eu", "us"]}, schema=schema),
                    partition_by=["region"], storage_options=options,
                    configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(location, pa.table({"id": [4, 5], "region": ["us", "us"]}, schema=schema), mode="append",
                    storage_options=options)
    DeltaTable(location, storage_options=options).delete("id = 1")


async def test_connector_reads_an_s3_table_through_presigned_urls(ws, s3, tmp_path):
    location = f"s3://{s3['bucket']}/data/sales"
    await asyncio.to_thread(write_table, location, s3["options"])
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={
        "name": "lake", "aws_iam_role": {"role_arn": "arn:aws:iam::123456789012:role/lake"}})
    await ok(ws, "POST", "/external-locations", json={"name": "data", "url": f"s3://{s3['bucket']}/data",
                                                      "credential_name": "lake"})
    await ok(ws, "POST", "/tables", json={"name": "sales", "catalog_name": "main", "schema_name": "s",
                                          "table_type": "EXTERNAL", "data_source_format": "DELTA",
                                          "columns": COLS, "storage_location": location})
    await ok(ws, "POST", "/shares", json={"name": "trade"})
    await ok(ws, "PATCH", "/shares/trade", json={"updates": [{"action": "ADD", "data_object": {
        "name": "main.s.sales", "history_data_sharing_status": "ENABLED", "cdf_enabled": True}}]})
    made = await ok(ws, "POST", "/recipients", json={"name": "acme", "authentication_type": "TOKEN"})
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    profile = await activate(ws, made, tmp_path)
    url = f"{profile}#trade.s.sales"

    df = await connector(delta_sharing.load_as_pandas, url)
    assert sorted(df["id"].tolist()) == [2, 3, 4, 5]
    older = await connector(delta_sharing.load_as_pandas, url, version=1)
    assert sorted(older["id"].tolist()) == [1, 2, 3, 4, 5]
    changes = await connector(delta_sharing.load_table_changes_as_pandas, url, starting_version=1, ending_version=2)
    got = sorted(zip(changes["id"].tolist(), changes["_change_type"].tolist()))
    assert got == [(1, "delete"), (4, "insert"), (5, "insert")]

    # The URLs are S3's own pre-signed ones.
    status, text, _ = await call(profile, "POST", "/shares/trade/schemas/s/tables/sales/query", json={"version": 1})
    lines = [json.loads(line) for line in text.splitlines()]
    files = [line["file"] for line in lines[2:]]
    assert len(files) == 3 and all(f["url"].startswith(s3["url"]) and "X-Amz-Signature" in f["url"] for f in files)
    # Statistics skip files: only the file holding id 1 can have an id below 2.
    hint = json.dumps({"op": "lessThan", "children": [{"op": "column", "name": "id", "valueType": "long"},
                                                      {"op": "literal", "value": "2", "valueType": "long"}]})
    status, text, _ = await call(profile, "POST", "/shares/trade/schemas/s/tables/sales/query",
                                 json={"version": 1, "jsonPredicateHints": hint})
    kept = [json.loads(line)["file"] for line in text.splitlines()[2:]]
    assert status == 200 and [f["partitionValues"]["region"] for f in kept] == ["eu"]
    df = await connector(delta_sharing.load_as_pandas, url, version=1, jsonPredicateHints=hint)
    assert sorted(df["id"].tolist()) == [1, 2]
    assert len(await connector(delta_sharing.load_as_pandas, url, limit=1)) == 1

    # A partition filter on the S3 table; then the recipient's grant revoked: refused.
    await ok(ws, "PATCH", "/shares/trade", json={"updates": [{"action": "UPDATE", "data_object": {
        "name": "main.s.sales", "partitions": [{"values": [{"name": "region", "op": "EQUAL", "value": "us"}]}]}}]})
    assert sorted((await connector(delta_sharing.load_as_pandas, url))["id"].tolist()) == [3, 4, 5]
    await ok(ws, "PATCH", "/shares/trade/permissions", json={"changes": [{"principal": "acme", "remove": ["SELECT"]}]})
    with pytest.raises(HTTPError):
        await connector(delta_sharing.load_as_pandas, url)
