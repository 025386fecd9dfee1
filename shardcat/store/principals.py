"""Account state in PostgreSQL: principals (users, groups, service principals), group membership, tokens.

Not metastore state: plain transactions, no version bump or change log. Group membership is a
graph of direct edges (group_members); closures are computed by recursive queries, and edges
that would close a cycle are refused under one advisory lock, so two concurrent additions
cannot make a cycle together.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from ..entities.values import now_ms
from ..errors import already_exists, invalid, not_found

KINDS = ("user", "group", "service_principal")
_MEMBERSHIP_LOCK = 7239004      # serialises membership changes (cycle checks must see each other)

# Columns a caller may set on create and change on update (besides name, kind and members).
SETTABLE = ("display_name", "emails", "active", "external_id", "trusted_engine", "is_account_admin")


@dataclass(frozen=True)
class PrincipalInfo:
    id: int
    name: str
    kind: str
    display_name: str | None
    emails: list
    active: bool
    external_id: str | None
    trusted_engine: bool
    is_account_admin: bool
    created_at: int
    updated_at: int | None


@dataclass(frozen=True)
class Membership:
    group_id: int
    group_name: str
    direct: bool


@dataclass(frozen=True)
class Identity:
    """What authenticating a token yields: the principal, its workspace, its groups (transitively)."""
    principal_id: int
    name: str
    is_account_admin: bool
    trusted_engine: bool
    workspace_id: int
    groups: frozenset[str]
    expires_at: int | None      # ms; the cache re-checks it on every use, so expiry is exact


@dataclass(frozen=True)
class TokenInfo:
    id: int
    principal_id: int
    principal_name: str
    workspace_id: int
    comment: str | None
    created_at: int
    expires_at: int | None
    revoked_at: int | None


def _principal(row) -> PrincipalInfo:
    return PrincipalInfo(row["id"], row["name"], row["kind"], row["display_name"], list(row["emails"] or []),
                         row["active"], row["external_id"], row["trusted_engine"], row["is_account_admin"],
                         row["created_at"], row["updated_at"])


def _token(row) -> TokenInfo:
    return TokenInfo(row["id"], row["principal_id"], row["principal_name"], row["workspace_id"], row["comment"],
                     row["created_at"], row["expires_at"], row["revoked_at"])


# The groups a principal is in, directly or through other groups. UNION (not UNION ALL) makes
# the recursion stop even if a cycle slipped in somehow.
_IDENTITY = """
WITH RECURSIVE me AS (
    SELECT p.id, p.name, p.is_account_admin, p.trusted_engine, t.workspace_id, t.expires_at
    FROM tokens t JOIN principals p ON p.id = t.principal_id
    WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > $2)
      AND p.active AND p.kind <> 'group'
), up(id) AS (
    SELECT gm.group_id FROM group_members gm JOIN me ON gm.member_id = me.id
    UNION
    SELECT gm.group_id FROM group_members gm JOIN up ON gm.member_id = up.id
)
SELECT me.*, ARRAY(SELECT g.name FROM principals g JOIN up ON g.id = up.id) AS groups FROM me
"""

# A principal by an identity provider's e-mail ($1) or subject ($2), e-mail matches first, and its groups.
_LOGIN = """
WITH RECURSIVE me AS (
    SELECT p.id, p.name, p.is_account_admin, p.trusted_engine FROM principals p
    WHERE p.active AND p.kind <> 'group'
      AND ((p.emails @> jsonb_build_array(jsonb_build_object('value', $1::text)) OR p.name = $1::text)
           OR p.external_id = ANY($2::text[]))
    ORDER BY (p.emails @> jsonb_build_array(jsonb_build_object('value', $1::text)) OR p.name = $1::text) DESC,
             p.id
    LIMIT 1
), up(id) AS (
    SELECT gm.group_id FROM group_members gm JOIN me ON gm.member_id = me.id
    UNION
    SELECT gm.group_id FROM group_members gm JOIN up ON gm.member_id = up.id
)
SELECT me.*, ARRAY(SELECT g.name FROM principals g JOIN up ON g.id = up.id) AS groups FROM me
"""
_MEMBERSHIPS = """
WITH RECURSIVE up(principal_id, group_id, direct) AS (
    SELECT member_id, group_id, true FROM group_members WHERE member_id = ANY($1::bigint[])
    UNION
    SELECT up.principal_id, gm.group_id, false FROM group_members gm JOIN up ON gm.member_id = up.group_id
)
SELECT up.principal_id, up.group_id, g.name AS group_name, bool_or(up.direct) AS direct
FROM up JOIN principals g ON g.id = up.group_id
GROUP BY up.principal_id, up.group_id, g.name ORDER BY g.name
"""

# Whether $2 is inside group $1, at any depth: adding $1 to $2 would then close a cycle.
_CONTAINS = """
WITH RECURSIVE down(id) AS (
    SELECT member_id FROM group_members WHERE group_id = $1
    UNION
    SELECT gm.member_id FROM group_members gm JOIN down ON gm.group_id = down.id
)
SELECT EXISTS (SELECT 1 FROM down WHERE id = $2)
"""

_TOKEN_COLUMNS = "t.*, p.name AS principal_name"


class Principals:
    """Queries over principals, group membership and tokens. Safe to call concurrently."""

    def __init__(self, pool: asyncpg.Pool, now_ms):
        self.pool = pool
        self.now_ms = now_ms

    # ---- authentication -----------------------------------------------------

    async def identity_for_token(self, token_hash: bytes) -> Identity | None:
        """The live token's principal with its transitive groups, in one query; None if the token is
        unknown, revoked or expired, or its principal is deactivated."""
        row = await self.pool.fetchrow(_IDENTITY, token_hash, self.now_ms())
        if row is None:
            return None
        return Identity(row["id"], row["name"], row["is_account_admin"], row["trusted_engine"],
                        row["workspace_id"], frozenset(row["groups"]), row["expires_at"])

    async def identity_for_login(self, email: str | None, subjects: list[str], workspace_id: int) -> Identity | None:
        """The active user or service principal an identity provider's token names, with its groups:
        by `email` (one of its emails, or its name) first, else by one of `subjects` (its external
        id; governance/oidc.py decides which claims may be given here). Its expiry is the caller's
        to set (the provider's token's)."""
        if not email and not subjects:
            return None
        row = await self.pool.fetchrow(_LOGIN, email, list(subjects))
        if row is None:
            return None
        return Identity(row["id"], row["name"], row["is_account_admin"], row["trusted_engine"], workspace_id,
                        frozenset(row["groups"]), None)

    # ---- principals -----------------------------------------------------------

    async def get(self, principal_id: int, kind: str | None = None) -> PrincipalInfo | None:
        row = await self.pool.fetchrow("SELECT * FROM principals WHERE id = $1", principal_id)
        return _principal(row) if row and (kind is None or row["kind"] == kind) else None

    async def get_by_name(self, name: str) -> PrincipalInfo | None:
        row = await self.pool.fetchrow("SELECT * FROM principals WHERE name = $1", name)
        return _principal(row) if row else None

    async def list(self, kind: str) -> list[PrincipalInfo]:
        rows = await self.pool.fetch("SELECT * FROM principals WHERE kind = $1 ORDER BY id", kind)
        return [_principal(r) for r in rows]

    async def create(self, name: str, kind: str, fields: dict, members: list[int] = ()) -> PrincipalInfo:
        """A new principal (and, for a group, its first members), all or nothing."""
        assert kind in KINDS and set(fields) <= set(SETTABLE), (kind, fields)
        columns = ["name", "kind", "created_at", *fields]
        values = [name, kind, self.now_ms(), *fields.values()]
        marks = ", ".join(f"${i}" for i in range(1, len(values) + 1))
        async with self.pool.acquire() as conn, conn.transaction():
            try:
                row = await conn.fetchrow(
                    f"INSERT INTO principals ({', '.join(columns)}) VALUES ({marks}) RETURNING *", *values)
            except asyncpg.UniqueViolationError:
                raise already_exists(f"A principal named '{name}' already exists.") from None
            if members:
                await self._change_members(conn, row["id"], add=members)
        return _principal(row)

    async def update(self, principal_id: int, fields: dict, *, add: list[int] = (), remove: list[int] = (),
                     replace: list[int] | None = None) -> PrincipalInfo:
        """Change a principal's fields and (for a group) its members in one transaction."""
        assert set(fields) <= set(SETTABLE), fields
        async with self.pool.acquire() as conn, conn.transaction():
            sets = [f"{column} = ${i}" for i, column in enumerate(fields, start=2)]
            sets.append(f"updated_at = ${len(fields) + 2}")
            row = await conn.fetchrow(f"UPDATE principals SET {', '.join(sets)} WHERE id = $1 RETURNING *",
                                      principal_id, *fields.values(), self.now_ms())
            if row is None:
                raise not_found(f"Principal {principal_id} does not exist.")
            if add or remove or replace is not None:
                await self._change_members(conn, principal_id, add=add, remove=remove, replace=replace)
        return _principal(row)

    async def delete(self, principal_id: int, kind: str) -> bool:
        """Remove a principal, its tokens and its memberships (both ways)."""
        return await self.pool.fetchval(
            "DELETE FROM principals WHERE id = $1 AND kind = $2 RETURNING true", principal_id, kind) or False

    async def _change_members(self, conn, group_id: int, *, add=(), remove=(), replace=None) -> None:
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MEMBERSHIP_LOCK)
        kind = await conn.fetchval("SELECT kind FROM principals WHERE id = $1", group_id)
        if kind != "group":
            raise invalid(f"Principal {group_id} is not a group; only groups have members.")
        if replace is not None:
            await conn.execute("DELETE FROM group_members WHERE group_id = $1", group_id)
            add = list(replace) + list(add)
        if remove:
            await conn.execute("DELETE FROM group_members WHERE group_id = $1 AND member_id = ANY($2::bigint[])",
                               group_id, list(remove))
        for member_id in dict.fromkeys(add):
            member = await conn.fetchrow("SELECT name, kind FROM principals WHERE id = $1", member_id)
            if member is None:
                raise invalid(f"Member {member_id} does not exist.")
            if member_id == group_id or (member["kind"] == "group"
                                         and await conn.fetchval(_CONTAINS, member_id, group_id)):
                raise invalid(f"Adding group '{member['name']}' to group {group_id} would make a membership cycle.")
            try:
                await conn.execute("INSERT INTO group_members VALUES ($1, $2) ON CONFLICT DO NOTHING",
                                   group_id, member_id)
            except asyncpg.ForeignKeyViolationError:     # deleted since we looked
                raise invalid(f"Member {member_id} does not exist.") from None

    async def memberships(self, principal_ids: list[int]) -> dict[int, list[Membership]]:
        """For each principal, every group it is in (direct, or through other groups), by group name."""
        out: dict[int, list[Membership]] = {pid: [] for pid in principal_ids}
        for row in await self.pool.fetch(_MEMBERSHIPS, list(principal_ids)):
            out[row["principal_id"]].append(Membership(row["group_id"], row["group_name"], row["direct"]))
        return out

    async def members(self, group_ids: list[int]) -> dict[int, list[PrincipalInfo]]:
        """Each group's direct members."""
        out: dict[int, list[PrincipalInfo]] = {gid: [] for gid in group_ids}
        rows = await self.pool.fetch(
            """SELECT gm.group_id, p.* FROM group_members gm JOIN principals p ON p.id = gm.member_id
               WHERE gm.group_id = ANY($1::bigint[]) ORDER BY p.name""", list(group_ids))
        for row in rows:
            out[row["group_id"]].append(_principal(row))
        return out

    # ---- tokens -------------------------------------------------------------

    async def create_token(self, principal_id: int, token_hash: bytes, workspace_id: int, comment: str | None,
                           expires_at: int | None) -> TokenInfo:
        row = await self.pool.fetchrow(
            f"""WITH t AS (INSERT INTO tokens (principal_id, token_hash, workspace_id, comment, created_at, expires_at)
                           VALUES ($1, $2, $3, $4, $5, $6) RETURNING *)
                SELECT {_TOKEN_COLUMNS} FROM t JOIN principals p ON p.id = t.principal_id""",
            principal_id, token_hash, workspace_id, comment, self.now_ms(), expires_at)
        return _token(row)

    async def get_token(self, token_id: int) -> TokenInfo | None:
        row = await self.pool.fetchrow(
            f"SELECT {_TOKEN_COLUMNS} FROM tokens t JOIN principals p ON p.id = t.principal_id WHERE t.id = $1",
            token_id)
        return _token(row) if row else None

    async def list_tokens(self, principal_id: int | None) -> list[TokenInfo]:
        """Tokens not revoked, of one principal or (None) of everyone; expired ones included."""
        rows = await self.pool.fetch(
            f"""SELECT {_TOKEN_COLUMNS} FROM tokens t JOIN principals p ON p.id = t.principal_id
                WHERE t.revoked_at IS NULL AND ($1::bigint IS NULL OR t.principal_id = $1) ORDER BY t.id""",
            principal_id)
        return [_token(r) for r in rows]

    async def revoke_token(self, token_id: int) -> bytes | None:
        """Revoke a live token; its hash (so caches can forget it), or None if there was none to revoke."""
        return await self.pool.fetchval(
            "UPDATE tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING token_hash",
            token_id, self.now_ms())


