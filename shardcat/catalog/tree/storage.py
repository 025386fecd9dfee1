"""Credentials, external locations and the files listing, with their HTTP routes.

Credentials live at the metastore level in one namespace that two namings share:
`/credentials` (open-source API; purpose STORAGE or SERVICE) and `/storage-credentials`
(2.1 API; STORAGE ones only). A credential holds exactly one kind: an AWS IAM role,
an Azure service principal, managed identity or storage account key (governance/vending_azure.py),
a GCP service account key or the catalog's own GCP service account, or an S3-compatible store's
endpoint and keys (governance/s3_compatible.py); secrets (client_secret, account_key, private_key,
secret_access_key) are stored encrypted (store/sealing.py) and never shown.

External locations bind a URL to a storage credential. Their URLs live in the shard
state's own trie (`MetastoreState.locations`): two locations may not overlap, while
tables, volumes and managed storage roots lie inside them (locations.py has the rule
external tables and volumes follow). `GET /files` lists what lies at a URL inside an
external location, for file:// and s3:// (boto3: the store and keys of an s3_compatible
credential, else shardcat's own identity with the endpoint from $SHARDCAT_S3_ENDPOINT):
the asset owning the URL authorizes it as by name (path_access.py), the file path or key
comes from the canonical URL (entities/urls.py), and a local walk never leaves the location
(no '..', no symbolic link followed below the location's directory).
"""

from __future__ import annotations

import dataclasses

import asyncio
import errno
import os
import stat
import uuid


from ...auth import Caller
from ...entities.urls import InvalidUrl, is_within, join_url, local_path, normalize_url, s3_bucket_key, storage_names
from ...entities.asset import Asset
from ...entities.types import CREDENTIAL, CREDENTIAL_KINDS, EXTERNAL_LOCATION
from ...entities.text import bad_char
from ...errors import CatalogError, invalid, not_found
from ...governance import s3_compatible, vending_azure, vending_gcs
from ...store.writes import WriteTx
from ...shards.shard import MetastoreState, Shard
from ...store.sealing import SECRET_FIELDS, SecretKeyError, seal_credential_info
from ...shards.locations import outside_locations
from ...web.paging import decode_token, encode_token, page_size
from .assets import render
from .path_access import authorize_path
from .crud import MetastoreLevel, crud_handlers
from ...web.kit import ok
from ...web.routes import Handler, ShardServing

PURPOSES = ("STORAGE", "SERVICE")
# The identity shardcat would assume AWS roles as; real vending comes with governance.
UC_IAM_ARN = os.environ.get("SHARDCAT_AWS_IAM_ARN", "arn:aws:iam::000000000000:role/shardcat-unity-catalog")

# Each kind's fields: (required on create, secret: stored, never shown).
_KIND_FIELDS = {
    "aws_iam_role": (("role_arn",), ()),
    "azure_service_principal": (("directory_id", "application_id", "client_secret"),
                                SECRET_FIELDS["azure_service_principal"]),
    "azure_managed_identity": (("access_connector_id",), ()),
    "gcp_service_account_key": (("email", "private_key_id", "private_key"), SECRET_FIELDS["gcp_service_account_key"]),
    s3_compatible.KIND: (s3_compatible.REQUIRED, SECRET_FIELDS[s3_compatible.KIND]),
    # shardcat's (Databricks' API has no account-key kind): the key signs service SAS (governance/vending_azure.py)
    "azure_storage_key": (("account_name", "account_key"), SECRET_FIELDS["azure_storage_key"]),
    # Databricks' request is {}: the service account is the catalog's own ($SHARDCAT_GCP_SERVICE_ACCOUNT_EMAIL)
    "databricks_gcp_service_account": ((), ()),
}
_KIND_OPTIONAL = {"azure_managed_identity": ("managed_identity_id", "endpoint_url"),
                  s3_compatible.KIND: s3_compatible.OPTIONAL, "azure_service_principal": ("endpoint_url",),
                  "azure_storage_key": ("endpoint_url",), "gcp_service_account_key": ("endpoint_url",)}


def storage_url(value: str, what: str = "url") -> str:
    try:
        return normalize_url(value)
    except InvalidUrl as e:
        raise invalid(f"Invalid {what}: {e}") from None


