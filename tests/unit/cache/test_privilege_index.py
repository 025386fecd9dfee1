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
