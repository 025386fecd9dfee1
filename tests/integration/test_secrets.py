"""Secrets (issue 28, class 7): a credential secret is never echoed in an error or kept in the audit
log, whatever shape it is sent in, and is stored encrypted under a key kept outside the database
(store/sealing.py): the data dir's key file (mode 0600) or `--secret-key`. Secrets stored in plain
text by earlier versions are encrypted at the next start; `shardcat rotate-secret-key` and a
restart re-encrypt every secret under a new key.
"""

from __future__ import annotations

import json
import os
import stat
import uuid

import pytest
from cryptography.fernet import Fernet, InvalidToken

from shardcat.cluster.cli import main as cli_main
from shardcat.cluster.server import ServeConfig, start
from tests.conftest import new_workspace, serving

cluster = serving("secrets-cluster", shards=1)

SECRET = "Sup3r-secret-value-" + uuid.uuid4().hex
AZURE = {"directory_id": "dir", "application_id": "app", "client_secret": SECRET}
GCP = {"email": "sa@example.com", "private_key_id": "kid", "private_key": SECRET}


def _pem_key() -> str:
    """A service account's private key as its JSON key holds it (PEM), which a GCP credential must carry."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()

# Secret-bearing fields in the wrong shape: each refused, none may show SECRET anywhere.
WRONG_SHAPES = [
    pytest.param("POST", "/credentials", {"name": "c", "azure_service_principal": SECRET}, id="kind-as-string"),
    pytest.param("POST", "/storage-credentials", {"name": "c", "gcp_service_account_key": SECRET}, id="gcp-as-string"),
    pytest.param("POST", "/credentials", {"name": "c", "azure_service_principal": [SECRET]}, id="kind-as-list"),
    pytest.param("POST", "/credentials", {"name": "c", "azure_service_principal": {**AZURE, "client_secret": [SECRET]}},
                 id="secret-as-list"),
    pytest.param("POST", "/credentials", {"name": "c", "gcp_service_account_key": {**GCP, "private_key": {"k": SECRET}}},
                 id="key-as-object"),
    pytest.param("POST", "/credentials", {"name": "c", "azure_service_principal": AZURE, "aws_iam_role": SECRET},
                 id="two-kinds"),
    pytest.param("POST", "/credentials", {"name": "c", "azure_service_principal": AZURE, "purpose": SECRET[:30] + "x",
                                          "client_secret": SECRET}, id="bad-purpose"),
    pytest.param("PATCH", "/credentials/existing", {"azure_service_principal": SECRET}, id="update-kind-as-string"),
    pytest.param("PATCH", "/credentials/existing", {"azure_service_principal": {"client_secret": 7}, "comment": SECRET,
                                                   "gcp_service_account_key": {"private_key": SECRET}},
                 id="update-two-kinds"),
]


async def _audit_text(server, ws) -> str:
    from shardcat.governance.audit import APP_KEY
    await server.runner.app[APP_KEY].flush()
    rows = await server.store.pool.fetch("SELECT * FROM audit_log WHERE metastore_id = $1", uuid.UUID(ws.metastore_id))
    assert rows
    return json.dumps([dict(r) for r in rows], default=str)


@pytest.mark.parametrize("method,path,body", WRONG_SHAPES)
async def test_a_secret_in_the_wrong_shape_is_never_echoed(ws, server, method, path, body):
    status, answer = await ws.call("POST", "/credentials", json={"name": "existing", "aws_iam_role": {
        "role_arn": "arn:aws:iam::123456789012:role/r"}})
    assert status == 200, answer
    status, answer = await ws.call(method, path, json=body)
    assert status == 400, answer
    text = json.dumps(answer)
    assert SECRET not in text and SECRET[:12] not in text, answer
    assert SECRET[:12] not in await _audit_text(server, ws)


async def test_secrets_are_stored_encrypted(ws, server):
    pem = _pem_key()
    body = pem.splitlines()[1]          # a line of the key itself: never stored or answered in clear
    gcp = {**GCP, "private_key": pem}
    for name, kind, value in (("az", "azure_service_principal", AZURE), ("gcp", "gcp_service_account_key", gcp)):
        status, answer = await ws.call("POST", "/credentials", json={"name": name, kind: value})
        assert status == 200, answer
        assert SECRET not in json.dumps(answer) and body not in json.dumps(answer)
    status, answer = await ws.call("PATCH", "/credentials/az", json={"azure_service_principal": {
        "client_secret": SECRET + "-2"}})
    assert status == 200, answer
    rows = await server.store.pool.fetch("SELECT name, info::text AS info FROM assets WHERE metastore_id = $1 AND "
                                         "type = 'credential'", uuid.UUID(ws.metastore_id))
    assert len(rows) == 2
    for row in rows:
        assert SECRET[:12] not in row["info"] and body not in row["info"], row
        info = json.loads(row["info"])
        kind, field = ("azure_service_principal", "client_secret") if row["name"] == "az" else \
            ("gcp_service_account_key", "private_key")
        stored = info[kind][field]
        assert stored.startswith("sealed:v1:")
        assert server.store.secrets.open(stored) == (SECRET + "-2" if row["name"] == "az" else pem)
    key_file = server.admin_token_path.parent / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert server.store.secrets.keys[0].decode() in key_file.read_text()


async def _stored(store, credential_id: str) -> str:
    info = await store.pool.fetchval("SELECT info FROM assets WHERE id = $1", uuid.UUID(credential_id))
    return info["azure_service_principal"]["client_secret"]


async def test_plain_text_is_encrypted_at_start_and_rotation_re_encrypts(pg_url, http, tmp_path):
    data_dir = tmp_path / "data"
    running = await start(ServeConfig(port=0, data_dir=data_dir, db=pg_url))
    try:
        ws = await new_workspace(running, http, tmp_path)
        status, made = await ws.call("POST", "/credentials", json={"name": "az", "azure_service_principal": AZURE})
        assert status == 200, made
        cid = made["id"]
        # An earlier version's row: the secret in plain text.
        await running.store.pool.execute(
            "UPDATE assets SET info = jsonb_set(info, '{azure_service_principal,client_secret}', to_jsonb($2::text)) "
            "WHERE id = $1", uuid.UUID(cid), SECRET)
        profile = json.dumps({"endpoint": "https://x.example.com/", "bearerToken": SECRET})
        status, provider = await ws.call("POST", "/providers", json={
            "name": "vendor", "authentication_type": "TOKEN", "recipient_profile_str": profile})
        assert status == 200, provider
        await running.store.pool.execute(
            "UPDATE assets SET info = jsonb_set(info, '{recipient_profile_str}', to_jsonb($2::text)) "
            "WHERE metastore_id = $1 AND type = 'provider'", uuid.UUID(ws.metastore_id), profile)
        version_before = await running.store.metastore_version(ws.metastore_id)
    finally:
        await running.stop()
    first_key = (data_dir / "secret.key").read_text().split()[0].encode()

    running = await start(ServeConfig(port=0, data_dir=data_dir, db=pg_url))      # encrypts at start
    try:
        stored = await _stored(running.store, cid)
        assert stored.startswith("sealed:v1:") and SECRET not in stored
        assert Fernet(first_key).decrypt(stored[len("sealed:v1:"):].encode()).decode() == SECRET
        text = await running.store.pool.fetchval(
            "SELECT info->>'recipient_profile_str' FROM assets WHERE metastore_id = $1 AND type = 'provider'",
            uuid.UUID(ws.metastore_id))
        assert SECRET not in text and running.store.secrets.open(json.loads(text)["bearerToken"]) == SECRET
        # one versioned write: shards that cache the credential see the change
        assert await running.store.metastore_version(ws.metastore_id) == version_before + 1
        ws.url = running.url
        status, got = await ws.call("GET", "/credentials/az")
        assert status == 200 and "client_secret" not in json.dumps(got)
    finally:
        await running.stop()

    assert cli_main(["rotate-secret-key", "--data-dir", str(data_dir)]) == 0
    keys = (data_dir / "secret.key").read_text().split()
    assert len(keys) == 2 and keys[1].encode() == first_key
    assert stat.S_IMODE((data_dir / "secret.key").stat().st_mode) == 0o600
    new_key = keys[0].encode()

    running = await start(ServeConfig(port=0, data_dir=data_dir, db=pg_url))      # re-encrypts under the new key
    try:
        stored = await _stored(running.store, cid)
        token = stored[len("sealed:v1:"):].encode()
        assert Fernet(new_key).decrypt(token).decode() == SECRET
        with pytest.raises(InvalidToken):
            Fernet(first_key).decrypt(token)
    finally:
        await running.stop()

    # The old key may go now: a server with the new key alone reads every secret.
    (data_dir / "secret.key").write_text(keys[0] + "\n")
    running = await start(ServeConfig(port=0, data_dir=data_dir, db=pg_url))
    try:
        assert running.store.secrets.open(await _stored(running.store, cid)) == SECRET
    finally:
        await running.stop()


async def test_keys_from_an_environment_variable(pg_url, http, tmp_path, monkeypatch):
    key = Fernet.generate_key()
    monkeypatch.setenv("SHARDCAT_TEST_SECRET_KEY", key.decode())
    running = await start(ServeConfig(port=0, data_dir=tmp_path / "d", db=pg_url,
                                      secret_key="env:SHARDCAT_TEST_SECRET_KEY"))
    try:
        assert not (tmp_path / "d" / "secret.key").exists()      # no key file when the keys come from elsewhere
        ws = await new_workspace(running, http, tmp_path)
        status, made = await ws.call("POST", "/credentials", json={"name": "az", "azure_service_principal": AZURE})
        assert status == 200, made
        stored = await _stored(running.store, made["id"])
        assert Fernet(key).decrypt(stored[len("sealed:v1:"):].encode()).decode() == SECRET
    finally:
        await running.stop()


async def test_a_missing_key_source_stops_the_start(pg_url, tmp_path):
    from shardcat.store.sealing import SecretKeyError
    with pytest.raises(SecretKeyError):
        await start(ServeConfig(port=0, data_dir=tmp_path, db=pg_url, secret_key="env:SHARDCAT_NO_SUCH_VARIABLE"))
    with pytest.raises(SecretKeyError):
        await start(ServeConfig(port=0, data_dir=tmp_path, db=pg_url, secret_key=str(tmp_path / "missing.key")))
    os.environ.pop("SHARDCAT_NO_SUCH_VARIABLE", None)


async def test_a_providers_bearer_token_is_stored_encrypted_and_never_echoed(ws, server):
    profile = {"shareCredentialsVersion": 1, "endpoint": "https://sharing.example.com/delta-sharing/",
               "bearerToken": SECRET}
    status, made = await ws.call("POST", "/providers", json={"name": "vendor", "authentication_type": "TOKEN",
                                                             "recipient_profile_str": json.dumps(profile)})
    assert status == 200 and SECRET not in json.dumps(made), made
    status, made = await ws.call("PATCH", "/providers/vendor", json={
        "recipient_profile_str": json.dumps({**profile, "bearerToken": SECRET + "-2"})})
    assert status == 200 and SECRET not in json.dumps(made), made
    text = await server.store.pool.fetchval(
        "SELECT info->>'recipient_profile_str' FROM assets WHERE metastore_id = $1 AND type = 'provider'",
        uuid.UUID(ws.metastore_id))
    assert SECRET[:12] not in text
    assert server.store.secrets.open(json.loads(text)["bearerToken"]) == SECRET + "-2"
    # in the wrong shape: refused without showing it
    status, answer = await ws.call("POST", "/providers", json={"name": "v2", "authentication_type": "TOKEN",
                                                               "recipient_profile_str": {"bearerToken": SECRET}})
    assert status == 400 and SECRET[:12] not in json.dumps(answer), answer
    assert SECRET[:12] not in await _audit_text(server, ws)


async def test_shard_actors_seal_with_the_servers_key(cluster, http, tmp_path):
    """With --shards the credential is written by a shard actor: it seals with the server's keys."""
    ws = await new_workspace(cluster, http, tmp_path)
    status, made = await ws.call("POST", "/credentials", json={"name": "az", "azure_service_principal": AZURE})
    assert status == 200 and SECRET not in json.dumps(made), made
    stored = await _stored(cluster.store, made["id"])
    assert stored.startswith("sealed:v1:") and cluster.store.secrets.open(stored) == SECRET