def _check_kind(kind: str, value: dict, old: dict | None) -> dict:
    """A credential kind's fields, type-checked; `old` (same kind) fills what an update leaves out."""
    required, _ = _KIND_FIELDS[kind]
    allowed = required + _KIND_OPTIONAL.get(kind, ())
    out = dict(old or {})
    for key in allowed:
        v = value.get(key)
        if v is None:
            continue
        if not isinstance(v, str) or not v:
            raise invalid(f"Field '{kind}.{key}' must be a non-empty string.")
        out[key] = v
    missing = [k for k in required if not out.get(k)]
    if missing:
        raise invalid(f"Missing required field '{kind}.{missing[0]}' of the {kind} credential.")
    if kind == "aws_iam_role":
        if not out["role_arn"].startswith("arn:"):
            raise invalid(f"Field 'aws_iam_role.role_arn' must be an ARN (arn:aws:iam::...), got '{out['role_arn']:.80}'.")
        out.setdefault("external_id", str(uuid.uuid4()))   # stable for the credential's life
        out["unity_catalog_iam_arn"] = UC_IAM_ARN
    if kind == s3_compatible.KIND:
        out = s3_compatible.check(value, out)
    if kind in vending_azure.KINDS:
        out = vending_azure.check_fields(kind, value, out)
    if kind == "databricks_gcp_service_account":
        out["email"] = vending_gcs.catalog_account_email()    # output only, as in Databricks: the catalog's own
    if kind in vending_gcs.KINDS:
        out = vending_gcs.check_fields(kind, out)
    return out


# Fields that decide where the engines reading a credential's locations send what they are given, and how far
# an Azure SAS reaches: an owner is not every reader, so only a metastore admin changes them once they are set.
_REACH_FIELDS = ("endpoint_url", "hierarchical_namespace")


def _keep_reach(before: dict, after: dict, name: str) -> None:
    changed = [f for f in _REACH_FIELDS if before.get(f) != after.get(f)]
    if changed:
        raise CatalogError("PERMISSION_DENIED", f"Only a metastore admin may change {', '.join(changed)} of credential "
                                                f"'{name}': readers of its locations' tables are sent there, or given "
                                                "that reach.")


async def _reachable(kind: str, fields: dict) -> None:
    """An s3_compatible endpoint the catalog would call (GET /files, STS, metadata): public or listed, else 400."""
    if kind == s3_compatible.KIND:
        await asyncio.to_thread(s3_compatible.check_reachable, fields["endpoint_url"])


def _given_kinds(fields: dict) -> list[str]:
    return [k for k in CREDENTIAL_KINDS if k in fields]


class Credentials(MetastoreLevel):
    """`purpose_only="STORAGE"` serves the 2.1 `/storage-credentials` view of the same objects."""

    def __init__(self, shard: Shard, purpose_only: str | None = None, label: str = "Credential"):
        super().__init__(shard, CREDENTIAL, label)
        self.purpose_only = purpose_only
        if purpose_only is not None:
            self.shows = lambda asset: asset.info.get("purpose") == purpose_only

    def output(self, asset: Asset) -> dict:
        out = render(asset)
        for kind in CREDENTIAL_KINDS:
            if kind in out:
                out[kind] = {k: v for k, v in out[kind].items() if k not in _KIND_FIELDS[kind][1]}
        return out

    async def on_create(self, tx, state, asset, parent, flags):
        info = dict(asset.info)
        purpose = info.get("purpose") or "STORAGE"
        if purpose not in PURPOSES:
            raise invalid(f"Unknown purpose '{purpose:.40}'; expected one of {', '.join(PURPOSES)}.")
        if self.purpose_only and purpose != self.purpose_only:
            raise invalid(f"A storage credential has purpose STORAGE, not '{purpose:.40}'; use /credentials.")
        kinds = _given_kinds(info)
        if len(kinds) != 1:
            raise invalid("A credential needs exactly one of " + ", ".join(CREDENTIAL_KINDS)
                          + (f"; got {', '.join(kinds)}." if kinds else "; got none."))
        info[kinds[0]] = _check_kind(kinds[0], info[kinds[0]], None)
        await _reachable(kinds[0], info[kinds[0]])
        info["purpose"] = purpose
        info.setdefault("read_only", False)
        return dataclasses.replace(asset, info=self._sealed(info))

    async def on_update(self, tx, state, old, new, fields, flags):
        info = dict(new.info)
        kinds = _given_kinds(fields)
        if len(kinds) > 1:
            raise invalid(f"A credential holds exactly one kind; the update names {', '.join(kinds)}.")
        if kinds:
            kind = kinds[0]
            for other in CREDENTIAL_KINDS:
                if other != kind:
                    info.pop(other, None)
            info[kind] = _check_kind(kind, fields[kind], old.info.get(kind))
            authz = flags.get("authz")
            if authz is not None and not authz.admin:
                _keep_reach(old.info.get(kind) or {}, info[kind], new.name)
            await _reachable(kind, info[kind])
        return dataclasses.replace(new, info=self._sealed(info))

    def _sealed(self, info: dict) -> dict:
        """Secrets are encrypted before they reach the database (store/sealing.py)."""
        try:
            return seal_credential_info(self.shard.store.secrets, info)
        except SecretKeyError as e:
            raise CatalogError("FAILED_PRECONDITION", f"This server cannot store credential secrets: {e}.") from None

    async def _dependents(self, tx: WriteTx, state: MetastoreState, credential: Asset) -> list[Asset]:
        found = []
        for _, owner in state.locations.items():
            location = await tx.get("external_location", owner.full_name)
            if location is not None and location.info.get("credential_id") == credential.id:
                found.append(location)
        return found

    async def on_rename(self, tx, state, old, new):
        for location in await self._dependents(tx, state, old):
            await tx.put(dataclasses.replace(location, info={**location.info, "credential_name": new.name}))

    async def on_delete(self, tx, state, asset, force):
        # Tables reach storage through external locations, so the locations are the dependents.
        dependents = await self._dependents(tx, state, asset)
        if dependents and not force:
            raise CatalogError(
                "FAILED_PRECONDITION",
                f"Credential '{asset.name}' is used by {len(dependents)} external location(s), e.g. "
                f"'{dependents[0].name}'. Delete them first or pass force=true.")


