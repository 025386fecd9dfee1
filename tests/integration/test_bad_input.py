"""Bad input at every endpoint: each gets a 4xx with Unity Catalog error JSON, the right
error code, a message naming what is wrong, and changes nothing.

The refused requests share one workspace holding a small world (see `build_world`); each
takes a snapshot (metastore version, the metastore's JSON, full listings of catalogs,
schemas and tables, the raw `assets`, `metastores`, `workspaces` and `change_log` rows),
sends the bad request, checks the error, and compares a second snapshot with the first.
The tests that delete on purpose get a world of their own (`ws` + `world`).

Cases are tables: (id, method, path, expected error code, fragments the message must
contain, request options). In paths, bodies and query parameters `$NAME` stands for a
value of the world: `$MS` the workspace's metastore id, `$WS` its workspace id, `$ROOT`
the metastore's storage root, `$STAGING` the staging location reserved for `main.s.stg`,
`$MLOC` the managed table `main.s.m`'s location, `$OTHER_MS` / `$OTHER_MS_NAME` a second
metastore (`$OTHER_MS_UPPER` its name upper-cased), `$FREE_WS` a workspace with no metastore, `$NO_MS` a UUID no metastore has.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
import uuid

import pytest

from shardcat.auth import hash_token, new_token
from shardcat.entities.values import now_ms
from tests.conftest import new_workspace

# The Unity Catalog codes this file expects and the HTTP status each must travel with.
STATUS = {
    "INVALID_PARAMETER_VALUE": 400, "MALFORMED_REQUEST": 400, "FAILED_PRECONDITION": 400,
    "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "ENDPOINT_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405, "ALREADY_EXISTS": 409, "REQUEST_TOO_LARGE": 413,
}
INVALID, MALFORMED, PRECONDITION = "INVALID_PARAMETER_VALUE", "MALFORMED_REQUEST", "FAILED_PRECONDITION"
NOT_FOUND, EXISTS = "NOT_FOUND", "ALREADY_EXISTS"

MAX_BODY = 4 << 20
COLS = [{"name": "id", "type_name": "LONG"}]
MANAGED = {"catalog_name": "main", "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
           "columns": COLS}
EXTERNAL = {**MANAGED, "table_type": "EXTERNAL"}


def managed(**fields) -> dict:
    return {"name": "new_t", **MANAGED, **fields}


def external(location, **fields) -> dict:
    return {"name": "new_t", **EXTERNAL, "storage_location": location, **fields}


def case(id: str, method: str, path: str, code: str, *says: str, **request):
    """One bad request: the error code it must get and fragments its message must contain."""
    return pytest.param(method, path, code, says, request, id=id)


def token_of(after) -> str:
    """A page token in the server's format, pointing after `after` (any JSON value)."""
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode()


# ---- the world each case runs against -------------------------------------------------

async def ok(ws, method, path, **kw) -> dict:
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def build_world(ws, server) -> dict:
    """main.s holds a managed, two external tables, a view and a staging table; main.empty_schema,
    catalog `rooted` with its own storage root, catalog `empty`; a second metastore."""
    await ok(ws, "POST", "/catalogs", json={"name": "main", "comment": "c", "properties": {"k": "v"}})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "empty_schema", "catalog_name": "main"})
    m = await ok(ws, "POST", "/tables", json={"name": "m", **MANAGED, "columns": [
        {"name": "id", "type_name": "LONG"},
        {"name": "price", "type_name": "DECIMAL", "type_precision": 10, "type_scale": 2}]})
    await ok(ws, "POST", "/tables", json={"name": "e", **EXTERNAL, "storage_location": "s3://bucket/ext/e"})
    await ok(ws, "POST", "/tables", json={"name": "e2", **EXTERNAL, "data_source_format": "PARQUET",
                                          "storage_location": "s3://bucket/ext2"})
    await ok(ws, "POST", "/tables", json={"name": "v", "catalog_name": "main", "schema_name": "s",
                                          "table_type": "VIEW", "view_definition": "SELECT 1", "columns": COLS})
    staging = await ok(ws, "POST", "/staging-tables", json={"name": "stg", "catalog_name": "main", "schema_name": "s"})
    await ok(ws, "POST", "/catalogs", json={"name": "rooted", "storage_root": "s3://bucket/roots/rooted"})
    await ok(ws, "POST", "/catalogs", json={"name": "empty"})
    other = str(uuid.uuid4())
    await server.store.create_metastore(other, f"other-{other[:8]}", {"storage_root": f"s3://other/{other}"})
    return {
        "$MS": ws.metastore_id, "$WS": str(ws.workspace_id), "$ROOT": ws.storage_root,
        "$STAGING": staging["staging_location"], "$MLOC": m["storage_location"],
        "$OTHER_MS": other, "$OTHER_MS_NAME": f"other-{other[:8]}", "$OTHER_MS_UPPER": f"OTHER-{other[:8].upper()}",
        "$FREE_WS": str(10**12 + uuid.uuid4().int % 10**9), "$NO_MS": str(uuid.uuid4()),
    }


@pytest.fixture(scope="module")
async def shared(server, http, tmp_path_factory):
    """One workspace and world for all the refused requests: each checks it left them as they were."""
    ws = await new_workspace(server, http, tmp_path_factory.mktemp("bad-input"))
    return ws, await build_world(ws, server)


@pytest.fixture
async def world(ws, server) -> dict:
    """A world of its own, for the tests below that change it on purpose."""
    return await build_world(ws, server)


def fill(value, subs: dict):
    """`value` with every `$NAME` of the world substituted, in strings and dict keys alike."""
    if isinstance(value, str):
        for key in sorted(subs, key=len, reverse=True):
            value = value.replace(key, subs[key])
        return value
    if isinstance(value, dict):
        return {fill(k, subs): fill(v, subs) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, subs) for v in value]
    return value


async def snapshot(ws, server) -> dict:
    """Everything a bad request could have changed, over the API and straight from PostgreSQL."""
    store, ms = server.store, ws.metastore_id
    get = lambda path, **params: ok(ws, "GET", path, params=params)   # noqa: E731

    async def tables(c: str, s: str):
        return (f"tables:{c}.{s}", await get("/tables", catalog_name=c, schema_name=s))

    async def schemas(c: str):
        listed = await get("/schemas", catalog_name=c)
        return [(f"schemas:{c}", listed)] + list(await asyncio.gather(*(tables(c, s["name"]) for s in listed["schemas"])))

    async def rows(key: str, sql: str, *args):
        return (key, [dict(r) for r in await store.pool.fetch(sql, *args)])

    version, metastore, summary, metastores, catalogs, *db = await asyncio.gather(
        store.metastore_version(ms), get(f"/metastores/{ms}"), get("/metastore_summary"), get("/metastores"),
        get("/catalogs"),
        rows("assets", "SELECT * FROM assets WHERE metastore_id = $1 ORDER BY id", uuid.UUID(ms)),
        rows("metastores", "SELECT * FROM metastores ORDER BY id"),
        rows("workspaces", "SELECT * FROM workspaces ORDER BY workspace_id"),
        rows("change_log", "SELECT version FROM change_log WHERE metastore_id = $1 ORDER BY version", uuid.UUID(ms)),
    )
    snap = {"version": version, "metastore": metastore, "summary": summary, "metastores_list": metastores,
            "catalogs": catalogs, **dict(db)}
    for listed in await asyncio.gather(*(schemas(c["name"]) for c in catalogs["catalogs"])):
        snap.update(listed)
    return snap


