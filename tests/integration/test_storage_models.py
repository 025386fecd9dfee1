"""Registered models and their versions on gs:// and abfss:// (issue 49): managed model storage under a
catalog's cloud root, `/temporary-model-version-credentials` vending a token or SAS for one version's
directory, and every other way to that directory (by path, spelled otherwise) reaching the same decision.

The stores enforce what was vended: the GCS stand-in's proxy checks each token's boundary (gcs_cloud.py),
Azurite each SAS (azurite.py; a flat namespace, so a container SAS: the scope it can check is the
container, and the directory SAS an ADLS Gen2 account gets is checked for its fields).
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest

from azurite import az  # noqa: F401  (the session's Azurite)
from gcs_cloud import gcs, gcs_env  # noqa: F401  (the session's Google stand-in)
from governance_users import grant, user
from shardcat.governance import vending_azure
import test_storage_azure as azure
import test_storage_gcs as google
from test_vending import ok

VERSION_CREDENTIALS = "/temporary-model-version-credentials"


async def models(ws, root: str) -> tuple[dict, dict, dict]:
    """Catalog m (storage root `root`), schema s, model clf and its versions 1 and 2 (pending)."""
    await ok(ws, "POST", "/catalogs", json={"name": "m", "storage_root": root})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "m"})
    model = await ok(ws, "POST", "/models", json={"name": "clf", "catalog_name": "m", "schema_name": "s"})
    one, two = [await ok(ws, "POST", "/models/versions", json={"catalog_name": "m", "schema_name": "s",
                                                               "model_name": "clf", "source": f"runs:/r{n}/model"})
                for n in (1, 2)]
    assert model["storage_location"].startswith(root + "/") and "/models/" in model["storage_location"]
    assert one["storage_location"].startswith(model["storage_location"] + "/versions/")
    return model, one, two


def version_body(version: int, operation: str) -> dict:
    return {"catalog_name": "m", "schema_name": "s", "model_name": "clf", "version": version, "operation": operation}


async def executor(server, ws):
    """A user with EXECUTE on the model (and USE on its parents): reads its versions, writes none."""
    reader = await user(server, ws)
    await grant(ws, "catalog", "m", reader.name, "USE CATALOG")
    await grant(ws, "schema", "m.s", reader.name, "USE SCHEMA")
    await grant(ws, "registered_model", "m.s.clf", reader.name, "EXECUTE")
    return reader


# ---- gs:// ---------------------------------------------------------------------------------------


def bucket_path(url: str) -> str:
    return url[len("gs://"):]


@pytest.mark.gcs_emulator
async def test_gcs_a_version_token_writes_its_own_directory_only(ws, gcs_env):
    await google.lake(ws, gcs_env)
    model, one, two = await models(ws, "gs://lake/data/mroot")
    write = await ok(ws, "POST", VERSION_CREDENTIALS, json=version_body(1, "READ_WRITE_MODEL_VERSION"))
    assert write["url"] == one["storage_location"] and set(write) == {"gcp_oauth_token", "expiration_time", "url",
                                                                      "endpoint_url"}
    fs = google.store(write)
    mine = bucket_path(one["storage_location"])
    fs.pipe(f"{mine}/model.pkl", b"weights")
    assert fs.cat(f"{mine}/model.pkl") == b"weights"
    for outside in (f"{bucket_path(two['storage_location'])}/model.pkl",      # the next version
                    f"{bucket_path(model['storage_location'])}/meta.json",     # the model, outside its versions
                    f"{mine}-x/model.pkl",                                      # a sibling sharing the prefix
                    "lake/data/t/model.pkl", "other/data/t/model.pkl"):
        assert google.refused(lambda: fs.pipe(outside, b"x")), outside
    prefix = mine.split("/", 1)[1] + "/"
    rules = gcs_env.token(google.token_of(write))["rules"]
    assert [r["terms"] for r in rules] == [[["name", f"projects/_/buckets/lake/objects/{prefix}"], ["list", prefix]]]
    assert "storage.objects.create" in rules[0]["permissions"]
    # Reading: the version's files, nothing else, and no writing.
    read = await ok(ws, "POST", VERSION_CREDENTIALS, json=version_body(1, "READ_MODEL_VERSION"))
    assert google.store(read).cat(f"{mine}/model.pkl") == b"weights"
    assert gcs_env.token(google.token_of(read))["rules"][0]["permissions"] == ["storage.objects.get",
                                                                              "storage.objects.list"]
    assert google.refused(lambda: google.store(read).pipe(f"{mine}/other.pkl", b"x"))
    assert google.refused(lambda: google.store(read).cat("lake/data/t/part-0.parquet"))
    # Once READY, its files are fixed: no write token, and Google is not asked.
    await ok(ws, "PATCH", "/models/m.s.clf/versions/1/finalize", json={})
    exchanges = len(gcs_env.exchanges)
    status, body = await ws.call("POST", VERSION_CREDENTIALS, json=version_body(1, "READ_WRITE_MODEL_VERSION"))
    assert (status, body.get("error_code")) == (400, "FAILED_PRECONDITION") and google.no_token(body), body
    assert len(gcs_env.exchanges) == exchanges
    assert google.store(await ok(ws, "POST", VERSION_CREDENTIALS, json=version_body(1, "READ_MODEL_VERSION"))).cat(
        f"{mine}/model.pkl") == b"weights"


@pytest.mark.gcs_emulator
async def test_gcs_grants_and_paths_decide_as_the_version_api_does(ws, server, gcs_env):
    await google.lake(ws, gcs_env)
    model, one, _ = await models(ws, "gs://lake/data/mroot")
    google.store(await ok(ws, "POST", VERSION_CREDENTIALS, json=version_body(1, "READ_WRITE_MODEL_VERSION"))).pipe(
        f"{bucket_path(one['storage_location'])}/model.pkl", b"weights")
    exchanges = len(gcs_env.exchanges)
    nobody = await user(server, ws)
    for operation in ("READ_MODEL_VERSION", "READ_WRITE_MODEL_VERSION"):
        status, body = await nobody.call("POST", VERSION_CREDENTIALS, json=version_body(1, operation))
        assert status in (403, 404) and google.no_token(body), body
    for url in (one["storage_location"], model["storage_location"]):
        for operation in ("PATH_READ", "PATH_READ_WRITE"):
            status, body = await nobody.call("POST", "/temporary-path-credentials", json={"url": url, "operation": operation})
            assert status in (400, 403, 404) and google.no_token(body), (url, operation, body)
    assert len(gcs_env.exchanges) == exchanges            # refused before Google was asked anything
    reader = await executor(server, ws)
    got = await ok(reader, "POST", VERSION_CREDENTIALS, json=version_body(1, "READ_MODEL_VERSION"))
    assert google.store(got).cat(f"{bucket_path(one['storage_location'])}/model.pkl") == b"weights"
    status, body = await reader.call("POST", VERSION_CREDENTIALS, json=version_body(1, "READ_WRITE_MODEL_VERSION"))
    assert status == 403 and google.no_token(body), body
    # By path, however spelled: EXECUTE reads, and writing a version's files by path is refused to everyone
    # (the owner too: only the version API knows whether the version is still pending).
    location = one["storage_location"]
    for spelling in (location, location.replace("gs://lake/", "gs://LAKE/"), location + "/",
                     location.replace("/versions/", "/versions/x/../"), location.replace("/versions/", "/%76ersions/")):
        answer = await ok(reader, "POST", "/temporary-path-credentials", json={"url": spelling, "operation": "PATH_READ"})
        assert answer["url"] == location, spelling
        for caller in (reader, ws):
            status, body = await caller.call("POST", "/temporary-path-credentials",
                                             json={"url": spelling, "operation": "PATH_READ_WRITE"})
            assert status == 403 and google.no_token(body), (spelling, body)


# ---- abfss:// ------------------------------------------------------------------------------------


def blob_name(az, url: str) -> str:
    """The blob path of an abfss:// URL in the `lake` container."""
    return url[len(azure.adls(az)) + 1:]


