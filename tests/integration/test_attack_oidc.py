"""Attacks on the mapping of an identity provider's token to a principal (issue 42, item 16): a
validly signed token from an allowed issuer whose claims the signer did not vouch for, or that
name a local principal by its plain name.

An identity provider signs what its users typed in as well as what it checked: an `email` the user
entered and never confirmed (`email_verified` false or absent), a `sub` that is only the provider's
opaque id for the user. Neither may name a local principal it was not bound to: the `email` claim
maps only when verified and only to a principal holding that e-mail address (among its e-mails, or
as its name when its name is that address); `sub` maps only to the principal whose externalId
binds it (the bare `sub` with one issuer allowed, `<issuer>#<sub>` with any), never to a plain
name like `admin`. Tried with several users (an account admin, a plain user, a service principal,
a user named by its e-mail), several spellings of each claim, both surfaces (the token as a
bearer token, and exchanged for a shardcat token), and a server that allows two issuers.
"""

from __future__ import annotations

import pytest

from governance_users import unique
from shardcat.cluster.server import ServeConfig, start
from shardcat.governance.oidc import OidcConfig
from test_oidc import AUDIENCE, ISSUER, exchange, idp, me, oidc_server  # noqa: F401 (fixtures)

OTHER_ISSUER = "https://other-idp.test.invalid/realm"


@pytest.fixture(scope="module")
async def two_issuers(pg_url, tmp_path_factory, idp):
    running = await start(ServeConfig(port=0, data_dir=tmp_path_factory.mktemp("oidc-two"), db=pg_url,
                                      oidc=OidcConfig((ISSUER, OTHER_ISSUER), AUDIENCE, idp.jwks_url)))
    yield running
    await running.stop()


async def principal(server, name: str, kind: str = "user", **fields) -> str:
    made = await server.store.create_principal(name, kind)
    if fields:
        await server.store.principals.update(made.id, fields)
    return name


async def signs_in_as(server, http, token: str) -> str | None:
    """The principal the token signs in as, on both surfaces (they must agree); None: refused (401)."""
    status, body = await me(http, server.url, token)
    assert status in (200, 401), body
    exchanged, answer = await exchange(http, server.url, token)
    assert exchanged == status, (answer, body)
    if status == 401:
        assert body["error_code"] == "UNAUTHENTICATED"
        return None
    return body["name"]


@pytest.fixture
async def people(oidc_server):
    """bob: a plain user (no e-mail); alice: a user with an e-mail; svc: a service principal;
    carol@...: a user named by its e-mail address; ext: a user bound to subject `<ext>-sub`."""
    bob = await principal(oidc_server, unique("bob"))
    alice = unique("alice")
    await principal(oidc_server, alice, emails=[{"value": f"{alice}@example.com"}])
    svc = await principal(oidc_server, unique("svc"), "service_principal")
    carol = await principal(oidc_server, unique("carol") + "@example.com")
    ext = unique("ext")
    await principal(oidc_server, ext, external_id=f"{ext}-sub")
    return {"bob": bob, "alice": alice, "svc": svc, "carol": carol, "ext": ext}


@pytest.mark.parametrize("verified", [None, False, "false", 0, "yes"])
async def test_an_unverified_email_names_no_one(oidc_server, idp, http, people, verified):
    alice, carol = people["alice"], people["carol"]
    for email in (f"{alice}@example.com", carol):
        claims = {"email": email, "sub": unique("nobody"), "email_verified": verified}     # None: left out
        assert await signs_in_as(oidc_server, http, idp.token(**claims)) is None
        assert await signs_in_as(oidc_server, http, idp.token(**{**claims, "email_verified": True})) == \
            (alice if email.startswith(alice) else carol)


@pytest.mark.parametrize("victim", ["admin", "bob", "svc", "ext"])
async def test_a_verified_email_claim_equal_to_a_plain_name_signs_in_as_no_one(oidc_server, idp, http, people,
                                                                               victim):
    name = "admin" if victim == "admin" else people[victim]
    for verified in (True, "true", None):
        claims = {"email": name, "sub": unique("nobody"), "email_verified": verified}
        assert await signs_in_as(oidc_server, http, idp.token(**claims)) is None, (name, verified)


@pytest.mark.parametrize("victim", ["admin", "bob", "svc", "carol", "alice email"])
async def test_a_sub_equal_to_a_name_or_an_email_signs_in_as_no_one(oidc_server, idp, http, people, victim):
    name = {"admin": "admin", "alice email": f"{people['alice']}@example.com"}.get(victim) or people[victim]
    assert await signs_in_as(oidc_server, http, idp.token(sub=name)) is None
    # Nor with an e-mail claim that names no one beside it.
    assert await signs_in_as(oidc_server, http, idp.token(sub=name, email="x@nowhere.invalid",
                                                          email_verified=True)) is None


async def test_the_sub_signs_in_by_the_external_id_that_binds_it(oidc_server, idp, http, people):
    ext = people["ext"]
    assert await signs_in_as(oidc_server, http, idp.token(sub=f"{ext}-sub")) == ext
    assert await signs_in_as(oidc_server, http, idp.token(sub=ext)) is None          # its name is not a subject
    # A verified e-mail wins over the subject, as the e-mail claim is the one configured.
    alice = people["alice"]
    assert await signs_in_as(oidc_server, http, idp.token(sub=f"{ext}-sub", email=f"{alice}@example.com",
                                                          email_verified=True)) == alice
    # Unverified: the e-mail is ignored and the subject decides.
    assert await signs_in_as(oidc_server, http, idp.token(sub=f"{ext}-sub", email=f"{alice}@example.com",
                                                          email_verified=False)) == ext


async def test_with_two_issuers_a_subject_is_bound_to_its_issuer(two_issuers, idp, http):
    """One issuer's subject is not another's: with several issuers allowed, the externalId names
    the issuer too (`<issuer>#<sub>`); the bare subject binds nothing."""
    bare, bound = unique("bare"), unique("bound")
    await principal(two_issuers, bare, external_id="shared-sub")
    await principal(two_issuers, bound, external_id=f"{ISSUER}#shared-sub")
    assert await signs_in_as(two_issuers, http, idp.token(sub="shared-sub")) == bound
    assert await signs_in_as(two_issuers, http, idp.token(sub="shared-sub", iss=OTHER_ISSUER)) is None
    assert await signs_in_as(two_issuers, http, idp.token(sub="admin", iss=OTHER_ISSUER)) is None