async def send(ws, method, path, *, auth, json=None, data=None, params=None, raw_path=False):
    """(status, content type, parsed body) of one request; `auth` None sends no Authorization header."""
    headers = {} if auth is None else {"Authorization": auth}
    if data is not None:
        headers["Content-Type"] = "application/json"
    url = (ws.url if raw_path else ws.api) + path
    async with ws.session.request(method, url, json=json, data=data, params=params, headers=headers) as r:
        text = await r.text()
        return r.status, r.content_type, text


async def expect_error(ws, world, server, method, path, code, says, req, *, tokens=None):
    subs = {**world, "$TOKEN": f"Bearer {ws.token}", **(tokens or {})}
    request = {k: (v if k == "data" else fill(v, subs)) for k, v in {"auth": "$TOKEN", **req}.items()}
    path = fill(path, subs)
    before = await snapshot(ws, server)
    status, content_type, text = await send(ws, method, path, **request)
    assert content_type == "application/json", (status, text)
    body = json.loads(text)
    assert isinstance(body, dict) and {"error_code", "message"} <= set(body), body
    assert (status, body["error_code"]) == (STATUS[code], code), body
    assert isinstance(body["message"], str) and body["message"], body
    for fragment in says:
        assert fill(fragment, world) in body["message"], body
    after = await snapshot(ws, server)
    assert after == before, "a refused request changed state"
    return body


# ---- request bodies: not JSON, not an object, too deep, too large -----------------------

BODY_ENDPOINTS = [
    ("POST", "/metastores"), ("PATCH", "/metastores/$MS"),
    ("PUT", "/workspaces/$WS/metastore"), ("PATCH", "/workspaces/$WS/metastore"),
    ("DELETE", "/workspaces/$WS/metastore"),
    ("POST", "/catalogs"), ("PATCH", "/catalogs/main"),
    ("POST", "/schemas"), ("PATCH", "/schemas/main.s"),
    ("POST", "/tables"), ("PATCH", "/tables/main.s.m"),
    ("POST", "/staging-tables"), ("POST", "/table-summaries"),
]
BIG = b'{"name": "big", "catalog_name": "main", "schema_name": "s", "comment": "' + b"a" * MAX_BODY + b'"}'
BAD_BODIES = [
    ("truncated JSON", b'{"name": ', MALFORMED, ("not valid JSON",)),
    ("trailing garbage", b'{"name": "x"} trailing', MALFORMED, ("not valid JSON",)),
    ("single quotes", b"{'name': 'x'}", MALFORMED, ("not valid JSON",)),
    ("not UTF-8", b'\xff\xfe\xfd{"name"', MALFORMED, ("not valid JSON",)),
    ("array", b'[{"name": "x"}]', MALFORMED, ("JSON object", "list")),
    ("string", b'"x"', MALFORMED, ("JSON object", "str")),
    ("number", b"42", MALFORMED, ("JSON object", "int")),
    ("null", b"null", MALFORMED, ("JSON object",)),
    ("nested 100000 deep", b"[" * 100_000 + b"]" * 100_000, MALFORMED, ("nested too deeply",)),
    ("over 4 MiB", BIG, "REQUEST_TOO_LARGE", (str(MAX_BODY),)),
]


