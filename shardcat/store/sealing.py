"""Secrets encrypted at rest, with a key kept outside the database.

A secret field of a credential (an Azure client_secret, a GCP private_key, an S3-compatible
store's secret_access_key) or a provider's
bearer token (inside its Delta Sharing profile) is stored as
`sealed:v1:<Fernet token>`, and so is a connection's secret option (a token, a password): AES-128-CBC with an HMAC-SHA256 (the `cryptography` package's
Fernet), under the first of the server's secret keys. The keys come from a key file, one
url-safe base64 Fernet key a line, the first one encrypting and every one decrypting
(MultiFernet): by default `<data dir>/secret.key`, created with one new key and mode 0600 on
first start; or from `shardcat serve --secret-key SOURCE`, SOURCE a file of the same form or
`env:NAME`, an environment variable holding the keys (one a line or comma-separated).

Rotation: `shardcat rotate-secret-key` writes a new key first in the key file, the old ones
after it; the next start re-encrypts every secret under the new key (`reseal_credentials`);
after that the old keys may be deleted from the file. The same start-up step encrypts secrets
stored in plain text by earlier versions. Nothing ever reads a secret back to a client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import stat
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from ..entities.secrets import is_secret_field
from .errors import MetastoreGone, VersionConflict

log = logging.getLogger(__name__)

KEY_FILE = "secret.key"
SEALED = "sealed:v1:"
# Each credential kind's secret fields: the ones sealed at rest (and never shown: catalog/tree/storage.py).
SECRET_FIELDS = {
    "azure_service_principal": ("client_secret",),
    "azure_storage_key": ("account_key",),
    "gcp_service_account_key": ("private_key",),
    "s3_compatible": ("secret_access_key",),
}


class SecretKeyError(Exception):
    """The secret keys are missing, unreadable or malformed; or a secret is sealed under none of them."""


class SecretBox:
    """Seals and opens secrets with the server's keys: the first seals, every one opens."""

    def __init__(self, keys: list[bytes]):
        if not keys:
            raise SecretKeyError("no secret key given")
        try:
            self._primary = Fernet(keys[0])
            self._all = MultiFernet([Fernet(k) for k in keys])
        except (ValueError, TypeError) as e:
            raise SecretKeyError(f"a secret key is not a Fernet key (32 url-safe base64 bytes): {e}") from None
        self.keys = list(keys)

    def seal(self, secret: str) -> str:
        return SEALED + self._primary.encrypt(secret.encode("utf-8")).decode("ascii")

    def open(self, stored: str) -> str:
        """The secret a stored value holds; a value stored in plain text (before sealing) is itself."""
        if not is_sealed(stored):
            return stored
        try:
            return self._all.decrypt(stored[len(SEALED):].encode("ascii")).decode("utf-8")
        except InvalidToken:
            raise SecretKeyError("a secret is sealed under a key this server does not hold") from None

    def is_current(self, stored: str) -> bool:
        """Whether a stored value is sealed under the first key (nothing to re-encrypt)."""
        if not is_sealed(stored):
            return False
        try:
            self._primary.decrypt(stored[len(SEALED):].encode("ascii"))
            return True
        except InvalidToken:
            return False

    def reseal(self, stored: str) -> str:
        """The value sealed under the first key (plain text sealed, an older key's seal rotated)."""
        return self.seal(self.open(stored))


def is_sealed(stored) -> bool:
    return isinstance(stored, str) and stored.startswith(SEALED)


def _map_secrets(type_name: str, info: dict, change) -> tuple[dict, int]:
    """(`info` with `change(stored)` for each secret it holds, how many changed). The secrets of a
    credential are fields of its kind's object; a provider's is the bearerToken of its Delta
    Sharing profile (a JSON text)."""
    out, changed = dict(info), 0
    if type_name == "credential":
        for kind, fields in SECRET_FIELDS.items():
            value = out.get(kind)
            if not isinstance(value, dict):
                continue
            value = dict(value)
            for field in fields:
                if isinstance(value.get(field), str):
                    new = change(value[field])
                    changed += new != value[field]
                    value[field] = new
            out[kind] = value
    elif type_name == "connection" and isinstance(out.get("options"), dict):
        options = dict(out["options"])
        for key in secret_options(options):
            new = change(options[key])
            changed += new != options[key]
            options[key] = new
        out["options"] = options
    elif type_name == "provider" and isinstance(out.get("recipient_profile_str"), str):
        try:
            profile = json.loads(out["recipient_profile_str"])
        except ValueError:
            return out, 0
        if isinstance(profile, dict) and isinstance(profile.get("bearerToken"), str):
            new = change(profile["bearerToken"])
            if new != profile["bearerToken"]:
                out["recipient_profile_str"] = json.dumps({**profile, "bearerToken": new})
                changed += 1
    return out, changed


SEALED_TYPES = ("credential", "provider", "connection")     # the asset types that hold secrets