class ExternalLocations(MetastoreLevel):
    def __init__(self, shard: Shard):
        super().__init__(shard, EXTERNAL_LOCATION, "External location")

    async def _credential(self, tx: WriteTx, name: str) -> Asset:
        credential = await tx.get("credential", name.lower())
        if credential is None:
            raise not_found(f"Credential '{name}' does not exist.")
        if credential.info.get("purpose", "STORAGE") != "STORAGE":
            raise invalid(f"Credential '{name}' has purpose {credential.info.get('purpose')}; "
                          "an external location needs a STORAGE credential.")
        # Whether the creator may use the credential (CREATE EXTERNAL LOCATION on it) comes with governance.
        return credential

    @staticmethod
    def _check_url_free(state: MetastoreState, url: str, self_id: str | None = None) -> None:
        owner = state.trie.owner(url)   # inside a table's or volume's own storage: not a location
        if owner is not None and not owner[1].is_root:
            raise invalid(f"The url '{url}' lies inside the storage of {owner[1].type} "
                          f"'{owner[1].full_name}' at '{owner[0]}'.")
        hit = state.locations.first_overlap(url, ignore=lambda o: o.asset_id == self_id)
        if hit is not None:
            raise invalid(f"The url '{url}' overlaps external location '{hit[1].full_name}' at '{hit[0]}'.")

    async def on_create(self, tx, state, asset, parent, flags):
        info = dict(asset.info)
        url = storage_url(info["url"])
        self._check_url_free(state, url)
        credential = await self._credential(tx, info["credential_name"])
        info.update(url=url, credential_name=credential.name, credential_id=credential.id)
        info.setdefault("read_only", False)
        return dataclasses.replace(asset, info=info, storage_path=url)

    @staticmethod
    def dependents(state: MetastoreState, url: str, keep_url: str | None = None) -> list[tuple[str, object]]:
        """Assets whose storage lies at or under `url` (and not under `keep_url`), the metastore root aside."""
        found = []
        at = state.trie.get(url)
        entries = ([(url, at)] if at is not None else []) + list(state.trie.descendants(url))
        for entry_url, owner in entries:
            if owner.type == "metastore":
                continue
            if keep_url is not None and is_within(entry_url, keep_url):
                continue
            found.append((entry_url, owner))
        return found

    async def on_update(self, tx, state, old, new, fields, flags):
        info = dict(new.info)
        path = old.storage_path
        if "url" in fields:
            url = storage_url(fields["url"])
            if url != old.storage_path:
                self._check_url_free(state, url, self_id=old.id)
                left = self.dependents(state, old.storage_path, keep_url=url)
                if left and not flags.get("force"):
                    raise CatalogError(
                        "FAILED_PRECONDITION",
                        f"Moving external location '{old.name}' to '{url}' leaves {len(left)} object(s) outside it, "
                        f"e.g. {left[0][1].type} '{left[0][1].full_name}'. Pass force=true to move it anyway.")
            info["url"] = url
            path = url
        if "credential_name" in fields:
            credential = await self._credential(tx, fields["credential_name"])
            info.update(credential_name=credential.name, credential_id=credential.id)
        return dataclasses.replace(new, info=info, storage_path=path)

    async def on_delete(self, tx, state, asset, force):
        below = self.dependents(state, asset.storage_path)
        if below and not force:
            raise CatalogError(
                "FAILED_PRECONDITION",
                f"External location '{asset.name}' holds {len(below)} object(s), e.g. {below[0][1].type} "
                f"'{below[0][1].full_name}'. Delete them first or pass force=true.")


