"""Lineage: which tables and volumes a job read to write a table, reported by engines and read
back upstream or downstream.

`POST /shardcat/lineage` reports one write: `{"target": "c.s.t", "sources": [{"name": "c.s.a"},
{"name": "c.s.raw", "securable_type": "VOLUME"}, {"path": "s3://..."}], "job": "nightly"}`. The
caller must be allowed to write the target and to read every source, so no one reports lineage
through data they could not have read; a path counts as the table or volume owning it.
shardcat.spark reports every write it makes, from the files the DataFrame read.

`GET /shardcat/lineage?name=c.s.t` answers the edges around a table or volume, upstream,
downstream or both, up to `depth` hops: each (source, target) once, with when it was first and
last reported, how many times, and by which jobs. An asset the caller may not see is `hidden`;
a dropped one keeps the name it had, for admins. Lineage is metadata about assets, not their
state: reporting it does not move the metastore version.
"""

from __future__ import annotations


from ...auth import Caller
from ...entities.urls import InvalidUrl, normalize_url
from ...entities.names import full_name_key
from ...entities.types import TYPES
from ...errors import invalid, not_found
from ...governance import audit
from ...governance.authorize import authorizer
from ...entities.types import VIEW_TYPES
from ..tree.service import CatalogService
from ...shards.shard import Shard
from ...web.kit import json_body, ok
from ...web.routes import Handler, ShardServing

MAX_SOURCES = 1000
MAX_DEPTH = 10
MAX_EDGES = 1000
MAX_JOB_CHARS = 200
_KINDS = {"TABLE": "table", "VOLUME": "volume"}
DIRECTIONS = ("upstream", "downstream", "both")


def _kind(value, where: str) -> str:
    kind = _KINDS.get(value.upper()) if isinstance(value, str) else None
    if kind is None:
        raise invalid(f"{where} must be TABLE or VOLUME, got {value!r:.40}.")
    return kind


def _report(body: dict) -> tuple[str, list[tuple[str, str]], list[str], str | None]:
    """(target full name, source (namespace, key) pairs, source paths, job) of a well-formed report."""
    target = body.get("target")
    if not isinstance(target, str):
        raise invalid("Field 'target' must be the full name of a table.")
    sources = body.get("sources")
    if not isinstance(sources, list) or not 0 < len(sources) <= MAX_SOURCES:
        raise invalid(f"Field 'sources' must be a list of 1 to {MAX_SOURCES} {{\"name\": ...}} or {{\"path\": ...}}.")
    job = body.get("job")
    if job is not None and (not isinstance(job, str) or len(job) > MAX_JOB_CHARS):
        raise invalid(f"Field 'job' must be a string of at most {MAX_JOB_CHARS} characters.")
    names, paths = [], []
    for i, s in enumerate(sources):
        if not isinstance(s, dict) or ("name" in s) == ("path" in s):
            raise invalid(f"sources[{i}] must be an object with exactly one of 'name' or 'path'.")
        if "name" in s:
            kind = _kind(s.get("securable_type", "TABLE"), f"sources[{i}].securable_type")
            if not isinstance(s["name"], str):
                raise invalid(f"sources[{i}].name must be a string.")
            names.append((TYPES[kind].namespace, full_name_key(s["name"], 3, kind)))
        else:
            if not isinstance(s["path"], str):
                raise invalid(f"sources[{i}].path must be a string.")
            try:
                paths.append(normalize_url(s["path"]))
            except InvalidUrl as e:
                raise invalid(f"sources[{i}].path is not valid: {e}") from None
    return full_name_key(target, 3, "table"), names, paths, job


def _depth(value: str | None) -> int:
    if value is None:
        return 1
    if not value.isdecimal() or len(value) > 2 or not 1 <= int(value) <= MAX_DEPTH:
        raise invalid(f"depth must be an integer from 1 to {MAX_DEPTH}, got '{value:.40}'.")
    return int(value)


def _node(asset) -> dict:
    return {"id": asset.id, "securable_type": TYPES[asset.type].securable_type, "full_name": asset.full_name}


