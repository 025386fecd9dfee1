"""Attacks on connections and foreign catalogs (issue 50), tried as a user with fewer rights would.

The attacker may create connections and catalogs (CREATE CONNECTION, CREATE CATALOG on the metastore) and
runs its own foreign system: `Upstream`, a small Unity Catalog server on loopback that answers whatever
tables it likes. The federating server allows 127.0.0.1 by name only (`--webhook-allow-host`), as an
operator would allow an internal catalog.

- Storage (one asset per path, by path as by name): a foreign table whose location lies in another
  principal's external location, in managed storage or on a native table, or whose Iceberg metadata file
  lies outside its own storage, must give its owner nothing there: no credentials by id or by path, no
  listing, no metadata read by the catalog.
- Mounting: CREATE FOREIGN CATALOG on the connection (with CREATE CATALOG) mounts; USE CONNECTION alone
  does not, and without any privilege the connection answers as missing.
- Secrets: a connection's token never appears in an answer, an error, an audit row or a log line, in any
  API that names the connection.
- Call-outs: a redirect from an allowed host is never followed; no URL with user information is kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from aiohttp import web
from deltalake import write_deltalake

from governance_users import grant, unique, user
from shardcat.entities.urls import local_path
from shardcat.web.wire import PREFIX
from tests.conftest import new_workspace, serving

federating = serving("redteam_federation", webhook_allow_hosts=("127.0.0.1",))
COLUMNS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0}]
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


class Upstream:
    """The attacker's own Unity Catalog server (real HTTP on loopback): one catalog `up`, one schema `s`,
    the tables in `self.tables` (name -> TableInfo). `redirect`: answer every request with a 302 there."""

    def __init__(self):
        self.tables: dict[str, dict] = {}
        self.redirect: str | None = None
        self.seen: list[str] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> "Upstream":
        app = web.Application()
        app.router.add_get(PREFIX + "/schemas", self._schemas)
        app.router.add_get(PREFIX + "/tables", self._tables)
        app.router.add_get(PREFIX + "/tables/{full}", self._table)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        return self

    async def stop(self) -> None:
        await self.runner.cleanup()

    def _moved(self, request):
        self.seen.append(str(request.rel_url))
        if self.redirect:
            raise web.HTTPFound(self.redirect + str(request.rel_url))

    async def _schemas(self, request):
        self._moved(request)
        return web.json_response({"schemas": [{"name": "s", "catalog_name": "up"}]})

    async def _tables(self, request):
        self._moved(request)
        return web.json_response({"tables": [self._info(n) for n in self.tables]})

    async def _table(self, request):
        self._moved(request)
        name = request.match_info["full"].split(".")[-1]
        if name not in self.tables:
            return web.json_response({"error_code": "NOT_FOUND", "message": "no"}, status=404)
        return web.json_response(self._info(name))

    def _info(self, name: str) -> dict:
        return {"name": name, "catalog_name": "up", "schema_name": "s", "table_type": "EXTERNAL",
                "data_source_format": "DELTA", "columns": COLUMNS, **self.tables[name]}


@pytest.fixture
async def upstream():
    up = await Upstream().start()
    yield up
    await up.stop()


@pytest.fixture
async def fws(federating, http, tmp_path):
    return await new_workspace(federating, http, tmp_path / "federating")


async def world(federating, fws, upstream, tmp_path: Path) -> dict:
    """The victim's storage (an external location `ext` holding an unregistered Delta folder, a native
    external table, a native Iceberg table in managed storage), the attacker's own location `mine`, and the
    attacker's foreign catalog `loot` mounted from its Upstream."""
    cred = unique("cred")
    await ok(fws, "POST", "/storage-credentials", json={"name": cred, "aws_iam_role": {"role_arn": "arn:x"}})
    ext, mine = tmp_path / "ext", tmp_path / "mine"
    ext.mkdir()
    mine.mkdir()
    await ok(fws, "POST", "/external-locations", json={"name": "ext", "url": ext.as_uri(), "credential_name": cred})
    await ok(fws, "POST", "/external-locations", json={"name": "mine", "url": mine.as_uri(), "credential_name": cred})
    write_deltalake(str(ext / "secret"), pa.table({"id": [42]}))          # files governed by READ FILES only
    await ok(fws, "POST", "/catalogs", json={"name": "main"})
    await ok(fws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    native = await ok(fws, "POST", "/tables", json={
        "name": "native", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLUMNS, "storage_location": (ext / "native").as_uri()})
    iceberg = await ok(fws, "POST", "/iceberg/v1/catalogs/main/namespaces/s/tables",
                       json={"name": "ice", "schema": SCHEMA})
    attacker = await user(federating, fws)
    await grant(fws, "metastore", fws.metastore_id, attacker.name, "CREATE CONNECTION", "CREATE CATALOG")
    await grant(fws, "external_location", "mine", attacker.name, "CREATE EXTERNAL TABLE", "READ FILES")
    connection = unique("conn")
    await ok(attacker, "POST", "/connections", json={"name": connection, "connection_type": "UNITY_CATALOG",
                                                     "options": {"url": upstream.url, "bearer_token": "t" * 20}})
    await ok(attacker, "POST", "/catalogs", json={"name": "loot", "connection_name": connection,
                                                  "options": {"catalog": "up"}})
    return {"ext": ext, "mine": mine, "native": native, "iceberg": iceberg, "attacker": attacker,
            "connection": connection}


async def test_a_foreign_tables_storage_gives_nothing_its_owner_could_not_reach_by_path(
        federating, fws, upstream, tmp_path):
    w = await world(federating, fws, upstream, tmp_path)
    attacker, ext, mine = w["attacker"], w["ext"], w["mine"]
    secret = (ext / "secret").as_uri()
    targets = {
        "in_ext": secret,                                            # another's external location
        "in_ext_spelled": f"file://{ext}/./x/../secret/",             # the same, spelled otherwise
        "on_native": w["native"]["storage_location"],                 # a native table's storage
        "in_native": w["native"]["storage_location"] + "/sub",
        "managed": fws.storage_root,                                  # the metastore's managed storage
        "in_managed": w["iceberg"]["metadata"]["location"] + "/data",
        "nowhere": (tmp_path / "nowhere").as_uri(),                   # outside every external location
        "mine": (mine / "t").as_uri(),                                # the attacker's own: served
    }
    upstream.tables = {name: {"storage_location": url} for name, url in targets.items()}
    for name in targets:
        status, table = await attacker.call("GET", f"/tables/loot.s.{name}")
        assert status == 200, (name, table)
        status, creds = await attacker.call("POST", "/temporary-table-credentials",
                                            json={"table_id": table["table_id"], "operation": "READ"})
        if name == "mine":
            assert status == 200 and creds["url"] == (mine / "t").as_uri(), creds
            continue
        assert status in (400, 403, 404) and "url" not in creds, (name, table, creds)
    # By path: the external location's READ FILES still governs its folder, whoever's foreign table names it.
    for url in (secret, secret + "/_delta_log", f"file://{ext}/secret/../secret"):
        status, body = await attacker.call("POST", "/temporary-path-credentials",
                                           json={"url": url, "operation": "PATH_READ"})
        assert status in (400, 403, 404), (url, body)
        status, body = await attacker.call("GET", "/files", params={"url": url})
        assert status in (400, 403, 404) and "_delta_log" not in json.dumps(body), (url, body)
    # ...and the victim's own readers by path are not locked out by the mirror.
    reader = await user(federating, fws)
    await grant(fws, "external_location", "ext", reader.name, "READ FILES")
    listed = await ok(reader, "GET", "/files", params={"url": secret})
    assert any("_delta_log" in f["path"] for f in listed["files"]), listed


async def test_a_foreign_iceberg_tables_metadata_is_read_only_inside_its_own_storage(federating, fws, upstream,
                                                                                     tmp_path):
    w = await world(federating, fws, upstream, tmp_path)
    attacker, mine = w["attacker"], w["mine"]
    victim = w["iceberg"]
    victim_file = victim["metadata-location"]
    upstream.tables = {
        # its own storage is the attacker's; its metadata file is the victim's
        "meta": {"data_source_format": "ICEBERG", "storage_location": (mine / "meta").as_uri(),
                 "properties": {"metadata_location": victim_file}},
        "meta_up": {"data_source_format": "ICEBERG", "storage_location": (mine / "meta_up").as_uri(),
                    "properties": {"metadata_location": f"{(mine / 'meta_up').as_uri()}/../../"
                                                        f"{Path(local_path(victim_file)).relative_to(tmp_path)}"}},
        "meta_none": {"data_source_format": "ICEBERG", "storage_location": victim["metadata"]["location"],
                      "properties": {"metadata_location": victim_file}},
    }
    for name in upstream.tables:
        for path in (f"/iceberg/v1/catalogs/loot/namespaces/s/tables/{name}",
                     f"/iceberg/v1/catalogs/loot/namespaces/s/tables/{name}/credentials"):
            status, body = await attacker.call("GET", path)
            assert victim["metadata"]["table-uuid"] not in json.dumps(body), (name, path, body)
            assert status in (400, 403, 404), (name, path, status, body)
        status, body = await attacker.call("POST", f"/iceberg/v1/catalogs/loot/namespaces/s/tables/{name}/plan",
                                           json={})
        assert victim["metadata"]["table-uuid"] not in json.dumps(body) and status in (400, 403, 404, 406), body
        status, body = await attacker.call("GET", f"/tables/loot.s.{name}")
        assert status == 200 and victim_file not in json.dumps(body.get("properties")), (name, body)


async def test_mounting_needs_create_foreign_catalog_on_the_connection(federating, fws, upstream, tmp_path):
    connection = unique("conn")
    await ok(fws, "POST", "/connections", json={"name": connection, "connection_type": "UNITY_CATALOG",
                                                "options": {"url": upstream.url, "bearer_token": "s" * 20}})
    someone = await user(federating, fws)
    await grant(fws, "metastore", fws.metastore_id, someone.name, "CREATE CATALOG")
    body = {"name": unique("f"), "connection_name": connection, "options": {"catalog": "up"}}
    for spelled in (connection, connection.upper(), f" {connection}"):
        status, answer = await someone.call("POST", "/catalogs", json={**body, "connection_name": spelled})
        assert status in (400, 404), (spelled, answer)         # no privilege: as a missing connection
    assert (await someone.call("GET", f"/connections/{connection}"))[0] == 404
    listed = await ok(someone, "GET", "/connections")
    assert connection not in json.dumps(listed), listed             # nor listed
    await grant(fws, "connection", connection, someone.name, "USE CONNECTION")
    status, answer = await someone.call("POST", "/catalogs", json=body)
    assert status == 403 and "CREATE FOREIGN CATALOG" in answer["message"], answer
    # CREATE FOREIGN CATALOG without USE CONNECTION mounts (Databricks' rule: USE CONNECTION is for queries
    # through it), but not without CREATE CATALOG on the metastore.
    await grant(fws, "connection", connection, someone.name, "CREATE FOREIGN CATALOG", remove=["USE CONNECTION"])
    other = await user(federating, fws)
    await grant(fws, "connection", connection, other.name, "CREATE FOREIGN CATALOG")
    status, answer = await other.call("POST", "/catalogs", json={**body, "name": unique("g")})
    assert status == 403, answer
    made = await ok(someone, "POST", "/catalogs", json=body)
    assert made["connection_name"] == connection
    # A foreign catalog is never mounted on another's connection through an update either.
    mine = unique("mine")
    await ok(someone, "POST", "/catalogs", json={"name": mine})
    status, answer = await someone.call("PATCH", f"/catalogs/{mine}", json={"connection_name": connection})
    got = await ok(someone, "GET", f"/catalogs/{mine}")
    assert got.get("connection_name") is None and got.get("catalog_type") != "FOREIGN_CATALOG", (status, got)


async def test_a_connections_token_is_never_shown(federating, fws, upstream, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    token = "SECRET-" + uuid.uuid4().hex
    connection = unique("conn")
    made = await ok(fws, "POST", "/connections", json={"name": connection, "connection_type": "UNITY_CATALOG",
                                                       "options": {"url": upstream.url, "bearer_token": token}})
    await ok(fws, "POST", "/catalogs", json={"name": "seen", "connection_name": connection,
                                             "options": {"catalog": "up"}})
    upstream.tables = {"t": {"storage_location": (tmp_path / "t").as_uri()}}
    answers = [made, await ok(fws, "GET", f"/connections/{connection}"), await ok(fws, "GET", "/connections"),
               await ok(fws, "GET", "/catalogs/seen"), await ok(fws, "GET", "/tables/seen.s.t"),
               await ok(fws, "GET", "/schemas", params={"catalog_name": "seen"}),
               await ok(fws, "POST", f"/shardcat/foreign-catalogs/seen/refresh", json={})]
    for body in (
            {"name": connection, "connection_type": "UNITY_CATALOG", "options": {"url": upstream.url, "bearer_token": token}},
            {"name": unique("c"), "connection_type": "UNITY_CATALOG", "options": {"url": "ftp://x", "bearer_token": token}},
            {"name": unique("c"), "connection_type": "UNITY_CATALOG", "options": {"url": 7, "bearer_token": token}},
            {"name": unique("c"), "connection_type": "UNITY_CATALOG", "options": {"bearer_token": {"x": token}}},
            {"name": unique("c"), "connection_type": "ICEBERG_REST", "options": {"uri": "http://10.0.0.1", "token": token}},
            {"name": unique("c"), "connection_type": "UNITY_CATALOG", "options": token},
            {"name": unique("c"), "connection_type": "UNITY_CATALOG",
             "options": {"url": f"http://user:{token}@127.0.0.1:1"}},
            {"name": unique("c"), "connection_type": "UNITY_CATALOG",
             "options": {"url": f"http://127.0.0.1:1/?token={token}"}}):
        status, answer = await fws.call("POST", "/connections", json=body)
        answers.append(answer)
        if status == 200:
            answers.append(await ok(fws, "GET", f"/connections/{body['name']}"))
    status, answer = await fws.call("PATCH", f"/connections/{connection}",
                                    json={"options": {"url": "http://169.254.169.254", "bearer_token": token}})
    assert status == 400
    answers.append(answer)
    # The foreign system down: the 503 names the connection, not its token.
    await upstream.stop()
    await ok(fws, "PATCH", "/catalogs/seen", json={"options": {"catalog": "up", "cache_ttl_seconds": "1"}})
    await asyncio.sleep(1.1)
    status, answer = await fws.call("GET", "/tables/seen.s.t")
    assert status == 503, answer
    answers.append(answer)
    for answer in answers:
        assert token not in json.dumps(answer), answer
    from shardcat.governance.audit import APP_KEY
    await federating.runner.app[APP_KEY].flush()
    rows = await federating.store.pool.fetch("SELECT * FROM audit_log WHERE metastore_id = $1",
                                             uuid.UUID(fws.metastore_id))
    assert rows and token not in json.dumps([dict(r) for r in rows], default=str)
    stored = await federating.store.pool.fetch("SELECT info::text AS i FROM assets WHERE metastore_id = $1",
                                               uuid.UUID(fws.metastore_id))
    assert token not in "".join(r["i"] for r in stored)
    assert token not in caplog.text


async def test_a_redirect_from_an_allowed_host_is_not_followed(federating, fws, upstream, tmp_path):
    elsewhere = await Upstream().start()        # reached only through the redirect, by a name not allowed
    try:
        elsewhere.tables = {"leak": {"storage_location": (tmp_path / "leak").as_uri()}}
        upstream.tables = {}
        upstream.redirect = elsewhere.url.replace("127.0.0.1", "localhost")
        connection = unique("conn")
        await ok(fws, "POST", "/connections", json={"name": connection, "connection_type": "UNITY_CATALOG",
                                                    "options": {"url": upstream.url}})
        await ok(fws, "POST", "/catalogs", json={"name": "bounced", "connection_name": connection,
                                                 "options": {"catalog": "up"}})
        status, body = await fws.call("GET", "/tables/bounced.s.leak")
        assert status in (404, 503), body
        assert upstream.seen and not elsewhere.seen        # asked, redirected, and the redirect not followed
        # Nor may a connection be moved to a name that is not allowed.
        for url in (elsewhere.url.replace("127.0.0.1", "localhost"), "http://[::ffff:7f00:1]:1", "http://0177.0.0.1:1"):
            status, body = await fws.call("PATCH", f"/connections/{connection}", json={"options": {"url": url}})
            assert status == 400, (url, body)
    finally:
        await elsewhere.stop()