# ---- GET /files -------------------------------------------------------------------


def _files_token(after: str) -> str:
    return encode_token(after, "files_after")


def _files_after(token: str | None) -> str:
    return decode_token(token, "files_after", lambda v: isinstance(v, str) and bad_char(v) is None) if token else ""


# Opening a directory below a location's root: never through a symbolic link (O_NOFOLLOW).
_DIR_BELOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _file_entry(url: str, name: str, st: os.stat_result) -> dict:
    is_dir = stat.S_ISDIR(st.st_mode)
    return {"path": url, "name": name, "size": 0 if is_dir else st.st_size,
            "mtime": int(st.st_mtime * 1000), "is_dir": is_dir}


def _symlink_refused(url: str) -> CatalogError:
    return invalid(f"The url '{url}' passes through a symbolic link inside its external location; "
                   "shardcat does not follow symbolic links there.")


def _list_local(location_url: str, url: str, after: str, limit: int) -> tuple[list[dict], bool]:
    """List `url`, which lies at or below external location `location_url`, without ever leaving it.

    The walk starts at the location's directory (its own path is the location creator's: followed
    as written) and opens each name below it relative to its parent, refusing symbolic links, so
    neither a spelling (canonical names hold no '/', '.' or '..') nor a link can lead outside."""
    _, location_names = storage_names(location_url)
    _, names = storage_names(url)
    below = names[len(location_names):]
    try:
        fd = os.open(local_path(location_url), os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise not_found(f"No file or directory at '{url}'.") from None
    except OSError as e:
        raise CatalogError("FAILED_PRECONDITION", f"Cannot list '{url}': {e.strerror}.") from None
    try:
        for i, name in enumerate(below):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                raise not_found(f"No file or directory at '{url}'.") from None
            if stat.S_ISLNK(st.st_mode):
                raise _symlink_refused(url)
            if not stat.S_ISDIR(st.st_mode):
                if i == len(below) - 1:
                    return [_file_entry(url, name, st)], False
                raise not_found(f"No file or directory at '{url}'.")
            try:
                inner = os.open(name, _DIR_BELOW, dir_fd=fd)
            except OSError as e:     # ELOOP: a link swapped in since the stat; ENOENT: gone
                if e.errno == errno.ELOOP:
                    raise _symlink_refused(url) from None
                raise not_found(f"No file or directory at '{url}'.") from None
            os.close(fd)
            fd = inner
        with os.scandir(fd) as listing:
            # Names no storage URL may spell (control characters, backslash, not UTF-8) are left out.
            found = sorted((e.name, path) for e in listing if e.name > after and (path := _child_url(url, e.name)))
        out = []
        for name, path in found[:limit]:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)   # a link is listed as itself
            except OSError:
                continue    # vanished while listing
            out.append(_file_entry(path, name, st))
    except OSError as e:
        raise CatalogError("FAILED_PRECONDITION", f"Cannot list '{url}': {e.strerror}.") from None
    finally:
        os.close(fd)
    return out, len(found) > limit


def s3_client():
    """A boto3 S3 client; $SHARDCAT_S3_ENDPOINT points it at an S3-compatible server."""
    import boto3
    return boto3.client("s3", endpoint_url=os.environ.get("SHARDCAT_S3_ENDPOINT") or None,
                        region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))


def _child_url(url: str, name: str) -> str | None:
    """The URL of `name` below `url`, or None for a key name no storage URL may spell ('..', '\\')."""
    try:
        return join_url(url, name)
    except InvalidUrl:
        return None


