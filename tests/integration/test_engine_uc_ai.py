"""unitycatalog-ai's function client against shardcat: create a Python function, list it, run it.

The client (package `unitycatalog-ai`, from PyPI) runs in a child process (uc_ai_calls.py says
why), in a virtual environment of its own made once and kept under ~/.cache/shardcat-tests: it
pins `unitycatalog-client` below 0.5, while the rest of the suite tests the newest SDK. Its
`create_python_function` sends `properties: "null"` by default, which shardcat used to refuse.
The grants decide: without USE SCHEMA a caller lists nothing, without EXECUTE it runs nothing
(a schema or function the caller may not see at all answers as a missing one)
(the client reads the function's definition from the catalog before running it locally).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governance_users import grant, user

SCRIPT = os.path.join(os.path.dirname(__file__), "uc_ai_calls.py")
UC_AI = "unitycatalog-ai==0.4.0"
VENV = Path(os.environ.get("SHARDCAT_TEST_CACHE", Path.home() / ".cache" / "shardcat-tests")) / "uc-ai-0.4.0"


def _client_python() -> str:
    """The Python of a virtual environment holding unitycatalog-ai as its users install it (with the
    SDK version it pins); made once, it is kept between runs."""
    python = VENV / "bin" / "python"
    probe = [str(python), "-c", "import unitycatalog.ai.core.client"]
    if not python.exists() or subprocess.run(probe, capture_output=True).returncode != 0:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", UC_AI], check=True, timeout=600)
        subprocess.run(probe, check=True)
    return str(python)


@pytest.fixture(scope="module", autouse=True)
async def client_python():
    global PYTHON
    PYTHON = await asyncio.to_thread(_client_python)


PYTHON = sys.executable


async def uc_ai(caller, action: str, **args) -> dict:
    proc = await asyncio.create_subprocess_exec(
        PYTHON, SCRIPT, caller.api, caller.token, action, json.dumps(args),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def make_schema(ws, catalog: str = "ai", schema: str = "tools") -> None:
    for path, body in (("/catalogs", {"name": catalog}), ("/schemas", {"name": schema, "catalog_name": catalog})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer


async def test_create_list_execute_a_python_function(ws):
    await make_schema(ws)
    created = await uc_ai(ws, "create", catalog="ai", schema="tools")
    assert "ok" in created, created
    assert created["ok"]["full_name"] == "ai.tools.add_numbers"
    assert created["ok"]["external_language"].lower() == "python"
    # The JSON-encoded null is no properties at all.
    status, stored = await ws.call("GET", "/functions/ai.tools.add_numbers")
    assert status == 200 and "properties" not in stored, stored
    assert await uc_ai(ws, "list", catalog="ai", schema="tools") == {"ok": ["add_numbers"]}
    ran = await uc_ai(ws, "execute", name="ai.tools.add_numbers", parameters={"a": 40, "b": 2})
    assert ran == {"ok": {"value": 42, "error": None}}, ran


async def test_properties_must_still_be_a_map_of_strings(ws):
    await make_schema(ws)
    base = {"name": "f", "catalog_name": "ai", "schema_name": "tools", "input_params": {"parameters": []},
            "data_type": "INT", "full_data_type": "INT", "routine_body": "EXTERNAL", "external_language": "Python",
            "routine_definition": "return 1", "parameter_style": "S", "is_deterministic": True,
            "sql_data_access": "NO_SQL", "is_null_call": False, "security_type": "DEFINER", "specific_name": "f"}
    for bad in ("[]", "1", '{"a": 1}', "not json", '"null"'):
        status, answer = await ws.call("POST", "/functions", json={"function_info": {**base, "properties": bad}})
        assert (status, answer["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), (bad, answer)
    status, answer = await ws.call("POST", "/functions",
                                   json={"function_info": {**base, "properties": '{"team": "ml"}'}})
    assert status == 200 and json.loads(answer["properties"]) == {"team": "ml"}, answer


async def test_grants_decide_listing_and_running(ws, server):
    await make_schema(ws)
    assert "ok" in await uc_ai(ws, "create", catalog="ai", schema="tools")
    bob = await user(server, ws)
    await grant(ws, "catalog", "ai", bob.name, "USE CATALOG")
    # No USE SCHEMA: the schema's functions are not bob's to list (a schema he may not see answers as missing).
    listed = await uc_ai(bob, "list", catalog="ai", schema="tools")
    assert listed["status"] == 404 and listed["error"]["error_code"] == "NOT_FOUND", listed
    await grant(ws, "schema", "ai.tools", bob.name, "USE SCHEMA")
    # No EXECUTE: the function is neither listed to bob nor runnable by him.
    assert await uc_ai(bob, "list", catalog="ai", schema="tools") == {"ok": []}
    ran = await uc_ai(bob, "execute", name="ai.tools.add_numbers", parameters={"a": 1, "b": 2})
    # Nothing runs: the client gets no definition (the function answers as missing to bob) and fails
    # with an error of its own.
    assert "ok" not in ran and "failed" in ran, ran
    status, answer = await bob.call("GET", "/functions/ai.tools.add_numbers")
    assert (status, answer["error_code"]) == (404, "NOT_FOUND"), answer
    await grant(ws, "function", "ai.tools.add_numbers", bob.name, "EXECUTE")
    assert await uc_ai(bob, "list", catalog="ai", schema="tools") == {"ok": ["add_numbers"]}
    ran = await uc_ai(bob, "execute", name="ai.tools.add_numbers", parameters={"a": 1, "b": 2})
    assert ran == {"ok": {"value": 3, "error": None}}, ran
