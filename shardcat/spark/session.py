"""PySpark over a shardcat catalog: SQL on catalog names, reads by name or path, writes by name.

    from shardcat.spark import connect
    cat = connect(spark, "http://127.0.0.1:8080", token)
    cat.sql("SELECT o.id, c.name FROM main.sales.orders o JOIN main.sales.customers c ON ...").show()
    cat.write(df, "main.sales.daily", mode="append")          # created on first write (managed storage)

`sql` finds every catalog name in the query (three-part `catalog.schema.table`, and qualified
function calls), asks the catalog once (`POST /resolve`: views and functions come back expanded
into what they depend on), registers each table as a temporary view over its files (row filters
and column masks applied, for a trusted engine), each catalog view as a temporary view over those,
inlines catalog SQL functions, rewrites the query to those names and runs it. What the catalog
said is kept for the job (see catalog.py), so a pipeline does not ask twice about the same table.
Every write reports its lineage as an OpenLineage RunEvent (`POST /openlineage/api/v1/lineage`): the catalog tables and volumes whose
files the DataFrame read.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import logging
import re
import urllib.parse
import uuid

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.serde import Serde
from pyarrow import fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ..cache.url_trie import UrlTrie
from ..entities.urls import InvalidUrl
from ..delta.log import Storage
from ..entities.sql import sql_references
from ..entities.types import VIEW_TYPES
from . import sqlrewrite
from .catalog import CatalogClient, CatalogError, Resolved, credentials_of
from .delta import DeltaBridge, in_partition_directories, is_catalog_managed
from .paths import engine_path, volume_file_url
from .types import same_columns, to_arrow, to_columns, to_schema

FILE_FORMATS = ("PARQUET", "CSV", "JSON", "ORC", "AVRO", "TEXT")
WRITE_FORMATS = ("PARQUET", "CSV", "JSON", "ORC", "DELTA")
WRITE_MODES = ("append", "overwrite", "create")
_VOLUME_PATH = re.compile(r"^/Volumes/([^/]+)/([^/]+)/([^/]+)(/.*)?$", re.IGNORECASE)
log = logging.getLogger(__name__)


def connect(spark: SparkSession, url: str, token: str, *, trusted_engine: bool = False) -> "Shardcat":
    """A catalog session for `spark`: `url` is the server (http://host:port), `token` a bearer token."""
    return Shardcat(spark, url, token, trusted_engine=trusted_engine)


def _quote(name: str) -> str:
    return ".".join(f"`{p}`" for p in name.split("."))


def _refusal(entry: dict) -> tuple[str, str] | None:
    """(error code, message) when the catalog refused or could not answer an item."""
    err = entry.get("error")
    if err:
        return err.get("error_code", "ERROR"), err.get("message", "")
    auth = entry.get("authorization")
    if isinstance(auth, dict) and not auth.get("allowed", True):
        return "PERMISSION_DENIED", auth.get("reason") or f"Access to '{entry.get('name')}' is denied."
    return None


class Shardcat:
    def __init__(self, spark: SparkSession, url: str, token: str, *, trusted_engine: bool = False):
        self.spark = spark
        self.catalog = CatalogClient(url, token, trusted_engine=trusted_engine)
        self.delta = DeltaBridge(self.catalog.api, token, self.catalog.stats)
        self.trusted_engine = trusted_engine
        self.reads: dict[str, int] = {}       # full name or path -> times read
        self.writes: list[dict] = []          # {"table", "mode", "format", "created", "sources"}
        self._credentials: dict[str, dict] = {}   # full name -> temporary credentials from resolve
        self._prefix = "sc" + uuid.uuid4().hex[:6]  # this session's temporary views, apart from others
        self._temp_views: set[str] = set()          # dropped on close: they hold what this caller may read
        self._locations: UrlTrie[dict] = UrlTrie()  # storage location read -> {"name", "securable_type"}: lineage

    def close(self) -> None:
        # The Spark session may outlive this one and serve another caller: leave none of our views.
        for name in self._temp_views:
            self.spark.catalog.dropTempView(name)
        self._temp_views.clear()
        self.delta.close()
        self.catalog.close()

    def __enter__(self) -> "Shardcat":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- SQL ----------------------------------------------------------------------------------

    def sql(self, query: str) -> DataFrame:
        """Run `query`, whose three-part names are catalog tables and views, as the catalog allows."""
        try:
            tables, functions = sql_references(query, None, None, query=True)
        except ValueError as e:
            raise CatalogError("INVALID_PARAMETER_VALUE", f"The query does not parse: {e}") from None
        tables = [t for t in tables if t.split(".")[0] not in ("spark_catalog", "global_temp")]
        if not tables and not functions:
            return self.spark.sql(query)
        wanted = [("TABLE", t, "READ") for t in tables] + [("FUNCTION", f, "READ") for f in functions]
        answered = self.catalog.resolve(wanted)
        entries: list[tuple[str, Resolved]] = [(n, answered[(k, n)]) for k, n, _ in wanted]
        funcs = self._functions(entries)
        views: dict[str, str] = {}
        for name, r in entries:
            for dep in r.dependencies:
                if "table" in dep:
                    self._register(dep["table"], views, funcs)
            if "table" in r.item:
                self._register(r.item["table"], views, funcs)
                self.reads[name] = self.reads.get(name, 0) + 1
        try:
            rewritten = sqlrewrite.rewrite(query, views, funcs)
        except ValueError as e:
            raise CatalogError("INVALID_PARAMETER_VALUE", str(e)) from None
        except KeyError as e:
            raise CatalogError("NOT_FOUND", f"The catalog returned no function {e}.", name=e.args[0]) from None
        return self.spark.sql(rewritten)

    def _functions(self, entries: list[tuple[str, Resolved]]) -> dict[str, dict]:
        """Check every answered item and dependency (refusal -> CatalogError naming it); the
        catalog functions among them by full name."""
        funcs = {}
        for name, r in entries:
            for entry in [*r.dependencies, r.item]:
                refused = _refusal(entry)
                if refused:
                    culprit = entry.get("name", name)
                    where = "" if culprit == name else f" (needed by '{name}')"
                    raise CatalogError(refused[0], f"{refused[1]}{where}", name=culprit)
                if "function" in entry:
                    funcs[entry["function"]["full_name"]] = entry["function"]
                self._remember_credentials(entry)
        return funcs

    def _remember_credentials(self, entry: dict) -> None:
        cred = credentials_of(entry)
        if cred and entry.get("name"):
            self._credentials[entry["name"].lower()] = cred

    def _register(self, table: dict, views: dict[str, str], funcs: dict[str, dict]) -> None:
        """A temporary view for one catalog table or view (its dependencies already registered)."""
        full = table["full_name"]
        if full in views:
            return
        name = f"{self._prefix}_" + re.sub(r"\W", "_", full) + "_" + hashlib.sha1(full.encode()).hexdigest()[:8]
        if table.get("table_type") in VIEW_TYPES:
            catalog, schema, _ = full.split(".")
            try:
                sql = sqlrewrite.rewrite(table["view_definition"], views, funcs, catalog=catalog, schema=schema)
            except ValueError as e:
                raise CatalogError("INVALID_PARAMETER_VALUE", f"The SQL of view '{full}' does not parse: {e}",
                                   name=full) from None
            except KeyError as e:
                raise CatalogError("NOT_FOUND", f"View '{full}' calls function {e} which the catalog did not "
                                                "return.", name=full) from None
            df = self.spark.sql(sql)
        else:
            df = self._load(table)
            self._read_from(table.get("storage_location"), full, "TABLE")
        df = self._policies(table, df, funcs)
        df.createOrReplaceTempView(name)
        self._temp_views.add(name)
        views[full] = name

    def _policies(self, table: dict, df: DataFrame, funcs: dict[str, dict]) -> DataFrame:
        """The table's row filter and column masks, applied (they only reach trusted engines)."""
        row_filter = table.get("row_filter") or None
        masks = {c["name"].lower(): c["mask"] for c in table.get("columns") or [] if c.get("mask")}
        if not row_filter and not masks:
            return df

        def call(spec: dict, first: list[str], key: str):
            fn = funcs.get(spec["function_name"].lower())
            if fn is None:
                raise CatalogError("NOT_FOUND", f"The policy function '{spec['function_name']}' of table "
                                                f"'{table['full_name']}' was not returned by the catalog.",
                                   name=spec["function_name"])
            return sqlrewrite.inline(fn, sqlrewrite.column_args(first + list(spec.get(key) or [])))

        # DataFrame operations, not SQL over a temporary view of the raw rows: no name in the Spark
        # session ever holds the unfiltered, unmasked data. The filter sees the raw values.
        if row_filter:
            df = df.filter(F.expr(sqlrewrite.to_spark(call(row_filter, [], "input_column_names"))))
        masked = {col: sqlrewrite.to_spark(call(spec, [col], "using_column_names")) for col, spec in masks.items()}
        return df.select(*[F.expr(masked[c.lower()]).alias(c) if c.lower() in masked else F.col(f"`{c}`")
                           for c in df.columns])

    def _load(self, table: dict) -> DataFrame:
        """A DataFrame over a table's files, with the catalog's schema."""
        fmt = (table.get("data_source_format") or "").upper()
        schema = to_schema(table.get("columns") or [])
        location = table.get("storage_location")
        self._configure_credentials(table)
        if fmt == "DELTA":
            if not is_catalog_managed(table):
                raise CatalogError("INVALID_PARAMETER_VALUE", f"Table '{table['full_name']}' is a Delta table "
                                   "that the catalog does not manage; shardcat.spark reads catalog-managed "
                                   "Delta tables only.", name=table["full_name"])
            return self._load_delta(table, schema)
        if fmt not in FILE_FORMATS or not location:
            raise CatalogError("INVALID_PARAMETER_VALUE", f"Table '{table['full_name']}' has format "
                               f"{fmt or 'none'}; shardcat.spark reads {', '.join(FILE_FORMATS)} and DELTA.",
                               name=table["full_name"])
        if not _exists(location):            # a table created but never written
            return self.spark.createDataFrame([], schema)
        return self._reader(fmt).schema(schema).load(location)

    def _load_delta(self, table: dict, schema) -> DataFrame:
        """A catalog-managed Delta table's live files. A partitioned table's partition values are
        read from the paths when every file sits in the directory its log entry names (what shardcat
        writes); otherwise one read per partition, its values as constants."""
        location = table["storage_location"].rstrip("/")
        partitioned, files = self.delta.files(table)
        if not files:
            return self.spark.createDataFrame([], schema)
        urls = [f"{location}/{path}" for path, _ in files]
        if not partitioned:
            return self.spark.read.schema(schema).parquet(*urls)
        if in_partition_directories(partitioned, files):
            df = self.spark.read.option("basePath", location).schema(schema).parquet(*urls)
            return df.select(*(F.col(f"`{n}`") for n in schema.fieldNames()))
        data_schema = StructType([f for f in schema.fields if f.name not in partitioned])
        by_partition: dict[tuple, list[str]] = {}
        for url, (_, values) in zip(urls, files):
            by_partition.setdefault(tuple(values.get(c) or None for c in partitioned), []).append(url)
        frames = [self.spark.read.schema(data_schema).parquet(*urls).select(*[
                      F.lit(key[partitioned.index(f.name)]).cast(f.dataType).alias(f.name) if f.name in partitioned
                      else F.col(f"`{f.name}`") for f in schema.fields])
                  for key, urls in by_partition.items()]
        return functools.reduce(DataFrame.unionByName, frames)

    def _reader(self, fmt: str):
        reader = self.spark.read.format(fmt.lower())
        return reader.option("header", "true") if fmt == "CSV" else reader

    def _configure_credentials(self, asset: dict) -> None:
        """Temporary S3 credentials the catalog sent with an asset, set for the bucket they are
        scoped to (file:// locations get none). The settings are tested
        (tests/spark/test_spark_credentials.py); a live S3 read is not: a plain pyspark install has
        no S3A filesystem jar."""
        cred = self._credentials.get((asset.get("full_name") or "").lower()) or {}
        aws = cred.get("aws_temp_credentials")
        location = asset.get("storage_location") or ""
        if not aws or not location.startswith("s3"):
            return
        bucket = location.split("/")[2]
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        prefix = f"fs.s3a.bucket.{bucket}."
        # Static keys (an S3-compatible store without STS) come without a session token.
        provider = "TemporaryAWSCredentialsProvider" if aws.get("session_token") else "SimpleAWSCredentialsProvider"
        conf.set(prefix + "aws.credentials.provider", f"org.apache.hadoop.fs.s3a.{provider}")
        conf.set(prefix + "access.key", aws["access_key_id"])
        conf.set(prefix + "secret.key", aws["secret_access_key"])
        conf.set(prefix + "session.token", aws.get("session_token", ""))
        if cred.get("endpoint_url"):     # an S3-compatible store (MinIO, R2): where the keys go
            conf.set(prefix + "endpoint", cred["endpoint_url"])
            conf.set(prefix + "endpoint.region", cred.get("region") or "us-east-1")
            conf.set(prefix + "path.style.access", str(cred.get("path_style_access", True)).lower())

    # ---- reads by name or path ------------------------------------------------------------------

    def table(self, name: str) -> DataFrame:
        """A catalog table or view by name."""
        parts = name.split(".") if isinstance(name, str) else []
        if len(parts) != 3 or not all(parts):
            raise CatalogError("INVALID_PARAMETER_VALUE", f"Invalid table name '{name}': expected the form "
                                                          "catalog.schema.table.", name=name)
        return self.sql(f"SELECT * FROM {_quote(name)}")

    def read_path(self, path: str, format: str | None = None, **options) -> DataFrame:
        """Files under a volume path (`/Volumes/catalog/schema/volume/...`) or a storage URL. A URL is
        resolved to the one table or volume owning it, whose grants decide; a table's format and
        schema apply unless `format` is given."""
        m = _VOLUME_PATH.match(path)
        table = None
        if m:
            volume = f"{m.group(1)}.{m.group(2)}.{m.group(3)}".lower()
            r = self.catalog.resolve([("VOLUME", volume, "READ")])[("VOLUME", volume)]
            self._check(r.item, volume)
            self._remember_credentials(r.item)
            location = engine_path(volume_file_url(r.item["volume"]["storage_location"], m.group(4)))
            self._configure_credentials(r.item["volume"])
            self._read_from(r.item["volume"]["storage_location"], volume, "VOLUME")
        else:
            item = self.catalog.resolve_path(path, "READ")
            self._check(item, path)
            self._remember_credentials(item)
            location = engine_path(path)    # what the catalog checked, not a second reading of `path`
            table = item.get("table")
            if table:
                self._configure_credentials(table)
            owner = table or item.get("volume") or {}
            self._read_from(owner.get("storage_location"), item.get("name"), item.get("securable_type"))
        self.reads[path] = self.reads.get(path, 0) + 1
        fmt = (format or (table or {}).get("data_source_format") or "").upper()
        if not fmt:
            raise CatalogError("INVALID_PARAMETER_VALUE", f"Give the format of the files at '{path}'.", name=path)
        reader = self._reader(fmt).options(**options)
        if table and not format and table.get("columns"):
            reader = reader.schema(to_schema(table["columns"]))
        df = reader.load(location)
        if table and (table.get("row_filter") or any(c.get("mask") for c in table.get("columns") or [])):
            # a trusted engine reading a governed table's files: its policies apply by path too
            name = table["full_name"]
            r = self.catalog.resolve([("TABLE", name, "READ")])[("TABLE", name)]
            funcs = self._functions([(name, r)])
            df = self._policies(table, df, funcs)
        return df

    def volume_location(self, name: str, operation: str = "WRITE") -> str:
        """The storage location of a volume, for writing raw files into it (or reading them)."""
        key = ("VOLUME", name.lower())
        r = self.catalog.resolve([("VOLUME", name, operation)])[key]
        self._check(r.item, name)
        return r.item["volume"]["storage_location"]

    @staticmethod
    def _check(item: dict, name: str) -> None:
        refused = _refusal(item)
        if refused:
            raise CatalogError(refused[0], refused[1], name=item.get("name", name))

    # ---- writes ------------------------------------------------------------------------------

    def write(self, df: DataFrame, name: str, *, mode: str = "append", format: str = "PARQUET",
              partition_by: list[str] | None = None, comment: str | None = None) -> dict:
        """Write `df` to the catalog table `name`. `create` makes a new MANAGED table (the catalog
        allocates its storage; columns from the DataFrame's schema) and fails if it exists; `append`
        and `overwrite` create it when missing. Returns the table as the catalog has it."""
        mode, fmt = mode.lower(), format.upper()
        if mode not in WRITE_MODES:
            raise ValueError(f"mode must be one of {', '.join(WRITE_MODES)}, got {mode!r}.")
        if fmt not in WRITE_FORMATS:
            raise ValueError(f"format must be one of {', '.join(WRITE_FORMATS)}, got {format!r}.")
        key = ("TABLE", name.lower())
        r = self.catalog.resolve([("TABLE", name, "WRITE")], use_cache=False)[key]
        created = False
        err = r.item.get("error")
        if err and err.get("error_code") == "NOT_FOUND" and "depend" not in err.get("message", ""):
            table, created = self._create(df, name, fmt, partition_by or [], comment), True
        else:
            self._check(r.item, name)
            self._remember_credentials(r.item)
            table = r.item["table"]
            if mode == "create":
                raise CatalogError("ALREADY_EXISTS", f"Table '{name}' already exists.", name=name)
            if table.get("table_type") in VIEW_TYPES:
                raise CatalogError("INVALID_PARAMETER_VALUE", f"'{name}' is a view; write to a table.", name=name)
            fmt = (table.get("data_source_format") or "").upper()
            mismatch = same_columns(df.schema, table.get("columns") or [])
            if mismatch:
                raise CatalogError("INVALID_PARAMETER_VALUE", f"Cannot write to '{name}': {mismatch}.", name=name)
        self._configure_credentials(table)
        overwrite = mode == "overwrite" and not created
        parts = [c["name"] for c in sorted(table.get("columns") or [], key=lambda c: c.get("partition_index", 0))
                 if c.get("partition_index") is not None]
        if fmt == "DELTA":
            rel, url = self.delta.data_dir(table)
            df.write.mode("error").partitionBy(*parts).parquet(url)
            self.delta.commit_files(table, rel, parts, overwrite=overwrite)
        else:
            writer = df.write.mode("overwrite" if overwrite else "append").format(fmt.lower())
            if fmt == "CSV":
                writer = writer.option("header", "true")
            if parts:
                writer = writer.partitionBy(*parts)
            writer.save(table["storage_location"])
        self.catalog.forget("TABLE", name)
        self.writes.append({"table": table["full_name"], "mode": mode, "format": fmt, "created": created,
                            "sources": self._report_lineage(df, table["full_name"])})
        return table

    def create_view(self, name: str, sql: str, *, comment: str | None = None, replace: bool = False) -> dict:
        """A catalog view `name` over `sql` (catalog names, as in `sql()`); its columns are what
        Spark makes of the query, so the query must run for this caller first."""
        schema = self.sql(sql).schema
        catalog, schema_name, view = name.split(".")
        if replace:
            try:
                self.catalog.call("DELETE", f"/tables/{name}")
            except CatalogError as e:
                if e.code != "NOT_FOUND":
                    raise
        body = {"name": view, "catalog_name": catalog, "schema_name": schema_name, "table_type": "VIEW",
                "view_definition": sql, "columns": to_columns(schema)}
        if comment is not None:
            body["comment"] = comment
        out = self.catalog.call("POST", "/tables", body)
        self.catalog.forget("TABLE", name)
        return out

    def _create(self, df: DataFrame, name: str, fmt: str, partition_by: list[str], comment: str | None) -> dict:
        if fmt == "DELTA":
            spelled = {f.name.lower(): f.name for f in df.schema.fields}
            created = self.delta.create(name, to_arrow(df.schema), comment,
                                        [spelled.get(p.lower(), p) for p in partition_by])
            return self.catalog.call("GET", f"/tables/{created['full_name']}")
        catalog, schema, table = name.split(".")
        body = {"name": table, "catalog_name": catalog, "schema_name": schema, "table_type": "MANAGED",
                "data_source_format": fmt, "columns": to_columns(df.schema, partition_by)}
        if comment is not None:
            body["comment"] = comment
        return self.catalog.call("POST", "/tables", body)

    # ---- lineage ------------------------------------------------------------------------------

    def _read_from(self, location: str | None, name: str | None, securable_type: str | None) -> None:
        if location and name and securable_type and self._locations.get(location) is None:
            self._locations.insert(location, {"name": name, "securable_type": securable_type, "location": location})

    def _sources(self, df: DataFrame) -> list[dict]:
        """The catalog tables and volumes this session read whose files `df` reads (Spark's
        `inputFiles`: best effort, file-based relations only)."""
        found: dict[str, dict] = {}
        directories = {f.rsplit("/", 1)[0] for f in df.inputFiles()} if self._locations else set()
        for directory in directories:
            try:
                owner = self._locations.owner(directory)
            except InvalidUrl:
                continue
            if owner is not None:
                found[owner[1]["name"]] = owner[1]
        return list(found.values())

    def _report_lineage(self, df: DataFrame, target: str) -> list[str]:
        """Tell the catalog what the write read; the names reported. The data is written by then,
        so a refusal or a failure here is logged, not raised."""
        sources = [s for s in self._sources(df) if s["name"] != target]
        if not sources:
            return []
        try:
            self.catalog.call("POST", "/openlineage/api/v1/lineage", openlineage_event(
                target, sources, self.spark.conf.get("spark.app.name", None) or "spark"))
        except CatalogError as e:
            log.warning("lineage of %s not recorded: %s", target, e)
            return []
        return sorted(s["name"] for s in sources)

    # ---- what the job did ---------------------------------------------------------------------

    def summary(self) -> dict:
        s = self.catalog.stats.as_dict()
        return {"catalog_calls": s["calls"], "resolve_calls": s["resolve_calls"], "cache_hits": s["cache_hits"],
                "unchanged": s["unchanged"],
                "catalog_seconds": round(s["seconds"], 3), "reads": dict(self.reads), "writes": list(self.writes),
                "metastore_version": self.catalog.version}


def _exists(location: str) -> bool:
    try:
        storage = Storage(location)
        return storage.fs.get_file_info(storage.root).type != pafs.FileType.NotFound
    except Exception:   # an unreachable store: let Spark report it
        return True


__all__ = ["connect", "Shardcat", "CatalogError"]


def _dataset_of(source: dict) -> tuple[str, str]:
    """An OpenLineage (namespace, name) for a source: a table by its catalog name, a volume by its
    storage path (the catalog maps a path to the asset owning it)."""
    if source["securable_type"] == "TABLE" or not source.get("location"):
        return "shardcat", source["name"]
    parsed = urllib.parse.urlsplit(source["location"])
    if parsed.scheme == "file":
        return "file", parsed.path
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.lstrip("/")


def openlineage_event(target: str, sources: list[dict], job: str) -> dict:
    """A COMPLETE OpenLineage RunEvent of one write (the catalog's one lineage model, catalog/protocols/openlineage.py)."""
    event = RunEvent(eventType=RunState.COMPLETE, eventTime=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                     run=Run(runId=str(uuid.uuid4())), job=Job(namespace="shardcat.spark", name=job),
                     producer="https://github.com/shardcat/shardcat/spark",
                     inputs=[InputDataset(*_dataset_of(s)) for s in sources],
                     outputs=[OutputDataset("shardcat", target)])
    return json.loads(Serde.to_json(event))
