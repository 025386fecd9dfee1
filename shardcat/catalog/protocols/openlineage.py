"""OpenLineage: lineage from any engine, and Databricks' lineage-tracking API to read it back.

`POST /openlineage/api/v1/lineage` takes the RunEvents the `openlineage-python` client's HTTP
transport posts, unchanged: configure it with `url=<server>/api/2.1/unity-catalog/openlineage/`
and `auth={"type": "api_key", "apiKey": <a shardcat token>}` (the principal is the token's).
Without the trailing slash the client's URL joining drops the last segment and posts to
`/api/2.1/unity-catalog/api/v1/lineage`; that path takes the same events.

A COMPLETE event records, for each output dataset that is a catalog table, an edge from each
input (the same store as `POST /shardcat/lineage`, catalog/features/lineage.py: one lineage model), and
its `columnLineage` facet's column edges. Other event types are accepted and change nothing.
A dataset maps to a catalog asset by name (a namespace that is not a URL, or the catalog service's
own URL `scheme://host:port`, and a name `catalog.schema.table`) or by storage path (namespace
`s3://bucket`, `file`, ..., joined with the name), through the URL trie: the table or volume owning
the path, the same rule as access by path; a `symlinks` facet names it only where the dataset has no
path of its own (openlineage_datasets.py has the rules). Datasets that map to no asset, or to one the caller may not see, are answered in
`unmapped` and not recorded (the same answer: it tells no one which names exist or which paths a
table owns). As for `POST /shardcat/lineage`, the caller must be allowed to write every output and
read every input it sees.

`GET /api/2.0/lineage-tracking/table-lineage?table_name=` and `/column-lineage?table_name=&column_name=`
answer the direct upstreams and downstreams, shaped like Databricks'; `GET /shardcat/lineage`
walks the graph to a depth. Assets the caller may not read are `{"hidden": true}`, never named.
"""

from __future__ import annotations


from ...auth import Caller
from ...entities.types import TYPES
from ...errors import invalid
from ...governance import audit
from ...governance.authorize import authorizer
from ...shards.shard import Shard
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing
from ...web.client_address import public_origin
from ...entities.types import VIEW_TYPES
from ..features.lineage import MAX_JOB_CHARS, MAX_SOURCES
from ..tree.service import CatalogService
from .openlineage_datasets import dataset_ref, origin, symlinks

RECORDED = ("COMPLETE",)
MAX_FIELDS = 10_000


def _dataset(d, where: str) -> tuple[str, str]:
    if not isinstance(d, dict) or not isinstance(d.get("namespace"), str) or not isinstance(d.get("name"), str):
        raise invalid(f"{where} must be a dataset with string 'namespace' and 'name'.")
    return d["namespace"], d["name"]


def _column_fields(d: dict, where: tuple[str, str]) -> dict[str, list]:
    """An output's columnLineage facet as {output column: [input fields]}, or INVALID_PARAMETER_VALUE."""
    facets = d.get("facets") or {}
    if not isinstance(facets, dict):
        raise invalid(f"The facets of '{where[1]:.100}' must be an object.")
    facet = facets.get("columnLineage")
    fields = (facet or {}).get("fields") if isinstance(facet, dict) or facet is None else None
    if fields is None and facet is None:
        return {}
    if not isinstance(fields, dict) or len(fields) > MAX_FIELDS:
        raise invalid(f"The columnLineage facet of '{where[1]:.100}' must map at most {MAX_FIELDS} fields.")
    out = {}
    for col, spec in fields.items():
        inputs_of = spec.get("inputFields") if isinstance(spec, dict) else None
        if not isinstance(inputs_of, list) or not all(isinstance(f, dict) for f in inputs_of):
            raise invalid(f"columnLineage field '{col:.100}' must have a list of inputFields.")
        out[col] = inputs_of
    return out


