"""Registering a table (or view) from a metadata file in the catalog's own managed storage (register or
register-view with a metadata-location there): allowed only where that storage was a dropped table's (view's),
and only to who may undrop it.

Managed storage is reached through its tables alone (catalog/tree/path_access.py), so a path in it that no live
asset holds is no caller's to read by path, and registering from there is refused as an overlap (base.py
`_check_external`). The one exception the Iceberg spec's clients rely on (pyiceberg's and Iceberg's Java
`registerTable` after `dropTable` without purge): the file lies in the storage of a dropped table still in the
catalog's history, and the caller is that table's owner or a metastore admin, who could undrop it
(catalog/features/versions.py). The table is then re-adopted under its own id, MANAGED at its own location, so
that location stays one asset's; its old grants are not restored (undrop does that). To anyone else the
refusal is the overlap's, word for word, whether a dropped table was there or not.

A view has no storage of its own in the catalog (no storage path): a managed view's metadata files lie in
`<managed root>/views/<view id>`, which the Iceberg spec's clients register again after dropping a view
(Iceberg's Java `registerView` test). The same rule holds: a dropped view whose folder that is, re-adopted under
its own id by who may undrop it, so its folder stays its own.
"""

from __future__ import annotations

from ....auth import Caller
from ....entities.asset import Asset
from ....entities.urls import is_within, join_url
from ....governance.authorize import is_metastore_admin
from ....store import history


async def dropped_table_at(shard, caller: Caller, url: str) -> Asset | None:
    """The dropped table whose storage holds `url`, when `url` lies in managed storage that no live asset holds
    and the caller may undrop that table; else None (then the caller's register is refused as before)."""
    ms = caller.metastore()
    owner = await _owner(shard, caller, url)
    if owner is None or not owner[1].is_root:
        return None                 # not managed storage, or a live table's or volume's
    for dropped in await history.dropped(shard.store, ms, ["table"], since=0):
        table = dropped["asset"]
        if table.storage_path and table.info.get("table_type") == "MANAGED" and is_within(url, table.storage_path):
            return table if await _may_undrop(shard, caller, table) else None
    return None


async def dropped_view_at(shard, caller: Caller, url: str, views_root: str) -> Asset | None:
    """The dropped view whose managed folder (`views_root`/<its id>: where the schema registering it puts its
    managed views) holds `url`, when no live asset holds `url` and the caller may undrop that view; else None."""
    ms = caller.metastore()
    owner = await _owner(shard, caller, url)
    if owner is None or not owner[1].is_root or not is_within(url, views_root):
        return None                 # not managed storage, a live table's or volume's, or not where views go
    for dropped in await history.dropped(shard.store, ms, ["table"], since=0):
        view = dropped["asset"]
        if view.info.get("table_type") == "VIEW" and is_within(url, join_url(views_root, view.id)):
            return view if await _may_undrop(shard, caller, view) else None
    return None


async def _owner(shard, caller: Caller, url: str):
    """The trie's owner of `url`; a cold owner answers from the paths it loads (shards/path_waits.py)."""
    async def ask(state):
        return state.trie.owner(url)
    return await shard.asking_paths(caller.metastore(), caller.min_version, ask)


async def _may_undrop(shard, caller: Caller, table: Asset) -> bool:
    """The rule of undrop: the dropped table's owner, or a metastore (account) admin."""
    if table.info.get("owner") in caller.principals or caller.is_account_admin:
        return True
    metastore = await shard.store.get_metastore(caller.metastore())
    return metastore is not None and is_metastore_admin(caller, metastore)