@pytest.mark.azurite
async def test_azure_a_version_sas_reads_and_writes_while_pending(ws, az):
    await azure.lake(ws, az)
    model, one, two = await models(ws, azure.adls(az, "data/mroot"))
    write = await ok(ws, "POST", VERSION_CREDENTIALS, json=version_body(1, "READ_WRITE_MODEL_VERSION"))
    assert write["url"] == one["storage_location"] and write["endpoint_url"] == az.endpoint
    assert parse_qs(azure.sas_of(write))["sp"] == ["racwdl"]
    client = azure.container(az, write)
    mine = blob_name(az, one["storage_location"])
    client.upload_blob(f"{mine}/model.pkl", b"weights", overwrite=True)
    assert azure.refused(lambda: azure.read(azure.container(az, write, "other"), "x.csv")) == "AuthorizationFailure"
    read = await ok(ws, "POST", VERSION_CREDENTIALS, json=version_body(1, "READ_MODEL_VERSION"))
    assert parse_qs(azure.sas_of(read))["sp"] == ["rl"]
    assert azure.read(azure.container(az, read), f"{mine}/model.pkl") == b"weights"
    assert azure.refused(lambda: azure.container(az, read).upload_blob(f"{mine}/x", b"x")) == \
        "AuthorizationPermissionMismatch"
    await ok(ws, "PATCH", "/models/m.s.clf/versions/1/finalize", json={})
    status, body = await ws.call("POST", VERSION_CREDENTIALS, json=version_body(1, "READ_WRITE_MODEL_VERSION"))
    assert (status, body.get("error_code")) == (400, "FAILED_PRECONDITION") and "sas_token" not in json.dumps(body)
    # On an ADLS Gen2 account the SAS is a directory SAS on exactly the version's directory.
    await ok(ws, "PATCH", "/storage-credentials/az", json={"azure_storage_key": {"hierarchical_namespace": True}})
    gen2 = parse_qs(azure.sas_of(await ok(ws, "POST", VERSION_CREDENTIALS,
                                          json=version_body(2, "READ_WRITE_MODEL_VERSION"))))
    assert (gen2["sr"], gen2["sdd"]) == (["d"], [str(len(blob_name(az, two["storage_location"]).split("/")))])


