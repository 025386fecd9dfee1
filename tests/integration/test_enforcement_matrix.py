"""Every endpoint x {owner, holder of the needed privilege, holder of every privilege but that
one, stranger, group member, metastore admin}: allowed, or 403 PERMISSION_DENIED as the 2.1 spec
and governance/privileges.py say, or 404 NOT_FOUND to a caller that may not see the object (as if it
did not exist: test_existence.py); after each refusal nothing changed (metastore version, asset
and grant rows). Lists count as allowed when the object is listed.

Each (endpoint, role) gets fresh objects, built by the account admin `ws`; the role's user then
gets ownership or grants: always USE CATALOG / USE SCHEMA on the containers above (except the
stranger), plus the needed privilege (holder; granted to a group for the group member), or every
privilege of the securable type but the needed one and its alternatives (BROWSE for reads),
MANAGE and ALL PRIVILEGES."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import pytest
from governance_users import grant, unique, user

from shardcat.governance.privileges import APPLICABLE

ROLE = {"role_arn": "arn:aws:iam::1:role/r"}
ROLES = ("owner", "holder", "all_but", "stranger", "group", "admin")
TABLE = {"table_type": "MANAGED", "data_source_format": "DELTA", "columns": [
    {"name": "a", "type_name": "INT", "type_text": "int", "type_json": '{"type":"integer"}', "position": 0}]}


def function(c: str, name: str) -> dict:
    return {"function_info": {
        "name": name, "catalog_name": c, "schema_name": "s", "input_params": {"parameters": []},
        "data_type": "INT", "full_data_type": "INT", "routine_body": "SQL", "routine_definition": "1",
        "parameter_style": "S", "is_deterministic": True, "sql_data_access": "CONTAINS_SQL", "is_null_call": False,
        "security_type": "DEFINER", "specific_name": name}}


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


# ---- worlds: fresh objects for one (endpoint, role) --------------------------------------

async def build(ws, what: str) -> dict:
    """A catalog c with schema c.s, and `what` in it (or at the metastore level)."""
    c = unique("c")
    ctx = {"c": c, "s": f"{c}.s", "u": unique("x")}
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    if what == "table":
        ctx["table"] = await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": c, "schema_name": "s",
                                                            **TABLE})
    elif what == "volume":
        ctx["volume"] = await ok(ws, "POST", "/volumes", json={"name": "v", "catalog_name": c, "schema_name": "s",
                                                              "volume_type": "MANAGED"})
    elif what == "function":
        await ok(ws, "POST", "/functions", json=function(c, "f"))
    elif what == "model":
        await ok(ws, "POST", "/models", json={"name": "m", "catalog_name": c, "schema_name": "s"})
        await ok(ws, "POST", "/models/versions", json={"catalog_name": c, "schema_name": "s", "model_name": "m",
                                                       "source": "file:///src"})
        await ok(ws, "PUT", f"/models/{c}.s.m/aliases/champion", json={"version_num": 1})
    elif what in ("credential", "location"):
        await ok(ws, "POST", "/storage-credentials", json={"name": ctx["u"], "aws_iam_role": ROLE})
        if what == "location":
            url = ws.storage_root.rsplit("/storage/", 1)[0] + f"/ext/{ctx['u']}"
            os.makedirs(url.removeprefix("file://"), exist_ok=True)
            open(url.removeprefix("file://") + "/part-0.parquet", "w").close()
            ctx["url"] = url
            await ok(ws, "POST", "/external-locations", json={"name": ctx["u"], "url": url,
                                                              "credential_name": ctx["u"]})
    elif what == "share":
        await ok(ws, "POST", "/shares", json={"name": ctx["u"]})
    elif what == "recipient":
        await ok(ws, "POST", "/recipients", json={"name": ctx["u"], "authentication_type": "TOKEN"})
    elif what == "provider":
        await ok(ws, "POST", "/providers", json={"name": ctx["u"], "authentication_type": "DATABRICKS"})
    return ctx


@dataclass(frozen=True)
class Case:
    id: str
    world: str                      # what build() makes
    target: Callable                # ctx -> (securable type, full name) the rule looks at
    needed: str                     # the privilege that allows it
    method: str
    path: Callable                  # ctx -> path
    body: Callable | None = None    # ctx -> JSON body
    alternatives: tuple = ()        # other privileges that allow it too (left out of all_but)
    listed: Callable | None = None  # a list: (ctx, body) -> whether the object is in it
    creates: bool = False           # the rule looks at the container a new object goes into
    verdict: Callable | None = None  # (body) -> allowed, for answers that carry their own decision

    def __str__(self):
        return self.id


def cat(ctx):
    return "catalog", ctx["c"]


def sch(ctx):
    return "schema", ctx["s"]


def ms(ctx):
    return "metastore", ctx["ms"]


def obj(kind, suffix=None):
    return lambda ctx: (kind, f"{ctx['s']}.{suffix}" if suffix else ctx["u"])


def names(key):
    return lambda ctx, body: [x.get("full_name", x.get("name")) for x in body.get(key, [])]


def resolved(body) -> bool:
    """A resolve item's verdict: its decision, or refused when it answers as missing (invisible to the caller)."""
    item = body["items"][0]
    if "error" in item:
        assert item["error"]["error_code"] == "NOT_FOUND", item
        return False
    return item["authorization"]["allowed"]


