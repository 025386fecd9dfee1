"""Google Cloud Storage vending: an OAuth access token down-scoped to one asset's prefix, read or read-write.

The cloud module vending.py dispatches gs:// URLs to (issue 49, through clouds.py). Its credential kinds:

- `gcp_service_account_key`: a service account's JSON key fields (`email`, `private_key_id`,
  `private_key`; the private key sealed at rest), and shardcat's optional `endpoint_url` (an emulator:
  where engines and signed URLs send requests instead of https://storage.googleapis.com).
- `databricks_gcp_service_account`: the catalog's own service account (Databricks manages one per
  credential; shardcat has one): its key file is $SHARDCAT_GCP_SERVICE_ACCOUNT_KEY. The credential
  may name its `email`, which must then be that key's.

Vending: the service account's key signs a JWT-bearer grant at Google's OAuth token endpoint (a
*source* token with the devstorage scope, cached per account until near its expiry), then Google's
STS exchanges it for a token limited by a Credential Access Boundary (built with google-auth's
`google.auth.downscoped`): one rule on the URL's bucket, `inRole:roles/storage.objectViewer` to read
or `inRole:roles/storage.objectAdmin` to read-write, available only where
`resource.name.startsWith('projects/_/buckets/B/objects/PREFIX/')` or (listing)
`api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('PREFIX/')`; a whole
bucket has no condition. google-auth's `downscoped.Credentials` posts to https://sts.<universe>/v1/token
only, so the exchange is its own two parts used directly: the boundary's JSON and `google.oauth2.sts`.
The down-scoped token dies with its source token ("expiring with the credential"); answers are
cached per (account, URL, mode) until a safety margin before that.

Endpoints are the server's, never a credential's (a credential's creator must not make the catalog
call an address of their choosing): $SHARDCAT_GCP_TOKEN_URI (default Google's OAuth token endpoint;
a key's own `token_uri` is ignored) and $SHARDCAT_GCP_STS_ENDPOINT (default Google's STS).

Answers: the Unity Catalog API's `gcp_oauth_token` {`oauth_token`}, `expiration_time`, `url`, and
`endpoint_url` when the credential names one. Also here: V4 signed GET URLs for Delta Sharing,
signed locally with the key by google-cloud-storage (no call to Google).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import timedelta, timezone
from urllib.parse import urlsplit

from cachetools import TLRUCache

from ..entities.urls import gs_bucket_key
from ..errors import CatalogError

SCHEME = "gs"
KINDS = ("gcp_service_account_key", "databricks_gcp_service_account")
STORAGE_SCOPE = "https://www.googleapis.com/auth/devstorage.full_control"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
GOOGLE_STS = "https://sts.googleapis.com/v1/token"
GOOGLE_STORAGE = "https://storage.googleapis.com"
READ_ROLE = "inRole:roles/storage.objectViewer"
WRITE_ROLE = "inRole:roles/storage.objectAdmin"
LIST_PREFIX = "api.getAttribute('storage.googleapis.com/objectListPrefix', '')"
SAFETY_MARGIN_SECONDS = 300       # a cached token is not handed out this close to its expiry
HTTP_TIMEOUT_SECONDS = 10
_EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+\.[a-z]+")


# ---- pure parts: the boundary ------------------------------------------------------------------------


def cel_literal(text: str) -> str:
    """`text` as a single-quoted CEL string literal (backslash and quote escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def boundary_condition(bucket: str, prefix: str) -> str | None:
    """The availability condition limiting a rule to `prefix`'s objects and listings (None: the whole bucket).
    The trailing slash keeps a sibling such as prefix-old/ out, as the S3 policy's patterns do."""
    if not prefix:
        return None
    return (f"resource.name.startsWith({cel_literal(f'projects/_/buckets/{bucket}/objects/{prefix}/')})"
            f" || {LIST_PREFIX}.startsWith({cel_literal(prefix + '/')})")


def access_boundary(bucket: str, prefix: str, *, write: bool):
    """The Credential Access Boundary (google.auth.downscoped) for `prefix` of `bucket`."""
    from google.auth import downscoped
    expression = boundary_condition(bucket, prefix)
    condition = downscoped.AvailabilityCondition(expression, title="shardcat asset prefix") if expression else None
    return downscoped.CredentialAccessBoundary(rules=[downscoped.AccessBoundaryRule(
        available_resource=f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        available_permissions=[WRITE_ROLE if write else READ_ROLE],
        availability_condition=condition)])


# ---- credential fields -------------------------------------------------------------------------------


def _invalid(message: str) -> CatalogError:
    return CatalogError("INVALID_PARAMETER_VALUE", message)


def check_endpoint(kind: str, value: str) -> str:
    """An emulator's storage endpoint as stored: http(s)://host[:port], nothing else."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise _invalid(f"Field '{kind}.endpoint_url' is not a URL: '{value:.120}'.") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.path.strip("/") \
            or parts.query or parts.fragment or parts.username or parts.password:
        raise _invalid(f"Field '{kind}.endpoint_url' must be an http:// or https:// URL with a host and nothing "
                       f"after it, got '{value:.120}'.")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")


def check_fields(kind: str, out: dict) -> dict:
    """Finish a GCP credential's fields (string fields already checked): the email's form, the private key's
    (a PEM key google-auth can sign with), the endpoint's."""
    if out.get("email") and not _EMAIL_RE.fullmatch(out["email"]):
        raise _invalid(f"Field '{kind}.email' must be a service account's email, got '{out['email']:.80}'.")
    if kind == "gcp_service_account_key":
        key = out.get("private_key", "")
        if "-----BEGIN PRIVATE KEY-----" not in key:
            raise _invalid(f"Field '{kind}.private_key' must be the PEM private key of a service account's JSON key.")
    if out.get("endpoint_url"):
        out["endpoint_url"] = check_endpoint(kind, out["endpoint_url"])
    return out


def _server_account() -> dict:
    path = os.environ.get("SHARDCAT_GCP_SERVICE_ACCOUNT_KEY")
    if not path:
        raise CatalogError("FAILED_PRECONDITION", "A databricks_gcp_service_account credential needs the catalog's "
                                                  "own service account: set SHARDCAT_GCP_SERVICE_ACCOUNT_KEY to its "
                                                  "JSON key file.")
    try:
        with open(path) as f:
            key = json.load(f)
        return {"email": key["client_email"], "private_key_id": key["private_key_id"],
                "private_key": key["private_key"]}
    except (OSError, ValueError, KeyError) as e:
        raise CatalogError("FAILED_PRECONDITION", f"The catalog's service account key file cannot be read: "
                                                  f"{type(e).__name__}.") from None


def catalog_account_email() -> str:
    """The email of the catalog's own service account ("" when none is configured): a
    databricks_gcp_service_account credential shows it, as Databricks shows the one it manages."""
    try:
        return _server_account()["email"]
    except CatalogError:
        return ""


def signing_account(kind: str, fields: dict) -> dict:
    """{email, private_key_id, private_key} of the service account that vends for a credential."""
    if kind == "databricks_gcp_service_account":
        account = _server_account()
        if fields.get("email") and fields["email"] != account["email"]:
            raise CatalogError("FAILED_PRECONDITION", f"The credential names service account '{fields['email']}', "
                                                      "but the catalog's own is another.")
        return account
    return {name: fields[name] for name in ("email", "private_key_id", "private_key")}


def _service_account(account: dict):
    return _credentials(account["email"], account["private_key_id"], account["private_key"],
                        os.environ.get("SHARDCAT_GCP_TOKEN_URI") or GOOGLE_TOKEN_URI)


@functools.lru_cache(maxsize=64)
def _credentials(email: str, key_id: str, private_key: str, token_uri: str):
    """google-auth's service-account credentials, kept: loading an RSA key checks it, tens of
    milliseconds of CPU that a signed URL per shared file would otherwise pay each time."""
    from google.oauth2 import service_account
    try:
        return service_account.Credentials.from_service_account_info(
            {"type": "service_account", "client_email": email, "private_key_id": key_id, "private_key": private_key,
             "token_uri": token_uri}, scopes=[STORAGE_SCOPE])
    except (ValueError, TypeError) as e:
        raise CatalogError("FAILED_PRECONDITION", f"Service account '{email}' has a key google-auth "
                                                  f"cannot sign with: {type(e).__name__}.") from None


# ---- the token calls and their cache -----------------------------------------------------------------


@dataclass(frozen=True)
class GcpToken:
    token: str
    expires_at: float          # seconds since the epoch


def _request():
    """google-auth's HTTP transport, with a timeout on every call (its own default is two minutes)."""
    from google.auth.transport.requests import Request
    transport = Request()

    def request(*args, **kwargs):
        kwargs.setdefault("timeout", HTTP_TIMEOUT_SECONDS)
        return transport(*args, **kwargs)
    return request


def _google_error(what: str, e: Exception) -> CatalogError:
    from google.auth import exceptions
    if isinstance(e, exceptions.TransportError):
        return CatalogError("TEMPORARILY_UNAVAILABLE", f"Cannot reach Google's {what}: {e}")
    return CatalogError("FAILED_PRECONDITION", f"Google's {what} refused: {e}")


def _source_token(account: dict) -> GcpToken:
    """One blocking JWT-bearer grant (run it in a thread): the service account's own access token."""
    from google.auth import exceptions
    # A copy per grant: the kept credentials stay a signer, never holding a token other threads could see.
    credentials = copy.copy(_service_account(account))
    try:
        credentials.refresh(_request())
    except exceptions.GoogleAuthError as e:
        raise _google_error("OAuth token endpoint", e) from None
    expiry = credentials.expiry.replace(tzinfo=timezone.utc).timestamp() if credentials.expiry else time.time() + 3600
    return GcpToken(credentials.token, expiry)


def _exchange(source: GcpToken, bucket: str, prefix: str, write: bool) -> GcpToken:
    """One blocking STS token exchange (run it in a thread): `source` limited to the boundary of `prefix`."""
    from google.auth import exceptions
    from google.oauth2 import sts
    client = sts.Client(os.environ.get("SHARDCAT_GCP_STS_ENDPOINT") or GOOGLE_STS)
    try:
        answer = client.exchange_token(
            _request(), grant_type="urn:ietf:params:oauth:grant-type:token-exchange", subject_token=source.token,
            subject_token_type="urn:ietf:params:oauth:token-type:access_token",
            requested_token_type="urn:ietf:params:oauth:token-type:access_token",
            additional_options=access_boundary(bucket, prefix, write=write).to_json())
    except exceptions.GoogleAuthError as e:
        raise _google_error("STS", e) from None
    expires_in = answer.get("expires_in")
    # Never past the source token: a down-scoped token dies with it whatever STS says.
    expires_at = min(time.time() + int(expires_in), source.expires_at) if expires_in else source.expires_at
    return GcpToken(answer["access_token"], expires_at)


def _usable_until(key, value, now: float) -> float:
    return value.expires_at - SAFETY_MARGIN_SECONDS


class GcpVendor:
    """Source tokens per service account and down-scoped ones per (account, URL, mode), reused until near expiry."""

    def __init__(self, maxsize: int = 10_000):
        self.cache: TLRUCache = TLRUCache(maxsize=maxsize, ttu=_usable_until, timer=time.time)
        self.pending: dict[tuple, asyncio.Future] = {}
        self.stats = {"source_tokens": 0, "exchanges": 0, "cache_hits": 0}

    async def _once(self, key: tuple, fetch):
        """The cached value for `key`, else `fetch()` in a thread; concurrent callers share one fetch."""
        hit = self.cache.get(key)
        if hit is not None:
            self.stats["cache_hits"] += 1
            return hit
        if key in self.pending:
            return await asyncio.shield(self.pending[key])
        future = asyncio.get_running_loop().create_future()
        self.pending[key] = future
        try:
            found = await asyncio.to_thread(fetch)
            self.cache[key] = found
            future.set_result(found)
            return found
        except BaseException as e:
            future.set_exception(e)
            future.exception()            # retrieved: no warning when nobody shared it
            raise
        finally:
            del self.pending[key]

    async def token(self, account: dict, url: str, *, write: bool) -> GcpToken:
        bucket, prefix = gs_bucket_key(url)
        endpoints = (os.environ.get("SHARDCAT_GCP_TOKEN_URI"), os.environ.get("SHARDCAT_GCP_STS_ENDPOINT"))
        who = (account["email"], account["private_key_id"], endpoints)
        scoped = ("scoped", who, url, "READ_WRITE" if write else "READ")
        hit = self.cache.get(scoped)         # the common case: no need to look at the source token
        if hit is not None:
            self.stats["cache_hits"] += 1
            return hit

        def source_token():
            self.stats["source_tokens"] += 1
            return _source_token(account)
        source = await self._once(("source", who), source_token)

        def exchange():
            self.stats["exchanges"] += 1
            return _exchange(source, bucket, prefix, write)
        return await self._once(scoped, exchange)

    async def vend(self, kind: str, fields: dict, url: str, *, write: bool, now: int | None = None) -> dict:
        found = await self.token(signing_account(kind, fields), url, write=write)
        answer = {"gcp_oauth_token": {"oauth_token": found.token}, "expiration_time": int(found.expires_at * 1000),
                  "url": url}
        if fields.get("endpoint_url"):
            answer["endpoint_url"] = fields["endpoint_url"]
        return answer


GCP = GcpVendor()     # one per process, like vending.AWS


async def vend(kind: str, fields: dict, url: str, *, write: bool, now: int | None = None) -> dict:
    """The TemporaryCredentials answer for `url` (authorized already) under a credential of `kind`
    whose `fields` have their secrets opened."""
    return await GCP.vend(kind, fields, url, write=write, now=now)


# ---- Delta Sharing: V4 signed URLs ---------------------------------------------------------------------


def signed_url(kind: str, fields: dict, url: str, seconds: int) -> str:
    """A V4 signed GET of one gs:// object, signed locally with the service account's key (no network)."""
    from google.cloud import storage
    bucket, name = gs_bucket_key(url)
    credentials = _service_account(signing_account(kind, fields))
    # An anonymous client only carries settings: the key signs, and nothing is sent anywhere.
    blob = storage.Blob(name, storage.Bucket(client=storage.Client.create_anonymous_client(), name=bucket))
    return blob.generate_signed_url(version="v4", method="GET", credentials=credentials,
                                    expiration=timedelta(seconds=max(1, min(seconds, 7 * 24 * 3600))),
                                    api_access_endpoint=fields.get("endpoint_url") or GOOGLE_STORAGE)
