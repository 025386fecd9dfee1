"""Sign-in through an OIDC identity provider (issue 35), against a test identity provider on
loopback: a real JWKS endpoint serving the public half of keys made here. A valid token works as
a bearer token and in the RFC 8693 exchange; a wrong audience, a wrong issuer, an expired token
and a key the JWKS does not publish are refused with 401; the exchange is refused from an issuer
not allowed, and without a configured provider it says so."""

from __future__ import annotations

import json
import time

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from shardcat.cluster.server import ServeConfig, start
from shardcat.governance.oidc import OidcConfig
from tests.conftest import PREFIX
from tests.integration.governance_users import unique

ISSUER = "https://idp.test.invalid/realm"
AUDIENCE = "shardcat-test"
EXCHANGE = "/api/1.0/unity-control/auth/tokens"
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"


class IdentityProvider:
    """Keys made in the test and a JWKS endpoint on loopback publishing the public half of `published`."""

    def __init__(self):
        self.keys = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048) for kid in ("k1", "rogue")}
        self.published = ("k1",)
        self.fetches = 0

    async def jwks(self, request):
        self.fetches += 1
        keys = []
        for kid in self.published:
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return web.json_response({"keys": keys})

    def token(self, *, kid="k1", iss=ISSUER, aud=AUDIENCE, expires_in=300, **claims) -> str:
        now = int(time.time())
        # the provider vouches for the e-mails it signs, as real providers say (email_verified); None: left out
        body = {"iss": iss, "aud": aud, "iat": now, "exp": now + expires_in, "sub": "subject-1",
                "email_verified": True, **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.keys[kid], algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
async def idp():
    provider = IdentityProvider()
    app = web.Application()
    app.router.add_get("/jwks", provider.jwks)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    provider.jwks_url = f"http://127.0.0.1:{runner.addresses[0][1]}/jwks"
    yield provider
    await runner.cleanup()


@pytest.fixture(scope="module")
async def oidc_server(pg_url, tmp_path_factory, idp):
    running = await start(ServeConfig(port=0, data_dir=tmp_path_factory.mktemp("oidc"), db=pg_url,
                                      oidc=OidcConfig((ISSUER,), AUDIENCE, idp.jwks_url)))
    yield running
    await running.stop()


@pytest.fixture
async def alice(oidc_server):
    """A user the identity provider knows by e-mail."""
    name = unique("alice")
    email = f"{name}@example.com"
    store = oidc_server.store
    principal = await store.create_principal(name, "user")
    await store.principals.update(principal.id, {"emails": [{"value": email, "primary": True}]})
    return name, email


async def me(http, url, token):
    async with http.get(url + PREFIX + "/user-info/me", headers={"Authorization": f"Bearer {token}"}) as r:
        return r.status, await r.json(content_type=None)


async def exchange(http, url, subject_token, **form):
    data = {"grant_type": GRANT, "subject_token": subject_token, "subject_token_type": ACCESS,
            "requested_token_type": ACCESS, **form}
    async with http.post(url + EXCHANGE, data=data) as r:
        return r.status, await r.json(content_type=None)


async def test_a_valid_token_signs_in_as_its_principal(oidc_server, idp, alice, http):
    name, email = alice
    status, body = await me(http, oidc_server.url, idp.token(email=email))
    assert status == 200, body
    assert body["name"] == name and body["principal_type"] == "User"


@pytest.mark.parametrize("case", ["audience", "issuer", "expired", "unpublished key", "unknown user", "garbage"])
async def test_refused_tokens_are_401(oidc_server, idp, alice, http, case):
    _, email = alice
    token = {
        "audience": lambda: idp.token(email=email, aud="someone-else"),
        "issuer": lambda: idp.token(email=email, iss="https://evil.test.invalid"),
        "expired": lambda: idp.token(email=email, expires_in=-3600),
        "unpublished key": lambda: idp.token(email=email, kid="rogue"),
        "unknown user": lambda: idp.token(email="nobody-" + email, sub="nobody"),
        "garbage": lambda: "not.a.jwt",
    }[case]()
    status, body = await me(http, oidc_server.url, token)
    assert status == 401, body
    assert body["error_code"] == "UNAUTHENTICATED"
    assert token not in body["message"]
    status, body = await exchange(http, oidc_server.url, token)
    assert status == 401, body


async def test_a_key_signed_with_another_key_but_the_published_kid_is_refused(oidc_server, idp, alice, http):
    _, email = alice
    now = int(time.time())
    forged = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "exp": now + 300, "email": email},
                        idp.keys["rogue"], algorithm="RS256", headers={"kid": "k1"})
    status, body = await me(http, oidc_server.url, forged)
    assert status == 401, body


async def test_token_exchange_gives_a_shardcat_token(oidc_server, idp, alice, http):
    name, email = alice
    status, body = await exchange(http, oidc_server.url, idp.token(email=email))
    assert status == 200, body
    assert body["token_type"] == "Bearer"
    assert body["issued_token_type"] == ACCESS
    assert 0 < body["expires_in"] <= 3600
    assert body["access_token"].startswith("scat_")
    status, who = await me(http, oidc_server.url, body["access_token"])
    assert status == 200, who
    assert who["name"] == name


async def test_token_exchange_refuses_bad_forms(oidc_server, idp, alice, http):
    _, email = alice
    good = idp.token(email=email)
    for form, code in (({"grant_type": "password"}, 400), ({"requested_token_type": "urn:x"}, 400),
                       ({"subject_token_type": "urn:x"}, 400), ({"actor_token": good}, 400)):
        status, body = await exchange(http, oidc_server.url, good, **form)
        assert status == code, (form, body)
        assert body["error_code"] == "INVALID_PARAMETER_VALUE"


async def test_exchange_without_a_provider_says_so(server, http):
    async with http.post(server.url + EXCHANGE, data={"grant_type": GRANT, "subject_token": "x.y.z",
                                                      "subject_token_type": ACCESS}) as r:
        body = await r.json(content_type=None)
    assert r.status == 400, body
    assert "--oidc-issuer" in body["message"]


@pytest.fixture(scope="module")
async def oidc_cluster(pg_url, tmp_path_factory, idp):
    running = await start(ServeConfig(port=0, data_dir=tmp_path_factory.mktemp("oidc-shards"), db=pg_url, shards=1,
                                      oidc=OidcConfig((ISSUER,), AUDIENCE, idp.jwks_url)))
    yield running
    await running.stop()


async def test_the_shards_behind_a_router_verify_the_providers_tokens_too(oidc_cluster, idp, alice, http):
    _, email = alice
    headers = {"Authorization": f"Bearer {idp.token(email=email)}"}
    async with http.get(oidc_cluster.url + PREFIX + "/catalogs", headers=headers) as r:     # forwarded to a shard
        assert r.status == 200, await r.text()
    headers = {"Authorization": f"Bearer {idp.token(email=email, aud='someone-else')}"}
    async with http.get(oidc_cluster.url + PREFIX + "/catalogs", headers=headers) as r:
        assert r.status == 401, await r.text()


async def test_made_up_key_ids_do_not_make_the_server_fetch_the_keys_each_time(oidc_server, idp, alice, http):
    _, email = alice
    status, _ = await me(http, oidc_server.url, idp.token(email=email, kid="rogue"))    # may fetch once
    assert status == 401
    fetches = idp.fetches
    for _ in range(5):
        status, _ = await me(http, oidc_server.url, idp.token(email=email, kid="rogue"))
        assert status == 401
    assert idp.fetches == fetches
    status, _ = await me(http, oidc_server.url, idp.token(email=email))      # the published key still works
    assert status == 200
