"""Authz (governance/authorize.py) against a naive reading of the rules, written out here
independently: random owners and grants (to a user and its group, on any level), every table
and schema asked every question; list visibility must agree with asking one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shardcat.auth import Caller
from shardcat.cache.privilege_index import PrivilegeIndex
from shardcat.entities.asset import Asset
from shardcat.governance.authorize import Authz

TREE = {"c1": ("catalog", "ms"), "c1.s1": ("schema", "c1"), "c1.s2": ("schema", "c1"), "c2": ("catalog", "ms"),
        "c2.s3": ("schema", "c2"), "c1.s1.t1": ("table", "c1.s1"), "c1.s1.t2": ("table", "c1.s1"),
        "c1.s2.t3": ("table", "c1.s2"), "c2.s3.t4": ("table", "c2.s3")}
PRIVS = ["USE CATALOG", "USE SCHEMA", "SELECT", "MODIFY", "BROWSE", "MANAGE", "ALL PRIVILEGES", "CREATE TABLE"]
WHO = ["u", "g", "other"]
ME = {"u", "g"}

world = st.fixed_dictionaries({
    "owners": st.dictionaries(st.sampled_from(sorted(TREE)), st.sampled_from(WHO), max_size=4),
    "grants": st.lists(st.tuples(st.sampled_from(sorted(TREE)), st.sampled_from(WHO), st.sampled_from(PRIVS)),
                       max_size=12),
})


def chain(name):
    while name != "ms":
        yield name
        name = TREE[name][1]


class Naive:
    def __init__(self, owners, grants):
        self.owners, self.grants = owners, grants

    def holds(self, name, privilege):
        return any(s in set(chain(name)) and p in ME and (g == privilege or (g == "ALL PRIVILEGES" and
                                                                             privilege != "MANAGE"))
                   for s, p, g in self.grants)

    def owns_above(self, name):
        return any(self.owners.get(s) in ME for s in chain(name))

    def administers(self, name):
        return self.owns_above(name) or self.holds(name, "MANAGE")

    def uses(self, name):
        """USE on every catalog and schema strictly above `name`."""
        for s in list(chain(name))[1:]:
            need = "USE CATALOG" if TREE[s][0] == "catalog" else "USE SCHEMA"
            if not (self.owns_above(s) or self.holds(s, need)):
                return False
        return True

    def decide(self, name, op):
        kind = TREE[name][0]
        own = self.owners.get(name) in ME
        if op == "read":
            reads = {"table": "SELECT", "schema": "USE SCHEMA", "catalog": "USE CATALOG"}[kind]
            ok = self.administers(name) or own or self.holds(name, reads) or self.holds(name, "BROWSE")
        elif op == "read_data":
            ok = own or self.holds(name, "SELECT")
        elif op == "write_data":
            ok = own or self.holds(name, "MODIFY")
        else:
            ok = self.administers(name)
        return ok and self.uses(name)


@settings(max_examples=200, deadline=None)
@given(world)
def test_authz_agrees_with_the_naive_rules(w):
    ix = PrivilegeIndex("ms", "root")
    assets = {}
    for name, (kind, parent) in TREE.items():
        assets[name] = Asset(name, "ms", kind, kind, parent, name.rsplit(".", 1)[-1], name, None,
                             {"owner": w["owners"].get(name, "root")})
        ix.put(name, parent, kind, w["owners"].get(name, "root"), name)
    held = {}
    for s, p, g in w["grants"]:
        held.setdefault(s, {}).setdefault(p, set()).add(g)
    for s, by in held.items():
        ix.set_grants(s, by)
    authz = Authz(Caller("u", 1, False, 1, "ms", groups=frozenset({"g"})), ix)
    naive = Naive(w["owners"], w["grants"])
    for name, (kind, _) in TREE.items():
        ops = ("read", "update", "delete", "grant") + (("read_data", "write_data") if kind == "table" else ())
        for op in ops:
            assert authz.decide(kind, op, assets[name]).allowed == naive.decide(name, op), (name, op)
    for schema in ("c1.s1", "c1.s2", "c2.s3"):
        kids = [a for a in assets.values() if a.parent_id == schema]
        shown = {a.full_name for a in authz.filter("table", assets[schema], kids)}
        assert shown == {a.full_name for a in kids if naive.decide(a.full_name, "read")}
    catalogs = [assets["c1"], assets["c2"]]
    shown = {a.full_name for a in authz.filter("catalog", None, catalogs)}
    # Catalogs: readable ones, and those holding something the caller has a grant on or owns.
    holds_below = {c for c in ("c1", "c2") for s, p, _ in w["grants"] if p in ME and s.startswith(c + ".")} | \
                  {c for c in ("c1", "c2") for s, o in w["owners"].items() if o in ME and s.startswith(c + ".")}
    assert shown == {c.full_name for c in catalogs if naive.decide(c.full_name, "read")} | holds_below
