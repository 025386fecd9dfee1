"""The Delta Sharing protocol on the wire: its error JSON, its request values (versions, timestamps,
JSON bodies), pages, and the NDJSON lines of a table's answer in the parquet or delta response format."""

from __future__ import annotations

import datetime as dt
import json
from typing import Protocol

from aiohttp import web

from ....delta.commits import FEATURE_PROPERTY
from . import files
from ....errors import CatalogError
from ....web.paging import decode_token, encode_token

CAPABILITIES = "delta-sharing-capabilities"
VERSION_HEADER = "Delta-Table-Version"
NDJSON = "application/x-ndjson"
MAX_PAGE = 1000
# What a recipient's copy of the table leaves out: the catalog's own management of it.
_CATALOG_FEATURES = {"catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"}
_CATALOG_CONFIG = ("delta.enableInCommitTimestamps", "delta.inCommitTimestamp", FEATURE_PROPERTY,
                   "io.unitycatalog.", "shardcat.")
# Reader features the parquet response format cannot carry: such tables answer in delta format.
_ADVANCED = {"deletionVectors", "columnMapping", "timestampNtz", "typeWidening", "v2Checkpoint"}


def error(code: str, message: str) -> CatalogError:
    return CatalogError(code, message)


def not_found(message: str) -> CatalogError:
    return CatalogError("NOT_FOUND", message)


def bad(message: str) -> CatalogError:
    return CatalogError("INVALID_PARAMETER_VALUE", message)


_PROTOCOL_CODES = {"NOT_FOUND": "RESOURCE_DOES_NOT_EXIST"}


