"""shardcat.spark and the credentials batched resolve hands out: the field the server sends
(`temporary_credentials`) is the one the library reads. file:// credentials pass through a real
query untouched; an s3:// credential (no live S3 here: plain pyspark has no S3 filesystem) is
set on Spark's Hadoop configuration for its bucket."""

from __future__ import annotations



from shardcat.spark import connect
from shardcat.spark.catalog import CREDENTIALS, Resolved, _credential_expiry
from tests.spark.helpers import ok, run


def test_the_library_reads_the_field_the_server_writes():
    assert CREDENTIALS == "temporary_credentials"      # the server's side: tests/integration/test_resolve_credentials.py
    item = {CREDENTIALS: {"url": "file:///a", "expiration_time": 5_000},
            "dependencies": [{CREDENTIALS: {"url": "file:///b", "expiration_time": 3_000}}, {"name": "view"}]}
    assert _credential_expiry(item) == 3_000
    assert _credential_expiry({"credentials": {"expiration_time": 1}}) is None     # not a field resolve sends


async def test_file_credentials_pass_through_a_query(ws, cat, spark):
    df = spark.createDataFrame([(1,), (2,)], "id long")
    await run(cat.write, df, "c.s.t", mode="create")
    await ok(ws, "POST", "/tables", {"name": "v", "catalog_name": "c", "schema_name": "s", "table_type": "VIEW",
                                     "view_definition": "SELECT id FROM c.s.t",
                                     "columns": [{"name": "id", "type_name": "LONG", "position": 0}]})
    table = await ok(ws, "GET", "/tables/c.s.t")
    assert await run(lambda: cat.sql("SELECT count(*) FROM c.s.v").collect()[0][0]) == 2
    # The view's base table came with file:// credentials (no secret); kept, and bounding the cache entry.
    cred = cat._credentials["c.s.t"]
    assert cred["url"] == table["storage_location"] and "aws_temp_credentials" not in cred
    assert cat.catalog._cache[("TABLE", "c.s.v")].expires_ms == cred["expiration_time"]


def test_s3_credentials_configure_the_bucket(spark):
    cat = connect(spark, "http://127.0.0.1:9", "unused")      # no call is made below
    try:
        aws = {"access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t", "session_token": "tok"}
        view = {"name": "c.s.v", "securable_type": "TABLE", "authorization": {"allowed": True},
                "table": {"full_name": "c.s.v", "table_type": "VIEW"},
                "dependencies": [{"name": "c.s.t", "securable_type": "TABLE", "authorization": {"allowed": True},
                                  "table": {"full_name": "c.s.t", "storage_location": "s3://lake-x/data/t"},
                                  CREDENTIALS: {"url": "s3://lake-x/data/t", "expiration_time": 1,
                                                "aws_temp_credentials": aws}}]}
        # What `sql` does with an answered item: check it and its dependencies, keep their credentials.
        cat._functions([("c.s.v", Resolved(view, 1, dependencies=view["dependencies"]))])
        cat._configure_credentials(view["dependencies"][0]["table"])
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        prefix = "fs.s3a.bucket.lake-x."
        assert conf.get(prefix + "access.key") == "AKIAEXAMPLE"
        assert conf.get(prefix + "secret.key") == "s3cr3t" and conf.get(prefix + "session.token") == "tok"
        assert conf.get(prefix + "aws.credentials.provider") == \
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    finally:
        cat.close()


def test_s3_compatible_credentials_configure_the_endpoint(spark):
    """Static keys of an S3-compatible store (governance/s3_compatible.py): no session token, and
    the store's endpoint and addressing style for the bucket."""
    cat = connect(spark, "http://127.0.0.1:9", "unused")      # no call is made below
    try:
        table = {"full_name": "c.s.m", "storage_location": "s3://minio-x/lake/m"}
        cat._credentials["c.s.m"] = {"url": "s3://minio-x/lake/m", "expiration_time": 1,
                                     "aws_temp_credentials": {"access_key_id": "minio", "secret_access_key": "k"},
                                     "endpoint_url": "http://127.0.0.1:9000", "region": "us-east-1",
                                     "path_style_access": True}
        cat._configure_credentials(table)
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        prefix = "fs.s3a.bucket.minio-x."
        assert conf.get(prefix + "aws.credentials.provider") == "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        assert (conf.get(prefix + "access.key"), conf.get(prefix + "secret.key")) == ("minio", "k")
        assert conf.get(prefix + "endpoint") == "http://127.0.0.1:9000"
        assert conf.get(prefix + "path.style.access") == "true"
        assert conf.get(prefix + "endpoint.region") == "us-east-1"
    finally:
        cat.close()
