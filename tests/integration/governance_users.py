"""Test principals for the governance tests: users with tokens in a workspace, groups, trusted engines."""

from __future__ import annotations

import dataclasses
import uuid

from shardcat.auth import hash_token, new_token


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def user(server, ws, name: str | None = None, *, groups=(), trusted: bool = False, admin: bool = False):
    """A Workspace-like caller for a new principal `name` in ws's workspace, member of `groups`
    (created as needed; membership through identity's group_members table), optionally a trusted engine."""
    store = server.store
    name = name or unique("user")
    p = await store.create_principal(name, "user", is_account_admin=admin)
    for g in groups:
        group = await store.create_principal(g, "group")
        await store.pool.execute("INSERT INTO group_members VALUES ($1, $2) ON CONFLICT DO NOTHING", group.id, p.id)
    if trusted:
        await store.pool.execute("UPDATE principals SET trusted_engine = true WHERE id = $1", p.id)
    token = new_token()
    await store.add_token(p.id, hash_token(token), ws.workspace_id)
    u = dataclasses.replace(ws, token=token)
    u.name = name
    return u


async def grant(ws, securable_type: str, full_name: str, principal: str, *privileges: str, remove=()) -> dict:
    status, body = await ws.call("PATCH", f"/permissions/{securable_type}/{full_name}", json={
        "changes": [{"principal": principal, "add": list(privileges), "remove": list(remove)}]})
    assert status == 200, body
    return body
