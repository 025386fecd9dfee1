"""One local SparkSession for the whole test session (local[2], UI off, small shuffles), carrying the jars of
jvm/spark (Delta, Iceberg's Spark runtime, S3A) and both session extensions; catalogs are added per test at
run time (helpers.py). The JVM is stopped at the end."""

from __future__ import annotations

import os

import pytest

from shardcat.spark import connect
from tests import jvm
from tests.spark.helpers import ok

# The jars in jvm/spark/pom.xml are built for this Spark minor version (pyproject pins pyspark to it).
SPARK_MINOR = "4.1"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark import SparkContext
    import pyspark
    from pyspark.sql import SparkSession
    assert pyspark.__version__.startswith(SPARK_MINOR + "."), \
        f"pyspark {pyspark.__version__}: jvm/spark's jars need {SPARK_MINOR}.x (pip install -e '.[test]')"
    session = (SparkSession.builder.master("local[2]").appName("shardcat-tests")
               .config("spark.jars", ",".join([*jvm.classpath("spark").split(os.pathsep), jvm.package("spark-plugin")]))
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension,"
                       "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,shardcat.spark.ShardcatExtensions")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
               .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + str(tmp_path_factory.mktemp("derby")))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    gateway = SparkContext._gateway
    session.stop()
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None


@pytest.fixture
async def cat(ws, spark):
    """A catalog `c` with schema `s` in a fresh workspace, and a shardcat.spark session on it."""
    await ok(ws, "POST", "/catalogs", {"name": "c"})
    await ok(ws, "POST", "/schemas", {"name": "s", "catalog_name": "c"})
    session = connect(spark, ws.url, ws.token)
    yield session
    session.close()
