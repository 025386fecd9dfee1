"""UniForm: Iceberg metadata for a Delta table, written beside its Delta log with pyiceberg.

A Delta table whose `delta.universalFormat.enabledFormats` names `iceberg` (in the catalog's
properties or its Delta log's configuration) gets, for each Delta version, one Iceberg snapshot
whose data files are that version's live Parquet files (nothing is copied), under the table's own
`metadata/` folder as Delta's UniForm places it. Each snapshot's summary carries `delta-version`
and `delta-timestamp`. The Iceberg schema keeps Delta's column-mapping ids where the log has them
(Parquet files written with column mapping carry those field ids) and always names each field in
`schema.name-mapping.default` (by its logical and physical names), so files without field ids
(delta-rs, Spark without column mapping) are read by name. Partition columns become identity
partitions; their values come from the log, as Delta keeps them (readers fill a column that the
file lacks from the partition tuple, as the Iceberg spec allows for identity partitions).

pyiceberg writes every file: its table-metadata model, its snapshot producers (fast append for
appends, overwrite for versions that remove files), manifests and manifest lists through its FileIO.
A conversion is one pyiceberg transaction over a batch of versions, committed by `_Writer` (the
next metadata file, numbered after the previous one). No catalog state and no HTTP here; blocking
(run in a thread).
"""

from __future__ import annotations

import datetime
import json
import uuid
from dataclasses import dataclass

import pyarrow.parquet as pq
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.conversions import to_bytes
from pyiceberg.io import load_file_io
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec, partition_record_value
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadataV2
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AddSchemaUpdate, SetCurrentSchemaUpdate, update_table_metadata
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType, FloatType, IntegerType,
                             ListType, LongType, MapType, NestedField, StringType, StructType, TimestampType,
                             TimestamptzType)

from ..delta import log as dlog
from ..delta import partitions as dparts
from ..delta.replay import Unconvertible, check_actions, commit_timestamp, file_url, stats
from ..entities.urls import InvalidUrl, normalize_url, storage_names
from . import metadata as md

ENABLED_FORMATS = "delta.universalFormat.enabledFormats"
DELTA_VERSION = "delta-version"          # each snapshot's summary: the Delta version it is
DELTA_TIMESTAMP = "delta-timestamp"
NAME_MAPPING = "schema.name-mapping.default"
# Past this many versions behind, one snapshot catches up (the versions between get none): a
# conversion's work is bounded by the table's live files, not by its history.
MAX_VERSIONS_PER_RUN = 100
_PARTITION_IDS = 1000                    # Iceberg's first partition field id


def enabled(properties: dict | None) -> bool:
    """Whether `delta.universalFormat.enabledFormats` names iceberg (a comma-separated list)."""
    value = (properties or {}).get(ENABLED_FORMATS)
    return isinstance(value, str) and "iceberg" in [v.strip().lower() for v in value.split(",")]


# ---- schemas ------------------------------------------------------------------------------

_PRIMITIVES = {"string": StringType(), "long": LongType(), "integer": IntegerType(), "short": IntegerType(),
               "byte": IntegerType(), "float": FloatType(), "double": DoubleType(), "boolean": BooleanType(),
               "binary": BinaryType(), "date": DateType(), "timestamp": TimestamptzType(),
               "timestamp_ntz": TimestampType()}


class _Ids:
    """Field ids: Delta's column-mapping id where the log has one, the id a same-named field had in
    the previous Iceberg schema, else the next free one."""

    def __init__(self, previous: dict[str, int], used: int):
        self.previous, self.next = previous, used + 1

    def fresh(self) -> int:
        self.next += 1
        return self.next - 1

    def of(self, path: str, field: dict) -> int:
        given = (field.get("metadata") or {}).get("delta.columnMapping.id")
        if isinstance(given, int):
            return given
        return self.previous.get(path) or self.fresh()


def _max_mapping_id(fields: list) -> int:
    top = 0
    for f in fields:
        given = (f.get("metadata") or {}).get("delta.columnMapping.id")
        top = max(top, given if isinstance(given, int) else 0)
        inner = f.get("type")
        if isinstance(inner, dict) and inner.get("type") == "struct":
            top = max(top, _max_mapping_id(inner["fields"]))
    return top


