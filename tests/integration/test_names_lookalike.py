"""Look-alike names (issue 28, class 9): a name is one name however it is spelled in Unicode, and
names holding invisible characters are refused, for every type of asset, for column names and
for principal names.

`café` precomposed (NFC) and decomposed (NFD, e + U+0301) are the same name: the second create
is ALREADY_EXISTS and a GET with either spelling finds the asset. Zero-width characters, bidi
overrides and isolates, the soft hyphen and the byte-order mark are refused with a 400.
"""

from __future__ import annotations

import unicodedata
import urllib.parse
import uuid

import pytest

from shardcat.governance.principals import SCIM_PREFIX

NFC = "café"
NFD = unicodedata.normalize("NFD", NFC)
assert NFC != NFD
INVISIBLE = [
    pytest.param("caf\u200be", id="zero-width-space"),
    pytest.param("caf\u200de", id="zero-width-joiner"),
    pytest.param("\u202ecafé", id="bidi-override"),
    pytest.param("café\u2066", id="bidi-isolate"),
    pytest.param("caf\u00ade", id="soft-hyphen"),
    pytest.param("\ufeffcafé", id="byte-order-mark"),
    pytest.param("caf\u2060e", id="word-joiner"),
]
ROLE = {"role_arn": "arn:aws:iam::123456789012:role/r"}
COLS = [{"name": "id", "type_name": "LONG"}]


def _function(name: str) -> dict:
    return {"function_info": {
        "name": name, "catalog_name": "main", "schema_name": "s", "input_params": {"parameters": []},
        "data_type": "INT", "full_data_type": "INT", "routine_body": "SQL", "routine_definition": "1",
        "parameter_style": "S", "is_deterministic": True, "sql_data_access": "CONTAINS_SQL", "is_null_call": False,
        "security_type": "DEFINER", "specific_name": "f"}}


# kind -> (create path, body for a name, get path for a name, the answer's name field)
TYPES = {
    "catalog": ("/catalogs", lambda n, w: {"name": n}, lambda n: f"/catalogs/{n}"),
    "schema": ("/schemas", lambda n, w: {"name": n, "catalog_name": "main"}, lambda n: f"/schemas/main.{n}"),
    "table": ("/tables", lambda n, w: {"name": n, "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
                                       "data_source_format": "DELTA", "columns": COLS},
              lambda n: f"/tables/main.s.{n}"),
    "volume": ("/volumes", lambda n, w: {"name": n, "catalog_name": "main", "schema_name": "s",
                                         "volume_type": "MANAGED"}, lambda n: f"/volumes/main.s.{n}"),
    "function": ("/functions", lambda n, w: _function(n), lambda n: f"/functions/main.s.{n}"),
    "model": ("/models", lambda n, w: {"name": n, "catalog_name": "main", "schema_name": "s"},
              lambda n: f"/models/main.s.{n}"),
    "credential": ("/credentials", lambda n, w: {"name": n, "aws_iam_role": ROLE}, lambda n: f"/credentials/{n}"),
    "storage credential": ("/storage-credentials", lambda n, w: {"name": n, "aws_iam_role": ROLE},
                           lambda n: f"/storage-credentials/{n}"),
    "external location": ("/external-locations",
                          lambda n, w: {"name": n, "credential_name": "cred",
                                        "url": w.storage_root.rsplit("/storage/", 1)[0] + f"/ext/{uuid.uuid4().hex}"},
                          lambda n: f"/external-locations/{n}"),
    "share": ("/shares", lambda n, w: {"name": n}, lambda n: f"/shares/{n}"),
    "recipient": ("/recipients", lambda n, w: {"name": n, "authentication_type": "TOKEN"},
                  lambda n: f"/recipients/{n}"),
    "provider": ("/providers", lambda n, w: {"name": n, "authentication_type": "DATABRICKS"},
                 lambda n: f"/providers/{n}"),
}


async def _world(ws) -> None:
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"}),
                       ("/credentials", {"name": "cred", "aws_iam_role": ROLE})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@pytest.mark.parametrize("kind", list(TYPES))
async def test_nfc_and_nfd_spellings_are_one_name(ws, kind):
    await _world(ws)
    path, body, item = TYPES[kind]
    status, created = await ws.call("POST", path, json=body(NFC, ws))
    assert status == 200, created
    status, again = await ws.call("POST", path, json=body(NFD, ws))
    assert status == 409 and again["error_code"] == "ALREADY_EXISTS", again
    for spelling in (NFC, NFD, NFD.upper()):
        status, found = await ws.call("GET", item(_q(spelling)))
        assert status == 200, (spelling, found)
        assert found == created or found.get("name") == created.get("name"), (found, created)
        assert NFD not in str(found)


