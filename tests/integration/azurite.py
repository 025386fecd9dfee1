"""Azure Blob Storage on loopback for the tests: Azurite, Microsoft's emulator (the npm package `azurite`).

`installed()` puts the pinned package in ~/.cache/shardcat-tests/azurite on first use (npm, one
install under a file lock, so parallel runs share it); `Azurite()` starts its Blob service on a free
loopback port, in memory, with telemetry off, for one storage account whose key is made per run
(AZURITE_ACCOUNTS: the emulator's well-known key is public, a fresh one proves that only what shardcat
signs gets in). Azurite checks a SAS as Azure does: the signature over the resource, permissions,
expiry and protocol. It has no hierarchical namespace: directory SAS (`sr=d`) and the DFS endpoint
are not served, which is why the tests' credentials say `hierarchical_namespace: false`.
"""

from __future__ import annotations

import base64
import fcntl
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

    def __init__(self):
        self.account = ACCOUNT
        self.key = base64.b64encode(secrets.token_bytes(64)).decode()
        self.workdir = tempfile.mkdtemp(prefix="azurite-")
        env = {**os.environ, "AZURITE_ACCOUNTS": f"{self.account}:{self.key}"}
        self.process = subprocess.Popen(
            [str(installed()), "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
             "--disableTelemetry", "--skipApiVersionCheck"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=self.workdir)
        url = None
        for line in self.process.stdout:
            found = re.search(r"listens on (http://127\.0\.0\.1:\d+)", line)
            if found:
                url = found.group(1)
                break
        if url is None:
            raise RuntimeError(f"Azurite did not start (exit {self.process.poll()})")
        # Keep reading its output so a full pipe never blocks it.
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
        self.host = url.removeprefix("http://")
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