@dataclass(frozen=True)
class Principal:
    """A principal as the store's basics below return it."""
    id: int
    name: str
    kind: str
    is_account_admin: bool


class Accounts:
    """The part of `Store` (db.py) over the account's principals and tokens, in the directory's
    database: the basics a first start and token authentication need, and `principals` for the rest."""

    @property
    def principals(self) -> Principals:
        """Principals, groups and tokens beyond the basics below (shardcat/store/principals.py)."""
        return Principals(self.pool, now_ms)

    async def create_principal(self, name: str, kind: str = "user", *, is_account_admin: bool = False) -> Principal:
        row = await self.pool.fetchrow(
            """INSERT INTO principals (name, kind, is_account_admin, created_at) VALUES ($1, $2, $3, $4)
               ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING *""",
            name, kind, is_account_admin, now_ms(),
        )
        return Principal(row["id"], row["name"], row["kind"], row["is_account_admin"])

    async def add_token(self, principal_id: int, token_hash: bytes, workspace_id: int, comment: str | None = None,
                        expires_at: int | None = None) -> int:
        return await self.pool.fetchval(
            """INSERT INTO tokens (principal_id, token_hash, workspace_id, comment, created_at, expires_at)
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
            principal_id, token_hash, workspace_id, comment, now_ms(), expires_at,
        )

    async def principal_for_token(self, token_hash: bytes) -> tuple[Principal, int] | None:
        """The live token's principal and workspace, or None if unknown, revoked or expired."""
        row = await self.pool.fetchrow(
            """SELECT p.*, t.workspace_id FROM tokens t JOIN principals p ON p.id = t.principal_id
               WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > $2)""",
            token_hash, now_ms(),
        )
        if row is None:
            return None
        return Principal(row["id"], row["name"], row["kind"], row["is_account_admin"]), row["workspace_id"]
