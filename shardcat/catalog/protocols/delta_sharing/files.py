"""Data files handed to recipients by pre-signed URL.

For `s3://` tables, S3 pre-signed GETs (boto3; $SHARDCAT_S3_ENDPOINT points at an S3-compatible
server). For `file://` tables shardcat serves the file itself: the URL carries what it may read
(metastore, share, table, the one file's path in the table, the recipient and its token, the
expiry), signed with an HMAC-SHA256 under a key derived from the server's secret keys
(store/sealing.py), so every shard of the server accepts it and a restart does not void it.
`server.py` checks the signature, the expiry, the token and that the share still serves the table
before it answers the bytes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from urllib.parse import quote

from ....entities.urls import InvalidUrl, join_url, local_path, normalize_url, url_segments

URL_SECONDS = int(os.environ.get("SHARDCAT_SHARING_URL_SECONDS", "3600"))
_CONTEXT = b"shardcat delta sharing file urls v1"
SIGNATURE_PARAM = "X-Databricks-Signature"
_fallback_key = secrets.token_bytes(32)     # a server without secret keys: URLs of this process only


@dataclass(frozen=True)
class FileGrant:
    """What one signed URL lets its bearer read."""
    metastore_id: str
    share_id: str
    table_id: str
    recipient_id: str
    path: str           # the file as the table's log names it
    expires_ms: int
    token_id: str       # the recipient token it was handed out under: the URL dies with it


def _keys(box) -> list[bytes]:
    raw = list(box.keys) if box is not None else []
    return [hmac.new(k if isinstance(k, bytes) else k.encode(), _CONTEXT, hashlib.sha256).digest()
            for k in raw] or [_fallback_key]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(box, grant: FileGrant) -> tuple[str, str]:
    """(the grant as URL text, its signature)."""
    payload = _b64(json.dumps([grant.metastore_id, grant.share_id, grant.table_id, grant.recipient_id,
                               grant.path, grant.expires_ms, grant.token_id], separators=(",", ":")).encode())
    mac = hmac.new(_keys(box)[0], payload.encode(), hashlib.sha256).digest()
    return payload, _b64(mac)


def verify(box, payload: str, mac: str) -> FileGrant | None:
    """The grant if one of the server's keys signed it; None otherwise (expiry: the caller's)."""
    try:
        given = _unb64(mac)
        if not any(hmac.compare_digest(hmac.new(k, payload.encode(), hashlib.sha256).digest(), given)
                   for k in _keys(box)):
            return None
        fields = json.loads(_unb64(payload))
        return FileGrant(*fields)
    except (ValueError, TypeError):
        return None


def grant_metastore(token: str) -> str | None:
    """The metastore a token names, unverified (to route it; the shard that serves it verifies it)."""
    try:
        fields = json.loads(_unb64(token))
        return fields[0] if isinstance(fields, list) and fields and isinstance(fields[0], str) else None
    except (ValueError, TypeError):
        return None


def data_file_url(location: str, path: str) -> str:
    """The canonical storage URL of a data file the table's log names (relative or absolute);
    InvalidUrl for one outside the table's location."""
    if "://" in path:
        url = normalize_url(path)
        if url_segments(url)[:len(url_segments(location))] != url_segments(location):
            raise InvalidUrl(path, "outside the table's location")
        return url
    return join_url(location, *path.split("/"))


def local_file(location: str, path: str) -> str:
    return local_path(data_file_url(location, path))


def signed_url(origin: str, prefix: str, box, grant: FileGrant) -> str:
    name = quote(grant.path.rsplit("/", 1)[-1], safe="")   # the file's own name last: readers see .parquet
    payload, mac = sign(box, grant)
    return f"{origin}{prefix}/files/{payload}/{name}?{SIGNATURE_PARAM}={mac}"


@functools.lru_cache(maxsize=8)
def _s3(endpoint: str | None, region: str, key_id: str | None):
    """A boto3 S3 client signing with SigV4 (the one S3 accepts in every region), one per setting."""
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, region_name=region, config=Config(signature_version="s3v4"))


def presigned_s3(url: str, seconds: int) -> str:
    """A pre-signed GET of an s3:// object (no network call: the signature is computed here)."""
    bucket, _, key = url[len("s3://"):].partition("/")
    client = _s3(os.environ.get("SHARDCAT_S3_ENDPOINT") or None, os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
                 os.environ.get("AWS_ACCESS_KEY_ID"))
    return client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                        ExpiresIn=max(1, seconds))


def file_id(path: str) -> str:
    """A file's stable id in its table (the same file, the same id, in every answer)."""
    return hashlib.md5(path.encode()).hexdigest()
