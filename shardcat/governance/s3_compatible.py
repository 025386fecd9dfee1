"""S3-compatible stores (MinIO, Cloudflare R2, Ceph, ...): the `s3_compatible` storage credential.

A credential of this kind names the store's S3 endpoint and a static key pair (open-source Unity
Catalog issue 43: stores without AWS's STS). Fields (shardcat's names; neither the open-source
spec nor Databricks has a general one -- Databricks' `cloudflare_api_token` is R2 only):

- `endpoint_url` (required): http:// or https:// with a host and an optional port, no path.
- `access_key_id`, `secret_access_key` (required; the secret is sealed at rest, store/sealing.py,
  and never shown; `opened` gives it back to vending and GET /files).
- `region` (optional, default us-east-1; R2 takes `auto`).
- `path_style_access` (optional boolean, default true: MinIO and most stores serve
  `endpoint/bucket/key`; false for virtual-hosted `bucket.endpoint/key`).
- `role_arn` (optional): the store has an STS (MinIO does): vending calls AssumeRole there with
  the static keys and the same per-prefix session policy as AWS (vending.py), so engines get
  down-scoped temporary keys. Without it vending hands out the static keys themselves: they
  reach whatever the store lets that key reach, so give each credential a key the store limits
  to its external location's bucket or prefix.

Vended answers add `endpoint_url`, `region` and `path_style_access` to the TemporaryCredentials
shape, so an engine knows where to send the keys. This module checks the fields (pure), builds
the vended answer, and makes a boto3 client for the store (GET /files). The catalog itself calls
an endpoint only at public addresses or one the operator listed ($SHARDCAT_S3_COMPATIBLE_ENDPOINTS,
web/store_endpoints.py): `check_reachable` when a credential is written, `client` at every request.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..errors import CatalogError
from ..store.sealing import SecretKeyError, is_sealed
from ..web import store_endpoints

KIND = "s3_compatible"
REQUIRED = ("endpoint_url", "access_key_id", "secret_access_key")
OPTIONAL = ("region", "role_arn")
DEFAULT_REGION = "us-east-1"
STATIC_LIFETIME_MS = 60 * 60 * 1000     # static keys do not expire; engines re-ask after this


def _invalid(message: str) -> CatalogError:
    return CatalogError("INVALID_PARAMETER_VALUE", message)


def check_endpoint(value: str) -> str:
    """The endpoint URL as stored: scheme and host lower-case, no trailing slash."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise _invalid(f"Field '{KIND}.endpoint_url' is not a valid URL: '{value:.120}'.") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise _invalid(f"Field '{KIND}.endpoint_url' must be an http:// or https:// URL with a host, "
                       f"got '{value:.120}'.")
    if parts.path.strip("/") or parts.query or parts.fragment or parts.username or parts.password:
        raise _invalid(f"Field '{KIND}.endpoint_url' must be the store's endpoint alone (scheme, host, port): "
                       f"no path, query, fragment or user, got '{value:.120}'.")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")


def check(value: dict, out: dict) -> dict:
    """Finish `out`, the kind's string fields already checked and merged: the endpoint's form,
    `path_style_access` (boolean) and `role_arn` (an ARN)."""
    out["endpoint_url"] = check_endpoint(out["endpoint_url"])
    if "path_style_access" in value and value["path_style_access"] is not None:
        if not isinstance(value["path_style_access"], bool):
            raise _invalid(f"Field '{KIND}.path_style_access' must be true or false.")
        out["path_style_access"] = value["path_style_access"]
    out.setdefault("path_style_access", True)
    out.setdefault("region", DEFAULT_REGION)
    if out.get("role_arn") and not out["role_arn"].startswith("arn:"):
        raise _invalid(f"Field '{KIND}.role_arn' must be an ARN (arn:aws:iam::...), got '{out['role_arn']:.80}'.")
    return out


def check_reachable(endpoint: str) -> None:
    """400 unless the catalog may call `endpoint` (public addresses, or listed). Blocking: DNS."""
    store_endpoints.vetted(endpoint, "INVALID_PARAMETER_VALUE")


def opened(box, info: dict) -> dict:
    """The credential's fields with its secret usable: opened with the server's SecretBox
    (store/sealing.py) when sealed at rest."""
    secret = info["secret_access_key"]
    if is_sealed(secret):
        if box is None:
            raise CatalogError("FAILED_PRECONDITION", "The credential's secret is sealed and this server "
                                                      "has no secret key to open it.")
        try:
            secret = box.open(secret)
        except SecretKeyError:
            raise CatalogError("FAILED_PRECONDITION", "The credential's secret is sealed under a key this "
                                                      "server does not hold.") from None
    return {**info, "secret_access_key": secret}


def connection(info: dict) -> dict:
    """Where an engine sends the keys: the fields a vended answer adds."""
    return {"endpoint_url": info["endpoint_url"], "region": info.get("region") or DEFAULT_REGION,
            "path_style_access": info.get("path_style_access", True)}


def static_answer(info: dict, url: str, now_ms: int) -> dict:
    """The TemporaryCredentials answer handing out the credential's static keys."""
    return {"aws_temp_credentials": {"access_key_id": info["access_key_id"],
                                     "secret_access_key": info["secret_access_key"]},
            "expiration_time": now_ms + STATIC_LIFETIME_MS, "url": url, **connection(info)}


def client(info: dict):
    """A boto3 S3 client for the store, signed with the credential's static keys; each request's host is
    vetted as it is sent (store_endpoints.pin_client)."""
    import boto3.session
    from botocore.config import Config

    style = "path" if info.get("path_style_access", True) else "virtual"
    return store_endpoints.pin_client(boto3.session.Session().client(
        "s3", endpoint_url=info["endpoint_url"], region_name=info.get("region") or DEFAULT_REGION,
        aws_access_key_id=info["access_key_id"], aws_secret_access_key=info["secret_access_key"],
        config=Config(s3={"addressing_style": style}, connect_timeout=5, read_timeout=30,
                      retries={"max_attempts": 2})))