READ = ("BROWSE",)
CASES = [
    # catalogs
    Case("createCatalog", "none", ms, "CREATE CATALOG", "POST", lambda c: "/catalogs",
         lambda c: {"name": c["u"]}, creates=True),
    Case("getCatalog", "none", cat, "USE CATALOG", "GET", lambda c: f"/catalogs/{c['c']}", alternatives=READ),
    Case("listCatalogs", "none", cat, "USE CATALOG", "GET", lambda c: "/catalogs", alternatives=READ,
         listed=lambda c, b: c["c"] in names("catalogs")(c, b)),
    Case("updateCatalog", "none", cat, "MANAGE", "PATCH", lambda c: f"/catalogs/{c['c']}", lambda c: {"comment": "x"}),
    Case("deleteCatalog", "none", cat, "MANAGE", "DELETE", lambda c: f"/catalogs/{c['c']}?force=true"),
    # schemas
    Case("createSchema", "none", cat, "CREATE SCHEMA", "POST", lambda c: "/schemas",
         lambda c: {"name": "n", "catalog_name": c["c"]}, creates=True),
    Case("getSchema", "none", sch, "USE SCHEMA", "GET", lambda c: f"/schemas/{c['s']}", alternatives=READ),
    Case("listSchemas", "none", sch, "USE SCHEMA", "GET", lambda c: f"/schemas?catalog_name={c['c']}",
         alternatives=READ, listed=lambda c, b: c["s"] in names("schemas")(c, b)),
    Case("updateSchema", "none", sch, "MANAGE", "PATCH", lambda c: f"/schemas/{c['s']}", lambda c: {"comment": "x"}),
    Case("deleteSchema", "none", sch, "MANAGE", "DELETE", lambda c: f"/schemas/{c['s']}"),
    # tables
    Case("createTable", "none", sch, "CREATE TABLE", "POST", lambda c: "/tables",
         lambda c: {"name": "n", "catalog_name": c["c"], "schema_name": "s", **TABLE}, creates=True),
    Case("createStagingTable", "none", sch, "CREATE TABLE", "POST", lambda c: "/staging-tables",
         lambda c: {"name": "n", "catalog_name": c["c"], "schema_name": "s"}, creates=True),
    Case("getTable", "table", obj("table", "t"), "SELECT", "GET", lambda c: f"/tables/{c['s']}.t",
         alternatives=READ),
    Case("listTables", "table", obj("table", "t"), "SELECT", "GET",
         lambda c: f"/tables?catalog_name={c['c']}&schema_name=s", alternatives=READ,
         listed=lambda c, b: f"{c['s']}.t" in names("tables")(c, b)),
    Case("listTableSummaries", "table", obj("table", "t"), "SELECT", "POST", lambda c: "/table-summaries",
         lambda c: {"catalog_name": c["c"]}, alternatives=READ,
         listed=lambda c, b: f"{c['s']}.t" in names("tables")(c, b)),
    Case("updateTable", "table", obj("table", "t"), "MANAGE", "PATCH", lambda c: f"/tables/{c['s']}.t",
         lambda c: {"comment": "x"}),
    Case("deleteTable", "table", obj("table", "t"), "MANAGE", "DELETE", lambda c: f"/tables/{c['s']}.t"),
    Case("tableCredentials", "table", obj("table", "t"), "SELECT", "POST", lambda c: "/temporary-table-credentials",
         lambda c: {"table_id": c["table"]["table_id"], "operation": "READ"}),
    Case("tableCredentialsWrite", "table", obj("table", "t"), "MODIFY", "POST",
         lambda c: "/temporary-table-credentials",
         lambda c: {"table_id": c["table"]["table_id"], "operation": "READ_WRITE"}),
    Case("resolveRead", "table", obj("table", "t"), "SELECT", "POST", lambda c: "/resolve",
         lambda c: {"items": [{"name": f"{c['s']}.t", "operation": "READ"}]},
         verdict=resolved),
    Case("resolveWrite", "table", obj("table", "t"), "MODIFY", "POST", lambda c: "/resolve",
         lambda c: {"items": [{"name": f"{c['s']}.t", "operation": "WRITE"}]},
         verdict=resolved),
    Case("getPermissions", "table", obj("table", "t"), "SELECT", "GET", lambda c: f"/permissions/table/{c['s']}.t",
         alternatives=READ),
    Case("updatePermissions", "table", obj("table", "t"), "MANAGE", "PATCH",
         lambda c: f"/permissions/table/{c['s']}.t",
         lambda c: {"changes": [{"principal": "somebody", "add": ["SELECT"]}]}),
    Case("replacePermissions", "table", obj("table", "t"), "MANAGE", "PUT",
         lambda c: f"/permissions/table/{c['s']}.t",
         lambda c: {"privilege_assignments": [{"principal": "somebody", "privileges": ["SELECT"]}]}),
    Case("getEffectivePermissions", "table", obj("table", "t"), "SELECT", "GET",
         lambda c: f"/effective-permissions/table/{c['s']}.t", alternatives=READ),
    # volumes
    Case("createVolume", "none", sch, "CREATE VOLUME", "POST", lambda c: "/volumes",
         lambda c: {"name": "n", "catalog_name": c["c"], "schema_name": "s", "volume_type": "MANAGED"}, creates=True),
    Case("getVolume", "volume", obj("volume", "v"), "READ VOLUME", "GET", lambda c: f"/volumes/{c['s']}.v",
         alternatives=READ),
    Case("listVolumes", "volume", obj("volume", "v"), "READ VOLUME", "GET",
         lambda c: f"/volumes?catalog_name={c['c']}&schema_name=s", alternatives=READ,
         listed=lambda c, b: f"{c['s']}.v" in names("volumes")(c, b)),
    Case("updateVolume", "volume", obj("volume", "v"), "MANAGE", "PATCH", lambda c: f"/volumes/{c['s']}.v",
         lambda c: {"comment": "x"}),
    Case("deleteVolume", "volume", obj("volume", "v"), "MANAGE", "DELETE", lambda c: f"/volumes/{c['s']}.v"),
    Case("volumeCredentials", "volume", obj("volume", "v"), "READ VOLUME", "POST",
         lambda c: "/temporary-volume-credentials",
         lambda c: {"volume_id": c["volume"]["volume_id"], "operation": "READ_VOLUME"}),
    # functions
    Case("createFunction", "none", sch, "CREATE FUNCTION", "POST", lambda c: "/functions",
         lambda c: function(c["c"], "n"), creates=True),
    Case("getFunction", "function", obj("function", "f"), "EXECUTE", "GET", lambda c: f"/functions/{c['s']}.f",
         alternatives=READ),
    Case("listFunctions", "function", obj("function", "f"), "EXECUTE", "GET",
         lambda c: f"/functions?catalog_name={c['c']}&schema_name=s", alternatives=READ,
         listed=lambda c, b: f"{c['s']}.f" in names("functions")(c, b)),
    Case("deleteFunction", "function", obj("function", "f"), "MANAGE", "DELETE", lambda c: f"/functions/{c['s']}.f"),
    # registered models and versions
    Case("createModel", "none", sch, "CREATE MODEL", "POST", lambda c: "/models",
         lambda c: {"name": "n", "catalog_name": c["c"], "schema_name": "s"}, creates=True),
    Case("getModel", "model", obj("registered_model", "m"), "EXECUTE", "GET", lambda c: f"/models/{c['s']}.m",
         alternatives=READ),
    Case("listModels", "model", obj("registered_model", "m"), "EXECUTE", "GET",
         lambda c: f"/models?catalog_name={c['c']}&schema_name=s", alternatives=READ,
         listed=lambda c, b: f"{c['s']}.m" in names("registered_models")(c, b)),
    Case("listModelsInCatalog", "model", obj("registered_model", "m"), "EXECUTE", "GET",
         lambda c: f"/models?catalog_name={c['c']}", alternatives=READ,
         listed=lambda c, b: f"{c['s']}.m" in names("registered_models")(c, b)),
    Case("updateModel", "model", obj("registered_model", "m"), "MANAGE", "PATCH", lambda c: f"/models/{c['s']}.m",
         lambda c: {"comment": "x"}),
    Case("deleteModel", "model", obj("registered_model", "m"), "MANAGE", "DELETE",
         lambda c: f"/models/{c['s']}.m?force=true"),
    Case("createModelVersion", "model", obj("registered_model", "m"), "MANAGE", "POST", lambda c: "/models/versions",
         lambda c: {"catalog_name": c["c"], "schema_name": "s", "model_name": "m", "source": "file:///src2"}),
    Case("getModelVersion", "model", obj("registered_model", "m"), "EXECUTE", "GET",
         lambda c: f"/models/{c['s']}.m/versions/1", alternatives=READ),
    Case("listModelVersions", "model", obj("registered_model", "m"), "EXECUTE", "GET",
         lambda c: f"/models/{c['s']}.m/versions", alternatives=READ),
    Case("updateModelVersion", "model", obj("registered_model", "m"), "MANAGE", "PATCH",
         lambda c: f"/models/{c['s']}.m/versions/1", lambda c: {"comment": "x"}),
    Case("finalizeModelVersion", "model", obj("registered_model", "m"), "MANAGE", "PATCH",
         lambda c: f"/models/{c['s']}.m/versions/1/finalize", lambda c: {}),
    Case("deleteModelVersion", "model", obj("registered_model", "m"), "MANAGE", "DELETE",
         lambda c: f"/models/{c['s']}.m/versions/1"),
    Case("getAlias", "model", obj("registered_model", "m"), "EXECUTE", "GET",
         lambda c: f"/models/{c['s']}.m/aliases/champion", alternatives=READ),
    Case("setAlias", "model", obj("registered_model", "m"), "MANAGE", "PUT",
         lambda c: f"/models/{c['s']}.m/aliases/best", lambda c: {"version_num": 1}),
    Case("modelVersionCredentials", "model", obj("registered_model", "m"), "EXECUTE", "POST",
         lambda c: "/temporary-model-version-credentials",
         lambda c: {"catalog_name": c["c"], "schema_name": "s", "model_name": "m", "version": 1,
                    "operation": "READ_MODEL_VERSION"}),
    # storage credentials and external locations
    Case("createCredential", "none", ms, "CREATE STORAGE CREDENTIAL", "POST", lambda c: "/storage-credentials",
         lambda c: {"name": c["u"], "aws_iam_role": ROLE}, creates=True),
    Case("getCredential", "credential", obj("credential"), "READ FILES", "GET",
         lambda c: f"/storage-credentials/{c['u']}", alternatives=tuple(APPLICABLE["credential"])),
    Case("listCredentials", "credential", obj("credential"), "READ FILES", "GET", lambda c: "/credentials",
         alternatives=tuple(APPLICABLE["credential"]), listed=lambda c, b: c["u"] in names("credentials")(c, b)),
    Case("updateCredential", "credential", obj("credential"), "MANAGE", "PATCH",
         lambda c: f"/storage-credentials/{c['u']}", lambda c: {"comment": "x"}),
    Case("deleteCredential", "credential", obj("credential"), "MANAGE", "DELETE",
         lambda c: f"/storage-credentials/{c['u']}"),
    Case("createExternalLocation", "credential", ms, "CREATE EXTERNAL LOCATION", "POST",
         lambda c: "/external-locations",
         lambda c: {"name": c["u"], "url": f"s3://bucket/{c['u']}", "credential_name": c["u"]}, creates=True),
    Case("getExternalLocation", "location", obj("external_location"), "READ FILES", "GET",
         lambda c: f"/external-locations/{c['u']}", alternatives=tuple(APPLICABLE["external_location"])),
    Case("listExternalLocations", "location", obj("external_location"), "READ FILES", "GET",
         lambda c: "/external-locations", alternatives=tuple(APPLICABLE["external_location"]),
         listed=lambda c, b: c["u"] in names("external_locations")(c, b)),
    Case("updateExternalLocation", "location", obj("external_location"), "MANAGE", "PATCH",
         lambda c: f"/external-locations/{c['u']}", lambda c: {"comment": "x"}),
    Case("deleteExternalLocation", "location", obj("external_location"), "MANAGE", "DELETE",
         lambda c: f"/external-locations/{c['u']}"),
    Case("listFiles", "location", obj("external_location"), "READ FILES", "GET",
         lambda c: f"/files?url={c['url']}"),
    Case("pathCredentials", "location", obj("external_location"), "READ FILES", "POST",
         lambda c: "/temporary-path-credentials", lambda c: {"url": c["url"] + "/x", "operation": "PATH_READ"}),
    # Delta Sharing objects: their owner or a metastore admin
    Case("createShare", "none", ms, "CREATE SHARE", "POST", lambda c: "/shares", lambda c: {"name": c["u"]},
         creates=True),
    Case("getShare", "share", obj("share"), "MANAGE", "GET", lambda c: f"/shares/{c['u']}"),
    Case("listShares", "share", obj("share"), "MANAGE", "GET", lambda c: "/shares",
         listed=lambda c, b: c["u"] in names("shares")(c, b)),
    Case("updateShare", "share", obj("share"), "MANAGE", "PATCH", lambda c: f"/shares/{c['u']}",
         lambda c: {"comment": "x"}),
    Case("deleteShare", "share", obj("share"), "MANAGE", "DELETE", lambda c: f"/shares/{c['u']}"),
    Case("getSharePermissions", "share", obj("share"), "MANAGE", "GET", lambda c: f"/shares/{c['u']}/permissions"),
    Case("createRecipient", "none", ms, "CREATE RECIPIENT", "POST", lambda c: "/recipients",
         lambda c: {"name": c["u"], "authentication_type": "TOKEN"}, creates=True),
    Case("getRecipient", "recipient", obj("recipient"), "MANAGE", "GET", lambda c: f"/recipients/{c['u']}"),
    Case("updateRecipient", "recipient", obj("recipient"), "MANAGE", "PATCH", lambda c: f"/recipients/{c['u']}",
         lambda c: {"comment": "x"}),
    Case("rotateRecipientToken", "recipient", obj("recipient"), "MANAGE", "POST",
         lambda c: f"/recipients/{c['u']}/rotate-token", lambda c: {"existing_token_expire_in_seconds": 0}),
    Case("deleteRecipient", "recipient", obj("recipient"), "MANAGE", "DELETE", lambda c: f"/recipients/{c['u']}"),
    Case("createProvider", "none", ms, "CREATE PROVIDER", "POST", lambda c: "/providers",
         lambda c: {"name": c["u"], "authentication_type": "DATABRICKS"}, creates=True),
    Case("getProvider", "provider", obj("provider"), "MANAGE", "GET", lambda c: f"/providers/{c['u']}"),
    Case("deleteProvider", "provider", obj("provider"), "MANAGE", "DELETE", lambda c: f"/providers/{c['u']}"),
]


