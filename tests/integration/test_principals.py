"""Identity over HTTP: users, groups and service principals (SCIM 2.0), nested groups and cycle
refusal, /user-info, /scim2/Me, tokens (create, list, revoke, expiry), who may do what, bad input
that writes nothing, and that the caller's groups and trusted-engine mark reach every request.

Principals are account-wide and the server is shared by the whole session: every test names its
principals with a fresh suffix and filters listings by them.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiohttp.test_utils import TestClient, TestServer

from shardcat.governance.principals import EXTENSION, SCIM_PREFIX
from shardcat.router.forward import make_router_app
from shardcat.governance.authentication import Authenticator
from shardcat.router.routing import RoutingTable

CONTROL = "/api/1.0/unity-control"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def control(ws, method: str, path: str, *, token: str | None = None, json=None, params=None, data=None,
                  headers=None):
    """(status, body) of a call under /api/1.0/unity-control, as the admin unless `token` is given."""
    h = {"Authorization": f"Bearer {token or ws.token}", **(headers or {})}
    async with ws.session.request(method, ws.url + CONTROL + path, json=json, params=params, data=data,
                                  headers=h) as r:
        return r.status, await r.json(content_type=None)


async def catalog_api(ws, path: str, token: str):
    async with ws.session.get(ws.api + path, headers={"Authorization": f"Bearer {token}"}) as r:
        return r.status, await r.json(content_type=None)


async def new_user(ws, name: str | None = None, **attrs) -> tuple[str, str, str]:
    """A user made over SCIM and a token for it made by the admin: (id, name, token)."""
    name = name or unique("user")
    status, body = await control(ws, "POST", "/scim2/Users", json={"userName": name, **attrs})
    assert status == 201, body
    status, made = await control(ws, "POST", "/auth/tokens", json={"principal": name, "comment": "test"})
    assert status == 200, made
    return body["id"], name, made["token_value"]


async def new_group(ws, name: str | None = None, members: list[str] = ()) -> tuple[str, str]:
    name = name or unique("group")
    status, body = await control(ws, "POST", "/scim2/Groups",
                                 json={"displayName": name, "members": [{"value": m} for m in members]})
    assert status == 201, body
    return body["id"], name


async def my_groups(ws, token: str) -> set[str]:
    status, body = await catalog_api(ws, "/user-info/my-groups", token)
    assert status == 200, body
    return set(body["group_names"])


def member_ids(group: dict) -> set[str]:
    return {m["value"] for m in group["members"]}


# ---- users ------------------------------------------------------------------------

async def test_user_lifecycle(ws):
    name = unique("alice")
    status, user = await control(ws, "POST", "/scim2/Users", json={
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": name, "displayName": "Alice A.",
        "emails": [{"value": f"{name}@example.com", "primary": True, "type": "work"}], "externalId": "okta-1"})
    assert status == 201, user
    assert user["userName"] == name and user["displayName"] == "Alice A." and user["active"] is True
    assert user["emails"] == [{"value": f"{name}@example.com", "primary": True, "type": "work"}]
    assert user["externalId"] == "okta-1" and user["groups"] == []
    assert user["meta"]["resourceType"] == "User"
    assert user["meta"]["location"] == f"{SCIM_PREFIX}/Users/{user['id']}"
    assert user[EXTENSION] == {"trustedEngine": False, "accountAdmin": False}
    uid = user["id"]

    status, got = await control(ws, "GET", f"/scim2/Users/{uid}")
    assert status == 200 and got == user

    status, listed = await control(ws, "GET", "/scim2/Users", params={"filter": f'userName eq "{name}"'})
    assert status == 200 and listed["totalResults"] == 1 and listed["Resources"][0]["id"] == uid
    assert listed["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:ListResponse"]

    status, put = await control(ws, "PUT", f"/scim2/Users/{uid}", json={
        "id": uid, "userName": name, "displayName": "Alice B.", "externalId": "okta-2"})
    assert status == 200 and put["displayName"] == "Alice B." and put["externalId"] == "okta-2"

    status, made = await control(ws, "POST", "/auth/tokens", json={"principal": name})
    token = made["token_value"]
    assert (await catalog_api(ws, "/user-info/me", token))[0] == 200

    # Okta's way to deactivate: replace without a path. The token stops working at once here.
    status, off = await control(ws, "PATCH", f"/scim2/Users/{uid}", json={
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{"op": "replace", "value": {"active": False}}]})
    assert status == 200 and off["active"] is False
    status, body = await catalog_api(ws, "/user-info/me", token)
    assert status == 401 and body["error_code"] == "UNAUTHENTICATED"
    status, on = await control(ws, "PATCH", f"/scim2/Users/{uid}", json={
        "Operations": [{"op": "replace", "path": "active", "value": True}]})
    assert status == 200 and on["active"] is True
    assert (await catalog_api(ws, "/user-info/me", token))[0] == 200

    status, _ = await control(ws, "DELETE", f"/scim2/Users/{uid}")
    assert status == 200
    status, body = await control(ws, "GET", f"/scim2/Users/{uid}")
    assert status == 404 and body["error_code"] == "NOT_FOUND" and body["status"] == "404"
    assert (await catalog_api(ws, "/user-info/me", token))[0] == 401
    status, body = await control(ws, "DELETE", f"/scim2/Users/{uid}")
    assert status == 404


async def test_user_name_from_primary_email_and_scim_me(ws):
    email = f"{unique('bob')}@example.com"
    status, user = await control(ws, "POST", "/scim2/Users", json={
        "displayName": "Bob", "emails": [{"value": "other@example.com"}, {"value": email, "primary": True}]})
    assert status == 201 and user["userName"] == email
    _, made = await control(ws, "POST", "/auth/tokens", json={"principal": email})
    status, me = await control(ws, "GET", "/scim2/Me", token=made["token_value"])
    assert status == 200 and me["id"] == user["id"] and me["userName"] == email and me["displayName"] == "Bob"


async def test_list_filters_and_paging(ws):
    tag = uuid.uuid4().hex[:8]
    for i in range(5):
        status, _ = await control(ws, "POST", "/scim2/Users", json={
            "userName": f"f{tag}-{i}", "displayName": f"Person {i}", "active": i != 3,
            "emails": [{"value": f"p{i}@{'corp' if i % 2 else 'home'}-{tag}.org", "primary": True}]})
        assert status == 201

    async def names(filter_, **params):
        status, body = await control(ws, "GET", "/scim2/Users", params={"filter": filter_, **params})
        assert status == 200, body
        return body, sorted(r["userName"] for r in body["Resources"])

    _, got = await names(f'userName sw "f{tag}"')
    assert got == [f"f{tag}-{i}" for i in range(5)]
    _, got = await names(f'emails.value co "corp-{tag}"')
    assert got == [f"f{tag}-1", f"f{tag}-3"]
    _, got = await names(f'emails[value ew "home-{tag}.org" and primary eq true]')
    assert got == [f"f{tag}-0", f"f{tag}-2", f"f{tag}-4"]
    _, got = await names(f'USERNAME sw "F{tag}" and (active eq false or displayName eq "person 0")')
    assert got == [f"f{tag}-0", f"f{tag}-3"]
    _, got = await names(f'userName sw "f{tag}" and not (displayName ew "4") and externalId pr')
    assert got == []
    _, got = await names(f'urn:ietf:params:scim:schemas:core:2.0:User:userName eq "f{tag}-2"')
    assert got == [f"f{tag}-2"]
    body, got = await names(f'userName sw "f{tag}"', startIndex="2", count="2")
    assert body["totalResults"] == 5 and body["startIndex"] == 2 and body["itemsPerPage"] == 2
    assert got == [f"f{tag}-1", f"f{tag}-2"]


# ---- groups -----------------------------------------------------------------------

async def test_nested_groups_and_my_groups(ws):
    uid, _, token = await new_user(ws)
    g1, n1 = await new_group(ws, members=[uid])
    g2, n2 = await new_group(ws, members=[g1])
    g3, n3 = await new_group(ws, members=[g2])
    assert await my_groups(ws, token) == {n1, n2, n3}

    status, me = await catalog_api(ws, "/user-info/me", token)
    assert status == 200 and set(me["groups"]) == {n1, n2, n3}
    status, user = await control(ws, "GET", f"/scim2/Users/{uid}")
    assert {(g["display"], g["type"]) for g in user["groups"]} == {(n1, "direct"), (n2, "indirect"),
                                                                   (n3, "indirect")}
    status, group = await control(ws, "GET", f"/scim2/Groups/{g2}")
    assert status == 200 and group["displayName"] == n2
    assert group["members"] == [{"value": g1, "display": n1, "type": "Group", "$ref": f"{SCIM_PREFIX}/Groups/{g1}"}]

    # Azure AD's way to drop one member.
    status, _ = await control(ws, "PATCH", f"/scim2/Groups/{g2}", json={
        "Operations": [{"op": "remove", "path": f'members[value eq "{g1}"]'}]})
    assert status == 200
    assert await my_groups(ws, token) == {n1}
    status, _ = await control(ws, "PATCH", f"/scim2/Groups/{g3}", json={
        "Operations": [{"op": "add", "path": "members", "value": [{"value": uid}]}]})
    assert status == 200
    assert await my_groups(ws, token) == {n1, n3}

    # A group's deletion takes its memberships with it.
    status, _ = await control(ws, "DELETE", f"/scim2/Groups/{g1}")
    assert status == 200
    assert await my_groups(ws, token) == {n3}
    status, listed = await control(ws, "GET", "/scim2/Groups", params={"filter": f'displayName eq "{n3}"'})
    assert listed["totalResults"] == 1 and member_ids(listed["Resources"][0]) == {g2, uid}


async def test_group_cycles_are_refused_and_write_nothing(ws):
    g1, n1 = await new_group(ws)
    g2, _ = await new_group(ws, members=[g1])
    g3, _ = await new_group(ws, members=[g2])
    before = {g: (await control(ws, "GET", f"/scim2/Groups/{g}"))[1] for g in (g1, g2, g3)}

    for group, body in [
        (g1, {"Operations": [{"op": "add", "path": "members", "value": [{"value": g3}]}]}),   # g1∋g3∋g2∋g1
        (g1, {"Operations": [{"op": "add", "path": "members", "value": [{"value": g2}]}]}),   # g1∋g2∋g1
        (g1, {"Operations": [{"op": "add", "path": "members", "value": [{"value": g1}]}]}),   # itself
        (g1, {"Operations": [{"op": "replace", "path": "members", "value": [{"value": g3}]}]}),
    ]:
        status, err = await control(ws, "PATCH", f"/scim2/Groups/{group}", json=body)
        assert status == 400 and err["error_code"] == "INVALID_PARAMETER_VALUE", err
        assert "cycle" in err["message"] and err["scimType"] == "invalidValue"
    # PUT that replaces g2's members with [g3]: the delete of old members must roll back too.
    status, err = await control(ws, "PUT", f"/scim2/Groups/{g2}", json={"displayName": before[g2]["displayName"],
                                                                         "members": [{"value": g3}]})
    assert status == 400 and "cycle" in err["message"]
    after = {g: (await control(ws, "GET", f"/scim2/Groups/{g}"))[1] for g in (g1, g2, g3)}
    assert after == before


async def test_concurrent_cross_additions_cannot_make_a_cycle(ws):
    ga, _ = await new_group(ws)
    gb, _ = await new_group(ws)
    results = await asyncio.gather(
        control(ws, "PATCH", f"/scim2/Groups/{ga}", json={"Operations": [{"op": "add", "path": "members",
                                                                           "value": [{"value": gb}]}]}),
        control(ws, "PATCH", f"/scim2/Groups/{gb}", json={"Operations": [{"op": "add", "path": "members",
                                                                           "value": [{"value": ga}]}]}))
    assert sorted(status for status, _ in results) == [200, 400]


async def test_service_principal_trusted_engine(ws):
    app_id = unique("spark-engine")
    status, sp = await control(ws, "POST", "/scim2/ServicePrincipals", json={
        "applicationId": app_id, "displayName": "Spark", EXTENSION: {"trustedEngine": True}})
    assert status == 201, sp
    assert sp["applicationId"] == app_id and sp["displayName"] == "Spark"
    assert sp[EXTENSION]["trustedEngine"] is True and sp["meta"]["resourceType"] == "ServicePrincipal"
    gid, gname = await new_group(ws, members=[sp["id"]])
    _, made = await control(ws, "POST", "/auth/tokens", json={"principal": app_id, "lifetime_seconds": 600})
    token = made["token_value"]

    status, me = await catalog_api(ws, "/user-info/me", token)
    assert status == 200 and me["trusted_engine"] is True and me["principal_type"] == "ServicePrincipal"
    assert me["groups"] == [gname] and me["name"] == app_id and me["is_account_admin"] is False
    status, scim_me = await control(ws, "GET", "/scim2/Me", token=token)
    assert scim_me["applicationId"] == app_id and scim_me["groups"][0]["display"] == gname

    status, _ = await control(ws, "PATCH", f"/scim2/ServicePrincipals/{sp['id']}", json={
        "Operations": [{"op": "replace", "path": f"{EXTENSION}:trustedEngine", "value": False}]})
    assert status == 200
    assert (await catalog_api(ws, "/user-info/me", token))[1]["trusted_engine"] is False

    status, generated = await control(ws, "POST", "/scim2/ServicePrincipals", json={"displayName": "nameless"})
    assert status == 201 and uuid.UUID(generated["applicationId"])
    # Kinds do not mix: a service principal is not a user.
    status, _ = await control(ws, "GET", f"/scim2/Users/{sp['id']}")
    assert status == 404
    status, _ = await control(ws, "DELETE", f"/scim2/ServicePrincipals/{sp['id']}")
    assert status == 200 and (await catalog_api(ws, "/user-info/me", token))[0] == 401


async def test_user_info_for_admin_and_user(ws):
    status, me = await catalog_api(ws, "/user-info/me", ws.token)
    assert status == 200 and me["is_metastore_admin"] is True and me["is_account_admin"] is True
    assert me["metastore_id"] == ws.metastore_id and me["workspace_id"] == ws.workspace_id
    _, name, token = await new_user(ws)
    status, me = await catalog_api(ws, "/user-info/me", token)
    assert me["is_metastore_admin"] is False and me["name"] == name and me["groups"] == []
    assert me["trusted_engine"] is False and me["principal_type"] == "User"


# ---- tokens -----------------------------------------------------------------------

async def test_tokens_create_list_revoke(ws):
    _, name, first = await new_user(ws)
    status, made = await control(ws, "POST", "/auth/tokens", token=first,
                                 json={"comment": "laptop", "lifetime_seconds": 3600})
    assert status == 200
    second, info = made["token_value"], made["token_info"]
    assert info["principal"] == name and info["comment"] == "laptop" and info["state"] == "ACTIVE"
    assert 3_590_000 < info["expiry_time"] - info["creation_time"] <= 3_600_000
    assert (await catalog_api(ws, "/user-info/me", second))[0] == 200

    status, listed = await control(ws, "GET", "/auth/tokens", token=second)
    assert status == 200 and len(listed["token_infos"]) == 2
    assert first not in str(listed) and second not in str(listed) and "token_value" not in str(listed)
    status, got = await control(ws, "GET", f"/auth/tokens/{info['token_id']}", token=first)
    assert status == 200 and got == info

    status, _ = await control(ws, "DELETE", f"/auth/tokens/{info['token_id']}", token=first)
    assert status == 200
    status, body = await catalog_api(ws, "/user-info/me", second)
    assert status == 401 and body["error_code"] == "UNAUTHENTICATED"
    status, listed = await control(ws, "GET", "/auth/tokens", token=first)
    assert [t["comment"] for t in listed["token_infos"]] == ["test"]
    status, body = await control(ws, "DELETE", f"/auth/tokens/{info['token_id']}", token=first)
    assert status == 404 and body["error_code"] == "NOT_FOUND"

    # A workspace id past a bigint is refused, not a 500 from the database (found by fuzzing).
    status, body = await control(ws, "POST", "/auth/tokens", json={"workspace_id": 1 << 63})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), body
    # `all` is true or false: anything else is refused, not read as false (the fuzz test's finding).
    for bad in ("yes", "1", "tru"):
        status, body = await control(ws, "GET", "/auth/tokens", params={"all": bad})
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), (bad, body)
    status, listed = await control(ws, "GET", "/auth/tokens", token=first, params={"all": "FALSE"})
    assert status == 200 and [t["comment"] for t in listed["token_infos"]] == ["test"]

    # The admin sees and revokes anyone's tokens.
    status, listed = await control(ws, "GET", "/auth/tokens", params={"principal": name})
    assert status == 200 and len(listed["token_infos"]) == 1
    status, _ = await control(ws, "DELETE", f"/auth/tokens/{listed['token_infos'][0]['token_id']}")
    assert status == 200 and (await catalog_api(ws, "/user-info/me", first))[0] == 401


async def test_expired_token_is_unauthenticated(ws):
    _, _, token = await new_user(ws)
    status, made = await control(ws, "POST", "/auth/tokens", token=token, json={"lifetime_seconds": 3})
    short = made["token_value"]
    assert (await catalog_api(ws, "/user-info/me", short))[0] == 200      # now cached by the front
    await asyncio.sleep(3.1)
    status, body = await catalog_api(ws, "/user-info/me", short)
    assert status == 401 and body["error_code"] == "UNAUTHENTICATED"
    status, listed = await control(ws, "GET", "/auth/tokens", token=token)
    assert "EXPIRED" in [t["state"] for t in listed["token_infos"]]


async def test_other_authenticators_see_changes_within_their_ttl(ws, server):
    """A shard's or another front's cache (not told of changes) catches up within its TTL."""
    uid, _, token = await new_user(ws)
    clock = [0.0]       # the cache's own clock: "within the TTL" must not depend on how fast this machine is
    other = Authenticator(server.store, ttl=5.0, timer=lambda: clock[0])
    caller = await other.caller(token)
    assert caller.groups == frozenset() and caller.trusted_engine is False and caller.principal_id == int(uid)
    gid, gname = await new_group(ws, members=[uid])
    status, _ = await control(ws, "PATCH", f"/scim2/Users/{uid}", json={
        "Operations": [{"op": "replace", "value": {EXTENSION: {"trustedEngine": True}}}]})
    assert status == 200
    assert (await other.caller(token)).groups == frozenset()      # still cached
    clock[0] += 4.9
    assert (await other.caller(token)).groups == frozenset()      # still cached, just within the TTL
    clock[0] += 0.2
    caller = await other.caller(token)
    assert caller.groups == {gname} and caller.trusted_engine is True and caller.principals == {gname, caller.name}
    _, listed = await control(ws, "GET", "/auth/tokens", token=token)
    await control(ws, "DELETE", f"/auth/tokens/{listed['token_infos'][0]['token_id']}", token=token)
    clock[0] += 5.1
    assert await other.caller(token) is None


async def test_without_the_cache_every_request_reads_its_caller(ws, server):
    """A shard's cache-off mode: a change is seen by the very next request, with no TTL to wait out."""
    uid, _, token = await new_user(ws)
    uncached = Authenticator(server.store, cache=False)
    assert (await uncached.caller(token)).groups == frozenset() and uncached.cached(token) is None
    _, gname = await new_group(ws, members=[uid])
    assert (await uncached.caller(token)).groups == {gname}
    _, listed = await control(ws, "GET", "/auth/tokens", token=token)
    await control(ws, "DELETE", f"/auth/tokens/{listed['token_infos'][0]['token_id']}", token=token)
    assert await uncached.caller(token) is None


