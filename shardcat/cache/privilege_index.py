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

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain as concat, compress, islice

from pyroaring import BitMap

from .packed_strings import PackedStrings

ALL_PRIVILEGES = "ALL PRIVILEGES"
MANAGE = "MANAGE"
_EMPTY = BitMap()
NONE = -1          # no parent, no owner


def covers(granted: str, wanted: str) -> bool:
    """Whether a granted privilege gives `wanted`: itself, or ALL PRIVILEGES for anything but MANAGE."""
    return granted == wanted or (granted == ALL_PRIVILEGES and wanted != MANAGE)


class PrivilegeIndex:
    """Grants, owners and parent links of one metastore's securables, keyed by securable id (a str).

    Per securable only its id's map entry and a few packed numbers are objects of their own (~200 B
    at a million tables, docs/design.md "What an asset costs in memory"): its parent, type and owner
    live in arrays indexed by its dense number (types and owners as codes into small tables), its full
    name in a `PackedStrings`; only securables with grants have an entry in `grants`. The mappings
    `parent`, `kind`, `owner` and `name` are read-only views of those arrays; hot paths call
    `parent_of`, `kind_of`, `owner_of`, `known` instead (no view object per question).
    """

    def __init__(self, root_id: str, root_owner: str | None = None):
        self.root_id = root_id             # the metastore: the top of every ancestor chain
        self.root_owner = root_owner       # the metastore's owner: its admins
        self._num: dict[str, int] = {}     # securable id -> dense int
        self._key: list[str | None] = []   # dense int -> securable id (None once removed)
        self._free: list[int] = []
        self._parent = array("i")          # dense int -> its parent's, NONE for none
        self._kind = array("B")            # dense int -> code in _kinds; 0 (None): not a securable here
        self._owner = array("i")           # dense int -> code in _owners, NONE for none
        self._names = PackedStrings()      # dense int -> full name, for messages and "inherited from"
        self._root_named = False           # the metastore has no name here unless put
        self._kinds: list = [None]         # type code -> asset type
        self._kind_code: dict = {}
        self._owners: list[str] = []       # owner code -> principal (owners repeat: one entry each)
        self._owner_code: dict[str, int] = {}
        self.children: dict[int, BitMap] = {}
        self.owned: dict[str, BitMap] = {}
        self.grants: dict[int, dict[str, frozenset[str]]] = {}   # securable -> principal -> privileges
        self.bits: dict[tuple[str, str], BitMap] = {}            # (principal, privilege) -> securables
        self.any_grant: dict[str, BitMap] = {}                   # principal -> securables with any grant
        self.num(root_id)
        self._kind[0] = self._code_of_kind("metastore")

    def copy(self, cls: type | None = None) -> "PrivilegeIndex":
        """An independent copy, as `cls` (a subclass) if given: a read at a past version adds the
        assets dropped since to its own copy (governance/authorize.py)."""
        cls = cls or PrivilegeIndex
        out = cls.__new__(cls)
        out.root_id, out.root_owner = self.root_id, self.root_owner
        out._num, out._key, out._free = dict(self._num), list(self._key), list(self._free)
        out._parent, out._kind, out._owner = array("i", self._parent), array(self._kind.typecode, self._kind), \
            array("i", self._owner)
        out._names, out._root_named = self._names.copy(), self._root_named
        out._kinds, out._kind_code = list(self._kinds), dict(self._kind_code)
        out._owners, out._owner_code = list(self._owners), dict(self._owner_code)
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
            if self._free:
                n = self._free.pop()
                self._key[n] = sid
            else:
                n = len(self._key)
                self._key.append(sid)
                self._parent.append(NONE)
                self._kind.append(0)
                self._owner.append(NONE)
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

    # ---- one securable's fields (the hot paths' accessors) ---------------------

    def known(self, n: int) -> bool:
        """Whether securable n is in the index (put and not removed), not just a number."""
        return 0 <= n < len(self._kind) and self._kind[n] != 0

    def kind_of(self, n: int, default=None):
        code = self._kind[n] if 0 <= n < len(self._kind) else 0
        return self._kinds[code] if code else default

    def parent_of(self, n: int, default: int | None = None) -> int | None:
        p = self._parent[n] if 0 <= n < len(self._parent) else NONE
        return default if p == NONE else p

    def owner_of(self, n: int) -> str | None:
        code = self._owner[n] if 0 <= n < len(self._owner) else NONE
        return None if code == NONE else self._owners[code]

    def name_of(self, n: int, default: str | None = None) -> str | None:
        return self._names.get(n) if self._named(n) else default

    def _named(self, n: int) -> bool:
        """Whether securable n was given a name (the metastore, at 0, is not unless put)."""
        return self.known(n) and (n != 0 or self._root_named)

    @property
    def parent(self) -> "Fields":
        """n -> its parent's number, for securables that have one (a read-only mapping)."""
        return self._optional(self.parent_of, "_parent")

    @property
    def kind(self) -> "Fields":
        """n -> its asset type, for securables in the index (a read-only mapping)."""
        return Fields(self, self.kind_of, self.known, lambda: self._kind)

    @property
    def owner(self) -> "Fields":
        """n -> its owner, for securables that have one (a read-only mapping)."""
        return self._optional(self.owner_of, "_owner")

    def _optional(self, value: Callable[[int], object], packed: str) -> "Fields":
        """The view of a packed field where NONE means "has none" (parent, owner)."""
        return Fields(self, value, lambda n: getattr(self, packed)[n] != NONE,
                      lambda: map(NONE.__ne__, getattr(self, packed)))

    @property
    def name(self) -> "Fields":
        """n -> its full name, for securables in the index (a read-only mapping)."""
        return Fields(self, self.name_of, self._named,
                      lambda: concat((self._root_named,), islice(self._kind, 1, None)))

    def _code_of_kind(self, kind) -> int:
        code = self._kind_code.get(kind)
        if code is None:
            code = self._kind_code[kind] = len(self._kinds)
            self._kinds.append(kind)
            if code > 255 and self._kind.typecode == "B":    # types are a few dozen; more still work
                self._kind = array("i", self._kind)
        return code

    def _code_of_owner(self, owner: str) -> int:
        code = self._owner_code.get(owner)
        if code is None:
            code = self._owner_code[owner] = len(self._owners)
            self._owners.append(owner)
        return code

    # ---- updates ---------------------------------------------------------------

    def put(self, sid: str, parent_sid: str, kind: str, owner: str | None, name: str = "") -> None:
        """Add or update a securable: its parent, type, owner and full name."""
        n, p = self.num(sid), self.num(parent_sid)
        self._names.set(n, name)
        if n == 0:
            self._root_named = True
        old_parent = self._parent[n]
        if old_parent != NONE and old_parent != p and old_parent in self.children:
            self.children[old_parent].discard(n)
        self._parent[n] = p
        self._kind[n] = self._kind_code.get(kind) or self._code_of_kind(kind)
        self.children.setdefault(p, BitMap()).add(n)
        code = self._owner[n]
        old_owner = None if code == NONE else self._owners[code]
        if old_owner != owner:
            if old_owner is not None:
                self.owned[old_owner].discard(n)
            if owner is None:
                self._owner[n] = NONE
            else:
                self._owner[n] = self._code_of_owner(owner)
                self.owned.setdefault(owner, BitMap()).add(n)

    def put_many(self, rows: Iterable[tuple]) -> None:
        """`put` of each (sid, parent_sid, kind, owner, name): a load's loop, a new securable's steps
        inlined (the same numbers and fields as `put` one by one)."""
        num, keys, parents, kinds, owners = self._num, self._key, self._parent, self._kind, self._owner
        set_name, children, owned = self._names.set, self.children, self.owned
        kind_code, owner_code = self._kind_code, self._owner_code
        for sid, parent_sid, kind, owner, name in rows:
            k = kind_code.get(kind)
            if k is None or sid in num or self._free or (owner is not None and owner not in owner_code):
                self.put(sid, parent_sid, kind, owner, name)      # a new type or owner, a known id, a freed number
                continue
            n = len(keys)
            keys.append(sid)
            num[sid] = n
            parents.append(NONE)
            kinds.append(k)
            owners.append(NONE if owner is None else owner_code[owner])
            p = num.get(parent_sid)
            if p is None:
                p = self.num(parent_sid)
            parents[n] = p
            set_name(n, name)
            kids = children.get(p)
            if kids is None:
                kids = children[p] = BitMap()
            kids.add(n)
            if owner is not None:
                owned[owner].add(n)

    def remove(self, sid: str) -> None:
        """Forget a deleted securable and its grants (its descendants are removed one by one too)."""
        n = self._num.get(sid)
        if n is None or n == 0:
            return
        self.set_grants(sid, {})
        p = self._parent[n]
        if p != NONE and p in self.children:    # the parent may have gone first, in the same write
            self.children[p].discard(n)
        owner = self.owner_of(n)
        if owner is not None:
            self.owned[owner].discard(n)
        self._parent[n], self._kind[n], self._owner[n] = NONE, 0, NONE
        self._names.clear(n)
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
        out, parent = [n], self._parent
        n = parent[n]
        while n != NONE:
            out.append(n)
            n = parent[n]
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
        parent = self._parent
        while n != NONE:
            if n in marked:
                return n
            n = parent[n]
        return None

    def covered(self, candidates: BitMap, marked: BitMap) -> BitMap:
        """The candidates that are in `marked` or have an ancestor in it (grants inherit downward).
        Siblings share their ancestors, so each parent is looked at once, then one intersection."""
        out = candidates & marked
        by_parent: dict[int, BitMap] = {}
        parent, size = self._parent, len(self._parent)
        for n in candidates - out:
            by_parent.setdefault(parent[n] if n < size else NONE, BitMap()).add(n)
        for p, kids in by_parent.items():
            if p != NONE and self.first_in_chain(p, marked) is not None:
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
        out, parent, size = BitMap(), self._parent, len(self._parent)
        for n in marked:
            p = parent[n] if n < size else NONE
            while p != NONE and p not in out:
                out.add(p)
                p = parent[p]
        return out


class Fields(Mapping):
    """A read-only mapping over one packed field of a PrivilegeIndex: n -> value, for the n that have one.
    `flags()` gives, per n in order, whether it has one (iterating stays at C speed: itertools.compress)."""

    __slots__ = ("_size", "_value", "_has", "_flags")

    def __init__(self, index: PrivilegeIndex, value: Callable[[int], object], has: Callable[[int], bool],
                 flags: Callable[[], Iterable]):
        self._size, self._value, self._has, self._flags = len(index._key), value, has, flags

    def __getitem__(self, n: int):
        if not self.__contains__(n):
            raise KeyError(n)
        return self._value(n)

    def __contains__(self, n) -> bool:
        return type(n) is int and 0 <= n < self._size and self._has(n)

    def get(self, n, default=None):
        return self._value(n) if self.__contains__(n) else default

    def __iter__(self) -> Iterator[int]:
        return compress(range(self._size), self._flags())

    def __len__(self) -> int:
        return sum(map(bool, self._flags()))

    def values(self) -> list:
        return list(map(self._value, self))

    def items(self) -> list:
        return [(n, self._value(n)) for n in self]