def protocol_errors(handler):
    """The protocol's error JSON (`errorCode`, `message`) for a CatalogError out of a handler."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except CatalogError as e:
            return web.json_response({"errorCode": _PROTOCOL_CODES.get(e.code, e.code), "message": e.message},
                                     status=e.status)

    return wrapped



# ---- request values ----------------------------------------------------------------------

def timestamp_param(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise bad(f"'{name}' must be a timestamp like 2022-01-01T00:00:00Z, got '{text:.40}'.") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def version_param(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise bad(f"'{name}' must be a non-negative integer, got '{value:.40}'.") from None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise bad(f"'{name}' must be a non-negative integer, got {value!r:.40}.")
    return value


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---- paging ------------------------------------------------------------------------------


def page_of(request: web.Request, items: list[dict], key) -> dict:
    """A page of `items` (in `key` order) by the protocol's maxResults and pageToken."""
    raw = request.query.get("maxResults")
    size = MAX_PAGE if raw is None else min(version_param(raw, "maxResults"), MAX_PAGE)
    after = None
    token = request.query.get("pageToken")
    if token:
        after = decode_token(token, "after", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
        items = [i for i in items if list(key(i)) > after]
    page = items[:size]
    out = {"items": page}
    if len(items) > size:
        out["nextPageToken"] = encode_token(list(key(page[-1])) if page else (after or []))
    return out


# ---- table answers -----------------------------------------------------------------------


def capabilities(request: web.Request) -> dict[str, list[str]]:
    caps = {}
    for part in request.headers.get(CAPABILITIES, "").split(";"):
        key, _, values = part.partition("=")
        if key.strip():
            caps[key.strip().lower()] = [v.strip().lower() for v in values.split(",") if v.strip()]
    return caps


def response_format(request: web.Request, protocol: dict) -> str:
    asked = capabilities(request).get("responseformat") or ["parquet"]
    known = [f for f in asked if f in ("parquet", "delta")]
    if not known:
        raise bad(f"Unknown responseformat {','.join(asked):.60}; expected parquet or delta.")
    advanced = set(protocol.get("readerFeatures") or []) & _ADVANCED or protocol.get("minReaderVersion", 1) == 2
    if advanced:
        if "delta" not in known:
            raise bad("This table needs responseformat=delta (it uses reader features the parquet format "
                      "cannot carry).")
        return "delta"
    return "parquet" if "parquet" in known else "delta"


def shared_protocol(protocol: dict) -> dict:
    """The table's Delta protocol as the recipient's copy needs it: without the catalog's own features."""
    readers = [f for f in protocol.get("readerFeatures") or [] if f not in _CATALOG_FEATURES]
    if readers:
        return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": readers, "writerFeatures": readers}
    if protocol.get("minReaderVersion") == 2:      # column mapping, before table features
        return {"minReaderVersion": 2, "minWriterVersion": 5}
    return {"minReaderVersion": 1, "minWriterVersion": 2}


def shared_metadata(md: dict) -> dict:
    config = {k: v for k, v in (md.get("configuration") or {}).items() if not k.startswith(_CATALOG_CONFIG)}
    out = {**md, "configuration": config}
    out["format"] = {"provider": "parquet", "options": (md.get("format") or {}).get("options") or {}}
    return out


def metadata_line(fmt: str, md: dict, table_name: str, version: int | None, files_: dict | None) -> dict:
    md = shared_metadata(md)
    extra = {}
    if version is not None:
        extra["version"] = version
    if files_ is not None:
        extra["size"] = sum(int(a.get("size") or 0) for a in files_.values())
        extra["numFiles"] = len(files_)
    if fmt == "delta":
        return {"metaData": {"deltaMetadata": md, **extra}}
    out = {"id": md["id"], "name": table_name, "format": {"provider": "parquet"}, "schemaString": md["schemaString"],
           "partitionColumns": md.get("partitionColumns") or [], "configuration": md["configuration"], **extra}
    if md.get("description"):
        out["description"] = md["description"]
    return {"metaData": out}


def protocol_line(fmt: str, protocol: dict) -> dict:
    if fmt == "delta":
        return {"protocol": {"deltaProtocol": shared_protocol(protocol)}}
    return {"protocol": {"minReaderVersion": 1}}


def ndjson(lines: list[dict], version: int, fmt: str) -> web.Response:
    body = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
    return web.Response(body=body, content_type=NDJSON, charset="utf-8",
                        headers={VERSION_HEADER: str(version), CAPABILITIES: f"responseformat={fmt}"})


class SignsUrls(Protocol):
    """Pre-signed URLs for one answer's files, with their one expiry (server.py FileUrls)."""
    expires: int

    def url(self, path: str) -> str: ...


def file_line(fmt: str, kind: str, action: dict, urls: SignsUrls, version: int | None = None,
               timestamp: int | None = None) -> dict:
    """One file of an answer: `kind` is file (a snapshot's), add, remove or cdf (a change's)."""
    url = urls.url(action["path"])
    extra = {}
    if version is not None:
        extra.update(version=version, timestamp=timestamp)
    if fmt == "delta":
        single = {"cdc" if kind == "cdf" else ("add" if kind == "file" else kind): {**action, "path": url}}
        return {"file": {"id": files.file_id(action["path"]), "size": action.get("size"),
                         "expirationTimestamp": urls.expires, "deltaSingleAction": single, **extra}}
    out = {"url": url, "id": files.file_id(action["path"]), "partitionValues": action.get("partitionValues") or {},
           "size": int(action.get("size") or 0), "expirationTimestamp": urls.expires, **extra}
    if action.get("stats") and kind in ("file", "add"):
        out["stats"] = action["stats"]
    return {kind: out}


def limited(actions: list[dict], limit: int | None) -> list[dict]:
    """The first files whose records reach `limit` (files without a record count: all kept)."""
    if limit is None:
        return actions
    out, rows = [], 0
    for a in actions:
        if rows >= limit:
            break
        out.append(a)
        try:
            rows += int(json.loads(a.get("stats") or "{}").get("numRecords"))
        except (TypeError, ValueError):
            return actions
    return out


def json_body(raw: bytes) -> dict:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        raise error("MALFORMED_REQUEST", "The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise error("MALFORMED_REQUEST", "The request body must be a JSON object.")
    return body
