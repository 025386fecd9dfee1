"""The Unity Catalog REST endpoints a shard serves, as aiohttp routes over its services.

Handlers only translate HTTP to service calls: the caller (set by the auth
middleware) and path, query and body in; JSON out. Errors are raised as
CatalogError and rendered by the error middleware.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from aiohttp import web

from ..errors import CatalogError, invalid
from ..governance.authorize import authorizer
from ..governance.audit import APP_KEY as AUDIT_KEY
from ..governance.audit import AuditLog
from ..governance.audit_api import audit_handlers
from ..governance.audit import annotate as annotate_audit
from ..governance.audit import middleware as audit_middleware
from ..openapi import openapi_handlers
from ..governance.authentication import Authenticator
from ..governance.index import answering
from ..web.middleware import error_middleware, text_input
from ..entities.types import TYPES
from ..store.errors import MetastoreGone
from ..catalog.protocols.openlineage import dropped_table_dependents
from ..entities.names import full_name_key
from ..catalog.tree.metastores import MetastoreService
from ..catalog.features.resolve import ResolveService
from ..catalog.features.versions import start_purging, versions_middleware
from ..catalog.tree.assets import presented_json, presented_page
from ..catalog.tree.service import CatalogService
from ..web.kit import encode_json
from ..web.destinations import allowed_host
from ..entities.values import bigint_text
from ..shards.session import Session
from ..shards.session import current as current_session
from ..shards.shard import MetastoreState, Shard
from ..web import registry
from ..web.kit import flag, healthz, json_body, json_object, ok, ok_json, required_query
from ..web.routes import Handler, routes
from ..web.metrics import OBSERVED, Observed
from .metrics import probe_handlers
from ..web.explorer import explorer_handlers
from ..web.wire import MAX_BODY_BYTES, MIN_VERSION_HEADER, VERSION_HEADER

# The catalog tree's types with create, list, get, update and delete endpoints (createCatalog,
# listCatalogs, getCatalog...), and the query parameters naming a list's parent.
PARENTS = {"catalog": (), "schema": ("catalog_name",), "table": ("catalog_name", "schema_name"),
           "volume": ("catalog_name", "schema_name")}


def _crud() -> tuple[tuple[str, str, str, tuple[str, ...]], ...]:
    """(type, path segment, the item's path parameter, the list's parent query parameters) of each,
    the path the registry's: getCatalog's /catalogs/{name} gives "catalogs" and "name"."""
    out = []
    for type_name, parents in PARENTS.items():
        segment, parameter = registry.operation(f"get{type_name.capitalize()}").path.strip("/").split("/")
        out.append((type_name, segment, parameter.strip("{}"), parents))
    return tuple(out)


CRUD = _crud()      # the shard's front answers their gets and lists itself (serving/front.py)


async def found_json(catalogs: CatalogService, caller, type_name: str, full_name: str) -> bytes:
    """A get's answer: the asset as this caller may see it."""
    asset = await catalogs.find(caller, type_name, full_name)
    # a trusted engine gets the ABAC policies that govern a table for it (governance/abac.py)
    return presented_json(asset, caller, await authorizer(catalogs.shard, caller) if caller.trusted_engine else None)


async def listed_json(catalogs: CatalogService, caller, type_name: str, parent: str | None, max_results: str | None,
                      page_token: str | None) -> bytes:
    """A list's answer: a page of the children the caller may see, and the next page's token."""
    page, next_token = await catalogs.list_page(caller, type_name, parent, max_results, page_token)
    head = b'{"' + TYPES[type_name].list_key.encode() + b'":['
    tail = b'],"next_page_token":' + encode_json(next_token) + b"}" if next_token else b"]}"
    if not page:
        return head + tail
    # The members' encoded bytes, joined with one copy of the whole page (orjson would grow its
    # buffer, copying it again each time, and then copy the result).
    authz = await authorizer(catalogs.shard, caller) if caller.trusted_engine and type_name == "table" else None
    items = presented_page(page, caller, authz)
    items[0] = head + items[0]
    items[-1] = items[-1] + tail
    return b",".join(items)


async def resolved_json(resolver: ResolveService, caller, raw: bytes) -> bytes:
    """A batched resolve's answer to the request body `raw`."""
    return encode_json(await resolver.resolve(caller, json_object(raw)))


