"""A partial privilege index (cache/partial_privilege_index.py) decides as the whole one does, or
asks for what it lacks: random owners and grants, every securable asked every question, each
request starting from the metastore alone and loading what IndexNeeded names, as
governance/index.py's `load_needed` does from PostgreSQL (`securable_chains`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardcat.auth import Caller
from shardcat.cache.partial_privilege_index import IndexNeeded, PartialPrivilegeIndex
from shardcat.cache.privilege_index import PrivilegeIndex
from shardcat.entities.asset import Asset
from shardcat.errors import CatalogError
from shardcat.governance.authorize import Authz
from tests.unit.governance.test_authorize_model import TREE, world

CALLER = Caller("u", 1, False, 1, "ms", groups=frozenset({"g"}))


class Database:
    """The world as PostgreSQL holds it: rows and grants, and the chains `securable_chains` reads."""

    def __init__(self, w):
        self.rows = {name: (name, parent, kind, w["owners"].get(name, "root"), name)
                     for name, (kind, parent) in TREE.items()}
        self.grants: dict = {}
        for s, p, g in w["grants"]:
            self.grants.setdefault(s, {}).setdefault(p, set()).add(g)
        if len(w["grants"]) % 2:                    # a grant on the metastore itself, now and then
            self.grants.setdefault("ms", {})["g"] = {"USE CATALOG"}

    def whole(self) -> PrivilegeIndex:
        ix = PrivilegeIndex("ms", "root")
        for row in self.rows.values():
            ix.put(*row)
        for s, held in self.grants.items():
            ix.set_grants(s, held)
        return ix

    def chains(self, sids):
        found = {}
        for sid in sids:
            while sid in self.rows and sid not in found:
                found[sid] = self.rows[sid]
                sid = self.rows[sid][1]
        rows = list(found.values())[::-1] if len(found) % 2 else list(found.values())    # any order
        return rows, {s: self.grants[s] for s in ["ms", *found] if s in self.grants}

    def partial(self) -> PartialPrivilegeIndex:
        ix = PartialPrivilegeIndex("ms", "root")
        ix.load(*self.chains([]), ())
        return ix


def asked(db: Database, partial: PartialPrivilegeIndex, question, loads: list):
    """The question's answer on the partial index, loading what it asks for; "whole" if it needs all."""
    for _ in range(20):
        try:
            return question(Authz(CALLER, partial))
        except IndexNeeded as need:
            if need.sids is None:
                return "whole"
            loads.append(need.sids)
            partial.load(*db.chains(need.sids), need.sids)
    raise AssertionError("the partial index kept asking")


def _outcome(call):
    try:
        return call()
    except CatalogError as e:
        return e.code, e.message


def _asset(name: str, owners) -> Asset:
    kind, parent = TREE[name]
    return Asset(name, "ms", kind, kind, parent, name.rsplit(".", 1)[-1], name, None,
                 {"owner": owners.get(name, "root")})


@settings(max_examples=150, deadline=None)
@given(world, st.booleans())
def test_a_partial_index_decides_as_the_whole_one(w, one_request):
    db = Database(w)
    whole = Authz(CALLER, db.whole())
    shared = db.partial()
    assets = {name: _asset(name, w["owners"]) for name in TREE}
    for name, (kind, parent) in TREE.items():
        asset = assets[name]
        ops = ("read", "update", "delete", "grant", "owner") + (("read_data", "write_data") if kind == "table" else ())
        questions = [lambda a, op=op, kind=kind, asset=asset: a.decide(kind, op, asset) for op in ops]
        questions += [lambda a, kind=kind, asset=asset: a.sees(kind, asset) if kind == "table" else None,
                      lambda a, kind=kind, asset=asset: _outcome(lambda: a.require_or_missing(
                          kind, "update", asset, CatalogError("NOT_FOUND", "gone"))),
                      lambda a, kind=kind, asset=asset: a.may_read_known(asset)]
        if kind != "table":
            child = "table" if kind == "schema" else "schema"
            questions.append(lambda a, child=child, asset=asset: a.decide(child, "create", None, parent=asset))
        for question in questions:
            loads: list = []
            got = asked(db, shared if one_request else db.partial(), question, loads)
            # whether a catalog or schema holds something granted below it is the whole index's to say
            assert got == question(whole) or (got == "whole" and kind != "table"), (name, got)
            assert len(loads) <= 1 or one_request           # one chain read per securable at most


