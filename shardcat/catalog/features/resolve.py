"""Batched resolve: everything an engine needs for a query, from one metastore snapshot.

An engine sends the names (three-level: tables and views, and every other three-level
type the manifests define) and storage paths a query touches, with the operation for
each; one `Shard.snapshot` answers them all, and the response names that version. A
problem with one item (a bad name, a missing table) is reported on that item alone.
Views and functions are expanded into what they depend on, at the same version
(catalog/tree/dependencies.py); `if_changed_since` lets a caller revalidate its copy cheaply.
Every allowed item that touches data (a table's, a volume's or a path's owning asset's
storage; for a view, each base table among its dependencies) gets temporary credentials for
that storage, read-only or read-write as its operation asks, from the same vending function
as the temporary-credentials endpoints (governance/vending.py); `"credentials": false` skips
them. A credential that cannot be vended is that item's `temporary_credentials_error`.
"""

from __future__ import annotations

import asyncio
import functools

from ...auth import Caller
from ...entities.asset import name_today
from ...entities.urls import InvalidUrl, is_within, normalize_url
from ...entities.names import full_name_key
from ...entities.types import TYPES
from ...errors import CatalogError, invalid
from ...governance import audit
from ...governance.authorize import authorizer, data_decision
from ...governance.vending import vend
from ...entities.values import now_ms
from ..tree.dependencies import (MAX_DEPTH, DependencyError, SnapshotMoved, closure, dependency_entry, depends_on,
                           VIEW_TYPES, expand)
from ..tree.assets import present
from ...shards.shard import Shard

MAX_ITEMS = 1000
OPERATIONS = ("READ", "WRITE")
EXPAND_ATTEMPTS = 5


@functools.cache
def _resolvable() -> dict:
    """Securable type -> manifest, for the three-level types an engine can name."""
    return {t.securable_type: t for t in TYPES.values() if t.name_parts == 3 and t.name != "staging_table"}


def _max_depth(body: dict) -> int:
    depth = body.get("max_depth", MAX_DEPTH)
    if not isinstance(depth, int) or isinstance(depth, bool) or not 0 <= depth <= MAX_DEPTH:
        raise invalid(f"max_depth must be an integer from 0 to {MAX_DEPTH}, got {depth!r:.40}.")
    return depth


def _error(code: str, message: str) -> dict:
    return {"error_code": code, "message": message}


