"""The Delta transaction log, as the client reads and writes it: file names, actions, schemas,
JSON commits, classic single-file Parquet checkpoints, and replay into a table state.

Files go through `pyarrow.fs`, so a table location may be any URI pyarrow opens (file://, s3://, abfss://,
gs://).
Only what shardcat's client writes is supported: partitions (shardcat/delta/partitions.py), no
deletion vectors.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..entities.urls import adls_parts, normalize_url, storage_names
from ..entities.values import now_ms
from ..web import store_endpoints
from .partitions import check_partition_columns

LOG_DIR = "_delta_log"
STAGED_DIR = "_delta_log/_staged_commits"
ENGINE = "shardcat-delta/0.1"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")


def commit_file(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


def staged_file_name(version: int) -> str:
    return f"{version:020d}.{uuid.uuid4()}.json"


def checkpoint_file(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.checkpoint.parquet"


# ---- storage ------------------------------------------------------------------------


class Storage:
    """A table's files under its location."""

    def __init__(self, location: str, credentials: dict | None = None):
        """`credentials`: a TemporaryCredentials answer the catalog vended for the location; with
        `aws_temp_credentials` the files are opened with those keys, at its `endpoint_url` if it
        names one (an S3-compatible store); with `azure_user_delegation_sas`, with that SAS (at its
        `endpoint_url`, an emulator's, if it names one). Without, pyarrow's own configuration applies."""
        # The catalog's canonical form, decoded where the catalog decodes it (entities/urls.py), so the
        # files touched are the ones the catalog's rules were checked on; other spellings are refused.
        self.location = normalize_url(location)
        head, names = storage_names(self.location)
        aws = (credentials or {}).get("aws_temp_credentials")
        if aws and head.startswith("s3"):
            self.fs, base = vended_s3(credentials), head.split("://", 1)[1]
        elif (credentials or {}).get("azure_user_delegation_sas") and head.startswith("abfss"):
            self.fs, base = vended_azure(credentials), adls_parts(self.location)[1]      # the container
        elif head.startswith("gs://"):
            # Only with a vended token: pyarrow's own Google credentials would ask the VM metadata
            # server, an address the catalog does not call.
            if not (credentials or {}).get("gcp_oauth_token"):
                raise ValueError(f"'{self.location}' is read with credentials vended for it, and none were given")
            self.fs, base = vended_gcs(credentials), head.split("://", 1)[1]
        else:
            self.fs, base = pafs.FileSystem.from_uri("file:///" if head == "file://" else head)
        self.root = "/".join([base.rstrip("/"), *names]) if names else base

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def read(self, relative: str) -> bytes:
        with self.fs.open_input_stream(self.path(relative)) as f:
            return f.read()

    def exists(self, relative: str) -> bool:
        return self.fs.get_file_info(self.path(relative)).type == pafs.FileType.File

    def write(self, relative: str, data: bytes) -> None:
        """Write whole: to a temporary name, then rename, so readers never see a partial file."""
        target = self.path(relative)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        tmp = f"{target.rsplit('/', 1)[0]}/.tmp-{uuid.uuid4()}"
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        self.fs.move(tmp, target)

    def delete(self, relative: str) -> None:
        try:
            self.fs.delete_file(self.path(relative))
        except (FileNotFoundError, OSError):
            pass

    def mtime_ms(self, relative: str) -> int:
        info = self.fs.get_file_info(self.path(relative))
        return int(info.mtime_ns // 1_000_000) if info.mtime_ns else now_ms()

    def list_log(self) -> tuple[set[int], set[int]]:
        """The versions of published JSON commits and of single-file checkpoints in _delta_log."""
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.path(LOG_DIR), allow_not_found=True))
        except FileNotFoundError:
            return set(), set()
        commits, checkpoints = set(), set()
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            if m := _COMMIT.match(info.base_name):
                commits.add(int(m.group(1)))
            elif m := _CHECKPOINT.match(info.base_name):
                checkpoints.add(int(m.group(1)))
        return commits, checkpoints


def vended_s3(credentials: dict) -> pafs.S3FileSystem:
    """pyarrow's S3 file system for a TemporaryCredentials answer (shardcat's vended answers
    add `endpoint_url`, `region` and `path_style_access` for S3-compatible stores)."""
    aws = credentials["aws_temp_credentials"]
    options = {"access_key": aws["access_key_id"], "secret_key": aws["secret_access_key"],
               "session_token": aws.get("session_token") or None}
    endpoint = credentials.get("endpoint_url")
    if endpoint:
        # a store's endpoint is its credential creator's choice: public or listed only, pinned to the address
        # vetted now (web/store_endpoints.py), since the maintenance jobs read and delete through this
        path_style = credentials.get("path_style_access", True)
        scheme, _, host = store_endpoints.connect_url(endpoint, path_style=path_style).partition("://")
        options.update(endpoint_override=host, scheme=scheme, region=credentials.get("region") or "us-east-1",
                       force_virtual_addressing=not path_style)
    # Small files in one PutObject rather than a multipart upload (fewer requests; some
    # S3-compatible stores, moto among them, fail pyarrow's multipart completion).
    return pafs.S3FileSystem(**options, allow_delayed_open=True)


