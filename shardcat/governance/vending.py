"""Credential vending: short-lived storage credentials scoped to one storage prefix.

`vend(shard, caller, url, write=...)` answers the temporary-credentials endpoints in the
client's TemporaryCredentials shape (`url`, `expiration_time`, and for S3
`aws_temp_credentials`). Callers authorize first (`require_data_access`); this module
only decides *which* cloud identity covers the URL and down-scopes it:

- file:// needs no secret: the answer carries the url and an expiry only.
- s3:// calls STS AssumeRole on the IAM role of the storage credential that covers the
  URL, with an inline session policy that allows only the URL's prefix (read: GetObject;
  read-write: also Put/DeleteObject; ListBucket only with an s3:prefix condition; a key
  holding '*', '?' or '$', which IAM would read as a wildcard or variable, is refused). The
  covering credential is the one of the external location holding the URL; for managed
  storage under the metastore's storage root it is the metastore's
  `storage_root_credential_id`, else the role in $SHARDCAT_STORAGE_ROOT_ROLE_ARN.
- s3:// covered by an `s3_compatible` credential (MinIO, R2, ...): AssumeRole at the store's own
  endpoint with the credential's keys when it names a `role_arn`, else the static keys as they
  are; either answer adds the store's `endpoint_url`, `region` and `path_style_access`
  (s3_compatible.py).
- Other clouds' URLs (abfss://, ...) go to their modules through clouds.py, with the covering
  credential found here; a scheme no module serves is refused with FAILED_PRECONDITION.

Configuration (read on each call, so a process can be reconfigured): $SHARDCAT_STS_ENDPOINT
(required for s3:// vending: e.g. https://sts.amazonaws.com, or a local moto server),
$SHARDCAT_AWS_REGION (else $AWS_DEFAULT_REGION, else us-east-1), $SHARDCAT_CREDENTIAL_SECONDS
(the lifetime asked of STS, 900..43200, default 3600). shardcat's own AWS identity comes from
boto3's usual chain (environment, profile, instance role).

Unexpired credentials are reused: a TLRU cache keyed by (STS endpoint, role, prefix, mode, the
store's access key id for an s3_compatible credential)
keeps each one until a safety margin before it expires. The policy construction is pure;
the boto3 call blocks, so it runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass

from cachetools import TLRUCache

from ..entities.urls import InvalidUrl, is_within, normalize_url, s3_bucket_key
from ..errors import CatalogError
from ..entities.values import now_ms
from ..shards.locations import location_of
from . import clouds, s3_compatible
from ..web import store_endpoints

FILE_LIFETIME_MS = 60 * 60 * 1000        # file:// answers: what engines expect to cache a credential for
MIN_SECONDS, MAX_SECONDS, DEFAULT_SECONDS = 900, 43200, 3600   # STS's bounds on DurationSeconds
SAFETY_MARGIN_SECONDS = 300               # a cached credential is not handed out this close to its expiry
SESSION_NAME = "shardcat"


# ---- pure parts: where the data lies, and the session policy ------------------------------


def s3_location(url: str) -> tuple[str, str]:
    """(bucket, key prefix without slashes at either end) of a canonical s3:// URL: decoded
    in entities/urls.py, the one place storage URLs are, so the policy covers what the rules checked."""
    return s3_bucket_key(url)


# IAM reads these in a Resource or a StringLike condition as wildcards ('*', '?') or a policy
# variable ('${...}'): a prefix holding one would grant more than the prefix (issue 28).
IAM_WILDCARDS = frozenset("*?$")


def require_policy_safe(url: str, prefix: str) -> None:
    """INVALID_PARAMETER_VALUE if a session policy cannot scope `prefix` exactly."""
    found = sorted(IAM_WILDCARDS.intersection(prefix))
    if found:
        raise CatalogError("INVALID_PARAMETER_VALUE",
                           f"Cannot vend s3:// credentials for '{url}': its key holds {' '.join(found)}, which "
                           "an IAM policy reads as a wildcard or variable, so no policy can scope it exactly.")


def session_policy(bucket: str, prefix: str, *, write: bool) -> dict:
    """The inline session policy that limits an assumed role to `prefix` of `bucket`.

    Objects: s3:GetObject (and with `write` s3:PutObject, s3:DeleteObject) on
    arn:aws:s3:::bucket/prefix/*. Listing: s3:ListBucket on the bucket, only for
    s3:prefix values at or under the prefix (a plain prefix match would also admit a
    sibling such as prefix-old/, hence the two patterns)."""
    require_policy_safe(f"s3://{bucket}/{prefix}", prefix)
    objects = f"arn:aws:s3:::{bucket}/{prefix}/*" if prefix else f"arn:aws:s3:::{bucket}/*"
    actions = ["s3:GetObject"] + (["s3:PutObject", "s3:DeleteObject"] if write else [])
    listing = [prefix, f"{prefix}/*"] if prefix else ["*"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ObjectsUnderPrefix", "Effect": "Allow", "Action": actions, "Resource": [objects]},
            {"Sid": "ListPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"],
             "Resource": [f"arn:aws:s3:::{bucket}"],
             "Condition": {"StringLike": {"s3:prefix": listing}}},
        ],
    }


# AWS limits a session policy, packed, to 2,048 characters; a plan's keys are split into policies this long at most.
POLICY_CHARS = 2048


def objects_policy(bucket: str, keys: list[str]) -> dict:
    """The inline session policy that lets an assumed role read exactly `keys` of `bucket` (GetObject on each
    object, nothing listed): the credential of a planned scan (catalog/protocols/iceberg/planning.py)."""
    for key in keys:
        require_policy_safe(f"s3://{bucket}/{key}", key)
    return {"Version": "2012-10-17",
            "Statement": [{"Sid": "PlannedObjects", "Effect": "Allow", "Action": ["s3:GetObject"],
                           "Resource": [f"arn:aws:s3:::{bucket}/{key}" for key in keys]}]}


def policy_batches(bucket: str, keys: list[str], limit: int = POLICY_CHARS) -> list[list[str]]:
    """`keys` in order, split so that each batch's objects_policy packs into `limit` characters."""
    base = len(json.dumps(objects_policy(bucket, []), separators=(",", ":")))
    batches: list[list[str]] = []
    size = limit
    for key in keys:
        cost = len(json.dumps(f"arn:aws:s3:::{bucket}/{key}")) + 1
        if base + cost > limit:
            raise CatalogError("INVALID_PARAMETER_VALUE", f"The key 's3://{bucket}/{key}' is too long for a "
                                                          "session policy of its own.")
        if size + cost > limit:
            batches.append([])
            size = base
        batches[-1].append(key)
        size += cost
    return batches


def lifetime_seconds() -> int:
    raw = os.environ.get("SHARDCAT_CREDENTIAL_SECONDS", "")
    seconds = int(raw) if raw.isdecimal() else DEFAULT_SECONDS
    return max(MIN_SECONDS, min(MAX_SECONDS, seconds))


def _region() -> str:
    return os.environ.get("SHARDCAT_AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


region = _region      # also the region of the catalog's own S3 access with vended keys (the Iceberg catalog)


# ---- the STS call and its cache -------------------------------------------------------------


@dataclass(frozen=True)
class AwsCredential:
    access_key_id: str
    secret_access_key: str
    session_token: str
    expires_at: float          # seconds since the epoch


def _assume_role(endpoint: str, role_arn: str, external_id: str | None, policy: dict, seconds: int,
                 identity: dict | None = None) -> AwsCredential:
    """One blocking STS AssumeRole call (run it in a thread). `identity` (an s3_compatible
    credential's fields) signs the call with its keys in its region; else boto3's chain does."""
    import boto3.session
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    # A fresh session: boto3's default one keeps the credentials it resolved first, and shardcat's
    # identity may change under a running process (rotated keys, tests). STS calls are rare (cached).
    keys = {"aws_access_key_id": identity["access_key_id"], "aws_secret_access_key": identity["secret_access_key"],
            "region_name": identity.get("region") or _region()} if identity else {"region_name": _region()}
    sts = boto3.session.Session().client(
        "sts", endpoint_url=endpoint, **keys,
        config=Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2}))
    if identity:                 # the store's own STS, at its creator's endpoint: public or listed only
        store_endpoints.pin_client(sts)
    args = {"RoleArn": role_arn, "RoleSessionName": SESSION_NAME, "Policy": json.dumps(policy),
            "DurationSeconds": seconds}
    if external_id:
        args["ExternalId"] = external_id
    try:
        c = sts.assume_role(**args)["Credentials"]
    except ClientError as e:
        error = e.response.get("Error", {})
        raise CatalogError("FAILED_PRECONDITION", f"STS refused to assume role '{role_arn}': "
                                                  f"{error.get('Code', '')} {error.get('Message', '')}".strip()) from None
    except BotoCoreError as e:
        raise CatalogError("TEMPORARILY_UNAVAILABLE", f"Cannot reach STS at {endpoint}: {e}") from None
    return AwsCredential(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"], c["Expiration"].timestamp())


def _usable_until(key, value: AwsCredential, now: float) -> float:
    return value.expires_at - SAFETY_MARGIN_SECONDS


class AwsVendor:
    """STS AssumeRole with a per-prefix session policy; unexpired answers are reused."""

    def __init__(self, maxsize: int = 10_000):
        self.cache: TLRUCache = TLRUCache(maxsize=maxsize, ttu=_usable_until, timer=time.time)
        self.pending: dict[tuple, asyncio.Future] = {}
        self.stats = {"assume_role": 0, "cache_hits": 0}

    async def credential(self, role_arn: str, external_id: str | None, url: str, *, write: bool,
                         store: dict | None = None, keys: tuple[str, ...] | None = None) -> AwsCredential:
        """`store`: an s3_compatible credential's fields; its endpoint serves STS, its keys sign the call.
        `keys`: read exactly these objects of `url`'s bucket (objects_policy) instead of `url`'s prefix."""
        endpoint = store["endpoint_url"] if store else os.environ.get("SHARDCAT_STS_ENDPOINT")
        if not endpoint:
            raise CatalogError("FAILED_PRECONDITION",
                               "shardcat does not vend s3:// credentials here: no STS is configured "
                               "(set SHARDCAT_STS_ENDPOINT, e.g. https://sts.amazonaws.com).")
        key = (endpoint, role_arn, url, "READ_WRITE" if write else "READ", store["access_key_id"] if store else None,
               keys)
        hit = self.cache.get(key)
        if hit is not None:
            self.stats["cache_hits"] += 1
            return hit
        if key in self.pending:            # the same credential is being fetched: share that call
            return await asyncio.shield(self.pending[key])
        future = asyncio.get_running_loop().create_future()
        self.pending[key] = future
        try:
            bucket, prefix = s3_location(url)
            policy = objects_policy(bucket, list(keys)) if keys is not None else \
                session_policy(bucket, prefix, write=write)
            self.stats["assume_role"] += 1
            found = await asyncio.to_thread(_assume_role, endpoint, role_arn, external_id, policy,
                                            lifetime_seconds(), store)
            self.cache[key] = found
            future.set_result(found)
            return found
        except BaseException as e:
            future.set_exception(e)
            future.exception()              # retrieved: no "never retrieved" warning when nobody shared it
            raise
        finally:
            del self.pending[key]


AWS = AwsVendor()     # one per process: every shard app in it shares the cache


# ---- which storage credential covers a URL --------------------------------------------------


async def _credential_asset(shard, caller, url: str):
    """The storage credential (asset) whose identity reaches `url`, or None with the reason."""
    return await covering_credential(shard, caller.metastore(), caller.min_version, url)


async def covering_credential(shard, ms: str, min_version, url: str):
    """The storage credential (asset) of metastore `ms` whose identity reaches `url`, or None with the reason."""
    async def where(state):     # a cold owner loads its external locations alone (shards/path_waits.py)
        return location_of(state, url), state.storage_root
    location, storage_root = await shard.asking_paths(ms, min_version, where)
    if location is not None:
        loc = await shard.lookup(ms, "external_location", location.full_name, min_version)
        if loc is None:
            return None, f"external location '{location.full_name}' is gone"
        credential = await shard.lookup(ms, "credential", loc.info.get("credential_name", "").lower(),
                                        min_version)
        if credential is None:
            return None, f"the credential of external location '{loc.name}' is gone"
        return credential, None
    if storage_root and is_within(url, storage_root):
        meta = await shard.store.get_metastore(ms)
        credential_id = (meta.info.get("storage_root_credential_id") if meta else None) or ""
        if credential_id:
            credential = await shard.lookup_id(ms, credential_id, min_version)
            if credential is not None and credential.type == "credential":
                return credential, None
            return None, f"the metastore's storage_root_credential_id '{credential_id}' names no credential"
        role = os.environ.get("SHARDCAT_STORAGE_ROOT_ROLE_ARN")
        if role:
            return {"role_arn": role}, None
        return None, ("it lies in the metastore's managed storage, and the metastore has no "
                      "storage_root_credential_id (nor is $SHARDCAT_STORAGE_ROOT_ROLE_ARN set)")
    return None, "no external location covers it"


async def _aws_role(shard, caller, url: str) -> dict:
    """The IAM role (`{"role_arn", "external_id"?}`) to assume for `url`, or an s3_compatible
    credential's fields (`{"s3_compatible": {...}}`)."""
    credential, why = await _credential_asset(shard, caller, url)
    if credential is None:
        raise CatalogError("FAILED_PRECONDITION", f"No storage credential can vend temporary credentials "
                                                  f"for '{url}': {why}.")
    if isinstance(credential, dict):    # the configured default role of managed storage
        return credential
    if credential.info.get(s3_compatible.KIND):
        return {s3_compatible.KIND: s3_compatible.opened(shard.store.secrets, credential.info[s3_compatible.KIND])}
    role = credential.info.get("aws_iam_role")
    if not role:
        raise CatalogError("FAILED_PRECONDITION", f"Credential '{credential.name}' covers '{url}' but holds no "
                                                  "aws_iam_role; s3:// credentials need an IAM role.")
    return role


async def _refuse_read_only(shard, caller, url: str) -> None:
    """PERMISSION_DENIED if `url` lies in an external location marked read_only."""
    async def where(state):     # a cold owner loads its external locations alone (shards/path_waits.py)
        return location_of(state, url) if len(state.locations) else None   # none: local mode, nothing read-only
    location = await shard.asking_paths(caller.metastore(), caller.min_version, where)
    if location is None:
        return
    asset = await shard.lookup(caller.metastore(), "external_location", location.full_name, caller.min_version)
    if asset is not None and asset.info.get("read_only"):
        raise CatalogError("PERMISSION_DENIED", f"External location '{asset.name}' is read-only; "
                                                f"no read-write credentials for '{url}'.")


async def vend(shard, caller, url: str, *, write: bool, now: int | None = None) -> dict:
    """The TemporaryCredentials answer for `url` (already authorized), read-only or read-write.
    The one vending path: the temporary-credentials endpoints, model-version credentials and
    batched resolve all call it. `now` (ms) lets a caller vending many file:// answers at once
    read the clock once. Raises CatalogError when nothing can be vended (read-only location,
    no covering credential, unsupported cloud, STS refusal)."""
    if write:
        await _refuse_read_only(shard, caller, url)
    scheme = url.split(":", 1)[0]
    if scheme == "file":
        return {"expiration_time": (now or now_ms()) + FILE_LIFETIME_MS, "url": url}
    if scheme in clouds.CLOUDS:
        return await clouds.vend(shard, caller, url, _credential_asset, write=write, now=now)
    if scheme != "s3":
        raise CatalogError("FAILED_PRECONDITION",
                           f"shardcat does not vend {scheme}:// credentials yet; it vends "
                           + ", ".join(f"{s}://" for s in ("s3", *clouds.CLOUDS)) + " and file:// (which needs none).")
    require_policy_safe(url, s3_location(url)[1])      # before any STS call or cache
    role = await _aws_role(shard, caller, url)
    store = role.get(s3_compatible.KIND)
    if store and not store.get("role_arn"):     # no STS at the store: its static keys
        return s3_compatible.static_answer(store, url, now or now_ms())
    if store:
        found = await AWS.credential(store["role_arn"], None, url, write=write, store=store)
    else:
        found = await AWS.credential(role["role_arn"], role.get("external_id"), url, write=write)
    return {"aws_temp_credentials": {"access_key_id": found.access_key_id,
                                     "secret_access_key": found.secret_access_key,
                                     "session_token": found.session_token},
            "expiration_time": int(found.expires_at * 1000), "url": url,
            **(s3_compatible.connection(store) if store else {})}


async def vend_objects(shard, caller, location: str, urls: list[str]) -> list[dict]:
    """Read-only credentials for exactly the objects `urls` (already authorized: the files of a planned scan
    of the table at `location`), as [{"urls": [...], "answer": TemporaryCredentials}], none for file://
    (which needs no secret). Only s3:// objects inside `location` are covered; an S3 store reached with
    static keys (an s3_compatible credential without a role) gets nothing, since its keys cannot be scoped
    (remote signing serves those stores). STS calls: one per POLICY_CHARS-long batch of keys."""
    if not location.startswith("s3:"):
        return []
    inside = []
    for u in urls:
        try:
            url = normalize_url(u)      # a manifest's path, spelled as its writer chose: decoded the one way
        except InvalidUrl:
            continue
        if url.startswith("s3:") and is_within(url, location) and url != location:
            inside.append(url)
    if not inside:
        return []
    role = await _aws_role(shard, caller, location)
    store = role.get(s3_compatible.KIND)
    if store and not store.get("role_arn"):
        return []
    bucket = s3_location(location)[0]
    out = []
    for batch in policy_batches(bucket, [s3_location(u)[1] for u in inside]):
        keys = tuple(batch)
        if store:
            found = await AWS.credential(store["role_arn"], None, location, write=False, store=store, keys=keys)
        else:
            found = await AWS.credential(role["role_arn"], role.get("external_id"), location, write=False, keys=keys)
        out.append({"urls": [f"s3://{bucket}/{k}" for k in batch],
                    "answer": {"aws_temp_credentials": {"access_key_id": found.access_key_id,
                                                        "secret_access_key": found.secret_access_key,
                                                        "session_token": found.session_token},
                               "expiration_time": int(found.expires_at * 1000), "url": location,
                               **(s3_compatible.connection(store) if store else {})}})
    return out



async def file_signer(shard, ms: str, location: str):
    """For Delta Sharing: `sign(url, seconds) -> pre-signed GET URL` for the files under `location` (a
    table's) on another cloud, signed with the credential covering it (clouds.py), or None for s3:// and
    file://, which the sharing server signs itself."""
    if location.split(":", 1)[0] not in clouds.CLOUDS:
        return None
    credential, why = await covering_credential(shard, ms, 0, location)
    return clouds.file_signer(shard.store.secrets, credential, why, location)


async def catalog_read_credentials(shard, ms: str, location: str) -> dict | None:
    """A READ answer for the catalog's own read of `location` on another cloud (Delta Sharing reads a
    shared table's log with it), or None for s3:// and file://, which it reads with its own identity."""
    if location.split(":", 1)[0] not in clouds.CLOUDS:
        return None
    credential, why = await covering_credential(shard, ms, 0, location)
    return await clouds.vend_with(shard.store.secrets, credential, why, location, write=False)
