"""shardcat.spark: PySpark (Spark 4, Java 17) on a shardcat catalog, driver side.

`connect(spark, url, token)` gives a session whose `sql`, `table`, `read_path` and `write` work
on catalog names, with one batched resolve per query. See docs/spark.md.
"""

from .catalog import CatalogError
from .session import Shardcat, connect

__all__ = ["connect", "Shardcat", "CatalogError"]
