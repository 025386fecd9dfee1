"""UniForm on a Delta table Spark wrote (Delta 4.4, column mapping by name, a date partition, an overwrite that
removes every file): pyiceberg, through shardcat's Iceberg REST catalog, reads the rows Spark reads, at
every Delta version. Spark's column-mapped Parquet files carry field ids and physical column names, which the
conversion keeps (docs/delta.md, UniForm)."""

from __future__ import annotations

import datetime

from pyiceberg.catalog import load_catalog

from shardcat.entities.urls import local_path
from tests.spark.helpers import ok, run

UNIFORM = {"delta.universalFormat.enabledFormats": "iceberg"}


def rows(table) -> list[tuple]:
    return sorted(zip(table["id"].to_pylist(), table["name"].to_pylist(), table["day"].to_pylist()))


async def test_spark_written_delta_read_by_pyiceberg(ws, spark):
    await ok(ws, "POST", "/catalogs", {"name": "main"})
    await ok(ws, "POST", "/schemas", {"name": "s", "catalog_name": "main"})
    table = await ok(ws, "POST", "/tables", {
        "name": "events", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "properties": UNIFORM,
        "columns": [{"name": "id", "type_name": "LONG"}, {"name": "name", "type_name": "STRING"},
                    {"name": "day", "type_name": "DATE"}]})
    path = local_path(table["storage_location"])

    def write():
        first = spark.createDataFrame([(1, "a", datetime.date(2026, 1, 1)), (2, "b", datetime.date(2026, 1, 2)),
                                       (3, "c", datetime.date(2026, 1, 1))], "id long, name string, day date")
        # New tables map columns by name (physical names, field ids), as UniForm asks; no deletion vectors.
        defaults = "spark.databricks.delta.properties.defaults."
        spark.conf.set(defaults + "columnMapping.mode", "name")
        spark.conf.set(defaults + "enableDeletionVectors", "false")
        try:
            first.write.format("delta").partitionBy("day").save(path)
        finally:
            spark.conf.unset(defaults + "columnMapping.mode")
            spark.conf.unset(defaults + "enableDeletionVectors")
        first.where("id != 3").write.format("delta").mode("overwrite").save(path)     # removes every file
        return {v: sorted(tuple(r) for r in spark.read.format("delta").option("versionAsOf", v).load(path)
                          .select("id", "name", "day").collect()) for v in (0, 1)}

    by_spark = await run(write)
    ice = await run(load_catalog, "shardcat", type="rest", uri=f"{ws.api}/iceberg", warehouse="main",
                    token=ws.token)          # in a thread: it asks the server (on this loop) for its config
    loaded = await run(ice.load_table, "s.events")
    # Spark's files use physical names: only the field ids (and the name mapping) find the columns.
    assert "col-" in loaded.metadata.properties["schema.name-mapping.default"]
    snapshots = {s.summary["delta-version"]: s.snapshot_id for s in loaded.snapshots()}
    assert sorted(snapshots) == ["0", "1"]
    for version in (0, 1):
        read = await run(lambda: loaded.scan(snapshot_id=snapshots[str(version)]).to_arrow())
        assert rows(read) == by_spark[version]
    assert rows(await run(lambda: loaded.scan().to_arrow())) == [
        (1, "a", datetime.date(2026, 1, 1)), (2, "b", datetime.date(2026, 1, 2))]
