"""Invisible answers as missing (issue 28, class 8): for every endpoint that names a securable
(by name, by id or by path), a caller that may not see an existing one gets exactly the answer a
missing one gives: same status, same error code, same message but for the name itself.

Two callers: a stranger (no grant at all), and a neighbour (USE CATALOG and USE SCHEMA on the
catalog and schema, nothing on what is in them: it sees those two, not their contents). Each
case names one thing that varies: the existing name (or id, or path) and a missing one of the
same shape; everything else in the request is the same."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Callable

import pytest
from governance_users import grant, unique, user

from test_enforcement_matrix import ROLE, TABLE, function


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def build(ws) -> dict:
    """Catalog c, schema c.s with a table, a volume, a function and a model (version 1, alias
    champion); a share, recipient, provider, storage credential and external location. Every
    name is unique, so it can be told from the rest of a message."""
    c = unique("cat")
    w = {"c": c, "t": unique("tbl"), "v": unique("vol"), "f": unique("fun"), "m": unique("mod"),
         "share": unique("shr"), "rcpt": unique("rcp"), "prov": unique("prv"), "cred": unique("crd"),
         "loc": unique("loc")}
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    w["table"] = await ok(ws, "POST", "/tables", json={"name": w["t"], "catalog_name": c, "schema_name": "s",
                                                       **TABLE})
    w["volume"] = await ok(ws, "POST", "/volumes", json={"name": w["v"], "catalog_name": c, "schema_name": "s",
                                                         "volume_type": "MANAGED"})
    await ok(ws, "POST", "/functions", json=function(c, w["f"]))
    await ok(ws, "POST", "/models", json={"name": w["m"], "catalog_name": c, "schema_name": "s"})
    await ok(ws, "POST", "/models/versions", json={"catalog_name": c, "schema_name": "s", "model_name": w["m"],
                                                   "source": "file:///src"})
    await ok(ws, "PUT", f"/models/{c}.s.{w['m']}/aliases/champion", json={"version_num": 1})
    await ok(ws, "POST", "/shares", json={"name": w["share"]})
    await ok(ws, "POST", "/recipients", json={"name": w["rcpt"], "authentication_type": "TOKEN"})
    await ok(ws, "POST", "/providers", json={"name": w["prov"], "authentication_type": "DATABRICKS"})
    await ok(ws, "POST", "/storage-credentials", json={"name": w["cred"], "aws_iam_role": ROLE})
    await ok(ws, "POST", "/external-locations", json={"name": w["loc"], "url": f"s3://bucket/{w['loc']}",
                                                      "credential_name": w["cred"]})
    return w


@dataclass(frozen=True)
class Case:
    id: str
    method: str
    path: Callable                   # (w, x) -> path
    body: Callable | None = None     # (w, x) -> JSON body
    varies: str = "t"                # which of the world's names is x (or "table_id", "volume_id", "path")
    neighbour: bool = True           # also for a caller that sees the catalog and schema

    def __str__(self):
        return self.id


def in_schema(kind_path: str, key: str, **kw) -> list[Case]:
    """get / update / delete of a securable in schema c.s."""
    return [Case(f"get {kind_path}", "GET", lambda w, x: f"/{kind_path}/{w['c']}.s.{x}", varies=key),
            Case(f"update {kind_path}", "PATCH", lambda w, x: f"/{kind_path}/{w['c']}.s.{x}",
                 lambda w, x: {"comment": "x"}, varies=key, **kw),
            Case(f"delete {kind_path}", "DELETE", lambda w, x: f"/{kind_path}/{w['c']}.s.{x}", varies=key)]


def top_level(kind_path: str, key: str) -> list[Case]:
    return [Case(f"get {kind_path}", "GET", lambda w, x: f"/{kind_path}/{x}", varies=key, neighbour=False),
            Case(f"update {kind_path}", "PATCH", lambda w, x: f"/{kind_path}/{x}", lambda w, x: {"comment": "x"},
                 varies=key, neighbour=False),
            Case(f"delete {kind_path}", "DELETE", lambda w, x: f"/{kind_path}/{x}", varies=key, neighbour=False)]


def table_named(w, x) -> str:
    return f"{w['c']}.s.{x}"


CASES = [
    # the catalog and schema themselves: for the stranger, who may not see them
    Case("get catalog", "GET", lambda w, x: f"/catalogs/{x}", varies="c", neighbour=False),
    Case("update catalog", "PATCH", lambda w, x: f"/catalogs/{x}", lambda w, x: {"comment": "x"}, varies="c",
         neighbour=False),
    Case("delete catalog", "DELETE", lambda w, x: f"/catalogs/{x}?force=true", varies="c", neighbour=False),
    Case("get schema", "GET", lambda w, x: f"/schemas/{x}.s", varies="c", neighbour=False),
    Case("update schema", "PATCH", lambda w, x: f"/schemas/{x}.s", lambda w, x: {"comment": "x"}, varies="c",
         neighbour=False),
    Case("delete schema", "DELETE", lambda w, x: f"/schemas/{x}.s", varies="c", neighbour=False),
    Case("list schemas", "GET", lambda w, x: f"/schemas?catalog_name={x}", varies="c", neighbour=False),
    Case("list tables", "GET", lambda w, x: f"/tables?catalog_name={x}&schema_name=s", varies="c", neighbour=False),
    Case("list volumes", "GET", lambda w, x: f"/volumes?catalog_name={x}&schema_name=s", varies="c",
         neighbour=False),
    Case("list models in a catalog", "GET", lambda w, x: f"/models?catalog_name={x}", varies="c", neighbour=False),
    Case("table summaries", "POST", lambda w, x: "/table-summaries", lambda w, x: {"catalog_name": x}, varies="c",
         neighbour=False),
    Case("create schema", "POST", lambda w, x: "/schemas", lambda w, x: {"name": "n", "catalog_name": x},
         varies="c", neighbour=False),
    Case("create table", "POST", lambda w, x: "/tables",
         lambda w, x: {"name": "n", "catalog_name": x, "schema_name": "s", **TABLE}, varies="c", neighbour=False),
    Case("catalog permissions", "GET", lambda w, x: f"/permissions/catalog/{x}", varies="c", neighbour=False),
    Case("catalog effective permissions", "GET", lambda w, x: f"/effective-permissions/catalog/{x}", varies="c",
         neighbour=False),
    # what is in the schema
    *in_schema("tables", "t"),
    *in_schema("volumes", "v"),
    Case("get function", "GET", lambda w, x: f"/functions/{w['c']}.s.{x}", varies="f"),
    Case("delete function", "DELETE", lambda w, x: f"/functions/{w['c']}.s.{x}", varies="f"),
    *in_schema("models", "m"),
    Case("list model versions", "GET", lambda w, x: f"/models/{w['c']}.s.{x}/versions", varies="m"),
    Case("get model version", "GET", lambda w, x: f"/models/{w['c']}.s.{x}/versions/1", varies="m"),
    Case("update model version", "PATCH", lambda w, x: f"/models/{w['c']}.s.{x}/versions/1",
         lambda w, x: {"comment": "x"}, varies="m"),
    Case("get alias", "GET", lambda w, x: f"/models/{w['c']}.s.{x}/aliases/champion", varies="m"),
    Case("model version credentials", "POST", lambda w, x: "/temporary-model-version-credentials",
         lambda w, x: {"catalog_name": w["c"], "schema_name": "s", "model_name": x, "version": 1,
                       "operation": "READ_MODEL_VERSION"}, varies="m"),
    Case("table permissions", "GET", lambda w, x: f"/permissions/table/{table_named(w, x)}"),
    Case("update table permissions", "PATCH", lambda w, x: f"/permissions/table/{table_named(w, x)}",
         lambda w, x: {"changes": [{"principal": "somebody", "add": ["SELECT"]}]}),
    Case("table effective permissions", "GET", lambda w, x: f"/effective-permissions/table/{table_named(w, x)}"),
    Case("authorize", "POST", lambda w, x: "/shardcat/authorize", lambda w, x: {"items": [
        {"securable_type": "table", "full_name": table_named(w, x), "privilege": "SELECT"}]}),
    Case("resolve by name", "POST", lambda w, x: "/resolve",
         lambda w, x: {"items": [{"name": table_named(w, x)}, {"name": table_named(w, x), "operation": "WRITE"}]}),
    Case("resolve by path", "POST", lambda w, x: "/resolve", lambda w, x: {"items": [{"path": x + "/_delta_log"}]},
         varies="path"),
    Case("lineage", "GET", lambda w, x: f"/shardcat/lineage?name={table_named(w, x)}"),
    Case("report lineage", "POST", lambda w, x: "/shardcat/lineage",
         lambda w, x: {"target": table_named(w, x), "sources": [{"name": table_named(w, x)}]}),
    Case("search", "GET", lambda w, x: f"/shardcat/search?query={x}"),
    # by id
    Case("table credentials", "POST", lambda w, x: "/temporary-table-credentials",
         lambda w, x: {"table_id": x, "operation": "READ"}, varies="table_id"),
    Case("volume credentials", "POST", lambda w, x: "/temporary-volume-credentials",
         lambda w, x: {"volume_id": x, "operation": "READ_VOLUME"}, varies="volume_id"),
    Case("get Delta commits", "GET", lambda w, x: "/delta/preview/commits",
         lambda w, x: {"table_id": x, "table_uri": w["table"]["storage_location"], "start_version": 0},
         varies="table_id"),
    Case("Delta commit", "POST", lambda w, x: "/delta/preview/commits",
         lambda w, x: {"table_id": x, "table_uri": w["table"]["storage_location"], "latest_backfilled_version": 0},
         varies="table_id"),
    # metastore-level objects: their owners and admins see them
    *top_level("shares", "share"),
    Case("get share permissions", "GET", lambda w, x: f"/shares/{x}/permissions", varies="share", neighbour=False),
    Case("update share permissions", "PATCH", lambda w, x: f"/shares/{x}/permissions",
         lambda w, x: {"changes": [{"principal": w["rcpt"], "remove": ["SELECT"]}]}, varies="share",
         neighbour=False),
    *top_level("recipients", "rcpt"),
    Case("rotate recipient token", "POST", lambda w, x: f"/recipients/{x}/rotate-token",
         lambda w, x: {"existing_token_expire_in_seconds": 0}, varies="rcpt", neighbour=False),
    Case("recipient share permissions", "GET", lambda w, x: f"/recipients/{x}/share-permissions", varies="rcpt",
         neighbour=False),
    *top_level("providers", "prov"),
    Case("provider shares", "GET", lambda w, x: f"/providers/{x}/shares", varies="prov", neighbour=False),
    *top_level("storage-credentials", "cred"),
    *top_level("external-locations", "loc"),
    # by path, inside an external location (no table or volume there)
    Case("list files", "GET", lambda w, x: f"/files?url={x}/sub", varies="location_url", neighbour=False),
    Case("path credentials", "POST", lambda w, x: "/temporary-path-credentials",
         lambda w, x: {"url": f"{x}/sub", "operation": "PATH_READ"}, varies="location_url", neighbour=False),
    # another workspace's metastore
    Case("get metastore", "GET", lambda w, x: f"/metastores/{x}", varies="metastore", neighbour=False),
    Case("update metastore", "PATCH", lambda w, x: f"/metastores/{x}", lambda w, x: {"comment": "x"},
         varies="metastore", neighbour=False),
    Case("delete metastore", "DELETE", lambda w, x: f"/metastores/{x}", varies="metastore", neighbour=False),
]


async def existing_and_missing(ws, w: dict, varies: str) -> tuple[str, str]:
    if varies == "metastore":
        other = await ok(ws, "POST", "/metastores", json={"name": unique("ms"),
                                                          "storage_root": ws.storage_root + "/other"})
        return other["metastore_id"], str(uuid.uuid4())
    if varies == "location_url":
        return f"s3://bucket/{w['loc']}", f"s3://bucket/{unique('loc')}"
    if varies == "table_id":
        return w["table"]["table_id"], str(uuid.uuid4())
    if varies == "volume_id":
        return w["volume"]["volume_id"], str(uuid.uuid4())
    if varies == "path":       # the table's storage, and a sibling directory no table owns
        location = w["table"]["storage_location"]
        return location, location.rsplit("/", 1)[0] + "/" + str(uuid.uuid4())
    name = w[varies]
    return name, unique(name.split("_")[0])


def shown(status: int, body, x: str) -> tuple[int, object]:
    """The answer with the varying name replaced (and the version a resolve answers at left out)."""
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k != "metastore_version"}
    return status, json.loads(json.dumps(body).replace(x, "<name>"))


@pytest.mark.parametrize("case", CASES, ids=str)
async def test_an_invisible_securable_answers_as_a_missing_one(case, ws, server):
    w = await build(ws)
    stranger = await user(server, ws)
    callers = {"stranger": stranger}
    if case.neighbour:
        neighbour = await user(server, ws)
        await grant(ws, "catalog", w["c"], neighbour.name, "USE CATALOG")
        await grant(ws, "schema", f"{w['c']}.s", neighbour.name, "USE SCHEMA")
        callers["neighbour"] = neighbour
    existing, missing = await existing_and_missing(ws, w, case.varies)
    for role, caller in callers.items():
        answers = []
        for x in (existing, missing):
            status, body = await caller.call(case.method, case.path(w, x),
                                             json=case.body(w, x) if case.body else None)
            assert status < 500, (case.id, role, status, body)
            answers.append(shown(status, body, x))
        assert answers[0] == answers[1], (case.id, role, answers)
    # The admin still tells them apart (the world was not broken along the way).
    if case.method == "GET" and "?" not in case.path(w, existing) and case.varies not in ("table_id", "metastore"):
        status, _ = await ws.call("GET", case.path(w, existing), json=case.body(w, existing) if case.body else None)
        assert status == 200, case.id
