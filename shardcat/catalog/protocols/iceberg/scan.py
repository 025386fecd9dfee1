"""A table scan planned on the server, with pyiceberg's own planner: the request read, the files pruned, the tasks as JSON.

`plan_files` runs pyiceberg's DataScan over the table's manifests (its partition evaluator and its
column-metrics evaluator drop the files the filter cannot match), in a worker thread; `task_pages`
turns its FileScanTasks into the spec's FileScanTask / DeleteFile JSON, a page of them at a time
(each page lists the delete files its tasks refer to). No metadata is parsed here by hand: the request
is pyiceberg's PlanTableScanRequest, the files are its DataFile objects, and the bounds are decoded
by its conversions.
"""

from __future__ import annotations

import datetime
import decimal
import uuid

from pydantic import ValidationError
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest
from pyiceberg.conversions import from_bytes
from pyiceberg.io import load_file_io
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from ....iceberg.confined import outside, own_location

PAGE_TASKS = 1000          # file scan tasks in one answer; a larger plan hands out the rest as plan tasks


class BadScan(ValueError):
    """A scan request that cannot be planned as asked (its message names why): a 400."""


class UnsupportedScan(ValueError):
    """A scan the catalog does not plan (an incremental scan): the spec's 406."""


_FIELD_TYPES = {"case-sensitive": "a boolean", "use-snapshot-schema": "a boolean", "snapshot-id": "an integer",
                "start-snapshot-id": "an integer", "end-snapshot-id": "an integer", "min-rows-requested": "an integer",
                "select": "a list of strings", "stats-fields": "a list of strings", "filter": "an expression"}


def _is(value, kind: str) -> bool:
    if kind == "a boolean":
        return isinstance(value, bool)
    if kind == "an integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "a list of strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, (dict, bool))          # an expression: an object, or true/false


def scan_request(body: dict) -> PlanTableScanRequest:
    """The request, read by pyiceberg's model (its filter parsed into pyiceberg's expressions)."""
    if not isinstance(body, dict):
        raise BadScan("The request must be a PlanTableScanRequest object.")
    # pydantic's lax mode would read "no" as false and "7" as 7: the spec's types, strictly.
    for name, kind in _FIELD_TYPES.items():
        value = body.get(name)
        if value is not None and not _is(value, kind):
            raise BadScan(f"Field '{name}' must be {kind}.")
    try:
        request = PlanTableScanRequest.model_validate(body)
    except (ValidationError, TypeError, ValueError) as e:      # an unknown expression type raises TypeError
        raise BadScan(f"Invalid scan request: {str(e).splitlines()[0][:300]}") from None
    if request.start_snapshot_id is not None or request.end_snapshot_id is not None:
        raise UnsupportedScan("Incremental scans (start-snapshot-id, end-snapshot-id) are not planned on the "
                              "server here; plan them on the client.")
    return request


def plan_files(metadata, metadata_location: str, io_properties: dict, request: PlanTableScanRequest,
               table_location: str | None) -> list:
    """pyiceberg's FileScanTasks for the request (blocking: run it in a worker thread), over the table at
    `table_location` (canonical: the catalog's record, not the metadata file's say)."""
    if table_location is None:          # a foreign table whose storage is not served here
        raise BadScan("The table's storage is not served by this catalog: its scan is not planned here.")
    own_location(metadata, table_location)
    io = load_file_io(io_properties, metadata_location)
    table = Table(("planned",), metadata, metadata_location, io, None)      # no catalog: planned locally, here
    schema = metadata.schema()
    unknown = sorted(n for n in request.select or [] if not _has(schema, n, request.case_sensitive))
    if unknown:
        raise BadScan(f"Unknown fields in 'select': {unknown}.")
    if request.snapshot_id is not None and metadata.snapshot_by_id(request.snapshot_id) is None:
        raise BadScan(f"Snapshot {request.snapshot_id} is not a snapshot of this table.")
    scan = table.scan(row_filter=request.filter if request.filter is not None else table.scan().row_filter,
                      selected_fields=tuple(request.select) if request.select else ("*",),
                      case_sensitive=request.case_sensitive, snapshot_id=request.snapshot_id)
    _confined(table_location, scan.snapshot(), io)
    try:
        return list(scan.plan_files())
    except ValueError as e:           # the filter names a missing column, or compares it to a wrong type
        raise BadScan(f"Cannot plan the scan: {e}") from None