def secret_options(options: dict) -> list[str]:
    """A connection's options that hold secrets (a token, a password, a secret key): sealed at rest,
    never shown (catalog/features/connections.py)."""
    return [k for k, v in options.items() if isinstance(v, str) and is_secret_field(k)]


def seal_info(box: SecretBox | None, type_name: str, info: dict) -> dict:
    """An asset's info with every secret it holds sealed (an already sealed one kept as it is)."""
    def seal(stored: str) -> str:
        if is_sealed(stored):
            return stored
        if box is None:
            raise SecretKeyError("no secret key is configured: a secret cannot be stored")
        return box.seal(stored)
    return _map_secrets(type_name, info, seal)[0]


def seal_credential_info(box: SecretBox | None, info: dict) -> dict:
    return seal_info(box, "credential", info)


def _parse_keys(text: str, where: str) -> list[bytes]:
    keys = [line.strip() for part in text.splitlines() for line in part.split(",")]
    keys = [k.encode("ascii") for k in keys if k and not k.startswith("#")]
    if not keys:
        raise SecretKeyError(f"{where} holds no secret key")
    return keys


def key_file_of(data_dir: Path, source: str | None) -> Path | None:
    """The key file the keys come from (None: an environment variable)."""
    if source is not None and source.startswith("env:"):
        return None
    return Path(source).expanduser() if source else Path(data_dir) / KEY_FILE


def load_keys(data_dir: Path, source: str | None = None) -> list[bytes]:
    """The server's secret keys, first the one that seals. `source`: None for the data dir's key
    file (created with one new key, mode 0600, if missing), a key file's path, or `env:NAME`."""
    if source is not None and source.startswith("env:"):
        name = source[4:]
        if name not in os.environ:
            raise SecretKeyError(f"the environment variable {name} (--secret-key {source}) is not set")
        return _parse_keys(os.environ[name], f"the environment variable {name}")
    path = key_file_of(data_dir, source)
    if source is None and not path.exists():
        _create_key_file(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SecretKeyError(f"cannot read the secret key file {path}: {e}") from None
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        log.warning("the secret key file %s can be read by others (mode %o); chmod 600 it", path, mode)
    return _parse_keys(text, str(path))


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)   # 0600 from the start, never wider
    except FileExistsError:
        return      # another process made it meanwhile
    with os.fdopen(fd, "w") as f:
        f.write(Fernet.generate_key().decode("ascii") + "\n")
    log.info("created the secret key file %s (keep it out of backups of the database)", path)


def rotate_key_file(path: Path) -> None:
    """Put a new key first in a key file (the old ones stay after it, to decrypt until re-encrypted)."""
    old = path.read_text() if path.exists() else ""
    _parse_keys(old, str(path)) if old.strip() else None      # refuse to rotate a malformed file
    new = Fernet.generate_key().decode("ascii") + "\n" + old
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(new)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


async def reseal_credentials(store, box: SecretBox) -> dict:
    """Re-encrypt every secret (of credentials and providers) not sealed under the first key:
    plain text (stored before sealing) and older keys' seals. Each metastore's changes are one versioned write
    (docs/design.md invariant 2), so shards that cache the credentials reconcile. A secret sealed
    under a key this server does not hold is left as it is, and counted."""
    counts = {"resealed": 0, "unreadable": 0}
    rows = [row for pool in store.databases.values()     # every home database's
            for row in await pool.fetch("SELECT DISTINCT metastore_id FROM assets WHERE type = ANY($1::text[])",
                                        list(SEALED_TYPES))]
    for row in rows:
        metastore_id = str(row["metastore_id"])
        for attempt in range(5):
            try:
                counts["resealed"] += await _reseal_metastore(store, box, metastore_id, counts)
                break
            except VersionConflict:
                await asyncio.sleep(0.05 * (attempt + 1))
            except MetastoreGone:
                break
    if counts["unreadable"]:
        log.warning("%d credential secret(s) are sealed under a key this server does not hold; left as they are",
                    counts["unreadable"])
    if counts["resealed"]:
        log.info("re-encrypted %d credential secret(s) under the current secret key", counts["resealed"])
    return counts


async def _reseal_metastore(store, box: SecretBox, metastore_id: str, counts: dict) -> int:
    version = await store.metastore_version(metastore_id)
    changed = []
    for asset in [a for t in SEALED_TYPES for a in await store.assets_of_type(metastore_id, t)]:
        info, resealed = _resealed_info(box, asset.type, asset.info, counts)
        if resealed:
            changed.append((dataclasses.replace(asset, info=info), resealed))
    if not changed:
        return 0
    async with store.write(metastore_id, version) as tx:
        for asset, _ in changed:
            await tx.put(asset)
    return sum(n for _, n in changed)


def _resealed_info(box: SecretBox, type_name: str, info: dict, counts: dict) -> tuple[dict, int]:
    def reseal(stored: str) -> str:
        if box.is_current(stored):
            return stored
        try:
            return box.reseal(stored)
        except SecretKeyError:
            counts["unreadable"] += 1
            return stored
    return _map_secrets(type_name, info, reseal)
