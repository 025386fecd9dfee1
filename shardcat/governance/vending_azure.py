"""Azure Data Lake Storage vending: a SAS limited to one asset's directory, read or read-write.

The cloud module vending.py dispatches abfss:// URLs to (issue 49). Its credential kinds:

- `azure_storage_key` (shardcat's kind, like s3_compatible; Databricks' API has none): the storage
  account's name and key, an optional `endpoint_url` (an emulator or Azure Stack: where engines send
  requests instead of https://<account>.blob.core.windows.net), and `hierarchical_namespace`
  (default true: an ADLS Gen2 account). The key signs a *service* SAS.
- `azure_service_principal` (directory_id, application_id, client_secret) and
  `azure_managed_identity` (the machine's identity, or the user-assigned one whose resource id is
  `managed_identity_id`, its token from the instance metadata service): shardcat gets an Entra ID token
  ($SHARDCAT_AZURE_AUTHORITY_HOST, required for both so nothing reaches a real cloud by accident),
  asks the account for a *user delegation key* and signs a user delegation SAS with it: the SAS can
  do no more than the identity's own roles allow. These kinds take the same optional `endpoint_url`
  and `hierarchical_namespace` (shardcat's). The token goes only to the account's own Azure endpoint
  or to an `endpoint_url` the operator listed in $SHARDCAT_AZURE_STORAGE_ENDPOINTS: a credential's
  creator (or owner) must not have the machine's identity token, or one signed in with a secret they
  never saw, sent to an address of their choosing.

Scope. On a hierarchical-namespace account the SAS is a directory SAS (`sr=d`, its depth signed
as `sdd`) on the asset's directory, or a container SAS when the asset is the container itself.
A flat-namespace account has no directories, and Blob storage has no prefix-scoped SAS: its SAS
is a container SAS (`sr=c`), reaching the whole container; docs/storage.md says so, as it says
for an s3_compatible store without STS. Permissions: read = read + list; read-write adds add,
create, write and delete. The SAS expires with the answer ($SHARDCAT_CREDENTIAL_SECONDS, the
same 900..43200 bounds as STS), HTTPS only unless the credential's endpoint is http://.

Answers use the Unity Catalog API's `azure_user_delegation_sas` {`sas_token`} for either kind of SAS,
with `endpoint_url` added when the credential names one. SAS signing is local HMAC work in the
Azure SDK's generators (azure-storage-file-datalake, azure-storage-blob); answers are cached
per (account, key or identity, URL, mode) until a safety margin before they expire, as S3's are.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

from cachetools import TLRUCache

from ..entities.urls import adls_parts
from ..errors import CatalogError

SCHEME = "abfss"
KINDS = ("azure_storage_key", "azure_service_principal", "azure_managed_identity")
MIN_SECONDS, MAX_SECONDS, DEFAULT_SECONDS = 900, 43200, 3600
SAFETY_MARGIN_SECONDS = 300
_ACCOUNT_RE = re.compile("[a-z0-9]{3,24}")     # Azure's storage account names
STORAGE_SCOPE = "https://storage.azure.com/.default"
_AZURE_AUTHORITIES = ("login.microsoftonline.com", "login.chinacloudapi.cn", "login.microsoftonline.us")


def lifetime_seconds() -> int:
    raw = os.environ.get("SHARDCAT_CREDENTIAL_SECONDS", "")
    seconds = int(raw) if raw.isdecimal() else DEFAULT_SECONDS
    return max(MIN_SECONDS, min(MAX_SECONDS, seconds))


def check_endpoint(value: str, kind: str = "azure_storage_key") -> str:
    """An emulator's or Azure Stack's blob endpoint as stored: http(s)://host[:port][/account]."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise CatalogError("INVALID_PARAMETER_VALUE", f"Field '{kind}.endpoint_url' is not a URL: "
                                                      f"'{value:.120}'.") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.query or parts.fragment \
            or parts.username or parts.password:
        raise CatalogError("INVALID_PARAMETER_VALUE", f"Field '{kind}.endpoint_url' must be an http:// or "
                                                      f"https:// URL with a host and no query or user, got '{value:.120}'.")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    path = parts.path.rstrip("/")
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "") + path


