"""Raw-HTTP conformance for the endpoints only the Unity Catalog 2.1 API has: metastores,
the metastore summary, workspace assignment and table summaries.
"""

from __future__ import annotations

import dataclasses
import random
import re
import time
import uuid

import pytest

from shardcat.auth import hash_token, new_token
from shardcat.entities.urls import join_url, normalize_url

ADMIN = "admin"


# ---- helpers ---------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def fresh_workspace_id() -> int:
    # Far from the conftest's counter, and random so that a reused database holds no assignment for it.
    return random.randrange(10**12, 2**62)


async def as_principal(server, ws, workspace_id: int, *, admin: bool, name: str | None = None):
    """A Workspace-like caller: a new principal with a token in `workspace_id`."""
    principal = await server.store.create_principal(name or unique("user"), is_account_admin=admin)
    token = new_token()
    await server.store.add_token(principal.id, hash_token(token), workspace_id)
    assignment = await server.store.assignment(workspace_id)
    return dataclasses.replace(ws, token=token, workspace_id=workspace_id,
                               metastore_id=assignment[0] if assignment else None)


def assert_error(status: int, body: dict, want_status: int, want_code: str) -> None:
    assert (status, body.get("error_code")) == (want_status, want_code), body
    assert body.get("message")


async def create_metastore(ws, name: str | None = None, storage_root: str = "s3://uc-bucket/roots/", **extra):
    status, body = await ws.call("POST", "/metastores", json={"name": name or unique("ms"),
                                                              "storage_root": storage_root, **extra})
    assert status == 200, body
    return body


def assert_global_id(m: dict) -> None:
    assert m["global_metastore_id"] == f"{m['cloud']}:{m['region']}:{m['metastore_id']}"


# ---- metastores ------------------------------------------------------------------------


async def test_create_metastore_appends_its_id_to_the_storage_root(ws):
    name = unique("Prod")
    t0 = now_ms()
    m = await create_metastore(ws, name, "s3://uc-bucket/roots/", region="us-west-2", owner="someone-else",
                               delta_sharing_enabled=True, storage_root_credential_id=str(uuid.uuid4()))
    t1 = now_ms()
    ms_id = m["metastore_id"]
    assert str(uuid.UUID(ms_id)) == ms_id and ms_id != ws.metastore_id
    assert m["name"] == name.lower()
    assert m["storage_root"] == f"s3://uc-bucket/roots/{ms_id}"
    assert (m["cloud"], m["region"]) == ("aws", "us-west-2")
    assert_global_id(m)
    # owner and the delta-sharing fields are IGN on create: the caller owns it, defaults apply.
    assert m["owner"] == ADMIN and m["created_by"] == ADMIN and m["updated_by"] == ADMIN
    assert not m.get("delta_sharing_enabled")
    assert "storage_root_credential_id" not in m
    assert m["delta_sharing_scope"] == "INTERNAL"
    assert t0 - 5 <= m["created_at"] == m["updated_at"] <= t1 + 5

    status, got = await ws.call("GET", f"/metastores/{ms_id}")
    assert status == 200 and got == m

    local = await create_metastore(ws, storage_root=normalize_url("/tmp/shardcat-conformance/ms"))
    assert local["storage_root"] == join_url(normalize_url("/tmp/shardcat-conformance/ms"), local["metastore_id"])
    assert local["cloud"] == "local"
    assert_global_id(local)


async def test_create_metastore_errors(ws, server):
    taken = await create_metastore(ws)
    status, body = await ws.call("POST", "/metastores", json={"name": taken["name"], "storage_root": "s3://b/x"})
    assert_error(status, body, 409, "ALREADY_EXISTS")
    status, body = await ws.call("POST", "/metastores", json={"name": taken["name"].upper(), "storage_root": "s3://b/x"})
    assert_error(status, body, 409, "ALREADY_EXISTS")
    for bad in ({"name": unique("ms")}, {"storage_root": "s3://b/x"},
                {"name": unique("ms"), "storage_root": "not a url"},
                {"name": unique("ms"), "storage_root": 7},
                {"name": "has.dot", "storage_root": "s3://b/x"}):
        status, body = await ws.call("POST", "/metastores", json=bad)
        assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")

    user = await as_principal(server, ws, ws.workspace_id, admin=False)
    status, body = await user.call("POST", "/metastores", json={"name": unique("ms"), "storage_root": "s3://b/x"})
    assert_error(status, body, 403, "PERMISSION_DENIED")


