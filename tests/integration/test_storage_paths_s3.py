"""Issue 28, storage paths on s3:// (moto's STS and S3, as in test_vending.py).

Before the fix `s3://b/data/t1%2F_delta_log` was "not under" table t1 for the ownership rules,
so READ FILES on the location vended STS credentials for the prefix data/t1/_delta_log: keys
inside another user's table. Every spelling like it is refused; the plain spelling is the
table's to decide, by path as by name.
"""

from __future__ import annotations

from governance_users import grant, user
from test_vending import lake, moto, ok, session_policies_enforced, sts, vended_s3  # noqa: F401

INTO_T1 = ["t1%2F_delta_log", "t1%2f_delta_log", "free%2F..%2Ft1", "t1%5C_delta_log", "t1%5c_delta_log",
           "t1\\_delta_log", "%2E%2E%2Fdata%2Ft1", "free/%2E%2E/t1", "free/.%2e/t1", "t1%00"]


def refused(status, body) -> bool:
    return status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE" and \
        ("invalid storage url" in body["message"].lower() or "NUL character" in body["message"])


async def test_s3_spellings_reach_no_other_table(ws, server, sts):
    b = sts["bucket"]
    await lake(ws, sts)
    bob = await user(server, ws)
    await grant(ws, "external_location", "data", bob.name, "READ FILES", "WRITE FILES", "CREATE EXTERNAL TABLE")
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    for i, tail in enumerate(INTO_T1):
        for url in (f"s3://{b}/data/{tail}", f"s3a://{b.upper()}/data/{tail}"):
            for operation in ("PATH_READ", "PATH_READ_WRITE", "PATH_CREATE_TABLE"):
                status, body = await bob.call("POST", "/temporary-path-credentials",
                                              json={"url": url, "operation": operation})
                assert refused(status, body), (url, operation, status, body)
                assert "aws_temp_credentials" not in body
            status, body = await bob.call("GET", "/files", params={"url": url})
            assert refused(status, body), (url, status, body)
            status, body = await bob.call("POST", "/tables", json={
                "name": f"mine{i}", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
                "data_source_format": "DELTA", "columns": [], "storage_location": url})
            assert refused(status, body), (url, status, body)
            status, body = await bob.call("POST", "/resolve", json={"items": [{"path": url}]})
            assert status == 200 and body["items"][0]["error"]["error_code"] == "INVALID_PARAMETER_VALUE", body


async def test_s3_paths_inside_a_table_are_the_tables_to_decide(ws, server, sts):
    b = sts["bucket"]
    await lake(ws, sts)
    bob = await user(server, ws)
    await grant(ws, "external_location", "data", bob.name, "READ FILES")
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG", "USE SCHEMA")
    for url in (f"s3://{b}/data/t1", f"s3a://{b}/data/t1/_delta_log/", f"s3://{b}/data/free/../t1/part-0.parquet"):
        status, body = await bob.call("GET", "/files", params={"url": url})
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
        status, body = await bob.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
    # With SELECT on the table, path credentials come, scoped to what was asked for.
    await grant(ws, "table", "main.s.t1", bob.name, "SELECT")
    answer = await ok(bob, "POST", "/temporary-path-credentials",
                      json={"url": f"s3://{b}/data/t1/_delta_log", "operation": "PATH_READ"})
    assert answer["url"] == f"s3://{b}/data/t1/_delta_log"
    assert vended_s3(sts, answer).get_object(Bucket=b, Key="data/t1/_delta_log/0.json")["Body"].read()


async def test_no_credentials_for_keys_iam_reads_as_wildcards(ws, server, sts):
    """`s3://b/data/*` owned by nobody is READ FILES's, but a policy on `data/*/*` is every table's."""
    b = sts["bucket"]
    await lake(ws, sts)
    bob = await user(server, ws)
    await grant(ws, "external_location", "data", bob.name, "READ FILES", "WRITE FILES")
    for tail in ("*", "%2A", "t%2a", "%3F%3F", "t%3F", "$%7Baws:username%7D", "$", "x/*/y"):
        url = f"s3://{b}/data/{tail}"
        for operation in ("PATH_READ", "PATH_READ_WRITE"):
            status, body = await bob.call("POST", "/temporary-path-credentials",
                                          json={"url": url, "operation": operation})
            assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), (url, body)
            assert "wildcard" in body["message"] and "aws_temp_credentials" not in body
    # A table registered at such a key gets no credentials either (its own would reach its siblings).
    table = await ok(ws, "POST", "/tables", json={
        "name": "star", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": [], "storage_location": f"s3://{b}/data/t%3F"})
    status, body = await ws.call("POST", "/temporary-table-credentials",
                                 json={"table_id": table["table_id"], "operation": "READ"})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body


async def test_path_credentials_above_a_table_need_its_privileges(ws, server, sts):
    """Keys for s3://b/data reach data/t1 too: READ FILES on the location is not SELECT on t1."""
    b = sts["bucket"]
    await lake(ws, sts)
    bob = await user(server, ws)
    await grant(ws, "external_location", "data", bob.name, "READ FILES", "WRITE FILES")
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG", "USE SCHEMA")
    for url in (f"s3://{b}/data", f"s3a://{b}/data/", f"s3://{b}/data/free/.."):
        status, body = await bob.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
        assert "t1" in body["message"] and "aws_temp_credentials" not in body   # its path; unnamed: bob may not see it
        assert "main.s.t1" not in body["message"]
    await grant(ws, "table", "main.s.t1", bob.name, "SELECT")
    answer = await ok(bob, "POST", "/temporary-path-credentials", json={"url": f"s3://{b}/data", "operation": "PATH_READ"})
    assert vended_s3(sts, answer).get_object(Bucket=b, Key="data/t1/part-0.parquet")["Body"].read()
    # Writing needs MODIFY on the table as well.
    status, body = await bob.call("POST", "/temporary-path-credentials",
                                  json={"url": f"s3://{b}/data", "operation": "PATH_READ_WRITE"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body