# ---- who may do what ----------------------------------------------------------------

async def test_non_admin_cannot_manage_principals(ws):
    uid, name, token = await new_user(ws)
    other_id, other, other_token = await new_user(ws)
    gid, gname = await new_group(ws)
    intruder = unique("intruder")
    for method, path, body in [
        ("GET", "/scim2/Users", None),
        ("POST", "/scim2/Users", {"userName": intruder}),
        ("GET", f"/scim2/Users/{other_id}", None),
        ("PUT", f"/scim2/Users/{other_id}", {"userName": other, "displayName": "hacked"}),
        ("PATCH", f"/scim2/Users/{other_id}", {"Operations": [{"op": "replace", "path": "active", "value": False}]}),
        ("PATCH", f"/scim2/Users/{uid}", {"Operations": [{"op": "replace",
                                                          "value": {EXTENSION: {"accountAdmin": True}}}]}),
        ("DELETE", f"/scim2/Users/{other_id}", None),
        ("POST", "/scim2/Groups", {"displayName": intruder}),
        ("PATCH", f"/scim2/Groups/{gid}", {"Operations": [{"op": "add", "path": "members",
                                                           "value": [{"value": uid}]}]}),
        ("DELETE", f"/scim2/Groups/{gid}", None),
        ("POST", "/scim2/ServicePrincipals", {"applicationId": intruder}),
        ("GET", "/auth/tokens", {"principal": other}),
        ("GET", "/auth/tokens?all=true", None),
        ("POST", "/auth/tokens", {"principal": other}),
        ("POST", "/auth/tokens", {"workspace_id": ws.workspace_id + 1}),
    ]:
        params = body if method == "GET" else None
        status, err = await control(ws, method, path, token=token, json=None if method == "GET" else body,
                                    params=params)
        assert status == 403 and err["error_code"] == "PERMISSION_DENIED", (method, path, err)
        assert "account admin" in err["message"] and name in err["message"]
    _, other_tokens = await control(ws, "GET", "/auth/tokens", token=other_token)
    status, err = await control(ws, "DELETE", f"/auth/tokens/{other_tokens['token_infos'][0]['token_id']}",
                                token=token)
    assert status == 403 and err["error_code"] == "PERMISSION_DENIED"

    # Nothing changed.
    assert (await catalog_api(ws, "/user-info/me", other_token))[0] == 200
    _, found = await control(ws, "GET", "/scim2/Users", params={"filter": f'userName eq "{intruder}"'})
    assert found["totalResults"] == 0
    _, me = await control(ws, "GET", "/scim2/Me", token=token)
    assert me[EXTENSION]["accountAdmin"] is False and me["groups"] == []
    _, g = await control(ws, "GET", f"/scim2/Groups/{gid}")
    assert g["members"] == []
    _, o = await control(ws, "GET", f"/scim2/Users/{other_id}")
    assert o["active"] is True and o["displayName"] == other