async def test_list_metastores_shows_only_the_workspace_metastore(ws, server):
    other = await create_metastore(ws)
    status, listed = await ws.call("GET", "/metastores")
    assert status == 200
    assert [m["metastore_id"] for m in listed["metastores"]] == [ws.metastore_id]
    status, mine = await ws.call("GET", f"/metastores/{ws.metastore_id}")
    assert status == 200 and listed["metastores"] == [mine]
    assert mine["storage_root"] == ws.storage_root
    assert other["metastore_id"] not in {m["metastore_id"] for m in listed["metastores"]}

    # A workspace with no metastore sees none; a plain user sees the workspace's one.
    nowhere = await as_principal(server, ws, fresh_workspace_id(), admin=True)
    status, listed = await nowhere.call("GET", "/metastores")
    assert status == 200 and listed["metastores"] == []
    user = await as_principal(server, ws, ws.workspace_id, admin=False)
    status, listed = await user.call("GET", "/metastores")
    assert status == 200 and listed["metastores"] == [mine]


async def test_get_metastore_errors(ws, server):
    status, body = await ws.call("GET", "/metastores/not-a-uuid")
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    status, body = await ws.call("GET", f"/metastores/{uuid.uuid4()}")
    assert_error(status, body, 404, "NOT_FOUND")
    other = await create_metastore(ws)
    user = await as_principal(server, ws, ws.workspace_id, admin=False)
    status, body = await user.call("GET", f"/metastores/{other['metastore_id']}")
    assert_error(status, body, 404, "NOT_FOUND")     # another workspace's: as if it did not exist
    status, body = await user.call("GET", f"/metastores/{ws.metastore_id}")
    assert status == 200 and body["metastore_id"] == ws.metastore_id


async def test_update_metastore(ws):
    status, before = await ws.call("GET", f"/metastores/{ws.metastore_id}")
    assert status == 200
    new_name = unique("Renamed")
    patch = {
        "name": new_name, "owner": "ops-team", "delta_sharing_enabled": True,
        "delta_sharing_scope": "INTERNAL_AND_EXTERNAL",
        "delta_sharing_recipient_token_lifetime_in_seconds": 3600,
        "delta_sharing_organization_name": "acme", "privilege_model_version": "1.0",
    }
    status, after = await ws.call("PATCH", f"/metastores/{ws.metastore_id}", json=patch)
    assert status == 200, after
    assert after["name"] == new_name.lower()
    for key, value in patch.items():
        if key != "name":
            assert after[key] == value, key
    for key in ("metastore_id", "storage_root", "created_at", "created_by", "cloud", "region",
                "global_metastore_id"):
        assert after[key] == before[key], key
    assert after["updated_by"] == ADMIN and after["updated_at"] >= before["updated_at"]

    status, got = await ws.call("GET", f"/metastores/{ws.metastore_id}")
    assert status == 200 and got == after
    status, listed = await ws.call("GET", "/metastores")
    assert listed["metastores"] == [after]
    status, summary = await ws.call("GET", "/metastore_summary")
    assert summary["name"] == new_name.lower()

    # Partial: fields not sent keep their values.
    status, again = await ws.call("PATCH", f"/metastores/{ws.metastore_id}", json={"delta_sharing_enabled": False})
    assert status == 200 and again["delta_sharing_enabled"] is False
    assert again["owner"] == "ops-team" and again["name"] == new_name.lower()


