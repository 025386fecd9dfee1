"""register-view from a dropped view's own metadata (Iceberg's Java `registerView`: create, drop, register again).

A managed view's metadata lies in `<managed root>/views/<view id>`, storage no live asset holds; the view is
re-adopted under its own id by who may undrop it (its owner, a metastore admin), as a dropped table is by register
(readopt.py). Anyone else gets the refusal a path nothing holds gets, word for word, in every spelling; a live
view's file stays refused; a file in the dropped view's folder that names another location is refused; a schema
whose managed views go elsewhere does not adopt it.
"""

from __future__ import annotations

import json
import os

from governance_users import grant, user
from test_iceberg_conformance import P, SCHEMA, error_model, ice  # noqa: F401

from shardcat.entities.urls import local_path


def view_body(name: str) -> dict:
    return {"name": name, "schema": SCHEMA, "properties": {"gc.enabled": "false"}, "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {}, "default-namespace": ["s"],
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}]}}


async def made_view(caller, name: str, namespace: str = "s") -> dict:
    status, body = await caller.call("POST", f"{P}/namespaces/{namespace}/views", json=view_body(name))
    assert status == 200, body
    return body


async def register(caller, name: str, location: str, namespace: str = "s"):
    return await caller.call("POST", f"{P}/namespaces/{namespace}/register-view",
                             json={"name": name, "metadata-location": location})


async def test_a_dropped_view_is_registered_again_by_its_owner(ice):  # noqa: F811
    made = await made_view(ice, "v")
    status, row = await ice.call("GET", "/tables/ice.s.v")
    view_id = row["table_id"]
    status, _ = await ice.call("DELETE", f"{P}/namespaces/s/views/v")
    assert status == 204
    assert os.path.exists(local_path(made["metadata-location"]))      # a dropped view's files stay
    status, body = await register(ice, "v", made["metadata-location"])
    assert status == 200, body
    assert body["metadata-location"] == made["metadata-location"]
    assert body["metadata"]["view-uuid"] == made["metadata"]["view-uuid"]
    status, loaded = await ice.call("GET", f"{P}/namespaces/s/views/v")
    assert status == 200 and loaded["metadata"]["versions"] == made["metadata"]["versions"], loaded
    status, row = await ice.call("GET", "/tables/ice.s.v")
    assert row["table_id"] == view_id and row["table_type"] == "VIEW"       # under its own id: its folder stays its own
    # Live again, its file is no longer a dropped view's: registered twice, it is refused.
    status, body = await register(ice, "twice", made["metadata-location"])
    assert error_model(status, body)["type"] == "BadRequestException" and "overlaps" in body["error"]["message"]


async def test_who_may_not_undrop_a_view_may_not_register_it(server, ice):  # noqa: F811
    alice, mallory = await user(server, ice), await user(server, ice)
    for who in (alice, mallory):
        await grant(ice, "catalog", "ice", who.name, "USE_CATALOG")
        await grant(ice, "schema", "ice.s", who.name, "USE_SCHEMA", "CREATE_TABLE")
    dropped = await made_view(alice, "alices")
    assert (await alice.call("DELETE", f"{P}/namespaces/s/views/alices"))[0] == 204
    live = await made_view(alice, "live")
    folder = dropped["metadata"]["location"].rsplit("/", 1)[0]         # the schema's managed views' folder
    nothing = f"{folder}/00000000-0000-4000-8000-000000000000/metadata/00000-x.metadata.json"
    answers = []
    for location in (dropped["metadata-location"], live["metadata-location"], nothing):
        file_path = location.removeprefix("file://")
        for spelled in (location, f"file:{file_path}", location.replace("/metadata/", "/metadata/./"),
                        location.replace("/metadata/", "/x/../metadata/"), location.replace("/views/", "//views/")):
            status, body = await register(mallory, "mine", spelled)
            error = error_model(status, body)
            answers.append((status, error["type"], error["message"].replace(spelled, "<url>")
                            .replace(location, "<url>")))
    # Every refusal alike: nothing tells a dropped view's metadata from a live one's or from no file at all.
    assert len({(s, t) for s, t, _ in answers}) == 1 and answers[0][0] == 400, answers
    assert answers[:5] == answers[10:], answers
    status, body = await mallory.call("GET", f"{P}/namespaces/s/views/mine")
    error_model(status, body, "NoSuchViewException")
    # Its owner may, and so may a metastore admin (ice's caller), under another name.
    status, body = await register(alice, "alices_again", dropped["metadata-location"])
    assert status == 200, body


async def test_a_metastore_admin_may_and_other_schemas_views_are_not_adopted(ice):  # noqa: F811
    made = await made_view(ice, "v")
    assert (await ice.call("DELETE", f"{P}/namespaces/s/views/v"))[0] == 204
    # A schema with managed storage of its own puts its views elsewhere: not adopted there (the overlap refusal).
    status, body = await ice.call("POST", "/schemas", json={"name": "own", "catalog_name": "ice",
                                                            "storage_root": f"{ice.storage_root}/own-root"})
    assert status == 200, body
    status, body = await register(ice, "v", made["metadata-location"], namespace="own")
    assert error_model(status, body)["type"] == "BadRequestException" and "overlaps" in body["error"]["message"]
    # A file in the dropped view's folder naming another location is not adopted either.
    forged = made["metadata-location"].replace("/metadata/", "/metadata/forged-")
    with open(local_path(made["metadata-location"])) as f:
        metadata = json.load(f)
    metadata["location"] = f"{ice.storage_root}/elsewhere"
    with open(local_path(forged), "w") as f:
        json.dump(metadata, f)
    status, body = await register(ice, "forged", forged)
    assert error_model(status, body)["type"] == "BadRequestException" and "outside" in body["error"]["message"], body
    status, body = await ice.call("GET", f"{P}/namespaces/s/views/forged")
    error_model(status, body, "NoSuchViewException")
    # The real one registers.
    status, body = await register(ice, "v", made["metadata-location"])
    assert status == 200, body
