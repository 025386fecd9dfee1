"""The privilege index against a naive model: random trees, owners, grants, removals; every answer
(inherited grant, sibling filtering, bulk coverage, containers holding grants) must match."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from shardcat.cache.privilege_index import ALL_PRIVILEGES, MANAGE, PrivilegeIndex, covers

PRINCIPALS = ["u", "g1", "g2", "x"]
PRIVILEGES = ["SELECT", "MODIFY", MANAGE, ALL_PRIVILEGES]

steps = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 30), st.sampled_from([None, *PRINCIPALS])),
    st.tuples(st.just("grant"), st.integers(0, 30), st.sampled_from(PRINCIPALS),
              st.sets(st.sampled_from(PRIVILEGES), max_size=3)),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("owner"), st.integers(0, 30), st.sampled_from([None, *PRINCIPALS])),
), max_size=60)


class Naive:
    def __init__(self):
        self.parent = {"ms": None}
        self.owner: dict[str, str | None] = {}
        self.grants: dict[str, dict[str, set[str]]] = {}

    def chain(self, s):
        while s is not None:
            yield s
            s = self.parent[s]

    def holds(self, principals, privilege, s) -> bool:
        return any(covers(g, privilege) for a in self.chain(s) for p in principals
                   for g in self.grants.get(a, {}).get(p, ()))

    def remove(self, s):
        for child in [c for c, p in self.parent.items() if p == s]:
            self.remove(child)
        self.parent.pop(s), self.owner.pop(s, None), self.grants.pop(s, None)


@settings(max_examples=150, deadline=None)
@given(steps, st.sets(st.sampled_from(PRINCIPALS), min_size=1), st.sampled_from(PRIVILEGES))
def test_index_matches_naive_model(ops, principals, privilege):
    ix, model = PrivilegeIndex("ms"), Naive()
    live = ["ms"]
    for op in ops:
        if op[0] == "add":
            parent = live[op[1] % len(live)]
            sid = f"s{len(model.parent)}-{op[1]}"
            if sid in model.parent:
                continue
            model.parent[sid], model.owner[sid] = parent, op[2]
            ix.put(sid, parent, "node", op[2], sid)
            live.append(sid)
        elif op[0] == "grant":
            sid = live[op[1] % len(live)]
            model.grants.setdefault(sid, {})[op[2]] = set(op[3])
            ix.set_grants(sid, {p: set(v) for p, v in model.grants[sid].items()})
        elif op[0] == "remove" and len(live) > 1:
            sid = live[1 + op[1] % (len(live) - 1)]
            gone = [s for s in live if sid in model.chain(s)]
            model.remove(sid)
            for s in gone:     # a deleted subtree leaves the index one securable at a time
                ix.remove(s)
                live.remove(s)
        elif op[0] == "owner" and len(live) > 1:
            sid = live[1 + op[1] % (len(live) - 1)]
            model.owner[sid] = op[2]
            ix.put(sid, model.parent[sid], "node", op[2], sid)

    marked = ix.granted(principals, privilege)
    for s in live:
        n = ix.find(s)
        assert (ix.first_in_chain(n, marked) is not None) == model.holds(principals, privilege, s)
    everything = BitMap(ix.find(s) for s in live)
    covered = ix.covered(everything, marked)
    assert {ix.key(n) for n in covered} == {s for s in live if model.holds(principals, privilege, s)}
    for parent in live:
        kids = {c for c, p in model.parent.items() if p == parent}
        got = {ix.key(n) for n in ix.covered_children(ix.find(parent), marked)}
        assert got == {c for c in kids if model.holds(principals, privilege, c)}
    owned = {ix.key(n) for n in ix.owned_by(principals)}
    assert owned == {s for s in live if model.owner.get(s) in principals}
    with_grants = {s for s in live for p in principals if model.grants.get(s, {}).get(p)}
    assert {ix.key(n) for n in ix.with_any_grant(principals)} == with_grants
    holders = {a for s in with_grants for a in list(model.chain(s))[1:]}
    assert {ix.key(n) for n in ix.above(ix.with_any_grant(principals))} == holders


def test_all_privileges_does_not_give_manage():
    ix = PrivilegeIndex("ms")
    ix.put("c", "ms", "catalog", None, "c")
    ix.put("t", "c", "table", None, "c.s.t")
    ix.set_grants("c", {"u": {ALL_PRIVILEGES}})
    assert ix.first_in_chain(ix.find("t"), ix.granted({"u"}, "SELECT")) == ix.find("c")
    assert ix.first_in_chain(ix.find("t"), ix.granted({"u"}, MANAGE)) is None


# ---- the packed representation against plain dicts: every field, view and copy -----------------

KINDS = ["catalog", "schema", "table", "volume"]

field_steps = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 25), st.integers(0, 25), st.sampled_from(KINDS),
              st.sampled_from([None, *PRINCIPALS]), st.text(max_size=12)),
    st.tuples(st.just("remove"), st.integers(1, 25)),
    st.tuples(st.just("grant"), st.integers(0, 25), st.sampled_from(PRINCIPALS),
              st.sets(st.sampled_from(PRIVILEGES), max_size=2)),
    st.tuples(st.just("copy"),),
), max_size=80)


class DictFields:
    """The fields as the index held them before it was packed: plain dicts by dense number, numbers
    handed out and reused the same way (the model the packed arrays must match)."""

    def __init__(self, root: str):
        self.num_of: dict[str, int] = {}
        self.keys: list[str | None] = []
        self.free: list[int] = []
        self.parent: dict[int, int] = {}
        self.kind: dict[int, str] = {}
        self.owner: dict[int, str] = {}
        self.name: dict[int, str] = {}
        self.children: dict[int, set[int]] = {}
        self.num(root)
        self.kind[0] = "metastore"

    def num(self, sid: str) -> int:
        if sid not in self.num_of:
            n = self.free.pop() if self.free else len(self.keys)
            self.keys[n:n + 1] = [sid]
            self.num_of[sid] = n
        return self.num_of[sid]

    def put(self, sid, parent_sid, kind, owner, name):
        n, p = self.num(sid), self.num(parent_sid)
        if n in self.parent:
            self.children.get(self.parent[n], set()).discard(n)
        self.parent[n], self.kind[n], self.name[n] = p, kind, name
        self.children.setdefault(p, set()).add(n)
        if owner is None:
            self.owner.pop(n, None)
        else:
            self.owner[n] = owner

    def remove(self, sid):
        n = self.num_of.get(sid)
        if n is None or n == 0:
            return
        if n in self.parent:
            self.children.get(self.parent.pop(n), set()).discard(n)
        for field in (self.kind, self.owner, self.name, self.children):
            field.pop(n, None)
        del self.num_of[sid]
        self.keys[n] = None
        self.free.append(n)

    def copy(self) -> "DictFields":
        out = DictFields.__new__(DictFields)
        out.__dict__ = {k: (dict(v) if isinstance(v, dict) else list(v)) for k, v in self.__dict__.items()}
        out.children = {k: set(v) for k, v in self.children.items()}
        return out


def expect(ix: PrivilegeIndex, model: DictFields) -> None:
    """The index answers every field question as the dicts do, by number and through its views."""
    assert dict(ix.parent) == model.parent and dict(ix.kind) == model.kind
    assert dict(ix.owner) == model.owner and dict(ix.name) == model.name
    assert len(ix) == len(model.num_of) and len(ix.kind) == len(model.kind) and len(ix.owner) == len(model.owner)
    assert sorted(ix.owner.values()) == sorted(model.owner.values())
    assert {p: set(kids) for p, kids in ix.children.items() if kids} == {p: k for p, k in model.children.items() if k}
    for sid, n in model.num_of.items():
        assert ix.find(sid) == n and ix.key(n) == sid and sid in ix
    for n in range(len(model.keys) + 2):
        assert ix.known(n) == (n in model.kind) == (n in ix.kind)
        assert ix.kind_of(n, "?") == model.kind.get(n, "?") == ix.kind.get(n, "?")
        assert ix.owner_of(n) == model.owner.get(n) == ix.owner.get(n)
        assert ix.name_of(n, "?") == model.name.get(n, "?") == ix.name.get(n, "?")
        assert ix.parent_of(n, -7) == model.parent.get(n, -7) == ix.parent.get(n, -7)
        if n < len(model.keys) and len(ix.chain(n)) < 40:      # (a number reused under its old child loops)
            chain, at = [n], n
            while at in model.parent and len(chain) < 40:
                at = model.parent[at]
                chain.append(at)
            assert ix.chain(n) == chain
    for owner in PRINCIPALS:
        assert set(ix.owned_by([owner])) == {n for n, o in model.owner.items() if o == owner}


@settings(max_examples=120, deadline=None)
@given(field_steps)
def test_packed_fields_match_plain_dicts(ops):
    ix, model, copies = PrivilegeIndex("ms"), DictFields("ms"), []
    for op in ops:
        if op[0] == "put":
            sid, parent = f"s{op[1]}", "ms" if op[2] == 0 else f"s{op[2]}"
            if sid == parent or (sid in ix and parent in ix and ix.find(sid) in ix.chain(ix.find(parent))):
                continue              # no cycles: a securable is never put under its own descendant
            ix.put(sid, parent, op[3], op[4], op[5])
            model.put(sid, parent, op[3], op[4], op[5])
        elif op[0] == "remove":
            ix.remove(f"s{op[1]}")
            model.remove(f"s{op[1]}")
        elif op[0] == "grant":
            sid = "ms" if op[1] == 0 else f"s{op[1]}"
            ix.set_grants(sid, {op[2]: op[3]})
            model.num(sid)
            assert (ix.find(sid) in ix.with_any_grant([op[2]])) == bool(op[3])
        else:
            copies.append((ix.copy(), model.copy()))
        expect(ix, model)
    for copy, then in copies:       # later changes to the index never reach its copies
        expect(copy, then)


rows = st.lists(st.tuples(st.integers(1, 30), st.integers(0, 30), st.sampled_from(KINDS),
                          st.sampled_from([None, *PRINCIPALS]), st.text(max_size=8)), max_size=60)


@settings(max_examples=100, deadline=None)
@given(rows, st.lists(st.integers(1, 30), max_size=5))
def test_put_many_is_put_one_by_one(batch, removed):
    """A load's `put_many` gives the same numbers and fields as `put` of each row, also over an index
    that already holds some of them and has freed numbers to reuse."""
    one, many = PrivilegeIndex("ms"), PrivilegeIndex("ms")
    for ix in (one, many):
        ix.put("s1", "ms", "catalog", "u", "s1")
        ix.put("s2", "s1", "schema", None, "s1.s2")
        for r in removed:
            ix.remove(f"s{r}")
    kept = []
    for a, b, kind, owner, name in batch:
        sid, parent = f"s{a}", "ms" if b == 0 else f"s{b}"
        if sid == parent or (sid in one and parent in one and one.find(sid) in one.chain(one.find(parent))):
            continue              # no cycles: a securable is never put under its own descendant
        one.put(sid, parent, kind, owner, name)
        kept.append((sid, parent, kind, owner, name))
    many.put_many(iter(kept))
    model = DictFields("ms")
    model.__dict__.update(num_of=dict(one._num), keys=list(one._key), free=list(one._free),
                          parent=dict(one.parent), kind=dict(one.kind), owner=dict(one.owner), name=dict(one.name),
                          children={p: set(k) for p, k in one.children.items()})
    expect(many, model)
    assert many._free == one._free


def test_bytes_per_securable_stay_packed():
    """20,000 tables with UUID ids and 30-character names: the index keeps about an id's map entry and
    a few packed numbers each (today ~190 B; as dicts and objects it was ~440 B)."""
    import gc
    import tracemalloc
    import uuid

    ids = [str(uuid.UUID(int=i * 7919 + 1)) for i in range(20_002)]
    names = [f"main.sales.table_{i:013d}" for i in range(20_002)]
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        ix = PrivilegeIndex("ms", "admin")
        ix.put(ids[0], "ms", "catalog", "admin", "main")
        ix.put(ids[1], ids[0], "schema", "admin", "main.sales")
        for sid, name in zip(ids[2:], names[2:]):
            ix.put(sid, ids[1], "table", "alice", name)
        gc.collect()
        per = (tracemalloc.get_traced_memory()[0] - before) / 20_000
    finally:
        tracemalloc.stop()
    del ids, names
    assert len(ix) == 20_003
    assert 100 < per < 230, per
