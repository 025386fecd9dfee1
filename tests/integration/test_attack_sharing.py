"""Attacks on Delta Sharing's lasting rights (issue 42, items 6 and 17): a share that keeps serving a
table after its owner lost the right to read it, and file URLs that outlive the recipient token
they were handed out under.

A share's owner needs SELECT (with USE CATALOG and USE SCHEMA above it) on what it shares, not only
when adding it but at every recipient request, as Databricks has it: each way of losing it (the
table's grant, the catalog's, a group's, USE SCHEMA, USE CATALOG, the schema's SELECT for a shared
schema, the share handed to an owner without it) takes the table out of every recipient answer
(lists, HEAD, version, metadata, query at the latest and an older version, a streaming query,
the change data feed) and voids the file URLs already handed out; granted again, it is served
again. A recipient token rotated with `existing_token_expire_in_seconds=0` voids the file URLs
handed out under it (and a rotation with a grace period does not, until it ends).
"""

from __future__ import annotations

import json

import aiohttp
import pyarrow as pa
import pytest

from governance_users import grant, unique, user
from shardcat.delta.client import DeltaCatalogClient

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string())])
SALES = "/shares/trade/schemas/s/tables/sales"


def rows(ids, region: str) -> pa.Table:
    return pa.table({"id": list(ids), "region": [region] * len(ids)}, schema=SCHEMA)


async def ok(caller, method, path, **kw):
    status, body = await caller.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def world(ws, server, *, select_on: str = "table", via_group: bool = False) -> dict:
    """Delta tables main.s.sales (history and CDF, versions 0..2) and main.bulk.a, main.bulk.b. A
    user `owner` (or its group, `via_group`) holds SELECT on main.s.sales (`select_on` the table
    or the catalog) and on schema main.bulk, with USE CATALOG and USE SCHEMA; it made share
    `trade` (sales, and the schema bulk) and recipient `acme`, granted the share."""
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    for schema in ("s", "bulk"):
        await ok(ws, "POST", "/schemas", json={"name": schema, "catalog_name": "main"})
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        await delta.create_table("main.s.sales", SCHEMA, properties={"delta.enableChangeDataFeed": "true"})
        await delta.append("main.s.sales", rows(range(0, 3), "eu"))      # v1
        await delta.append("main.s.sales", rows(range(3, 5), "us"))      # v2
        for name in ("a", "b"):
            await delta.create_table(f"main.bulk.{name}", SCHEMA)
            await delta.append(f"main.bulk.{name}", rows([1], "eu"))
    group = unique("sharers")
    owner = await user(server, ws, groups=[group] if via_group else [])
    holder = group if via_group else owner.name
    await grant(ws, "metastore", ws.metastore_id, owner.name, "CREATE SHARE", "CREATE RECIPIENT")
    await grant(ws, "catalog", "main", holder, "USE CATALOG", *(["SELECT"] if select_on == "catalog" else []))
    await grant(ws, "schema", "main.s", holder, "USE SCHEMA")
    await grant(ws, "schema", "main.bulk", holder, "USE SCHEMA", "SELECT")
    if select_on == "table":
        await grant(ws, "table", "main.s.sales", holder, "SELECT")
    await ok(owner, "POST", "/shares", json={"name": "trade"})
    await ok(owner, "PATCH", "/shares/trade", json={"updates": [
        {"action": "ADD", "data_object": {"name": "main.s.sales", "history_data_sharing_status": "ENABLED",
                                          "cdf_enabled": True}},
        {"action": "ADD", "data_object": {"name": "main.bulk", "data_object_type": "SCHEMA"}}]})
    made = await ok(owner, "POST", "/recipients", json={"name": "acme", "authentication_type": "TOKEN"})
    await ok(owner, "PATCH", "/shares/trade/permissions",
             json={"changes": [{"principal": "acme", "add": ["SELECT"]}]})
    return {"ws": ws, "owner": owner, "holder": holder, "recipient": made}


