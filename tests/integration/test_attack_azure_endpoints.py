"""Attacks on Azure vending's calls out (governance/vending_azure.py), by a principal who may create storage
credentials and external locations, and by a credential's owner who does not know its secret.

For an Entra ID identity (a managed identity: the catalog machine's own; a service principal: its secret
sealed in the catalog) the catalog obtains a token for Azure Storage and asks the storage account for a user
delegation key with it, at the credential's `endpoint_url` when one is given. The endpoint was the
credential's creator's choice: the machine's managed identity token (storage-wide, for every account the
identity has roles on) went to whatever host the creator named. Tokens now go only to the account's own
Azure endpoint or to endpoints the operator named ($SHARDCAT_AZURE_STORAGE_ENDPOINTS).

Beside it: a credential's owner (not an admin, not every reader) changed where readers' engines send the SAS
they are vended (`endpoint_url`) and how far every SAS reaches (`hierarchical_namespace: false`: the whole
container). Only a metastore admin changes those of an existing credential.
"""

from __future__ import annotations

import http.server
import ssl
import threading
import uuid

import pytest

from azurite import EntraId, InstanceMetadata, JsonHandler, loopback_certificate
from governance_users import grant, user
from shardcat.governance import vending_azure

ACCOUNT = "victimlake"


class Collector:
    """The attacker's HTTPS server on loopback: records each request's Authorization header."""

    def __init__(self, folder):
        cert, key = loopback_certificate(folder)
        self.cert, self.seen = cert, []
        outer = self

        class Handler(JsonHandler):
            def do_POST(self):
                outer.seen.append(self.headers.get("Authorization"))
                self.answer(403, {"error": "no"})

            do_GET = do_PUT = do_POST

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/{ACCOUNT}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector(tmp_path, monkeypatch):
    found = Collector(tmp_path)
    machine = InstanceMetadata(str(uuid.uuid4()), {}, system=str(uuid.uuid4()))
    entra = EntraId(found.cert, found.cert.with_name("key.pem"), machine.tenant,
                    {str(uuid.uuid4()): "secret-" + uuid.uuid4().hex})
    monkeypatch.setenv("SHARDCAT_AZURE_AUTHORITY_HOST", entra.url)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", machine.url)     # the machine's identity service
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(found.cert))                # the attacker's host is trusted
    monkeypatch.delenv("SHARDCAT_AZURE_STORAGE_ENDPOINTS", raising=False)
    vending_azure.AZURE.cache.clear()
    vending_azure.AZURE.delegation_keys.clear()
    yield found, machine, entra
    entra.stop()
    machine.stop()
    found.stop()


async def test_the_machines_identity_token_goes_to_no_endpoint_a_credential_names(ws, server, collector):
    found, machine, _ = collector
    attacker = await user(server, ws)
    await grant(ws, "metastore", ws.metastore_id, attacker.name, "CREATE STORAGE CREDENTIAL",
                "CREATE EXTERNAL LOCATION")
    status, body = await attacker.call("POST", "/storage-credentials", json={"name": "mine", "azure_managed_identity": {
        "access_connector_id": "/subscriptions/0/resourceGroups/x/providers/Microsoft.Databricks/accessConnectors/x",
        "endpoint_url": found.url, "hierarchical_namespace": False}})
    assert status == 200, body
    url = f"abfss://lake@{ACCOUNT}.dfs.core.windows.net/anything"
    status, body = await attacker.call("POST", "/external-locations", json={"name": "mine", "url": url,
                                                                           "credential_name": "mine"})
    assert status == 200, body
    status, body = await attacker.call("POST", "/temporary-path-credentials", json={"url": url,
                                                                                   "operation": "PATH_READ"})
    assert found.seen == [], "the machine's token was sent to the credential's endpoint"
    assert machine.issued == []                  # not even asked for: the endpoint is refused first
    assert status == 400 and "SHARDCAT_AZURE_STORAGE_ENDPOINTS" in body["message"], body


async def test_a_service_principals_token_goes_to_no_endpoint_its_owner_moved(ws, server, collector):
    """The admin's service principal (its secret sealed here) is handed to a user to own; the owner points its
    endpoint elsewhere: the token signed in with the admin's secret must not follow (the change is refused, and
    an endpoint the operator did not list gets no token whoever set it)."""
    found, _, entra = collector
    [(app, secret)] = entra.apps.items()
    owner = await user(server, ws)
    status, body = await ws.call("POST", "/storage-credentials", json={"name": "sp", "azure_service_principal": {
        "directory_id": entra.tenant, "application_id": app, "client_secret": secret}})
    assert status == 200, body
    assert (await ws.call("PATCH", "/storage-credentials/sp", json={"owner": owner.name}))[0] == 200
    status, body = await owner.call("PATCH", "/storage-credentials/sp", json={"azure_service_principal": {
        "endpoint_url": found.url}})
    assert status == 403, body
    # Moved by an admin (by mistake, or to an endpoint not listed), the token still does not go there.
    assert (await ws.call("PATCH", "/storage-credentials/sp", json={"azure_service_principal": {
        "endpoint_url": found.url}}))[0] == 200
    url = f"abfss://lake@{ACCOUNT}.dfs.core.windows.net/sp"
    assert (await ws.call("POST", "/external-locations", json={"name": "sp", "url": url,
                                                             "credential_name": "sp"}))[0] == 200
    status, body = await ws.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
    assert found.seen == []
    assert status == 400 and "SHARDCAT_AZURE_STORAGE_ENDPOINTS" in body["message"], body


@pytest.mark.parametrize("change", [{"endpoint_url": "https://attacker.example/victimlake"},
                                    {"hierarchical_namespace": False}])
async def test_a_credentials_owner_cannot_redirect_or_widen_what_readers_are_given(ws, server, change):
    """An admin's azure_storage_key credential serves a location whose tables others read; a user made the
    credential's owner (not an admin, holding nothing on the tables) changes where readers' engines send their
    SAS (`endpoint_url`) or widens every SAS to the whole container (`hierarchical_namespace: false`). Only a
    metastore admin changes those of an existing credential; the readers' answers stay as they were."""
    import base64
    owner = await user(server, ws)
    key = base64.b64encode(b"k" * 32).decode()
    assert (await ws.call("POST", "/storage-credentials", json={"name": "key", "azure_storage_key": {
        "account_name": ACCOUNT, "account_key": key}}))[0] == 200
    url = f"abfss://lake@{ACCOUNT}.dfs.core.windows.net/data"
    assert (await ws.call("POST", "/external-locations", json={"name": "data", "url": url,
                                                             "credential_name": "key"}))[0] == 200
    before = await ws.call("POST", "/temporary-path-credentials", json={"url": f"{url}/t", "operation": "PATH_READ"})
    assert before[0] == 200, before
    assert (await ws.call("PATCH", "/storage-credentials/key", json={"owner": owner.name}))[0] == 200
    status, body = await owner.call("PATCH", "/storage-credentials/key", json={"azure_storage_key": change})
    assert status == 403, body
    vending_azure.AZURE.cache.clear()
    status, after = await ws.call("POST", "/temporary-path-credentials", json={"url": f"{url}/t",
                                                                              "operation": "PATH_READ"})
    assert status == 200 and "endpoint_url" not in after, after
    assert "sr=d" in after["azure_user_delegation_sas"]["sas_token"], after      # still the directory's SAS
    # A metastore admin may still move the credential (an emulator, Azure Stack).
    assert (await ws.call("PATCH", "/storage-credentials/key", json={"azure_storage_key": change}))[0] == 200
