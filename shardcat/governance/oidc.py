"""Sign-in through an OIDC identity provider: an allowed issuer's signed JWT, verified against the
issuer's published keys (JWKS, fetched and cached by PyJWT), names a shardcat principal by its
e-mail (or, failing that, by its subject); the token then authenticates requests as that
principal, or is exchanged for a shardcat token (RFC 8693, `POST /api/1.0/unity-control/auth/tokens`
with a form, as the open-source Unity Catalog server does). Tokens shardcat mints are unchanged.

Which claims may name a principal (a provider signs what its users typed in as well as what it
checked): the `email` claim only when the provider verified it (`email_verified`) and only as an
e-mail address, matched to a principal's e-mails or to a name that is that address; the `sub`
only to the principal whose externalId binds it to its issuer (`<issuer>#<sub>`, or the bare `sub`
when one issuer is allowed), never to a plain name such as `admin`.

Checked: the issuer is one configured (before any key is fetched: a token cannot make the server
fetch from an address of its choosing), the signature with the issuer's key of the token's `kid`
(asymmetric algorithms only), the audience, the expiry (and not-before). Refusals are 401s that
say which check failed, never echoing the token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.request
from dataclasses import dataclass

import jwt
from jwt import PyJWKClient

from ..auth import hash_token, new_token
from ..errors import CatalogError, invalid
from ..store.db import Store
from ..store.principals import Identity
from ..entities.values import now_ms

log = logging.getLogger(__name__)

GRANT_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
JWT_TOKEN = "urn:ietf:params:oauth:token-type:jwt"
SUBJECT_TOKEN_TYPES = (ACCESS_TOKEN, ID_TOKEN, JWT_TOKEN)
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_SECONDS = 30           # clock skew allowed between the identity provider and this server
JWKS_CACHE_SECONDS = 300      # how long fetched keys are kept
JWKS_REFRESH_SECONDS = 30     # an unknown `kid` fetches the keys again (rotation), at most this often per issuer
FETCH_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class OidcConfig:
    """`shardcat serve --oidc-issuer ... --oidc-audience ...`."""
    issuers: tuple[str, ...]              # allowed issuers (the tokens' `iss`, exactly)
    audience: str                         # this server's client id / audience at the provider
    jwks_url: str | None = None           # the issuers' JWKS; None: from each issuer's discovery document
    claim: str = "email"                  # the claim naming the principal (then `sub`)
    workspace_id: int = 1                 # the workspace a signed-in user acts in (the default one)
    token_lifetime: int = 3600            # seconds an exchanged shardcat token lives
    client_id: str | None = None          # the explorer's public client at the provider (its login, with PKCE)


def unauthenticated(message: str) -> CatalogError:
    return CatalogError("UNAUTHENTICATED", message)


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith("scat_")


class OidcVerifier:
    """Verifies identity providers' tokens and finds their principals."""

    def __init__(self, config: OidcConfig, store: Store):
        if not config.issuers or not config.audience:
            raise ValueError("OIDC needs at least one issuer and an audience")
        self.config = config
        self.store = store
        self._jwks: dict[str, PyJWKClient] = {}
        self._discovery: dict | None = None     # the first issuer's discovery document, once read
        self._refreshed: dict[str, float] = {}  # issuer -> when an unknown key id last fetched its keys

    async def sign_in_settings(self) -> dict:
        """What the explorer needs to sign in through the provider's login page (authorization code
        with PKCE, a public client): its endpoints and client id; {} without a client id."""
        if not self.config.client_id:
            return {}
        issuer = self.config.issuers[0]
        if self._discovery is None:
            self._discovery = await asyncio.to_thread(_discover, issuer)
        return {"issuer": issuer, "client_id": self.config.client_id, "scope": "openid email profile",
                "authorization_endpoint": self._discovery["authorization_endpoint"],
                "token_endpoint": self._discovery["token_endpoint"]}

    async def _jwks_client(self, issuer: str) -> PyJWKClient:
        client = self._jwks.get(issuer)
        if client is None:
            url = self.config.jwks_url or (await asyncio.to_thread(_discover, issuer))["jwks_uri"]
            client = self._jwks[issuer] = PyJWKClient(url, cache_keys=True, lifespan=JWKS_CACHE_SECONDS,
                                                      timeout=FETCH_TIMEOUT_SECONDS)
        return client

    async def claims(self, token: str) -> dict:
        """The verified claims of an allowed issuer's token; a 401 saying what failed otherwise."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise unauthenticated("The identity provider's token is not a well-formed JWT.") from None
        issuer = unverified.get("iss")
        if not isinstance(issuer, str) or issuer not in self.config.issuers:
            raise unauthenticated("The token's issuer is not an allowed identity provider.")
        if header.get("alg") not in ALGORITHMS:
            raise unauthenticated("The token's signing algorithm is not accepted (asymmetric keys only).")
        client = await self._jwks_client(issuer)
        try:
            key = await asyncio.to_thread(self._signing_key, issuer, client, header.get("kid"))
        except jwt.PyJWKClientConnectionError:
            log.warning("oidc: cannot fetch the JWKS of %s", issuer)
            raise CatalogError("TEMPORARILY_UNAVAILABLE",
                               "The identity provider's keys cannot be fetched; try again shortly.") from None
        except jwt.PyJWTError:
            raise unauthenticated("The token is not signed by a key the identity provider publishes.") from None
        try:
            return jwt.decode(token, key.key, algorithms=list(ALGORITHMS), audience=self.config.audience,
                              issuer=issuer, leeway=LEEWAY_SECONDS, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise unauthenticated("The identity provider's token has expired.") from None
        except jwt.InvalidAudienceError:
            raise unauthenticated("The token is not meant for this server (wrong audience).") from None
        except jwt.InvalidSignatureError:
            raise unauthenticated("The token's signature does not verify.") from None
        except jwt.PyJWTError as e:
            raise unauthenticated(f"The identity provider's token is not valid: {type(e).__name__}.") from None

    def _signing_key(self, issuer: str, client: PyJWKClient, kid) -> jwt.PyJWK:
        """The issuer's key `kid` (blocking: run in a thread). A key id not among the cached keys
        fetches them again (the provider rotated its keys), but not more often than
        JWKS_REFRESH_SECONDS: tokens with made-up key ids cannot make the server hammer the provider."""
        if not isinstance(kid, str):
            raise jwt.PyJWKClientError("the token names no key id")
        for refresh in (False, True):
            if refresh:
                if time.monotonic() - self._refreshed.get(issuer, -JWKS_REFRESH_SECONDS) < JWKS_REFRESH_SECONDS:
                    break
                self._refreshed[issuer] = time.monotonic()
            for key in client.get_signing_keys(refresh=refresh):
                if key.key_id == kid:
                    return key
        raise jwt.PyJWKClientError(f"no key {kid!r:.40} in the issuer's JWKS")

    async def identity(self, token: str) -> Identity:
        """The principal an identity provider's token names, as authentication yields it."""
        claims = await self.claims(token)
        found = await self.store.principals.identity_for_login(self._named(claims), self._subjects(claims),
                                                               self.config.workspace_id)
        if found is None:
            raise unauthenticated("No active shardcat user or service principal matches the identity "
                                  "provider's token (by verified e-mail or by the subject its externalId binds).")
        exp = claims.get("exp")
        expires_at = int(exp * 1000) if isinstance(exp, (int, float)) else None
        return Identity(found.principal_id, found.name, found.is_account_admin, found.trusted_engine,
                        found.workspace_id, found.groups, expires_at)

    def _named(self, claims: dict) -> str | None:
        """The configured claim's value, where it may name a principal: the `email` claim only when
        the provider verified it, and only an e-mail address (so it never meets a plain name)."""
        value = claims.get(self.config.claim)
        if not isinstance(value, str) or not value:
            return None
        if self.config.claim == "email" and not (_verified(claims.get("email_verified")) and "@" in value):
            return None
        return value

    def _subjects(self, claims: dict) -> list[str]:
        """The externalIds that bind the token's subject: `<issuer>#<sub>`, and the bare `sub` when
        one issuer is allowed (with several, one issuer's subject could be another's)."""
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return []
        return [f"{claims['iss']}#{subject}", *([subject] if len(self.config.issuers) == 1 else [])]

    async def exchange(self, form) -> dict:
        """RFC 8693 token exchange: an identity provider's token in, a shardcat token out."""
        grant = form.get("grant_type")
        if grant != GRANT_TOKEN_EXCHANGE:
            raise invalid(f"Unsupported grant_type; expected {GRANT_TOKEN_EXCHANGE}.")
        requested = form.get("requested_token_type") or ACCESS_TOKEN
        if requested != ACCESS_TOKEN:
            raise invalid(f"Unsupported requested_token_type; only {ACCESS_TOKEN} is issued.")
        if form.get("subject_token_type") not in SUBJECT_TOKEN_TYPES:
            raise invalid("'subject_token_type' must be one of " + ", ".join(SUBJECT_TOKEN_TYPES) + ".")
        if form.get("actor_token") or form.get("actor_token_type"):
            raise invalid("Delegation (actor_token) is not supported.")
        subject_token = form.get("subject_token")
        if not subject_token:
            raise invalid("Missing 'subject_token'.")
        who = await self.identity(subject_token)
        secret = new_token()
        lifetime = self.config.token_lifetime
        await self.store.principals.create_token(who.principal_id, hash_token(secret), who.workspace_id,
                                                 "exchanged for an identity provider's token",
                                                 now_ms() + lifetime * 1000)
        return {"access_token": secret, "issued_token_type": ACCESS_TOKEN, "token_type": "Bearer",
                "expires_in": lifetime}


def _verified(flag) -> bool:
    """`email_verified` as providers send it: a JSON true (some send the string "true")."""
    return flag is True or (isinstance(flag, str) and flag.lower() == "true")


def _discover(issuer: str) -> dict:
    """An issuer's OpenID discovery document (blocking: run in a thread)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as answer:
            document = json.loads(answer.read())
        for key in ("jwks_uri", "authorization_endpoint", "token_endpoint"):
            if not isinstance(document.get(key), str):
                raise ValueError(f"no {key}")
        return document
    except Exception as e:
        log.warning("oidc: no discovery document at %s: %r", url, e)
        raise CatalogError("TEMPORARILY_UNAVAILABLE",
                           "The identity provider's discovery document cannot be read; try again shortly.") from None