# ---- the roles ------------------------------------------------------------------------------

def containers(case: Case, ctx: dict) -> list[tuple[str, str]]:
    """The catalogs and schemas above the securable the rule looks at (for a create: the
    container the new object goes into, and those above it)."""
    kind, name = case.target(ctx)
    chain = [("catalog", ctx["c"]), ("schema", ctx["s"])]
    if kind in ("metastore", "credential", "external_location", "share", "recipient", "provider"):
        return []
    if kind == "catalog":
        return chain[:1] if case.creates else []
    if kind == "schema":
        return chain if case.creates else chain[:1]
    return chain


async def snapshot(server, ws) -> tuple:
    pool, m = server.store.pool, ws.metastore_id
    return (await pool.fetchval("SELECT version FROM metastores WHERE id = $1::uuid", m),
            await pool.fetchval("SELECT count(*) FROM assets WHERE metastore_id = $1::uuid", m),
            await pool.fetchval("SELECT coalesce(sum(written_at), 0) FROM assets WHERE metastore_id = $1::uuid", m),
            await pool.fetchval("SELECT count(*) FROM grants WHERE metastore_id = $1::uuid", m))


async def as_role(server, ws, case: Case, ctx: dict, role: str, admins: str):
    kind, name = case.target(ctx)
    if role == "admin":
        return await user(server, ws, groups=[admins])
    group = unique("g")
    u = await user(server, ws, groups=[group] if role == "group" else [])
    who = group if role == "group" else u.name
    if role == "stranger":
        return u
    for c_kind, c_name in containers(case, ctx):
        await grant(ws, c_kind, c_name, who, "USE CATALOG" if c_kind == "catalog" else "USE SCHEMA")
    if role == "owner":
        path = {"catalog": "/catalogs/", "schema": "/schemas/", "table": "/tables/", "volume": "/volumes/",
                "registered_model": "/models/", "credential": "/storage-credentials/",
                "external_location": "/external-locations/", "share": "/shares/", "recipient": "/recipients/",
                "provider": "/providers/"}.get(kind)
        if kind == "metastore":
            return await user(server, ws, groups=[admins])     # the metastore's owner is its admin
        if kind == "function":        # functions have no update endpoint: set the owner in the database
            await server.store.pool.execute(
                "UPDATE assets SET info = info || jsonb_build_object('owner', $2::text) "
                "WHERE metastore_id = $1::uuid AND namespace = 'function' AND full_name = $3",
                ws.metastore_id, u.name, name)
            await ok(ws, "PATCH", f"/catalogs/{ctx['c']}", json={"comment": "bump"})   # nothing cached stale
            await server.store.pool.execute("SELECT 1")
            return u
        await ok(ws, "PATCH", path + name, json={"owner": u.name})
        return u
    privileges = [case.needed] if role in ("holder", "group") else [
        p for p in APPLICABLE[kind] if p not in (case.needed, *case.alternatives, "MANAGE", "ALL PRIVILEGES")]
    if privileges:
        await grant(ws, kind, name, who, *privileges)
    return u