@pytest.mark.azurite
async def test_azure_grants_and_paths_decide_as_the_version_api_does(ws, server, az):
    await azure.lake(ws, az)
    model, one, _ = await models(ws, azure.adls(az, "data/mroot"))
    signed = vending_azure.AZURE.stats["signed"] + vending_azure.AZURE.stats["cache_hits"]
    nobody = await user(server, ws)
    for operation in ("READ_MODEL_VERSION", "READ_WRITE_MODEL_VERSION"):
        status, body = await nobody.call("POST", VERSION_CREDENTIALS, json=version_body(1, operation))
        assert status in (403, 404) and "sas_token" not in json.dumps(body), body
    assert vending_azure.AZURE.stats["signed"] + vending_azure.AZURE.stats["cache_hits"] == signed
    reader = await executor(server, ws)
    assert "sas_token" in json.dumps(await ok(reader, "POST", VERSION_CREDENTIALS,
                                              json=version_body(1, "READ_MODEL_VERSION")))
    status, body = await reader.call("POST", VERSION_CREDENTIALS, json=version_body(1, "READ_WRITE_MODEL_VERSION"))
    assert status == 403 and "sas_token" not in json.dumps(body), body
    location = one["storage_location"]
    upper = location.replace(f"abfss://lake@{az.account}", f"ABFS://LAKE@{az.account.upper()}")
    for spelling in (location, upper, location + "/", location.replace("/versions/", "/versions/x/../")):
        answer = await ok(reader, "POST", "/temporary-path-credentials", json={"url": spelling, "operation": "PATH_READ"})
        assert answer["url"] == location, spelling
        for caller in (reader, ws):
            status, body = await caller.call("POST", "/temporary-path-credentials",
                                             json={"url": spelling, "operation": "PATH_READ_WRITE"})
            assert status == 403 and "sas_token" not in json.dumps(body), (spelling, body)
    status, body = await nobody.call("POST", "/temporary-path-credentials",
                                     json={"url": model["storage_location"], "operation": "PATH_READ"})
    assert status in (400, 403, 404) and "sas_token" not in json.dumps(body), body
