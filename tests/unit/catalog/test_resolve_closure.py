"""The dependency closure of batched resolve, on hand-made graphs: order, shared dependencies,
depth counted along the longest chain, cycles, missing and unparsable nodes."""

from __future__ import annotations

import pytest

from shardcat.entities.asset import Asset
from shardcat.catalog.tree.dependencies import DependencyError, Node, closure


def view(name: str, *deps: str, error: str | None = None) -> tuple:
    asset = Asset(name, "ms", "table", "table", "schema", name.split(".")[-1], name, None, {"table_type": "VIEW"}, 1)
    return ("table", name), Node(asset, [("table", d) for d in deps], error)


def graph(*nodes) -> dict:
    return dict(nodes)


def test_order_is_deepest_first_and_shared_dependencies_appear_once():
    g = graph(view("c.s.top", "c.s.x", "c.s.y"), view("c.s.x", "c.s.base"), view("c.s.y", "c.s.base"),
              view("c.s.base"))
    assert [k[1] for k in closure(("table", "c.s.top"), g)] == ["c.s.base", "c.s.x", "c.s.y"]


def test_depth_is_the_longest_chain_even_through_a_node_seen_before():
    # top -> short -> d3 and top -> d1 -> d2 -> d3 -> leaf: d3 is first met at depth 2, later at 4
    g = graph(view("c.s.top", "c.s.short", "c.s.d1"), view("c.s.short", "c.s.d3"), view("c.s.d1", "c.s.d2"),
              view("c.s.d2", "c.s.d3"), view("c.s.d3", "c.s.leaf"), view("c.s.leaf"))
    assert len(closure(("table", "c.s.top"), g, max_depth=4)) == 5
    with pytest.raises(DependencyError, match="nests deeper than 3 levels"):
        closure(("table", "c.s.top"), g, max_depth=3)


def test_cycles_missing_and_unparsable_nodes_name_the_culprit():
    cyc = graph(view("c.s.a", "c.s.b"), view("c.s.b", "c.s.c"), view("c.s.c", "c.s.b"))
    with pytest.raises(DependencyError, match=r"Dependency cycle: c\.s\.b -> c\.s\.c -> c\.s\.b"):
        closure(("table", "c.s.a"), cyc)
    missing = graph(view("c.s.a", "c.s.gone"), (("table", "c.s.gone"), Node(None)))
    with pytest.raises(DependencyError, match="'c.s.gone', needed through c.s.a -> c.s.gone") as e:
        closure(("table", "c.s.a"), missing)
    assert e.value.code == "NOT_FOUND"
    bad = graph(view("c.s.a", "c.s.bad"), view("c.s.bad", error="Expecting )"))
    with pytest.raises(DependencyError, match="view 'c.s.bad' does not parse: Expecting"):
        closure(("table", "c.s.a"), bad)
