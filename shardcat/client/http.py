"""A small synchronous HTTP client for the Unity Catalog REST API (standard library only).

Where the server and token come from: flags, else $SHARDCAT_URL / $SHARDCAT_TOKEN, else the
local default (http://127.0.0.1:8080 and the admin token file `shardcat serve` writes).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from ..web.wire import PREFIX

DEFAULT_URL = "http://127.0.0.1:8080"
LOOPBACK = {"localhost", "127.0.0.1", "::1"}


class ClientError(Exception):
    """Anything that kept a request from getting an answer: bad configuration, unreachable server."""


class ServerError(ClientError):
    """The server answered with an error: its HTTP status, Unity Catalog error code and message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def admin_token_file() -> Path:
    return Path.home() / ".shardcat" / "admin-token"


def resolve_config(server: str | None, token: str | None) -> tuple[str, str | None]:
    """(API base URL, token) from the flags, the environment, then the local defaults."""
    url = (server or os.environ.get("SHARDCAT_URL") or DEFAULT_URL).rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ClientError(f"server URL must look like http://host:port, got '{url}'")
    if not url.endswith(PREFIX):
        url += PREFIX
    token = token or os.environ.get("SHARDCAT_TOKEN")
    # The local admin token file is only ever sent to a server on this machine.
    if token is None and parsed.hostname in LOOPBACK and admin_token_file().is_file():
        token = admin_token_file().read_text().strip() or None
    return url, token


class Client:
    """Calls one catalog server: `call(method, path, params, body)` returns the parsed JSON answer."""

    def __init__(self, api_url: str, token: str | None, timeout: float = 30.0):
        self.api_url = api_url
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, *, params: dict | None = None, body: dict | None = None) -> dict:
        url = self.api_url + path
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            raise _server_error(e.code, e.read()) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ClientError(f"cannot reach {self.api_url}: {reason}") from None
        return json.loads(raw) if raw.strip() else {}


def _server_error(status: int, raw: bytes) -> ServerError:
    """The server's error JSON `{"error_code", "message"}`; anything else still becomes a readable error."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and ("error_code" in body or "message" in body):
        return ServerError(status, str(body.get("error_code") or f"HTTP_{status}"), str(body.get("message") or ""))
    text = raw.decode("utf-8", "replace").strip()[:200] or "no message"
    return ServerError(status, f"HTTP_{status}", text)
