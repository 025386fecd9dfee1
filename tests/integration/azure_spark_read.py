"""Spark reading abfs:// Parquet with SAS shardcat vended, run as its own process by test_storage_azure_spark.py.

Its one argument is JSON: `classpath` (jvm/azure: hadoop-azure), `blob_host` (Azurite's host:port), `account`, and
`reads`: [{"sas", "path"}], each read with its own SAS (the driver's cache off, so each read builds its client
anew). Hadoop's ABFS driver is told the account has a flat namespace and to use the Blob endpoint (Azurite serves
no DFS endpoint), given the SAS as a fixed token, and sent to the emulator (`fs.azure.abfs.endpoint`, path-style,
plain http). Prints one line, `RESULT <json>`: per read, the rows or the error.
"""

import json
import sys

from pyspark.sql import SparkSession

args = json.loads(sys.argv[1])
host = f"{args['account']}.dfs.core.windows.net"
builder = (SparkSession.builder.master("local[1]").appName("azure")
           .config("spark.jars", args["classpath"].replace(":", ","))
           .config("spark.ui.enabled", "false").config("spark.driver.memory", "512m"))
hadoop = {
    "fs.azure.abfs.endpoint": args["blob_host"],          # an emulator: http://host:port/<account>/<container>/...
    "fs.azure.always.use.https": "false",
    f"fs.azure.account.auth.type.{host}": "SAS",
    f"fs.azure.account.hns.enabled.{host}": "false",      # a flat namespace: the Blob endpoint
    "fs.azure.fns.account.service.type": "BLOB",
    "fs.abfs.impl.disable.cache": "true",                 # each read its own client, with its own SAS
}
for key, value in hadoop.items():
    builder = builder.config("spark.hadoop." + key, value)
spark = builder.getOrCreate()
conf = spark.sparkContext._jsc.hadoopConfiguration()


def cause(e: Exception) -> str:
    """The Java error's own message and its causes (Spark's wrapper says only that analysis failed)."""
    lines = str(e).splitlines()
    return "\n".join([lines[0]] + [line for line in lines if line.startswith("Caused by")])[:1500]


out = []
for read in args["reads"]:
    conf.set(f"fs.azure.sas.fixed.token.{host}", read["sas"])
    try:
        out.append({"rows": sorted(r[0] for r in spark.read.parquet(read["path"]).collect())})
    except Exception as e:
        out.append({"error": cause(e)})
print("RESULT " + json.dumps(out), flush=True)
spark.stop()
