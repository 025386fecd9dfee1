"""The path query language (entities/pathquery/) without a server: every example of docs/queries.md
parses; good queries parse and bad ones are 400s naming where and what; the evaluator's semantics
(nulls, patterns, lists, times, tags without values, entries, kinds at one level) over a small tree;
pages, by max_results or by the bound on work, add up to the whole answer."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from shardcat.entities.asset import Asset
from shardcat.entities.pathquery import LIKE_WORK_PER_NODE, OverBudget, Unread, describe, parse, run, valid_cursor
from shardcat.errors import CatalogError

DOC = Path(__file__).resolve().parents[3] / "docs" / "queries.md"
MS = str(uuid.uuid4())


def doc_examples() -> list[str]:
    return re.findall(r"```query\n(.*?)\n```", DOC.read_text(), re.S)


def test_every_example_in_the_doc_parses():
    examples = doc_examples()
    assert len(examples) >= 15
    for q in examples:
        plan = parse(q)
        assert plan.steps and plan.text == q


GOOD = [
    "/catalog", "/catalogs", "/catalog/schema/table|view/column", "/catalog/*/*/*", "/ catalog [ name = 'x' ] / schema",
    '/catalog[name = "a" or name = "b" and not (owner = "c")]',
    '/catalog/schema/table[exists(column/tag[key = "pii" and value = null])]',
    '/catalog/schema/function[data_type = "INT"]', '/catalog/schema/model[storage like "s3://%"]',
    '/catalog[created_at >= "2026-01-01T00:00:00Z" and updated_at < 1800000000000]',
    '/catalog[properties["a.b"] = "1" and tags["x y"]]', '/catalog/schema/table/column[position <= 2 and nullable = false]',
    '/catalog[name in ("a", \'b\', "c\\"d")]', '/catalog/schema/volume[volume_type != "EXTERNAL"]',
    '/catalog[exists(grant[privilege = "USE CATALOG"]) and exists(property[key like "x%"])]',
    '/catalog[owner = created_by]',
]

BAD = [
    ("", "empty"),
    ("catalog", "character 1: expected '/'"),
    ("/schema", "character 2: a schema is not a child of the metastore"),
    ("/catalog/table", "a table is not a child of catalog; here the path can walk into schema"),
    ("/catalog/schema/table/column/column", "column has no children"),
    ("/catalog/schema/table/tag", "only be tested inside a filter"),
    ("/cataloge", "unknown kind 'cataloge'"),
    ("/catalog[name = ]", "character 17: expected a field, a string"),
    ('/catalog[nme = "x"]', "character 10: unknown field 'nme'"),
    ('/catalog[table_type = "VIEW"]', "field 'table_type' does not apply to catalog"),
    ('/catalog/schema/volume[properties["a"]]', "'properties' does not apply to volume"),
    ('/catalog[name = "x"', "expected ']' to close the filter opened at character 9"),
    ('/catalog[(name = "x"]', "expected ')' to close the '(' at character 10"),
    ('/catalog[exists(schema]', "character 23: expected ')' to close exists("),
    ('/catalog[exists(table)]', "a table is not a child of catalog"),
    ('/catalog[exists(tag/tag)]', "a tag has no children"),
    ('/catalog[created_at > "soon"]', "'soon' is not a date or time"),
    ('/catalog[name like 3]', "a pattern in quotes after like"),
    ('/catalog[name not like "x"]', "write not (x like"),
    ('/catalog[name in (owner)]', "literals only"),
    ('/catalog["x"]', "a literal alone is not a condition"),
    ('/catalog[name = "a\\q"]', "unknown escape"),
    ("/catalog[name = 'x]", "a string is not closed"),
    ("/catalog[name = x]", "unknown field 'x'"),
    ("/catalog#", "unexpected character '#'"),
    ('/catalog[name = "x"] /', "expected a kind"),
    ('/catalog[tags[pii]]', "a key in quotes"),
    ("/catalog[" + "(" * 40 + 'name = "x"' + ")" * 40 + "]", "nest more than"),
    ("/catalog" * 1000, "at most 4000 characters"),
]


@pytest.mark.parametrize("query", GOOD)
def test_good_queries_parse(query):
    assert parse(query).steps


@pytest.mark.parametrize("query,words", BAD)
def test_bad_queries_are_400s_that_say_where_and_what(query, words):
    with pytest.raises(CatalogError) as e:
        parse(query)
    assert e.value.code == "INVALID_PARAMETER_VALUE" and e.value.status == 400
    assert words in e.value.message, e.value.message


def test_a_query_must_be_a_string():
    with pytest.raises(CatalogError) as e:
        parse(None)
    assert "must be a string" in e.value.message


# ---- the evaluator over a small tree ---------------------------------------------------------------

def asset(kind, parent, name, **info) -> Asset:
    ns = {"model": "registered_model"}.get(kind, kind)
    full = name if parent is None else f"{parent.full_name}.{name}"
    return Asset(str(uuid.uuid4()), MS, ns, ns, MS if parent is None else parent.id, name, full, None, info)


class World:
    """main.sales: orders (group-owned, email pii, no comment), people (pii without a value, commented),
    v (a view), raw (a volume), f (a function), m (a model); main.empty; other.x.t."""

    def __init__(self):
        self.main = asset("catalog", None, "main", owner="admin", created_at=1_700_000_000_000,
                          properties={"team": "core"})
        self.other = asset("catalog", None, "other", owner="bob")
        self.sales = asset("schema", self.main, "sales", owner="admin")
        self.empty = asset("schema", self.main, "empty", owner="admin")
        self.x = asset("schema", self.other, "x", owner="bob")
        cols = [{"name": "id", "type_name": "LONG", "nullable": False},
                {"name": "email", "type_name": "STRING", "tags": {"pii": "email"}}]
        self.orders = asset("table", self.sales, "orders", owner="eng", table_type="MANAGED",
                            data_source_format="DELTA", columns=cols, updated_at=1_800_000_000_000)
        self.people = asset("table", self.sales, "people", owner="eng", table_type="EXTERNAL", comment="who",
                            storage_location="s3://lake/people", columns=[{"name": "email", "tags": {"pii": None}}])
        self.v = asset("table", self.sales, "v", owner="bob", table_type="VIEW", columns=[{"name": "n"}],
                       tags={"tier": "gold"})
        self.raw = asset("volume", self.sales, "raw", owner="eng", volume_type="MANAGED")
        self.f = asset("function", self.sales, "f", owner="bob", data_type="INT")
        self.m = asset("model", self.sales, "orders", owner="eng")       # a model may share a table's name
        self.t = asset("table", self.x, "t", owner="bob", table_type="MANAGED", columns=[])
        self.listings = {}
        for a in (self.main, self.other, self.sales, self.empty, self.x, self.orders, self.people, self.v,
                  self.raw, self.f, self.m, self.t):
            self.listings.setdefault((a.parent_id, a.namespace), []).append(a)
        for listed in self.listings.values():
            listed.sort(key=lambda a: a.name)
        self.grant_map = {self.orders.id: {"analysts": {"SELECT"}, "bob": {"MODIFY", "SELECT"}},
                          self.sales.id: {"analysts": {"USE SCHEMA"}}}

    def children(self, parent, namespace):
        return self.listings.get((MS if parent is None else parent.id, namespace), [])

    def grants(self, a):
        return self.grant_map.get(a.id, {})

    def owner_kind(self, principal):
        return None if principal is None else {"eng": "group"}.get(principal, "user")


def found(q, world=None, **kw) -> list[str]:
    return [describe(n)["full_name"] for n in run(parse(q), world or World(), **kw).results]


def test_the_opening_example_and_the_fields():
    assert found('/catalog[name = "main"]/schema/table[owner_kind = "group" and exists(column[tags["pii"]]) '
                 'and not comment]') == ["main.sales.orders"]
    assert found('/catalog/schema/table|view[kind = "view"]') == ["main.sales.v"]
    assert found("/catalog/schema/view") == ["main.sales.v"]
    assert found("/catalog/schema/table") == ["main.sales.orders", "main.sales.people", "other.x.t"]
    # one level, several kinds: by name, then table, volume, function, model
    assert [(describe(n)["kind"], n.name) for n in run(parse('/catalog[name = "main"]/schema/*'), World()).results] \
        == [("function", "f"), ("table", "orders"), ("model", "orders"), ("table", "people"), ("volume", "raw"),
            ("view", "v")]
    assert found('/catalog/schema/*/column[type = "STRING"]') == ["main.sales.orders.email"]
    assert found("/catalog/schema/table/column[nullable = false]") == ["main.sales.orders.id"]
    assert found("/catalog/schema/table/column[position = 1]") == ["main.sales.orders.email"]
    assert found('/catalog/schema/volume[volume_type = "MANAGED"]') == ["main.sales.raw"]
    assert found('/catalog/schema/function[data_type = "INT"]') == ["main.sales.f"]
    assert found('/catalog[properties["team"] = "core"]') == ["main"]
    assert found('/catalog/schema/view[tags["tier"] = "gold"]') == ["main.sales.v"]


def test_nulls_patterns_lists_and_times():
    assert found("/catalog/schema/table[comment = null]") == ["main.sales.orders", "other.x.t"]
    assert found('/catalog/schema/table[comment != "who"]') == ["main.sales.orders", "other.x.t"]
    assert found('/catalog/schema/table[comment < "zzz"]') == ["main.sales.people"]     # null is not ordered
    assert found('/catalog/schema/table[storage like "S3://LAKE/%"]') == ["main.sales.people"]
    assert found('/catalog/schema/table[name like "_rders"]') == ["main.sales.orders"]
    assert found('/catalog/schema/table[name like "o%s" and name like "%"]') == ["main.sales.orders"]
    assert found('/catalog[owner in ("bob", "carol")]') == ["other"]
    assert found('/catalog[created_at = "2023-11-14T22:13:20Z"]') == ["main"]
    assert found('/catalog[created_at < "2024-01-01"]') == ["main"]
    assert found('/catalog/schema/table[updated_at > "2026-01-01"]') == ["main.sales.orders"]
    assert found('/catalog[created_at in ("2023-11-14T22:13:20Z")]') == ["main"]
    assert found('/catalog[created_at > "2020-01-01" or not created_at]') == ["main", "other"]
    assert found("/catalog[name = 1]") == []                      # a string is not a number
    assert found("/catalog/schema/table/column[nullable = 1]") == []     # nor a boolean one


def test_tags_without_values_and_entries():
    # `people.email` holds pii without a value: present, its value null
    assert found('/catalog/schema/table/column[tags["pii"]]') == ["main.sales.orders.email", "main.sales.people.email"]
    # `= null` holds without the tag too
    assert found('/catalog/schema/table/column[tags["pii"] = null]') == ["main.sales.orders.id",
                                                                         "main.sales.people.email"]
    assert found('/catalog/schema/table/column[tags["pii"] = null and tags["pii"]]') == ["main.sales.people.email"]
    assert found('/catalog/schema/table[exists(column/tag[key = "pii" and value = null])]') == ["main.sales.people"]
    assert found('/catalog/schema/table[exists(grant[principal = "analysts"])]') == ["main.sales.orders"]
    assert found('/catalog/schema/table[exists(grant[privilege = "MODIFY"]) and not exists(grant[privilege = '
                 '"MANAGE"])]') == ["main.sales.orders"]
    assert found('/catalog/schema[exists(grant[privilege = "USE SCHEMA"])]') == ["main.sales"]
    assert found('/catalog[exists(property[key = "team" and value = "core"])]') == ["main"]
    assert found("/catalog[not exists(schema/table)]") == []
    assert found("/catalog/schema[not exists(*)]") == ["main.empty"]


def test_pages_by_max_results_add_up_to_the_whole_answer():
    for q in ("/catalog/schema/*", "/catalog/schema/*/column", "/catalog/*", '/catalog/schema/table[owner = "eng"]'):
        whole = found(q)
        for limit in (1, 2, 3):
            got, after = [], None
            for _ in range(50):
                page = run(parse(q), World(), after=after, limit=limit)
                assert len(page.results) <= limit
                got += [describe(n)["full_name"] for n in page.results]
                after = page.after
                if after is None:
                    break
                assert valid_cursor(after, parse(q))
            assert got == whole, (q, limit)


def test_the_bound_on_work_ends_pages_early_but_never_stalls():
    q = "/catalog/schema/*/column"
    whole = found(q)
    for budget in (1, 2, 5):
        got, after, pages = [], None, 0
        while True:
            page = run(parse(q), World(), after=after, budget=budget, hard=1000)
            pages += 1
            got += [describe(n)["full_name"] for n in page.results]
            if page.after is None:
                break
            # past the bound only by re-walking the ancestors to where the page starts, and one node
            assert page.stopped == "work_bound" and page.visited <= max(budget, 4)
            after = page.after
        assert got == whole and pages > 1
    # a single node whose filter needs more than the hard bound cannot be decided
    with pytest.raises(OverBudget):
        run(parse('/catalog[exists(schema/*/column[name = "nope"])]'), World(), budget=2, hard=3)


def test_a_filter_on_one_name_looks_it_up_instead_of_scanning():
    """`name = "x"` (alone or and-ed) bisects the sorted children, as TreeCat's planner bounds a scan."""
    plan = parse('/catalog[name = "other" and owner = "bob"]/schema')
    assert plan.steps[0].name_eq == "other"
    page = run(plan, World())
    assert [n.full_name for n in page.results] == ["other.x"] and page.visited == 2
    assert parse('/catalog[name = "a" or owner = "b"]').steps[0].name_eq is None
    assert parse('/catalog[not (name = "a")]').steps[0].name_eq is None
    scanned = run(parse('/catalog[owner = "bob"]/schema'), World())
    assert scanned.visited == 3
    # in exists() too, and with several kinds at one level (a model and a table both named orders)
    assert found('/catalog/schema[exists(*[name = "orders" and kind = "model"])]') == ["main.sales"]
    assert [describe(n)["kind"] for n in run(parse('/catalog/schema/*[name = "orders"]'), World()).results] == \
        ["table", "model"]


