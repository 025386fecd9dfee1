"""Spark reading gs:// Parquet with shardcat's vended tokens, run as its own process by test_gcs_spark.py.

Its one argument is JSON: `classpath` (jvm/gcs: the GCS connector and unitycatalog-hadoop), `uc` (the
catalog's URL), `token` (the caller's), `table_id`, `endpoint` (the storage), `path`, and `refused` (paths
the token must not reach). The connector takes its token from unitycatalog-hadoop's GcsVendedTokenProvider,
which asks the catalog's /temporary-table-credentials for it and renews it, as on open-source Unity
Catalog. Prints one line, `RESULT <json>`: the rows read, and the error of each refused path.
"""

import json
import sys

from pyspark.sql import SparkSession

args = json.loads(sys.argv[1])
builder = (SparkSession.builder.master("local[1]").appName("gcs")
           .config("spark.jars", args["classpath"].replace(":", ","))
           .config("spark.ui.enabled", "false").config("spark.driver.memory", "512m"))
hadoop = {
    "fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
    "fs.AbstractFileSystem.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS",
    "fs.gs.auth.type": "ACCESS_TOKEN_PROVIDER",
    "fs.gs.auth.access.token.provider": "io.unitycatalog.hadoop.internal.auth.GcsVendedTokenProvider",
    "fs.gs.storage.root.url": args["endpoint"], "fs.gs.project.id": "shardcat-test",
    # The connector's vectored reads call a Hadoop method that pyspark 4.1's Hadoop 3.4.2 no longer has
    # (NoSuchMethodError: VectoredReadUtils.validateRangeRequest): Parquet reads ranges one at a time.
    "parquet.hadoop.vectored.io.enabled": "false",
    # unitycatalog-hadoop: where to renew the token (the catalog, the caller's token, the table, the operation)
    "fs.unitycatalog.uri": args["uc"], "fs.unitycatalog.auth.type": "static", "fs.unitycatalog.auth.token": args["token"],
    "fs.unitycatalog.credentials.type": "table", "fs.unitycatalog.table.id": args["table_id"],
    "fs.unitycatalog.table.operation": "READ", "fs.unitycatalog.cred.context.id": args["table_id"],
    "fs.unitycatalog.credential.prefix": args["prefix"],
    "fs.gs.init.oauth.token": args["gcs_token"], "fs.gs.init.oauth.token.expiration.time": str(args["expires"]),
}
for key, value in hadoop.items():
    builder = builder.config("spark.hadoop." + key, value)
spark = builder.getOrCreate()
out = {"refused": []}


def cause(e: Exception) -> str:
    """The Java error's own message and its causes (Spark's wrapper says only that analysis failed)."""
    lines = str(e).splitlines()
    return "\n".join([lines[0]] + [line for line in lines if line.startswith("Caused by")])[:1500]

try:
    out["rows"] = sorted(r[0] for r in spark.read.parquet(args["path"]).collect())
except Exception as e:
    out["error"] = cause(e)
for path in args["refused"]:
    try:
        spark.read.parquet(path).collect()
        out["refused"].append(None)
    except Exception as e:
        out["refused"].append(cause(e))
print("RESULT " + json.dumps(out), flush=True)
spark.stop()