async def _location_s3_client(shard: Shard, caller: Caller, location_name: str):
    """The S3 client for an external location's files: its credential's store and keys when the
    credential is s3_compatible, else s3_client() (shardcat's own AWS identity)."""
    ms = caller.metastore()
    location = await shard.lookup(ms, "external_location", location_name, caller.min_version)
    credential_id = (location.info.get("credential_id") if location else None) or ""
    credential = await shard.lookup_id(ms, credential_id, caller.min_version) if credential_id else None
    compat = credential.info.get(s3_compatible.KIND) if credential is not None else None
    return s3_compatible.client(s3_compatible.opened(shard.store.secrets, compat)) if compat else s3_client()


def _list_s3(url: str, after: str, limit: int, client=None) -> tuple[list[dict], bool]:
    from botocore.exceptions import BotoCoreError, ClientError
    bucket, prefix = s3_bucket_key(url)
    prefix = prefix + "/" if prefix else ""
    args = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/", "MaxKeys": limit + 1}
    if after:
        args["StartAfter"] = prefix + after
    try:
        answer = (client or s3_client()).list_objects_v2(**args)
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchBucket", "404"):
            raise not_found(f"Bucket '{bucket}' does not exist.") from None
        raise CatalogError("FAILED_PRECONDITION", f"Cannot list '{url}': {code or e}.") from None
    except BotoCoreError as e:
        raise CatalogError("FAILED_PRECONDITION", f"Cannot list '{url}': {e}.") from None
    entries = []
    for p in answer.get("CommonPrefixes", []):
        name = p["Prefix"][len(prefix):].rstrip("/")
        if name and name > after and (path := _child_url(url, name)):
            entries.append({"path": path, "name": name, "size": 0, "mtime": 0, "is_dir": True})
    for o in answer.get("Contents", []):
        name = o["Key"][len(prefix):]
        # A key equal to the prefix is a directory marker.
        if name and name > after and (path := _child_url(url, name)):
            entries.append({"path": path, "name": name, "size": o["Size"],
                            "mtime": int(o["LastModified"].timestamp() * 1000), "is_dir": False})
    entries.sort(key=lambda e: e["name"])
    more = len(entries) > limit or bool(answer.get("IsTruncated"))
    return entries[:limit], more


async def list_files(shard: Shard, caller: Caller, url: str | None, max_results=None,
                     page_token: str | None = None) -> dict:
    if not url:
        raise invalid("Missing required query parameter 'url'.")
    url = storage_url(url)
    limit = page_size(max_results)
    after = _files_after(page_token)

    async def allowed(state):       # a cold owner answers from the paths it loads (shards/path_waits.py)
        hit = state.locations.owner(url)
        if hit is None:
            raise outside_locations(url, "url")      # the same answer as for a location the caller may not see
        # The asset owning the path decides (a table's SELECT, a volume's READ VOLUME), as by name;
        # else the external location's READ FILES.
        await authorize_path(shard, caller, state, url, write=False)
        return hit

    hit = await shard.asking_paths(caller.metastore(), caller.min_version, allowed)
    scheme = url.split(":", 1)[0]
    if scheme == "file":
        files, more = await asyncio.to_thread(_list_local, hit[0], url, after, limit)
    elif scheme == "s3":
        client = await _location_s3_client(shard, caller, hit[1].full_name)
        files, more = await asyncio.to_thread(_list_s3, url, after, limit, client)
    else:
        raise invalid(f"Listing {scheme}:// URLs is not supported yet; file:// and s3:// are.")
    out = {"files": files}
    if more and files:
        out["next_page_token"] = _files_token(files[-1]["name"])
    return out


# ---- routes ------------------------------------------------------------------------


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    credentials = Credentials(shard)
    storage_credentials = Credentials(shard, "STORAGE", "Storage credential")
    storage_credentials.list_key = "storage_credentials"   # the 2.1 API's list key

    async def list_credentials(request):
        purpose = request.query.get("purpose")
        service = credentials
        if purpose:
            if purpose not in PURPOSES:
                raise invalid(f"Unknown purpose '{purpose:.40}'; expected one of {', '.join(PURPOSES)}.")
            service = Credentials(shard, purpose_only=purpose)
        return ok(await service.list(request["caller"], None, request.query.get("max_results"),
                                     request.query.get("page_token")))

    async def files(request):
        return ok(await list_files(shard, request["caller"], request.query.get("url"),
                                   request.query.get("max_results"), request.query.get("page_token")))

    return {**crud_handlers(credentials, "Credential"), "listCredentials": list_credentials,
            **crud_handlers(storage_credentials, "StorageCredential"),
            **crud_handlers(ExternalLocations(shard), "ExternalLocation"), "listFiles": files}
