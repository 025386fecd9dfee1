"""One local SparkSession for the whole test session (local[2], UI off, small shuffles); the JVM is stopped at the end."""

from __future__ import annotations

import pytest

from shardcat.spark import connect
from tests.spark.helpers import ok


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("shardcat-tests")
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
