"""`MemoryStore`: the `CatalogStore` contract (protocol.py) kept in memory, for fast unit tests.

It holds metastores, their assets, grants and change logs in dicts, and keeps what the
shard core relies on: reads return the version they saw; a write sees what was committed
before it, is all or nothing, fails with VersionConflict when the metastore moved on, bumps
the version by one and logs what it changed; names are unique per (namespace, full name); a
group commit's writes (`write_batch`) each fail alone and commit together. Principals are a
directory of names and groups that tests fill (`MemoryPrincipals`). No SQL-only features (search,
lineage, the audit log, Delta commits, tokens).
"""

from __future__ import annotations

import dataclasses
from contextlib import asynccontextmanager

from ..entities.asset import Asset
from .errors import MetastoreGone, VersionConflict
from .principals import Membership, PrincipalInfo
from .rows import Change, Metastore, StoragePath
from .writes import WriteTx


@dataclasses.dataclass
class _Metastore:
    meta: Metastore
    assets: dict[str, Asset] = dataclasses.field(default_factory=dict)
    grants: dict[str, dict[str, set[str]]] = dataclasses.field(default_factory=dict)
    log: list[Change] = dataclasses.field(default_factory=list)


class MemoryPrincipals:
    """Principals by name and the groups they are in directly (`add`), as principals.py's
    `Principals` answers of them."""

    def __init__(self):
        self._by_name: dict[str, PrincipalInfo] = {}
        self._groups: dict[int, list[Membership]] = {}

    def add(self, name: str, kind: str = "user", *, is_account_admin: bool = False, active: bool = True,
            groups: tuple[str, ...] = ()) -> PrincipalInfo:
        """A principal in `groups` (each added as a group first where new)."""
        ids = [(self._by_name.get(g) or self.add(g, "group")).id for g in groups]
        info = PrincipalInfo(len(self._by_name) + 1, name, kind, None, [], active, None, False,
                             is_account_admin, 0, None)
        self._by_name[name] = info
        self._groups[info.id] = [Membership(i, g, True) for i, g in zip(ids, groups)]
        return info

    async def get_by_name(self, name: str) -> PrincipalInfo | None:
        return self._by_name.get(name)

    async def memberships(self, principal_ids: list[int]) -> dict[int, list[Membership]]:
        return {pid: list(self._groups.get(pid, [])) for pid in principal_ids}


