"""Bad input and conflicts at the volume, function, model, model-version, alias and
model-version-credential endpoints: each gets a 4xx with Unity Catalog error JSON, the
right error code, a message naming what is wrong, and changes nothing (the metastore
version and every asset row are the same before and after).

Cases are tables: (id, method, path, expected code, message fragments, request options).
`$ROOT` stands for the metastore's storage root and `$EXT` for the external volume's location.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from shardcat.entities.urls import join_url, normalize_url
from tests.conftest import new_workspace

INVALID, PRECONDITION, NOT_FOUND, EXISTS = "INVALID_PARAMETER_VALUE", "FAILED_PRECONDITION", "NOT_FOUND", "ALREADY_EXISTS"
MALFORMED = "MALFORMED_REQUEST"
STATUS = {INVALID: 400, PRECONDITION: 400, MALFORMED: 400, NOT_FOUND: 404, EXISTS: 409}


def case(id: str, method: str, path: str, code: str, *says: str, **request):
    return pytest.param(method, path, code, says, request, id=id)


def page_token(after) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode()


async def ok(ws, method, path, **kw) -> dict:
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


def param(name: str, position: int, type_name: str = "INT") -> dict:
    return {"name": name, "type_text": type_name.lower(), "type_name": type_name, "position": position,
            "type_json": json.dumps({"name": name, "type": type_name.lower(), "nullable": True, "metadata": {}})}


def function(**fields) -> dict:
    info = {
        "name": "f2", "catalog_name": "main", "schema_name": "s",
        "input_params": {"parameters": [param("x", 0)]}, "data_type": "INT", "full_data_type": "INT",
        "routine_body": "SQL", "routine_definition": "x * 2", "parameter_style": "S", "is_deterministic": True,
        "sql_data_access": "CONTAINS_SQL", "is_null_call": False, "security_type": "DEFINER", "specific_name": "f2",
    }
    info.update(fields)
    return {"function_info": {k: v for k, v in info.items() if v is not None}}


def python_function(**fields) -> dict:
    return function(**{"routine_body": "EXTERNAL", "external_language": "PYTHON", "sql_data_access": "NO_SQL",
                       **fields})


VOLUME = {"catalog_name": "main", "schema_name": "s", "name": "v2", "volume_type": "MANAGED"}
VERSION = {"catalog_name": "main", "schema_name": "s", "model_name": "m", "source": "file:///src"}
CREDS = {"catalog_name": "main", "schema_name": "s", "model_name": "m", "version": 2,
         "operation": "READ_WRITE_MODEL_VERSION"}


async def build_world(ws, tmp_path) -> dict:
    """main.s: volumes vol (MANAGED) and ext (EXTERNAL at $EXT), function fn, table t, model m with
    version 1 READY (alias champion) and version 2 pending; main.empty: an empty schema."""
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    for schema in ("s", "empty"):
        await ok(ws, "POST", "/schemas", json={"name": schema, "catalog_name": "main"})
    ext = normalize_url(str(tmp_path / "ext-volume"))
    await ok(ws, "POST", "/volumes", json={**VOLUME, "name": "vol"})
    await ok(ws, "POST", "/volumes", json={**VOLUME, "name": "ext", "volume_type": "EXTERNAL", "storage_location": ext})
    await ok(ws, "POST", "/functions", json=function(name="fn"))
    await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": "main", "schema_name": "s",
                                          "table_type": "MANAGED", "data_source_format": "DELTA",
                                          "columns": [{"name": "id", "type_name": "LONG"}]})
    await ok(ws, "POST", "/models", json={"name": "m", "catalog_name": "main", "schema_name": "s"})
    for _ in range(2):
        await ok(ws, "POST", "/models/versions", json=VERSION)
    await ok(ws, "PATCH", "/models/main.s.m/versions/1/finalize", json={"full_name": "main.s.m", "version": 1})
    await ok(ws, "PUT", "/models/main.s.m/aliases/champion", json={"version_num": 1})
    return {"$ROOT": ws.storage_root, "$EXT": ext}


@pytest.fixture(scope="module")
async def shared(server, http, tmp_path_factory):
    """One world for all the refused requests: each checks it left it as it was."""
    tmp = tmp_path_factory.mktemp("bad-assets")
    ws = await new_workspace(server, http, tmp)
    return ws, await build_world(ws, tmp)


async def snapshot(ws, server) -> dict:
    store = server.store
    rows = await store.pool.fetch("SELECT * FROM assets WHERE metastore_id = $1 ORDER BY id", uuid.UUID(ws.metastore_id))
    return {"version": await store.metastore_version(ws.metastore_id), "assets": [dict(r) for r in rows]}


def fill(value, subs: dict):
    if isinstance(value, str):
        for key, sub in subs.items():
            value = value.replace(key, sub)
        return value
    if isinstance(value, dict):
        return {k: fill(v, subs) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, subs) for v in value]
    return value


async def expect_error(shared, server, method, path, code, says, req):
    ws, world = shared
    before = await snapshot(ws, server)
    status, body = await ws.call(method, fill(path, world), **{k: fill(v, world) for k, v in req.items()})
    assert isinstance(body, dict) and {"error_code", "message"} <= set(body), (status, body)
    assert (status, body["error_code"]) == (STATUS[code], code), body
    for fragment in says:
        assert fill(fragment, world) in body["message"], body
    assert await snapshot(ws, server) == before, "a refused request changed state"


# ---- volumes ----------------------------------------------------------------------

VOLUME_CASES = [
    *(case(f"create without {f}", "POST", "/volumes", INVALID, f"Missing required field '{f}'",
           json={k: v for k, v in VOLUME.items() if k != f}) for f in VOLUME),
    case("unknown volume_type", "POST", "/volumes", INVALID, "Unknown volume_type 'BOGUS'",
         json={**VOLUME, "volume_type": "BOGUS"}),
    case("volume_type not a string", "POST", "/volumes", INVALID, "'volume_type' must be a string",
         json={**VOLUME, "volume_type": 1}),
    case("name with a period", "POST", "/volumes", INVALID, "invalid character", json={**VOLUME, "name": "a.b"}),
    case("name not a string", "POST", "/volumes", INVALID, "'name' must be a string", json={**VOLUME, "name": 5}),
    case("managed with a location", "POST", "/volumes", INVALID, "leave storage_location out",
         json={**VOLUME, "storage_location": "$EXT/other"}),
    case("external without a location", "POST", "/volumes", INVALID, "Missing required field 'storage_location'",
         json={**VOLUME, "volume_type": "EXTERNAL"}),
    case("external bad url", "POST", "/volumes", INVALID, "Invalid storage_location", "unsupported scheme",
         json={**VOLUME, "volume_type": "EXTERNAL", "storage_location": "ftp://host/dir"}),
    case("external inside another volume", "POST", "/volumes", INVALID, "overlaps", "volume 'main.s.ext'",
         json={**VOLUME, "volume_type": "EXTERNAL", "storage_location": "$EXT/sub"}),
    case("external around another volume", "POST", "/volumes", INVALID, "overlaps",
         json={**VOLUME, "volume_type": "EXTERNAL", "storage_location": "$EXT/.."}),
    case("external inside managed storage", "POST", "/volumes", INVALID, "overlaps",
         json={**VOLUME, "volume_type": "EXTERNAL", "storage_location": "$ROOT/somewhere"}),
    case("duplicate", "POST", "/volumes", EXISTS, "'main.s.vol' already exists", json={**VOLUME, "name": "VOL"}),
    case("missing schema", "POST", "/volumes", NOT_FOUND, "Schema 'main.nope' does not exist",
         json={**VOLUME, "schema_name": "nope"}),
    case("missing catalog", "POST", "/volumes", NOT_FOUND, "'nope.s' does not exist",
         json={**VOLUME, "catalog_name": "nope"}),
    case("list without schema_name", "GET", "/volumes", INVALID, "'schema_name'", params={"catalog_name": "main"}),
    case("list in a missing schema", "GET", "/volumes", NOT_FOUND, "'main.nope'",
         params={"catalog_name": "main", "schema_name": "nope"}),
    case("get two-part name", "GET", "/volumes/main.s", INVALID, "catalog.schema.name"),
    case("get missing", "GET", "/volumes/main.s.nope", NOT_FOUND, "Volume 'main.s.nope' does not exist"),
    case("rename onto another", "PATCH", "/volumes/main.s.vol", EXISTS, "'main.s.ext' already exists",
         json={"new_name": "ext"}),
    case("rename to a bad name", "PATCH", "/volumes/main.s.vol", INVALID, "invalid character",
         json={"new_name": "a/b"}),
    case("change volume_type", "PATCH", "/volumes/main.s.vol", INVALID, "'volume_type' cannot be set",
         json={"volume_type": "EXTERNAL"}),
    case("change storage_location", "PATCH", "/volumes/main.s.ext", INVALID, "'storage_location' cannot be set",
         json={"storage_location": "$EXT/x"}),
    case("update missing", "PATCH", "/volumes/main.s.nope", NOT_FOUND, "does not exist", json={"comment": "x"}),
    case("delete missing", "DELETE", "/volumes/main.s.nope", NOT_FOUND, "does not exist"),
]


@pytest.mark.parametrize("method, path, code, says, req", VOLUME_CASES)
async def test_volume_refused(shared, server, method, path, code, says, req):
    await expect_error(shared, server, method, path, code, says, req)


# ---- functions --------------------------------------------------------------------

FUNCTION_CASES = [
    case("flat body", "POST", "/functions", INVALID, "function_info", json=function()["function_info"]),
    case("function_info not an object", "POST", "/functions", INVALID, "'function_info' must be an object",
         json={"function_info": "x"}),
    *(case(f"without {f}", "POST", "/functions", INVALID, f"Missing required field '{f}'",
           json=function(**{f: None}))
      for f in ("name", "catalog_name", "schema_name", "input_params", "data_type", "full_data_type",
                "routine_body", "routine_definition", "parameter_style", "is_deterministic", "sql_data_access",
                "is_null_call", "security_type", "specific_name")),
    case("is_deterministic not a bool", "POST", "/functions", INVALID, "'is_deterministic' must be a bool",
         json=function(is_deterministic="yes")),
    case("unknown routine_body", "POST", "/functions", INVALID, "Unknown routine_body 'PYTHON'",
         json=function(routine_body="PYTHON")),
    case("unknown data_type", "POST", "/functions", INVALID, "Unknown data_type 'INTEGER'",
         json=function(data_type="INTEGER")),
    case("unknown parameter_style", "POST", "/functions", INVALID, "Unknown parameter_style",
         json=function(parameter_style="X")),
    case("unknown sql_data_access", "POST", "/functions", INVALID, "Unknown sql_data_access",
         json=function(sql_data_access="ALL")),
    case("unknown security_type", "POST", "/functions", INVALID, "Unknown security_type",
         json=function(security_type="INVOKER")),
    case("empty definition", "POST", "/functions", INVALID, "routine_definition must not be empty",
         json=function(routine_definition="  ")),
    case("external without language", "POST", "/functions", INVALID, "external_language",
         json=python_function(external_language=None)),
    case("external reading SQL", "POST", "/functions", INVALID, "NO_SQL",
         json=python_function(sql_data_access="READS_SQL_DATA")),
    case("external returning a table", "POST", "/functions", INVALID, "cannot return a table",
         json=python_function(data_type="TABLE_TYPE", return_params={"parameters": [param("c", 0)]})),
    case("sql with a language", "POST", "/functions", INVALID, "only for EXTERNAL",
         json=function(external_language="PYTHON")),
    case("table result without columns", "POST", "/functions", INVALID, "return_params",
         json=function(data_type="TABLE_TYPE")),
    case("param without type_name", "POST", "/functions", INVALID, "input_params.parameters[0]", "'type_name'",
         json=function(input_params={"parameters": [{k: v for k, v in param("x", 0).items() if k != "type_name"}]})),
    case("param bad type_name", "POST", "/functions", INVALID, "Unknown input_params.parameters[0].type_name",
         json=function(input_params={"parameters": [param("x", 0, "WORD")]})),
    case("param position not an int", "POST", "/functions", INVALID, "position must be a int",
         json=function(input_params={"parameters": [{**param("x", 0), "position": "0"}]})),
    case("duplicate params", "POST", "/functions", INVALID, "'X' appears more than once",
         json=function(input_params={"parameters": [param("x", 0), param("X", 1)]})),
    case("param positions with a gap", "POST", "/functions", INVALID, "no gaps or repeats",
         json=function(input_params={"parameters": [param("x", 0), param("y", 2)]})),
    case("param type_json not JSON", "POST", "/functions", INVALID, "type_json is not valid JSON",
         json=function(input_params={"parameters": [{**param("x", 0), "type_json": "{"}]})),
    case("params not a list", "POST", "/functions", INVALID, "'input_params.parameters' must be a list",
         json=function(input_params={"parameters": {"x": 1}})),
    case("properties not JSON", "POST", "/functions", INVALID, "JSON-encoded map", json=function(properties="k=v")),
    case("properties not strings", "POST", "/functions", INVALID, "JSON-encoded map",
         json=function(properties='{"k": 1}')),
    case("properties as an object", "POST", "/functions", INVALID, "'properties' must be a string",
         json=function(properties={"k": "v"})),
    case("dependency with both kinds", "POST", "/functions", INVALID, "exactly one of 'table' or 'function'",
         json=function(routine_dependencies={"dependencies": [
             {"table": {"table_full_name": "main.s.t"}, "function": {"function_full_name": "main.s.fn"}}]})),
    case("dependency two-part name", "POST", "/functions", INVALID, "catalog.schema.name",
         json=function(routine_dependencies={"dependencies": [{"table": {"table_full_name": "main.t"}}]})),
    case("duplicate", "POST", "/functions", EXISTS, "'main.s.fn' already exists", json=function(name="fn")),
    case("missing schema", "POST", "/functions", NOT_FOUND, "'main.nope' does not exist",
         json=function(schema_name="nope")),
    case("list without catalog_name", "GET", "/functions", INVALID, "'catalog_name'", params={"schema_name": "s"}),
    case("get missing", "GET", "/functions/main.s.nope", NOT_FOUND, "Function 'main.s.nope' does not exist"),
    case("get bad name", "GET", "/functions/fn", INVALID, "catalog.schema.name"),
    case("delete missing", "DELETE", "/functions/main.s.nope", NOT_FOUND, "does not exist"),
]


@pytest.mark.parametrize("method, path, code, says, req", FUNCTION_CASES)
async def test_function_refused(shared, server, method, path, code, says, req):
    await expect_error(shared, server, method, path, code, says, req)


# ---- registered models, versions, aliases, credentials ---------------------------------

MODEL = {"name": "m2", "catalog_name": "main", "schema_name": "s"}
MODEL_CASES = [
    *(case(f"create without {f}", "POST", "/models", INVALID, f"Missing required field '{f}'",
           json={k: v for k, v in MODEL.items() if k != f}) for f in MODEL),
    case("create with a location", "POST", "/models", INVALID, "'storage_location' cannot be set",
         json={**MODEL, "storage_location": "$EXT/m"}),
    case("comment not a string", "POST", "/models", INVALID, "'comment' must be a string",
         json={**MODEL, "comment": ["x"]}),
    case("bad name", "POST", "/models", INVALID, "invalid character", json={**MODEL, "name": "my model"}),
    case("duplicate", "POST", "/models", EXISTS, "Registered model 'main.s.m' already exists",
         json={**MODEL, "name": "M"}),
    case("missing schema", "POST", "/models", NOT_FOUND, "'main.nope' does not exist",
         json={**MODEL, "schema_name": "nope"}),
    case("list schema without catalog", "GET", "/models", INVALID, "needs catalog_name", params={"schema_name": "s"}),
    case("list in a missing catalog", "GET", "/models", NOT_FOUND, "Catalog 'nope'", params={"catalog_name": "nope"}),
    case("list bad page_token", "GET", "/models", INVALID, "page_token", params={"page_token": "%%%"}),
    case("get missing", "GET", "/models/main.s.nope", NOT_FOUND, "Registered model 'main.s.nope' does not exist"),
    case("rename to a bad name", "PATCH", "/models/main.s.m", INVALID, "invalid character",
         json={"new_name": "a b"}),
    case("delete with versions", "DELETE", "/models/main.s.m", PRECONDITION, "is not empty", "force=true"),
    case("delete missing", "DELETE", "/models/main.s.nope", NOT_FOUND, "does not exist"),
    # versions
    *(case(f"version without {f}", "POST", "/models/versions", INVALID, f"Missing required field '{f}'",
           json={k: v for k, v in VERSION.items() if k != f}) for f in VERSION),
    case("version empty source", "POST", "/models/versions", INVALID, "'source' must not be empty",
         json={**VERSION, "source": " "}),
    case("version run_id not a string", "POST", "/models/versions", INVALID, "'run_id' must be a string",
         json={**VERSION, "run_id": 7}),
    case("version of a missing model", "POST", "/models/versions", NOT_FOUND,
         "Registered model 'main.s.nope' does not exist", json={**VERSION, "model_name": "nope"}),
    case("version bad model name", "POST", "/models/versions", INVALID, "invalid character",
         json={**VERSION, "model_name": "a.b"}),
    case("get version 0", "GET", "/models/main.s.m/versions/0", INVALID, "positive integer"),
    case("get version abc", "GET", "/models/main.s.m/versions/abc", INVALID, "positive integer"),
    # Numbers past a bigint, and digit strings longer than int() reads, were 500s (found by fuzzing).
    case("get version past bigint", "GET", f"/models/main.s.m/versions/{1 << 63}", INVALID, "positive integer"),
    case("get version of 5000 digits", "GET", "/models/main.s.m/versions/" + "9" * 5000, INVALID, "positive integer"),
    case("delete version of 5000 digits", "DELETE", "/models/main.s.m/versions/" + "9" * 5000, INVALID,
         "positive integer"),
    case("get missing version", "GET", "/models/main.s.m/versions/9", NOT_FOUND, "version 9 does not exist"),
    case("get version of missing model", "GET", "/models/main.s.nope/versions/1", NOT_FOUND,
         "Registered model 'main.s.nope'"),
    case("list versions of missing model", "GET", "/models/main.s.nope/versions", NOT_FOUND, "does not exist"),
    case("list versions bad page_token", "GET", "/models/main.s.m/versions", INVALID, "page_token",
         params={"page_token": page_token("x")}),
    case("update missing version", "PATCH", "/models/main.s.m/versions/9", NOT_FOUND, "version 9",
         json={"comment": "x"}),
    case("update version comment not a string", "PATCH", "/models/main.s.m/versions/1", INVALID,
         "'comment' must be a string", json={"comment": 1}),
    case("delete missing version", "DELETE", "/models/main.s.m/versions/9", NOT_FOUND, "version 9"),
    case("finalize missing version", "PATCH", "/models/main.s.m/versions/9/finalize", NOT_FOUND, "version 9",
         json={"full_name": "main.s.m", "version": 9}),
    case("finalize of missing model", "PATCH", "/models/main.s.nope/versions/1/finalize", NOT_FOUND,
         "Registered model 'main.s.nope'", json={}),
    case("finalize twice", "PATCH", "/models/main.s.m/versions/1/finalize", INVALID, "is READY",
         "PENDING_REGISTRATION", json={"full_name": "main.s.m", "version": 1}),
    case("finalize body disagrees", "PATCH", "/models/main.s.m/versions/2/finalize", INVALID, "differs",
         json={"full_name": "main.s.m", "version": 3}),
    case("finalize body names another model", "PATCH", "/models/main.s.m/versions/2/finalize", INVALID,
         "differs", json={"full_name": "main.s.other", "version": 2}),
    # aliases
    case("alias 'latest'", "PUT", "/models/main.s.m/aliases/latest", INVALID, "reserved", json={"version_num": 1}),
    case("alias like a version", "PUT", "/models/main.s.m/aliases/V2", INVALID, "reserved", json={"version_num": 1}),
    case("alias with a space", "PUT", "/models/main.s.m/aliases/a%20b", INVALID, "Invalid alias",
         json={"version_num": 1}),
    case("alias without version_num", "PUT", "/models/main.s.m/aliases/best", INVALID, "'version_num'", json={}),
    case("alias version_num not a number", "PUT", "/models/main.s.m/aliases/best", INVALID, "positive integer",
         json={"version_num": "two"}),
    case("alias version_num of 5000 digits", "PUT", "/models/main.s.m/aliases/best", INVALID, "positive integer",
         json={"version_num": "9" * 5000}),
    case("alias version_num past bigint", "PUT", "/models/main.s.m/aliases/best", INVALID, "positive integer",
         json={"version_num": 1 << 63}),
    case("alias of a missing version", "PUT", "/models/main.s.m/aliases/best", NOT_FOUND, "version 9",
         json={"version_num": 9}),
    case("alias of a missing model", "PUT", "/models/main.s.nope/aliases/best", NOT_FOUND, "main.s.nope",
         json={"version_num": 1}),
    case("get missing alias", "GET", "/models/main.s.m/aliases/best", NOT_FOUND, "no alias 'best'"),
    case("delete missing alias", "DELETE", "/models/main.s.m/aliases/best", NOT_FOUND, "no alias 'best'"),
    # model-version credentials
    *(case(f"credentials without {f}", "POST", "/temporary-model-version-credentials", INVALID,
           f"Missing required field '{f}'", json={k: v for k, v in CREDS.items() if k != f}) for f in CREDS),
    case("credentials bad operation", "POST", "/temporary-model-version-credentials", INVALID,
         "Unknown operation 'WRITE'", json={**CREDS, "operation": "WRITE"}),
    case("credentials for a missing version", "POST", "/temporary-model-version-credentials", NOT_FOUND,
         "version 9", json={**CREDS, "version": 9}),
    case("credentials to write a READY version", "POST", "/temporary-model-version-credentials", PRECONDITION,
         "only while it is PENDING_REGISTRATION", json={**CREDS, "version": 1}),
]


@pytest.mark.parametrize("method, path, code, says, req", MODEL_CASES)
async def test_model_refused(shared, server, method, path, code, says, req):
    await expect_error(shared, server, method, path, code, says, req)


# ---- state that refused requests must not have touched ---------------------------------


async def test_world_is_intact(shared):
    """The refused requests above left the world readable and as built."""
    ws, world = shared
    vol = await ok(ws, "GET", "/volumes/main.s.vol")
    assert vol["storage_location"] == join_url(world["$ROOT"], "volumes", vol["volume_id"])
    versions = (await ok(ws, "GET", "/models/main.s.m/versions"))["model_versions"]
    assert [(v["version"], v["status"]) for v in versions] == [(1, "READY"), (2, "PENDING_REGISTRATION")]
    champion = await ok(ws, "GET", "/models/main.s.m/aliases/champion")
    assert champion["version"] == 1
    model = await ok(ws, "GET", "/models/main.s.m")
    assert model["aliases"] == [{"alias_name": "champion", "version_num": 1}]
    assert "max_version_number" not in model


async def test_alias_moves_and_version_numbers_are_not_reused(ws, tmp_path):
    await build_world(ws, tmp_path)
    await ok(ws, "PUT", "/models/main.s.m/aliases/Champion", json={"version_num": 2})
    assert (await ok(ws, "GET", "/models/main.s.m/aliases/champion"))["version"] == 2
    await ok(ws, "DELETE", "/models/main.s.m/versions/2")
    status, body = await ws.call("GET", "/models/main.s.m/aliases/champion")
    assert status == 404 and body["error_code"] == NOT_FOUND
    created = await ok(ws, "POST", "/models/versions", json=VERSION)
    assert created["version"] == 3 and created["status"] == "PENDING_REGISTRATION"
    await ok(ws, "PUT", "/models/main.s.m/aliases/x", json={"version_num": 3})
    await ok(ws, "DELETE", "/models/main.s.m/aliases/x")
    status, _ = await ws.call("GET", "/models/main.s.m/aliases/x")
    assert status == 404