def check_fields(kind: str, value: dict, out: dict) -> dict:
    """Finish an Azure kind's fields (the string fields already checked): an azure_storage_key's account
    name; shardcat's optional `endpoint_url` (its form) and `hierarchical_namespace` (a boolean,
    default true) on every kind."""
    name = out.get("account_name")
    if kind == "azure_storage_key" and not _ACCOUNT_RE.fullmatch(name):
        raise CatalogError("INVALID_PARAMETER_VALUE", "Field 'azure_storage_key.account_name' must be 3-24 lower-case "
                                                      f"letters and digits, got '{name:.40}'.")
    if out.get("endpoint_url"):
        out["endpoint_url"] = check_endpoint(out["endpoint_url"], kind)
    flag = value.get("hierarchical_namespace")
    if flag is not None:
        if not isinstance(flag, bool):
            raise CatalogError("INVALID_PARAMETER_VALUE", f"Field '{kind}.hierarchical_namespace' must be "
                                                          "true or false.")
        out["hierarchical_namespace"] = flag
    return out


# ---- the SAS ------------------------------------------------------------------------------


def _permission(write: bool) -> str:
    # r read, l list; a add, c create, w write, d delete: the letters of both SAS permission classes.
    return "racwdl" if write else "rl"


def sign_sas(account: str, container: str, directory: str, *, write: bool, expiry: datetime,
             account_key: str | None = None, delegation_key=None, directories: bool = True,
             https_only: bool = True) -> str:
    """The SAS token (no leading '?') for `directory` of `container` (the container when `directory`
    is empty or the account has no directories), signed with the account key or a user delegation key."""
    from azure.storage.blob import generate_container_sas
    from azure.storage.filedatalake import generate_directory_sas

    protocol = "https" if https_only else "https,http"
    signer = account_key if account_key is not None else delegation_key
    if directories and directory:
        return generate_directory_sas(account, container, directory, signer, permission=_permission(write),
                                      expiry=expiry, protocol=protocol)
    return generate_container_sas(account, container, account_key=account_key, user_delegation_key=delegation_key,
                                  permission=_permission(write), expiry=expiry, protocol=protocol)


def signed_url(kind: str, fields: dict, url: str, seconds: int) -> str:
    """A pre-signed read URL for one file (Delta Sharing): a blob SAS (`sr=b`, read only) signed with
    the account key of an azure_storage_key credential, on the account's blob endpoint. (An Entra ID
    identity would need a user delegation key per answer: not offered, FAILED_PRECONDITION.)"""
    from azure.storage.blob import BlobSasPermissions, generate_blob_sas
    from urllib.parse import quote

    if kind != "azure_storage_key":
        raise CatalogError("FAILED_PRECONDITION", f"Delta Sharing pre-signs abfss:// files with an azure_storage_key "
                                                  f"credential only; '{url}' is covered by an {kind}.")
    account, container, _, name = adls_parts(url)
    _same_account(fields, account, url)
    endpoint = fields.get("endpoint_url") or f"https://{account}.blob.core.windows.net"
    token = generate_blob_sas(account, container, name, account_key=fields["account_key"],
                              permission=BlobSasPermissions(read=True),
                              expiry=datetime.now(timezone.utc) + timedelta(seconds=seconds),
                              protocol="https" if endpoint.startswith("https:") else "https,http")
    return f"{endpoint}/{container}/{quote(name, safe='/')}?{token}"


def _same_account(fields: dict, account: str, url: str) -> None:
    if fields.get("account_name") and fields["account_name"] != account:
        raise CatalogError("FAILED_PRECONDITION", f"The credential covering '{url}' is for storage account "
                                                  f"'{fields['account_name']}', not '{account}'.")