class MemoryStore:
    def __init__(self):
        self._metastores: dict[str, _Metastore] = {}
        self.shards: dict[str, str] = {}      # metastore id -> the shard assigned to it
        self.principals = MemoryPrincipals()

    def _ms(self, metastore_id: str) -> _Metastore:
        found = self._metastores.get(metastore_id)
        if found is None:
            raise MetastoreGone(metastore_id)
        return found

    # ---- metastores ------------------------------------------------------

    async def create_metastore(self, metastore_id: str, name: str, info: dict, home: str | None = None,
                               load: dict[str, float] | None = None) -> Metastore:
        """As Store's; one database here, so no home to choose."""
        if any(m.meta.name == name for m in self._metastores.values()):
            raise KeyError(name)
        meta = Metastore(metastore_id, name, 0, dict(info))
        self._metastores[metastore_id] = _Metastore(meta)
        return meta

    async def rename_in_directory(self, metastore_id: str, name: str) -> None:
        if any(m.meta.name == name for i, m in self._metastores.items() if i != metastore_id):
            raise KeyError(name)

    async def get_metastore(self, metastore_id: str) -> Metastore | None:
        found = self._metastores.get(metastore_id)
        return found.meta if found else None

    async def metastore_version(self, metastore_id: str) -> int:
        return self._ms(metastore_id).meta.version

    async def shard_of(self, metastore_id: str) -> str | None:
        return self.shards.get(metastore_id)

    # ---- reads -------------------------------------------------------------

    async def get_asset(self, metastore_id: str, namespace: str, full_name: str) -> tuple[int, Asset | None]:
        ms = self._ms(metastore_id)
        return ms.meta.version, _by_name(ms.assets, namespace, full_name)

    async def get_asset_by_id(self, metastore_id: str, asset_id: str) -> tuple[int, Asset | None]:
        ms = self._ms(metastore_id)
        return ms.meta.version, ms.assets.get(asset_id)

    async def get_assets_by_ids(self, metastore_id: str, ids: list[str]) -> tuple[int, list[Asset]]:
        ms = self._ms(metastore_id)
        return ms.meta.version, [ms.assets[i] for i in ids if i in ms.assets]

    async def get_assets_by_keys(self, metastore_id: str, names: list[tuple[str, str]],
                                 ids: list[str]) -> tuple[int, list[Asset]]:
        ms = self._ms(metastore_id)
        found = {i: ms.assets[i] for i in ids if i in ms.assets}
        for namespace, full_name in names:
            a = _by_name(ms.assets, namespace, full_name)
            if a is not None:
                found[a.id] = a
        return ms.meta.version, list(found.values())

    async def list_children(self, metastore_id: str, parent_id: str, namespace: str, *,
                            after: str = "", limit: int | None = None) -> tuple[int, list[Asset]]:
        ms = self._ms(metastore_id)
        children = sorted((a for a in ms.assets.values()
                           if a.parent_id == parent_id and a.namespace == namespace and a.name > after),
                          key=lambda a: a.name)
        return ms.meta.version, children[:limit] if limit is not None else children

    async def count_children(self, metastore_id: str, parent_id: str, namespace: str, limit: int) -> int:
        n = sum(1 for ms in self._metastores.values() for a in ms.assets.values()
                if a.parent_id == parent_id and a.namespace == namespace)
        return min(n, limit)

    async def paths(self, metastore_id: str, pace=None) -> tuple[int, list[StoragePath]]:
        ms = self._ms(metastore_id)
        return ms.meta.version, [StoragePath(a.id, a.type, a.full_name, a.storage_path)
                                 for a in ms.assets.values() if a.storage_path is not None]

    async def count_paths(self, metastore_id: str, limit: int) -> int:
        return min(limit, sum(1 for a in self._ms(metastore_id).assets.values() if a.storage_path is not None))

    async def paths_near(self, metastore_id: str, at: list[str], below: list[str],
                         locations: bool) -> tuple[int, list[StoragePath]]:
        ms = self._ms(metastore_id)
        wanted = set(at)
        return ms.meta.version, [
            StoragePath(a.id, a.type, a.full_name, a.storage_path) for a in ms.assets.values()
            if a.storage_path is not None and (a.storage_path in wanted or a.storage_path.startswith(tuple(below))
                                               or (locations and a.type == "external_location"))]

    async def changes(self, metastore_id: str, after: int, limit: int) -> list[Change]:
        return [c for c in self._ms(metastore_id).log if c.version > after][:limit]

    # ---- writes ------------------------------------------------------------

    @asynccontextmanager
    async def write(self, metastore_id: str, expected_version: int):
        ms = self._current(metastore_id, expected_version)
        tx = MemoryWriteTx(ms, metastore_id, expected_version + 1)
        yield tx
        self._commit(self._current(metastore_id, expected_version), [tx])

    @asynccontextmanager
    async def write_batch(self, metastore_id: str, expected_version: int, *, savepoints: bool = True,
                          prefetch: list[tuple] = ()):
        """As Store's: the group's writes in turn, each over what the earlier ones left; one that
        fails leaves nothing (it fails alone, savepoints or not); all swapped in together."""
        batch = MemoryWriteBatch(self._current(metastore_id, expected_version), metastore_id)
        yield batch
        self._commit(self._current(metastore_id, expected_version), batch.logged)

    def _current(self, metastore_id: str, expected_version: int) -> _Metastore:
        """The metastore, if still at the version a write expects (another write may have committed
        while this one ran)."""
        ms = self._ms(metastore_id)
        if ms.meta.version != expected_version:
            raise VersionConflict(metastore_id, expected_version, ms.meta.version)
        return ms

    @staticmethod
    def _commit(ms: _Metastore, logged: list[MemoryWriteTx]) -> None:
        if logged:
            after = logged[-1].after(ms)
            ms.assets, ms.grants, ms.meta = after.assets, after.grants, after.meta
        ms.log += [Change(tx.version, sorted(tx.changed), sorted(tx.parents)) for tx in logged]