def _type(delta, path: str, ids: _Ids, mapping: list) -> object:
    """(Iceberg type of a Delta type); nested fields' mappings appended to `mapping`."""
    if isinstance(delta, str):
        if delta in _PRIMITIVES:
            return _PRIMITIVES[delta]
        if delta.startswith("decimal(") and delta.endswith(")"):
            precision, scale = (int(x) for x in delta[8:-1].split(","))
            return DecimalType(precision, scale)
        raise Unconvertible(f"Delta type '{delta:.60}' has no Iceberg type here")
    kind = delta.get("type")
    if kind == "struct":
        return StructType(*_fields(delta["fields"], path, ids, mapping))
    if kind == "array":
        element_id, inner = ids.fresh(), []
        element = _type(delta["elementType"], f"{path}.element", ids, inner)
        mapping.append({"field-id": element_id, "names": ["element"], "fields": inner})
        return ListType(element_id, element, element_required=not delta.get("containsNull", True))
    if kind == "map":
        key_id, value_id, key_map, value_map = ids.fresh(), ids.fresh(), [], []
        key = _type(delta["keyType"], f"{path}.key", ids, key_map)
        value = _type(delta["valueType"], f"{path}.value", ids, value_map)
        mapping += [{"field-id": key_id, "names": ["key"], "fields": key_map},
                    {"field-id": value_id, "names": ["value"], "fields": value_map}]
        return MapType(key_id, key, value_id, value, value_required=not delta.get("valueContainsNull", True))
    raise Unconvertible(f"Delta type {json.dumps(delta)[:60]} has no Iceberg type here")


def _fields(fields: list, prefix: str, ids: _Ids, mapping: list) -> list[NestedField]:
    out = []
    for f in fields:
        path = f"{prefix}.{f['name']}" if prefix else f["name"]
        field_id, inner = ids.of(path, f), []
        field_type = _type(f["type"], path, ids, inner)
        names = [f["name"]]
        physical = (f.get("metadata") or {}).get("delta.columnMapping.physicalName")
        if isinstance(physical, str) and physical != f["name"]:
            names.append(physical)
        mapping.append({"field-id": field_id, "names": names, "fields": inner})
        out.append(NestedField(field_id, f["name"], field_type, required=not f.get("nullable", True)))
    return out


def _paths(schema: Schema) -> dict[str, int]:
    return {name: field_id for field_id, name in schema._lazy_id_to_name.items()}


def iceberg_schema(schema_string: str, schema_id: int, previous: Schema | None,
                   last_column_id: int) -> tuple[Schema, str]:
    """(the Iceberg schema of a Delta schema, its name mapping as JSON)."""
    fields = json.loads(schema_string)["fields"]
    ids = _Ids(_paths(previous) if previous is not None else {}, max(last_column_id, _max_mapping_id(fields)))
    mapping: list = []
    schema = Schema(*_fields(fields, "", ids, mapping), schema_id=schema_id)
    return schema, json.dumps(mapping)


def _physical(schema_string: str) -> dict[str, str]:
    """Top-level column name -> the name its statistics and Parquet column carry."""
    out = {}
    for f in json.loads(schema_string)["fields"]:
        out[f["name"]] = (f.get("metadata") or {}).get("delta.columnMapping.physicalName") or f["name"]
    return out


def partition_spec(schema: Schema, partition_columns: list[str]) -> PartitionSpec:
    return PartitionSpec(*[PartitionField(source_id=schema.find_field(name).field_id, field_id=_PARTITION_IDS + i,
                                          transform=IdentityTransform(), name=name)
                           for i, name in enumerate(partition_columns)])


# ---- data files -----------------------------------------------------------------------------

_BOUNDED = (IntegerType, LongType, DateType, BooleanType)     # Delta's min/max are exact for these


def _stat_value(field_type, value):
    if isinstance(field_type, DateType):
        return (datetime.date.fromisoformat(value) - datetime.date(1970, 1, 1)).days
    return value


@dataclass
class _Table:
    """What the data files of one Delta metadata need: its location, schema and partitioning."""
    location: str
    storage: dlog.Storage
    schema: Schema
    spec: PartitionSpec
    delta_types: dict[str, str]
    physical: dict[str, str]


def _plain_url(url: str) -> str:
    """A canonical storage URL as readers open it: each name decoded (pyiceberg and DuckDB do not decode)."""
    head, names = storage_names(url)
    return head + "/" + "/".join(names)