async def test_update_metastore_errors(ws, server):
    path = f"/metastores/{ws.metastore_id}"
    status, before = await ws.call("GET", path)
    status, body = await ws.call("PATCH", path, json={"storage_root": "s3://elsewhere/x"})   # ERR on update
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    status, body = await ws.call("PATCH", path, json={"delta_sharing_enabled": "yes"})
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    status, body = await ws.call("PATCH", path, json={"delta_sharing_recipient_token_lifetime_in_seconds": "1h"})
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    status, body = await ws.call("PATCH", path, json={"delta_sharing_scope": "EVERYONE"})
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    # The token lifetime must be set when the scope becomes INTERNAL_AND_EXTERNAL.
    status, body = await ws.call("PATCH", path, json={"delta_sharing_scope": "INTERNAL_AND_EXTERNAL"})
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    status, body = await ws.call("PATCH", path, json={"delta_sharing_recipient_token_lifetime_in_seconds": -1})
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    other = await create_metastore(ws)
    status, body = await ws.call("PATCH", path, json={"name": other["name"]})
    assert_error(status, body, 409, "ALREADY_EXISTS")
    status, after = await ws.call("GET", path)
    assert after == before   # no failed PATCH changed anything

    status, body = await ws.call("PATCH", f"/metastores/{uuid.uuid4()}", json={"owner": "x"})
    assert_error(status, body, 404, "NOT_FOUND")
    user = await as_principal(server, ws, ws.workspace_id, admin=False)
    status, body = await user.call("PATCH", path, json={"owner": "me"})
    assert_error(status, body, 403, "PERMISSION_DENIED")


async def test_delete_metastore_with_and_without_force(ws, server):
    empty = await create_metastore(ws)
    status, body = await ws.call("DELETE", f"/metastores/{empty['metastore_id']}")
    assert status == 200, body
    status, body = await ws.call("GET", f"/metastores/{empty['metastore_id']}")
    assert_error(status, body, 404, "NOT_FOUND")
    status, body = await ws.call("DELETE", f"/metastores/{empty['metastore_id']}")
    assert_error(status, body, 404, "NOT_FOUND")

    # A metastore with a catalog in it: refused without force, deleted with it.
    full = await create_metastore(ws, storage_root=normalize_url("/tmp/shardcat-conformance/full"))
    workspace = fresh_workspace_id()
    status, body = await ws.call("PUT", f"/workspaces/{workspace}/metastore",
                                 json={"metastore_id": full["metastore_id"], "default_catalog_name": "main"})
    assert status == 200, body
    inside = await as_principal(server, ws, workspace, admin=True)
    status, body = await inside.call("POST", "/catalogs", json={"name": "main"})
    assert status == 200, body

    user = await as_principal(server, ws, ws.workspace_id, admin=False)
    status, body = await user.call("DELETE", f"/metastores/{full['metastore_id']}?force=true")
    assert_error(status, body, 403, "PERMISSION_DENIED")
    status, body = await ws.call("DELETE", f"/metastores/{full['metastore_id']}")
    assert_error(status, body, 400, "FAILED_PRECONDITION")
    status, body = await ws.call("DELETE", f"/metastores/{full['metastore_id']}", params={"force": "false"})
    assert_error(status, body, 400, "FAILED_PRECONDITION")
    status, body = await inside.call("GET", "/catalogs/main")
    assert status == 200, body

    status, body = await ws.call("DELETE", f"/metastores/{full['metastore_id']}", params={"force": "true"})
    assert status == 200, body
    status, body = await ws.call("GET", f"/metastores/{full['metastore_id']}")
    assert_error(status, body, 404, "NOT_FOUND")
    assert await server.store.assignment(workspace) is None
    # The workspace it was assigned to no longer has a metastore: every call is a clean 404.
    for method, path, payload in (("GET", "/metastore_summary", None), ("GET", "/catalogs/main", None),
                                  ("GET", "/catalogs", None), ("POST", "/catalogs", {"name": "again"})):
        status, body = await inside.call(method, path, json=payload)
        assert_error(status, body, 404, "NOT_FOUND")
    status, body = await inside.call("GET", "/metastores")
    assert status == 200 and body["metastores"] == []