async def test_account_admin_made_over_scim_may_manage(ws):
    _, name, token = await new_user(ws, **{EXTENSION: {"accountAdmin": True}})
    status, made = await control(ws, "POST", "/scim2/Groups", token=token, json={"displayName": unique("g")})
    assert status == 201, made
    assert (await catalog_api(ws, "/user-info/me", token))[1]["is_account_admin"] is True


# ---- bad input ----------------------------------------------------------------------

EXISTING = "existing-principal-for-bad-input"
BAD = [
    ("no name", "POST", "/scim2/Users", {"displayName": "x"}, "INVALID_PARAMETER_VALUE", "userName"),
    ("name not a string", "POST", "/scim2/Users", {"userName": 5}, "INVALID_PARAMETER_VALUE", "userName"),
    ("name with spaces", "POST", "/scim2/Users", {"userName": " a "}, "INVALID_PARAMETER_VALUE", "userName"),
    ("name too long", "POST", "/scim2/Users", {"userName": "a" * 300}, "INVALID_PARAMETER_VALUE", "255"),
    ("emails not a list", "POST", "/scim2/Users", {"userName": "$NEW", "emails": "a@b"}, "INVALID_PARAMETER_VALUE",
     "emails"),
    ("email not an address", "POST", "/scim2/Users", {"userName": "$NEW", "emails": [{"value": "nope"}]},
     "INVALID_PARAMETER_VALUE", "e-mail"),
    ("two primary emails", "POST", "/scim2/Users", {"userName": "$NEW", "emails": [
        {"value": "a@b.c", "primary": True}, {"value": "d@e.f", "primary": True}]}, "INVALID_PARAMETER_VALUE",
     "primary"),
    ("active not a bool", "POST", "/scim2/Users", {"userName": "$NEW", "active": "yes"}, "INVALID_PARAMETER_VALUE",
     "active"),
    ("trustedEngine not a bool", "POST", "/scim2/Users", {"userName": "$NEW", EXTENSION: {"trustedEngine": 1}},
     "INVALID_PARAMETER_VALUE", "trustedEngine"),
    ("unknown extension attribute", "POST", "/scim2/Users", {"userName": "$NEW", EXTENSION: {"root": True}},
     "INVALID_PARAMETER_VALUE", "root"),
    ("duplicate name", "POST", "/scim2/Users", {"userName": EXISTING}, "ALREADY_EXISTS", EXISTING),
    ("group named like a user", "POST", "/scim2/Groups", {"displayName": EXISTING}, "ALREADY_EXISTS", EXISTING),
    ("member not an id", "POST", "/scim2/Groups", {"displayName": "$NEW", "members": [{"value": "abc"}]},
     "INVALID_PARAMETER_VALUE", "members[0].value"),
    ("member does not exist", "POST", "/scim2/Groups", {"displayName": "$NEW", "members": [{"value": "999999999"}]},
     "INVALID_PARAMETER_VALUE", "999999999"),
    ("group with trustedEngine", "POST", "/scim2/Groups", {"displayName": "$NEW", EXTENSION: {"trustedEngine": True}},
     "INVALID_PARAMETER_VALUE", "trustedEngine"),
    ("bad filter", "GET", "/scim2/Users?filter=userName%20eqq%20%22x%22", None, "INVALID_PARAMETER_VALUE", "eqq"),
    ("unclosed filter", "GET", "/scim2/Users?filter=(userName%20eq%20%22x%22", None, "INVALID_PARAMETER_VALUE",
     "filter"),
    ("bad startIndex", "GET", "/scim2/Users?startIndex=two", None, "INVALID_PARAMETER_VALUE", "startIndex"),
    ("id not a number", "GET", "/scim2/Users/abc", None, "NOT_FOUND", "abc"),
    ("patch without operations", "PATCH", "/scim2/Users/$ID", {"schemas": []}, "INVALID_PARAMETER_VALUE", "PatchOp"),
    ("patch empty operations", "PATCH", "/scim2/Users/$ID", {"Operations": []}, "INVALID_PARAMETER_VALUE",
     "Operations"),
    ("patch bad op", "PATCH", "/scim2/Users/$ID", {"Operations": [{"op": "move", "path": "active"}]},
     "INVALID_PARAMETER_VALUE", "move"),
    ("patch unknown path", "PATCH", "/scim2/Users/$ID", {"Operations": [{"op": "replace", "path": "salary",
                                                                         "value": 1}]},
     "INVALID_PARAMETER_VALUE", "salary"),
    ("patch rename", "PATCH", "/scim2/Users/$ID", {"Operations": [{"op": "replace", "path": "userName",
                                                                    "value": "renamed"}]},
     "INVALID_PARAMETER_VALUE", "cannot change"),
    ("patch two changes, second bad", "PATCH", "/scim2/Users/$ID", {"Operations": [
        {"op": "replace", "path": "displayName", "value": "changed"},
        {"op": "replace", "path": "active", "value": "no"}]}, "INVALID_PARAMETER_VALUE", "active"),
    ("put with another id", "PUT", "/scim2/Users/$ID", {"id": "1", "userName": EXISTING},
     "INVALID_PARAMETER_VALUE", "does not match"),
    ("malformed json", "POST", "/scim2/Users", b"{nope", "MALFORMED_REQUEST", "JSON"),
    ("admin deactivates itself", "PATCH", "/scim2/Users/$ADMIN", {"Operations": [
        {"op": "replace", "path": "active", "value": False}]}, "FAILED_PRECONDITION", "yourself"),
    ("admin deletes itself", "DELETE", "/scim2/Users/$ADMIN", None, "FAILED_PRECONDITION", "yourself"),
    ("lifetime zero", "POST", "/auth/tokens", {"lifetime_seconds": 0}, "INVALID_PARAMETER_VALUE", "lifetime_seconds"),
    ("lifetime negative", "POST", "/auth/tokens", {"lifetime_seconds": -5}, "INVALID_PARAMETER_VALUE",
     "lifetime_seconds"),
    ("lifetime a string", "POST", "/auth/tokens", {"lifetime_seconds": "60"}, "INVALID_PARAMETER_VALUE",
     "lifetime_seconds"),
    ("lifetime a bool", "POST", "/auth/tokens", {"lifetime_seconds": True}, "INVALID_PARAMETER_VALUE",
     "lifetime_seconds"),
    ("comment not a string", "POST", "/auth/tokens", {"comment": 5}, "INVALID_PARAMETER_VALUE", "comment"),
    ("token for a group", "POST", "/auth/tokens", {"principal": "$GROUP"}, "INVALID_PARAMETER_VALUE", "group"),
    ("token for nobody", "POST", "/auth/tokens", {"principal": "nobody-at-all-x"}, "INVALID_PARAMETER_VALUE",
     "does not exist"),
    ("oauth form", "POST", "/auth/tokens", "grant_type=x", "INVALID_PARAMETER_VALUE", "not supported"),
    ("token id not a number", "DELETE", "/auth/tokens/abc", None, "NOT_FOUND", "abc"),
]


