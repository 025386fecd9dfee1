"""The Delta Sharing protocol's endpoints, as a recipient reads them.

Every request names its metastore in the path (`/api/2.1/delta-sharing/metastores/{id}`: the
profile's endpoint) and carries a recipient's bearer token. The token is checked on every request
against the recipient as the catalog has it now: known, unexpired (a rotated token until its
grace period ends), from an address on the recipient's IP access list. The recipient sees the
shares it holds SELECT on, and in them only the shared objects (tables, and the tables of shared
schemas) under their shared names, and of those only what the share's owner may still read
(`sharing.owner_decision`, decided on the privilege index in memory at every request); anything
else is "not found", the same for what does not exist and for what exists outside its shares.
Errors are the protocol's JSON (`errorCode`, `message`).

A table is read from its Delta log (delta/table_log.py) at the version asked; history (a version, a
timestamp, a starting version) only where the share enables history sharing, from the object's
`start_version`; the change data feed only where the share enables it and the table records it.
The share's partition filters are enforced on every file; the recipient's predicate and limit
hints skip files, best effort (predicates.py). Files come back as pre-signed URLs (files.py).
The protocol's errors, request values and answer lines are wire.py's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import uuid
from dataclasses import dataclass

from aiohttp import web

from ....auth import Caller, bearer, hash_token
from ....entities.asset import Asset
from ....entities.urls import InvalidUrl
from ....entities.values import now_ms
from ....errors import CatalogError
from ....governance import abac
from ....governance.audit import annotate
from ....governance.authorize import Authz, carries_policies
from ....governance.grants import Subjects
from ....governance.index import privilege_index
from ....governance.vending import catalog_read_credentials, file_signer
from ....shards.shard import Shard
from ....store.errors import MetastoreGone
from ....web.routes import Handler, ShardServing
from ....web.client_address import client_address, public_origin
from ....web.wire import SHARING_PREFIX
from ...features.sharing import find_recipient_token, owner_decision
from . import files
from .wire import (VERSION_HEADER, bad, error, file_line, iso, json_body, limited, metadata_line, ndjson, not_found,
                   page_of, protocol_errors, protocol_line, response_format, timestamp_param, version_param)
from .predicates import FileFacts, may_match, parse_hint, parse_sql_hints, partition_filter
from ....delta.table_log import TableLog, TableLogError, table_log

MS = "/metastores/{metastore_id}"



# ---- the recipient ---------------------------------------------------------------------


@dataclass
class Recipient:
    asset: Asset
    metastore_id: str
    token: dict

    @property
    def properties(self) -> dict[str, str]:
        kv = self.asset.info.get("properties_kv_pairs") or {}
        props = kv.get("properties") if isinstance(kv.get("properties"), dict) else kv
        return {str(k): str(v) for k, v in (props or {}).items()}


def _ip_allowed(recipient: Asset, remote: str | None) -> bool:
    allowed = (recipient.info.get("ip_access_list") or {}).get("allowed_ip_addresses")
    if not allowed:
        return True
    try:
        address = ipaddress.ip_address(remote or "")
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in allowed)


@dataclass
class SharedTable:
    share: Asset
    schema: str         # the names the recipient sees
    name: str
    table: Asset
    object: dict        # the share's data object that shares it (a TABLE, or its SCHEMA)

    @property
    def history(self) -> bool:
        return self.object.get("history_data_sharing_status") == "ENABLED"

    @property
    def start_version(self) -> int:
        return int(self.object.get("start_version") or 0)


class SharingServer:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.subjects = Subjects(shard.store)    # share owners' groups, as fresh as a caller's own

    # ---- who is asking ----

    async def recipient(self, request: web.Request) -> Recipient:
        ms = request.match_info["metastore_id"]
        token = bearer(request.headers.get("Authorization"))
        if token is None:
            raise error("UNAUTHENTICATED", "Missing 'Authorization: Bearer <token>' header.")
        unknown = error("UNAUTHENTICATED", "The bearer token is not valid (unknown, revoked or expired).")
        try:
            uuid.UUID(ms)
        except ValueError:
            raise unknown from None
        digest = hash_token(token).hex()
        found = await self._recipient_with(ms, digest)
        if found is None:
            raise unknown
        asset, entry = found
        if entry["expiration_time"] <= now_ms():
            raise unknown
        address = client_address(request, self.shard.store.secrets)
        if not _ip_allowed(asset, address):
            raise error("PERMISSION_DENIED", f"Requests from {address} are not on this recipient's IP access list.")
        # The audit row names the recipient (governance/audit.py reads the request's caller).
        request["caller"] = Caller(f"recipient:{asset.name}", 0, False, None, ms)
        return Recipient(asset, ms, entry)

    async def _recipient_with(self, ms: str, digest: str) -> tuple[Asset, dict] | None:
        try:
            return await find_recipient_token(
                self.shard, ms, lambda r, t: t.get("token_hash") == digest and r.info.get("authentication_type") == "TOKEN")
        except (CatalogError, MetastoreGone):
            return None     # no such metastore: the same answer as a wrong token

    # ---- what it may see ----

    async def shares(self, r: Recipient) -> list[Asset]:
        out, after = [], ""
        while True:
            batch = await self.shard.children(r.metastore_id, r.metastore_id, "share", after=after, limit=1000)
            out += [s for s in batch if "SELECT" in (s.info.get("permissions", {}).get(r.asset.id) or [])]
            if len(batch) < 1000:
                return out
            after = batch[-1].name

    async def share(self, r: Recipient, name: str) -> Asset:
        share = await self.shard.lookup(r.metastore_id, "share", name.lower())
        if share is None or "SELECT" not in (share.info.get("permissions", {}).get(r.asset.id) or []):
            raise not_found(f"Share '{name:.255}' does not exist or is not shared with this recipient.")
        return share

    async def owner(self, ms: str, share: Asset) -> Authz:
        """The share's owner as governance sees it now (its groups, at most a few seconds old; its
        grants, current: the shard's privilege index, no database round trip once loaded)."""
        name = share.info.get("owner") or ""
        principals, account_admin = await self.subjects.of(name) if name else (frozenset(), False)
        return Authz(Caller(name, 0, account_admin, 0, ms, groups=principals), await privilege_index(self.shard, ms))

    async def tables(self, r: Recipient, share: Asset) -> list[SharedTable]:
        return (await self.served(r, share))[0]

    async def served(self, r: Recipient, share: Asset) -> tuple[list[SharedTable], set[str]]:
        """The share's tables as the recipient sees them, in (schema, table) order, and the names of
        its shared schemas. Only what the share's owner may read now is served (SELECT and the USE
        privileges above, `owner_decision`): an object whose owner lost them is left out, as if no
        longer shared. A table that has come to carry a row filter or column masks (its own or an
        ABAC policy's) since it was shared is not served either: a recipient would read it unfiltered."""
        out, schemas = {}, set()
        policies = await abac.policies_of(self.shard, r.metastore_id)
        owner = await self.owner(r.metastore_id, share)
        for obj in share.info.get("objects", []):
            if obj.get("status", "ACTIVE") != "ACTIVE":
                continue
            kind = obj.get("data_object_type")
            if kind == "TABLE":
                table = await self.shard.lookup(r.metastore_id, "table", obj["name"])
                if table is None or not _is_delta(table) or carries_policies(table, policies) \
                        or not owner_decision(owner, table).allowed:
                    continue
                schema, _, name = obj["shared_as"].rpartition(".")
                out[(schema, name)] = SharedTable(share, schema, name, table, obj)
            elif kind == "SCHEMA":
                schema_asset = await self.shard.lookup(r.metastore_id, "schema", obj["name"])
                if schema_asset is None or not owner_decision(owner, schema_asset).allowed:
                    continue
                schema = obj["shared_as"].rsplit(".", 1)[-1]
                schemas.add(schema)
                after = ""
                while True:
                    batch = await self.shard.children(r.metastore_id, schema_asset.id, "table", after=after,
                                                      limit=1000)
                    for t in batch:
                        if _is_delta(t) and not carries_policies(t, policies):
                            out.setdefault((schema, t.name), SharedTable(share, schema, t.name, t, obj))
                    if len(batch) < 1000:
                        break
                    after = batch[-1].name
        return [out[k] for k in sorted(out)], schemas

    async def table(self, r: Recipient, share_name: str, schema: str, name: str) -> SharedTable:
        share = await self.share(r, share_name)
        for t in await self.tables(r, share):
            if t.schema == schema.lower() and t.name == name.lower():
                annotate("TABLE", t.table.full_name, t.table.id)
                return t
        raise not_found(f"Table '{schema:.255}.{name:.255}' does not exist in share '{share.name}'.")

    async def log(self, t: SharedTable) -> TableLog:
        try:
            # Another cloud's table is read with a SAS or token vended for its location (governance/vending.py).
            credentials = await catalog_read_credentials(self.shard, t.table.metastore_id,
                                                         t.table.info.get("storage_location") or "")
            return await table_log(self.shard.store, t.table, credentials)
        except (TableLogError, OSError, ValueError) as e:
            raise error("FAILED_PRECONDITION", f"Table '{t.schema}.{t.name}' cannot be read: {e}") from None