def _by_name(assets: dict[str, Asset], namespace: str, full_name: str) -> Asset | None:
    return next((a for a in assets.values() if a.namespace == namespace and a.full_name == full_name), None)


class MemoryWriteTx(WriteTx):
    """A write over a copy of the metastore, swapped in when the write ends without an error."""

    def __init__(self, ms: _Metastore, metastore_id: str, version: int):
        super().__init__(None, metastore_id, version)
        self.assets = dict(ms.assets)
        self.grants = {k: {p: set(v) for p, v in held.items()} for k, held in ms.grants.items()}
        self.meta_name, self.meta_info = ms.meta.name, ms.meta.info

    async def get(self, namespace: str, full_name: str) -> Asset | None:
        return _by_name(self.assets, namespace, full_name)

    async def get_by_id(self, asset_id: str) -> Asset | None:
        return self.assets.get(asset_id)

    async def has_children(self, parent_id: str) -> bool:
        return any(a.parent_id == parent_id for a in self.assets.values())

    async def descendants(self, asset_id: str) -> list[Asset]:
        out, frontier = [], {asset_id}
        while frontier:
            below = [a for a in self.assets.values() if a.parent_id in frontier]
            out += below
            frontier = {a.id for a in below}
        return out

    async def update_metastore(self, info: dict, name: str) -> None:
        self.meta_name, self.meta_info = name, info
        self.touch(self.metastore_id, "UPDATE", "metastore", name)

    async def put(self, asset: Asset, *, new: bool = False) -> Asset:
        asset = dataclasses.replace(asset, written_at=self.version)
        clash = _by_name(self.assets, asset.namespace, asset.full_name)
        if clash is not None and clash.id != asset.id:
            raise KeyError(asset.full_name)
        inserted = asset.id not in self.assets
        self.assets[asset.id] = asset
        return self.recorded_put(asset, inserted)

    async def delete(self, assets: list[Asset]) -> None:
        for a in assets:
            self.assets.pop(a.id, None)
            self.grants.pop(a.id, None)
        self.recorded_delete(assets)

    async def grants_on(self, securable_id: str) -> dict[str, set[str]]:
        return {p: set(v) for p, v in self.grants.get(securable_id, {}).items()}

    async def set_grants(self, securable_id: str, held: dict[str, set[str]], *, is_asset: bool, granted_by: str,
                         at: int) -> None:
        self.grants[securable_id] = {p: set(v) for p, v in held.items() if v}
        self.grants_set[securable_id] = held

    def after(self, ms: _Metastore) -> _Metastore:
        """The metastore as this write leaves it (its change log aside)."""
        meta = dataclasses.replace(ms.meta, version=self.version, name=self.meta_name, info=self.meta_info)
        return _Metastore(meta, self.assets, self.grants)


class MemoryWriteBatch:
    """A group commit's writes over one metastore, each over a copy of what the earlier ones left."""

    def __init__(self, ms: _Metastore, metastore_id: str):
        self.state = ms
        self.metastore_id = metastore_id
        self.logged: list[MemoryWriteTx] = []

    @asynccontextmanager
    async def write(self):
        tx = MemoryWriteTx(self.state, self.metastore_id, self.state.meta.version + 1)
        tx.earlier = tuple(self.logged)
        yield tx
        self.state = tx.after(self.state)
        self.logged.append(tx)

    def lost(self) -> bool:
        return False
