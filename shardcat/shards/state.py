"""What a shard keeps of one metastore (`MetastoreState`), and how its path index is built aside.

A state has two parts that warm at different speeds. Its version, storage root and (empty) cache
are read in two small queries, so a cold owner answers reads by name at once. Its path index (the
storage-path trie of tables, volumes, catalogs and schemas, and the trie of external locations)
costs a read of every asset with a path: `build_paths` makes it aside, as background work that gives
way to the requests in flight (warm_pace.py), and the shard swaps it in whole (`PathIndex.install`)
once it has caught up with the versions the state moved through meanwhile. Until then `paths_ready`
is clear, and reads by path and writes ask the cold tries that stand in for it (cold_paths.py,
path_waits.py), exact for every path they load; `Shard.state(..., paths=True)` waits for it. A
metastore of more than `CacheConfig.path_index_max` paths keeps its cold tries for good
(`paths_in_db`): its memory does not grow with its paths.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from ..cache.metastore_cache import MetastoreCache
from ..cache.url_trie import UrlTrie
from ..entities.asset import Asset
from ..store.rows import StoragePath
from .warm_pace import Pace

@dataclass(frozen=True)
class CacheConfig:
    enabled: bool = True              # off: every read from PostgreSQL, each request's caller too (for comparison)
    max_bytes: int = 256 << 20        # per shard: all its metastores' caches together (cache/budget.py)
    version_timeout: float = 30.0     # the request timeout: older superseded versions can go
    idle_timeout: float = 900.0       # a metastore unused this long goes cold: its state and cache are freed
    # A metastore with more storage paths than this never holds its path index whole in memory: its
    # tries stay cold tries, asked of PostgreSQL path by path and bounded (cold_paths.py, #48).
    path_index_max: int = 250_000
    # A cold owner of a metastore with more securables than this loads its whole privilege index aside;
    # meanwhile a request decides from the securables it asks about (governance/index.py, #48).
    privileges_aside_above: int = 100_000


_TYPES: list[str] = []                  # asset type by its code in a PathOwner (a few dozen at most)
_ROOT = 0x80                            # the code byte's bit for "a managed storage root"


class PathOwner(bytes):
    """What the trie holds at a storage path: the asset's id, type and full name, and whether it is
    a managed storage root.

    One flat `bytes` (issue #48, bytes per asset): a code byte (the type's index in `_TYPES`, and
    `_ROOT`), the id (16 bytes when it is a canonical UUID, as every asset id is; else its UTF-8
    after a length byte 1-255) and the full name's UTF-8. A `bytes` holds no pointers, so it needs no
    garbage-collector header either: ~55 B plus the name, where an object of four fields and the
    full name's own string cost ~115 B plus the name. The fields are read back on each use (a few
    error messages and ownership checks per request, not a hot loop)."""
    __slots__ = ()

    def __new__(cls, asset_id: str, type: str, full_name: str, is_root: bool) -> PathOwner:
        try:
            code = _TYPES.index(type)
        except ValueError:
            _TYPES.append(type)
            code = len(_TYPES) - 1
        if code >= _ROOT:
            raise ValueError(f"too many asset types for a PathOwner: {type!r}")
        head = bytes((code | (_ROOT if is_root else 0),))
        packed = _uuid_bytes(asset_id)
        if packed is None:
            raw = asset_id.encode()
            if not 0 < len(raw) < 256:
                raise ValueError(f"an asset id of {len(raw)} bytes: {asset_id!r}")
            packed = bytes((len(raw),)) + raw
        else:
            packed = b"\0" + packed
        return super().__new__(cls, head + packed + full_name.encode())

    def _id_end(self) -> int:
        return 18 if self[1] == 0 else 2 + self[1]

    @property
    def asset_id(self) -> str:
        if self[1] == 0:
            h = self[2:18].hex()    # str(uuid.UUID(bytes=...)), without the UUID object: ~20x faster
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        return self[2:self._id_end()].decode()

    @property
    def type(self) -> str:
        return _TYPES[self[0] & ~_ROOT]

    @property
    def full_name(self) -> str:
        return self[self._id_end():].decode()

    @property
    def is_root(self) -> bool:
        return bool(self[0] & _ROOT)

    def __repr__(self) -> str:
        return f"PathOwner({self.asset_id!r}, {self.type!r}, {self.full_name!r}, is_root={self.is_root})"

    __str__ = __repr__

    def __reduce__(self):
        # By its fields, not its bytes: another process numbers the types in its own order.
        return PathOwner, (self.asset_id, self.type, self.full_name, self.is_root)


def _uuid_bytes(asset_id: str) -> bytes | None:
    """The id's 16 bytes if it is a UUID in canonical form (what `str(uuid.UUID(...))` gives back), else None."""
    if len(asset_id) != 36:
        return None
    try:
        value = uuid.UUID(asset_id)
    except ValueError:
        return None
    return value.bytes if str(value) == asset_id else None