# ---- user delegation keys (service principals, managed identities) ------------------------


def token_endpoint_allowed(endpoint: str) -> None:
    """Refuse an `endpoint_url` the operator did not list ($SHARDCAT_AZURE_STORAGE_ENDPOINTS, comma-separated
    blob endpoints, compared in check_endpoint's form): an Entra ID token is sent there."""
    listed = set()
    for value in os.environ.get("SHARDCAT_AZURE_STORAGE_ENDPOINTS", "").split(","):
        try:
            listed.add(check_endpoint(value.strip()))
        except CatalogError:
            continue
    if check_endpoint(endpoint) not in listed:
        raise CatalogError("FAILED_PRECONDITION", f"The credential's endpoint_url '{endpoint:.120}' is not one this "
                                                  "server sends Entra ID tokens to: only the storage account's own "
                                                  "Azure endpoint, or those the operator lists in "
                                                  "$SHARDCAT_AZURE_STORAGE_ENDPOINTS (or with `shardcat serve "
                                                  "--azure-storage-endpoint`).")



def _token_credential(kind: str, fields: dict):
    from azure.identity import ClientSecretCredential, ManagedIdentityCredential

    authority = os.environ.get("SHARDCAT_AZURE_AUTHORITY_HOST")
    if not authority:
        raise CatalogError("FAILED_PRECONDITION", "shardcat does not vend with Azure identities here: no Entra ID "
                                                  "authority is configured (set SHARDCAT_AZURE_AUTHORITY_HOST, e.g. "
                                                  "https://login.microsoftonline.com).")
    # Instance discovery asks Microsoft's public cloud about an authority it does not know: only for Azure's own.
    public = urlsplit(authority).hostname in _AZURE_AUTHORITIES
    if kind == "azure_service_principal":
        return ClientSecretCredential(fields["directory_id"], fields["application_id"], fields["client_secret"],
                                      authority=authority, disable_instance_discovery=not public)
    # The machine's identity, from its instance metadata service (the SDK's AZURE_POD_IDENTITY_AUTHORITY_HOST, else
    # Azure's fixed link-local address); a user-assigned one is named by its resource id, as in Databricks' API.
    resource_id = fields.get("managed_identity_id")
    return ManagedIdentityCredential(identity_config={"resource_id": resource_id} if resource_id else None,
                                     retry_total=2)


def _delegation_key(kind: str, fields: dict, account: str, endpoint: str | None, expiry: datetime):
    """Two blocking round trips (run them in a thread): an Entra ID token, then the account's user delegation key."""
    from azure.core.credentials import AccessToken
    from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError
    from azure.storage.blob import BlobServiceClient

    try:
        token = _token_credential(kind, fields).get_token(STORAGE_SCOPE)
    except ClientAuthenticationError:
        if kind == "azure_managed_identity":       # (CredentialUnavailableError: no such identity, or no service)
            raise CatalogError("FAILED_PRECONDITION", "The instance metadata service gave no token for the "
                                                      f"azure_managed_identity (storage account '{account}').") from None
        raise CatalogError("FAILED_PRECONDITION", f"Entra ID refused the {kind}'s sign-in for storage account "
                                                  f"'{account}'.") from None
    except AzureError as e:
        raise CatalogError("TEMPORARILY_UNAVAILABLE", f"Cannot reach Entra ID: {type(e).__name__}.") from None

    class Token:             # the token just obtained, as the storage client's credential
        def get_token(self, *scopes, **kwargs) -> AccessToken:
            return token

    client = BlobServiceClient(endpoint or f"https://{account}.blob.core.windows.net", credential=Token(),
                               retry_total=2)
    try:
        return client.get_user_delegation_key(datetime.now(timezone.utc) - timedelta(minutes=5), expiry)
    except HttpResponseError as e:
        raise CatalogError("FAILED_PRECONDITION", f"Storage account '{account}' refused a user delegation key: "
                                                  f"{getattr(e, 'error_code', None) or e.status_code}.") from None
    except AzureError as e:
        raise CatalogError("TEMPORARILY_UNAVAILABLE", f"Cannot get a user delegation key for '{account}': "
                                                      f"{type(e).__name__}.") from None