class ResolveService:
    def __init__(self, shard: Shard, federation=None):
        self.shard = shard
        self.federation = federation    # tree/foreign.py: a foreign catalog's tables fetched before they resolve
        # metastore id -> counters, read through GET /resolve/stats (tests and benchmarks count calls)
        self.stats: dict[str, dict[str, int]] = {}

    def stats_of(self, caller: Caller) -> dict:
        counts = self.stats.get(caller.metastore(), {"resolve_calls": 0, "items": 0, "dependencies": 0})
        return {"metastore_id": caller.metastore(), **counts}

    def _count(self, caller: Caller, out: list[dict]) -> None:
        counts = self.stats.setdefault(caller.metastore(), {"resolve_calls": 0, "items": 0, "dependencies": 0})
        counts["resolve_calls"] += 1
        counts["items"] += len(out)
        counts["dependencies"] += sum(len(e.get("dependencies", ())) for e in out)

    async def resolve(self, caller: Caller, body: dict) -> dict:
        max_depth, with_credentials, items = _request(body)
        names, paths = [], []
        out = [_start_item(i, item, names, paths) for i, item in enumerate(items)]
        authz = await authorizer(self.shard, caller)
        if self.federation is not None:
            for namespace, key in names:
                if namespace == "table":
                    await self.federation.before_read(caller, "table", key, False)
        for _ in range(EXPAND_ATTEMPTS):
            snap = await self.shard.snapshot(caller.metastore(), names, paths, caller.min_version)
            try:
                deps = await self._expand(caller, snap, names, body, max_depth)
                break
            except SnapshotMoved:   # the metastore changed between expansion levels: start again
                continue
        else:
            raise CatalogError("RESOURCE_CONFLICT", "The metastore is changing too fast; try the request again.")
        for entry in out:
            key = entry.pop("_key", None)
            if key is not None:
                since = entry.pop("_since", None)
                asset = snap.by_name[key]
                decision = None if asset is None else _seen(authz, entry, asset)
                if decision is None:
                    entry["error"] = _error("NOT_FOUND", f"{entry['securable_type'].capitalize()} "
                                                         f"'{entry['name']}' does not exist.")
                    continue
                if deps is not None:
                    self._add_dependencies(entry, key, deps, max_depth, authz, caller, with_credentials)
                self._authorized(authz, caller, entry, asset, with_credentials, decision)
                if since is not None:
                    self._unchanged(entry, asset, deps, since)
            elif "_path" in entry:
                path = entry.pop("_path")
                self._path_answer(entry, snap.by_path[path], authz, caller, with_credentials,
                                  lambda: self.shard.states[caller.metastore()].storage_root, path)
        if with_credentials:
            await self._credentials(caller, out)
        audit.record_all(caller, _decisions(out))
        self._count(caller, out)
        return {"metastore_id": caller.metastore(), "metastore_version": snap.version, "items": out}

    # ---- temporary credentials for the storage each allowed item touches ----

    async def _credentials(self, caller: Caller, out: list[dict]) -> None:
        """`temporary_credentials` (or `temporary_credentials_error`) on every item and dependency
        that `_authorized` marked with the storage it may touch. One vend per distinct (path,
        mode) in the request; file:// answers are built inline (no task, one clock read), the
        others (STS, served from the vending cache when unexpired) concurrently."""
        targets = []
        for entry in out:
            for item in (entry, *entry.get("dependencies", ())):
                url = item.pop("_storage", None)
                if url is not None and "error" not in item:
                    targets.append((item, url, item["operation"] == "WRITE"))
        if not targets:
            return
        now = now_ms()
        wanted = dict.fromkeys((url, write) for _, url, write in targets)
        found = {}
        remote = []
        for key in wanted:
            if key[0].startswith("file:"):
                found[key] = await self._vend_one(caller, *key, now)
            else:
                remote.append(key)
        if remote:
            found.update(zip(remote, await asyncio.gather(*(self._vend_one(caller, *k, now) for k in remote))))
        for item, url, write in targets:
            field_name, value = found[(url, write)]
            item[field_name] = value

    async def _vend_one(self, caller: Caller, url: str, write: bool, now: int) -> tuple[str, dict]:
        try:
            return "temporary_credentials", await vend(self.shard, caller, url, write=write, now=now)
        except CatalogError as e:       # this item's credential only: the rest of the batch stands
            return "temporary_credentials_error", _error(e.code, e.message)

    # ---- view and function dependencies (catalog/tree/dependencies.py) ----

    async def _expand(self, caller: Caller, snap, names: list, body: dict, max_depth: int):
        """The dependency graph of every named asset, from the snapshot's version; None if the
        request asked for no expansion (`"expand_dependencies": false`)."""
        if body.get("expand_dependencies", True) is False:
            return None
        roots = {k: snap.by_name.get(k) for k in names}
        authz = await authorizer(self.shard, caller)
        return await expand(self.shard, caller.metastore(), snap.version, roots, caller.min_version, max_depth,
                            governed=authz.governed)

    def _add_dependencies(self, entry: dict, key, nodes: dict, max_depth: int, authz, caller: Caller,
                          with_credentials: bool) -> None:
        """`dependencies` (deepest first) and `depends_on` on an item, or its error naming the culprit.
        Each dependency carries the caller's own READ decision, and its asset only if allowed."""
        node = nodes[key]
        entry["depends_on"] = depends_on(node)
        if not node.deps and node.error is None:
            return                      # a plain table: nothing to expand or check
        try:
            order = closure(key, nodes, max_depth)
        except DependencyError as e:
            entry["error"] = _error(e.code, e.message)
            return
        if order:
            entry["dependencies"] = []
            for k in order:
                dep = dependency_entry(k, nodes[k])
                self._authorized(authz, caller, dep, nodes[k].asset, with_credentials)
                entry["dependencies"].append(dep)

    @staticmethod
    def _unchanged(entry: dict, asset, nodes, since: int) -> None:
        """With `if_changed_since` v (the version the caller's copy was taken at): `"unchanged": true`
        instead of the assets when neither the asset nor any dependency was written after v. The
        decisions stay: they are taken fresh on every call."""
        if "error" in entry:
            return
        newest = asset.written_at
        for dep in entry.get("dependencies", ()):
            node = nodes[("function" if dep["securable_type"] == "FUNCTION" else "table", dep["name"])]
            newest = max(newest, node.asset.written_at)
        if newest > since:
            return
        entry["unchanged"] = True
        for item in (entry, *entry.get("dependencies", ())):
            for kind in ("table", "volume", "function", "registered_model"):
                item.pop(kind, None)

    @staticmethod
    def _authorized(authz, caller: Caller, entry: dict, asset, with_credentials: bool, decision=None) -> None:
        """The item's authorization decision, taken at the snapshot's version (governance/authorize.py);
        the asset (row filter and column masks for trusted engines only) only if allowed: a denied
        item carries no storage details. An allowed table (not a view) or volume with storage is
        marked for credentials (`_credentials`) when the request wants them."""
        decision = decision or data_decision(authz, asset, write=entry["operation"] == "WRITE")
        entry["authorization"] = decision.json()
        entry["_id"] = asset.id         # for the audit row (_decisions)
        if decision.allowed:
            entry[asset.type] = present(asset, caller, authz)      # with ABAC policies in place, for this caller
            if with_credentials and asset.storage_path and (asset.type == "volume" or (
                    asset.type == "table" and asset.info.get("table_type") not in VIEW_TYPES)):
                entry["_storage"] = asset.storage_path
            elif with_credentials and name_today(asset) is None and asset.info.get("storage_location"):
                # read at a past version and dropped since: no storage of its own today to vend for
                entry["temporary_credentials_error"] = _error(
                    "NOT_FOUND", f"{asset.type.capitalize()} '{asset.full_name}' was dropped since: it has no "
                                 "storage today, and credentials are only vended for today's storage.")

    def _path_answer(self, entry: dict, owned, authz, caller: Caller, with_credentials: bool, root, path: str) -> None:
        owner, asset = owned if owned is not None else (None, None)
        decision = None if owner is None or owner.is_root or asset is None else _seen(authz, entry, asset)
        if decision is None:
            # The same answer whether nothing owns the path or something the caller may not see does:
            # it names no catalog, schema or asset, only the metastore whose managed storage holds it.
            storage_root = root()
            where = "; it lies in the metastore's managed storage" \
                if storage_root and is_within(path, storage_root) else ""
            entry["error"] = _error("NOT_FOUND", f"No table or volume owns path '{entry['path']}'{where}.")
            return
        entry.update(name=asset.full_name, securable_type=TYPES[asset.type].securable_type)
        self._authorized(authz, caller, entry, asset, with_credentials, decision)


