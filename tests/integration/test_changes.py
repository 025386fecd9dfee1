"""The change feed: every write of a metastore, version by version, with what it did to which
securable (created, updated, deleted, permissions, the metastore itself); paged by version;
for admins only; bad input is a 400."""

from __future__ import annotations

from governance_users import grant, user

from shardcat.catalog.features.changes import touched

COLS = [{"name": "id", "type_name": "LONG"}]


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, body
    return body


async def feed(ws, since: int, **params) -> dict:
    return await ok(ws, "GET", "/shardcat/changes", params={"since_version": str(since), **params})


def flat(out: dict) -> list[tuple]:
    return [(s["change"], s["securable_type"], s["full_name"]) for c in out["changes"] for s in c["securables"]]


async def test_each_write_says_what_it_did(ws, server):
    start = (await feed(ws, 0))["metastore_version"]
    await ok(ws, "POST", "/catalogs", json={"name": "c"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "c"})
    table = await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": "c", "schema_name": "s",
                                                  "table_type": "MANAGED", "data_source_format": "DELTA",
                                                  "columns": COLS})
    await ok(ws, "PATCH", "/tables/c.s.t", json={"comment": "now with a comment"})
    reader = await user(server, ws)
    await grant(ws, "table", "c.s.t", reader.name, "SELECT")
    await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}", json={"comment": "the lake"})
    await ok(ws, "DELETE", "/tables/c.s.t")

    out = await feed(ws, start)
    assert out["metastore_id"] == ws.metastore_id and out["has_more"] is False
    versions = [c["version"] for c in out["changes"]]
    assert versions == list(range(start + 1, out["metastore_version"] + 1))     # every version, in order
    metastore_name = (await ok(ws, "GET", f"/metastores/{ws.metastore_id}"))["name"]
    changed = flat(out)     # the catalog's write makes its default schema too, the two in either order
    assert sorted(changed[:2]) == [("CREATE", "CATALOG", "c"), ("CREATE", "SCHEMA", "c.default")]
    assert changed[2:] == [
        ("CREATE", "SCHEMA", "c.s"), ("CREATE", "TABLE", "c.s.t"),
        ("UPDATE", "TABLE", "c.s.t"), ("PERMISSIONS", "TABLE", "c.s.t"), ("UPDATE", "METASTORE", metastore_name),
        ("DELETE", "TABLE", "c.s.t")]
    created = out["changes"][2]
    assert created["securables"][0]["id"] == table["table_id"] and created["at"] > 0


async def test_pages_continue_from_the_last_version(ws):
    start = (await feed(ws, 0))["metastore_version"]
    await ok(ws, "POST", "/catalogs", json={"name": "c"})
    for name in ("a", "b", "d", "e"):
        await ok(ws, "POST", "/schemas", json={"name": name, "catalog_name": "c"})
    whole = await feed(ws, start)
    paged, since = [], start
    while True:
        out = await feed(ws, since, max_results="2")
        assert len(out["changes"]) <= 2
        paged += out["changes"]
        if not out["has_more"]:
            break
        since = out["changes"][-1]["version"]
    assert paged == whole["changes"] and len(paged) == 5
    assert (await feed(ws, whole["metastore_version"]))["changes"] == []


async def test_admins_only_and_bad_input(ws, server):
    reader = await user(server, ws)
    status, body = await reader.call("GET", "/shardcat/changes")
    assert status == 403 and body["error_code"] == "PERMISSION_DENIED" and "admins" in body["message"]
    for params, culprit in (({"since_version": "-1"}, "since_version"), ({"since_version": "x"}, "since_version"),
                            ({"since_version": "9" * 30}, "since_version"),
                            ({"since_version": "\u00b2"}, "since_version"),
                            ({"max_results": "lots"}, "max_results")):
        status, body = await ws.call("GET", "/shardcat/changes", params=params)
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE" and culprit in body["message"]


def test_rows_from_before_details_name_ids_by_their_current_state():
    row = {"version": 3, "at": 1, "changed": ["a", "gone", "ms"], "details": None}
    current = {"a": ("table", "c.s.t"), "ms": ("metastore", "lake")}
    assert touched(row, current) == [
        {"id": "a", "securable_type": "TABLE", "full_name": "c.s.t", "change": None},
        {"id": "gone", "securable_type": None, "full_name": None, "change": None},
        {"id": "ms", "securable_type": "METASTORE", "full_name": "lake", "change": None}]
    staging = {"version": 4, "at": 1, "changed": ["x"],
               "details": [{"id": "x", "change": "CREATE", "type": "staging_table", "full_name": "c.s.x"}]}
    assert touched(staging, {}) == []


async def test_delta_commits_and_tables_made_from_staging(ws):
    from test_delta_commits import commit, managed_table, setup_schema

    start = (await feed(ws, 0))["metastore_version"]
    await setup_schema(ws)
    table = await managed_table(ws, "t")          # a staging table first: not in the feed
    assert (await commit(ws, table, 1))[0] == 200
    assert (await commit(ws, table, latest_backfilled_version=1))[0] == 200
    assert flat(await feed(ws, start))[-3:] == [
        ("CREATE", "TABLE", "main.s.t"), ("DELTA_COMMIT", "TABLE", "main.s.t"), ("DELTA_PUBLISH", "TABLE", "main.s.t")]
