"""Azure Blob Storage on loopback for the tests: Azurite, Microsoft's emulator (the npm package `azurite`).

`installed()` puts the pinned package in ~/.cache/shardcat-tests/azurite on first use (npm, one
install under a file lock, so parallel runs share it); `Azurite()` starts its Blob service on a free
loopback port, in memory, with telemetry off, for one storage account whose key is made per run
(AZURITE_ACCOUNTS: the emulator's well-known key is public, a fresh one proves that only what shardcat
signs gets in). Azurite checks a SAS as Azure does: the signature over the resource, permissions,
expiry and protocol. It has no hierarchical namespace: directory SAS (`sr=d`) and the DFS endpoint
are not served, which is why the tests' credentials say `hierarchical_namespace: false`.
Azure's identity services cannot exist here: `EntraId` (a service principal's sign-in) and
`InstanceMetadata` (a VM's managed identity) play them on loopback, issuing tokens Azurite accepts.
"""

from __future__ import annotations

import base64
import fcntl
import http.server
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

VERSION = "3.37.0"
CACHE = Path(os.environ.get("SHARDCAT_TEST_CACHE", Path.home() / ".cache" / "shardcat-tests")) / "azurite"
ACCOUNT = "shardcatlake"


def installed() -> Path:
    """The azurite-blob executable, installed with npm on first use."""
    binary = CACHE / "node_modules" / ".bin" / "azurite-blob"
    package = CACHE / "node_modules" / "azurite" / "package.json"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (binary.exists() and f'"version": "{VERSION}"' in package.read_text()):
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("Azurite needs npm (apt-get install npm); .ci/run installs it")
            subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(CACHE),
                            f"azurite@{VERSION}"], check=True, timeout=900)
    return binary


