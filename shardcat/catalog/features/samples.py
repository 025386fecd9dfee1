"""A table's first rows, for people (the explorer's sample), read with the caller's own rights.

`GET /shardcat/sample/{full_name}?max_rows=N` answers, for a table the caller may see:
`{full_name, row_filter, masked_columns, readable}` and, when it may read the data here,
`{columns, rows, truncated}`; otherwise `reason` says why there are no rows. The decision is the
one an engine gets for the table's data (governance/authorize.py `data_decision`: SELECT with USE
CATALOG and USE SCHEMA; a table with a row filter or column masks, its own or an ABAC policy's,
only for a trusted engine, which applies them): this server applies no filter or mask itself, so
such a table shows no rows, and says so. `row_filter` and `masked_columns` say whether a filter or
masks govern the table for this caller (not which functions: those are for trusted engines only).

Delta tables (the published log and the catalog's ratified commits) and Parquet directories are
read, off the event loop, at most `MAX_ROWS` rows and `MAX_CELL` characters per value, stopping
after the first files that give enough rows. A table whose storage is not a local path, or of
another format, shows no rows, with the reason.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import decimal

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from ...auth import Caller
from ...delta import partitions
from ...delta.log import Storage
from ...entities.names import split_full_name
from ...entities.types import TYPES
from ...errors import invalid, not_found
from ...governance.authorize import authorizer, data_decision, has_policies
from ...shards.shard import Shard
from ...web.kit import ok
from ...web.routes import Handler, ShardServing
from ...delta.table_log import TableLogError, table_log

DEFAULT_ROWS = 20
MAX_ROWS = 100
MAX_CELL = 200          # characters of one value as shown
MAX_FILES = 20          # data files opened at most for one sample


def _shown(value):
    """A value as JSON, cut to MAX_CELL characters."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, bytes):
        value = base64.b64encode(value[:MAX_CELL]).decode()
    elif isinstance(value, (datetime.date, datetime.datetime, datetime.time, decimal.Decimal)):
        value = value.isoformat() if hasattr(value, "isoformat") else str(value)
    elif not isinstance(value, str):
        value = str(value)
    return value if len(value) <= MAX_CELL else value[:MAX_CELL - 1] + "…"


def _rows(table: pa.Table, limit: int) -> tuple[list[str], list[list]]:
    head = table.slice(0, limit)
    columns = head.column_names
    return columns, [[_shown(v) for v in row.values()] for row in head.to_pylist()]


def _read_delta(log, limit: int) -> tuple[pa.Table, bool]:
    """The first `limit` rows of the Delta table's latest snapshot (blocking: run in a thread)."""
    state = log.snapshot(log.latest)
    schema, types, partitioned = state.schema, state.delta_types(), state.partition_columns
    storage = Storage(log.location)
    data_columns = [n for n in schema.names if n not in partitioned]
    parts, count, files = [], 0, sorted(state.files.items())
    for path, added in files[:MAX_FILES]:
        with storage.fs.open_input_file(storage.path(path)) as f:
            batches = pq.ParquetFile(f).iter_batches(batch_size=limit + 1, columns=data_columns)
            batch = next(batches, None)
        if batch is None:
            continue
        data = pa.Table.from_batches([batch])
        values = added.get("partitionValues") or {}
        for name in partitioned:
            value = partitions.parse(values.get(name) or None, types[name])
            data = data.append_column(name, pa.repeat(pa.scalar(value, schema.field(name).type), data.num_rows))
        parts.append(data.select(schema.names))
        count += data.num_rows
        if count > limit:
            break
    table = pa.concat_tables(parts, promote_options="permissive") if parts else schema.empty_table()
    return table, count > limit or (count == limit and len(files) > len(parts))


def _read_parquet(location: str, limit: int) -> tuple[pa.Table, bool]:
    storage = Storage(location)
    table = pads.dataset(storage.root, filesystem=storage.fs, format="parquet").head(limit + 1)
    return table, table.num_rows > limit


class Samples:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store

    async def sample(self, caller: Caller, full_name: str, max_rows: str | None) -> dict:
        limit = DEFAULT_ROWS if max_rows is None else (int(max_rows) if max_rows.isdecimal() else -1)
        if not 1 <= limit <= MAX_ROWS:
            raise invalid(f"max_rows must be an integer from 1 to {MAX_ROWS}.")
        t = TYPES["table"]
        key = ".".join(split_full_name(full_name, t.name_parts, t.name))
        ms = caller.metastore()
        table = await self.shard.lookup(ms, t.namespace, key, caller.min_version)
        authz = await authorizer(self.shard, caller)
        if table is None or not authz.sees("table", table):
            raise not_found(f"Table '{key}' does not exist.")
        governed = authz.effective(table)
        masked = [c["name"] for c in table.info.get("columns") or [] if c.get("mask") or c["name"].lower() in governed.masks]
        out = {"full_name": table.full_name, "masked_columns": masked,
               "row_filter": bool(table.info.get("row_filter") or governed.row_filter)}
        decision = data_decision(authz, table, write=False)
        if (has_policies(table) or governed) and not governed.conflict:
            # a trusted engine gets them and applies them; this server applies none: no rows, whoever asks
            return {**out, "readable": authz.decide("table", "read_data", table).allowed,
                    "reason": "The table has a row filter or column masks, which only an engine applies: "
                              "no sample is shown here."}
        if not decision.allowed:
            return {**out, "readable": False, "reason": decision.reason}
        info = table.info
        fmt, location = (info.get("data_source_format") or "DELTA").upper(), info.get("storage_location")
        if info.get("table_type") in ("VIEW", "MATERIALIZED_VIEW", "METRIC_VIEW") or not location:
            return {**out, "readable": True, "reason": "A view has no data of its own: an engine runs its SQL."}
        if not location.startswith("file:"):
            return {**out, "readable": True, "reason": f"Samples are read from local storage only, not from "
                                                       f"{location.split(':', 1)[0]}:// storage."}
        try:
            if fmt == "DELTA":
                data, truncated = await asyncio.to_thread(_read_delta, await table_log(self.store, table), limit)
            elif fmt == "PARQUET":
                data, truncated = await asyncio.to_thread(_read_parquet, location, limit)
            else:
                return {**out, "readable": True, "reason": f"Samples are shown for Delta and Parquet tables, "
                                                           f"not {fmt}."}
        except (TableLogError, OSError, ValueError, pa.ArrowException) as e:
            return {**out, "readable": True, "reason": f"The table's data could not be read: {str(e)[:300]}"}
        columns, rows = _rows(data, limit)
        return {**out, "readable": True, "columns": columns, "rows": rows, "truncated": truncated}


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    service = Samples(serving.shard)

    async def sample(request):
        return ok(await service.sample(request["caller"], request.match_info["full_name"],
                                       request.query.get("max_rows")))

    return {"getTableSample": sample}