class OpenLineageService:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.catalogs = CatalogService(shard)

    async def intake(self, caller: Caller, event: dict, own: frozenset[str] = frozenset()) -> dict:
        """Record a COMPLETE event's lineage; `own`: the origins the catalog answers at (its URL names its tables)."""
        event_type = event.get("eventType")
        if event_type is not None and not isinstance(event_type, str):
            raise invalid("eventType must be a string (START, RUNNING, COMPLETE, ABORT, FAIL or OTHER).")
        inputs, outputs = event.get("inputs") or [], event.get("outputs") or []
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) + len(outputs) > MAX_SOURCES:
            raise invalid(f"inputs and outputs must be lists of at most {MAX_SOURCES} datasets in all.")
        job = event.get("job") or {}
        job_name = job.get("name") if isinstance(job, dict) and isinstance(job.get("name"), str) else None
        job_name = job_name[:MAX_JOB_CHARS] if job_name else None
        ins = [_dataset(d, f"inputs[{i}]") for i, d in enumerate(inputs)]
        outs = [_dataset(d, f"outputs[{i}]") for i, d in enumerate(outputs)]
        column_facets = [(o, _column_fields(d, o)) for o, d in zip(outs, outputs)]
        # every dataset the event names, inputs of column lineage included
        named = list(dict.fromkeys(ins + outs + [
            _dataset(f, "columnLineage.inputFields[]") for _, fields in column_facets for inputs_of in fields.values()
            for f in inputs_of]))
        if event_type not in RECORDED:
            return {"recorded": False, "eventType": event_type}
        refs = {d: dataset_ref(*d, own) for d in named}
        # A symlink names a dataset that has no name or path of its own here (openlineage_datasets.py).
        linked = {d: [r for r in (dataset_ref(*link, own) for link in symlinks(raw)) if r and r[0] == "name"]
                  for d, raw in zip(ins + outs, inputs + outputs) if refs.get(d) is None}
        names = [r[1] for r in [*refs.values(), *(r for rs in linked.values() for r in rs)] if r and r[0] == "name"]
        paths = [r[1] for r in refs.values() if r and r[0] == "path"]
        ms = caller.metastore()
        snap = await self.shard.snapshot(ms, names, paths, caller.min_version)
        authz = await authorizer(self.shard, caller)
        assets, unmapped = {}, []
        for d, ref in refs.items():
            asset = None
            if ref and ref[0] == "name":
                asset = snap.by_name.get(ref[1])
            elif ref:
                owner, found = snap.by_path.get(ref[1]) or (None, None)
                asset = None if owner is None or owner.is_root else found
            else:
                asset = next((snap.by_name[r[1]] for r in linked.get(d, []) if snap.by_name.get(r[1])), None)
            # what the caller may not see maps to nothing, exactly as a name or path nothing owns
            if asset is None or asset.type not in ("table", "volume") or not authz.sees(asset.type, asset):
                unmapped.append({"namespace": d[0], "name": d[1]})
                continue
            assets[d] = asset
        for d in outs:
            if d in assets:
                target = assets[d]
                if target.type != "table" or target.info.get("table_type") in VIEW_TYPES:
                    raise invalid(f"Output '{d[1]:.100}' is a {target.type}: lineage goes into tables.")
                authz.require_data(target, write=True)
        for d, asset in assets.items():
            if d not in outs:
                authz.require_data(asset, write=False)
        sources = [assets[d] for d in ins if d in assets]
        recorded, columns = [], []
        for d in outs:
            target = assets.get(d)
            if target is None:
                continue
            audit.annotate("TABLE", target.full_name, target.id)
            froms = list({a.id: a for a in sources if a.id != target.id}.values())
            if froms:
                await self.shard.store.add_lineage(ms, target, froms, job_name, caller.name)
            recorded.append({"target": target.full_name, "sources": [a.full_name for a in froms]})
        for o, fields in column_facets:
            target = assets.get(o)
            if target is None:
                continue
            for out_col, inputs_of in fields.items():
                for f in inputs_of:
                    src = assets.get(_dataset(f, "inputFields[]"))
                    if src is not None and isinstance(f.get("field"), str) and f["field"]:
                        columns.append((src, f["field"], target, out_col))
        if columns:
            await self.shard.store.add_column_lineage(ms, columns, job_name, caller.name)
        return {"recorded": True, "lineage": recorded, "column_edges": len(columns), "unmapped": unmapped}

    # ---- reading it back: Databricks' lineage-tracking API -----------------------------------

    async def _visible(self, caller: Caller, ids: list[str]):
        ms = caller.metastore()
        current = {a.id: a for a in await self.shard.read(ms, self.shard.store.get_assets_by_keys(ms, [], ids))}
        authz = await authorizer(self.shard, caller)

        def shown(asset_id: str):
            asset = current.get(asset_id)
            if asset is not None and (authz.admin or authz.decide(asset.type, "read", asset).allowed):
                return asset
            return None
        return shown

    async def table_lineage(self, caller: Caller, query) -> dict:
        name = query.get("table_name")
        if not name:
            raise invalid("Query parameter 'table_name' is required.")
        root = await self.catalogs.find(caller, "table", name)
        ms = caller.metastore()
        up = await self.shard.store.lineage_edges(ms, [root.id], True)
        down = await self.shard.store.lineage_edges(ms, [root.id], False)
        shown = await self._visible(caller, [e["source_id"] for e in up] + [e["target_id"] for e in down])

        def entry(asset_id: str, at: int) -> dict:
            asset = shown(asset_id)
            if asset is None:
                return {"hidden": True}
            c, s, t = asset.full_name.split(".")
            info = {"name": t, "catalog_name": c, "schema_name": s, "lineage_timestamp": at}
            if asset.type == "volume":
                return {"volumeInfo": info}
            return {"tableInfo": {**info, "table_type": asset.info.get("table_type")}}

        return {"upstreams": [entry(e["source_id"], e["last_at"]) for e in up],
                "downstreams": [entry(e["target_id"], e["last_at"]) for e in down]}

    async def column_lineage(self, caller: Caller, query) -> dict:
        name, column = query.get("table_name"), query.get("column_name")
        if not name or not column:
            raise invalid("Query parameters 'table_name' and 'column_name' are required.")
        root = await self.catalogs.find(caller, "table", name)
        ms = caller.metastore()
        up = await self.shard.store.column_lineage_edges(ms, root.id, column, True)
        down = await self.shard.store.column_lineage_edges(ms, root.id, column, False)
        shown = await self._visible(caller, [e["source_id"] for e in up] + [e["target_id"] for e in down])

        def entry(asset_id: str, col: str, at: int) -> dict:
            asset = shown(asset_id)
            if asset is None:
                return {"hidden": True}
            c, s, t = asset.full_name.split(".")
            return {"name": col, "catalog_name": c, "schema_name": s, "table_name": t,
                    "table_type": asset.info.get("table_type", TYPES[asset.type].securable_type),
                    "lineage_timestamp": at}

        return {"upstream_cols": [entry(e["source_id"], e["source_column"], e["last_at"]) for e in up],
                "downstream_cols": [entry(e["target_id"], e["target_column"], e["last_at"]) for e in down]}


    async def dependents(self, caller: Caller, asset) -> list[dict]:
        """What lineage says was written from `asset` (a table about to be dropped): those tables by
        name, or `{"hidden": true}` for those the caller may not read (`asset` itself too: it is going)."""
        down = await self.shard.store.lineage_edges(caller.metastore(), [asset.id], False)
        shown = await self._visible(caller, [e["target_id"] for e in down])
        out = []
        for e in sorted(down, key=lambda e: e["target_name"]):
            found = shown(e["target_id"]) if e["target_id"] != asset.id else None
            out.append({"full_name": found.full_name, "securable_type": "TABLE"} if found else {"hidden": True})
        return out


async def dropped_table_dependents(shard: Shard, caller: Caller, asset) -> list[dict]:
    """The tables lineage records as written from a table about to be dropped (DELETE /tables answers
    them once it is gone: read before, so that nothing can fail after the drop is done)."""
    return await OpenLineageService(shard).dependents(caller, asset)


LINEAGE_TRACKING = "/api/2.0/lineage-tracking"


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = OpenLineageService(shard)

    async def intake(request):
        # The catalog's own URL as the client reached it: its origin names this catalog's tables.
        own = frozenset(o for o in (origin(public_origin(request)),) if o)
        return ok(await service.intake(request["caller"], await json_body(request), own))

    async def table_lineage(request):
        return ok(await service.table_lineage(request["caller"], request.query))

    async def column_lineage(request):
        return ok(await service.column_lineage(request["caller"], request.query))

    return {"reportOpenLineage": intake, "getTableLineage": table_lineage, "getColumnLineage": column_lineage}