@pytest.mark.parametrize("method,path,body,code,says", [pytest.param(*c[1:], id=c[0]) for c in BAD])
async def test_bad_input_is_refused_and_writes_nothing(ws, server, method, path, body, code, says):
    db = server.store.principals
    existing = await db.get_by_name(EXISTING) or await db.create(EXISTING, "user", {})
    group_name = "group-for-bad-input"
    if await db.get_by_name(group_name) is None:
        await db.create(group_name, "group", {})
    admin = await db.get_by_name("admin")
    new_name = unique("new")
    subst = {"$ID": str(existing.id), "$ADMIN": str(admin.id), "$NEW": new_name, "$GROUP": group_name}

    def fill(value):
        if isinstance(value, str):
            for k, v in subst.items():
                value = value.replace(k, v)
        elif isinstance(value, dict):
            value = {fill(k): fill(v) for k, v in value.items()}
        elif isinstance(value, list):
            value = [fill(v) for v in value]
        return value

    async def snapshot():
        async with server.store.pool.acquire() as conn:
            principals = await conn.fetch("SELECT * FROM principals ORDER BY id")
            members = await conn.fetch("SELECT * FROM group_members ORDER BY group_id, member_id")
            tokens = await conn.fetch("SELECT id, revoked_at FROM tokens ORDER BY id")
        return [dict(r) for r in principals], [dict(r) for r in members], [dict(r) for r in tokens]

    before = await snapshot()
    kwargs = {}
    if isinstance(body, bytes):
        kwargs = {"data": body, "headers": {"Content-Type": "application/json"}}
    elif isinstance(body, str):
        kwargs = {"data": body, "headers": {"Content-Type": "application/x-www-form-urlencoded"}}
    elif body is not None:
        kwargs = {"json": fill(body)}
    status, err = await control(ws, method, fill(path), **kwargs)
    assert (status, err["error_code"]) == ({"INVALID_PARAMETER_VALUE": 400, "MALFORMED_REQUEST": 400,
                                            "FAILED_PRECONDITION": 400, "NOT_FOUND": 404,
                                            "ALREADY_EXISTS": 409}[code], code), err
    assert says in err["message"], err
    if "/scim2/" in path:
        assert err["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"] and err["status"] == str(status)
    # Concurrent tests may add principals of their own; none of ours, and nothing that was there changed.
    after = await snapshot()
    assert [p for p in after[0] if p["id"] <= max(q["id"] for q in before[0])] == before[0]
    assert not [p for p in after[0] if p["name"] == new_name]
    assert after[1] == before[1] and after[2][:len(before[2])] == before[2]
    assert len(after[2]) == len(before[2])


