"""The Iceberg REST catalog's HTTP handlers by the spec's operationIds: each request read, its operation called,
its answer (or Iceberg's error model) written.
"""

from __future__ import annotations

from aiohttp import web

from ....errors import CatalogError
from ....web.kit import json_body, ok
from ....web.routes import Handler, ShardServing
from ....web.client_address import public_origin
from ....web.iceberg_errors import iceberg_response
from . import idempotency
from .catalog import IcebergCatalog
from .tables import etag
from .errors import IcebergError, iceberg_error, missing


def _error_response(e: IcebergError) -> web.Response:
    return iceberg_response(e.status, e.kind, e.message)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """The Iceberg REST catalog's handlers by the spec's operationIds (and getConfig): web/registry.py
    serves each under each base, with and without a warehouse prefix."""
    shard = serving.shard

    ice = IcebergCatalog(shard)

    def handler(method, operation: str):
        async def answer(request: web.Request) -> web.Response:
            try:
                result = await method(request, request["caller"], request.match_info.get("catalog"))
            except CatalogError as e:
                if e.code == "NOT_OWNER":
                    raise           # shardcat's own shard-to-router signal, answered as everywhere else
                return _error_response(iceberg_error(e))
            except IcebergError as e:
                return _error_response(e)
            if isinstance(result, web.Response):
                return result
            return web.Response(status=204) if result is None else ok(result)

        async def handle(request: web.Request):
            # A mutation with an Idempotency-Key answers its first outcome when sent again (idempotency.py).
            return await idempotency.once(shard.store, request, request["caller"], operation,
                                          lambda: answer(request))
        return handle

    def table(request, warehouse):
        m = request.match_info
        name, levels = m.get("table") or m.get("view") or m.get("function"), ice.namespace(warehouse, m["namespace"])
        if len(levels) != 2:
            # Tables and views live in schemas only, so the table (view) is missing, the answer the spec gives
            # routes that name one. Iceberg's Java client then loads `ns.t.snapshots` as t's metadata table.
            shown = ice.namespace_name(warehouse, levels).spelled
            kind = "View" if "view" in m else "Function" if "function" in m else "Table"
            raise missing(kind, f"{shown}.{name}")
        return ice.table_name(warehouse, m["namespace"], name)

    async def load_table(r, c, w):
        """loadTable with its ETag (304 to a matching If-None-Match), `snapshots`, and remote signing when
        X-Iceberg-Access-Delegation asks for it (the signer: this catalog's base as the client reached it)."""
        snapshots = r.query.get("snapshots", "all")
        if snapshots not in ("all", "refs"):
            raise IcebergError(400, "BadRequestException", "snapshots must be all or refs.")
        delegation = frozenset(m.strip() for m in r.headers.get("X-Iceberg-Access-Delegation", "").split(","))
        raw = r.rel_url.raw_path
        cut = raw.index("/v1/")
        signer = (f"{public_origin(r)}{raw[:cut]}", f"{raw[cut + 1:]}/sign")
        tag, answer = await ice.load_table_tagged(c, table(r, w), snapshots, delegation, signer,
                                                  r.headers.get("If-None-Match"))
        response = web.Response(status=304) if answer is None else ok(answer)
        response.headers["ETag"] = tag
        return response

    def ns(request):
        return request.match_info["namespace"]

    def page(request):
        return request.query.get("pageSize"), request.query.get("pageToken")

    async def config(r, c, w):
        return await ice.config(c, r.query.get("warehouse") or None)

    async def purge(r):
        value = r.query.get("purgeRequested", "false").lower()
        if value not in ("true", "false"):
            raise IcebergError(400, "BadRequestException", "purgeRequested must be true or false.")
        return value == "true"

    handlers = {
        "listNamespaces": lambda r, c, w: ice.list_namespaces(c, w, r.query.get("parent"), *page(r)),
        "createNamespace": lambda r, c, w: _with_body(r, lambda b: ice.create_namespace(c, w, b)),
        "loadNamespaceMetadata": lambda r, c, w: ice.load_namespace(c, w, ns(r)),
        "namespaceExists": lambda r, c, w: _none(ice.load_namespace(c, w, ns(r))),
        "dropNamespace": lambda r, c, w: ice.drop_namespace(c, w, ns(r)),
        "updateProperties": lambda r, c, w: _with_body(r, lambda b: ice.update_properties(c, w, ns(r), b)),
        "listTables": lambda r, c, w: ice.list_tables(c, w, ns(r), *page(r)),
        "createTable": lambda r, c, w: _tagged(_with_body(r, lambda b: ice.create_table(c, w, ns(r), b))),
        "registerTable": lambda r, c, w: _tagged(_with_body(r, lambda b: ice.register_table(c, w, ns(r), b))),
        "registerView": lambda r, c, w: _with_body(r, lambda b: ice.register_view(c, w, ns(r), b)),
        "loadTable": load_table,
        "tableExists": lambda r, c, w: ice.exists(c, table(r, w)),
        "updateTable": lambda r, c, w: _tagged(_with_body(r, lambda b: ice.commit(c, table(r, w), b))),
        "dropTable": lambda r, c, w: _then(purge(r), lambda p: ice.drop(c, table(r, w), p)),
        "loadCredentials": lambda r, c, w: ice.load_credentials(c, table(r, w)),
        "reportMetrics": lambda r, c, w: ice.report_metrics(c, table(r, w)),
        "renameTable": lambda r, c, w: _with_body(r, lambda b: ice.rename(c, w, b)),
        "commitTransaction": lambda r, c, w: _with_body(r, lambda b: ice.transaction(c, w, b)),
        "listViews": lambda r, c, w: ice.list_tables(c, w, ns(r), *page(r), views=True),
        "createView": lambda r, c, w: _with_body(r, lambda b: ice.create_view(c, w, ns(r), b)),
        "loadView": lambda r, c, w: ice.load_view(c, table(r, w)),
        "viewExists": lambda r, c, w: ice.exists(c, table(r, w), view=True),
        "replaceView": lambda r, c, w: _with_body(r, lambda b: ice.replace_view(c, table(r, w), b)),
        "dropView": lambda r, c, w: ice.drop(c, table(r, w), False, view=True),
        "renameView": lambda r, c, w: _with_body(r, lambda b: ice.rename(c, w, b, view=True)),
        "unregisterTable": lambda r, c, w: ice.unregister(c, table(r, w)),
        "planTableScan": lambda r, c, w: _with_body(r, lambda b: ice.plan_scan(c, table(r, w), b)),
        "fetchPlanningResult": lambda r, c, w: ice.fetch_plan(c, table(r, w), r.match_info["plan_id"]),
        "cancelPlanning": lambda r, c, w: ice.cancel_plan(c, table(r, w), r.match_info["plan_id"]),
        "fetchScanTasks": lambda r, c, w: _with_body(r, lambda b: ice.fetch_tasks(c, table(r, w), b)),
        "signRequest": lambda r, c, w: _with_body(r, lambda b: ice.sign_request(c, table(r, w), b)),
        "listFunctions": lambda r, c, w: ice.list_functions(c, w, ns(r), *page(r)),
        "loadFunction": lambda r, c, w: ice.load_function(c, table(r, w)),
    }

    async def _with_body(request, call):
        return await call(await json_body(request))

    return {"getConfig": handler(config, "getConfig"),
            **{name: handler(_call(call), name) for name, call in handlers.items()}}


def _call(call):
    async def run(request, caller, warehouse):
        return await call(request, caller, warehouse)
    return run


async def _tagged(answer) -> web.Response:
    """A table's create, register or commit answer with the ETag its load of all snapshots would have, as the
    spec's CreateTableResponse and CommitTableResponse carry it (a later If-None-Match may send it)."""
    result = await answer
    response = ok(result)
    if "metadata-location" in result:           # a stage-create's answer has none: the table is not made yet
        response.headers["ETag"] = etag(result["metadata-location"], "all", False)
    return response


async def _none(awaitable) -> None:
    await awaitable


async def _then(first, then):
    return await then(await first)