async def outcome(case: Case, caller, ctx) -> tuple[bool, dict]:
    body = case.body(ctx) if case.body else None
    status, answer = await caller.call(case.method, case.path(ctx), json=body)
    if status == 403:
        assert answer["error_code"] == "PERMISSION_DENIED" and answer["message"], answer
        return False, answer
    if status == 404:   # refused on something the caller may not see: answered as missing (test_existence.py)
        assert answer["error_code"] == "NOT_FOUND" and "does not exist" in answer["message"], answer
        return False, answer
    if status == 400 and "not inside any external location" in answer["message"]:   # by path: as if no location
        return False, answer
    assert status == 200, (case.id, status, answer)
    if case.listed is not None:
        return case.listed(ctx, answer), answer
    if case.verdict is not None:
        return case.verdict(answer), answer
    return True, answer


@pytest.mark.parametrize("case", CASES, ids=str)
async def test_endpoint_by_role(case, ws, server):
    admins = unique("ms_admins")
    await ok(ws, "PATCH", f"/metastores/{ws.metastore_id}", json={"owner": admins})
    results = {}
    for role in ROLES:
        ctx = await build(ws, case.world)
        ctx["ms"] = ws.metastore_id
        caller = await as_role(server, ws, case, ctx, role, admins)
        before = await snapshot(server, ws)
        allowed, answer = await outcome(case, caller, ctx)
        results[role] = allowed
        if not allowed and case.listed is None and case.verdict is None:
            assert await snapshot(server, ws) == before, (case.id, role, answer)   # nothing changed
    expected = {"owner": True, "holder": True, "all_but": False, "stranger": False, "group": True, "admin": True}
    assert results == expected, case.id