class ShardApi:
    """Handlers for one metastore's own fields, its catalogs, schemas, tables, staging tables and summaries."""

    def __init__(self, catalogs: CatalogService, metastores: MetastoreService):
        self.catalogs = catalogs
        self.metastores = metastores

    def handlers(self) -> dict[str, Handler]:
        out = {"getMetastore": self.get_metastore, "updateMetastore": self.update_metastore,
               "deleteMetastore": self.delete_metastore, "summary": self.metastore_summary,
               "createStagingTable": self.create_staging_table, "listTableSummaries": self.table_summaries}
        for type_name, _, key, parents in CRUD:
            out |= self._crud(type_name, key, parents)
        return out

    def _crud(self, type_name: str, key: str, parents: tuple[str, ...]) -> dict[str, Handler]:
        catalogs = self.catalogs

        async def create(request):
            return ok(await catalogs.create(request["caller"], type_name, await json_body(request)))

        async def list_(request):
            parent = ".".join(required_query(request, q) for q in parents) if parents else None
            return ok_json(await listed_json(catalogs, request["caller"], type_name, parent,
                                             request.query.get("max_results"), request.query.get("page_token")))

        async def get(request):
            return ok_json(await found_json(catalogs, request["caller"], type_name, request.match_info[key]))

        async def update(request):
            return ok(await catalogs.update(request["caller"], type_name, request.match_info[key],
                                            await json_body(request)))

        async def delete(request):
            caller = request["caller"]
            dependents = None
            if type_name == "table":      # what depends on it, by lineage, is answered once it is gone
                dropped = await catalogs.shard.lookup(caller.metastore(), "table",
                                                      full_name_key(request.match_info[key], 3, "table"),
                                                      caller.min_version)
                # Read before the drop, not after: nothing may fail once it is done. Read after, it
                # failed NOT_OWNER when the metastore moved meanwhile, and the router sent the drop,
                # done, to the new owner, which answered 404 (issue 33).
                if dropped is not None:
                    dependents = await dropped_table_dependents(catalogs.shard, caller, dropped)
            await catalogs.delete(caller, type_name, request.match_info[key], flag(request, "force"))
            return ok({"dependents": dependents}) if dependents else ok()

        noun = type_name.capitalize()
        return {f"create{noun}": create, f"list{noun}s": list_, f"get{noun}": get, f"update{noun}": update,
                f"delete{noun}": delete}

    # ---- metastores ---------------------------------------------------------

    async def get_metastore(self, request):
        return ok(await self.metastores.get(request["caller"], request.match_info["id"]))

    async def update_metastore(self, request):
        return ok(await self.metastores.update(request["caller"], request.match_info["id"], await json_body(request)))

    async def delete_metastore(self, request):
        await self.metastores.delete(request["caller"], request.match_info["id"], flag(request, "force"))
        return ok()

    async def metastore_summary(self, request):
        return ok(await self.metastores.summary(request["caller"]))

    # ---- tables ---------------------------------------------------------------

    async def create_staging_table(self, request):
        return ok(await self.catalogs.create_staging_table(request["caller"], await json_body(request)))

    async def table_summaries(self, request):
        return ok(await self.catalogs.table_summaries(request["caller"], await json_body(request)))


# ---- the request's session (shards/session.py): entered by the audit middleware, the app's first,
# or by the front answering a request itself; these are the rules both follow.

def session_caller(caller, min_version: str | None):
    """The session's caller: reading at least the metastore version its min-version header names
    (session consistency across shards); a clear 400 for a header that is not a non-negative integer."""
    if min_version is None:
        return caller
    version = bigint_text(min_version)
    if version is None:
        raise invalid(f"{MIN_VERSION_HEADER} must be a non-negative integer, got '{min_version:.40}'.")
    return caller.reading_at_least(version)


def _metastore_session(shard: Shard):
    """Session consistency across shards: the session's caller reads at least the client's min
    version, and the answer reports the version it was served at (or its write made)."""

    @web.middleware
    async def middleware(request: web.Request, handler):
        caller = request.get("caller")
        if caller is None:
            return await handler(request)
        session = current_session()
        request["caller"] = session.caller = caller = session_caller(caller, request.headers.get(MIN_VERSION_HEADER))
        # Held across the handler: if the metastore moves to another shard meanwhile, the answer
        # still reports the version it was served at (the router and clients need it).
        before = shard.states.get(caller.metastore_id) if caller.metastore_id else None
        try:
            response = await handler(request)
        except MetastoreGone as e:
            # Deleted under the request, or a workspace assignment still cached: NOT_FOUND, and forget it.
            shard.drop(str(e.args[0]))
            raise CatalogError("NOT_FOUND", f"Metastore '{e.args[0]}' does not exist.") from None
        except CatalogError as e:
            raise after_written(e, session) from None
        version = answered_version(shard, session, before)
        if version is not None:
            response.headers[VERSION_HEADER] = str(version)
        return response

    return middleware


def answered_version(shard: Shard, session: Session, before: MetastoreState | None) -> int | None:
    """The metastore version a request's answer reports: the one its write made (a later write of
    its group may be applied too), else `served_version`."""
    if session.written_version is not None:
        return session.written_version
    return served_version(shard, session.caller.metastore_id, before)