def _seen(authz, entry: dict, asset):
    """The item's decision if it may be answered as what it is: allowed, or denied to a caller that
    may know the asset exists (governance/authorize.py `Authz.sees`). None: it answers as a missing
    one; the refusal is kept for the audit row (`_refused`), which tells the truth."""
    decision = data_decision(authz, asset, write=entry["operation"] == "WRITE")
    if decision.allowed or authz.sees(asset.type, asset):
        return decision
    entry["_refused"] = (asset.id, decision.reason)
    return None


# ---- the audit trail ---------------------------------------------------------------------------

_CREDENTIAL_ACTIONS = {"TABLE": "generateTemporaryTableCredentials", "VOLUME": "generateTemporaryVolumeCredentials"}


def _decisions(out: list[dict]) -> list[tuple]:
    """The audit rows of a resolve, as `audit.AccessDecision` fields: one per item and dependency
    (`resolveRead` or `resolveWrite`, allowed or why not, or the item's error), and one per
    credential handed out or refused, under the action its own endpoint records: what the same
    calls one by one would leave in the log. Takes the `_id` marks (`_authorized`) off the answer."""
    rows = []
    for entry in out:
        for item in (entry, *entry.get("dependencies", ())):
            kind, name, asset_id = item.get("securable_type"), item.get("name", item.get("path")), item.pop("_id", None)
            action = "resolveWrite" if item["operation"] == "WRITE" else "resolveRead"
            refused = item.pop("_refused", None)
            if refused is not None:      # answered as missing: the log says who was refused what
                rows.append((action, kind, name, False, refused[0], "PERMISSION_DENIED",
                             refused[1]))
                continue
            error = item.get("error")
            if error is not None:
                code = error["error_code"]
                rows.append((action, kind, name, code != "PERMISSION_DENIED", asset_id, code, error["message"]))
                continue
            decision = item["authorization"]
            if decision["allowed"]:
                rows.append((action, kind, name, True, asset_id, None, None))
            else:
                rows.append((action, kind, name, False, asset_id, "PERMISSION_DENIED", decision.get("reason")))
            refused = item.get("temporary_credentials_error")
            if refused is not None:
                code = refused["error_code"]
                rows.append((_CREDENTIAL_ACTIONS[kind], kind, name, code != "PERMISSION_DENIED", asset_id, code,
                             refused["message"]))
            elif "temporary_credentials" in item:
                rows.append((_CREDENTIAL_ACTIONS[kind], kind, name, True, asset_id, None, None))
    return rows