async def test_unauthenticated_requests(ws):
    for path in (f"{SCIM_PREFIX}/Me", f"{CONTROL}/auth/tokens"):
        async with ws.session.get(ws.url + path) as r:
            assert r.status == 401 and (await r.json())["error_code"] == "UNAUTHENTICATED"
    async with ws.session.get(ws.api + "/user-info/me", headers={"Authorization": "Bearer scat_nope"}) as r:
        assert r.status == 401 and (await r.json())["error_code"] == "UNAUTHENTICATED"


# ---- the Ray router's front serves the same routes ------------------------------------

async def test_router_front_serves_identity(ws, server):
    """make_router_app (the sharded front) answers identity itself, with no shard at all."""
    uid, name, token = await new_user(ws)
    gid, gname = await new_group(ws, members=[uid])
    app = make_router_app(server.store, RoutingTable(server.store))
    async with TestClient(TestServer(app)) as client:
        h = {"Authorization": f"Bearer {token}"}
        r = await client.get("/api/2.1/unity-catalog/user-info/my-groups", headers=h)
        assert r.status == 200 and (await r.json())["group_names"] == [gname]
        r = await client.get(f"{SCIM_PREFIX}/Me", headers=h)
        assert r.status == 200 and (await r.json())["userName"] == name
        assert r.content_type == "application/scim+json"
        r = await client.post(f"{SCIM_PREFIX}/Groups", json={"displayName": unique("g")}, headers=h)
        assert r.status == 403 and (await r.json())["error_code"] == "PERMISSION_DENIED"
        r = await client.post(f"{CONTROL}/auth/tokens", json={"comment": "via router"}, headers=h)
        assert r.status == 200
        made = await r.json()
    status, me = await catalog_api(ws, "/user-info/me", made["token_value"])
    assert status == 200 and me["name"] == name


async def test_requests_missing_the_same_caller_at_once_share_one_read(ws, server):
    """When a cached caller expires under load, every request in flight misses it together: one
    database read refills it (the others wait for that one); without the cache each reads its own."""
    _, _, token = await new_user(ws)
    reads = []

    class CountingPrincipals:
        def __init__(self, principals):
            self.principals = principals

        async def identity_for_token(self, digest):
            reads.append(digest)
            return await self.principals.identity_for_token(digest)

    class CountingStore:
        principals = CountingPrincipals(server.store.principals)
        assignment = server.store.assignment

    for cache, expected in ((True, 1), (False, 50)):
        reads.clear()
        auth = Authenticator(CountingStore(), cache=cache)
        callers = await asyncio.gather(*(auth.caller(token) for _ in range(50)))
        assert len({c.principal_id for c in callers}) == 1 and None not in callers
        assert len(reads) == expected
    auth = Authenticator(CountingStore())
    waiter = asyncio.ensure_future(auth.caller(token))
    await asyncio.sleep(0)
    other = asyncio.ensure_future(auth.caller(token))
    waiter.cancel()                         # one waiter giving up does not fail the shared read
    assert (await other) is not None
