"""Who decides a path-based request: the asset that owns the path (docs/design.md invariant 7).

Every endpoint that reaches storage by a URL rather than by a name (temporary path
credentials, `GET /files`) authorizes through `authorize_path`, so governance by path and
by name cannot differ: a path inside a table or volume needs the same privileges as the
table or volume by name; a path in managed storage (a catalog's, schema's or the
metastore's root) is reached only through its tables and volumes; a path that no asset
owns is governed by its external location's READ FILES / WRITE FILES; a registered model's storage
is read by path with EXECUTE and written only by version (the version API knows which are still
pending). Credentials for a path reach everything below it too, so `authorize_subtree` asks the
same of each table and volume there (a listing shows one level of names only, and needs no more).
`url` is canonical.
"""

from __future__ import annotations

from ...auth import Caller
from ...errors import CatalogError, not_found
from ...governance import audit
from ...governance.authorize import authorizer, require_data_access
from ...shards.locations import location_of, outside_locations
from ...shards.shard import MetastoreState, Shard


def refuse_managed_root(state: MetastoreState, url: str) -> None:
    """PERMISSION_DENIED if `url` lies in managed storage outside any table or volume in it
    (whose it is stays unsaid: the caller may not see that catalog or schema)."""
    owner = state.trie.owner(url)
    if owner is not None and owner[1].is_root:
        raise CatalogError("PERMISSION_DENIED", f"The url '{url}' lies in managed storage: ask by table or volume name.")


async def owner_label(shard: Shard, caller: Caller, owner) -> str:
    """How an answer names the asset owning a path: by name if the caller may see it, else
    without a name (a refusal tells no one what exists)."""
    if owner.type == "metastore":
        return "the metastore"
    asset = await shard.lookup_id(caller.metastore(), owner.asset_id, caller.min_version)
    if asset is not None and (await authorizer(shard, caller)).sees(asset.type, asset):
        return f"{owner.type} '{owner.full_name}'"
    return "a securable the caller may not see"


async def authorize_path(shard: Shard, caller: Caller, state: MetastoreState, url: str, *, write: bool) -> None:
    """Raise unless `caller` may read (or with `write` change) what lies at `url`, by the rule above."""
    refuse_managed_root(state, url)
    ms = caller.metastore()
    if state.trie.owner(url) is not None:
        owner, asset = (await shard.snapshot(ms, [], [url], caller.min_version)).by_path[url]
        if asset is None:
            raise not_found(f"The {owner.type} owning '{url}' no longer exists.")
        audit.annotate(asset.type.upper(), asset.full_name, asset.id)
        await require_data_access(shard, caller, asset, write=write, missing=CatalogError(
            "PERMISSION_DENIED", f"'{url}' lies in the storage of a securable the caller may not see."))
        if write and asset.type == "registered_model":
            # Only the version API knows whether a version is still pending (a READY version's files are fixed).
            raise CatalogError("PERMISSION_DENIED", f"'{url}' lies in registered model '{asset.full_name}': write a "
                                                    "version's files through /temporary-model-version-credentials.")
        return
    location = location_of(state, url)
    if location is None:
        raise CatalogError("PERMISSION_DENIED", f"No table, volume or external location owns '{url}'.")
    asset = await shard.lookup(ms, "external_location", location.full_name, caller.min_version)
    if asset is None:
        raise not_found(f"External location '{location.full_name}' no longer exists.")
    audit.annotate("EXTERNAL_LOCATION", asset.full_name, asset.id)
    # A location the caller may not see answers as if no location held the url.
    await require_data_access(shard, caller, asset, write=write, missing=outside_locations(url, "url"))


async def authorize_subtree(shard: Shard, caller: Caller, state: MetastoreState, url: str, *, write: bool) -> None:
    """Raise unless `caller` may read (write) every table and volume below `url`, as by name;
    managed storage below `url` is refused, as at it."""
    below = list(state.trie.descendants(url))
    if not below:
        return
    for entry_url, owner in below:
        if owner.is_root:
            raise CatalogError("PERMISSION_DENIED", f"The url '{url}' holds managed storage (at '{entry_url}'): "
                                                    "ask by table or volume name.")
    snapshot = await shard.snapshot(caller.metastore(), [], [u for u, _ in below], caller.min_version)
    for entry_url, _ in below:
        found = snapshot.by_path[entry_url]
        if found is not None and found[1] is not None:
            await require_data_access(shard, caller, found[1], write=write, missing=CatalogError(
                "PERMISSION_DENIED", f"'{entry_url}' below '{url}' lies in the storage of a securable the caller "
                                     "may not see."))
