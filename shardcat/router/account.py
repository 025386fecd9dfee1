"""Account-level handlers the front serves itself: creating and listing metastores, workspace assignment,
and identity (principals, groups, tokens, user-info)."""

from __future__ import annotations


from ..governance.principals import IdentityService
from ..governance.principals_api import PrincipalsApi
from ..web.kit import json_body, ok
from ..web.routes import Handler
from ..catalog.tree.metastores import AccountService
from ..governance.authentication import Authenticator


class AccountApi:
    def __init__(self, account: AccountService, authenticator: Authenticator, exchange=None):
        self.account = account
        self.authenticator = authenticator   # its workspace->metastore cache must see assignment changes
        self.exchange = exchange             # the identity provider's token exchange (governance/oidc.py), if any

    def handlers(self) -> dict[str, Handler]:
        """The account's handlers by operationId (web/registry.py declares their paths)."""
        return {
            "listMetastores": self.list_metastores, "createMetastore": self.create_metastore,
            "assignMetastore": self.put_assignment, "updateMetastoreAssignment": self.patch_assignment,
            "unassignMetastore": self.delete_assignment,
            # home databases (docs/cluster.md): list them, move a metastore between them
            "listDatabases": self.list_databases, "moveMetastore": self.move_metastore,
            # identity: users, groups, service principals, tokens, user-info (shardcat/governance/principals.py)
            **PrincipalsApi(IdentityService(self.account.store, self.authenticator), self.exchange).handlers(),
        }

    async def list_metastores(self, request):
        return ok(await self.account.list(request["caller"]))

    async def create_metastore(self, request):
        return ok(await self.account.create(request["caller"], await json_body(request)))

    async def list_databases(self, request):
        return ok(await self.account.databases(request["caller"]))

    async def move_metastore(self, request):
        return ok(await self.account.move(request["caller"], request.match_info["metastore"], await json_body(request)))

    async def put_assignment(self, request):
        return await self._assign(request, replace=True)

    async def patch_assignment(self, request):
        return await self._assign(request, replace=False)

    async def _assign(self, request, *, replace: bool):
        workspace_id = request.match_info["workspace_id"]
        await self.account.assign(request["caller"], workspace_id, await json_body(request), replace=replace)
        self.authenticator.forget_workspace(int(workspace_id))
        return ok()

    async def delete_assignment(self, request):
        body = await json_body(request)
        workspace_id = request.match_info["workspace_id"]
        metastore_id = request.query.get("metastore_id") or body.get("metastore_id")
        await self.account.unassign(request["caller"], workspace_id, metastore_id)
        self.authenticator.forget_workspace(int(workspace_id))
        return ok()