def data_file(t: _Table, add: dict, *, removed: bool = False) -> DataFile:
    """The Iceberg data file of a live Delta file (`removed`: one a version removes, which may be gone
    from storage: only its path, partition and counts matter)."""
    url = file_url(t.location, add.get("path"))
    found = stats(add)
    rows = found.get("numRecords")
    if not isinstance(rows, int) and removed:
        rows = 0
    elif not isinstance(rows, int):          # no statistics in the log: the file's footer has the count
        head, names = storage_names(url)
        _, root = storage_names(t.location)
        with t.storage.fs.open_input_file(t.storage.path("/".join(names[len(root):]))) as f:
            rows = pq.read_metadata(f).num_rows
    values = add.get("partitionValues") or {}      # keyed by physical name under column mapping
    partition = [partition_record_value(pf, dparts.parse(values.get(t.physical.get(pf.name, pf.name),
                                                                    values.get(pf.name)) or None,
                                                         t.delta_types[pf.name]), t.schema)
                 for pf in t.spec.fields]
    lower, upper, nulls = {}, {}, {}
    for field in t.schema.fields:
        key = t.physical.get(field.name, field.name)
        if isinstance((found.get("nullCount") or {}).get(key), int):
            nulls[field.field_id] = found["nullCount"][key]
        if not isinstance(field.field_type, _BOUNDED):
            continue
        for bounds, side in ((lower, "minValues"), (upper, "maxValues")):
            value = (found.get(side) or {}).get(key)
            if value is not None:
                try:
                    bounds[field.field_id] = to_bytes(field.field_type, _stat_value(field.field_type, value))
                except (ValueError, TypeError, OverflowError):
                    pass        # a statistic that does not fit its type is left out, never guessed
    out = DataFile.from_args(
        content=DataFileContent.DATA, file_path=_plain_url(url), file_format=FileFormat.PARQUET,
        partition=Record(*partition), record_count=rows, file_size_in_bytes=int(add.get("size") or 0),
        null_value_counts=nulls or None, lower_bounds=lower or None, upper_bounds=upper or None)
    out.spec_id = t.spec.spec_id
    return out


# ---- committing -----------------------------------------------------------------------------


class _Writer(NoopCatalog):
    """pyiceberg's catalog interface for one conversion: a commit writes the next metadata file."""

    def __init__(self, io: dict):
        super().__init__("uniform", **io)
        self.io = io

    def commit_table(self, table, requirements, updates):
        for requirement in requirements:
            requirement.validate(table.metadata)
        new = update_table_metadata(table.metadata, updates)
        previous = table.metadata_location or None
        location = md.next_location(new, previous)
        md.write_metadata(new, location, self.io)
        return CommitTableResponse(metadata=new, metadata_location=location)


@dataclass
class Converted:
    metadata_location: str
    delta_version: int
    delta_timestamp: int | None


def _new_metadata(location: str, table_uuid: str, state: dlog.TableState) -> TableMetadataV2:
    schema, mapping = iceberg_schema(state.metadata["schemaString"], 0, None, 0)
    spec = partition_spec(schema, state.partition_columns)
    return TableMetadataV2(
        location=location, table_uuid=uuid.UUID(table_uuid), last_updated_ms=dlog.now_ms(),
        last_column_id=schema.highest_field_id, schemas=[schema], current_schema_id=0,
        partition_specs=[spec], default_spec_id=0, last_partition_id=max(
            [f.field_id for f in spec.fields], default=_PARTITION_IDS - 1),
        properties={NAME_MAPPING: mapping, "format": "delta-uniform"}, sort_orders=[UNSORTED_SORT_ORDER],
        default_sort_order_id=0)


