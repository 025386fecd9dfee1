"""The UC Delta API's credentials on s3:// (a local moto server playing IAM, STS and S3, as in
test_vending.py): table credentials in the API's shape (`s3.access-key-id`, `s3.secret-access-key`,
`s3.session-token`), scoped to the table's prefix, read-only for READ; path credentials likewise."""

from __future__ import annotations

import boto3

from test_vending import denied, lake, moto, session_policies_enforced, sts  # noqa: F401  (fixtures)

TABLE = "/delta/v1/catalogs/main/schemas/s/tables/t1"


def client(sts, credential: dict):
    c = credential["config"]
    return boto3.client("s3", endpoint_url=sts["url"], region_name="us-east-1",
                        aws_access_key_id=c["s3.access-key-id"], aws_secret_access_key=c["s3.secret-access-key"],
                        aws_session_token=c["s3.session-token"])


async def test_table_and_path_credentials_on_s3(ws, sts):
    b = sts["bucket"]
    await lake(ws, sts)
    status, body = await ws.call("GET", f"{TABLE}/credentials", params={"operation": "READ"})
    assert status == 200, body
    [read] = body["storage-credentials"]
    assert read["prefix"] == f"s3://{b}/data/t1" and read["operation"] == "READ"
    s3 = client(sts, read)
    assert s3.get_object(Bucket=b, Key="data/t1/part-0.parquet")["Body"].read() == b"content of data/t1/part-0.parquet"
    assert denied(lambda: s3.get_object(Bucket=b, Key="data/t2/part-0.parquet"))
    assert denied(lambda: s3.put_object(Bucket=b, Key="data/t1/new", Body=b"x"))

    status, body = await ws.call("GET", f"{TABLE}/credentials", params={"operation": "READ_WRITE"})
    assert status == 200, body
    s3 = client(sts, body["storage-credentials"][0])
    s3.put_object(Bucket=b, Key="data/t1/part-1.parquet", Body=b"new")
    assert denied(lambda: s3.put_object(Bucket=b, Key="data/t2/part-9.parquet", Body=b"x"))

    status, body = await ws.call("GET", "/delta/v1/temporary-path-credentials",
                                 params={"location": f"s3://{b}/data/free", "operation": "READ"})
    assert status == 200, body
    s3 = client(sts, body["storage-credentials"][0])
    assert s3.get_object(Bucket=b, Key="data/free/f.csv")["Body"].read() == b"content of data/free/f.csv"
    assert denied(lambda: s3.get_object(Bucket=b, Key="data/t1/part-0.parquet"))


async def test_staging_table_where_nothing_can_be_vended(ws, moto, monkeypatch):
    """s3:// managed storage with no STS configured: the staging table is reserved with no credentials,
    and asking for them says why."""
    monkeypatch.delenv("SHARDCAT_STS_ENDPOINT", raising=False)
    b = moto["bucket"]
    await lake(ws, moto)
    status, body = await ws.call("POST", "/schemas", json={"name": "managed", "catalog_name": "main",
                                                           "storage_root": f"s3://{b}/data/managed"})
    assert status == 200, body
    status, staging = await ws.call("POST", "/delta/v1/catalogs/main/schemas/managed/staging-tables",
                                    json={"name": "t"})
    assert status == 200 and staging["storage-credentials"] == [], staging
    assert staging["location"].startswith(f"s3://{b}/data/managed/")
    status, body = await ws.call("GET", f"/delta/v1/staging-tables/{staging['table-id']}/credentials")
    assert status == 400 and "STS" in body["error"]["message"], body
