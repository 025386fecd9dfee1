"""A privilege index holding only the securables a request asked about (no I/O).

A cold owner of a large metastore loads its whole privilege index aside (seconds at a million
securables, docs/benchmarks.md "Scale"); meanwhile a caller's decisions come from this one. It
holds the securables asked about, each with every ancestor and every grant on them, which is all
a decision about one securable reads (its chain: owners, grants, USE CATALOG / USE SCHEMA). A
question about anything else raises `IndexNeeded`: the securables to load, or the whole index (a
list's visible set, a container holding something granted below it), and the request goes again
once they are in (governance/index.py). It never answers from what it lacks: without an ancestor
a grant above would be missed, so such a question is a load, not a refusal.
"""

from __future__ import annotations

from .privilege_index import PrivilegeIndex


class IndexNeeded(Exception):
    """A question the partial index cannot answer yet: `sids` to load with their ancestors and
    grants, or (None) the whole index."""

    def __init__(self, sids: tuple[str, ...] | None = None):
        super().__init__(sids)
        self.sids = sids


class PartialPrivilegeIndex(PrivilegeIndex):
    """A PrivilegeIndex over the loaded securables: each with its whole chain and grants, plus the
    ids the database was asked about and does not hold (`absent`: a new asset, not committed yet,
    joins as the whole index lets it, under a loaded parent)."""

    def __init__(self, root_id: str, root_owner: str | None = None):
        super().__init__(root_id, root_owner)
        self.absent: set[str] = set()

    def load(self, rows, grants: dict, asked) -> None:
        """Rows (sid, parent sid, type, owner, full name) of the asked securables and all their
        ancestors, in any order; `grants` on them and on the metastore; the asked ids not found
        are absent."""
        pending = {r[0]: r for r in rows if r[0] not in self._num or not self.known(self._num[r[0]])}
        while pending:
            ready = [r for r in pending.values() if r[1] == self.root_id or self._loaded(r[1])]
            if not ready:
                raise ValueError(f"securables whose ancestors were not read: {sorted(pending)[:3]}")
            for sid, parent_sid, kind, owner, name in ready:
                PrivilegeIndex.put(self, sid, parent_sid, kind, owner, name)
                del pending[sid]
        for sid, held in grants.items():
            self.set_grants(sid, held)
        self.absent.update(sid for sid in asked if not self._loaded(sid))

    def _loaded(self, sid: str) -> bool:
        n = self._num.get(sid)
        return n is not None and self.known(n)

    def find(self, sid: str) -> int | None:
        n = self._num.get(sid)
        if n is not None and self.known(n):
            return n
        if sid in self.absent:
            return None
        raise IndexNeeded((sid,))

    def put(self, sid: str, parent_sid: str, kind: str, owner: str | None, name: str = "") -> None:
        """An asset newer than the index (made in the request's own write) joins it under its parent,
        which must be loaded: a decision about it reads the parent's chain."""
        if parent_sid != self.root_id and not self._loaded(parent_sid):
            raise IndexNeeded((parent_sid,))
        super().put(sid, parent_sid, kind, owner, name)

    # What lies below a securable, or across the metastore, is the whole index's to say.

    def covered_children(self, parent, marked):
        raise IndexNeeded()

    def above(self, marked):
        raise IndexNeeded()

    def covered(self, candidates, marked):
        raise IndexNeeded()

    def copy(self, cls=None):
        raise IndexNeeded()
