"""Bearer tokens: how they are made and stored (hashed), and who a request's caller is."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from functools import cached_property

from .errors import CatalogError

TOKEN_PREFIX = "scat_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> bytes:
    # Tokens are long and random, so one round of SHA-256 is enough: no salt or stretching needed.
    return hashlib.sha256(token.encode()).digest()


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


@dataclass(frozen=True)
class Caller:
    """Who makes a request, from which workspace, against which metastore."""
    name: str
    principal_id: int
    is_account_admin: bool
    workspace_id: int
    metastore_id: str | None
    min_version: int = 0    # the newest metastore version this client saw acknowledged
    groups: frozenset[str] = frozenset()   # every group the caller is in, directly or through other groups
    trusted_engine: bool = False           # may receive row filters and column masks to enforce them

    @cached_property
    def principals(self) -> frozenset[str]:
        """The names grants to this caller may be made to: itself and its groups (worked out once:
        a cached caller serves many requests)."""
        return self.groups | {self.name}

    def reading_at_least(self, version: int) -> Caller:
        """This caller, asking to read at least this metastore version. A shallow copy: the session
        middleware makes one per forwarded request, and `dataclasses.replace` costs six times more."""
        twin = object.__new__(Caller)
        twin.__dict__.update(self.__dict__, min_version=version)
        return twin

    def metastore(self) -> str:
        """The metastore this caller's requests act on."""
        if self.metastore_id is None:
            raise CatalogError("NOT_FOUND", f"No metastore is assigned to workspace {self.workspace_id}.")
        return self.metastore_id