class LineageService:
    def __init__(self, shard: Shard):
        self.shard = shard
        self.catalogs = CatalogService(shard)

    async def report(self, caller: Caller, body: dict) -> dict:
        target_name, names, paths, job = _report(body)
        ms = caller.metastore()
        snap = await self.shard.snapshot(ms, [("table", target_name), *names], paths, caller.min_version)
        target = snap.by_name[("table", target_name)]
        missing = not_found(f"Table '{target_name}' does not exist.")
        if target is None:
            raise missing
        audit.annotate("TABLE", target.full_name, target.id)
        authz = await authorizer(self.shard, caller)
        # Authorize before anything names the table or its type; what the caller may not see answers as missing.
        if target.info.get("table_type") not in VIEW_TYPES:
            # into a foreign table too, for who may MODIFY it: written in its foreign system, through shardcat or not
            authz.require_data(target, write=True, missing=missing, passing_through=True)
        elif not authz.sees("table", target):
            raise missing
        else:
            raise invalid(f"'{target.full_name}' is a view: lineage goes into tables.")
        sources = {}
        for key in names:
            asset = snap.by_name[key]
            missing = not_found(f"{key[0].capitalize()} '{key[1]}' does not exist.")
            if asset is None:
                raise missing
            authz.require_data(asset, write=False, missing=missing)
            sources[asset.id] = asset
        for path in paths:
            owner, asset = snap.by_path[path] or (None, None)
            missing = not_found(f"No table or volume owns path '{path}'.")
            if asset is None or owner.is_root or asset.type not in _KINDS.values():
                raise missing
            authz.require_data(asset, write=False, missing=missing)
            sources[asset.id] = asset
        sources.pop(target.id, None)         # a table rewritten from itself adds no edge
        if sources:
            await self.shard.store.add_lineage(ms, target, list(sources.values()), job, caller.name)
        return {"target": _node(target), "sources": [_node(a) for a in sources.values()]}

    async def lineage(self, caller: Caller, query) -> dict:
        if not query.get("name"):
            raise invalid("Query parameter 'name' (a table or volume) is required.")
        kind = _kind(query.get("securable_type", "TABLE"), "securable_type")
        direction = query.get("direction", "both")
        if direction not in DIRECTIONS:
            raise invalid(f"direction must be one of {', '.join(DIRECTIONS)}, got '{direction:.40}'.")
        depth = _depth(query.get("depth"))
        root = await self.catalogs.find(caller, kind, query["name"])
        audit.annotate(kind.upper(), root.full_name, root.id)
        ms = caller.metastore()
        found, truncated = [], False
        for upstream in (True, False):
            if direction == ("downstream" if upstream else "upstream"):
                continue
            frontier, seen = [root.id], {root.id}
            for hop in range(1, depth + 1):
                if not frontier or truncated:
                    break
                edges = await self.shard.store.lineage_edges(ms, frontier, upstream)
                frontier = []
                for e in sorted(edges, key=lambda e: (e["source_name"], e["target_name"])):
                    if len(found) == MAX_EDGES:
                        truncated = True
                        break
                    found.append(("upstream" if upstream else "downstream", hop, e))
                    other = e["source_id"] if upstream else e["target_id"]
                    if other not in seen:
                        seen.add(other)
                        frontier.append(other)
        ids = sorted({i for _, _, e in found for i in (e["source_id"], e["target_id"])})
        current = {a.id: a for a in await self.shard.read(ms, self.shard.store.get_assets_by_keys(ms, [], ids))}
        authz = await authorizer(self.shard, caller)

        def node(asset_id: str, type_name: str, recorded_name: str) -> dict:
            asset = current.get(asset_id)
            if asset is not None and (authz.admin or authz.decide(asset.type, "read", asset).allowed):
                return _node(asset)
            if asset is None and authz.admin:
                return {"id": asset_id, "securable_type": TYPES[type_name].securable_type,
                        "full_name": recorded_name, "deleted": True}
            return {"hidden": True}

        out = {"securable": _node(root), "edges": [
            {"direction": way, "hops": hop, "source": node(e["source_id"], e["source_type"], e["source_name"]),
             "target": node(e["target_id"], "table", e["target_name"]), "first_at": e["first_at"],
             "last_at": e["last_at"], "runs": e["runs"], "jobs": e["jobs"] or []}
            for way, hop, e in found]}
        if truncated:
            out["truncated"] = True
        return out


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = LineageService(shard)

    async def report(request):
        return ok(await service.report(request["caller"], await json_body(request)))

    async def lineage(request):
        return ok(await service.lineage(request["caller"], request.query))

    return {"reportLineage": report, "getLineage": lineage}
