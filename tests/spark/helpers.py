"""Helpers the Spark tests share: calling the blocking library from async tests, API calls, and catalogs
added to the session's Spark at run time."""

from __future__ import annotations

import asyncio
import uuid


def run(fn, *args, **kwargs):
    """Call the (blocking) Spark library from an async test: the server shares the test's loop."""
    return asyncio.to_thread(fn, *args, **kwargs)


async def ok(ws, method, path, body=None):
    status, out = await ws.call(method, path, json=body)
    assert status == 200, (path, out)
    return out


def fresh_name(prefix: str) -> str:
    """A Spark catalog name no other test used: each (server, token) pair is its own Spark catalog,
    since Spark keeps a catalog's instance (and its token) for the session's life."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def add_catalog(spark, name: str, impl: str, options: dict) -> str:
    """Register Spark catalog `name` (class `impl`, `spark.sql.catalog.<name>.<option>`) at run time."""
    spark.conf.set(f"spark.sql.catalog.{name}", impl)
    for key, value in options.items():
        spark.conf.set(f"spark.sql.catalog.{name}.{key}", str(value))
    return name


def iceberg_catalog(spark, caller, warehouse: str, *, s3_endpoint: str | None = None) -> str:
    """Iceberg's REST catalog on shardcat as an Iceberg Spark user configures it, for `caller` (a Workspace
    or a user of governance_users: its url and token): a fresh Spark catalog name for it. With
    `s3_endpoint` (a local S3 such as moto's), the region and path-style addressing that endpoint needs;
    the keys are the ones shardcat vends with each table."""
    options = {"type": "rest", "uri": f"{caller.api}/iceberg", "warehouse": warehouse, "token": caller.token}
    if s3_endpoint:
        options.update({"client.region": "us-east-1", "s3.path-style-access": "true"})
    return add_catalog(spark, fresh_name("ice"), "org.apache.iceberg.spark.SparkCatalog", options)
