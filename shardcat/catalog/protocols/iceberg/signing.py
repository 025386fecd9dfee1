"""Remote signing (signRequest, POST .../tables/{table}/sign): the catalog signs a client's S3 request for a table.

For S3 stores an engine gets no keys from (a store without STS, or by choice), the table's config says
`s3.remote-signing-enabled` and where to sign, and each request the engine's S3 client makes is sent here
first. A request is signed only when it reaches this table's own objects: its host is the store's endpoint
(path-style or virtual-hosted), its bucket the table's, its object key (or a listing's prefix) under the table's
location, decoded once as S3 decodes it and free of `.`/`..` segments and empty ones; reads (GET, HEAD) need
SELECT on the table, anything else MODIFY, as reads and writes of its data do everywhere else (a UniForm
table, read-only through Iceberg, is signed for reads only). Requests no
engine needs to read or write a table (bucket settings, ACLs, DeleteObjects, whose keys are in a body) are
refused. The signature is botocore's SigV4, made with the credential vending gives for the table's location
(the STS answer scoped to that prefix, or the store's own keys), so what is signed could have been done with
vended keys; the keys themselves never leave the catalog.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ....auth import Caller
from ....entities.urls import s3_bucket_key
from ....governance import vending
from ....governance.authorize import authorizer
from ....governance.vending import vend
from .base import IcebergBase
from .errors import IcebergError, require_data

READS = ("GET", "HEAD")
METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE")
# The query parameters of the object requests an engine makes (get, put, multipart upload), and of a listing.
OBJECT_QUERY = {"x-id", "uploads", "uploadId", "partNumber", "versionId"}
LIST_QUERY = {"x-id", "list-type", "prefix", "delimiter", "continuation-token", "start-after", "max-keys",
              "encoding-type", "fetch-owner"}
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")
_PAYLOADS = ("UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")


class Refused(Exception):
    """A request this catalog does not sign (400: malformed; 403: outside the table or not an engine's)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def signing_config(signer_uri: str, signer_endpoint: str) -> dict:
    """The table config that turns remote signing on, for Iceberg's Java client and pyiceberg alike."""
    return {"s3.remote-signing-enabled": "true", "s3.signer.uri": signer_uri, "s3.signer.endpoint": signer_endpoint,
            "s3.signer": "S3V4RestSigner", "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}


def store_hosts(endpoint: str | None, region: str) -> tuple[str, set[str]]:
    """(scheme, the hosts requests may be sent to) of the S3 store: its endpoint, else AWS's for the region."""
    if endpoint:
        parts = urlsplit(endpoint)
        return parts.scheme, {parts.netloc.lower()}
    return "https", {"s3.amazonaws.com", f"s3.{region}.amazonaws.com"}


def target(uri: str, scheme: str, hosts: set[str]) -> tuple[str, str, dict]:
    """(bucket, object key, query) the request reaches, the key decoded once; Refused if it goes elsewhere."""
    try:
        parts = urlsplit(uri)
        parts.port                              # a port that is not a number raises here, not later
    except ValueError:
        raise Refused(400, f"'{uri[:200]}' is not a URL.") from None
    host = parts.netloc.lower()
    if parts.scheme != scheme or parts.username or parts.password or parts.fragment:
        raise Refused(403, f"'{uri[:200]}' is not a request to this table's store.")
    raw_path = parts.path
    if host in hosts:                           # path-style: /bucket/key
        bucket, _, raw_key = raw_path.lstrip("/").partition("/")
        if not raw_path.startswith("/"):
            raise Refused(400, "The request's path must start with '/'.")
    else:                                       # virtual-hosted: bucket.host/key
        bucket, _, rest = host.partition(".")
        if rest not in hosts or not bucket:
            raise Refused(403, f"'{uri[:200]}' is not a request to this table's store.")
        raw_key = raw_path[1:] if raw_path.startswith("/") else raw_path
    key = unquote(raw_key, errors="strict") if raw_key else ""
    query = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if name in query:
            raise Refused(400, f"The query parameter '{name}' is given twice.")
        query[name] = value
    return unquote(bucket), key, query


def _clean(key: str, what: str) -> None:
    segments = key.split("/")
    if any(s in (".", "..") for s in segments) or "" in segments[:-1] or "\\" in key or "\x00" in key:
        raise Refused(403, f"The {what} '{key[:200]}' has '.', '..' or empty segments; no such key is signed.")


def check(method: str, bucket: str, key: str, query: dict, location: str) -> None:
    """Refused unless the request reads or writes the objects under the table's `location` (an s3:// URL)."""
    if method not in METHODS:
        raise Refused(403, f"{method} requests are not signed.")
    table_bucket, table_key = s3_bucket_key(location)
    if bucket != table_bucket:
        raise Refused(403, f"Bucket '{bucket[:100]}' is not the table's.")
    prefix = f"{table_key}/" if table_key else ""
    if key:
        extra = set(query) - OBJECT_QUERY
        if extra:
            raise Refused(403, f"Object requests with {sorted(extra)} are not signed.")
        _clean(key, "key")
        if not key.startswith(prefix) or key == prefix:
            raise Refused(403, f"The key '{key[:200]}' lies outside the table's location '{location}'.")
        return
    # A bucket-level request: only a listing (GET) under the table's location.
    extra = set(query) - LIST_QUERY
    if method != "GET" or extra or "prefix" not in query:
        raise Refused(403, "Only object requests and listings with a prefix under the table's location are signed.")
    listed = query["prefix"]
    _clean(listed, "listing prefix")
    if not listed.startswith(prefix):
        raise Refused(403, f"The listing prefix '{listed[:200]}' lies outside the table's location '{location}'.")


def check_headers(headers: dict, uri: str) -> None:
    """Refused unless the headers leave the request the one checked: botocore signs a Host header given (S3
    then reads the bucket from it) and S3 reads a copy's source object with the signer's keys."""
    for name, value in headers.items():
        lowered = name.lower()
        if lowered.startswith("x-amz-copy-source"):
            raise Refused(403, "Requests that copy another object (x-amz-copy-source) are not signed.")
        if lowered == "host" and value.strip().lower() != urlsplit(uri).netloc.lower():
            raise Refused(403, "The request's Host header must name its URI's host.")


class _Signer(S3SigV4Auth):
    """botocore's S3 SigV4 over a payload hash given by the client (it has the body; the catalog does not)."""

    def __init__(self, credentials: Credentials, region: str, payload: str):
        super().__init__(credentials, "s3", region)
        self._payload = payload

    def payload(self, request):
        return self._payload


def sign(method: str, uri: str, headers: dict, region: str, keys: dict) -> dict:
    """The headers to add to the request (SigV4 by `keys`: access_key_id, secret_access_key, session_token?)."""
    given = {k: v for k, v in headers.items()}
    sent = next((v for k, v in given.items() if k.lower() == "x-amz-content-sha256"), None)
    payload = sent if sent in _PAYLOADS or (sent and _HEX_SHA256.fullmatch(sent)) else "UNSIGNED-PAYLOAD"
    kept = {k: v for k, v in given.items()
            if k.lower() not in ("authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256")}
    request = AWSRequest(method=method, url=uri, headers=kept)
    credentials = Credentials(keys["access_key_id"], keys["secret_access_key"], keys.get("session_token"))
    _Signer(credentials, region, payload).add_auth(request)
    return {k: [v] for k, v in request.headers.items() if kept.get(k) != v}


def endpoint_of(answer: dict) -> str | None:
    """The S3 endpoint requests go to: the store's (an s3_compatible credential's), else $SHARDCAT_S3_ENDPOINT."""
    return answer.get("endpoint_url") or os.environ.get("SHARDCAT_S3_ENDPOINT") or None


def _read(body: dict) -> tuple[str, str, str, dict]:
    """(method, uri, region, headers as single strings) of a RemoteSignRequest; 400 for anything else."""
    method, uri, region, headers = body.get("method"), body.get("uri"), body.get("region"), body.get("headers")
    if not isinstance(method, str) or not isinstance(uri, str) or not isinstance(region, str) or \
            not isinstance(headers, dict):
        raise IcebergError(400, "BadRequestException", "Fields 'method', 'uri', 'region' (strings) and 'headers' "
                                                       "(a map of lists of strings) are required.")
    if body.get("provider", "s3") != "s3":
        raise IcebergError(400, "BadRequestException", f"Only S3 requests are signed here, not "
                                                       f"'{str(body.get('provider'))[:40]}'.")
    flat = {}
    for name, values in headers.items():
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise IcebergError(400, "BadRequestException", "Each header's values must be a list of strings.")
        flat[name] = ", ".join(values)
    if not re.fullmatch(r"[a-z0-9-]{1,40}", region):
        raise IcebergError(400, "BadRequestException", "Field 'region' must be an AWS region name.")
    return method.upper(), uri, region, flat


class Signing(IcebergBase):
    """signRequest, and the table config that points a client at it."""

    async def sign_request(self, caller: Caller, full_name: str, body: dict) -> dict:
        method, uri, region, headers = _read(body)
        write = method not in READS
        asset = await self._table(caller, full_name, read=not write)   # a UniForm table is signed for reads only
        require_data(await authorizer(self.shard, caller), asset, write=write)   # SELECT to read, MODIFY to write
        location = asset.storage_path or ""
        if not location.startswith("s3:"):
            raise IcebergError(400, "BadRequestException", f"Table {full_name} is not on S3; nothing to sign.")
        answer = await vend(self.shard, caller, location, write=write)
        scheme, hosts = store_hosts(endpoint_of(answer), answer.get("region") or vending.region())
        try:
            bucket, key, query = target(uri, scheme, hosts)
            check(method, bucket, key, query, location)
            check_headers(headers, uri)
        except Refused as e:
            raise IcebergError(e.status, "ForbiddenException" if e.status == 403 else "BadRequestException",
                               str(e)) from None
        except UnicodeDecodeError:
            raise IcebergError(400, "BadRequestException", "The request's path is not UTF-8 once decoded.") from None
        return {"uri": uri, "headers": sign(method, uri, headers, region, answer["aws_temp_credentials"])}

    async def signs_for(self, caller: Caller, asset, delegation: frozenset[str]) -> bool:
        """Whether a load answers remote signing rather than keys: the client offers it
        (X-Iceberg-Access-Delegation), the table is on S3, and either the client takes nothing else or the
        store is reached with static keys (which cannot be scoped to the table)."""
        if "remote-signing" not in delegation or not (asset.storage_path or "").startswith("s3:"):
            return False
        if "vended-credentials" not in delegation:
            return True
        answer = await vend(self.shard, caller, asset.storage_path, write=False)
        return "session_token" not in answer.get("aws_temp_credentials", {"session_token": None})

    async def signing_config(self, caller: Caller, asset, signer: tuple[str, str]) -> dict:
        """The table config of a client that is to have its S3 requests signed (no keys): where to sign, and
        where the store is."""
        answer = await vend(self.shard, caller, asset.storage_path, write=False)
        out = signing_config(*signer)
        endpoint = endpoint_of(answer)
        if endpoint:
            out["s3.endpoint"] = endpoint
        out["s3.region"] = answer.get("region") or vending.region()
        if "path_style_access" in answer:
            out["s3.path-style-access"] = "true" if answer["path_style_access"] else "false"
            out["s3.force-virtual-addressing"] = "false" if answer["path_style_access"] else "true"
        return out