@settings(max_examples=60, deadline=None)
@given(world)
def test_what_lies_below_is_the_whole_indexs_to_say(w):
    """A list's visible set, and whether a catalog holds something granted below it, need the whole index."""
    db = Database(w)
    assets = {name: _asset(name, w["owners"]) for name in TREE}
    kids = [a for a in assets.values() if a.parent_id == "c1.s1"]
    whole = Authz(CALLER, db.whole())
    for question in (lambda a: a.filter("table", assets["c1.s1"], kids),
                     lambda a: a.visible_under("catalog", None),
                     lambda a: a.filter_any("table", kids)):
        got = asked(db, db.partial(), question, [])
        assert got in ("whole", question(whole))       # the chain alone may say nothing is visible
    # `sees` a container: what the caller may read answers at once; else what lies below it is asked
    for name in ("c1", "c1.s1", "c2"):
        got = asked(db, db.partial(), lambda a, n=name: a.sees(TREE[n][0], assets[n]), [])
        assert got in ("whole", Authz(CALLER, db.whole()).sees(TREE[name][0], assets[name]))


def test_a_list_the_caller_may_see_into_needs_the_whole_index():
    db = Database({"owners": {}, "grants": [("c1", "g", "USE CATALOG"), ("c1.s1", "u", "USE SCHEMA"),
                                            ("c1.s1.t2", "u", "SELECT")]})
    kids = [_asset(n, {}) for n in ("c1.s1.t1", "c1.s1.t2")]
    assert asked(db, db.partial(), lambda a: a.filter("table", _asset("c1.s1", {}), kids), []) == "whole"
    assert [a.full_name for a in Authz(CALLER, db.whole()).filter("table", _asset("c1.s1", {}), kids)] == ["c1.s1.t2"]


def test_an_asset_the_database_does_not_hold_yet_joins_under_its_loaded_parent():
    """A table made in the request's own write (not committed): the partial index learns it is absent,
    loads its parent's chain, and decides as the whole index with the table put in it."""
    w = {"owners": {"c1.s1": "u"}, "grants": [("c1", "u", "USE CATALOG")]}
    db = Database(w)
    new = Asset("new", "ms", "table", "table", "c1.s1", "t9", "c1.s1.t9", None, {"owner": "other"})
    loads: list = []
    got = asked(db, db.partial(), lambda a: a.decide("table", "update", new), loads)
    assert loads == [("new",), ("c1.s1",)]
    assert got == Authz(CALLER, db.whole()).decide("table", "update", new) and got.allowed


def test_a_partial_index_never_refuses_for_want_of_an_ancestor():
    """The grant that allows is on the catalog: without the catalog loaded the answer would be a
    refusal, so asking about the table loads its whole chain first."""
    db = Database({"owners": {}, "grants": [("c1", "u", "ALL PRIVILEGES")]})
    partial = db.partial()
    table = _asset("c1.s1.t1", {})
    with pytest.raises(IndexNeeded) as need:
        Authz(CALLER, partial).decide("table", "read_data", table)
    assert need.value.sids == ("c1.s1.t1",)
    partial.load(*db.chains(["c1.s1.t1"]), ["c1.s1.t1"])
    assert all(sid in partial for sid in ("c1", "c1.s1", "c1.s1.t1"))
    assert Authz(CALLER, partial).decide("table", "read_data", table).allowed


def test_only_the_task_answering_the_request_decides_with_its_partial_index(monkeypatch):
    """A group's write bodies run in their committer's task, which inherits the session of the request
    that started it: there the whole index decides, never another request's partial one."""
    import asyncio
    from types import SimpleNamespace

    from shardcat.governance import index as index_module
    from shardcat.shards.session import Session

    async def whole(shard, metastore_id, min_version=0):
        return "whole"
    monkeypatch.setattr(index_module, "privilege_index", whole)
    loading = SimpleNamespace(done=lambda: False)                  # the whole index, loading aside
    state = SimpleNamespace(privileges=None, privileges_aside=loading)

    async def state_of(metastore_id, min_version=0, *, paths=True):
        return state
    shard = SimpleNamespace(state=state_of, states={})

    async def scenario():
        partial = PartialPrivilegeIndex("ms", "root")
        with Session(CALLER) as session:
            session.privileges = index_module.RequestPrivileges(partial)
            assert await index_module.request_index(shard, CALLER) is partial
            assert await asyncio.create_task(index_module.request_index(shard, CALLER)) == "whole"
            other = Caller("v", 2, False, 1, "ms")
            assert await index_module.request_index(shard, other) == "whole"     # not the session's caller
            session.privileges.whole = True
            assert await index_module.request_index(shard, CALLER) == "whole"
        assert await index_module.request_index(shard, CALLER) == "whole"        # outside a request

    asyncio.run(scenario())
