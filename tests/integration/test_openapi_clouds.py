"""The OpenAPI document and the cloud credentials' answers agree (issue 49).

For each Azure and GCP credential kind the document declares, a credential is made with every field the
document lets a request carry: the request validates against the document's request body, and every
answer (create, get, list, update, on /credentials and /storage-credentials) validates against its
response, with undeclared fields refused (each object of the document closed), secrets (writeOnly) absent,
and every declared field present. Vended answers for file://, abfss:// (Azurite) and gs:// (the Google
stand-in) validate the same way against TemporaryCredentials.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid

import pytest
from openapi_schema_validator import OAS30ReadValidator, OAS30WriteValidator

from azurite import az  # noqa: F401  (the session's Azurite)
from gcs_cloud import gcs, gcs_env, key_fields, new_service_account  # noqa: F401  (the session's Google stand-in)
import test_storage_azure as azure
import test_storage_gcs as google
from shardcat.openapi import document
from test_vending import ok

PREFIX = "/api/2.1/unity-catalog"
CLOUD_KINDS = ("azure_service_principal", "azure_managed_identity", "azure_storage_key", "gcp_service_account_key",
               "databricks_gcp_service_account")


def closed(schema, doc: dict):
    """`schema` with each $ref inlined and each object that lists its properties closed to any other field."""
    if isinstance(schema, list):
        return [closed(s, doc) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        _, _, section, name = schema["$ref"].split("/")
        return closed(doc["components"][section][name], doc)
    out = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: closed(v, doc) for name, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = closed(value, doc)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [closed(v, doc) for v in value]
        else:
            out[key] = value
    if "properties" in out and "additionalProperties" not in out and not {"allOf", "anyOf", "oneOf"} & set(out):
        out["additionalProperties"] = False
    return out


def operation(path: str, method: str) -> dict:
    return document()["paths"][PREFIX + path][method]


def resolved(item: dict) -> dict:
    """A response or request body, its own $ref followed."""
    while "$ref" in item:
        _, _, section, name = item["$ref"].split("/")
        item = document()["components"][section][name]
    return item


def answer_schema(path: str, method: str) -> dict:
    response = resolved(operation(path, method)["responses"]["200"])
    return closed(response["content"]["application/json"]["schema"], document())


def request_schema(path: str, method: str) -> dict:
    body = resolved(operation(path, method)["requestBody"])
    return closed(body["content"]["application/json"]["schema"], document())


def check_answer(body, path: str, method: str) -> None:
    errors = sorted(str(e.message) for e in OAS30ReadValidator(answer_schema(path, method)).iter_errors(body))
    assert not errors, (method, path, errors, body)


def check_request(body, path: str, method: str) -> None:
    errors = sorted(str(e.message) for e in OAS30WriteValidator(request_schema(path, method)).iter_errors(body))
    assert not errors, (method, path, errors)


def example_values(account) -> dict:
    """A valid value for every field name a cloud credential kind may carry (a field the document adds that is
    missing here fails the test: give it a value)."""
    subscription = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/lake/providers"
    return {"directory_id": str(uuid.uuid4()), "application_id": str(uuid.uuid4()), "client_secret": "s3cret-" + uuid.uuid4().hex,
            "access_connector_id": f"{subscription}/Microsoft.Databricks/accessConnectors/lake",
            "managed_identity_id": f"{subscription}/Microsoft.ManagedIdentity/userAssignedIdentities/lake",
            "account_name": "shardcatlake", "account_key": base64.b64encode(secrets.token_bytes(64)).decode(),
            "hierarchical_namespace": False, "email": account.email, "private_key_id": account.key["private_key_id"],
            "private_key": account.key["private_key"]}


def request_fields(kind: str, values: dict) -> dict:
    """Every field of `kind` the document lets a request carry, with a value."""
    schema = closed(document()["components"]["schemas"]["CredentialInfo"]["properties"][kind], document())
    out = {}
    for name, field in schema["properties"].items():
        if field.get("readOnly"):
            continue
        if name == "endpoint_url":
            out[name] = "http://127.0.0.1:4443" if kind.startswith("gcp") else "http://127.0.0.1:10000/shardcatlake"
        else:
            assert name in values, f"no example value for {kind}.{name}: add one"
            out[name] = values[name]
    return out


@pytest.mark.parametrize("kind", CLOUD_KINDS)
async def test_each_cloud_credential_kind_as_the_document_says(ws, kind, monkeypatch, tmp_path):
    account = new_service_account("openapi", {"lake"})
    key_file = tmp_path / "catalog.json"
    key_file.write_text(json.dumps(account.key))
    monkeypatch.setenv("SHARDCAT_GCP_SERVICE_ACCOUNT_KEY", str(key_file))
    fields = request_fields(kind, example_values(account))
    kind_schema = closed(document()["components"]["schemas"]["CredentialInfo"]["properties"][kind], document())
    shown = {n for n, f in kind_schema["properties"].items() if not f.get("writeOnly")}
    secret_values = [v for n, v in fields.items() if kind_schema["properties"][n].get("writeOnly")]
    for path, name in (("/credentials", f"c_{kind}"), ("/storage-credentials", f"s_{kind}")):
        body = {"name": name, kind: fields}
        check_request(body, path, "post")
        answers = [(await ok(ws, "POST", path, json=body), path, "post"),
                   (await ok(ws, "GET", f"{path}/{name}"), f"{path}/{{name}}", "get"),
                   (await ok(ws, "GET", path), path, "get")]
        update = {"comment": "checked", kind: {k: v for k, v in fields.items() if k != "hierarchical_namespace"}}
        check_request(update, f"{path}/{{name}}", "patch")
        answers.append((await ok(ws, "PATCH", f"{path}/{name}", json=update), f"{path}/{{name}}", "patch"))
        for answer, template, method in answers:
            check_answer(answer, template, method)
            text = json.dumps(answer)
            assert not any(secret in text for secret in secret_values), (template, method)
        made = answers[0][0][kind]
        assert set(made) == shown, (kind, "declared but not answered" if shown - set(made) else "answered, undeclared",
                                    shown ^ set(made))


async def test_a_file_answer_as_the_document_says(ws):
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    volume = await ok(ws, "POST", "/volumes", json={"name": "v", "catalog_name": "main", "schema_name": "s",
                                                    "volume_type": "MANAGED"})
    body = {"volume_id": volume["volume_id"], "operation": "READ_VOLUME"}
    check_request(body, "/temporary-volume-credentials", "post")
    check_answer(await ok(ws, "POST", "/temporary-volume-credentials", json=body), "/temporary-volume-credentials", "post")


@pytest.mark.azurite
async def test_an_azure_answer_as_the_document_says(ws, az):
    table = await azure.lake(ws, az)
    for operation_name in ("READ", "READ_WRITE"):
        answer = await ok(ws, "POST", "/temporary-table-credentials",
                          json={"table_id": table["table_id"], "operation": operation_name})
        assert answer["azure_user_delegation_sas"]["sas_token"]
        check_answer(answer, "/temporary-table-credentials", "post")
    body = {"url": azure.adls(az, "data/free"), "operation": "PATH_READ"}
    check_answer(await ok(ws, "POST", "/temporary-path-credentials", json=body), "/temporary-path-credentials", "post")


@pytest.mark.gcs_emulator
async def test_a_gcs_answer_as_the_document_says(ws, gcs_env):
    table = await google.lake(ws, gcs_env)
    for operation_name in ("READ", "READ_WRITE"):
        answer = await ok(ws, "POST", "/temporary-table-credentials",
                          json={"table_id": table["table_id"], "operation": operation_name})
        assert answer["gcp_oauth_token"]["oauth_token"]
        check_answer(answer, "/temporary-table-credentials", "post")
    volume = await ok(ws, "GET", "/volumes/main.s.v")
    check_answer(await ok(ws, "POST", "/temporary-volume-credentials",
                          json={"volume_id": volume["volume_id"], "operation": "WRITE_VOLUME"}),
                 "/temporary-volume-credentials", "post")


def test_the_uc_spec_names_are_kept():
    """The shapes the open-source Unity Catalog spec (api/all.yaml) names keep its field names."""
    schemas = document()["components"]["schemas"]
    temporary = document()["components"]["responses"]["TemporaryCredentials"]
    fields = closed(temporary["content"]["application/json"]["schema"], document())["properties"]
    assert set(fields["azure_user_delegation_sas"]["properties"]) == {"sas_token"}
    assert set(fields["gcp_oauth_token"]["properties"]) == {"oauth_token"}
    assert set(fields["aws_temp_credentials"]["properties"]) == {"access_key_id", "secret_access_key", "session_token"}
    assert {"AzureUserDelegationSAS", "GcpOauthToken"} <= set(schemas)