async def profile_of(ws, recipient: dict) -> dict:
    """The recipient's profile, through its (latest) activation link, as a recipient gets it."""
    code = recipient["tokens"][-1]["activation_url"]
    async with aiohttp.ClientSession() as s, s.get(f"{ws.api}/public/data_sharing_activation/{code}") as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def call(profile: dict, method: str, path: str, **kw) -> tuple[int, object]:
    async with aiohttp.ClientSession() as s:
        async with s.request(method, profile["endpoint"] + path,
                             headers={"Authorization": f"Bearer {profile['bearerToken']}"}, **kw) as r:
            text = await r.text()
            try:
                return r.status, json.loads(text)
            except ValueError:
                return r.status, [json.loads(line) for line in text.splitlines()] if r.status == 200 else text


async def file_urls(profile: dict, table: str = SALES) -> list[str]:
    """The file URLs of a query (latest), in both response formats, and of the change data feed."""
    status, lines = await call(profile, "POST", table + "/query", json={})
    assert status == 200, lines
    urls = [line["file"]["url"] for line in lines if "file" in line]
    async with aiohttp.ClientSession() as s:
        async with s.post(profile["endpoint"] + table + "/query", json={},
                          headers={"Authorization": f"Bearer {profile['bearerToken']}",
                                   "delta-sharing-capabilities": "responseformat=delta"}) as r:
            assert r.status == 200
            lines = [json.loads(line) for line in (await r.text()).splitlines()]
    urls += [line["file"]["deltaSingleAction"]["add"]["path"] for line in lines if "file" in line]
    if table == SALES:
        status, lines = await call(profile, "GET", table + "/changes", params={"startingVersion": "1"})
        assert status == 200, lines
        urls += [line["add"]["url"] for line in lines if "add" in line]
    assert urls
    return urls


async def fetch(url: str) -> int:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        if r.status == 200:
            assert (await r.read())[:4] == b"PAR1"
        return r.status


async def table_answers(profile: dict, table: str = SALES) -> dict[str, int]:
    """What every recipient endpoint that names `table` answers (status), and whether the lists show it."""
    schema, name = table.split("/")[4], table.split("/")[6]
    out = {}
    for what, method, path, kw in (
            ("head", "HEAD", table, {}),
            ("version", "GET", table + "/version", {}),
            ("metadata", "GET", table + "/metadata", {}),
            ("query", "POST", table + "/query", {"json": {}}),
            ("query at a version", "POST", table + "/query", {"json": {"version": 1}}),
            ("streaming query", "POST", table + "/query", {"json": {"startingVersion": 1}}),
            ("changes", "GET", table + "/changes", {"params": {"startingVersion": "1"}})):
        if table != SALES and what in ("query at a version", "streaming query", "changes"):
            continue      # history and CDF are shared for sales only
        status, body = await call(profile, method, path, **kw)
        if status != 200 and method != "HEAD":
            assert body["errorCode"] == "RESOURCE_DOES_NOT_EXIST", (what, body)
        out[what] = status
    status, body = await call(profile, "GET", "/shares/trade/all-tables")
    assert status == 200, body
    out["in all-tables"] = (schema, name) in {(t["schema"], t["name"]) for t in body["items"]}
    status, body = await call(profile, "GET", f"/shares/trade/schemas/{schema}/tables")
    out["in its schema's tables"] = status == 200 and name in {t["name"] for t in body["items"]}
    status, body = await call(profile, "GET", "/shares/trade/schemas")
    out["its schema listed"] = schema in {s["name"] for s in body["items"]}
    return out


SERVED = {"head": 200, "version": 200, "metadata": 200, "query": 200, "query at a version": 200,
          "streaming query": 200, "changes": 200, "in all-tables": True, "in its schema's tables": True,
          "its schema listed": True}