async def test_delete_metastore_bad_force_flag(ws):
    status, body = await ws.call("DELETE", f"/metastores/{ws.metastore_id}", params={"force": "maybe"})
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    status, body = await ws.call("GET", f"/metastores/{ws.metastore_id}")
    assert status == 200


# ---- metastore summary ------------------------------------------------------------------


async def test_metastore_summary(ws, server):
    status, summary = await ws.call("GET", "/metastore_summary")
    assert status == 200, summary
    status, full = await ws.call("GET", f"/metastores/{ws.metastore_id}")
    assert summary["metastore_id"] == ws.metastore_id
    assert summary["storage_root"] == ws.storage_root
    for key in ("name", "cloud", "region", "global_metastore_id"):
        assert summary[key] == full[key], key
    assert_global_id(summary)
    assert set(summary) <= {"metastore_id", "name", "cloud", "region", "global_metastore_id", "storage_root",
                            "storage_root_credential_id", "default_data_access_config_id"}

    user = await as_principal(server, ws, ws.workspace_id, admin=False)
    status, body = await user.call("GET", "/metastore_summary")
    assert status == 200 and body == summary
    nowhere = await as_principal(server, ws, fresh_workspace_id(), admin=False)
    status, body = await nowhere.call("GET", "/metastore_summary")
    assert_error(status, body, 404, "NOT_FOUND")


# ---- workspace assignment -----------------------------------------------------------------