class Lazy(World):
    """A World whose listings must be read first: the first ask of each raises Unread."""

    def __init__(self):
        super().__init__()
        self.read: set = set()

    def children(self, parent, namespace):
        key = (MS if parent is None else parent.id, namespace)
        if key not in self.read:
            raise Unread(parent, namespace)
        return super().children(parent, namespace)


@pytest.mark.parametrize("q", ["/catalog/schema/*/column", '/catalog[exists(schema/table[owner = "bob"])]/schema',
                               "/catalog/schema[not exists(*)]", '/catalog/schema/table[exists(column[tags["pii"]])]'])
def test_a_listing_not_read_yet_ends_the_run_where_it_was_needed_and_the_next_goes_on(q):
    """As the endpoint does: read what the run missed, go on from its cursor; the pieces add up."""
    world, got, after, rounds = Lazy(), [], None, 0
    while True:
        page = run(parse(q), world, after=after)
        got += [describe(n)["full_name"] for n in page.results]
        after = page.after
        if page.stopped != "unread":
            break
        rounds += 1
        world.read.add((MS if page.unread.parent is None else page.unread.parent.id, page.unread.namespace))
    assert after is None and rounds > 1
    assert got == found(q)


def test_a_like_over_a_long_text_counts_its_work_against_the_bound():
    """`like` is matched without backtracking (entities/like.py), and its character comparisons over
    LIKE_WORK_PER_NODE count as nodes visited, before they are made: no text and pattern stall a run."""
    world = World()
    world.orders.info["comment"] = "a" * 1_000_000
    # a pattern that backtracked for hours: every piece found at once, the last one fails at its place
    page = run(parse('/catalog/schema/table[comment like "' + "%a" * 100 + '%b"]'), world)
    assert page.results == [] and page.visited < 1_000_000 // LIKE_WORK_PER_NODE + 20    # one pass: ~1,000 nodes
    assert found('/catalog/schema/table[comment like "' + "%a" * 100 + '%"]', world) == ["main.sales.orders"]
    # a piece compared at every place of a long text: counted, past the hard bound it is refused
    with pytest.raises(OverBudget):
        run(parse('/catalog[name = "main"]/schema[name = "sales"]/table[comment like "%' + "_" * 2000 + 'b%"]'),
            world, budget=100, hard=100_000)
    small = World()
    page = run(parse('/catalog/schema/table[comment like "%' + "_" * 2000 + 'b%"]'), small)
    assert page.results == [] and page.visited < 50      # short texts cost nothing more