class _Run:
    """One conversion: a pyiceberg transaction that gets one snapshot per Delta version."""

    def __init__(self, table: Table, location: str, storage: dlog.Storage, delta_metadata: dict):
        self.table, self.location, self.storage = table, location, storage
        self.tx = table.transaction()
        self.partition_columns = list(delta_metadata.get("partitionColumns") or [])
        self._describe(delta_metadata)

    def _describe(self, delta_metadata: dict) -> None:
        meta = self.tx.table_metadata
        self.t = _Table(self.location, self.storage, meta.schema(), meta.spec(),
                        {f["name"]: f["type"] for f in json.loads(delta_metadata["schemaString"])["fields"]},
                        _physical(delta_metadata["schemaString"]))

    def metadata(self, delta_metadata: dict) -> None:
        """A version's new Delta metadata: a new current schema when the columns changed."""
        if list(delta_metadata.get("partitionColumns") or []) != self.partition_columns:
            raise Unconvertible("its partition columns changed; Iceberg metadata is not rewritten for that")
        meta = self.tx.table_metadata
        schema, mapping = iceberg_schema(delta_metadata["schemaString"], max(s.schema_id for s in meta.schemas) + 1,
                                         meta.schema(), meta.last_column_id)
        if schema.as_struct() != meta.schema().as_struct():
            self.tx._apply((AddSchemaUpdate(schema_=schema), SetCurrentSchemaUpdate(schema_id=-1)))
            self.tx.set_properties({NAME_MAPPING: mapping})
        self._describe(delta_metadata)

    def snapshot(self, version: int, when: int | None, added: list[dict], removed: list[dict]) -> None:
        if not added and not removed:
            return          # a version that changes no file (metadata, protocol) gets no snapshot
        props = {DELTA_VERSION: str(version)}
        if when is not None:
            props[DELTA_TIMESTAMP] = str(when)
        update = self.tx.update_snapshot(snapshot_properties=props)
        with (update.overwrite() if removed else update.fast_append()) as op:
            for add in added:
                op.append_data_file(data_file(self.t, add))
            for gone in removed:
                op.delete_data_file(data_file(self.t, gone, removed=True))

    def commit(self) -> str:
        return self.tx.commit_transaction().metadata_location


def convert(location: str, storage: dlog.Storage, table_uuid: str, previous: str | None,
            since: dlog.TableState, versions: list[tuple[int, list[dict]]], io: dict) -> Converted:
    """Iceberg metadata up to the last of `versions` (each (version, actions), in order).

    `previous`: the metadata file of the last conversion, whose newest snapshot is `since`'s version;
    None for a first conversion, which gets one snapshot of `since` (the table as it is) first.
    Unconvertible for what Iceberg metadata made here cannot say."""
    for f in since.files.values():
        check_actions(location, [{"add": f}])
    for _, actions in versions:
        check_actions(location, actions)
    writer = _Writer(io)
    file_io = load_file_io(io, location)
    last = md.read_metadata(previous, io) if previous is not None else None
    if last is not None and not _located(last, location):
        # The file lies in the table's metadata/, which its Delta writers reach: one naming another location
        # was changed there, and would have this conversion write into that place. Begin again from `since`.
        previous = last = None
    if last is None:
        meta = _new_metadata(location, table_uuid, since)
        table = Table(("uniform", table_uuid), meta, "", file_io, writer)
    else:
        table = Table(("uniform", table_uuid), last, previous, file_io, writer)
    run = _Run(table, location, storage, since.metadata)
    version, when = since.version, since.ict or None
    if previous is None:
        run.snapshot(since.version, when, list(since.files.values()), [])
    live = dict(since.files)
    for version, actions in versions:
        when = commit_timestamp(actions)
        for a in actions:
            if "metaData" in a:
                run.metadata(a["metaData"])
        added = {a["add"]["path"]: a["add"] for a in actions if "add" in a}
        removed = [live[a["remove"]["path"]] for a in actions
                   if "remove" in a and a["remove"]["path"] in live and a["remove"]["path"] not in added]
        replaced = [live[p] for p in added if p in live]          # re-added: the old entry goes first
        for p in [r["path"] for r in removed]:
            live.pop(p, None)
        live.update(added)
        run.snapshot(version, when, list(added.values()), removed + replaced)
    if not run.tx._updates:
        if previous is None:        # an empty table: metadata without a snapshot still says it is there
            return Converted(_write_first(table, writer), version, when)
        return Converted(previous, version, when)
    return Converted(run.commit(), version, when)


def _located(metadata, location: str) -> bool:
    try:
        return normalize_url(metadata.location) == normalize_url(location)
    except InvalidUrl:
        return False


def _write_first(table: Table, writer: _Writer) -> str:
    location = md.next_location(table.metadata, None)
    md.write_metadata(table.metadata, location, writer.io)
    return location


def catch_up(before: dlog.TableState, after: dlog.TableState) -> list[dict]:
    """One version's actions taking `before`'s files to `after`'s (past MAX_VERSIONS_PER_RUN)."""
    actions = [{"metaData": after.metadata}] if after.metadata != before.metadata else []
    actions += [{"remove": f} for p, f in before.files.items() if after.files.get(p) != f]
    actions += [{"add": f} for p, f in after.files.items() if before.files.get(p) != f]
    return actions
