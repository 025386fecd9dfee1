"""The Delta commits API under governance: ratifying a commit needs MODIFY on the table, reading
commits needs SELECT (each with USE CATALOG / USE SCHEMA); a refused commit writes nothing."""

from __future__ import annotations

from governance_users import grant, user
from test_delta_commits import commit, info, managed_table, ref, setup_schema

COMMITS = "/delta/preview/commits"


async def test_commit_needs_modify_and_reading_needs_select(ws, server):
    await setup_schema(ws)
    table = await managed_table(ws, "t")
    writer = await user(server, ws)
    await grant(ws, "catalog", "main", writer.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    version = (await server.store.get_metastore(ws.metastore_id)).version
    status, body = await commit(writer, table, 1)
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and "MODIFY" in body["message"], body
    assert (await server.store.get_metastore(ws.metastore_id)).version == version
    status, body = await writer.call("GET", COMMITS, json={**ref(table), "start_version": 0})
    assert status == 200 and body["commits"] == [], body

    await grant(ws, "table", "main.s.t", writer.name, "MODIFY")
    status, body = await commit(writer, table, info(1))
    assert status == 200, body
    await grant(ws, "catalog", "main", writer.name, remove=["SELECT"])
    status, body = await writer.call("GET", COMMITS, json={**ref(table), "start_version": 0})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED") and "SELECT" in body["message"], body


async def test_a_caller_without_access_learns_nothing_of_the_table(ws, server):
    """Authorize first: neither the table's name, its type, nor its location reach a caller that
    may not see it; the answer is the one an unknown table id gets."""
    await setup_schema(ws)
    table = await managed_table(ws, "t")
    plain = (await ws.call("POST", "/tables", json={"name": "p", "catalog_name": "main", "schema_name": "s",
                                                    "table_type": "MANAGED", "data_source_format": "DELTA",
                                                    "columns": [{"name": "a", "type_name": "INT"}]}))[1]
    stranger = await user(server, ws)
    unknown = "00000000-0000-4000-8000-000000000000"
    for target, uri in ((table, "file:///elsewhere"), (plain, plain["storage_location"]), (table, None)):
        body = {"table_id": target["table_id"], "table_uri": uri or target["storage_location"]}
        for method, extra in (("GET", {"start_version": 0}), ("POST", {"commit_info": info(1)})):
            status, answer = await stranger.call(method, COMMITS, json={**body, **extra})
            assert (status, answer) == (404, {"error_code": "NOT_FOUND",
                                              "message": f"Table with id '{target['table_id']}' does not exist."})
            status, gone = await stranger.call(method, COMMITS, json={**body, **extra, "table_id": unknown})
            assert (status, gone["message"].replace(unknown, target["table_id"])) == (404, answer["message"])