@pytest.mark.parametrize("kind", list(TYPES))
async def test_a_decomposed_name_is_stored_composed(ws, kind):
    await _world(ws)
    path, body, item = TYPES[kind]
    status, created = await ws.call("POST", path, json=body(NFD, ws))
    assert status == 200, created
    status, found = await ws.call("GET", item(_q(NFC)))
    assert status == 200, found
    assert NFD not in str(created) and NFC in str(created), created


@pytest.mark.parametrize("spelling", INVISIBLE)
@pytest.mark.parametrize("kind", list(TYPES))
async def test_invisible_characters_are_refused(ws, kind, spelling):
    await _world(ws)
    path, body, item = TYPES[kind]
    status, refused = await ws.call("POST", path, json=body(spelling, ws))
    assert status == 400 and refused["error_code"] == "INVALID_PARAMETER_VALUE", refused
    assert "invalid character" in refused["message"], refused
    status, _ = await ws.call("GET", item(_q(spelling)))
    assert status == 400


@pytest.mark.parametrize("spelling", [*INVISIBLE, pytest.param(NFD, id="nfd")])
async def test_column_names(ws, spelling):
    """Column names keep their case and may hold spaces, but they are NFC and hold nothing invisible."""
    await _world(ws)
    columns = [{"name": spelling, "type_name": "LONG"}, {"name": "Other Col", "type_name": "LONG", "position": 1}]
    status, answer = await ws.call("POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": columns})
    if spelling == NFD:
        assert status == 200, answer
        assert [c["name"] for c in answer["columns"]] == [NFC, "Other Col"]
        # and a second column of the other spelling is the same column
        columns.append({"name": NFC, "type_name": "LONG", "position": 2})
        status, dup = await ws.call("POST", "/tables", json={
            "name": "t2", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": columns})
        assert status == 400 and "more than once" in dup["message"], dup
    else:
        assert status == 400 and "invalid character" in answer["message"], answer


@pytest.mark.parametrize("spelling", INVISIBLE)
async def test_principal_names_refuse_invisible_characters(ws, spelling):
    async with ws.session.post(ws.url + SCIM_PREFIX + "/Users", headers=ws.headers,
                               json={"userName": f"{spelling}@example.com"}) as r:
        status, answer = r.status, await r.json(content_type=None)
    assert status == 400, answer
    await _world(ws)
    status, answer = await ws.call("PATCH", "/permissions/catalog/main",
                                   json={"changes": [{"principal": spelling, "add": ["USE_CATALOG"]}]})
    assert status == 400 and answer["error_code"] == "INVALID_PARAMETER_VALUE", answer
    status, answer = await ws.call("PATCH", "/catalogs/main", json={"owner": spelling})
    assert status == 400 and answer["error_code"] == "INVALID_PARAMETER_VALUE", answer


async def test_principal_names_are_nfc_wherever_they_enter(ws):
    """A grant to the decomposed spelling is a grant to the composed one; an owner likewise."""
    await _world(ws)
    user_nfc, user_nfd = f"{NFC}@example.com", f"{NFD}@example.com"
    async with ws.session.post(ws.url + SCIM_PREFIX + "/Users", headers=ws.headers,
                               json={"userName": user_nfd}) as r:
        assert r.status in (200, 201), await r.text()
        assert (await r.json(content_type=None))["userName"] == user_nfc
    status, answer = await ws.call("PATCH", "/permissions/catalog/main",
                                   json={"changes": [{"principal": user_nfd, "add": ["USE_CATALOG"]}]})
    assert status == 200, answer
    assert [a["principal"] for a in answer["privilege_assignments"]] == [user_nfc]
    status, answer = await ws.call("GET", "/permissions/catalog/main", params={"principal": user_nfd})
    assert [a["principal"] for a in answer["privilege_assignments"]] == [user_nfc]
    status, answer = await ws.call("PATCH", "/catalogs/main", json={"owner": user_nfd})
    assert status == 200 and answer["owner"] == user_nfc, answer


async def test_search_finds_a_name_by_either_spelling(ws):
    await _world(ws)
    status, made = await ws.call("POST", "/catalogs", json={"name": NFD})
    assert status == 200, made
    for spelling in (NFC, NFD):
        status, found = await ws.call("GET", "/shardcat/search", params={"query": spelling})
        assert status == 200, found
        assert NFC in [r["full_name"] for r in found["results"]], (spelling, found)