GONE = {**{k: 404 for k in SERVED}, "in all-tables": False, "in its schema's tables": False,
        "its schema listed": False}


def expect(table: str, answers: dict) -> dict:
    return {k: v for k, v in answers.items()
            if table == SALES or k not in ("query at a version", "streaming query", "changes")}


# ---- the share's owner loses SELECT, each way ------------------------------------------------------


async def _revoke(w: dict, how: str) -> None:
    ws, holder = w["ws"], w["holder"]
    if how == "table SELECT":
        await grant(ws, "table", "main.s.sales", holder, remove=["SELECT"])
    elif how == "catalog SELECT":
        await grant(ws, "catalog", "main", holder, remove=["SELECT"])
    elif how == "USE SCHEMA":
        await grant(ws, "schema", "main.s", holder, remove=["USE SCHEMA"])
    elif how == "USE CATALOG":
        await grant(ws, "catalog", "main", holder, remove=["USE CATALOG"])


async def _regrant(w: dict, how: str) -> None:
    ws, holder = w["ws"], w["holder"]
    privilege, kind, name = {"table SELECT": ("SELECT", "table", "main.s.sales"),
                             "catalog SELECT": ("SELECT", "catalog", "main"),
                             "USE SCHEMA": ("USE SCHEMA", "schema", "main.s"),
                             "USE CATALOG": ("USE CATALOG", "catalog", "main")}[how]
    await grant(ws, kind, name, holder, privilege)


@pytest.mark.parametrize("how, select_on, via_group", [
    ("table SELECT", "table", False),
    ("table SELECT", "table", True),          # the owner held it through a group
    ("catalog SELECT", "catalog", False),     # inherited from the catalog
    ("USE SCHEMA", "table", False),
    ("USE CATALOG", "table", True),
])
async def test_a_table_whose_share_owner_loses_select_is_served_nowhere(ws, server, how, select_on, via_group):
    w = await world(ws, server, select_on=select_on, via_group=via_group)
    profile = await profile_of(ws, w["recipient"])
    assert await table_answers(profile) == SERVED
    urls = await file_urls(profile)
    assert {await fetch(u) for u in urls} == {200}

    await _revoke(w, how)
    assert await table_answers(profile) == GONE
    assert {await fetch(u) for u in urls} == {403}
    # The share itself stays: the recipient still holds it.
    status, body = await call(profile, "GET", "/shares")
    assert status == 200 and [s["name"] for s in body["items"]] == ["trade"]
    bulk_survives = how != "USE CATALOG"
    assert (await table_answers(profile, "/shares/trade/schemas/bulk/tables/a"))["query"] == \
        (200 if bulk_survives else 404)

    # Granted again: served again (a decision per request, not a share broken for good).
    await _regrant(w, how)
    assert await table_answers(profile) == SERVED
    assert {await fetch(u) for u in urls} == {200}


async def test_a_shared_schema_whose_owner_loses_select_on_it_is_served_nowhere(ws, server):
    w = await world(ws, server)
    profile = await profile_of(ws, w["recipient"])
    tables = [f"/shares/trade/schemas/bulk/tables/{n}" for n in ("a", "b")]
    urls = [u for t in tables for u in await file_urls(profile, t)]
    assert {await fetch(u) for u in urls} == {200}
    for t in tables:
        assert await table_answers(profile, t) == expect(t, SERVED)

    await grant(ws, "schema", "main.bulk", w["holder"], remove=["SELECT"])
    for t in tables:
        assert await table_answers(profile, t) == expect(t, GONE)
    status, body = await call(profile, "GET", "/shares/trade/schemas/bulk/tables")
    assert status == 404 and body["errorCode"] == "RESOURCE_DOES_NOT_EXIST"
    assert {await fetch(u) for u in urls} == {403}
    assert await table_answers(profile) == SERVED       # the table shared by its own grant is still served

    # SELECT on one table of the schema is not SELECT on the schema, which sharing it needs.
    await grant(ws, "table", "main.bulk.a", w["holder"], "SELECT")
    assert (await table_answers(profile, tables[0]))["query"] == 404