def vended_azure(credentials: dict) -> pafs.AzureFileSystem:
    """pyarrow's Azure file system for a vended SAS answer; an `endpoint_url` (an emulator's
    http://host:port/account) becomes its blob and DFS authority and scheme."""
    account = adls_parts(credentials["url"])[0]
    sas = credentials["azure_user_delegation_sas"]["sas_token"]
    options = {"account_name": account, "sas_token": sas if sas.startswith("?") else "?" + sas}  # Arrow appends it as is
    endpoint = credentials.get("endpoint_url")
    if endpoint:
        scheme, _, rest = endpoint.partition("://")
        host = rest.split("/", 1)[0]
        options.update(blob_storage_authority=host, dfs_storage_authority=host, blob_storage_scheme=scheme,
                       dfs_storage_scheme=scheme)
    return pafs.AzureFileSystem(**options)


def vended_gcs(credentials: dict) -> pafs.GcsFileSystem:
    """pyarrow's GCS file system for a vended OAuth token; an `endpoint_url` (an emulator's
    http://host:port) becomes its endpoint and scheme."""
    options = {"access_token": credentials["gcp_oauth_token"]["oauth_token"],
               "credential_token_expiration": datetime.fromtimestamp(credentials["expiration_time"] / 1000,
                                                                     tz=timezone.utc)}
    endpoint = credentials.get("endpoint_url")
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        options.update(scheme=scheme, endpoint_override=host)
    return pafs.GcsFileSystem(**options)


# ---- actions --------------------------------------------------------------------------


def encode_actions(actions: list[dict]) -> bytes:
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()


def decode_actions(data: bytes | str) -> list[dict]:
    text = data.decode() if isinstance(data, bytes) else data
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def commit_info(ict: int, operation: str, parameters: dict | None = None, *, blind_append: bool = False,
                read_version: int | None = None) -> dict:
    """The first action of every commit: in-commit timestamp and a unique txnId, as catalog-managed tables require."""
    info = {"inCommitTimestamp": ict, "timestamp": ict, "operation": operation,
            "operationParameters": parameters or {}, "isBlindAppend": blind_append,
            "txnId": str(uuid.uuid4()), "engineInfo": ENGINE}
    if read_version is not None:
        info["readVersion"] = read_version
    return {"commitInfo": info}


def protocol(catalog_managed: bool) -> dict:
    if catalog_managed:
        # vacuumProtocolCheck: Delta Kernel (DuckDB's delta extension) writes to a catalog-managed table
        # only if it has the feature, so that old VACUUMs cannot run on it.
        return {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                             "readerFeatures": ["catalogManaged", "vacuumProtocolCheck"],
                             "writerFeatures": ["catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"]}}
    return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}}


def metadata(table_id: str, schema: pa.Schema, configuration: dict, *, partition_columns=(),
             description: str | None = None, created: int | None = None) -> dict:
    """A metaData action; ValueError for partition columns the schema cannot have."""
    delta = delta_schema(schema)
    partition_columns = check_partition_columns({f["name"]: f["type"] for f in delta["fields"]}, partition_columns)
    md = {"id": table_id, "format": {"provider": "parquet", "options": {}},
          "schemaString": json.dumps(delta), "partitionColumns": partition_columns,
          "configuration": dict(configuration), "createdTime": created or now_ms()}
    if description is not None:
        md["description"] = description
    return {"metaData": md}


def add(path: str, size: int, rows: int, modified: int, partition_values: dict | None = None) -> dict:
    return {"add": {"path": path, "partitionValues": partition_values or {}, "size": size, "modificationTime": modified,
                    "dataChange": True, "stats": json.dumps({"numRecords": rows})}}


def write_data_file(storage: Storage, directory: str, data: pa.Table, partition_values: dict) -> dict:
    """One new Parquet data file under the table's root (in `directory`, "" or ending in "/"); its add action."""
    path = f"{directory}part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    if directory:
        storage.fs.create_dir(storage.path(directory.rstrip("/")), recursive=True)
    with storage.fs.open_output_stream(storage.path(path)) as f:
        pq.write_table(data, f, compression="snappy")
    size = storage.fs.get_file_info(storage.path(path)).size
    return add(path, size, data.num_rows, storage.mtime_ms(path), partition_values)


def remove(added: dict, when: int) -> dict:
    """The remove action of a live file (its add action's fields)."""
    return {"remove": {"path": added["path"], "deletionTimestamp": when, "dataChange": True,
                       "extendedFileMetadata": True, "partitionValues": added.get("partitionValues") or {},
                       "size": added.get("size")}}


# ---- schemas ----------------------------------------------------------------------------

_TO_DELTA = [
    (pa.types.is_boolean, "boolean"), (pa.types.is_int8, "byte"), (pa.types.is_int16, "short"),
    (pa.types.is_int32, "integer"), (pa.types.is_int64, "long"), (pa.types.is_float32, "float"),
    (pa.types.is_float64, "double"), (pa.types.is_string, "string"), (pa.types.is_large_string, "string"),
    (pa.types.is_binary, "binary"), (pa.types.is_date32, "date"),
]
_TO_ARROW = {
    "boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(),
    "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
}
_UC_TYPE = {"boolean": "BOOLEAN", "byte": "BYTE", "short": "SHORT", "integer": "INT", "long": "LONG",
            "float": "FLOAT", "double": "DOUBLE", "string": "STRING", "binary": "BINARY", "date": "DATE",
            "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ"}


