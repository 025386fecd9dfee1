"""The router's node control endpoint: `POST /shardcat/nodes/{node_id}/drain`, account admins only.

The work is the supervisor's (cluster/ray_cluster.py `drain`); the router app only knows it as
an object with that coroutine, handed in by the process that runs both.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..catalog.tree.metastores import require_account_admin
from ..errors import CatalogError
from ..web.kit import ok
from ..web.routes import Handler


def node_handlers(control: Any | None) -> dict[str, Handler]:
    async def drain(request: web.Request) -> web.Response:
        require_account_admin(request["caller"], "drain a node")
        if control is None:
            raise CatalogError("NOT_FOUND", "This catalog runs no Ray cluster: it has no nodes to drain.")
        try:
            return ok(await control.drain(request.match_info["node_id"]))
        except LookupError as e:
            raise CatalogError("NOT_FOUND", str(e)) from None
        except ValueError as e:
            raise CatalogError("FAILED_PRECONDITION", str(e)) from None
        except TimeoutError as e:
            raise CatalogError("TEMPORARILY_UNAVAILABLE", f"The drain goes on: {e}.") from None

    return {"drainNode": drain}
