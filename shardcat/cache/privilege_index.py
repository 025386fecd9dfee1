"""The privilege index of one metastore: who holds what, where, as roaring bitmaps (no I/O).

Every securable (the metastore itself, catalogs, schemas, tables, ..., credentials, shares)
gets a dense int id. Per (principal, privilege) a BitMap holds the securables where that
privilege was granted directly, and per principal a BitMap holds what it owns. The
hierarchy (each securable's parent) makes inheritance cheap: a grant on X covers X's
current and future descendants, so "may P use S" is "is any of S's ancestors-or-self in
the union of P's bitmaps" (at most five lookups), and filtering a list of siblings is one
bitmap intersection when nothing above them is granted.

A caller is a set of principal names (itself and its groups): every question takes that
set and unions the bitmaps of its members. The index knows privilege names only as
strings; which ones exist and what ALL PRIVILEGES covers is governance/privileges.py's.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyroaring import BitMap

ALL_PRIVILEGES = "ALL PRIVILEGES"
MANAGE = "MANAGE"
_EMPTY = BitMap()


def covers(granted: str, wanted: str) -> bool:
    """Whether a granted privilege gives `wanted`: itself, or ALL PRIVILEGES for anything but MANAGE."""
    return granted == wanted or (granted == ALL_PRIVILEGES and wanted != MANAGE)


class PrivilegeIndex:
    """Grants, owners and parent links of one metastore's securables, keyed by securable id (a str)."""

    def __init__(self, root_id: str, root_owner: str | None = None):
        self.root_id = root_id             # the metastore: the top of every ancestor chain
        self.root_owner = root_owner       # the metastore's owner: its admins
        self._num: dict[str, int] = {}     # securable id -> dense int
        self._key: list[str | None] = []   # dense int -> securable id (None once removed)
        self._free: list[int] = []
        self.parent: dict[int, int] = {}
        self.kind: dict[int, str] = {}     # asset type
        self.children: dict[int, BitMap] = {}
        self.owner: dict[int, str] = {}
        self.name: dict[int, str] = {}     # full name, for messages and "inherited from"
        self.owned: dict[str, BitMap] = {}
        self.grants: dict[int, dict[str, frozenset[str]]] = {}   # securable -> principal -> privileges
        self.bits: dict[tuple[str, str], BitMap] = {}            # (principal, privilege) -> securables
        self.any_grant: dict[str, BitMap] = {}                   # principal -> securables with any grant
        self.num(root_id)
        self.kind[0] = "metastore"

    def copy(self, cls: type | None = None) -> "PrivilegeIndex":
        """An independent copy, as `cls` (a subclass) if given: a read at a past version adds the
        assets dropped since to its own copy (governance/authorize.py)."""
        cls = cls or PrivilegeIndex
        out = cls.__new__(cls)
        out.root_id, out.root_owner = self.root_id, self.root_owner
        out._num, out._key, out._free = dict(self._num), list(self._key), list(self._free)
        out.parent, out.kind, out.owner, out.name = dict(self.parent), dict(self.kind), dict(self.owner), dict(self.name)
        out.children = {k: BitMap(v) for k, v in self.children.items()}
        out.owned = {k: BitMap(v) for k, v in self.owned.items()}
        out.grants = dict(self.grants)      # values are replaced, never changed in place
        out.bits = {k: BitMap(v) for k, v in self.bits.items()}
        out.any_grant = {k: BitMap(v) for k, v in self.any_grant.items()}
        return out

    # ---- ids -----------------------------------------------------------------

    def num(self, sid: str) -> int:
        n = self._num.get(sid)
        if n is None:
            n = self._free.pop() if self._free else len(self._key)
            if n == len(self._key):
                self._key.append(sid)
            else:
                self._key[n] = sid
            self._num[sid] = n
        return n

    def find(self, sid: str) -> int | None:
        return self._num.get(sid)

    def key(self, n: int) -> str:
        return self._key[n]

    def __contains__(self, sid: str) -> bool:
        return sid in self._num

    def __len__(self) -> int:
        return len(self._num)

    # ---- updates ---------------------------------------------------------------

    def put(self, sid: str, parent_sid: str, kind: str, owner: str | None, name: str = "") -> None:
        """Add or update a securable: its parent, type, owner and full name."""
        n, p = self.num(sid), self.num(parent_sid)
        self.name[n] = name
        old_parent = self.parent.get(n)
        if old_parent is not None and old_parent != p and old_parent in self.children:
            self.children[old_parent].discard(n)
        self.parent[n] = p
        self.kind[n] = kind
        self.children.setdefault(p, BitMap()).add(n)
        old_owner = self.owner.get(n)
        if old_owner != owner:
            if old_owner is not None:
                self.owned[old_owner].discard(n)
            if owner is None:
                self.owner.pop(n, None)
            else:
                self.owner[n] = owner
                self.owned.setdefault(owner, BitMap()).add(n)

    def remove(self, sid: str) -> None:
        """Forget a deleted securable and its grants (its descendants are removed one by one too)."""
        n = self._num.get(sid)
        if n is None or n == 0:
            return
        self.set_grants(sid, {})
        p = self.parent.pop(n, None)
        if p is not None and p in self.children:    # the parent may have gone first, in the same write
            self.children[p].discard(n)
        owner = self.owner.pop(n, None)
        if owner is not None:
            self.owned[owner].discard(n)
        self.kind.pop(n, None)
        self.name.pop(n, None)
        self.children.pop(n, None)
        del self._num[sid]
        self._key[n] = None
        self._free.append(n)

    def set_grants(self, sid: str, grants: dict[str, Iterable[str]]) -> None:
        """Replace every grant on a securable: principal -> privileges."""
        n = self.num(sid)
        for principal, privileges in self.grants.pop(n, {}).items():
            for privilege in privileges:
                self.bits[(principal, privilege)].discard(n)
            self.any_grant[principal].discard(n)
        kept = {p: frozenset(privs) for p, privs in grants.items() if privs}
        if kept:
            self.grants[n] = kept
        for principal, privileges in kept.items():
            for privilege in privileges:
                self.bits.setdefault((principal, privilege), BitMap()).add(n)
            self.any_grant.setdefault(principal, BitMap()).add(n)

    # ---- questions ---------------------------------------------------------------

    def chain(self, n: int) -> list[int]:
        """n and its ancestors, nearest first, ending at the metastore."""
        out = [n]
        while n in self.parent:
            n = self.parent[n]
            out.append(n)
        return out

    def granted(self, principals: Iterable[str], privilege: str) -> BitMap:
        """Securables where any of `principals` holds `privilege` by a direct grant (ALL PRIVILEGES counts)."""
        maps = [self.bits.get((p, privilege), _EMPTY) for p in principals]
        if privilege != MANAGE:
            maps += [self.bits.get((p, ALL_PRIVILEGES), _EMPTY) for p in principals]
        return BitMap.union(*maps) if maps else BitMap()

    def owned_by(self, principals: Iterable[str]) -> BitMap:
        maps = [self.owned.get(p, _EMPTY) for p in principals]
        return BitMap.union(*maps) if maps else BitMap()

    def with_any_grant(self, principals: Iterable[str]) -> BitMap:
        maps = [self.any_grant.get(p, _EMPTY) for p in principals]
        return BitMap.union(*maps) if maps else BitMap()

    def first_in_chain(self, n: int, marked: BitMap) -> int | None:
        """The nearest ancestor-or-self of n in `marked`, or None."""
        for m in self.chain(n):
            if m in marked:
                return m
        return None

    def covered(self, candidates: BitMap, marked: BitMap) -> BitMap:
        """The candidates that are in `marked` or have an ancestor in it (grants inherit downward).
        Siblings share their ancestors, so each parent is looked at once, then one intersection."""
        out = candidates & marked
        by_parent: dict[int, BitMap] = {}
        for n in candidates - out:
            by_parent.setdefault(self.parent.get(n, -1), BitMap()).add(n)
        for p, kids in by_parent.items():
            if p >= 0 and self.first_in_chain(p, marked) is not None:
                out |= kids
        return out

    def covered_children(self, parent: int, marked: BitMap) -> BitMap:
        """`parent`'s children that are marked or inherit a mark from above: one intersection."""
        kids = self.children.get(parent, _EMPTY)
        if self.first_in_chain(parent, marked) is not None:
            return BitMap(kids)
        return kids & marked

    def above(self, marked: BitMap) -> BitMap:
        """Every strict ancestor of a member of `marked`: the containers that hold something marked."""
        out = BitMap()
        for n in marked:
            p = self.parent.get(n)
            while p is not None and p not in out:
                out.add(p)
                p = self.parent.get(p)
        return out
