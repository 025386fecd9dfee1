"""Principal names wherever they enter (issue 28, class 10): grants (PATCH and PUT permissions), an
authorize request on another's behalf, owner fields of every type, share permission changes (a
recipient's name) and token creation all take the limits of principal names
(MAX_PRINCIPAL_LENGTH characters, no surrounding spaces, no control or invisible characters), and
nothing is stored when they are broken.
"""

from __future__ import annotations

import uuid

import pytest

from shardcat.governance.principals import MAX_NAME as MAX_PRINCIPAL_LENGTH
from shardcat.web.wire import CONTROL_PREFIX

LONG = "p" * 10_000
TOO_LONG = "p" * (MAX_PRINCIPAL_LENGTH + 1)
BAD_PRINCIPALS = [
    pytest.param(LONG, id="10000-chars"), pytest.param(TOO_LONG, id="limit+1"),
    pytest.param(" alice", id="leading-space"), pytest.param("al\x01ice", id="control"),
    pytest.param("al\u200bice", id="zero-width"),
]
ROLE = {"role_arn": "arn:aws:iam::123456789012:role/r"}


async def _world(ws):
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"}),
                       ("/shares", {"name": "sh"}), ("/recipients", {"name": "rcp", "authentication_type": "TOKEN"}),
                       ("/credentials", {"name": "cred", "aws_iam_role": ROLE})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer


async def _grant_rows(server, ws) -> list:
    return await server.store.pool.fetch("SELECT principal FROM grants WHERE metastore_id = $1",
                                         uuid.UUID(ws.metastore_id))


def _refused(status, answer, what):
    assert status == 400 and answer["error_code"] == "INVALID_PARAMETER_VALUE", (what, status, answer)


@pytest.mark.parametrize("principal", BAD_PRINCIPALS)
async def test_grants_refuse_what_a_principal_name_may_not_be(ws, server, principal):
    await _world(ws)
    for method, body in (("PATCH", {"changes": [{"principal": principal, "add": ["USE_CATALOG"]}]}),
                         ("PUT", {"privilege_assignments": [{"principal": principal, "privileges": ["USE_CATALOG"]}]})):
        for securable in ("catalog/main", "schema/main.s", f"metastore/{ws.metastore_id}"):
            status, answer = await ws.call(method, f"/permissions/{securable}", json=body)
            _refused(status, answer, (method, securable))
    status, answer = await ws.call("POST", "/shardcat/authorize", json={
        "principal": principal, "items": [{"securable_type": "catalog", "full_name": "main",
                                           "privilege": "USE_CATALOG"}]})
    _refused(status, answer, "authorize")
    assert await _grant_rows(server, ws) == []


@pytest.mark.parametrize("principal", BAD_PRINCIPALS)
@pytest.mark.parametrize("path", ["/catalogs/main", "/schemas/main.s", "/shares/sh", "/recipients/rcp",
                                  "/credentials/cred", "/metastores/$MS"])
async def test_owner_fields_refuse_what_a_principal_name_may_not_be(ws, principal, path):
    await _world(ws)
    path = path.replace("$MS", ws.metastore_id)
    status, answer = await ws.call("PATCH", path, json={"owner": principal})
    _refused(status, answer, path)
    status, found = await ws.call("GET", path)
    assert status == 200 and found.get("owner") == "admin", found


@pytest.mark.parametrize("principal", BAD_PRINCIPALS)
async def test_share_permissions_and_tokens_refuse_them_too(ws, principal):
    await _world(ws)
    status, answer = await ws.call("PATCH", "/shares/sh/permissions",
                                   json={"changes": [{"principal": principal, "add": ["SELECT"]}]})
    _refused(status, answer, "share permissions")
    async with ws.session.post(ws.url + CONTROL_PREFIX + "/auth/tokens", headers=ws.headers,
                               json={"principal": principal}) as r:
        _refused(r.status, await r.json(content_type=None), "token")


async def test_a_name_at_the_limit_is_taken(ws, server):
    await _world(ws)
    name = "p" * MAX_PRINCIPAL_LENGTH
    status, answer = await ws.call("PATCH", "/permissions/catalog/main",
                                   json={"changes": [{"principal": name, "add": ["USE_CATALOG"]}]})
    assert status == 200, answer
    assert [r["principal"] for r in await _grant_rows(server, ws)] == [name]