# ---- the request -------------------------------------------------------------------------------

_STRING_FIELDS = frozenset({"name", "path", "securable_type", "operation"})
_ABSENT = object()


def _request(body: dict) -> tuple[int, bool, list]:
    """(max_depth, credentials wanted, items) of a well-formed request; INVALID_PARAMETER_VALUE otherwise."""
    max_depth = _max_depth(body)
    with_credentials = body.get("credentials", True)
    if not isinstance(with_credentials, bool):
        raise invalid("Field 'credentials' must be true or false.")
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise invalid("Field 'items' must be a non-empty list of {\"name\": ...} or {\"path\": ...} objects.")
    if len(items) > MAX_ITEMS:
        raise invalid(f"At most {MAX_ITEMS} items per resolve request, got {len(items)}.")
    return max_depth, with_credentials, items


def _start_item(i: int, item, names: list, paths: list) -> dict:
    """The answer to items[i] as far as the request says, with its lookup key (`_key`, also added
    to `names`) or normalised path (`_path`, also added to `paths`). A malformed item fails the
    whole request; a name or path that cannot be looked up is that item's error alone."""
    if not isinstance(item, dict) or ("name" in item) == ("path" in item):
        raise invalid(f"items[{i}] must be an object with exactly one of 'name' or 'path'.")
    for field_name in _STRING_FIELDS.intersection(item):
        if not isinstance(item[field_name], str):
            raise invalid(f"items[{i}].{field_name} must be a string.")
    since = item.get("if_changed_since", _ABSENT)
    if since is not _ABSENT and (not isinstance(since, int) or isinstance(since, bool) or since < 0):
        raise invalid(f"items[{i}].if_changed_since must be a metastore version (an integer >= 0).")
    operation = item.get("operation", "READ")
    if operation not in OPERATIONS:
        operation = operation.upper()
        if operation not in OPERATIONS:
            raise invalid(f"items[{i}].operation must be READ or WRITE, got {item['operation']!r:.40}.")
    entry = {"operation": operation}
    try:
        if "name" in item:
            entry["name"] = item["name"]
            entry["securable_type"], key = _lookup_key(item.get("securable_type", "TABLE"), item["name"])
            entry["_key"] = key
            names.append(key)
            if since is not _ABSENT:
                entry["_since"] = since
        else:
            entry["path"] = item["path"]
            try:
                entry["_path"] = normalize_url(item["path"])
            except InvalidUrl as e:
                raise invalid(f"Invalid path: {e}") from None
            paths.append(entry["_path"])
    except CatalogError as e:
        entry["error"] = _error(e.code, e.message)
    return entry


@functools.lru_cache(maxsize=65536)
def _lookup_key(securable_type: str, name: str) -> tuple[str, tuple[str, str]]:
    """(securable type as answered, snapshot key) of a named item; cached, because engines name the
    same tables over and over. Raises INVALID_PARAMETER_VALUE for an unknown type or a bad name."""
    t = _resolvable().get(securable_type.upper())
    if t is None:
        raise invalid(f"securable_type must be one of {', '.join(sorted(_resolvable()))}, got {securable_type!r:.40}.")
    return t.securable_type, (t.namespace, full_name_key(name, 3, t.name))