async def test_workspace_assignment_lifecycle(ws, server):
    m = await create_metastore(ws)
    m_id = m["metastore_id"]
    workspace = fresh_workspace_id()
    member_name = unique("member")
    member = await as_principal(server, ws, workspace, admin=False, name=member_name)
    path = f"/workspaces/{workspace}/metastore"

    status, body = await member.call("GET", "/metastore_summary")
    assert_error(status, body, 404, "NOT_FOUND")
    status, body = await ws.call("PATCH", path, json={"default_catalog_name": "x"})   # nothing to update yet
    assert_error(status, body, 404, "NOT_FOUND")

    status, body = await ws.call("PUT", path, json={"metastore_id": m_id, "default_catalog_name": "main"})
    assert status == 200, body
    assert await server.store.assignment(workspace) == (m_id, "main")
    status, summary = await member.call("GET", "/metastore_summary")
    assert status == 200 and summary["metastore_id"] == m_id and summary["name"] == m["name"]
    status, listed = await member.call("GET", "/metastores")
    assert [x["metastore_id"] for x in listed["metastores"]] == [m_id]
    # The member's catalogs live in the new metastore, not in the ws fixture's one. (Governance: the
    # member creates them as the new metastore's admin, its owner.)
    status, body = await ws.call("PATCH", f"/metastores/{m_id}", json={"owner": member_name})
    assert status == 200, body
    status, body = await member.call("POST", "/catalogs", json={"name": "only_here"})
    assert status == 200 and body["metastore_id"] == m_id
    status, body = await ws.call("GET", "/catalogs/only_here")
    assert_error(status, body, 404, "NOT_FOUND")
    # Managed storage comes from the new metastore's root (the one with its id appended).
    status, body = await member.call("POST", "/schemas", json={"name": "s", "catalog_name": "only_here"})
    assert status == 200, body
    status, table = await member.call("POST", "/tables", json={
        "name": "t", "catalog_name": "only_here", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": []})
    assert status == 200, table
    assert table["storage_location"] == f"{m['storage_root']}/tables/{table['table_id']}"

    # PATCH changes only what it is given.
    status, body = await ws.call("PATCH", path, json={"default_catalog_name": "other"})
    assert status == 200, body
    assert await server.store.assignment(workspace) == (m_id, "other")
    status, body = await ws.call("PATCH", path, json={"metastore_id": ws.metastore_id})
    assert status == 200, body
    assert await server.store.assignment(workspace) == (ws.metastore_id, "other")
    status, summary = await member.call("GET", "/metastore_summary")
    assert summary["metastore_id"] == ws.metastore_id
    status, body = await member.call("GET", "/catalogs/only_here")
    assert_error(status, body, 404, "NOT_FOUND")

    # PUT overwrites an existing assignment.
    status, body = await ws.call("PUT", path, json={"metastore_id": m_id, "default_catalog_name": "main"})
    assert status == 200
    status, summary = await member.call("GET", "/metastore_summary")
    assert summary["metastore_id"] == m_id
    status, body = await member.call("GET", "/catalogs/only_here")
    assert status == 200 and body["name"] == "only_here"

    # DELETE needs the assigned metastore's id.
    status, body = await ws.call("DELETE", path)
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")
    status, body = await ws.call("DELETE", path, params={"metastore_id": ws.metastore_id})
    assert_error(status, body, 404, "NOT_FOUND")
    assert await server.store.assignment(workspace) == (m_id, "main")
    status, body = await ws.call("DELETE", path, params={"metastore_id": m_id})
    assert status == 200, body
    assert await server.store.assignment(workspace) is None
    status, body = await member.call("GET", "/metastore_summary")
    assert_error(status, body, 404, "NOT_FOUND")
    status, body = await member.call("GET", "/catalogs")
    assert_error(status, body, 404, "NOT_FOUND")
    status, body = await ws.call("DELETE", path, params={"metastore_id": m_id})
    assert_error(status, body, 404, "NOT_FOUND")
    # The metastore itself is untouched by losing its workspace.
    status, body = await ws.call("GET", f"/metastores/{m_id}")
    assert status == 200


async def test_workspace_assignment_delete_with_body(ws, server):
    m = await create_metastore(ws)
    workspace = fresh_workspace_id()
    path = f"/workspaces/{workspace}/metastore"
    status, _ = await ws.call("PUT", path, json={"metastore_id": m["metastore_id"], "default_catalog_name": "main"})
    assert status == 200
    status, body = await ws.call("DELETE", path, json={"metastore_id": m["metastore_id"]})
    assert status == 200, body
    assert await server.store.assignment(workspace) is None


async def test_workspace_assignment_errors(ws, server):
    m = await create_metastore(ws)
    workspace = fresh_workspace_id()
    path = f"/workspaces/{workspace}/metastore"
    for payload, want in (({"default_catalog_name": "main"}, (400, "INVALID_PARAMETER_VALUE")),
                          ({"metastore_id": str(uuid.uuid4())}, (404, "NOT_FOUND")),
                          ({"metastore_id": "not-a-uuid"}, (400, "INVALID_PARAMETER_VALUE")),
                          ({"metastore_id": 12}, (400, "INVALID_PARAMETER_VALUE"))):
        status, body = await ws.call("PUT", path, json=payload)
        assert_error(status, body, *want)
    assert await server.store.assignment(workspace) is None
    status, body = await ws.call("PUT", "/workspaces/not-a-number/metastore", json={"metastore_id": m["metastore_id"]})
    assert_error(status, body, 400, "INVALID_PARAMETER_VALUE")

    user = await as_principal(server, ws, ws.workspace_id, admin=False)
    for method, payload in (("PUT", {"metastore_id": m["metastore_id"]}), ("PATCH", {"metastore_id": m["metastore_id"]}),
                            ("DELETE", {"metastore_id": ws.metastore_id})):
        status, body = await user.call(method, f"/workspaces/{ws.workspace_id}/metastore", json=payload)
        assert_error(status, body, 403, "PERMISSION_DENIED")
    assert await server.store.assignment(ws.workspace_id) == (ws.metastore_id, None)


# ---- table summaries ------------------------------------------------------------------------


def like(pattern: str, name: str) -> bool:
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None


LAYOUT = {   # schema -> tables (a view is marked with a leading '!')
    "sales": ["orders", "order_items", "orders2", "o_1", "!v_orders"],
    "sales_eu": ["orders", "returns", "o11"],
    "salesx": ["orders", "ledger"],
    "hr": ["people", "!v_people", "orders"],
    "s": ["t"],
}


@pytest.fixture
async def summaries_catalog(ws):
    """Catalog `c` laid out as LAYOUT, plus a catalog `d` and a staging table that must never show up."""
    expected = {}
    for catalog in ("c", "d"):
        status, body = await ws.call("POST", "/catalogs", json={"name": catalog})
        assert status == 200, body
    for schema, tables in LAYOUT.items():
        for catalog in ("c", "d"):
            status, body = await ws.call("POST", "/schemas", json={"name": schema, "catalog_name": catalog})
            assert status == 200, body
        for table in tables:
            is_view = table.startswith("!")
            table = table.lstrip("!")
            body = {"name": table, "catalog_name": "c", "schema_name": schema, "columns": []}
            if is_view:
                body.update(table_type="VIEW", view_definition="SELECT 1")
            else:
                body.update(table_type="MANAGED", data_source_format="DELTA")
            status, created = await ws.call("POST", "/tables", json=body)
            assert status == 200, created
            expected[f"c.{schema}.{table}"] = "VIEW" if is_view else "MANAGED"
    status, body = await ws.call("POST", "/tables", json={
        "name": "elsewhere", "catalog_name": "d", "schema_name": "sales", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": []})
    assert status == 200, body
    status, body = await ws.call("POST", "/staging-tables", json={"name": "staged", "catalog_name": "c",
                                                                  "schema_name": "sales"})
    assert status == 200, body
    return expected


async def summaries(ws, max_results: int | None = None, **body) -> tuple[list[dict], int]:
    """All pages of /table-summaries: (summaries in order, number of pages)."""
    out, token, pages = [], None, 0
    while True:
        req = {"catalog_name": "c", **body}
        if max_results is not None:
            req["max_results"] = max_results
        if token:
            req["page_token"] = token
        status, page = await ws.call("POST", "/table-summaries", json=req)
        assert status == 200, page
        pages += 1
        if max_results:
            assert len(page["tables"]) <= max_results
        out += page["tables"]
        token = page.get("next_page_token")
        if not token:
            return out, pages
        assert pages < 1000, "paging never ended"


@pytest.mark.parametrize("schema_pattern, table_pattern", [
    (None, None),
    ("sales", None),
    ("sales_", None),        # one more character: salesx, not sales_eu or sales
    ("sales%", None),
    ("%a%", "order%"),
    (None, "o_1"),           # "_" matches any one character: o_1 and o11
    ("sales_eu", "o_1"),
    (None, "%s"),
    ("SALES%", "ORDERS"),    # names are case-insensitive
    ("_", "%"),
    ("nomatch%", None),
    (None, "orders_"),
])
async def test_table_summaries_like_patterns(ws, summaries_catalog, schema_pattern, table_pattern):
    body = {}
    if schema_pattern is not None:
        body["schema_name_pattern"] = schema_pattern
    if table_pattern is not None:
        body["table_name_pattern"] = table_pattern
    got, pages = await summaries(ws, **body)
    want = [
        {"full_name": full, "table_type": kind} for full, kind in sorted(summaries_catalog.items())
        if like((schema_pattern or "%").lower(), full.split(".")[1])
        and like((table_pattern or "%").lower(), full.split(".")[2])
    ]
    assert got == want
    assert pages == 1


async def test_table_summaries_explicit_cases(ws, summaries_catalog):
    # Hand-written expectations, independent of the LIKE helper above.
    got, _ = await summaries(ws, schema_name_pattern="sales_")
    assert [t["full_name"] for t in got] == ["c.salesx.ledger", "c.salesx.orders"]
    got, _ = await summaries(ws, table_name_pattern="o_1")
    assert [t["full_name"] for t in got] == ["c.sales.o_1", "c.sales_eu.o11"]
    got, _ = await summaries(ws, schema_name_pattern="hr")
    assert got == [{"full_name": "c.hr.orders", "table_type": "MANAGED"},
                   {"full_name": "c.hr.people", "table_type": "MANAGED"},
                   {"full_name": "c.hr.v_people", "table_type": "VIEW"}]
    all_names = {t["full_name"] for t in (await summaries(ws))[0]}
    assert "c.sales.staged" not in all_names and not any(n.startswith("d.") for n in all_names)


@pytest.mark.parametrize("page", [1, 2, 4, 7, 100])
async def test_table_summaries_paging_to_exhaustion(ws, summaries_catalog, page):
    got, pages = await summaries(ws, max_results=page)
    names = [t["full_name"] for t in got]
    assert len(names) == len(set(names))                         # no duplicates
    assert set(names) == set(summaries_catalog)                  # none missing
    assert names == sorted(names)                                # ordered by full_name
    assert pages == max(1, -(-len(names) // page))               # no trailing empty page
    assert all(t["table_type"] == summaries_catalog[t["full_name"]] for t in got)

    got, _ = await summaries(ws, max_results=page, schema_name_pattern="sales%", table_name_pattern="o%")
    want = sorted(n for n in summaries_catalog if like("sales%", n.split(".")[1]) and like("o%", n.split(".")[2]))
    assert [t["full_name"] for t in got] == want


async def test_table_summaries_paging_sees_consistent_cursor(ws, summaries_catalog):
    """A page token is a position: a table created after it, sorting after it, appears on later pages."""
    status, first = await ws.call("POST", "/table-summaries", json={"catalog_name": "c", "max_results": 3})
    assert status == 200 and len(first["tables"]) == 3 and first["next_page_token"]
    for schema, table in (("salesx", "zzz"), ("hr", "aaa")):   # after and before the cursor
        status, body = await ws.call("POST", "/tables", json={
            "name": table, "catalog_name": "c", "schema_name": schema, "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": []})
        assert status == 200, body
    rest, token = [], first["next_page_token"]
    while token:
        status, page = await ws.call("POST", "/table-summaries", json={"catalog_name": "c", "max_results": 3,
                                                                       "page_token": token})
        assert status == 200
        rest += page["tables"]
        token = page.get("next_page_token")
    names = [t["full_name"] for t in first["tables"] + rest]
    assert names == sorted(set(names))
    assert "c.salesx.zzz" in names and "c.hr.aaa" not in names


async def test_table_summaries_follow_renames_and_deletes(ws, summaries_catalog):
    status, body = await ws.call("PATCH", "/schemas/c.hr", json={"new_name": "people_ops"})
    assert status == 200, body
    status, body = await ws.call("DELETE", "/tables/c.sales.orders2")
    assert status == 200, body
    got, _ = await summaries(ws, max_results=2)
    names = [t["full_name"] for t in got]
    assert names == sorted(names)
    assert {"c.people_ops.orders", "c.people_ops.people", "c.people_ops.v_people"} <= set(names)
    assert not any(n.startswith("c.hr.") for n in names) and "c.sales.orders2" not in names
    assert len(names) == len(summaries_catalog) - 1


async def test_table_summaries_errors(ws, summaries_catalog):
    for body, want in (({}, (400, "INVALID_PARAMETER_VALUE")),
                       ({"catalog_name": "nope"}, (404, "NOT_FOUND")),
                       ({"catalog_name": "c", "max_results": -1}, (400, "INVALID_PARAMETER_VALUE")),
                       ({"catalog_name": "c", "max_results": "many"}, (400, "INVALID_PARAMETER_VALUE")),
                       ({"catalog_name": "c", "page_token": "garbage"}, (400, "INVALID_PARAMETER_VALUE")),
                       ({"catalog_name": "c", "schema_name_pattern": 5}, (400, "INVALID_PARAMETER_VALUE"))):
        status, resp = await ws.call("POST", "/table-summaries", json=body)
        assert_error(status, resp, *want)
    # max_results 0 means the server's page size: everything here fits on one page.
    status, resp = await ws.call("POST", "/table-summaries", json={"catalog_name": "c", "max_results": 0})
    assert status == 200 and len(resp["tables"]) == len(summaries_catalog) and not resp.get("next_page_token")
