"""HTTP routes of identity, served by the fronts (the in-process app and the Ray router), never by shards.

    GET  /api/2.1/unity-catalog/user-info/me            the caller (2.1 spec GetMyInfoResp + shardcat fields)
    GET  /api/2.1/unity-catalog/user-info/my-groups     {"group_names": [...]}, transitive
    /api/1.0/unity-control/scim2/{Users,Groups,ServicePrincipals}[/{id}]   SCIM 2.0: GET POST PUT PATCH DELETE
    GET  /api/1.0/unity-control/scim2/Me                the caller as a SCIM resource
    POST/GET /api/1.0/unity-control/auth/tokens, GET/DELETE .../auth/tokens/{token_id}   personal access tokens
    POST /api/1.0/unity-control/auth/logout            the open-source logout: expires a UC_TOKEN cookie

SCIM answers are `application/scim+json`; SCIM errors carry the SCIM error fields (schemas,
status, detail) beside shardcat's usual error_code and message.
"""

from __future__ import annotations

import functools

from aiohttp import web

from ..errors import CatalogError, invalid
from ..web.kit import json_body, ok
from ..web.routes import Handler
from .principals import ERROR_SCHEMA, RESOURCES, SCIM_PREFIX, IdentityService

SCIM_TYPE = "application/scim+json"


def _scim_json(data: dict, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, content_type=SCIM_TYPE)


def _scim(handler):
    """SCIM content type on the way out, and SCIM's error fields on failures."""

    @functools.wraps(handler)
    async def wrapped(self, request):
        try:
            return await handler(self, request)
        except CatalogError as e:
            body = {**e.to_json(), "schemas": [ERROR_SCHEMA], "status": str(e.status), "detail": e.message}
            if e.code == "ALREADY_EXISTS":
                body["scimType"] = "uniqueness"
            elif e.status == 400:
                body["scimType"] = "invalidValue"
            return _scim_json(body, e.status)

    return wrapped


class PrincipalsApi:
    def __init__(self, identity: IdentityService, exchange=None):
        self.identity = identity
        self.exchange = exchange    # governance/oidc.py OidcVerifier, when an identity provider is configured

    def handlers(self) -> dict[str, Handler]:
        """Identity's handlers by operationId (web/registry.py declares their paths)."""
        out = {"getCurrentUser": self.user_info, "getCurrentUserGroups": self.my_groups, "scimMe": self.scim_me,
               "createToken": self.create_token, "listTokens": self.list_tokens, "getToken": self.get_token,
               "revokeToken": self.revoke_token, "logout": self.logout}
        for plural in RESOURCES:        # Users, Groups, ServicePrincipals
            one = plural[:-1]
            out |= {f"list{plural}": self.scim_list, f"create{one}": self.scim_create, f"get{one}": self.scim_get,
                    f"replace{one}": self.scim_replace, f"patch{one}": self.scim_patch,
                    f"delete{one}": self.scim_delete}
        return out

    @staticmethod
    def _resource(request):
        # /api/1.0/unity-control/scim2/<Resource>[/<id>]
        return RESOURCES[request.path[len(SCIM_PREFIX) + 1:].split("/")[0]]

    async def user_info(self, request):
        return ok(await self.identity.user_info(request["caller"]))

    async def my_groups(self, request):
        return ok(self.identity.my_groups(request["caller"]))

    @_scim
    async def scim_me(self, request):
        return _scim_json(await self.identity.me_scim(request["caller"]))

    @_scim
    async def scim_list(self, request):
        return _scim_json(await self.identity.list(request["caller"], self._resource(request), request.query))

    @_scim
    async def scim_create(self, request):
        body = await json_body(request)
        return _scim_json(await self.identity.create(request["caller"], self._resource(request), body), 201)

    @_scim
    async def scim_get(self, request):
        return _scim_json(await self.identity.get(request["caller"], self._resource(request),
                                                  request.match_info["id"]))

    @_scim
    async def scim_replace(self, request):
        body = await json_body(request)
        return _scim_json(await self.identity.replace(request["caller"], self._resource(request),
                                                      request.match_info["id"], body))

    @_scim
    async def scim_patch(self, request):
        body = await json_body(request)
        return _scim_json(await self.identity.patch(request["caller"], self._resource(request),
                                                    request.match_info["id"], body))

    @_scim
    async def scim_delete(self, request):
        await self.identity.delete(request["caller"], self._resource(request), request.match_info["id"])
        return ok()

    async def create_token(self, request):
        if request.content_type == "application/x-www-form-urlencoded":
            # RFC 8693 token exchange, as the open-source server does: an identity provider's token in
            # the form, a shardcat token out (governance/oidc.py). No bearer token is asked for it.
            if self.exchange is None:
                raise invalid("OAuth token exchange is not supported without an identity provider, and none is configured "
                              "(shardcat serve --oidc-issuer ... --oidc-audience ...). Send JSON "
                              "{\"lifetime_seconds\": ..., \"comment\": ...} with a bearer token to make a token.")
            return ok(await self.exchange.exchange(await request.post()))
        return ok(await self.identity.create_token(request["caller"], await json_body(request)))

    async def list_tokens(self, request):
        return ok(await self.identity.list_tokens(request["caller"], request.query))

    async def get_token(self, request):
        return ok(await self.identity.get_token(request["caller"], request.match_info["token_id"]))

    async def logout(self, request):
        """The open-source server's logout: it expires the browser's UC_TOKEN cookie and leaves
        bearer tokens alone. shardcat sets no cookie, so this only expires one a client may hold;
        revoking a token is DELETE .../auth/tokens/{token_id}."""
        response = ok()
        response.set_cookie("UC_TOKEN", "", max_age=0, path="/", httponly=True, samesite="Lax")
        return response

    async def revoke_token(self, request):
        await self.identity.revoke_token(request["caller"], request.match_info["token_id"])
        return ok()
