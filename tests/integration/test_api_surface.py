"""Every endpoint of the open-source Unity Catalog REST API (0.6, `api/all.yaml` and
`api/control.yaml`) is routed by shardcat: a call with placeholder arguments may be refused
(bad input, not found, denied), but never as an unknown route or method. docs/api.md has the
endpoint-by-endpoint comparison this list comes from."""

from __future__ import annotations

import pytest

UC = "/api/2.1/unity-catalog"
CONTROL = "/api/1.0/unity-control"

# (method, path) as the 0.6 specs spell them, placeholders filled in.
ALL_YAML = [
    ("POST", "/catalogs"), ("GET", "/catalogs"), ("GET", "/catalogs/x"), ("PATCH", "/catalogs/x"),
    ("DELETE", "/catalogs/x"),
    ("POST", "/schemas"), ("GET", "/schemas?catalog_name=x"), ("GET", "/schemas/x.y"), ("PATCH", "/schemas/x.y"),
    ("DELETE", "/schemas/x.y"),
    ("POST", "/staging-tables"),
    ("POST", "/tables"), ("GET", "/tables?catalog_name=x&schema_name=y"), ("GET", "/tables/x.y.z"),
    ("DELETE", "/tables/x.y.z"),
    ("POST", "/volumes"), ("GET", "/volumes?catalog_name=x&schema_name=y"), ("GET", "/volumes/x.y.z"),
    ("PATCH", "/volumes/x.y.z"), ("DELETE", "/volumes/x.y.z"),
    ("POST", "/temporary-model-version-credentials"), ("POST", "/temporary-table-credentials"),
    ("POST", "/temporary-volume-credentials"), ("POST", "/temporary-path-credentials"),
    ("POST", "/functions"), ("GET", "/functions?catalog_name=x&schema_name=y"), ("GET", "/functions/x.y.z"),
    ("DELETE", "/functions/x.y.z"),
    ("POST", "/models"), ("GET", "/models"), ("GET", "/models/x.y.z"), ("PATCH", "/models/x.y.z"),
    ("DELETE", "/models/x.y.z"),
    ("POST", "/models/versions"), ("GET", "/models/x.y.z/versions"), ("GET", "/models/x.y.z/versions/1"),
    ("PATCH", "/models/x.y.z/versions/1"), ("DELETE", "/models/x.y.z/versions/1"),
    ("PATCH", "/models/x.y.z/versions/1/finalize"),
    ("GET", "/permissions/catalog/x"), ("PATCH", "/permissions/catalog/x"),
    ("GET", "/metastore_summary"),
    ("POST", "/credentials"), ("GET", "/credentials"), ("GET", "/credentials/x"), ("PATCH", "/credentials/x"),
    ("DELETE", "/credentials/x"),
    ("POST", "/external-locations"), ("GET", "/external-locations"), ("GET", "/external-locations/x"),
    ("PATCH", "/external-locations/x"), ("DELETE", "/external-locations/x"),
    ("GET", "/delta/preview/commits?table_id=00000000-0000-0000-0000-000000000000&table_uri=file:///x"),
    ("POST", "/delta/preview/commits"),
]
CONTROL_YAML = [
    ("POST", "/scim2/Users"), ("GET", "/scim2/Users"), ("GET", "/scim2/Users/x"), ("PUT", "/scim2/Users/x"),
    ("DELETE", "/scim2/Users/x"), ("GET", "/scim2/Me"), ("POST", "/auth/tokens"), ("POST", "/auth/logout"),
]


@pytest.mark.parametrize("method, path", [(m, UC + p) for m, p in ALL_YAML] + [(m, CONTROL + p) for m, p in CONTROL_YAML])
async def test_routed(ws, method, path):
    body = {} if method in ("POST", "PATCH", "PUT") else None
    async with ws.session.request(method, ws.url + path, json=body, headers=ws.headers) as r:
        answer = await r.json(content_type=None) if r.content_type.endswith("json") else {}
        assert r.status != 405, (method, path, answer)
        assert (answer or {}).get("error_code") != "ENDPOINT_NOT_FOUND", (method, path, answer)
        assert r.status < 500, (method, path, r.status, answer)


async def test_logout_expires_the_cookie_and_keeps_bearer_tokens(ws):
    """As the open-source server: logout ends a browser's cookie session; a bearer token stays valid."""
    async with ws.session.post(ws.url + CONTROL + "/auth/logout", headers=ws.headers) as r:
        assert r.status == 200 and await r.json() == {}
        cookie = r.cookies["UC_TOKEN"]
        assert cookie.value == "" and cookie["max-age"] == "0"
    status, _ = await ws.call("GET", "/catalogs")
    assert status == 200
    async with ws.session.post(ws.url + CONTROL + "/auth/logout") as r:
        assert r.status == 401