def _confined(location: str, snapshot, io) -> None:
    """The snapshot's manifest list and every manifest it names lie inside the table: a writer wrote the list
    and chose what it names, and planning reads them with the catalog's rights (another table's manifests
    would answer that table's files and column bounds)."""
    if snapshot is None:
        return
    if outside(location, [snapshot.manifest_list]) or outside(location, [m.manifest_path
                                                                         for m in snapshot.manifests(io)]):
        raise BadScan("The snapshot names a manifest list or manifest outside the table's location: not planned.")


def _has(schema, name: str, case_sensitive: bool) -> bool:
    try:
        schema.find_field(name, case_sensitive)
        return True
    except ValueError:
        return False


def _field_ids(metadata, fields: list[str] | None, case_sensitive: bool) -> dict[int, object]:
    """{field id: its type} of the fields whose column stats the client asked for (`stats-fields`)."""
    schema = metadata.schema()
    out = {}
    for name in fields or []:
        try:
            field = schema.find_field(name, case_sensitive)
        except ValueError:
            raise BadScan(f"Unknown field in 'stats-fields': {name!r}.") from None
        if field.field_type.is_primitive:
            out[field.field_id] = field.field_type
    return out



def _json_value(value):
    """A decoded bound or partition value as the spec's primitive type values write it."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _counts(values: dict | None, wanted) -> dict | None:
    if not values:
        return None
    keys = [k for k in sorted(values) if k in wanted]
    return {"keys": keys, "values": [values[k] for k in keys]} if keys else None


def _bounds(values: dict | None, wanted: dict) -> dict | None:
    if not values:
        return None
    keys = [k for k in sorted(values) if k in wanted]
    return {"keys": keys, "values": [_json_value(from_bytes(wanted[k], values[k])) for k in keys]} if keys else None


_CONTENT = {DataFileContent.DATA: "data", DataFileContent.POSITION_DELETES: "position-deletes",
            DataFileContent.EQUALITY_DELETES: "equality-deletes"}


def content_file(f, stats: dict) -> dict:
    """A DataFile as the spec's ContentFile (DataFile, PositionDeleteFile or EqualityDeleteFile) JSON; a data
    file carries the column stats of the `stats` fields ({field id: type})."""
    out = {"spec-id": f.spec_id, "partition": [_json_value(v) for v in f.partition],
           "content": _CONTENT[f.content], "file-path": f.file_path, "file-format": f.file_format.value.lower(),
           "file-size-in-bytes": f.file_size_in_bytes, "record-count": f.record_count}
    if f.split_offsets:
        out["split-offsets"] = list(f.split_offsets)
    if f.sort_order_id is not None:
        out["sort-order-id"] = f.sort_order_id
    if f.content == DataFileContent.EQUALITY_DELETES and f.equality_ids:
        out["equality-ids"] = list(f.equality_ids)
    if f.content == DataFileContent.DATA and stats:
        for key, values in (("column-sizes", f.column_sizes), ("value-counts", f.value_counts),
                            ("null-value-counts", f.null_value_counts), ("nan-value-counts", f.nan_value_counts)):
            counted = _counts(values, stats)
            if counted:
                out[key] = counted
        for key, values in (("lower-bounds", f.lower_bounds), ("upper-bounds", f.upper_bounds)):
            bounded = _bounds(values, stats)
            if bounded:
                out[key] = bounded
    return out


def task_pages(metadata, tasks: list, request: PlanTableScanRequest, page_size: int = PAGE_TASKS) -> list[dict]:
    """The tasks as ScanTasks JSON pages ({"file-scan-tasks", "delete-files"}), `page_size` tasks each."""
    stats = _field_ids(metadata, request.stats_fields, request.case_sensitive)
    pages = []
    for start in range(0, len(tasks), page_size):
        deletes: list[dict] = []
        index: dict[str, int] = {}
        out = []
        for task in tasks[start:start + page_size]:
            one = {"data-file": content_file(task.file, stats)}
            refs = []
            for d in sorted(task.delete_files, key=lambda d: d.file_path):
                if d.file_path not in index:
                    index[d.file_path] = len(deletes)
                    deletes.append(content_file(d, {}))
                refs.append(index[d.file_path])
            if refs:
                one["delete-file-references"] = refs
            out.append(one)
        page = {"file-scan-tasks": out}
        if deletes:
            page["delete-files"] = deletes
        pages.append(page)
    return pages or [{"file-scan-tasks": []}]


def planned_paths(pages: list[dict]) -> list[str]:
    """Every file the pages name (data and delete files), in order, once."""
    seen: dict[str, None] = {}
    for page in pages:
        for task in page["file-scan-tasks"]:
            seen.setdefault(task["data-file"]["file-path"])
        for d in page.get("delete-files", []):
            seen.setdefault(d["file-path"])
    return list(seen)
