"""A Python Delta client for catalog-managed tables: the catalog ratifies every commit.

Writers write Parquet data files and a staged commit (`_delta_log/_staged_commits/<v>.<uuid>.json`),
then ask the catalog to ratify version `v` (`POST /delta/preview/commits`). If another writer won
`v`, the writer reads the winning commits and rebases: a blind append just proposes the next
version with the same data files; a change that conflicts with the winners (a concurrent metadata
change, a removed file, an overwrite racing an append) fails with CommitConflict.

Readers build a snapshot from the published `_delta_log` (JSON commits and the newest Parquet
checkpoint) merged with the catalog's ratified, unpublished commits, which win over anything
published for the same version; versions past the catalog's latest are ignored (Delta protocol,
"Reading Catalog-managed Tables").

Publishing copies ratified commits into `_delta_log/<v>.json`, in order, and reports the newest
published version to the catalog (`latest_backfilled_version`). Writers publish after each commit
by default, so the catalog keeps only a handful of unpublished commits.

A table may be partitioned (`partition_columns`): each data file then holds one partition's
rows, in its Hive-style directory (shardcat/delta/partitions.py), and the log's partition
values are what readers put in those columns.

    async with DeltaCatalogClient("http://host:8080/api/2.1/unity-catalog", token) as delta:
        table = await delta.create_table("main.s.t", pa.schema([("id", pa.int64())]))
        await delta.append(table, pa.table({"id": [1, 2]}))
        rows = await delta.read("main.s.t")
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..entities.values import now_ms
from .commits import FEATURE_PROPERTY, TABLE_ID_PROPERTY
from . import log as dlog
from . import partitions
from .log import Storage, TableState

COMMITS = "/delta/preview/commits"
MAX_ATTEMPTS = 100


class DeltaClientError(Exception):
    pass


class CatalogApiError(DeltaClientError):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class CommitConflict(DeltaClientError):
    """A concurrent commit changed what this transaction depends on; it cannot be rebased."""


@dataclass(frozen=True)
class TableRef:
    full_name: str
    table_id: str
    location: str
    # Vended for the location (DeltaCatalogClient(vend_credentials=True)); None: pyarrow's own configuration.
    credentials: dict | None = field(default=None, compare=False, repr=False)

    def commit_ref(self) -> dict:
        return {"table_id": self.table_id, "table_uri": self.location}


@dataclass
class Snapshot:
    table: TableRef
    state: TableState
    # Ratified commits the catalog still holds: version -> DeltaCommitInfo JSON.
    unpublished: dict[int, dict] = field(default_factory=dict)

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def schema(self) -> pa.Schema:
        return self.state.schema


@dataclass
class Transaction:
    """What a commit proposes, and what it read. `blind_append`: reads nothing, so it rebases freely."""
    table: TableRef
    read_version: int
    operation: str
    adds: list[dict] = field(default_factory=list)         # add actions (data already written)
    removes: list[dict] = field(default_factory=list)      # remove actions
    metadata: dict | None = None                           # a new metaData action
    blind_append: bool = True
    parameters: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StagedCommit:
    txn: Transaction
    version: int
    file_name: str
    body: dict                  # the POST /delta/preview/commits request


class DeltaCatalogClient:
    def __init__(self, api_url: str, token: str, *, session: aiohttp.ClientSession | None = None,
                 publish_after_commit: bool = True, vend_credentials: bool = False):
        """`vend_credentials`: open an s3:// table's files with the temporary credentials the
        catalog vends for it (read-write, else read-only; a new table's staging location by the
        staging table's id), at the store's endpoint when it is S3-compatible; otherwise pyarrow's
        own AWS configuration applies."""
        self.api_url = api_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self._session = session
        self._own_session = session is None
        self.publish_after_commit = publish_after_commit
        self.vend_credentials = vend_credentials
        self.stats = {"commits": 0, "conflicts": 0, "rebases": 0}

    async def __aenter__(self) -> "DeltaCatalogClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    # ---- catalog calls ------------------------------------------------------------

    async def _call(self, method: str, path: str, *, json_body=None, params=None) -> dict:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.request(method, self.api_url + path, json=json_body, params=params,
                                         headers=self.headers) as r:
            body = await r.json(content_type=None)
            if r.status != 200:
                body = body or {}
                raise CatalogApiError(r.status, body.get("error_code", "?"), body.get("message", ""))
            return body or {}

    async def table(self, full_name: str) -> TableRef:
        t = await self._call("GET", f"/tables/{full_name}")
        if (t.get("properties") or {}).get(FEATURE_PROPERTY) != "supported":
            raise DeltaClientError(f"Table '{full_name}' is not a catalog-managed Delta table.")
        return TableRef(t["full_name"], t["table_id"], t["storage_location"],
                        await self._credentials(t["table_id"], t["storage_location"]))

    async def _credentials(self, table_id: str, location: str) -> dict | None:
        if not (self.vend_credentials and location.startswith("s3")):
            return None
        try:
            return await self._call("POST", "/temporary-table-credentials",
                                    json_body={"table_id": table_id, "operation": "READ_WRITE"})
        except CatalogApiError as e:
            if e.status != 403:
                raise
        return await self._call("POST", "/temporary-table-credentials",
                                json_body={"table_id": table_id, "operation": "READ"})

    async def _ref(self, table: TableRef | str) -> TableRef:
        return table if isinstance(table, TableRef) else await self.table(table)

    async def get_commits(self, table: TableRef, start_version: int = 0) -> tuple[int, dict[int, dict]]:
        """(latest ratified version, the ratified unpublished commits by version)."""
        params = {**table.commit_ref(), "start_version": str(start_version)}
        out, commits = None, {}
        while True:
            out = await self._call("GET", COMMITS, params=params)
            page = {c["version"]: c for c in out["commits"]}
            commits.update(page)
            if not page or max(page) >= out["latest_table_version"]:
                return out["latest_table_version"], commits
            params["start_version"] = str(max(page) + 1)

    # ---- creating a table -----------------------------------------------------------

    async def create_table(self, full_name: str, schema: pa.Schema, *, partition_columns=(),
                           properties: dict | None = None, comment: str | None = None,
                           catalog_managed_protocol: bool = True) -> TableRef:
        """Create a catalog-managed table the Delta 4.1 way: reserve a staging table (id and managed
        location), write version 0 there, then register the table at that location. ValueError,
        before anything is reserved, for a schema or partition columns the client cannot write.

        `catalog_managed_protocol=False` leaves the `catalogManaged` feature out of the Delta protocol:
        the catalog still ratifies this client's commits, but filesystem-only Delta readers (delta-rs)
        can read the published log. With the feature (the default) they must go through the catalog."""
        catalog, schema_name, name = full_name.split(".")
        dlog.metadata("", schema, {}, partition_columns=partition_columns)   # refuses a bad one before reserving
        staging = await self._call("POST", "/staging-tables", json_body={
            "name": name, "catalog_name": catalog, "schema_name": schema_name})
        table_id, location = staging["id"], staging["staging_location"]
        configuration = {"delta.enableInCommitTimestamps": "true", TABLE_ID_PROPERTY: table_id,
                         **(properties or {})}
        storage = Storage(location, await self._credentials(table_id, location))
        ict = now_ms()
        md = dlog.metadata(table_id, schema, configuration, partition_columns=partition_columns,
                           description=comment, created=ict)
        storage.write(dlog.commit_file(0), dlog.encode_actions([
            dlog.commit_info(ict, "CREATE TABLE", {"catalogManaged": str(catalog_managed_protocol).lower()}),
            dlog.protocol(catalog_managed_protocol), md]))
        body = {"name": name, "catalog_name": catalog, "schema_name": schema_name, "table_type": "MANAGED",
                "data_source_format": "DELTA", "storage_location": location,
                "columns": dlog.uc_columns(md["metaData"]["schemaString"], md["metaData"]["partitionColumns"]),
                "properties": {**configuration, FEATURE_PROPERTY: "supported"}}
        if comment is not None:
            body["comment"] = comment
        t = await self._call("POST", "/tables", json_body=body)
        return TableRef(t["full_name"], t["table_id"], t["storage_location"],
                        await self._credentials(t["table_id"], t["storage_location"]))

    # ---- reading ----------------------------------------------------------------------

    async def snapshot(self, table: TableRef | str) -> Snapshot:
        table = await self._ref(table)
        latest, unpublished = await self.get_commits(table)    # before listing: see the comment in _actions
        storage = Storage(table.location, table.credentials)
        published, checkpoints = storage.list_log()
        base = max((v for v in checkpoints if v <= latest and v not in unpublished), default=None)
        if base is not None:
            state = dlog.read_checkpoint(storage, base)
            state.ict = _ict(dlog.decode_actions(storage.read(dlog.commit_file(base))))
        else:
            state = TableState()
        for v in range(state.version + 1, latest + 1):
            state.apply(v, self._actions(storage, v, published, unpublished))
        if state.metadata is None:
            raise DeltaClientError(f"Table '{table.full_name}' has no Delta metadata at {table.location}.")
        return Snapshot(table, state, unpublished)

    def _actions(self, storage: Storage, version: int, published: set[int], unpublished: dict[int, dict]) -> list:
        """A version's actions: the catalog's ratified commit if it still holds one (it wins over a
        published file), else the published file. The catalog was asked before the directory was
        listed, so a commit published in between is in the listing."""
        commit = unpublished.get(version)
        if commit is not None:
            if commit.get("inline_content") is not None:
                return dlog.decode_actions(commit["inline_content"])
            return dlog.decode_actions(storage.read(f"{dlog.STAGED_DIR}/{commit['file_name']}"))
        if version in published:
            return dlog.decode_actions(storage.read(dlog.commit_file(version)))
        raise DeltaClientError(f"Version {version} of {storage.location} is neither published nor held by the catalog.")

    async def read(self, table: TableRef | str, snapshot: Snapshot | None = None) -> pa.Table:
        snap = snapshot or await self.snapshot(table)
        storage = Storage(snap.table.location, snap.table.credentials)
        schema, types, partitioned = snap.schema, snap.state.delta_types(), snap.state.partition_columns
        data_columns = [name for name in schema.names if name not in partitioned]
        parts = []
        for path, added in sorted(snap.state.files.items()):
            with storage.fs.open_input_file(storage.path(path)) as f:
                # A file may hold its partition columns too (other writers): the log's values win.
                data = pq.read_table(f, columns=data_columns)
            values = added.get("partitionValues") or {}
            for name in partitioned:
                value = partitions.parse(values.get(name) or None, types[name])
                data = data.append_column(name, pa.repeat(pa.scalar(value, schema.field(name).type), data.num_rows))
            parts.append(data.select(schema.names).cast(schema))
        return pa.concat_tables(parts) if parts else schema.empty_table()

    # ---- writing ------------------------------------------------------------------------

    @staticmethod
    def write_files(snap: Snapshot, data: pa.Table) -> list[dict]:
        """Data files for `data` (one per partition of the snapshot's table), written under the
        table; their add actions, for a Transaction."""
        storage = Storage(snap.table.location, snap.table.credentials)
        partitioned = snap.state.partition_columns
        if not partitioned:
            return [dlog.write_data_file(storage, "", data, {})]
        # One pass groups the row numbers by partition (a null is a partition of its own).
        row = "#" + "".join(partitioned)          # longer than any partition column's name
        numbered = data.select(partitioned).append_column(row, pa.array(np.arange(data.num_rows)))
        groups = numbered.group_by(partitioned).aggregate([(row, "list")])
        adds = []
        for key, members in zip(groups.select(partitioned).to_pylist(), groups[row + "_list"]):
            values = {name: partitions.serialize(key[name]) for name in partitioned}
            adds.append(dlog.write_data_file(storage, partitions.directory(partitioned, values) + "/",
                                    data.take(members.values).drop_columns(partitioned), values))
        return adds

    async def append(self, table: TableRef | str, data: pa.Table) -> int:
        """Append rows (a blind append: rebased over concurrent commits). Returns the ratified version."""
        snap = await self.snapshot(table)
        data = data.cast(snap.schema)
        txn = Transaction(snap.table, snap.version, "WRITE", self.write_files(snap, data),
                          parameters={"mode": "Append"})
        return await self.commit(txn, snap)

    async def overwrite(self, table: TableRef | str, data: pa.Table) -> int:
        """Replace all rows; fails with CommitConflict if another writer changed the table meanwhile."""
        snap = await self.snapshot(table)
        data = data.cast(snap.schema)
        now = now_ms()
        txn = Transaction(snap.table, snap.version, "WRITE", self.write_files(snap, data),
                          [dlog.remove(a, now) for a in snap.state.files.values()],
                          blind_append=False, parameters={"mode": "Overwrite"})
        return await self.commit(txn, snap)

    async def update_metadata(self, table: TableRef | str, *, schema: pa.Schema | None = None,
                              properties: dict | None = None, description: str | None = None) -> int:
        """Change the schema, add or change table properties, or set the description; the catalog
        updates the table's columns, properties and comment in the same transaction as the commit."""
        snap = await self.snapshot(table)
        md = snap.state.metadata
        configuration = {**md.get("configuration", {}), **(properties or {})}
        new = dlog.metadata(md["id"], schema or snap.schema, configuration,
                            partition_columns=snap.state.partition_columns,
                            description=description if description is not None else md.get("description"),
                            created=md.get("createdTime"))
        txn = Transaction(snap.table, snap.version, "SET TBLPROPERTIES" if schema is None else "CHANGE COLUMN",
                          metadata=new, blind_append=False)
        return await self.commit(txn, snap)

    def stage(self, txn: Transaction, version: int, previous_ict: int) -> StagedCommit:
        """Write the staged commit file for `version`; nothing is visible until the catalog ratifies it."""
        storage = Storage(txn.table.location, txn.table.credentials)
        ict = max(now_ms(), previous_ict + 1)    # in-commit timestamps strictly increase
        actions = [dlog.commit_info(ict, txn.operation, txn.parameters, blind_append=txn.blind_append,
                                    read_version=txn.read_version)]
        if txn.metadata is not None:
            actions.append(txn.metadata)
        actions += txn.removes + txn.adds
        data = dlog.encode_actions(actions)
        name = dlog.staged_file_name(version)
        relative = f"{dlog.STAGED_DIR}/{name}"
        storage.write(relative, data)
        body = {**txn.table.commit_ref(), "commit_info": {
            "version": version, "timestamp": ict, "file_name": name, "file_size": len(data),
            "file_modification_timestamp": storage.mtime_ms(relative)}}
        if txn.metadata is not None:
            body["metadata"] = _catalog_metadata(txn.metadata["metaData"])
        return StagedCommit(txn, version, name, body)

    async def ratify(self, staged: StagedCommit) -> None:
        """Ask the catalog to ratify a staged commit. A lost response or a server error is retried: the
        outcome is unknown, and a replay of an accepted commit is a no-op success."""
        for attempt in range(3):
            try:
                await self._call("POST", COMMITS, json_body=staged.body)
                return
            except CatalogApiError as e:
                if e.status < 500 or attempt == 2:
                    raise
            except (aiohttp.ClientConnectionError, asyncio.TimeoutError):
                if attempt == 2:
                    raise
            await asyncio.sleep(0.1 * (attempt + 1))

    async def commit(self, txn: Transaction, snap: Snapshot) -> int:
        """Stage and ratify `txn`, rebasing over concurrent winners; publish afterwards. Returns the version."""
        for _ in range(MAX_ATTEMPTS):
            staged = self.stage(txn, snap.version + 1, snap.state.ict)
            try:
                await self.ratify(staged)
            except CatalogApiError as e:
                if e.status >= 500:
                    raise      # outcome unknown: the staged file must stay, it may have been ratified
                Storage(txn.table.location, txn.table.credentials).delete(f"{dlog.STAGED_DIR}/{staged.file_name}")   # a rejected proposal
                if e.code == "RESOURCE_EXHAUSTED":
                    await self.publish(txn.table)      # too many unpublished commits: publish, then try again
                elif e.code != "RESOURCE_CONFLICT":
                    raise
                else:
                    self.stats["conflicts"] += 1
                newer = await self.snapshot(txn.table)
                self._check_rebase(txn, snap, newer)
                self.stats["rebases"] += newer.version > snap.version
                txn.read_version, snap = newer.version, newer
                continue
            self.stats["commits"] += 1
            if self.publish_after_commit:
                try:
                    await self.publish(txn.table)
                except (DeltaClientError, OSError):
                    pass    # publishing is best effort here; the commit stands and anyone may publish it
            return staged.version
        raise DeltaClientError(f"Gave up committing to {txn.table.full_name} after {MAX_ATTEMPTS} attempts.")

    def _check_rebase(self, txn: Transaction, old: Snapshot, new: Snapshot) -> None:
        """May `txn`, built on `old`, go on top of `new`? Raise CommitConflict if not."""
        storage = Storage(txn.table.location, txn.table.credentials)
        published, _ = storage.list_log()
        removing = {r["remove"]["path"] for r in txn.removes}
        for v in range(old.version + 1, new.version + 1):
            for a in self._actions(storage, v, published, new.unpublished):
                if "metaData" in a or "protocol" in a:
                    raise CommitConflict(f"Version {v} of {txn.table.full_name} changed the table's metadata or "
                                         f"protocol concurrently; read the table again and redo the change.")
                if "remove" in a and a["remove"]["path"] in removing:
                    raise CommitConflict(f"Version {v} of {txn.table.full_name} concurrently removed "
                                         f"{a['remove']['path']}, which this {txn.operation} also removes.")
                if not txn.blind_append and "add" in a:
                    raise CommitConflict(f"Version {v} of {txn.table.full_name} concurrently added data that this "
                                         f"{txn.operation} (which read version {old.version}) did not see.")

    # ---- publishing ----------------------------------------------------------------------

    async def publish(self, table: TableRef | str, *, checkpoint: bool = False) -> int:
        """Copy the catalog's ratified commits to _delta_log/<v>.json in version order and report the
        newest published version. With `checkpoint`, also write a checkpoint of it. Returns that version."""
        table = await self._ref(table)
        latest, unpublished = await self.get_commits(table)
        storage = Storage(table.location, table.credentials)
        published = latest - len(unpublished)
        for v in sorted(unpublished):
            if v != published + 1:
                break
            commit = unpublished[v]
            if not storage.exists(dlog.commit_file(v)):
                if commit.get("inline_content") is not None:
                    data = commit["inline_content"].encode()
                else:
                    data = storage.read(f"{dlog.STAGED_DIR}/{commit['file_name']}")
                storage.write(dlog.commit_file(v), data)
            published = v
        if unpublished:
            await self._call("POST", COMMITS, json_body={**table.commit_ref(), "latest_backfilled_version": published})
        if checkpoint:
            snap = await self.snapshot(table)
            if snap.version == published:
                dlog.write_checkpoint(storage, snap.state)
        return published


def _ict(actions: list[dict]) -> int:
    for a in actions:
        if "commitInfo" in a:
            return a["commitInfo"].get("inCommitTimestamp", 0)
    return 0


def _catalog_metadata(md: dict) -> dict:
    """A Delta metaData action as the commits API's DeltaMetadata."""
    out = {"schema": {"columns": dlog.uc_columns(md["schemaString"], md.get("partitionColumns") or ())},
           "properties": {"properties": dict(md.get("configuration") or {})}}
    if md.get("description") is not None:
        out["description"] = md["description"]
    return out