@pytest.mark.parametrize("method, path, code, says, req", [
    case(f"{method} {path} {name}", method, path, code, *says, data=data)
    for method, path in BODY_ENDPOINTS for name, data, code, says in BAD_BODIES
])
async def test_bad_body(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- fields of the wrong type, strings PostgreSQL cannot hold ------------------------------

WRONG_TYPES = [
    case("catalog name int", "POST", "/catalogs", INVALID, "'name'", "string", json={"name": 5}),
    case("catalog comment int", "POST", "/catalogs", INVALID, "'comment'", json={"name": "x", "comment": 5}),
    case("catalog properties int value", "POST", "/catalogs", INVALID, "'properties'",
         json={"name": "x", "properties": {"a": 1}}),
    case("catalog properties null value", "POST", "/catalogs", INVALID, "'properties'",
         json={"name": "x", "properties": {"a": None}}),
    case("catalog properties list", "POST", "/catalogs", INVALID, "'properties'", json={"name": "x", "properties": ["a"]}),
    case("catalog storage_root int", "POST", "/catalogs", INVALID, "'storage_root'", json={"name": "x", "storage_root": 1}),
    case("catalog patch properties nested", "PATCH", "/catalogs/main", INVALID, "'properties'",
         json={"properties": {"a": {"b": "c"}}}),
    case("catalog patch owner bool", "PATCH", "/catalogs/main", INVALID, "'owner'", json={"owner": True}),
    case("schema catalog_name list", "POST", "/schemas", INVALID, "'catalog_name'",
         json={"name": "x", "catalog_name": ["main"]}),
    case("schema patch comment object", "PATCH", "/schemas/main.s", INVALID, "'comment'", json={"comment": {}}),
    case("table table_type int", "POST", "/tables", INVALID, "'table_type'", json=managed(table_type=1)),
    case("table columns string", "POST", "/tables", INVALID, "'columns'", json=managed(columns="id LONG")),
    case("table columns object", "POST", "/tables", INVALID, "'columns'", json=managed(columns={"name": "id"})),
    case("table storage_location int", "POST", "/tables", INVALID, "'storage_location'", json=external(7)),
    case("table data_source_format int", "POST", "/tables", INVALID, "'data_source_format'",
         json=managed(data_source_format=1)),
    case("table view_dependencies list", "POST", "/tables", INVALID, "'view_dependencies'",
         json=managed(view_dependencies=[1])),
    case("table properties float", "POST", "/tables", INVALID, "'properties'", json=managed(properties={"a": 1.5})),
    case("table comment NaN", "POST", "/tables", INVALID, "'comment'",
         data=json.dumps(managed(comment=float("nan"))).encode()),
    case("table patch columns int", "PATCH", "/tables/main.s.m", INVALID, "'columns'", json={"columns": 3}),
    case("table unknown table_type", "POST", "/tables", INVALID, "table_type", "'TABLE'", json=managed(table_type="TABLE")),
    case("table lower-case table_type", "POST", "/tables", INVALID, "table_type", "'managed'",
         json=managed(table_type="managed")),
    case("table unknown data_source_format", "POST", "/tables", INVALID, "data_source_format", "'XLS'",
         json=managed(data_source_format="XLS")),
    case("table patch unknown data_source_format", "PATCH", "/tables/main.s.m", INVALID, "data_source_format", "'XLS'",
         json={"data_source_format": "XLS"}),
    case("staging name int", "POST", "/staging-tables", INVALID, "'name'",
         json={"name": 1, "catalog_name": "main", "schema_name": "s"}),
    case("summaries schema pattern int", "POST", "/table-summaries", INVALID, "'schema_name_pattern'",
         json={"catalog_name": "main", "schema_name_pattern": 1}),
    case("summaries table pattern list", "POST", "/table-summaries", INVALID, "'table_name_pattern'",
         json={"catalog_name": "main", "table_name_pattern": ["%"]}),
    case("summaries page_token int", "POST", "/table-summaries", INVALID, "'page_token'",
         json={"catalog_name": "main", "page_token": 1}),
    case("metastore name int", "POST", "/metastores", INVALID, "'name'", json={"name": 1, "storage_root": "s3://b/x"}),
    case("metastore region int", "POST", "/metastores", INVALID, "'region'",
         json={"name": "x", "storage_root": "s3://b/x", "region": 1}),
    case("metastore patch delta_sharing_enabled str", "PATCH", "/metastores/$MS", INVALID, "'delta_sharing_enabled'",
         json={"delta_sharing_enabled": "yes"}),
    case("metastore patch token lifetime str", "PATCH", "/metastores/$MS", INVALID,
         "'delta_sharing_recipient_token_lifetime_in_seconds'",
         json={"delta_sharing_recipient_token_lifetime_in_seconds": "60"}),
    case("metastore patch lifetime bool", "PATCH", "/metastores/$MS", INVALID,
         "'delta_sharing_recipient_token_lifetime_in_seconds'",
         json={"delta_sharing_recipient_token_lifetime_in_seconds": True}),
    case("assign metastore_id int", "PUT", "/workspaces/$FREE_WS/metastore", INVALID, "metastore_id",
         json={"metastore_id": 5}),
    case("assign default_catalog_name int", "PATCH", "/workspaces/$WS/metastore", INVALID, "default_catalog_name",
         json={"default_catalog_name": 7}),
    case("unassign metastore_id int", "DELETE", "/workspaces/$WS/metastore", INVALID, "metastore_id",
         json={"metastore_id": 5}),
]
# PostgreSQL stores neither NUL characters nor unpaired surrogates, in text or in jsonb.
UNSTORABLE_TEXT = [
    case("catalog comment NUL", "POST", "/catalogs", INVALID, "'comment'", "NUL", json={"name": "x", "comment": "a\0b"}),
    case("catalog comment surrogate", "POST", "/catalogs", INVALID, "'comment'", "surrogate",
         data=b'{"name": "x", "comment": "\\ud800"}'),
    case("catalog name surrogate", "POST", "/catalogs", INVALID, "'name'", "surrogate", data=b'{"name": "a\\udc00"}'),
    case("catalog property key NUL", "POST", "/catalogs", INVALID, "properties", "NUL",
         json={"name": "x", "properties": {"k\0": "v"}}),
    case("catalog property value NUL", "PATCH", "/catalogs/main", INVALID, "properties.k", "NUL",
         json={"properties": {"k": "\0"}}),
    case("column comment NUL", "POST", "/tables", INVALID, "columns[0].comment", "NUL",
         json=managed(columns=[{"name": "id", "type_name": "LONG", "comment": "\0"}])),
    case("column name NUL", "PATCH", "/tables/main.s.m", INVALID, "columns[0].name", "NUL",
         json={"columns": [{"name": "i\0d", "type_name": "LONG"}]}),
    case("view_definition NUL", "POST", "/tables", INVALID, "'view_definition'", "NUL",
         json={"name": "v2", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW",
               "view_definition": "SELECT '\0'"}),
    case("metastore comment NUL", "PATCH", "/metastores/$MS", INVALID, "'comment'", "NUL", json={"comment": "\0"}),
    case("metastore owner surrogate", "PATCH", "/metastores/$MS", INVALID, "'owner'", "surrogate",
         data=b'{"owner": "\\udfff"}'),
    case("summaries pattern NUL", "POST", "/table-summaries", INVALID, "'table_name_pattern'", "NUL",
         json={"catalog_name": "main", "table_name_pattern": "\0"}),
    case("staging schema_name NUL", "POST", "/staging-tables", INVALID, "'schema_name'", "NUL",
         json={"name": "x", "catalog_name": "main", "schema_name": "s\0"}),
]


@pytest.mark.parametrize("method, path, code, says, req", WRONG_TYPES + UNSTORABLE_TEXT)
async def test_bad_field(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- columns --------------------------------------------------------------------------------

BAD_COLUMNS = [
    ("element not an object", ["id"], ("columns[0]", "object")),
    ("element a number", [COLS[0], 5], ("columns[1]", "object")),
    ("missing name", [{"type_name": "INT"}], ("columns[0]", "'name'")),
    ("empty name", [{"name": "", "type_name": "INT"}], ("columns[0]", "'name'")),
    ("name int", [{"name": 1, "type_name": "INT"}], ("columns[0].name",)),
    ("missing type_name", [{"name": "a"}], ("'a'", "type_name")),
    ("unknown type_name", [{"name": "a", "type_name": "VARCHAR"}], ("'a'", "'VARCHAR'")),
    ("lower-case type_name", [{"name": "a", "type_name": "int"}], ("'a'", "'int'")),
    ("type_name int", [{"name": "a", "type_name": 4}], ("columns[0].type_name",)),
    ("DECIMAL precision 0", [{"name": "d", "type_name": "DECIMAL", "type_precision": 0}], ("'d'", "precision")),
    ("DECIMAL precision 39", [{"name": "d", "type_name": "DECIMAL", "type_precision": 39}], ("'d'", "precision")),
    ("DECIMAL scale negative", [{"name": "d", "type_name": "DECIMAL", "type_precision": 5, "type_scale": -1}],
     ("'d'", "scale")),
    ("DECIMAL scale over precision", [{"name": "d", "type_name": "DECIMAL", "type_precision": 5, "type_scale": 6}],
     ("'d'", "scale")),
    ("DECIMAL precision string", [{"name": "d", "type_name": "DECIMAL", "type_precision": "10"}],
     ("columns[0].type_precision",)),
    ("DECIMAL precision float", [{"name": "d", "type_name": "DECIMAL", "type_precision": 10.5}],
     ("columns[0].type_precision",)),
    ("duplicate names", [{"name": "a", "type_name": "INT"}, {"name": "a", "type_name": "LONG"}],
     ("'a'", "more than once")),
    ("duplicate names, other case", [{"name": "a", "type_name": "INT"}, {"name": "A", "type_name": "LONG"}],
     ("'A'", "more than once")),
    ("position gap", [{"name": "a", "type_name": "INT", "position": 0}, {"name": "b", "type_name": "INT", "position": 2}],
     ("positions", "[0, 2]")),
    ("position repeated", [{"name": "a", "type_name": "INT", "position": 1}, {"name": "b", "type_name": "INT", "position": 1}],
     ("positions", "[1, 1]")),
    ("position negative", [{"name": "a", "type_name": "INT", "position": -1}], ("positions", "[-1]")),
    ("position string", [{"name": "a", "type_name": "INT", "position": "0"}], ("columns[0].position",)),
    ("position bool", [{"name": "a", "type_name": "INT", "position": False}], ("columns[0].position",)),
    ("nullable string", [{"name": "a", "type_name": "INT", "nullable": "yes"}], ("columns[0].nullable",)),
    ("type_json not JSON", [{"name": "a", "type_name": "INT", "type_json": "{"}], ("'a'", "type_json")),
]


@pytest.mark.parametrize("method, path, code, says, req", [
    case(f"{verb} {name}", method, path, INVALID, *says, json=make(columns))
    for name, columns, says in BAD_COLUMNS
    for verb, method, path, make in (
        ("create", "POST", "/tables", lambda c: managed(columns=c)),
        ("update", "PATCH", "/tables/main.s.m", lambda c: {"columns": c}),
    )
])
async def test_bad_columns(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- names ----------------------------------------------------------------------------------

BAD_NAMES = [  # (id, name, fragment of the message)
    ("dot", "a.b", "a.b"), ("space", "a b", "a b"), ("slash", "a/b", "a/b"),
    ("tab", "a\tb", "invalid character"), ("newline", "a\nb", "invalid character"),
    ("escape char", "a\x1bb", "invalid character"), ("DEL", "a\x7fb", "invalid character"),
    ("empty", "", "non-empty"), ("256 chars", "n" * 256, "256 characters"), ("int", 5, None),
]
NAME_TARGETS = [  # (id, method, path, body with the name as N, the name's kind, its JSON field)
    ("catalog create", "POST", "/catalogs", {"name": "N"}, "catalog", "name"),
    ("schema create", "POST", "/schemas", {"name": "N", "catalog_name": "main"}, "schema", "name"),
    ("schema create catalog_name", "POST", "/schemas", {"name": "x", "catalog_name": "N"}, "catalog", "catalog_name"),
    ("table create", "POST", "/tables", managed(name="N"), "table", "name"),
    ("table create schema_name", "POST", "/tables", managed(schema_name="N"), "schema", "schema_name"),
    ("table create catalog_name", "POST", "/tables", managed(catalog_name="N"), "catalog", "catalog_name"),
    ("staging create", "POST", "/staging-tables", {"name": "N", "catalog_name": "main", "schema_name": "s"},
     "staging_table", "name"),
    ("catalog rename", "PATCH", "/catalogs/empty", {"new_name": "N"}, "catalog", "new_name"),
    ("schema rename", "PATCH", "/schemas/main.empty_schema", {"new_name": "N"}, "schema", "new_name"),
    ("table rename", "PATCH", "/tables/main.s.m", {"new_name": "N"}, "table", "new_name"),
    ("table rename via name", "PATCH", "/tables/main.s.e", {"name": "N"}, "table", "name"),
    ("metastore create", "POST", "/metastores", {"name": "N", "storage_root": "s3://bucket/ms"}, "metastore", "name"),
    ("metastore rename", "PATCH", "/metastores/$MS", {"name": "N"}, "metastore", "name"),
    ("summaries catalog_name", "POST", "/table-summaries", {"catalog_name": "N"}, "catalog", None),
]
PATH_TARGETS = [  # names that travel in the URL path (percent-encoded)
    ("catalog get", "GET", "/catalogs/N", "catalog"),
    ("catalog delete", "DELETE", "/catalogs/N", "catalog"),
    ("schema get", "GET", "/schemas/main.N", "schema"),
    ("schema patch", "PATCH", "/schemas/N.s", "schema"),
    ("table get", "GET", "/tables/main.s.N", "table"),
    ("table delete", "DELETE", "/tables/N.s.m", "table"),
    ("tables list", "GET", "/tables?catalog_name=main&schema_name=N", "schema"),
]


def _with_name(body, name):
    return {k: (name if v == "N" else v) for k, v in body.items()}


def _name_cases():
    for target, method, path, body, kind, field in NAME_TARGETS:
        for bad, name, fragment in BAD_NAMES:
            if name == 5:   # a typed field names itself; a bare lookup says what kind of name it wanted
                says = (f"'{field}'", "string") if field else (f"{kind} name", "string")
            else:
                says = (f"{kind} name", fragment)
            yield case(f"{target} {bad}", method, path, INVALID, *says, json=_with_name(body, name))
    for target, method, path, kind in PATH_TARGETS:
        for bad, name, fragment in BAD_NAMES:
            if name == 5 or name == "":
                continue
            quoted = urllib.parse.quote(name, safe="")
            if "?" in path:
                yield case(f"{target} {bad}", method, path.split("?")[0], INVALID, f"{kind} name", fragment,
                           params={"catalog_name": "main", "schema_name": name})
            else:
                yield case(f"{target} {bad}", method, path.replace("N", quoted), INVALID, fragment)


@pytest.mark.parametrize("method, path, code, says, req", list(_name_cases()))
async def test_bad_name(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


WRONG_SHAPE = [
    case("catalog with dots", "GET", "/catalogs/main.s", INVALID, "'main.s'", "form name"),
    case("schema one part", "GET", "/schemas/main", INVALID, "'main'", "catalog.schema"),
    case("schema three parts", "DELETE", "/schemas/main.s.m", INVALID, "'main.s.m'", "catalog.schema"),
    case("table two parts", "GET", "/tables/main.s", INVALID, "'main.s'", "catalog.schema.name"),
    case("table four parts", "PATCH", "/tables/main.s.m.x", INVALID, "'main.s.m.x'", "catalog.schema.name",
         json={"comment": "x"}),
    case("table empty part", "DELETE", "/tables/main..m", INVALID, "table name", "non-empty"),
]


@pytest.mark.parametrize("method, path, code, says, req", WRONG_SHAPE)
async def test_bad_full_name(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- required fields and parameters -----------------------------------------------------------

MISSING = [
    case("catalog name", "POST", "/catalogs", INVALID, "'name'", json={"comment": "x"}),
    case("catalog name null", "POST", "/catalogs", INVALID, "'name'", json={"name": None}),
    case("schema name", "POST", "/schemas", INVALID, "'name'", json={"catalog_name": "main"}),
    case("schema catalog_name", "POST", "/schemas", INVALID, "'catalog_name'", json={"name": "x"}),
    case("schema empty body", "POST", "/schemas", INVALID, "'name'", data=b""),
    case("table name", "POST", "/tables", INVALID, "'name'", json=MANAGED),
    *[case(f"table {f}", "POST", "/tables", INVALID, f"'{f}'", json={k: v for k, v in managed().items() if k != f})
      for f in ("catalog_name", "schema_name", "table_type")],
    case("MANAGED columns", "POST", "/tables", INVALID, "'columns'", "MANAGED",
         json={k: v for k, v in managed().items() if k != "columns"}),
    case("MANAGED data_source_format", "POST", "/tables", INVALID, "'data_source_format'",
         json={k: v for k, v in managed().items() if k != "data_source_format"}),
    case("EXTERNAL storage_location", "POST", "/tables", INVALID, "'storage_location'", "EXTERNAL",
         json={"name": "x", **EXTERNAL}),
    case("EXTERNAL storage_location empty", "POST", "/tables", INVALID, "'storage_location'", "EXTERNAL",
         json=external("")),
    case("VIEW view_definition", "POST", "/tables", INVALID, "view_definition", "VIEW",
         json={"name": "v2", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW", "columns": COLS}),
    case("VIEW view_definition empty", "POST", "/tables", INVALID, "view_definition",
         json={"name": "v2", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW",
               "view_definition": ""}),
    case("MATERIALIZED_VIEW view_definition", "POST", "/tables", INVALID, "view_definition", "MATERIALIZED_VIEW",
         json={"name": "v2", "catalog_name": "main", "schema_name": "s", "table_type": "MATERIALIZED_VIEW"}),
    case("staging name", "POST", "/staging-tables", INVALID, "'name'", json={"catalog_name": "main", "schema_name": "s"}),
    case("staging schema_name", "POST", "/staging-tables", INVALID, "'schema_name'",
         json={"name": "x", "catalog_name": "main"}),
    case("summaries catalog_name", "POST", "/table-summaries", INVALID, "'catalog_name'", json={}),
    case("metastore name", "POST", "/metastores", INVALID, "'name'", json={"storage_root": "s3://b/x"}),
    case("metastore storage_root", "POST", "/metastores", INVALID, "'storage_root'", json={"name": "x"}),
    case("schemas list catalog_name", "GET", "/schemas", INVALID, "'catalog_name'"),
    case("schemas list catalog_name empty", "GET", "/schemas", INVALID, "'catalog_name'", params={"catalog_name": ""}),
    case("tables list schema_name", "GET", "/tables", INVALID, "'schema_name'", params={"catalog_name": "main"}),
    case("tables list catalog_name", "GET", "/tables", INVALID, "'catalog_name'", params={"schema_name": "s"}),
    case("assign metastore_id", "PUT", "/workspaces/$FREE_WS/metastore", INVALID, "'metastore_id'",
         json={"default_catalog_name": "main"}),
    case("unassign metastore_id", "DELETE", "/workspaces/$WS/metastore", INVALID, "'metastore_id'"),
]


@pytest.mark.parametrize("method, path, code, says, req", MISSING)
async def test_missing_required(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- storage locations: invalid URLs, overlaps, managed and view rules --------------------------

BAD_URLS = [  # (id, url, fragment of the reason)
    ("relative path", "relative/path", "relative"),
    ("s3 without bucket", "s3://", "missing bucket"),
    ("s3 empty bucket", "s3:///key", "missing bucket"),
    (".. above root", "/data/../../etc", "'..'"),
    (".. above bucket", "s3://bucket/../x", "'..'"),
    ("query string", "s3://bucket/t?versionId=1", "query"),
    ("fragment", "s3://bucket/t#x", "fragment"),
    ("unknown scheme", "ftp://host/t", "unsupported scheme"),
    ("bad bucket", "s3://Bad_Bucket!/t", "bucket"),
    ("remote file host", "file://otherhost/t", "host"),
    ("abfss without account", "abfss://container/t", "container@account"),
    ("bad percent escape", "s3://bucket/a%zz", "percent-escape"),
    ("control char", "s3://bucket/a\tb", "control"),
]
URL_TARGETS = [  # (id, method, path, body with the URL as U, field named in the message)
    ("EXTERNAL table", "POST", "/tables", external("U"), "storage_location"),
    ("table update", "PATCH", "/tables/main.s.e", {"storage_location": "U"}, "storage_location"),
    ("catalog", "POST", "/catalogs", {"name": "x", "storage_root": "U"}, "storage_root"),
    ("schema", "POST", "/schemas", {"name": "x", "catalog_name": "main", "storage_root": "U"}, "storage_root"),
    ("metastore", "POST", "/metastores", {"name": "x", "storage_root": "U"}, "storage_root"),
]


@pytest.mark.parametrize("method, path, code, says, req", [
    case(f"{target} {bad}", method, path, INVALID, f"Invalid {field}", reason,
         json={k: (url if v == "U" else v) for k, v in body.items()})
    for target, method, path, body, field in URL_TARGETS for bad, url, reason in BAD_URLS
])
async def test_bad_storage_url(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


OVERLAPS = [  # each message must name the asset whose storage it overlaps
    case("same location as a table", "POST", "/tables", INVALID, "overlaps", "table 'main.s.e'",
         json=external("s3://bucket/ext/e")),
    case("same location, other spelling", "POST", "/tables", INVALID, "overlaps", "table 'main.s.e'",
         json=external("S3A://BUCKET/ext//e/./")),
    case("inside a table", "POST", "/tables", INVALID, "overlaps", "table 'main.s.e'",
         json=external("s3://bucket/ext/e/part=1")),
    case("around a table", "POST", "/tables", INVALID, "overlaps", "table 'main.s.e'", json=external("s3://bucket/ext")),
    case("around everything", "POST", "/tables", INVALID, "overlaps", "s3://bucket", json=external("s3://bucket")),
    case("inside the metastore root", "POST", "/tables", INVALID, "overlaps", "metastore", "$ROOT",
         json=external("$ROOT/mine")),
    case("inside a managed table", "POST", "/tables", INVALID, "overlaps", "table 'main.s.m'",
         json=external("$MLOC/data")),
    case("inside a staging table", "POST", "/tables", INVALID, "overlaps", "$STAGING", json=external("$STAGING")),
    case("around a catalog's managed storage", "POST", "/tables", INVALID, "overlaps", "catalog 'rooted'",
         json=external("s3://bucket/roots")),
    case("catalog root inside a table", "POST", "/catalogs", INVALID, "overlaps", "table 'main.s.e'",
         json={"name": "x", "storage_root": "s3://bucket/ext/e"}),
    case("schema root inside a table", "POST", "/schemas", INVALID, "overlaps", "table 'main.s.e2'",
         json={"name": "x", "catalog_name": "main", "storage_root": "s3://bucket/ext2/sub"}),
    case("table moved onto another", "PATCH", "/tables/main.s.e2", INVALID, "overlaps", "table 'main.s.e'",
         json={"storage_location": "s3://bucket/ext/e/x"}),
    case("table moved into the metastore root", "PATCH", "/tables/main.s.e2", INVALID, "overlaps", "metastore",
         json={"storage_location": "$ROOT/moved"}),
]
TABLE_RULES = [
    case("MANAGED at an arbitrary location", "POST", "/tables", INVALID, "storage_location", "MANAGED", "'main.s.new_t'",
         json=managed(storage_location="s3://bucket/elsewhere")),
    case("MANAGED at another name's staging location", "POST", "/tables", INVALID, "storage_location",
         "'main.s.new_t'", json=managed(storage_location="$STAGING")),
    case("MANAGED below its staging location", "POST", "/tables", INVALID, "storage_location", "'main.s.stg'",
         json=managed(name="stg", storage_location="$STAGING/sub")),
    case("MANAGED at an invalid URL", "POST", "/tables", INVALID, "Invalid storage_location",
         json=managed(name="stg", storage_location="stg")),
    case("MANAGED location change", "PATCH", "/tables/main.s.m", INVALID, "storage_location", "MANAGED",
         json={"storage_location": "s3://bucket/moved"}),
    case("VIEW with storage_location", "POST", "/tables", INVALID, "storage_location", "VIEW",
         json={"name": "v2", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW",
               "view_definition": "SELECT 1", "storage_location": "s3://bucket/v2"}),
    case("view_definition on a table", "PATCH", "/tables/main.s.m", INVALID, "view_definition",
         json={"view_definition": "SELECT 2"}),
    case("storage_root change on a catalog", "PATCH", "/catalogs/rooted", INVALID, "'storage_root'",
         json={"storage_root": "s3://bucket/new-root"}),
    case("storage_root change on a schema", "PATCH", "/schemas/main.s", INVALID, "'storage_root'",
         json={"storage_root": "s3://bucket/new-root"}),
    case("storage_root change on a metastore", "PATCH", "/metastores/$MS", INVALID, "'storage_root'",
         json={"storage_root": "s3://bucket/new-root"}),
]


@pytest.mark.parametrize("method, path, code, says, req", OVERLAPS + TABLE_RULES)
async def test_storage_rules(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- duplicates, missing objects and parents, non-empty containers ------------------------------

DUPLICATES = [
    case("catalog", "POST", "/catalogs", EXISTS, "'main'", json={"name": "main"}),
    case("catalog, other case", "POST", "/catalogs", EXISTS, "'main'", json={"name": "MAIN"}),
    case("schema, other case", "POST", "/schemas", EXISTS, "'main.s'", json={"name": "S", "catalog_name": "Main"}),
    case("table", "POST", "/tables", EXISTS, "'main.s.m'", json=managed(name="m")),
    case("table, other case", "POST", "/tables", EXISTS, "'main.s.e'", json=external("s3://bucket/e-new", name="E")),
    case("view named like a table", "POST", "/tables", EXISTS, "'main.s.m'",
         json={"name": "M", "catalog_name": "main", "schema_name": "s", "table_type": "VIEW",
               "view_definition": "SELECT 1"}),
    case("table named like a view", "POST", "/tables", EXISTS, "'main.s.v'", json=managed(name="v")),
    case("staging table", "POST", "/staging-tables", EXISTS, "'main.s.stg'",
         json={"name": "Stg", "catalog_name": "main", "schema_name": "s"}),
    case("staging table named like a table", "POST", "/staging-tables", EXISTS, "'main.s.m'",
         json={"name": "M", "catalog_name": "main", "schema_name": "s"}),
    case("catalog rename", "PATCH", "/catalogs/empty", EXISTS, "'main'", json={"new_name": "Main"}),
    case("catalog rename via name", "PATCH", "/catalogs/empty", EXISTS, "'rooted'", json={"name": "ROOTED"}),
    case("schema rename", "PATCH", "/schemas/main.empty_schema", EXISTS, "'main.s'", json={"new_name": "S"}),
    case("table rename", "PATCH", "/tables/main.s.e", EXISTS, "'main.s.m'", json={"new_name": "M"}),
    case("table rename onto a view", "PATCH", "/tables/main.s.m", EXISTS, "'main.s.v'", json={"new_name": "v"}),
    case("metastore", "POST", "/metastores", EXISTS, "'$OTHER_MS_NAME'",
         json={"name": "$OTHER_MS_NAME", "storage_root": "s3://bucket/ms"}),
    case("metastore, other case", "POST", "/metastores", EXISTS, "'$OTHER_MS_NAME'",
         json={"name": "$OTHER_MS_UPPER", "storage_root": "s3://bucket/ms"}),
    case("metastore rename", "PATCH", "/metastores/$MS", EXISTS, "'$OTHER_MS_NAME'", json={"name": "$OTHER_MS_NAME"}),
]
MISSING_OBJECTS = [
    case("schema in missing catalog", "POST", "/schemas", NOT_FOUND, "Catalog 'nope'",
         json={"name": "x", "catalog_name": "nope"}),
    case("table in missing schema", "POST", "/tables", NOT_FOUND, "Schema 'main.nope'", json=managed(schema_name="nope")),
    case("table in missing catalog", "POST", "/tables", NOT_FOUND, "'nope.s'", json=managed(catalog_name="nope")),
    case("view in missing schema", "POST", "/tables", NOT_FOUND, "'main.nope'",
         json={"name": "v2", "catalog_name": "main", "schema_name": "nope", "table_type": "VIEW",
               "view_definition": "SELECT 1"}),
    case("staging table in missing schema", "POST", "/staging-tables", NOT_FOUND, "'main.nope'",
         json={"name": "x", "catalog_name": "main", "schema_name": "nope"}),
    case("schemas of missing catalog", "GET", "/schemas", NOT_FOUND, "'nope'", params={"catalog_name": "nope"}),
    case("tables of missing schema", "GET", "/tables", NOT_FOUND, "'main.nope'",
         params={"catalog_name": "main", "schema_name": "nope"}),
    case("summaries of missing catalog", "POST", "/table-summaries", NOT_FOUND, "'nope'", json={"catalog_name": "nope"}),
    *[case(f"{method} {path}", method, path, NOT_FOUND, f"'{name}'", **({"json": {"comment": "x"}} if method == "PATCH" else {}))
      for path, name in (("/catalogs/nope", "nope"), ("/schemas/main.nope", "main.nope"),
                         ("/schemas/nope.s", "nope.s"), ("/tables/main.s.nope", "main.s.nope"),
                         ("/tables/nope.s.m", "nope.s.m"))
      for method in ("GET", "PATCH", "DELETE")],
    case("staging table is not a table", "GET", "/tables/main.s.stg", NOT_FOUND, "'main.s.stg'"),
    case("delete a staging table as a table", "DELETE", "/tables/main.s.stg", NOT_FOUND, "'main.s.stg'"),
    case("metastore get", "GET", "/metastores/$NO_MS", NOT_FOUND, "'$NO_MS'"),
    case("metastore patch", "PATCH", "/metastores/$NO_MS", NOT_FOUND, "'$NO_MS'", json={"comment": "x"}),
    case("metastore delete", "DELETE", "/metastores/$NO_MS", NOT_FOUND, "'$NO_MS'", params={"force": "true"}),
    case("assign missing metastore", "PUT", "/workspaces/$FREE_WS/metastore", NOT_FOUND, "'$NO_MS'",
         json={"metastore_id": "$NO_MS"}),
    case("patch unassigned workspace", "PATCH", "/workspaces/$FREE_WS/metastore", NOT_FOUND, "$FREE_WS",
         json={"default_catalog_name": "main"}),
    case("repoint to missing metastore", "PATCH", "/workspaces/$WS/metastore", NOT_FOUND, "'$NO_MS'",
         json={"metastore_id": "$NO_MS"}),
    case("unassign other metastore", "DELETE", "/workspaces/$WS/metastore", NOT_FOUND, "$WS", "'$OTHER_MS'",
         params={"metastore_id": "$OTHER_MS"}),
    case("unassign unassigned workspace", "DELETE", "/workspaces/$FREE_WS/metastore", NOT_FOUND, "$FREE_WS",
         json={"metastore_id": "$MS"}),
]
NOT_EMPTY = [
    case("catalog", "DELETE", "/catalogs/main", PRECONDITION, "'main'", "not empty", "force"),
    case("catalog force=false", "DELETE", "/catalogs/main", PRECONDITION, "'main'", "not empty",
         params={"force": "false"}),
    case("schema", "DELETE", "/schemas/main.s", PRECONDITION, "'main.s'", "not empty", "'main.s."),
    case("metastore", "DELETE", "/metastores/$MS", PRECONDITION, "not empty", "force"),
]
BAD_IDS = [
    case("metastore id not a UUID", "GET", "/metastores/abc", INVALID, "'abc'", "UUID"),
    case("metastore id not a UUID, patch", "PATCH", "/metastores/abc", INVALID, "'abc'", "UUID", json={"comment": "x"}),
    case("metastore id not a UUID, delete", "DELETE", "/metastores/abc", INVALID, "'abc'", "UUID"),
    case("assign metastore id not a UUID", "PUT", "/workspaces/$FREE_WS/metastore", INVALID, "'abc'", "UUID",
         json={"metastore_id": "abc"}),
    case("unassign metastore id not a UUID", "DELETE", "/workspaces/$WS/metastore", INVALID, "'abc'", "UUID",
         params={"metastore_id": "abc"}),
    *[case(f"{method} workspace id {bad!r}", method, f"/workspaces/{bad}/metastore", INVALID, "workspace_id", shown,
           json={"metastore_id": "$MS"})
      for method in ("PUT", "PATCH", "DELETE")
      for bad, shown in (("abc", "'abc'"), ("-1", "-1"), ("1.5", "'1.5'"), ("9" * 20, "9" * 20))],
    case("force not a boolean", "DELETE", "/catalogs/empty", INVALID, "'force'", "'maybe'", params={"force": "maybe"}),
    case("force not a boolean, schema", "DELETE", "/schemas/main.empty_schema", INVALID, "'force'",
         params={"force": "yes please"}),
    case("force not a boolean, metastore", "DELETE", "/metastores/$OTHER_MS", INVALID, "'force'", params={"force": "2"}),
]


@pytest.mark.parametrize("method, path, code, says, req", DUPLICATES + MISSING_OBJECTS + NOT_EMPTY + BAD_IDS)
async def test_conflicts_and_missing(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- paging ------------------------------------------------------------------------------------

BAD_TOKENS = [
    ("garbage", "!!not-a-token!!"), ("base64 of text", base64.urlsafe_b64encode(b"hello").decode()),
    ("no 'after'", base64.urlsafe_b64encode(b'{"before": "a"}').decode()), ("'after' a number", token_of(5)),
    ("'after' null", token_of(None)), ("a JSON list", base64.urlsafe_b64encode(b'["a"]').decode()),
    ("'after' with NUL", token_of("a\0")), ("'after' a surrogate", token_of("\ud800")), ("non-ASCII", "été"),
]
BAD_MAX_RESULTS = [("negative", "-1"), ("not a number", "ten"), ("fraction", "1.5"), ("exponent", "1e3")]
LISTS = [  # (id, method, path, the list's required parameters)
    ("catalogs", "GET", "/catalogs", {}),
    ("schemas", "GET", "/schemas", {"catalog_name": "main"}),
    ("tables", "GET", "/tables", {"catalog_name": "main", "schema_name": "s"}),
    ("summaries", "POST", "/table-summaries", {"catalog_name": "main"}),
]


def _paging_cases():
    for target, method, path, required in LISTS:
        where = "json" if method == "POST" else "params"
        for bad, token in BAD_TOKENS:
            yield case(f"{target} page_token {bad}", method, path, INVALID, "page_token",
                       **{where: {**required, "page_token": token}})
        for bad, value in BAD_MAX_RESULTS:
            yield case(f"{target} max_results {bad}", method, path, INVALID, "max_results", value,
                       **{where: {**required, "max_results": value}})
    for bad, value, shown in (("negative", -5, "-5"), ("float", 2.5, "2.5"), ("bool", True, "True"),
                              ("list", [1], "[1]")):
        yield case(f"summaries max_results JSON {bad}", "POST", "/table-summaries", INVALID, "max_results", shown,
                   json={"catalog_name": "main", "max_results": value})


@pytest.mark.parametrize("method, path, code, says, req", list(_paging_cases()))
async def test_bad_paging(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- unknown endpoints and methods --------------------------------------------------------------

ROUTING = [
    case("unknown resource", "GET", "/catalogz", "ENDPOINT_NOT_FOUND", "GET", "/catalogz"),
    case("unknown sub-path", "GET", "/catalogs/main/schemas", "ENDPOINT_NOT_FOUND", "/catalogs/main/schemas"),
    case("table with a trailing segment", "DELETE", "/tables/main.s.m/x", "ENDPOINT_NOT_FOUND", "DELETE",
         "/tables/main.s.m/x"),
    case("empty catalog name", "GET", "/catalogs/", "ENDPOINT_NOT_FOUND", "/catalogs/"),
    case("other API version", "POST", "/api/2.0/unity-catalog/catalogs", "ENDPOINT_NOT_FOUND",
         "/api/2.0/unity-catalog/catalogs", json={"name": "x"}, raw_path=True),
    case("outside the API", "GET", "/admin", "ENDPOINT_NOT_FOUND", "/admin", raw_path=True),
    *[case(f"{method} {path}", method, path, "METHOD_NOT_ALLOWED", method, path, allowed,
           **({"json": body} if body is not None else {}))
      for method, path, allowed, body in (
          ("PUT", "/catalogs", "POST", {"name": "x"}),
          ("DELETE", "/catalogs", "GET", None),
          ("POST", "/catalogs/main", "PATCH", {"name": "x"}),
          ("PUT", "/schemas/main.s", "DELETE", {"comment": "x"}),
          ("PUT", "/tables/main.s.m", "PATCH", {"comment": "x"}),
          ("POST", "/tables/main.s.m", "GET", {"comment": "x"}),
          ("GET", "/staging-tables", "POST", None),
          ("GET", "/table-summaries", "POST", None),
          ("POST", "/metastore_summary", "GET", {}),
          ("PUT", "/metastores/$MS", "PATCH", {"name": "x"}),
          ("DELETE", "/metastores", "POST", None),
          ("GET", "/workspaces/$WS/metastore", "PUT", None),
          ("POST", "/workspaces/$WS/metastore", "PATCH", {"metastore_id": "$MS"}),
          ("OPTIONS", "/catalogs", "GET", None),
      )],
]


@pytest.mark.parametrize("method, path, code, says, req", ROUTING)
async def test_unknown_endpoint_or_method(shared, server, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, req)


# ---- authentication and permissions --------------------------------------------------------------

# Every endpoint, each with a request that would succeed with the right token.
ENDPOINTS = [
    ("GET", "/metastores", {}),
    ("POST", "/metastores", {"json": {"name": "brand-new", "storage_root": "s3://bucket/brand-new"}}),
    ("GET", "/metastores/$MS", {}),
    ("PATCH", "/metastores/$MS", {"json": {"comment": "changed"}}),
    ("DELETE", "/metastores/$OTHER_MS", {"params": {"force": "true"}}),
    ("GET", "/metastore_summary", {}),
    ("PUT", "/workspaces/$FREE_WS/metastore", {"json": {"metastore_id": "$MS"}}),
    ("PATCH", "/workspaces/$WS/metastore", {"json": {"default_catalog_name": "main"}}),
    ("DELETE", "/workspaces/$WS/metastore", {"params": {"metastore_id": "$MS"}}),
    ("GET", "/catalogs", {}),
    ("POST", "/catalogs", {"json": {"name": "new_catalog"}}),
    ("GET", "/catalogs/main", {}),
    ("PATCH", "/catalogs/main", {"json": {"comment": "changed"}}),
    ("DELETE", "/catalogs/empty", {}),
    ("GET", "/schemas", {"params": {"catalog_name": "main"}}),
    ("POST", "/schemas", {"json": {"name": "new_schema", "catalog_name": "main"}}),
    ("GET", "/schemas/main.s", {}),
    ("PATCH", "/schemas/main.s", {"json": {"comment": "changed"}}),
    ("DELETE", "/schemas/main.empty_schema", {}),
    ("GET", "/tables", {"params": {"catalog_name": "main", "schema_name": "s"}}),
    ("POST", "/tables", {"json": managed()}),
    ("GET", "/tables/main.s.m", {}),
    ("PATCH", "/tables/main.s.m", {"json": {"comment": "changed"}}),
    ("DELETE", "/tables/main.s.v", {}),
    ("POST", "/staging-tables", {"json": {"name": "new_stg", "catalog_name": "main", "schema_name": "s"}}),
    ("POST", "/table-summaries", {"json": {"catalog_name": "main"}}),
]
BAD_AUTH = [  # (id, Authorization header or None, fragment of the message)
    ("no header", None, "Authorization"),
    ("empty header", "", "Authorization"),
    ("Basic scheme", "Basic YWRtaW46YWRtaW4=", "Bearer"),
    ("Bearer without token", "Bearer", "Bearer"),
    ("Bearer and spaces", "Bearer    ", "Bearer"),
    ("token without scheme", "$RAW_TOKEN", "Bearer"),
    ("unknown token", "Bearer scat_not-a-real-token", "token"),
    ("token with extra words", "Bearer $RAW_TOKEN extra", "token"),
    ("expired token", "Bearer $EXPIRED", "token"),
    ("revoked token", "Bearer $REVOKED", "token"),
]


@pytest.fixture(scope="module")
async def bad_tokens(shared, server) -> dict:
    """The shared workspace's token without its scheme, and an expired and a revoked admin token."""
    ws, store = shared[0], server.store
    admin = await store.create_principal("admin", is_account_admin=True)
    expired = new_token()
    await store.add_token(admin.id, hash_token(expired), ws.workspace_id, expires_at=now_ms() - 1000)
    revoked = new_token()
    token_id = await store.add_token(admin.id, hash_token(revoked), ws.workspace_id)
    await store.pool.execute("UPDATE tokens SET revoked_at = $2 WHERE id = $1", token_id, now_ms())
    return {"$RAW_TOKEN": ws.token, "$EXPIRED": expired, "$REVOKED": revoked}


@pytest.mark.parametrize("auth, says", [pytest.param(a, s, id=i) for i, a, s in BAD_AUTH])
@pytest.mark.parametrize("method, path, req", [pytest.param(m, p, r, id=f"{m} {p}") for m, p, r in ENDPOINTS])
async def test_bad_authorization(shared, server, bad_tokens, method, path, req, auth, says):
    await expect_error(*shared, server, method, path, "UNAUTHENTICATED", (says,), {**req, "auth": auth},
                       tokens=bad_tokens)


@pytest.fixture(scope="module")
async def user_token(shared, server) -> str:
    """A token of a principal who is not an account admin, in the shared workspace."""
    ws = shared[0]
    user = await server.store.create_principal(f"user-{uuid.uuid4().hex[:8]}")
    token = new_token()
    await server.store.add_token(user.id, hash_token(token), ws.workspace_id)
    return token


@pytest.mark.parametrize("method, path, code, says, req", [
    case("create metastore", "POST", "/metastores", "PERMISSION_DENIED", "account admin",
         json={"name": "mine", "storage_root": "s3://bucket/mine"}),
    case("update metastore", "PATCH", "/metastores/$MS", "PERMISSION_DENIED", "account admin", json={"comment": "x"}),
    case("delete metastore", "DELETE", "/metastores/$OTHER_MS", "PERMISSION_DENIED", "account admin"),
    case("read another metastore", "GET", "/metastores/$OTHER_MS", "NOT_FOUND", "'$OTHER_MS' does not exist"),
    case("assign workspace", "PUT", "/workspaces/$FREE_WS/metastore", "PERMISSION_DENIED", "account admin",
         json={"metastore_id": "$MS"}),
    case("unassign workspace", "DELETE", "/workspaces/$WS/metastore", "PERMISSION_DENIED", "account admin",
         params={"metastore_id": "$MS"}),
])
async def test_not_an_account_admin(shared, server, user_token, method, path, code, says, req):
    await expect_error(*shared, server, method, path, code, says, {**req, "auth": f"Bearer {user_token}"})


# ---- deletes: force cascades and leaves nothing behind ------------------------------------------

async def _rows(server, ws) -> list[dict]:
    return [dict(r) for r in await server.store.pool.fetch(
        "SELECT id, parent_id, type, full_name, storage_path FROM assets WHERE metastore_id = $1",
        uuid.UUID(ws.metastore_id))]


async def _orphans(server, ws) -> list[str]:
    rows = await server.store.pool.fetch(
        """SELECT a.full_name FROM assets a WHERE a.metastore_id = $1 AND a.parent_id <> a.metastore_id
           AND NOT EXISTS (SELECT 1 FROM assets p WHERE p.id = a.parent_id)""", uuid.UUID(ws.metastore_id))
    return [r["full_name"] for r in rows]


@pytest.mark.parametrize("path, gone, kept", [
    # Each catalog has its default schema (docs/api.md, conventions).
    pytest.param("/catalogs/main", "main", {"rooted", "rooted.default", "empty", "empty.default"}, id="catalog"),
    pytest.param("/schemas/main.s", "main.s", {"main", "main.default", "main.empty_schema", "rooted", "rooted.default",
                                               "empty", "empty.default"}, id="schema"),
])
async def test_force_delete_cascades(ws, server, world, path, gone, kept):
    rows = await _rows(server, ws)
    doomed = {r["id"] for r in rows if r["full_name"] == gone or r["full_name"].startswith(gone + ".")}
    assert len(doomed) >= (6 if "." in gone else 8)   # the schema, its 4 tables and staging table (+ catalog, schema)
    version = await server.store.metastore_version(ws.metastore_id)

    assert await ok(ws, "DELETE", path, params={"force": "true"}) == {}

    assert await server.store.metastore_version(ws.metastore_id) == version + 1   # one write, one version
    after = await _rows(server, ws)
    assert not doomed & {r["id"] for r in after}, "rows under the deleted container remain"
    assert {r["full_name"] for r in after} == kept
    assert await _orphans(server, ws) == []
    for name in ("main.s.m", "main.s.e", "main.s.v"):
        assert (await ws.call("GET", f"/tables/{name}"))[0] == 404
    # The deleted tables' storage is free again: the path index forgot them too.
    await ok(ws, "POST", "/schemas", json={"name": "again", "catalog_name": "rooted"})
    for i, location in enumerate(("s3://bucket/ext/e", "s3://bucket/ext2")):
        await ok(ws, "POST", "/tables", json=external(location, name=f"t{i}", catalog_name="rooted", schema_name="again"))


async def test_delete_schema_with_only_a_staging_table(ws, server, world):
    """A staging table does not keep its schema from being deleted, and goes with it."""
    await ok(ws, "POST", "/schemas", json={"name": "reserved", "catalog_name": "main"})
    staging = await ok(ws, "POST", "/staging-tables", json={"name": "t", "catalog_name": "main", "schema_name": "reserved"})
    assert await ok(ws, "DELETE", "/schemas/main.reserved") == {}
    names = {r["full_name"] for r in await _rows(server, ws)}
    assert "main.reserved" not in names and "main.reserved.t" not in names
    assert await _orphans(server, ws) == []
    assert not await server.store.pool.fetchval(
        "SELECT count(*) FROM assets WHERE storage_path = $1", staging["staging_location"])


async def test_force_delete_of_another_metastore(ws, server, world):
    """The NOT_EMPTY table covers delete without force; with force the metastore goes, others stay."""
    other = world["$OTHER_MS"]
    async with server.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM metastores WHERE id = $1", uuid.UUID(other)) == 1
    assert await ok(ws, "DELETE", f"/metastores/{other}", params={"force": "true"}) == {}
    assert (await ws.call("GET", f"/metastores/{other}"))[0] == 404
    # The workspace's own metastore was untouched.
    assert len(await _rows(server, ws)) == 13        # with its three catalogs' default schemas


# ---- numbers in headers and query parameters ----------------------------------------------------

@pytest.mark.parametrize("value", ["-1", "x", "\u00b2", "9" * 30])
async def test_bad_min_version_header(ws, value):
    """Not a metastore version (a superscript digit is a digit to str.isdigit, not to int; 30 digits
    are past a bigint): a 400 naming the header, never a 500."""
    status, body = await ws.call("GET", "/catalogs", headers={"X-Shardcat-Min-Version": value})
    assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE" and "Min-Version" in body["message"]