class Azurite:
    """A running Azurite Blob service with one account; `stop()` ends it."""

    def __init__(self, oauth: bool = False):
        """`oauth`: serve HTTPS (a certificate made here, `self.cert`) and accept Entra ID bearer tokens
        (Azurite's basic check: issuer, audience, lifetime; it verifies no signature), which is what
        user delegation keys need."""
        self.account = ACCOUNT
        self.key = base64.b64encode(secrets.token_bytes(64)).decode()
        self.workdir = tempfile.mkdtemp(prefix="azurite-")
        env = {**os.environ, "AZURITE_ACCOUNTS": f"{self.account}:{self.key}"}
        tls = []
        if oauth:
            self.cert, key = loopback_certificate(Path(self.workdir))
            tls = ["--oauth", "basic", "--cert", str(self.cert), "--key", str(key)]
        self.process = subprocess.Popen(
            [str(installed()), "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
             "--disableTelemetry", "--skipApiVersionCheck", *tls],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=self.workdir)
        url = None
        for line in self.process.stdout:
            found = re.search(r"listens on (https?://127\.0\.0\.1:\d+)", line)
            if found:
                url = found.group(1)
                break
        if url is None:
            raise RuntimeError(f"Azurite did not start (exit {self.process.poll()})")
        # Keep reading its output so a full pipe never blocks it.
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
        self.host = url.split("://", 1)[1]
        self.endpoint = f"{url}/{self.account}"      # path-style: the account in the first path segment

    def service(self):
        """A BlobServiceClient signed with the account key: the test's own, unrestricted access."""
        from azure.storage.blob import BlobServiceClient
        return BlobServiceClient(self.endpoint, credential={"account_name": self.account, "account_key": self.key})

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def loopback_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (PEM files: certificate, key); clients trust it by name."""
    import datetime as dt
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture(scope="session")
def az():
    """One Azurite for the session (the Azure test modules import this fixture): containers `lake`
    (a few blobs under data/ and outside/) and `other`, written with the account key."""
    emulator = Azurite()
    service = emulator.service()
    for container in ("lake", "other"):
        service.create_container(container)
    lake = service.get_container_client("lake")
    for name in ("data/t/part-0.parquet", "data/t/_delta_log/0.json", "data/u/part-0.parquet",
                 "data/free/f.csv", "outside/secret.csv"):
        lake.upload_blob(name, f"content of {name}".encode())
    service.get_container_client("other").upload_blob("x.csv", b"another container")
    yield emulator
    emulator.stop()


class JsonHandler(http.server.BaseHTTPRequestHandler):
    """A quiet loopback stand-in's request handler that answers JSON."""

    def log_message(self, *args):
        pass

    def answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class EntraId:
    """Microsoft Entra ID's token endpoint on loopback (HTTPS, `cert`): the one Azure part that cannot
    exist here. It serves a tenant's OpenID configuration and the client-credentials grant of the service
    principals registered in `apps` ({application_id: client_secret}), answering a bearer token for Azure
    Storage (issuer sts.windows.net/<tenant>, audience storage.azure.com, the app's object id) that
    Azurite's basic OAuth accepts. A wrong secret, another tenant or another scope gets a 401."""

    def __init__(self, cert: Path, key: Path, tenant: str, apps: dict[str, str]):
        import ssl
        import time
        import uuid
        from urllib.parse import parse_qs

        import jwt

        self.tenant, self.apps, self.issued = tenant, apps, []
        self.object_ids = {app: str(uuid.uuid4()) for app in apps}
        outer = self

        class Handler(JsonHandler):
            def do_GET(self):
                base = f"{outer.url}/{outer.tenant}"
                if self.path.split("?")[0] == f"/{outer.tenant}/v2.0/.well-known/openid-configuration":
                    return self.answer(200, {"token_endpoint": f"{base}/oauth2/v2.0/token",
                                             "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                                             "issuer": f"{base}/v2.0"})
                return self.answer(404, {"error": "not_found"})

            def do_POST(self):
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
                app = form.get("client_id", "")
                if (self.path != f"/{outer.tenant}/oauth2/v2.0/token" or form.get("grant_type") != "client_credentials"
                        or outer.apps.get(app) is None or form.get("client_secret") != outer.apps[app]
                        or form.get("scope") != "https://storage.azure.com/.default"):
                    return self.answer(401, {"error": "invalid_client", "error_description": "refused"})
                now = int(time.time())
                token = jwt.encode({"iss": f"https://sts.windows.net/{outer.tenant}/", "aud": "https://storage.azure.com",
                                    "oid": outer.object_ids[app], "tid": outer.tenant, "appid": app,
                                    "nbf": now - 60, "iat": now, "exp": now + 3600}, secrets.token_bytes(32), "HS256")
                outer.issued.append(app)
                return self.answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                                         "ext_expires_in": 3600})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        # The handshake in each request's thread, not in accept(): a client that stalls blocks only itself.
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class InstanceMetadata:
    """An Azure VM's instance metadata service on loopback (plain HTTP, as IMDS is): the managed identity
    token endpoint, `GET /metadata/identity/oauth2/token`. The VM holds a system-assigned identity and the
    user-assigned ones in `assigned` ({resource id: object id}); a request must carry `Metadata: true` (IMDS's
    guard against forwarded requests) and ask for Azure Storage, and names a user-assigned identity by
    `msi_res_id` (or gets the system one). The token is what Azurite's basic OAuth accepts, like EntraId's;
    unknown identities get IMDS's 400. `issued` records the object id of each token handed out."""

    def __init__(self, tenant: str, assigned: dict[str, str], system: str | None = None):
        import time
        from urllib.parse import parse_qs, urlsplit

        import jwt

        self.tenant, self.assigned, self.system, self.issued = tenant, assigned, system, []
        outer = self

        class Handler(JsonHandler):
            def do_GET(self):
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path != "/metadata/identity/oauth2/token":
                    return self.answer(404, {"error": "not_found"})
                if self.headers.get("Metadata") != "true":
                    return self.answer(400, {"error": "invalid_request",
                                             "error_description": "Required metadata header not specified"})
                if query.get("resource") != "https://storage.azure.com":
                    return self.answer(400, {"error": "invalid_resource", "error_description": "not Azure Storage"})
                named = query.get("msi_res_id")
                oid = outer.assigned.get(named) if named else outer.system
                if oid is None or {"client_id", "object_id", "mi_res_id"} & set(query):
                    return self.answer(400, {"error": "invalid_request", "error_description": "Identity not found"})
                now = int(time.time())
                token = jwt.encode({"iss": f"https://sts.windows.net/{outer.tenant}/", "aud": "https://storage.azure.com",
                                    "oid": oid, "tid": outer.tenant, "nbf": now - 60, "iat": now, "exp": now + 3600},
                                   secrets.token_bytes(32), "HS256")
                outer.issued.append(oid)
                return self.answer(200, {"access_token": token, "token_type": "Bearer", "resource": query["resource"],
                                         "expires_in": "3600", "expires_on": str(now + 3600), "not_before": str(now)})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