# ---- the vendor ---------------------------------------------------------------------------


def _usable_until(key, value: dict, now: float) -> float:
    return value["expiration_time"] / 1000 - SAFETY_MARGIN_SECONDS


def _key_usable_until(key, value: tuple, now: float) -> float:
    return value[1].timestamp() - SAFETY_MARGIN_SECONDS


class AzureVendor:
    """SAS answers per (account, signer, URL, mode), reused until near expiry; user delegation keys per
    (identity, account), each valid for two SAS lifetimes, so a new path's SAS costs no round trip."""

    def __init__(self, maxsize: int = 10_000):
        self.cache: TLRUCache = TLRUCache(maxsize=maxsize, ttu=_usable_until, timer=time.time)
        self.delegation_keys: TLRUCache = TLRUCache(maxsize=1_000, ttu=_key_usable_until, timer=time.time)
        self.stats = {"signed": 0, "delegation_keys": 0, "cache_hits": 0}

    async def _delegation(self, kind: str, signer: tuple, fields: dict, account: str, expiry: datetime):
        """A user delegation key valid at least until `expiry`: the cached one, or a new one."""
        endpoint = fields.get("endpoint_url")
        if endpoint:
            token_endpoint_allowed(endpoint)       # before any token is asked for
        key = (kind, signer, account, endpoint)
        found = self.delegation_keys.get(key)
        if found is not None and found[1] >= expiry:
            return found[0]
        until = expiry + timedelta(seconds=lifetime_seconds())       # Azure allows up to 7 days
        self.stats["delegation_keys"] += 1
        delegation = await asyncio.to_thread(_delegation_key, kind, fields, account, endpoint, until)
        self.delegation_keys[key] = (delegation, until)
        return delegation

    async def vend(self, kind: str, fields: dict, url: str, *, write: bool, now: int | None = None) -> dict:
        signer = tuple(sorted(fields.items()))      # the credential's fields, secret included: another key, other answers
        key = (kind, signer, url, "READ_WRITE" if write else "READ")
        hit = self.cache.get(key)
        if hit is not None:
            self.stats["cache_hits"] += 1
            return hit
        account, container, _, directory = adls_parts(url)
        _same_account(fields, account, url)
        endpoint = fields.get("endpoint_url")
        expiry = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=lifetime_seconds())
        common = {"write": write, "expiry": expiry, "https_only": not (endpoint or "").startswith("http:")}
        if kind == "azure_storage_key":
            token = sign_sas(account, container, directory, account_key=fields["account_key"],
                             directories=fields.get("hierarchical_namespace", True), **common)
        else:
            delegation = await self._delegation(kind, signer, fields, account, expiry)
            token = sign_sas(account, container, directory, delegation_key=delegation,
                             directories=fields.get("hierarchical_namespace", True), **common)
        self.stats["signed"] += 1
        answer = {"azure_user_delegation_sas": {"sas_token": token},
                  "expiration_time": int(expiry.timestamp() * 1000), "url": url}
        if endpoint:
            answer["endpoint_url"] = endpoint
        self.cache[key] = answer
        return answer


AZURE = AzureVendor()     # one per process, like vending.AWS


async def vend(kind: str, fields: dict, url: str, *, write: bool, now: int | None = None) -> dict:
    """The TemporaryCredentials answer for `url` (authorized already) under a credential of `kind`
    whose `fields` have their secrets opened."""
    return await AZURE.vend(kind, fields, url, write=write, now=now)