def after_written(error: CatalogError, session: Session) -> CatalogError:
    """What a request answers for `error`, raised once its write may have been applied (its version
    in the session's `written_version`): NOT_OWNER tells the router that nothing was done here, and
    it sends the request to the owner: never so for a write this request applied (the metastore
    moved after it)."""
    written = session.written_version
    if error.code != "NOT_OWNER" or written is None:
        return error
    return CatalogError("TEMPORARILY_UNAVAILABLE",
                        f"The write was applied at metastore version {written}, but the metastore moved "
                        "to another shard before its answer was made; read it back there.")


def served_version(shard: Shard, metastore_id: str | None, before: MetastoreState | None) -> int | None:
    """The metastore version an answer reports: the shard's now, else (the metastore moved to
    another shard meanwhile) the one it was served at, `before` being its state then."""
    version = shard.version_of(metastore_id) if metastore_id else None
    if version is None and before is not None and before.version >= 0:
        version = before.version
    return version


@dataclass(frozen=True)
class Serving:
    """What a front standing before the shard app answers with (serving/front.py)."""
    shard: Shard
    authenticator: Authenticator
    catalogs: CatalogService
    resolver: ResolveService
    audit_log: AuditLog
    max_body_bytes: int = MAX_BODY_BYTES     # the app's limit (413 above it)
    webhook_allow_hosts: frozenset[str] = frozenset()    # reached although not public (web/destinations.py)


SERVING = web.AppKey("serving", Serving)


def fast_writes(serving: Serving) -> dict:
    """The creates of the catalog tree's types, for the shard's front to make itself (serving/front.py):
    (method, path) -> work(caller, body) -> the answer, as the app's handlers make them."""
    catalogs = serving.catalogs
    return {("POST", f"/{path}"): (lambda caller, body, type_name=type_name: catalogs.create(caller, type_name, body))
            for type_name, path, _, _ in CRUD}


def shard_handlers(serving: Serving) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths):
    a metastore's own fields, the catalog tree's types, staging tables, table summaries, and the
    batched resolve."""
    resolver = serving.resolver

    async def resolve(request):
        annotate_audit(None, None)      # a batch names many securables: its items carry their decisions
        return ok_json(await resolved_json(resolver, request["caller"], await request.read()))

    async def resolve_stats(request):
        return ok(resolver.stats_of(request["caller"]))

    api = ShardApi(serving.catalogs, MetastoreService(serving.shard))
    return {**api.handlers(), "resolve": resolve, "resolveStats": resolve_stats}


def _privileges_on_demand(shard: Shard):
    """A request deciding from a partial privilege index (a cold owner of a large metastore) is
    answered again once what it asked about is loaded (governance/index.py `answering`)."""

    @web.middleware
    async def middleware(request: web.Request, handler):
        return await answering(shard, current_session(), lambda: handler(request))

    return middleware


def make_shard_app(shard: Shard, authenticator: Authenticator, *, extra_handlers=None,
                   max_body_bytes: int = MAX_BODY_BYTES, webhook_allow_hosts=()) -> web.Application:
    """The API app over one shard: audit, error JSON, authentication, the shard's routes (and, with
    `extra_handlers`, the account's: the one-process app)."""
    audit_log = AuditLog(shard.store)
    app = web.Application(
        middlewares=[audit_middleware(audit_log), error_middleware(max_body_bytes), authenticator.middleware,
                     text_input, _metastore_session(shard), versions_middleware(shard), _privileges_on_demand(shard)],
        client_max_size=max_body_bytes)
    app[AUDIT_KEY] = audit_log
    app.on_startup.append(audit_log.start)
    app.on_cleanup.append(audit_log.stop)
    purge_start, purge_stop = start_purging(shard)      # the history's retention (catalog/features/versions.py)
    app.on_startup.append(purge_start)
    app.on_cleanup.append(purge_stop)
    catalogs = CatalogService(shard)
    serving = Serving(shard, authenticator, catalogs, ResolveService(shard, catalogs.federation), audit_log,
                      max_body_bytes, frozenset(map(allowed_host, webhook_allow_hosts)))
    app[SERVING] = serving
    app[OBSERVED] = Observed()      # the front before the app counts into it; /metrics reads it
    # The app's own handlers (probes, the document, the explorer, the audit log; the account's in one
    # process), then those of each module the endpoint registry names for the shard's endpoints.
    # Which endpoints there are, and in what order, is the registry's; this function names no module.
    own = {"healthz": healthz, **openapi_handlers(), **probe_handlers(shard, audit_log),
           **explorer_handlers(authenticator.identity_provider), **audit_handlers(audit_log), **(extra_handlers or {})}
    handlers = {None: own, **{module: import_module(f"shardcat.{module}").shard_handlers(serving)
                              for module in registry.modules(registry.SHARD)}}
    app.add_routes(routes(registry.SHARD, handlers, extra=registry.ACCOUNT if extra_handlers else None))
    return app