async def test_a_share_handed_to_an_owner_without_select_serves_nothing_it_cannot_read(ws, server):
    w = await world(ws, server)
    profile = await profile_of(ws, w["recipient"])
    urls = await file_urls(profile)
    heir = await user(server, ws)
    await ok(w["owner"], "PATCH", "/shares/trade", json={"owner": heir.name})
    assert await table_answers(profile) == GONE
    assert (await table_answers(profile, "/shares/trade/schemas/bulk/tables/a"))["query"] == 404
    assert {await fetch(u) for u in urls} == {403}

    for kind, name, privileges in (("catalog", "main", ("USE CATALOG",)), ("schema", "main.s", ("USE SCHEMA",)),
                                   ("table", "main.s.sales", ("SELECT",))):
        await grant(ws, kind, name, heir.name, *privileges)
    assert await table_answers(profile) == SERVED
    assert {await fetch(u) for u in urls} == {200}
    assert (await table_answers(profile, "/shares/trade/schemas/bulk/tables/a"))["query"] == 404


async def test_a_share_owned_by_a_metastore_admin_serves_without_grants(ws, server):
    """The check decides as the rest of governance does: a metastore admin (here not an account
    admin) holds every privilege, with no grant of its own."""
    w = await world(ws, server)
    boss = await user(server, ws)
    await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}", json={"owner": boss.name})
    await ok(w["owner"], "PATCH", "/shares/trade", json={"owner": boss.name})
    profile = await profile_of(ws, w["recipient"])
    assert await table_answers(profile) == SERVED
    assert (await table_answers(profile, "/shares/trade/schemas/bulk/tables/a"))["query"] == 200


# ---- file URLs never outlive the token they were handed out under ------------------------------------


async def test_file_urls_stop_when_their_token_is_rotated_with_immediate_expiry(ws, server):
    w = await world(ws, server)
    first = await profile_of(ws, w["recipient"])
    first_urls = await file_urls(first) + await file_urls(first, "/shares/trade/schemas/bulk/tables/a")
    assert {await fetch(u) for u in first_urls} == {200}

    # A rotation with a grace period: the old token and its URLs keep working until it ends.
    graced = await ok(w["owner"], "POST", "/recipients/acme/rotate-token",
                      json={"existing_token_expire_in_seconds": 3600})
    assert {await fetch(u) for u in first_urls} == {200}
    second = await profile_of(ws, graced)
    second_urls = await file_urls(second)

    # Expired at once: every URL handed out under the old tokens stops, whatever endpoint gave it.
    rotated = await ok(w["owner"], "POST", "/recipients/acme/rotate-token",
                       json={"existing_token_expire_in_seconds": 0})
    assert (await call(second, "GET", "/shares"))[0] == 401
    assert {await fetch(u) for u in first_urls + second_urls} == {403}
    third = await profile_of(ws, rotated)
    assert {await fetch(u) for u in await file_urls(third)} == {200}

    # A URL whose grant names another recipient's token: refused (the signature covers it; a
    # token id does not carry over between recipients).
    other = await ok(w["owner"], "POST", "/recipients", json={"name": "bolt", "authentication_type": "TOKEN"})
    await ok(w["owner"], "PATCH", "/shares/trade/permissions",
             json={"changes": [{"principal": "bolt", "add": ["SELECT"]}]})
    bolt_urls = await file_urls(await profile_of(ws, other))
    assert {await fetch(u) for u in bolt_urls} == {200}
    await ok(w["owner"], "POST", "/recipients/bolt/rotate-token", json={"existing_token_expire_in_seconds": 0})
    assert {await fetch(u) for u in bolt_urls} == {403}
    assert {await fetch(u) for u in await file_urls(third)} == {200}     # acme's current token is untouched
