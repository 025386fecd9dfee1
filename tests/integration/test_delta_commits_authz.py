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