def _delta_type(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    for test, name in _TO_DELTA:
        if test(t):
            return name
    raise ValueError(f"Arrow type {t} has no Delta type in this client (primitive types only).")


def delta_schema(schema: pa.Schema) -> dict:
    return {"type": "struct", "fields": [
        {"name": f.name, "type": _delta_type(f.type), "nullable": f.nullable, "metadata": {}} for f in schema]}


def arrow_schema(schema_string: str) -> pa.Schema:
    fields = json.loads(schema_string)["fields"]
    return pa.schema([pa.field(f["name"], _TO_ARROW[f["type"]], f.get("nullable", True)) for f in fields])


def uc_columns(schema_string: str, partition_columns=()) -> list[dict]:
    """The Unity Catalog ColumnInfo list of a Delta schema (partition columns carry `partition_index`)."""
    fields = json.loads(schema_string)["fields"]
    partition_index = {name: i for i, name in enumerate(partition_columns)}
    columns = [{"name": f["name"], "type_name": _UC_TYPE[f["type"]], "type_text": f["type"],
                "type_json": json.dumps(f), "position": i, "nullable": f.get("nullable", True)}
               for i, f in enumerate(fields)]
    for c in columns:
        if c["name"] in partition_index:
            c["partition_index"] = partition_index[c["name"]]
    return columns


# ---- replay ------------------------------------------------------------------------------


@dataclass
class TableState:
    """Protocol, metadata and live files after replaying the log up to `version`."""
    version: int = -1
    protocol: dict | None = None
    metadata: dict | None = None
    files: dict[str, dict] = field(default_factory=dict)    # path -> add action
    ict: int = 0                                              # latest in-commit timestamp

    def apply(self, version: int, actions: list[dict]) -> None:
        for a in actions:
            if "add" in a:
                self.files[a["add"]["path"]] = a["add"]
            elif "remove" in a:
                self.files.pop(a["remove"]["path"], None)
            elif "metaData" in a:
                self.metadata = a["metaData"]
            elif "protocol" in a:
                self.protocol = a["protocol"]
            elif "commitInfo" in a:
                self.ict = a["commitInfo"].get("inCommitTimestamp", self.ict)
        self.version = version

    @property
    def schema(self) -> pa.Schema:
        return arrow_schema(self.metadata["schemaString"])

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.get("partitionColumns") or [])

    def delta_types(self) -> dict[str, str]:
        """Column name -> Delta type name."""
        return {f["name"]: f["type"] for f in json.loads(self.metadata["schemaString"])["fields"]}


# ---- checkpoints ---------------------------------------------------------------------------

_MAP = pa.map_(pa.string(), pa.string())
CHECKPOINT_SCHEMA = pa.schema([
    ("protocol", pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                            ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))])),
    ("metaData", pa.struct([("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
                            ("format", pa.struct([("provider", pa.string()), ("options", _MAP)])),
                            ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                            ("configuration", _MAP), ("createdTime", pa.int64())])),
    ("add", pa.struct([("path", pa.string()), ("partitionValues", _MAP), ("size", pa.int64()),
                       ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string())])),
    ("remove", pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_())])),
])


def _as_map(d: dict | None):
    return list((d or {}).items())


def write_checkpoint(storage: Storage, state: TableState) -> None:
    """A classic single-file checkpoint of a published version, and _last_checkpoint pointing at it."""
    md = state.metadata
    rows = [{"protocol": state.protocol},
            {"metaData": {**md, "format": {**md["format"], "options": _as_map(md["format"].get("options"))},
                          "configuration": _as_map(md.get("configuration"))}}]
    rows += [{"add": {**a, "partitionValues": _as_map(a.get("partitionValues"))}} for a in state.files.values()]
    table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    storage.write(checkpoint_file(state.version), sink.getvalue().to_pybytes())
    storage.write(f"{LOG_DIR}/_last_checkpoint",
                  json.dumps({"version": state.version, "size": len(rows)}).encode())


def read_checkpoint(storage: Storage, version: int) -> TableState:
    with storage.fs.open_input_file(storage.path(checkpoint_file(version))) as f:
        rows = pq.read_table(f).to_pylist()
    state = TableState()
    for row in rows:
        if row.get("protocol"):
            state.protocol = {k: v for k, v in row["protocol"].items() if v is not None}
        if row.get("metaData"):
            md = dict(row["metaData"])
            md["format"] = {**md["format"], "options": dict(md["format"]["options"] or [])}
            md["configuration"] = dict(md["configuration"] or [])
            state.metadata = {k: v for k, v in md.items() if v is not None}
        if row.get("add"):
            a = dict(row["add"])
            a["partitionValues"] = dict(a["partitionValues"] or [])
            state.files[a["path"]] = a
    state.version = version
    return state
