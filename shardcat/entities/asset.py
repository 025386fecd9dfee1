"""The one record shape every securable in a metastore is stored, cached and served as."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)     # slots: no __dict__ per record (a shard caches many; issue #48)
class Asset:
    id: str
    metastore_id: str
    type: str               # manifest name: "catalog", "schema", "table", ...
    namespace: str          # name namespace: tables and views share "table"
    parent_id: str          # the metastore id for top-level assets
    name: str
    full_name: str
    storage_path: str | None
    info: dict = field(hash=False, compare=False)  # the type's stored fields (JSON)
    written_at: int = 0     # metastore version at which this state was written
    # What is derived from this state once and kept with it (its encoded API JSON): a changed
    # asset is a new Asset, so nothing here goes stale. Not an init field: `replace` starts afresh.
    # Made on first use (`memo`): an asset read but never served costs no dict (issue #48).
    _memo: dict | None = field(default=None, init=False, hash=False, compare=False, repr=False)

    @property
    def memo(self) -> dict:
        memo = self._memo
        if memo is None:
            memo = {}
            object.__setattr__(self, "_memo", memo)     # frozen: the memo is not part of the state
        return memo

    @property
    def name_key(self) -> tuple[str, str]:
        return (self.namespace, self.full_name)


# An `Asset.memo` key: the full name that a state read at a past version has today (None: its asset
# was dropped since). Set by store/history.py `governed_as_today`; governance that goes by name (ABAC
# policies) reads it through `name_today`, so an old name escapes no policy on the new one.
NAME_TODAY = "name_today"


def name_today(asset: Asset) -> str | None:
    """The asset's full name today: its own for a present state; None for one dropped since."""
    return asset.memo.get(NAME_TODAY, asset.full_name)
