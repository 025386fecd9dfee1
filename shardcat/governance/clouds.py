"""The clouds beyond S3: which module vends for a URL's scheme, and what every such module is handed.

vending.py answers file:// and s3:// itself and hands every other scheme here. A cloud module
(vending_azure.py for abfss://, vending_gcs.py for gs://) exposes:

- `SCHEME`: the canonical scheme of its URLs (entities/urls.py);
- `KINDS`: the storage credential kinds it vends with, in order of preference;
- `async vend(kind, fields, url, *, write, now) -> dict`: the TemporaryCredentials answer for
  `url` (already authorized, canonical), `fields` being the covering credential's fields for
  `kind` with their secrets opened;
- `signed_url(kind, fields, url, seconds) -> str`: a pre-signed GET of one file (Delta Sharing).

This module finds that credential (through vending.py's covering-credential rule, passed in so
there is no import circle), checks its kind and opens its sealed secrets (store/sealing.py), the
same way for every cloud.
"""

from __future__ import annotations

from ..entities.asset import Asset
from ..errors import CatalogError
from ..store.sealing import SECRET_FIELDS, SecretKeyError, is_sealed
from . import vending_azure, vending_gcs

# Each cloud's vending module, by the canonical scheme of its URLs.
CLOUDS = {module.SCHEME: module for module in (vending_azure, vending_gcs)}


def opened_fields(box, kind: str, fields: dict) -> dict:
    """A credential kind's fields with its secrets opened with the server's SecretBox."""
    out = dict(fields)
    for name in SECRET_FIELDS.get(kind, ()):
        if not is_sealed(out.get(name)):
            continue
        if box is None:
            raise CatalogError("FAILED_PRECONDITION", "The credential's secret is sealed and this server "
                                                      "has no secret key to open it.")
        try:
            out[name] = box.open(out[name])
        except SecretKeyError:
            raise CatalogError("FAILED_PRECONDITION", "The credential's secret is sealed under a key this "
                                                      "server does not hold.") from None
    return out


def covering_kind(box, credential, why: str | None, url: str, kinds: tuple[str, ...]) -> tuple[str, dict]:
    """(kind, fields with secrets opened) of `credential`, the storage credential covering `url`
    (None with `why` when there is none, a dict for the storage root's configured IAM role)."""
    if credential is None:
        raise CatalogError("FAILED_PRECONDITION", f"No storage credential can vend temporary credentials "
                                                  f"for '{url}': {why}.")
    kind = next((k for k in kinds if isinstance(credential, Asset) and isinstance(credential.info.get(k), dict)),
                None)
    if kind is None:
        name = f"Credential '{credential.name}'" if isinstance(credential, Asset) else "The storage root's IAM role"
        raise CatalogError("FAILED_PRECONDITION", f"{name} covers '{url}' but is none of "
                                                  f"{', '.join(kinds)}, which {url.split(':')[0]}:// needs.")
    return kind, opened_fields(box, kind, credential.info[kind])


async def vend(shard, caller, url: str, find_credential, *, write: bool, now: int | None = None) -> dict:
    """The answer of the cloud module serving `url`'s scheme; `find_credential(shard, caller, url)`
    gives (covering credential or None, why not)."""
    credential, why = await find_credential(shard, caller, url)
    return await vend_with(shard.store.secrets, credential, why, url, write=write, now=now)


async def vend_with(box, credential, why: str | None, url: str, *, write: bool, now: int | None = None) -> dict:
    """The answer of `url`'s cloud module with `credential`, the one covering it (None with `why`)."""
    cloud = CLOUDS[url.split(":", 1)[0]]
    kind, fields = covering_kind(box, credential, why, url, cloud.KINDS)
    return await cloud.vend(kind, fields, url, write=write, now=now)


def file_signer(box, credential, why: str | None, location: str):
    """`sign(url, seconds)`: pre-signed GETs of files under `location` with its covering credential."""
    cloud = CLOUDS[location.split(":", 1)[0]]
    kind, fields = covering_kind(box, credential, why, location, cloud.KINDS)
    return lambda url, seconds: cloud.signed_url(kind, fields, url, seconds)
