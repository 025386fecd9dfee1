"""Google Cloud Storage on loopback for the tests: the stand-in's process (gcs_google.py) and its test side.

`Google` starts `gcs_google.py` (fake-gcs-server behind a loopback OAuth token endpoint, STS and an
enforcing storage proxy: its docstring says what each checks), registers service accounts, and reads
what STS was asked and what the proxy refused. The fixtures `gcs` (one per session: buckets `lake`
and `other`, a service account that may use `lake`) and `gcs_env` (the catalog pointed at it) are
shared by the GCS tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gcs_google import (ROLE_PERMISSIONS, STORAGE_SCOPE, ServiceAccount, condition_terms,  # noqa: F401 (for the tests)
                        new_service_account)

SERVER = Path(__file__).with_name("gcs_google.py")


class Google:
    """The test side of gcs_google.py: starts it, registers accounts, reads what STS was asked and what was refused."""

    def start(self) -> "Google":
        self._process = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError("the GCS stand-in did not start")
        for name, url in json.loads(line).items():
            setattr(self, name, url)
        return self

    def stop(self) -> None:
        self._process.stdin.close()
        try:
            self._process.wait(15)
        except subprocess.TimeoutExpired:
            self._process.kill()

    def _admin(self, method: str, path: str, body=None):
        import requests
        r = requests.request(method, f"{self.storage_url}/_admin/{path}", json=body, timeout=10)
        r.raise_for_status()
        return r.json()

    def add_account(self, account: ServiceAccount) -> ServiceAccount:
        self._admin("POST", "accounts", {"email": account.email, "key": account.key, "buckets": sorted(account.buckets)})
        return account

    def set_token_seconds(self, seconds: int) -> None:
        self._admin("POST", "settings", {"token_seconds": seconds})

    @property
    def exchanges(self) -> list[dict]:
        return self._admin("GET", "record")["exchanges"]

    @property
    def refusals(self) -> list[str]:
        return self._admin("GET", "record")["refusals"]

    def expire(self, value: str) -> None:
        """Let a token's lifetime pass, as far as Google's side is concerned."""
        self._admin("POST", "expire", {"token": value})

    def token(self, value: str) -> dict | None:
        """What Google knows of an access token: its account, expiry and boundary rules (None: a source token)."""
        return self._admin("POST", "token", {"token": value})

    def create_bucket(self, bucket: str) -> None:
        import requests
        requests.post(f"{self.emulator_url}/storage/v1/b", json={"name": bucket}, timeout=10).raise_for_status()

    def put(self, bucket: str, name: str, data: bytes) -> None:
        """Write an object directly into the emulator (the tests' own set-up, not through the proxy)."""
        import requests
        requests.post(f"{self.emulator_url}/upload/storage/v1/b/{bucket}/o",
                      params={"uploadType": "media", "name": name}, data=data, timeout=10).raise_for_status()

    def objects(self, bucket: str, prefix: str = "") -> list[str]:
        import requests
        r = requests.get(f"{self.emulator_url}/storage/v1/b/{bucket}/o", params={"prefix": prefix}, timeout=10)
        r.raise_for_status()
        return sorted(o["name"] for o in r.json().get("items", []))


# ---- the tests' shared set-up ------------------------------------------------------------------------

OBJECTS = ("data/t/part-0.parquet", "data/t/_delta_log/0.json", "data/t-old/part-0.parquet",
           "data/u/part-0.parquet", "data/v/f.csv", "data/free/f.csv", "secret/x")


@pytest.fixture(scope="session")
def gcs():
    """One stand-in for a test session: bucket `lake` (OBJECTS) that the service account `account` may
    use, and bucket `other` that it may not."""
    g = Google().start()
    g.account = g.add_account(new_service_account("shardcat-lake", {"lake"}))
    for bucket in ("lake", "other"):
        g.create_bucket(bucket)
    for name in OBJECTS:
        g.put("lake", name, f"content of {name}".encode())
    g.put("other", "data/t/x", b"other bucket")
    yield g
    g.stop()


@pytest.fixture
def gcs_env(gcs, monkeypatch):
    """The catalog configured for the stand-in's OAuth token endpoint and STS."""
    monkeypatch.setenv("SHARDCAT_GCP_TOKEN_URI", gcs.token_url)
    monkeypatch.setenv("SHARDCAT_GCP_STS_ENDPOINT", gcs.sts_url)
    return gcs


def key_fields(g, account: ServiceAccount | None = None) -> dict:
    """A gcp_service_account_key credential's fields for `account` (the fixture's), at the stand-in's storage."""
    account = account or g.account
    return {"email": account.email, "private_key_id": account.key["private_key_id"],
            "private_key": account.key["private_key"], "endpoint_url": g.storage_url}