@dataclass
class MetastoreState:
    """What a shard knows of one metastore, current as of `version`."""
    id: str
    version: int = -1
    storage_root: str | None = None
    trie: UrlTrie = field(default_factory=UrlTrie)
    cache: MetastoreCache | None = None
    path_of: dict[str, object] = field(default_factory=dict)   # asset id -> its node in the trie (UrlTrie.url_of)
    # External locations live in a trie of their own: tables and volumes lie inside them by design,
    # so they must not count against the one-asset-per-path rule of `trie`; they may not overlap each other.
    locations: UrlTrie = field(default_factory=UrlTrie)
    location_of: dict[str, object] = field(default_factory=dict)   # external location id -> its node
    privileges: object = None   # a follower's: governance/index.py's privilege index, loaded on first use
    privileges_aside: object = None    # governance/index.py: the task loading it aside, and whether it is large
    policies: object = None     # a follower's: governance/abac.py's parsed ABAC policies, loaded on first use
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reconcile_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: list = field(default_factory=list)     # writes waiting for the next group (group_commit.py)
    committer: asyncio.Task | None = None           # the task committing this metastore's groups
    # Set once the tries above are whole at `version` (or ahead of it); clear while they are built aside.
    paths_ready: asyncio.Event = field(default_factory=asyncio.Event)
    warming: asyncio.Task | None = None             # the task building the path index aside
    paths_in_db: bool = False       # past CacheConfig.path_index_max paths: no whole index, cold tries for good
    last_used: float = 0.0                          # the shard's clock at its last request (idle eviction)
    long_listings: set = field(default_factory=set)  # (parent id, namespace) too long to cache whole

    def forget(self, asset_id: str) -> None:
        node = self.path_of.pop(asset_id, None)
        if node is not None:
            self.trie.remove_node(node)
        node = self.location_of.pop(asset_id, None)
        if node is not None:
            self.locations.remove_node(node)

    def remember(self, asset: Asset | StoragePath) -> None:
        self.forget(asset.id)
        if asset.storage_path and asset.type == "external_location":
            self.location_of[asset.id] = self.locations.insert_node(
                asset.storage_path, PathOwner(asset.id, asset.type, asset.full_name, is_root=True))
        elif asset.storage_path:
            owner = PathOwner(asset.id, asset.type, asset.full_name, is_root=asset.type in ("catalog", "schema"))
            # A managed path ends in the asset's id: the trie keeps that segment as the id's own string.
            self.path_of[asset.id] = self.trie.insert_node(asset.storage_path, owner, share=asset.id)

    def urls(self) -> tuple[dict[str, str], dict[str, str]]:
        """Asset id -> its url in the trie, and external location id -> its url (tests compare them)."""
        return ({i: self.trie.url_of(n) for i, n in self.path_of.items()},
                {i: self.locations.url_of(n) for i, n in self.location_of.items()})

    def busy(self) -> bool:
        """Whether anything is under way on it (a write queued or committing, a lock held, an index building)."""
        return bool(self.pending) or self.write_lock.locked() or self.reconcile_lock.locked() \
            or (self.committer is not None and not self.committer.done()) \
            or (self.warming is not None and not self.warming.done())


@dataclass
class PathIndex:
    """A path index built aside: the tries and their id maps, as of `version`."""
    version: int
    paths: MetastoreState

    def replay(self, changed: list[str], assets: list[Asset]) -> None:
        """Bring it forward over later changes: the changed ids as they are now (deleted ones absent)."""
        for asset_id in changed:
            self.paths.forget(asset_id)
        for asset in assets:
            self.paths.remember(asset)

    def install(self, state: MetastoreState) -> None:
        """Swap it into `state` whole, and say so."""
        fresh = self.paths
        state.trie, state.path_of = fresh.trie, fresh.path_of
        state.locations, state.location_of = fresh.locations, fresh.location_of
        state.paths_ready.set()


async def build_paths(store, metastore_id: str, batch: int) -> PathIndex:
    """Read every storage path of the metastore (one snapshot) and build its tries aside, as
    background work (warm_pace.py): in slices of ~1 ms that give way to the requests in flight, and
    yielding to the event loop after every `batch` paths besides."""
    pace = Pace()
    version, paths = await store.paths(metastore_id, pace=pace)
    meta = await store.get_metastore(metastore_id)
    fresh = MetastoreState(metastore_id, storage_root=meta.info.get("storage_root") if meta else None)
    if fresh.storage_root:
        fresh.trie.insert(fresh.storage_root, PathOwner(meta.id, "metastore", meta.name, is_root=True))
    for i, path in enumerate(paths, 1):
        fresh.remember(path)
        if pace.due():
            await pace.give_way()
        elif i % batch == 0:
            await asyncio.sleep(0)
    return PathIndex(version, fresh)


async def warm_paths(store, state: MetastoreState, batch: int, gap: int, most: int) -> None:
    """Build the state's path index aside and swap it in once it agrees with the state's version:
    the changes the state went through meanwhile (reconciled from the change log) are replayed onto
    it. More than `gap` of them, and it reads again. A metastore of more than `most` paths keeps its
    cold tries instead (`paths_in_db`): its index stays in PostgreSQL."""
    state.paths_in_db = await store.count_paths(state.id, most + 1) > most
    if state.paths_in_db:
        return
    while True:
        index = await build_paths(store, state.id, batch)
        async with state.reconcile_lock:
            if state.version > index.version:
                changes = await store.changes(state.id, index.version, gap)
                if len(changes) >= gap or not changes or changes[0].version != index.version + 1:
                    continue
                changed = sorted({i for c in changes for i in c.changed} - {state.id})
                _, assets = await store.get_assets_by_ids(state.id, changed)
                index.replay(changed, assets)
            # A read newer than the state is ahead of it, as a reconcile's reads are: its next
            # reconcile replays those changes again, which forgets and remembers the same paths.
            index.install(state)
            return
