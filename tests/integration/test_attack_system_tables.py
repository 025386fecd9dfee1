"""Attacks on the system tables (issue 51), tried by principals that are not admins.

`system.access.audit` is read by admins and by those granted SELECT; `system.information_schema` by admins
and trusted engines only (its rows are filtered on the caller). Tried here, for a user with no grant and for
one granted everything but what the rule needs: by name in every spelling, by id, by path (the table's own
storage, its log, its parent folders, spelled otherwise), through GET /files, the batched resolve, the
Iceberg REST catalog (load, credentials, plan), the UC Delta API, and Delta Sharing (adding a system table
to a share). Each answers as for a missing table or refuses; nothing of the table's rows or files leaks.
"""

from __future__ import annotations

import json

from governance_users import grant, unique, user
from test_system_tables import enabled, setup_world


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


def spellings(full: str) -> list[str]:
    c, s, t = full.split(".")
    return [full, full.upper(), f"{c.capitalize()}.{s}.{t.upper()}"]


async def refused_everywhere(who, table: dict, *, path_tries: list[str]) -> None:
    """Every API that reaches `table` (a system table's TableInfo, as an admin sees it) refuses `who`."""
    full, location = table["full_name"], table["storage_location"]
    c, s, t = full.split(".")
    for name in spellings(full):
        status, body = await who.call("GET", f"/tables/{name}")
        assert status in (403, 404) and "storage_location" not in body, (name, body)
    status, body = await who.call("POST", "/temporary-table-credentials",
                                  json={"table_id": table["table_id"], "operation": "READ"})
    assert status in (403, 404) and "url" not in body, body
    for url in path_tries:
        status, body = await who.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert status in (400, 403, 404) and "url" not in body, (url, body)
        status, body = await who.call("GET", "/files", params={"url": url})
        assert status in (400, 403, 404) and "files" not in body, (url, body)
    status, body = await who.call("POST", "/resolve", json={"items": [{"name": n} for n in spellings(full)]
                                                             + [{"path": u} for u in path_tries]})
    assert status == 200 and not any("table" in item for item in body["items"]), body
    for base in (f"/iceberg/v1/catalogs/{c}/namespaces/{s}/tables/{t}",
                 f"/iceberg/v1/catalogs/{c.upper()}/namespaces/{s}/tables/{t.upper()}"):
        for method, tail, payload in (("GET", "", None), ("GET", "/credentials", None), ("POST", "/plan", {}),
                                      ("HEAD", "", None)):
            async with who.session.request(method, who.api + base + tail, json=payload, headers=who.headers) as r:
                raw = await r.read()
            assert r.status in (403, 404), (base, tail, r.status, raw[:300])
            assert location.encode() not in raw and b"metadata-location" not in raw
    for name in (f"/delta/v1/catalogs/{c}/schemas/{s}/tables/{t}", f"/delta/v1/catalogs/{c}/schemas/{s}/tables/{t.upper()}"):
        status, body = await who.call("GET", name)
        assert status in (403, 404) and location not in json.dumps(body), (name, body)


async def test_audit_is_refused_by_every_api_to_who_has_no_select(ws, server):
    await setup_world(ws)
    await enabled(ws)
    audit = await ok(ws, "GET", "/tables/system.access.audit")
    location = audit["storage_location"]
    tries = [location, location + "/_delta_log", location + "/", f"{location}/./_delta_log/..",
             location.rsplit("/", 1)[0], location.replace("file:///", "file:/"), location.upper()]
    stranger = await user(server, ws)
    await refused_everywhere(stranger, audit, path_tries=tries)
    # The way in, but not SELECT: still refused by every API.
    almost = await user(server, ws)
    await grant(ws, "catalog", "system", almost.name, "USE CATALOG")
    await grant(ws, "schema", "system.access", almost.name, "USE SCHEMA")
    await refused_everywhere(almost, audit, path_tries=tries)
    # ...and with SELECT the same APIs answer (the rule, not a blanket refusal, decided above).
    await grant(ws, "table", "system.access.audit", almost.name, "SELECT")
    assert (await almost.call("POST", "/temporary-table-credentials",
                              json={"table_id": audit["table_id"], "operation": "READ"}))[0] == 200
    assert (await almost.call("GET", "/iceberg/v1/catalogs/system/namespaces/access/tables/audit"))[0] == 200
    assert (await almost.call("GET", "/delta/v1/catalogs/system/schemas/access/tables/audit"))[0] == 200
    # Nobody but the catalog writes it, whatever the API, the holder of SELECT and an admin included.
    for who in (almost, ws):
        status, body = await who.call("POST", "/temporary-table-credentials",
                                      json={"table_id": audit["table_id"], "operation": "READ_WRITE"})
        assert status in (400, 403), body
        status, body = await who.call("POST", "/temporary-path-credentials",
                                      json={"url": location, "operation": "PATH_READ_WRITE"})
        assert status in (400, 403), body


async def test_a_system_table_is_shared_only_by_who_may_read_it_and_information_schema_never(ws, server):
    await setup_world(ws)
    await enabled(ws)
    sharer = await user(server, ws)
    await grant(ws, "metastore", ws.metastore_id, sharer.name, "CREATE SHARE")
    share = unique("share")
    await ok(sharer, "POST", "/shares", json={"name": share})

    def add(name):
        return {"updates": [{"action": "ADD", "data_object": {"name": name, "data_object_type": "TABLE"}}]}

    for name in (*spellings("system.access.audit"), "system.information_schema.tables", "system.access.table_lineage"):
        status, body = await sharer.call("PATCH", f"/shares/{share}", json=add(name))
        assert status in (403, 404), (name, body)
        status, body = await sharer.call("PATCH", f"/shares/{share}", json={"objects": [{"name": name}]})
        assert status in (403, 404), (name, body)
    status, body = await sharer.call("PATCH", f"/shares/{share}", json={"updates": [{"action": "ADD", "data_object": {
        "name": "system.access", "data_object_type": "SCHEMA"}}]})
    assert status in (403, 404), body
    assert (await ok(sharer, "GET", f"/shares/{share}", params={"include_shared_data": "true"})).get("objects", []) == []
    # information_schema carries a row filter on its reader: no one shares it, an admin included.
    admin_share = unique("share")
    await ok(ws, "POST", "/shares", json={"name": admin_share})
    for name in ("system.information_schema.tables", "system.information_schema.privileges"):
        status, body = await ws.call("PATCH", f"/shares/{admin_share}", json=add(name))
        assert status == 400, (name, body)
    status, body = await ws.call("PATCH", f"/shares/{admin_share}", json={"updates": [{"action": "ADD", "data_object": {
        "name": "system.information_schema", "data_object_type": "SCHEMA"}}]})
    assert status == 400, body


async def test_information_schema_is_refused_to_untrusted_readers_by_every_api(ws, server):
    await setup_world(ws)
    await enabled(ws)
    reader = await user(server, ws)
    await grant(ws, "catalog", "system", reader.name, "USE CATALOG")
    await grant(ws, "schema", "system.information_schema", reader.name, "USE SCHEMA", "SELECT", "EXECUTE")
    for name in ("tables", "privileges", "catalogs"):
        table = await ok(ws, "GET", f"/tables/system.information_schema.{name}")
        location = table["storage_location"]
        await refused_everywhere(reader, table, path_tries=[location, location + "/_delta_log",
                                                            f"{location}/x/..", location.rsplit("/", 1)[0]])
