"""A shard's front (shardcat/serving/front.py): the plain gets, lists and batched resolves it
answers itself answer as the shard app does (body, headers, audit rows), and every failure or
unusual request goes to the app; so do the creates and Delta commits it makes, except that a
write that failed after it was applied is answered by the front and never sent again. The session's server serves its in-process shard behind this front; a shard actor does too."""

from __future__ import annotations

import json
import uuid

import pytest
from yarl import URL

from shardcat.web.wire import REQUEST_ID_HEADER
from shardcat.web.wire import VERSION_HEADER
from tests.conftest import PREFIX, new_workspace, serving
from tests.integration.test_audit import events, user_token

# (what the front answers, the same request in a form only the app takes: an escaped letter)
READS = [
    ("/catalogs/c", "/catalogs/%63"),
    ("/schemas/c.s", "/schemas/c.%73"),
    ("/tables/c.s.t", "/tables/c.s.%74"),
    ("/volumes/c.s.v", "/volumes/c.s.%76"),
    ("/schemas?catalog_name=c", "/schemas?catalog_name=%63"),
    ("/tables?catalog_name=c&schema_name=s&max_results=1", "/tables?catalog_name=%63&schema_name=s&max_results=1"),
]


def counts(server) -> dict:
    return dict(server.front.front.stats)