def _is_delta(table: Asset) -> bool:
    return (table.info.get("data_source_format") or "DELTA").upper() == "DELTA" \
        and bool(table.info.get("storage_location")) \
        and table.info.get("table_type") not in ("VIEW", "MATERIALIZED_VIEW", "METRIC_VIEW")


class FileUrls:
    """Pre-signed URLs for one answer's files: one expiry for all of them."""

    def __init__(self, request: web.Request, shard: Shard, r: Recipient, t: SharedTable, signer=None):
        self.signer = signer          # another cloud's pre-signer (governance/vending.py file_signer), or None
        self.origin = public_origin(request)
        self.box = shard.store.secrets
        self.r, self.t = r, t
        self.expires = min(now_ms() + files.URL_SECONDS * 1000, int(r.token["expiration_time"]))
        self.location = t.table.info["storage_location"]

    def url(self, path: str) -> str:
        try:
            full = files.data_file_url(self.location, path)
        except (InvalidUrl, ValueError):
            raise error("FAILED_PRECONDITION", "The table's log names a file outside the table.") from None
        if full.startswith("s3://"):
            return files.presigned_s3(full, (self.expires - now_ms()) // 1000)
        if self.signer is not None:             # abfss:// (a blob SAS), gs:// (a V4 signed URL)
            return self.signer(full, max(1, (self.expires - now_ms()) // 1000))
        if not full.startswith("file://"):
            raise error("FAILED_PRECONDITION", "This server pre-signs only file://, s3://, abfss:// and gs:// storage.")
        grant = files.FileGrant(self.r.metastore_id, self.t.share.id, self.t.table.id, self.r.asset.id, path,
                                self.expires, self.r.token["id"])
        return files.signed_url(self.origin, SHARING_PREFIX, self.box, grant)



class _Reader:
    """One request's read of a shared table: its log, the share's partition filter, the hints."""

    def __init__(self, server: SharingServer, r: Recipient, t: SharedTable, log: TableLog):
        self.server, self.r, self.t, self.log = server, r, t, log

    def partition_test(self, partition_columns: list[str]):
        try:
            return partition_filter(self.t.object.get("partitions"), self.r.properties, partition_columns)
        except ValueError as e:
            raise error("PERMISSION_DENIED", f"The share's partition filter cannot be applied: {e}.") from None

    def check_history(self, what: str, version: int) -> None:
        if not self.t.history:
            raise bad(f"Reading table '{self.t.schema}.{self.t.name}' {what} needs history sharing, which the "
                      "share does not enable for it.")
        if version < self.t.start_version:
            raise bad(f"Version {version} is before the table's shared history, which starts at version "
                      f"{self.t.start_version}.")
        if version > self.log.latest:
            raise bad(f"Version {version} does not exist: the table's latest version is {self.log.latest}.")


def _in_thread(fn, *args):
    async def run():
        try:
            return await asyncio.to_thread(fn, *args)
        except TableLogError as e:
            raise bad(str(e)) from None
        except OSError as e:
            raise error("FAILED_PRECONDITION", f"The table's log cannot be read: {e.strerror or e}.") from None
    return run()


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    server = SharingServer(shard)

    async def list_shares(request):
        r = await server.recipient(request)
        items = [{"name": s.name, "id": s.id} for s in await server.shares(r)]
        return web.json_response(page_of(request, items, lambda i: (i["name"],)))

    async def get_share(request):
        r = await server.recipient(request)
        share = await server.share(r, request.match_info["share"])
        annotate("SHARE", share.name, share.id)
        return web.json_response({"share": {"name": share.name, "id": share.id}})

    async def list_schemas(request):
        r = await server.recipient(request)
        share = await server.share(r, request.match_info["share"])
        annotate("SHARE", share.name, share.id)
        tables, schemas = await server.served(r, share)
        names = sorted({t.schema for t in tables} | schemas)
        items = [{"name": n, "share": share.name} for n in names]
        return web.json_response(page_of(request, items, lambda i: (i["name"],)))

    def _table_item(t: SharedTable) -> dict:
        return {"name": t.name, "schema": t.schema, "share": t.share.name, "shareId": t.share.id, "id": t.table.id}

    async def list_tables(request):
        r = await server.recipient(request)
        share = await server.share(r, request.match_info["share"])
        schema = request.match_info["schema"].lower()
        tables, schemas = await server.served(r, share)
        tables = [t for t in tables if t.schema == schema]
        if not tables and schema not in schemas:
            raise not_found(f"Schema '{request.match_info['schema']:.255}' does not exist in share '{share.name}'.")
        items = [_table_item(t) for t in tables]
        return web.json_response(page_of(request, items, lambda i: (i["name"],)))

    async def list_all_tables(request):
        r = await server.recipient(request)
        share = await server.share(r, request.match_info["share"])
        items = [_table_item(t) for t in await server.tables(r, share)]
        return web.json_response(page_of(request, items, lambda i: (i["schema"], i["name"])))

    async def _shared(request) -> tuple[Recipient, SharedTable]:
        r = await server.recipient(request)
        m = request.match_info
        return r, await server.table(r, m["share"], m["schema"], m["table"])

    async def table_version(request):
        r, t = await _shared(request)
        log = await server.log(t)
        version = log.latest
        starting = timestamp_param(request.query.get("startingTimestamp"), "startingTimestamp")
        if starting is not None:
            reader = _Reader(server, r, t, log)
            version = max(await _in_thread(log.version_from, starting), t.start_version)
            reader.check_history("from a timestamp", version)
        return web.Response(status=200, headers={VERSION_HEADER: str(version)})

    async def table_version_head(request):
        r, t = await _shared(request)
        log = await server.log(t)
        return web.Response(status=200, headers={VERSION_HEADER: str(log.latest)})

    async def metadata(request):
        r, t = await _shared(request)
        log = await server.log(t)
        state = await _in_thread(log.snapshot, log.latest)
        fmt = response_format(request, state.protocol or {})
        return ndjson([protocol_line(fmt, state.protocol or {}),
                        metadata_line(fmt, state.metadata, t.name, None, state.files)], log.latest, fmt)

    async def query(request):
        r, t = await _shared(request)
        body = json_body(await request.read())
        version = version_param(body.get("version"), "version")
        timestamp = body.get("timestamp")
        if timestamp is not None and not isinstance(timestamp, str):
            raise bad("'timestamp' must be a string like 2022-01-01T00:00:00Z.")
        timestamp = timestamp_param(timestamp, "timestamp")
        starting = version_param(body.get("startingVersion"), "startingVersion")
        ending = version_param(body.get("endingVersion"), "endingVersion")
        limit = body.get("limitHint")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise bad("'limitHint' must be a non-negative integer.")
        hints = body.get("jsonPredicateHints")
        if sum(x is not None for x in (version, timestamp, starting)) > 1:
            raise bad("Give at most one of 'version', 'timestamp' and 'startingVersion'.")
        log = await server.log(t)
        reader = _Reader(server, r, t, log)
        if starting is not None:
            return await _changes(request, reader, starting, ending, cdf=False)
        if timestamp is not None:
            try:
                version = await asyncio.to_thread(log.version_at, timestamp)
            except TableLogError:
                raise bad(f"The timestamp {iso(timestamp)} is before the table's earliest version.") from None
            reader.check_history("as of a timestamp", version)
        elif version is not None:
            reader.check_history("at a version", version)
        at = log.latest if version is None else version
        state, added_in = await _in_thread(log.snapshot_with_versions, at)
        fmt = response_format(request, state.protocol or {})
        partition_columns = list(state.metadata.get("partitionColumns") or [])
        test = reader.partition_test(partition_columns)
        columns = {f["name"]: f["type"] for f in json.loads(state.metadata["schemaString"])["fields"]}
        tree = parse_hint(hints if isinstance(hints, str) else None, columns)
        if tree is None:      # the deprecated SQL form, where no JSON hint was given or usable
            tree = parse_sql_hints(body.get("predicateHints"), columns)
        kept = []
        for path in sorted(state.files):
            a = state.files[path]
            values = a.get("partitionValues") or {}
            if test is not None and not test(values):
                continue
            if not may_match(tree, FileFacts(values, a.get("stats"), partition_columns)):
                continue
            kept.append(a)
        kept = limited(kept, limit)
        urls = FileUrls(request, shard, r, t, await file_signer(shard, r.metastore_id, t.table.info["storage_location"]))
        lines = [protocol_line(fmt, state.protocol or {}),
                 metadata_line(fmt, state.metadata, t.name, version, None if version is not None else state.files)]
        if version is None:
            lines += [file_line(fmt, "file", a, urls) for a in kept]
        else:       # a time-travel read: each file with the version that added it, and that version's time
            stamps = await _in_thread(lambda: {v: log.timestamp(v) for v in {added_in[a["path"]] for a in kept}})
            lines += [file_line(fmt, "file", a, urls, added_in[a["path"]], stamps[added_in[a["path"]]])
                      for a in kept]
        return ndjson(lines, at, fmt)

    async def _changes(request, reader: _Reader, start: int, end: int | None, *, cdf: bool,
                       historical_metadata: bool = False):
        log, t = reader.log, reader.t
        end = log.latest if end is None else min(end, log.latest)
        reader.check_history("from a starting version", start)
        if start > end:
            raise bad(f"The starting version {start} is after the ending version {end}.")
        if cdf:
            if not t.object.get("cdf_enabled") and not t.history:
                raise bad(f"The change data feed of table '{t.schema}.{t.name}' is not shared.")
        state = await _in_thread(log.snapshot, end)
        if cdf and (state.metadata.get("configuration") or {}).get("delta.enableChangeDataFeed") != "true":
            raise bad(f"Table '{t.schema}.{t.name}' does not record its change data feed "
                      "(delta.enableChangeDataFeed is not true).")
        fmt = response_format(request, state.protocol or {})
        partition_columns = list(state.metadata.get("partitionColumns") or [])
        test = reader.partition_test(partition_columns)
        urls = FileUrls(request, shard, reader.r, t,
                        await file_signer(shard, reader.r.metastore_id, t.table.info["storage_location"]))

        def collect():
            out, sizes = [], {}
            for v in range(start, end + 1):
                actions = log.actions(v)
                ts = log.timestamp(v)
                has_cdc = cdf and any("cdc" in a for a in actions)
                for a in actions:
                    kind = next(iter(a))
                    body = a[kind]
                    if kind == "metaData" and historical_metadata and v > start:
                        out.append(metadata_line(fmt, body, t.name, v, None))
                    if kind not in ("add", "remove", "cdc"):
                        continue
                    if kind == "add":
                        sizes[body["path"]] = body.get("size")
                    if kind == "cdc" and not cdf:
                        continue
                    if cdf and has_cdc and kind != "cdc":
                        continue      # the commit's change files say it all
                    if kind != "cdc" and not body.get("dataChange", True):
                        continue      # a rewrite that changes no row (compaction)
                    values = body.get("partitionValues") or {}
                    if test is not None and not test(values):
                        continue
                    if kind == "remove" and body.get("size") is None:
                        body = {**body, "size": sizes.get(body["path"]) or 0}
                    out.append(file_line(fmt, "cdf" if kind == "cdc" else kind, body, urls, v, ts))
            return out

        lines = [protocol_line(fmt, state.protocol or {}), metadata_line(fmt, state.metadata, t.name, None, None)]
        lines += await _in_thread(collect)
        return ndjson(lines, start, fmt)

    async def changes(request):
        r, t = await _shared(request)
        q = request.query
        start = version_param(q.get("startingVersion"), "startingVersion")
        start_ts = timestamp_param(q.get("startingTimestamp"), "startingTimestamp")
        end = version_param(q.get("endingVersion"), "endingVersion")
        end_ts = timestamp_param(q.get("endingTimestamp"), "endingTimestamp")
        if (start is None) == (start_ts is None):
            raise bad("Give exactly one of 'startingVersion' and 'startingTimestamp'.")
        if end is not None and end_ts is not None:
            raise bad("Give at most one of 'endingVersion' and 'endingTimestamp'.")
        log = await server.log(t)
        if start_ts is not None:
            try:
                start = await asyncio.to_thread(log.version_from, start_ts)
            except TableLogError:
                raise bad(f"The startingTimestamp {iso(start_ts)} is after the table's latest version.") from None
        if end_ts is not None:
            try:
                end = await asyncio.to_thread(log.version_at, end_ts)
            except TableLogError:
                raise bad(f"The endingTimestamp {iso(end_ts)} is before the table's earliest version.") from None
        historical = (q.get("includeHistoricalMetadata") or "").lower() == "true"
        return await _changes(request, _Reader(server, r, t, log), start, end, cdf=True,
                              historical_metadata=historical)

    async def file(request):
        grant = files.verify(shard.store.secrets, request.match_info["token"],
                             request.query.get(files.SIGNATURE_PARAM, ""))
        if grant is None or grant.expires_ms <= now_ms():
            raise error("PERMISSION_DENIED", "This file URL is not valid or has expired.")
        # The grant holds while the share still holds the table for the recipient.
        recipient = await shard.lookup_id(grant.metastore_id, grant.recipient_id)
        share = await shard.lookup_id(grant.metastore_id, grant.share_id)
        table = await shard.lookup_id(grant.metastore_id, grant.table_id)
        if recipient is None or share is None or table is None or \
                "SELECT" not in (share.info.get("permissions", {}).get(recipient.id) or []):
            raise error("PERMISSION_DENIED", "This file is no longer shared.")
        # A URL never outlives the token it was handed out under: expired, or rotated past its grace.
        token = next((t for t in recipient.info.get("tokens", []) if t.get("id") == grant.token_id), None)
        if token is None or token["expiration_time"] <= now_ms():
            raise error("PERMISSION_DENIED", "The recipient token this file URL was handed out under has "
                                              "expired or was rotated.")
        r = Recipient(recipient, grant.metastore_id, {})
        address = client_address(request, shard.store.secrets)
        if not _ip_allowed(recipient, address):
            raise error("PERMISSION_DENIED", f"Requests from {address} are not on this recipient's IP access list.")
        holds = [t for t in await server.tables(r, share) if t.table.id == table.id]
        if not holds:
            raise error("PERMISSION_DENIED", "This file is no longer shared.")
        request["caller"] = Caller(f"recipient:{recipient.name}", 0, False, None, grant.metastore_id)
        annotate("TABLE", table.full_name, table.id)
        try:
            path = files.local_file(table.info["storage_location"], grant.path)
        except (InvalidUrl, ValueError):
            raise error("PERMISSION_DENIED", "This file is not in the shared table.") from None
        return web.FileResponse(path, headers={"Content-Type": "application/octet-stream"})

    handlers = {
        "deltaSharingListShares": list_shares, "deltaSharingGetShare": get_share,
        "deltaSharingListSchemas": list_schemas, "deltaSharingListTables": list_tables,
        "deltaSharingListAllTables": list_all_tables,
        "deltaSharingGetTableVersionHead": table_version_head,     # HEAD (the front relays HEAD as GET)
        "deltaSharingGetTableVersion": table_version, "deltaSharingGetTableMetadata": metadata,
        "deltaSharingQueryTable": query, "deltaSharingQueryTableChanges": changes, "deltaSharingGetFile": file,
    }
    return {name: protocol_errors(handler) for name, handler in handlers.items()}
