"""Access requests and table samples over the API (the explorer's two server parts, issue 47).

Access requests: a user who sees a table asks for SELECT; the owner sees the request, approves it
and the grant is real; the change log names each step (what webhooks get as CloudEvents). The
attacks: asking on an asset one cannot see answers as a missing one; a user cannot decide a request
on an asset it does not own or manage, nor read others' requests. Samples: a reader gets the first
rows of a Delta table; a table with a mask or a row filter shows none, and says which columns are masked;
a user without SELECT gets no rows; an invisible table is missing."""

from __future__ import annotations

import pyarrow as pa

from shardcat.delta.client import DeltaCatalogClient
from tests.integration.governance_users import grant, unique, user
from tests.integration.test_enforcement_matrix import function


async def ok(caller, method, path, **kw):
    status, body = await caller.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def _world(ws):
    c = unique("ar")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        await delta.create_table(f"{c}.s.orders", pa.schema([("id", pa.int64()), ("who", pa.string())]))
        await delta.append(f"{c}.s.orders", pa.table({"id": list(range(30)), "who": [f"n{i}" for i in range(30)]}))
    await ok(ws, "POST", "/functions", json=function(c, "redact"))
    await ok(ws, "POST", "/tables", json={
        "name": "people", "catalog_name": c, "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
        "columns": [{"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0},
                    {"name": "ssn", "type_name": "STRING", "type_text": "string", "position": 1,
                     "mask": {"function_name": f"{c}.s.redact"}}]})
    return c


async def test_access_is_requested_seen_by_the_owner_and_approved(ws, server):
    c = await _world(ws)
    table = f"{c}.s.orders"
    asker, bystander = await user(server, ws), await user(server, ws)
    for u in (asker, bystander):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA", "BROWSE")
    status, body = await asker.call("GET", f"/shardcat/sample/{table}")
    assert (status, body["readable"]) == (200, False) and "rows" not in body
    _, before = await ws.call("GET", "/shardcat/changes", params={"since_version": "0", "max_results": "1000"})
    request = await ok(asker, "POST", "/shardcat/access-requests", json={
        "securable_type": "table", "full_name": table, "privileges": ["SELECT"], "reason": "for the report"})
    assert (request["state"], request["privileges"], request["requested_by"]) == ("PENDING", ["SELECT"], asker.name)

    # the owner (an admin here) sees it; the bystander sees nothing; the asker sees its own
    mine = await ok(asker, "GET", "/shardcat/access-requests")
    assert [r["id"] for r in mine["access_requests"]] == [request["id"]]
    assert (await ok(bystander, "GET", "/shardcat/access-requests"))["access_requests"] == []
    owned = await ok(ws, "GET", "/shardcat/access-requests", params={"state": "PENDING"})
    assert request["id"] in [r["id"] for r in owned["access_requests"]]

    # attacks: the bystander cannot decide it (it answers as missing), nor can the asker approve itself
    status, body = await bystander.call("PATCH", f"/shardcat/access-requests/{request['id']}", json={"state": "APPROVED"})
    assert (status, body["error_code"]) == (404, "NOT_FOUND")
    status, body = await asker.call("PATCH", f"/shardcat/access-requests/{request['id']}", json={"state": "APPROVED"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED")

    decided = await ok(ws, "PATCH", f"/shardcat/access-requests/{request['id']}",
                       json={"state": "APPROVED", "comment": "ok"})
    assert decided["state"] == "APPROVED" and decided["comment"] == "ok"
    perms = await ok(ws, "GET", f"/permissions/table/{table}")
    assert {"principal": asker.name, "privileges": ["SELECT"]} in perms["privilege_assignments"]
    sample = await ok(asker, "GET", f"/shardcat/sample/{table}", params={"max_rows": "5"})
    assert sample["readable"] and sample["columns"] == ["id", "who"] and len(sample["rows"]) == 5
    assert sample["truncated"] is True
    status, body = await ws.call("PATCH", f"/shardcat/access-requests/{request['id']}", json={"state": "DECLINED"})
    assert status == 400        # decided once

    # the change log (what webhooks and the event stream send as CloudEvents) names the asset
    changes = await ok(ws, "GET", "/shardcat/changes", params={"since_version": str(before["metastore_version"])})
    seen = [(s["full_name"], s["change"]) for v in changes["changes"] for s in v["securables"] if s["full_name"] == table]
    assert seen == [(table, "ACCESS_REQUESTED"), (table, "PERMISSIONS")]


async def test_requests_on_invisible_assets_answer_as_missing_and_declines_grant_nothing(ws, server):
    c = await _world(ws)
    outsider, asker = await user(server, ws), await user(server, ws)
    status, body = await outsider.call("POST", "/shardcat/access-requests", json={
        "securable_type": "table", "full_name": f"{c}.s.orders", "privileges": ["SELECT"]})
    assert (status, body["error_code"]) == (404, "NOT_FOUND")
    status, missing = await outsider.call("POST", "/shardcat/access-requests", json={
        "securable_type": "table", "full_name": f"{c}.s.nothing_here", "privileges": ["SELECT"]})
    assert (status, missing["error_code"]) == (404, "NOT_FOUND")
    assert body["message"].replace("orders", "X") == missing["message"].replace("nothing_here", "X")
    status, body = await outsider.call("GET", f"/shardcat/sample/{c}.s.orders")
    assert status == 404, body

    await grant(ws, "catalog", c, asker.name, "USE CATALOG", "USE SCHEMA", "BROWSE")
    request = await ok(asker, "POST", "/shardcat/access-requests", json={
        "securable_type": "table", "full_name": f"{c}.s.orders", "privileges": ["SELECT", "MODIFY"]})
    status, body = await outsider.call("GET", "/shardcat/access-requests")
    assert request["id"] not in [r["id"] for r in body["access_requests"]]
    declined = await ok(ws, "PATCH", f"/shardcat/access-requests/{request['id']}", json={"state": "DECLINED"})
    assert declined["state"] == "DECLINED"
    perms = await ok(ws, "GET", f"/permissions/table/{c}.s.orders")
    assert asker.name not in [a["principal"] for a in perms["privilege_assignments"]]


async def test_a_masked_table_shows_no_sample_and_says_which_columns(ws, server):
    c = await _world(ws)
    reader = await user(server, ws)
    await grant(ws, "catalog", c, reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    body = await ok(reader, "GET", f"/shardcat/sample/{c}.s.people")
    assert body["masked_columns"] == ["ssn"] and body["row_filter"] is False and "rows" not in body
    assert "masks" in body["reason"] and body["readable"] is True       # SELECT held: only the masks keep rows back
    body = await ok(reader, "GET", f"/shardcat/sample/{c}.s.orders")
    assert body["readable"] and len(body["rows"]) == 20 and body["masked_columns"] == []
    status, body = await reader.call("GET", f"/shardcat/sample/{c}.s.orders", params={"max_rows": "1000"})
    assert status == 400


async def test_a_sample_of_a_hidden_table_answers_as_a_missing_one(ws, server):
    """A caller who may not see the table learns nothing from the sample endpoint that a missing
    name would not tell, whatever the spelling; one who sees it without SELECT gets no rows."""
    c = await _world(ws)
    stranger = await user(server, ws)
    await grant(ws, "catalog", c, stranger.name, "USE CATALOG", "USE SCHEMA")
    for hidden, missing in ((f"{c}.s.orders", f"{c}.s.nothing"), (f"{c.upper()}.S.ORDERS", f"{c.upper()}.S.NOTHING"),
                            (f"{c}.s.people", f"{c}.s.nobody")):
        status, body = await stranger.call("GET", f"/shardcat/sample/{hidden}")
        status_missing, body_missing = await stranger.call("GET", f"/shardcat/sample/{missing}")
        assert (status, body["error_code"]) == (status_missing, body_missing["error_code"]) == (404, "NOT_FOUND"), body
        assert body["message"].lower().replace(hidden.lower(), "X") == \
            body_missing["message"].lower().replace(missing.lower(), "X"), (body, body_missing)