@pytest.fixture
async def tws(server, http, tmp_path):
    ws = await new_workspace(server, http, tmp_path)
    for path, body in (("/catalogs", {"name": "c"}), ("/schemas", {"name": "s", "catalog_name": "c"}),
                       ("/volumes", {"name": "v", "catalog_name": "c", "schema_name": "s",
                                     "volume_type": "MANAGED"})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer
    for name in ("t", "u"):
        status, answer = await ws.call("POST", "/tables", json={
            "name": name, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG", "position": 0}]})
        assert status == 200, answer
    return ws


async def get(ws, url: str, headers: dict | None = None):
    """(status, headers, body) of a GET of `url` exactly as written (aiohttp would unescape "%63")."""
    async with ws.session.get(URL(url, encoded=True), headers={**ws.headers, **(headers or {})}) as r:
        return r.status, r.headers, await r.read()


async def test_plain_reads_are_answered_by_the_front_as_the_app_answers_them(server, tws):
    for fast, through_app in READS:
        before = counts(server)
        status, headers, body = await get(tws, tws.api + fast)
        middle = counts(server)
        app_status, app_headers, app_body = await get(tws, tws.api + through_app)
        after = counts(server)
        assert (middle["fast"] - before["fast"], middle["through_app"] - before["through_app"]) == (1, 0), fast
        assert (after["fast"] - middle["fast"], after["through_app"] - middle["through_app"]) == (0, 1), fast
        assert status == app_status == 200, (fast, body)
        assert json.loads(body) == json.loads(app_body)
        assert headers["Content-Type"] == app_headers["Content-Type"] == "application/json"
        assert headers[VERSION_HEADER] == app_headers[VERSION_HEADER]
        assert len(headers[REQUEST_ID_HEADER]) == 32 and headers[REQUEST_ID_HEADER] != app_headers[REQUEST_ID_HEADER]
        assert "Date" in headers


async def test_a_list_pages_through_the_front(server, tws):
    status, headers, body = await get(tws, tws.api + "/tables?catalog_name=c&schema_name=s&max_results=1")
    first = json.loads(body)
    status, headers, body = await get(
        tws, tws.api + f"/tables?catalog_name=c&schema_name=s&max_results=1&page_token={first['next_page_token']}")
    second = json.loads(body)
    assert [t["name"] for t in first["tables"] + second["tables"]] == ["t", "u"]
    assert "next_page_token" not in second


async def test_the_front_records_the_row_the_app_records(server, tws):
    ids = {}
    for path in ("/tables/c.s.t", "/tables/c.s.%74", "/tables?catalog_name=c&schema_name=s",
                 "/tables?catalog_name=%63&schema_name=s"):
        status, headers, _ = await get(tws, tws.api + path)
        assert status == 200
        ids[path] = headers[REQUEST_ID_HEADER]
    rows = {}
    for path, request_id in ids.items():
        (row,) = await events(tws, request_id=request_id)
        rows[path] = {k: v for k, v in row.items() if k not in ("request_id", "at", "event_time", "id")}
    assert rows["/tables/c.s.t"] == rows["/tables/c.s.%74"]
    assert rows["/tables/c.s.t"]["action"] == "getTable" and rows["/tables/c.s.t"]["securable_full_name"] == "c.s.t"
    assert rows["/tables?catalog_name=c&schema_name=s"] == rows["/tables?catalog_name=%63&schema_name=s"]
    assert rows["/tables?catalog_name=c&schema_name=s"]["action"] == "listTables"


async def test_a_batched_resolve_is_answered_by_the_front_as_the_app_answers_it(server, tws):
    """Its answer, its own row and one row per access decision, under the request's id."""
    # no credentials: their expiry times would differ by the milliseconds between the two
    body = {"items": [{"name": "c.s.t"}, {"name": "c.s.u"}, {"name": "c.s.nope"}], "credentials": False}
    answers = {}
    for path in ("/resolve", "/resolve?x=1"):       # a query: only the app takes it
        before = counts(server)
        async with tws.session.post(tws.api + path, json=body, headers=tws.headers) as r:
            assert r.status == 200
            answers[path] = (await r.json(), r.headers[REQUEST_ID_HEADER], r.headers[VERSION_HEADER])
        after = counts(server)
        assert after["fast"] - before["fast"] == (path == "/resolve"), path
    (fast, fast_id, fast_version), (app, app_id, app_version) = answers["/resolve"], answers["/resolve?x=1"]
    assert fast == app and fast_version == app_version
    assert [i.get("error", {}).get("error_code") for i in fast["items"]] == [None, None, "NOT_FOUND"]

    def shape(rows):
        return sorted((r["action"], r["route"], r.get("securable_full_name") or "", r["allowed"], r.get("status", 0))
                      for r in rows)
    fast_rows, app_rows = await events(tws, request_id=fast_id), await events(tws, request_id=app_id)
    assert len(fast_rows) == 4 and shape(fast_rows) == shape(app_rows)


async def test_failures_and_unusual_requests_go_to_the_app(server, tws):
    stranger = await user_token(server, tws, "front-stranger")
    cases = [
        ("/tables/c.s.nope", {}, 404, "NOT_FOUND"),
        ("/tables/c.s.t", {"Authorization": f"Bearer {stranger}"}, 404, "NOT_FOUND"),   # invisible: as missing
        ("/tables/c.s.t", {"Authorization": "Bearer nope"}, 401, "UNAUTHENTICATED"),
        ("/tables/c.s.t", {VERSION_HEADER.replace("Version", "Min-Version"): "x"}, 400, "INVALID_PARAMETER_VALUE"),
        ("/tables/", {}, 404, "ENDPOINT_NOT_FOUND"),
        ("/tables/c.s.t?x=1", {}, 200, None),            # a query where the app's route has none
        ("/tables?catalog_name=c", {}, 400, "INVALID_PARAMETER_VALUE"),      # a parent missing
        ("/tables?catalog_name=c&schema_name=s&max_results=x", {}, 400, "INVALID_PARAMETER_VALUE"),
        ("/resolve", {}, 400, "MALFORMED_REQUEST"),      # a body that is not a JSON object
    ]
    for path, headers, expected, code in cases:
        before = counts(server)
        if path == "/resolve":
            async with tws.session.post(tws.api + path, data=b"[1]", headers=tws.headers) as r:
                status, answer_headers, body = r.status, r.headers, await r.read()
        else:
            status, answer_headers, body = await get(tws, tws.api + path, headers)
        after = counts(server)
        assert status == expected, (path, body)
        if code:
            assert json.loads(body)["error_code"] == code, (path, body)
        assert after["fast"] == before["fast"] and after["through_app"] == before["through_app"] + 1, path
        # tried on the front first: those it could parse, with a caller, whose work failed
        tried = path in ("/tables/c.s.nope", "/tables?catalog_name=c&schema_name=s&max_results=x", "/resolve") \
            or headers.get("Authorization") == f"Bearer {stranger}"
        assert after["tried_first"] - before["tried_first"] == tried, path
        if status != 401:
            # Recorded once, by the app: the front records only what it answers.
            assert len(await events(tws, request_id=answer_headers[REQUEST_ID_HEADER])) == 1, path


async def test_a_min_version_is_honoured_on_the_front(server, tws):
    status, headers, _ = await get(tws, tws.api + "/tables/c.s.t")
    version = headers[VERSION_HEADER]
    before = counts(server)
    status, headers, body = await get(tws, tws.api + "/tables/c.s.t", {"X-Shardcat-Min-Version": version})
    assert status == 200 and int(headers[VERSION_HEADER]) >= int(version)
    assert counts(server)["fast"] == before["fast"] + 1


async def test_head_and_writes_go_to_the_app(server, tws):
    before = counts(server)
    async with tws.session.head(tws.api + "/tables/c.s.t", headers=tws.headers) as r:
        assert r.status == 200
    status, _ = await tws.call("PATCH", "/tables/c.s.u", json={"comment": "x"})
    assert status == 200
    after = counts(server)
    assert after["fast"] == before["fast"] and after["through_app"] == before["through_app"] + 2


cluster = serving("shard-front", shards=1)


async def test_a_shard_actor_answers_behind_its_front_as_the_router_does(cluster, http, tmp_path):
    """Straight to the owner shard (its URL from the routing table) and through the router: the same answers."""
    ws = await new_workspace(cluster, http, tmp_path)
    status, _ = await ws.call("POST", "/catalogs", json={"name": "c"})
    assert status == 200
    status, routing = await ws.call("GET", "/shardcat/routing")
    shard = URL(routing["my_shard"])
    assert shard.port != URL(cluster.url).port
    actor = cluster.cluster.routing.shards[routing["metastores"][ws.metastore_id]].actor
    before = (await actor.stats.remote())["front"]
    for path in ("/catalogs/c", "/catalogs", "/catalogs/nope"):
        via_router = await get(ws, ws.api + path)
        direct = await get(ws, str(shard) + PREFIX + path)
        assert direct[0] == via_router[0] and json.loads(direct[2]) == json.loads(via_router[2]), path
        assert direct[1].get(VERSION_HEADER) == via_router[1].get(VERSION_HEADER), (path, direct[1], via_router[1])
    after = (await actor.stats.remote())["front"]
    # Both ways reached the shard's front: two reads answered there twice each, the missing one by the app.
    assert after["fast"] - before["fast"] == 4 and after["through_app"] - before["through_app"] == 2


# ---- writes: creates and Delta commits ------------------------------------------------------

def _row_shape(row: dict) -> dict:
    """An audit row without what differs between two requests (their ids, times, names)."""
    return {k: v for k, v in row.items()
            if k not in ("request_id", "at", "event_time", "id", "securable_full_name", "securable_id")}


async def _post(ws, path: str, body: dict):
    async with ws.session.post(ws.api + path, json=body, headers=ws.headers) as r:
        return r.status, r.headers, await r.json()


async def test_creates_are_made_by_the_front_as_the_app_makes_them(server, tws):
    """The same answer, headers and audit row as the app's (the same create with a query, which
    only the app takes), and the version header names the version the write made."""
    bodies = {"/catalogs": lambda n: {"name": n},
              "/schemas": lambda n: {"name": n, "catalog_name": "c"},
              "/tables": lambda n: {"name": n, "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
                                    "data_source_format": "DELTA", "columns": []},
              "/volumes": lambda n: {"name": n, "catalog_name": "c", "schema_name": "s", "volume_type": "MANAGED"}}
    for path, body in bodies.items():
        made = {}
        for name, url in (("fast1", path), ("app1", path + "?x=1")):
            before = counts(server)
            status, headers, answer = await _post(tws, url, body(name))
            after = counts(server)
            assert status == 200, answer
            assert (after["fast"] - before["fast"], after["through_app"] - before["through_app"]) == \
                ((1, 0) if name == "fast1" else (0, 1)), url
            (row,) = await events(tws, request_id=headers[REQUEST_ID_HEADER])
            made[name] = (headers, answer, row)
        (fast_headers, fast, fast_row), (app_headers, app, app_row) = made["fast1"], made["app1"]
        differ = {"id", "name", "full_name", "created_at", "updated_at", "storage_location", "metastore_id"} | \
            {k for k in fast if k.endswith("_id")}
        assert {k: v for k, v in fast.items() if k not in differ} == {k: v for k, v in app.items() if k not in differ}
        assert fast_headers["Content-Type"] == "application/json" and "Date" in fast_headers
        assert int(app_headers[VERSION_HEADER]) == int(fast_headers[VERSION_HEADER]) + 1    # one write each
        assert _row_shape(fast_row) == _row_shape(app_row) and fast_row["status"] == 200
        assert fast_row["securable_full_name"].endswith("fast1") and fast_row["securable_id"]


async def test_a_refused_write_goes_to_the_app_and_is_refused_and_recorded_once(server, tws):
    for body, code in (({"name": "c"}, "ALREADY_EXISTS"), ({"name": "bad name!"}, "INVALID_PARAMETER_VALUE"),
                       ({}, "INVALID_PARAMETER_VALUE")):
        before = counts(server)
        status, headers, answer = await _post(tws, "/catalogs", body)
        after = counts(server)
        assert answer["error_code"] == code, answer
        assert (after["fast"] - before["fast"], after["through_app"] - before["through_app"],
                after["tried_first"] - before["tried_first"]) == (0, 1, 1)
        (row,) = await events(tws, request_id=headers[REQUEST_ID_HEADER])
        assert row["error_code"] == code and row["action"] == "createCatalog"


async def test_a_write_that_failed_after_it_was_applied_is_answered_by_the_front_never_sent_again(server, tws):
    """The app would make the write a second time: the front answers the failure itself, as the
    app answers it (500 for an unexpected error, the CatalogError otherwise), and records it."""
    front = server.front.front
    route, make = front.writes["/catalogs"]

    def failing_after(error):
        async def work(caller, body):
            await make(caller, body)
            raise error
        return work

    try:
        for name, error, status, code in (("late1", RuntimeError("after the write"), 500, "INTERNAL_ERROR"),
                                          ("late2", ValueError("no"), 500, "INTERNAL_ERROR")):
            front.writes["/catalogs"] = (route, failing_after(error))
            before = counts(server)
            got, headers, answer = await _post(tws, "/catalogs", {"name": name})
            after = counts(server)
            assert (got, answer["error_code"]) == (status, code)
            assert after["through_app"] == before["through_app"] and after["tried_first"] == before["tried_first"]
            assert VERSION_HEADER in headers
            (row,) = await events(tws, request_id=headers[REQUEST_ID_HEADER])
            assert (row["status"], row["error_code"]) == (status, code)
        from shardcat.errors import CatalogError
        front.writes["/catalogs"] = (route, failing_after(CatalogError("INVALID_PARAMETER_VALUE", "late refusal")))
        got, headers, answer = await _post(tws, "/catalogs", {"name": "late3"})
        assert (got, answer["error_code"]) == (400, "INVALID_PARAMETER_VALUE")     # not ALREADY_EXISTS from a resend
    finally:
        front.writes["/catalogs"] = (route, make)
    for name in ("late1", "late2", "late3"):      # each applied once, by the front
        status, _ = await tws.call("GET", f"/catalogs/{name}")
        assert status == 200


async def test_delta_commits_are_made_by_the_front(server, tws):
    status, staging = await tws.call("POST", "/staging-tables", json={"name": "d", "catalog_name": "c",
                                                                       "schema_name": "s"})
    assert status == 200, staging
    status, table = await tws.call("POST", "/tables", json={
        "name": "d", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
        "columns": [{"name": "id", "type_name": "LONG", "position": 0}], "storage_location": staging["staging_location"],
        "properties": {"delta.feature.catalogManaged": "supported", "io.unitycatalog.tableId": staging["id"]}})
    assert status == 200, table

    def commit(version: int) -> dict:
        return {"table_id": table["table_id"], "table_uri": table["storage_location"],
                "commit_info": {"version": version, "timestamp": 1, "file_name": f"{version:020d}.{uuid.uuid4()}.json",
                                "file_size": 1, "file_modification_timestamp": 1}}

    before = counts(server)
    status, headers, answer = await _post(tws, "/delta/preview/commits", commit(1))
    assert (status, answer) == (200, {})
    middle = counts(server)
    assert (middle["fast"] - before["fast"], middle["through_app"] - before["through_app"]) == (1, 0)
    (row,) = await events(tws, request_id=headers[REQUEST_ID_HEADER])
    assert row["action"] == "commit" and row["status"] == 200
    middle = counts(server)
    status, headers, answer = await _post(tws, "/delta/preview/commits", commit(3))      # not latest + 1
    after = counts(server)
    assert status == 400 or status == 409, answer
    assert (after["fast"] - middle["fast"], after["through_app"] - middle["through_app"]) == (0, 1)
    status, got = await tws.call("GET", "/delta/preview/commits",
                                 params={"table_id": table["table_id"], "table_uri": table["storage_location"],
                                         "start_version": "0"})
    assert status == 200 and [c["version"] for c in got["commits"]] == [1]
