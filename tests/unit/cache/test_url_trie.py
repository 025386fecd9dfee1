"""Tests for UrlTrie (shardcat.cache.url_trie), including a model-based property test."""

from __future__ import annotations

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from shardcat.cache.url_trie import _NONE, UrlTrie, _Node
from shardcat.entities.urls import InvalidUrl, is_within, normalize_url, url_segments


def _trie(*urls: str) -> UrlTrie:
    trie = UrlTrie()
    for i, url in enumerate(urls):
        trie.insert(url, i)
    return trie


def _node_count(trie: UrlTrie) -> int:
    return sum(1 for _ in trie._walk(trie._root)) - 1  # minus the root


def _assert_compact(trie: UrlTrie) -> None:
    """The layout the memory budget relies on: one child inline, a dict only for two or more, each
    child's parent its holder, and no node that is neither an entry nor on the way to one."""
    for node in trie._walk(trie._root):
        kids = node.kids
        children = [] if kids is None else [kids] if isinstance(kids, _Node) else list(kids.values())
        if isinstance(kids, dict):
            assert len(kids) >= 2 and all(key is child.segment or key == child.segment for key, child in kids.items())
        assert all(child.parent is node for child in children)
        if node is not trie._root:
            assert children or node.value is not _NONE


def test_empty():
    trie = UrlTrie()
    assert len(trie) == 0
    assert list(trie.items()) == []
    assert trie.get("s3://b/a") is None
    assert trie.owner("s3://b/a") is None
    assert trie.first_overlap("s3://b/a") is None
    assert list(trie.descendants("s3://b")) == []
    assert "s3://b/a" not in trie


def test_insert_get_normalises_any_form():
    trie = _trie("s3a://Bucket/t1/")
    assert trie.get("s3://bucket/t1") == 0
    assert trie.get("S3://BUCKET//t1/./") == 0
    assert "s3://bucket/t1" in trie
    assert list(trie.items()) == [("s3://bucket/t1", 0)]
    assert trie.get("s3://bucket") is None
    assert trie.get("s3://bucket/t1/x") is None
    assert trie.get("gs://bucket/t1") is None


def test_insert_duplicate_raises_and_keeps_first_value():
    trie = _trie("s3://b/a")
    with pytest.raises(KeyError):
        trie.insert("s3a://b/a/", "other")
    assert trie.get("s3://b/a") == 0
    assert len(trie) == 1


def test_insert_nested_is_allowed():
    # Exclusivity is the caller's job; the trie only refuses exact duplicates.
    trie = _trie("s3://b/a", "s3://b/a/b", "s3://b")
    assert len(trie) == 3
    assert trie.get("s3://b") == 2


def test_none_value_is_stored():
    trie = UrlTrie()
    trie.insert("s3://b/a", None)
    assert "s3://b/a" in trie
    assert trie.owner("s3://b/a/x") == ("s3://b/a", None)
    assert trie.remove("s3://b/a") is None
    assert "s3://b/a" not in trie


def test_remove_returns_value_and_prunes():
    trie = _trie("s3://b/a/b/c", "s3://b/a")
    assert _node_count(trie) == 4  # s3://b, a, b, c
    assert trie.remove("s3://b/a/b/c/") == 0
    assert _node_count(trie) == 2  # b and c pruned; 'a' still holds an entry
    assert trie.remove("s3://b/a") == 1
    assert _node_count(trie) == 0
    assert len(trie) == 0


def test_remove_keeps_branches_that_still_hold_entries():
    trie = _trie("s3://b/a/x", "s3://b/a/y")
    trie.remove("s3://b/a/x")
    assert trie.get("s3://b/a/y") == 1
    assert _node_count(trie) == 3  # s3://b, a, y


def test_remove_missing_raises():
    trie = _trie("s3://b/a/b")
    for url in ("s3://b/a", "s3://b/a/b/c", "s3://c", "s3://b/ab"):
        with pytest.raises(KeyError):
            trie.remove(url)
    assert len(trie) == 1 and _node_count(trie) == 3


def test_owner_is_deepest_ancestor_or_self():
    trie = _trie("s3://b/t", "s3://b/t/part=1", "gs://b/t")
    assert trie.owner("s3://b/t") == ("s3://b/t", 0)
    assert trie.owner("s3://b/t/x.parquet") == ("s3://b/t", 0)
    assert trie.owner("s3://b/t/part=1/y.parquet") == ("s3://b/t/part=1", 1)
    assert trie.owner("s3://b/t/part=1") == ("s3://b/t/part=1", 1)
    assert trie.owner("s3://b/tt/x") is None  # sibling prefix
    assert trie.owner("s3://b") is None
    assert trie.owner("gs://b/t/z") == ("gs://b/t", 2)


def test_first_overlap():
    trie = _trie("s3://b/a/t1", "s3://b/c")
    assert trie.first_overlap("s3://b/a/t1") == ("s3://b/a/t1", 0)          # equal
    assert trie.first_overlap("s3://b/a/t1/sub") == ("s3://b/a/t1", 0)      # ancestor
    assert trie.first_overlap("s3://b/a") == ("s3://b/a/t1", 0)             # descendant
    assert trie.first_overlap("s3://b") in {("s3://b/a/t1", 0), ("s3://b/c", 1)}
    assert trie.first_overlap("s3://b/a/t2") is None
    assert trie.first_overlap("s3://b/a/t") is None
    assert trie.first_overlap("s3://b/a/t1x") is None
    assert trie.first_overlap("s3://b/cc") is None
    assert trie.first_overlap("s3://other") is None


def test_first_overlap_prefers_ancestor_over_descendant():
    trie = _trie("s3://b/a/b/c", "s3://b/a")
    assert trie.first_overlap("s3://b/a/b") == ("s3://b/a", 1)


def test_first_overlap_prefers_deepest_ancestor():
    trie = _trie("s3://b", "s3://b/a")
    assert trie.first_overlap("s3://b/a/x") == ("s3://b/a", 1)


def test_first_overlap_with_ignore():
    trie = UrlTrie()
    trie.insert("s3://b/root", "managed-root")
    trie.insert("s3://b/root/tables/t1", "table")
    trie.insert("s3://b/other/deep/x", "managed-root")
    skip_roots = lambda v: v == "managed-root"  # noqa: E731
    assert trie.first_overlap("s3://b/root/new", ignore=skip_roots) is None
    assert trie.first_overlap("s3://b/root/new") == ("s3://b/root", "managed-root")
    assert trie.first_overlap("s3://b/root/tables/t1/x", ignore=skip_roots) == (
        "s3://b/root/tables/t1", "table")
    assert trie.first_overlap("s3://b/root", ignore=skip_roots) == ("s3://b/root/tables/t1", "table")
    assert trie.first_overlap("s3://b", ignore=skip_roots) == ("s3://b/root/tables/t1", "table")
    assert trie.first_overlap("s3://b/other", ignore=skip_roots) is None
    assert trie.first_overlap("s3://b/other", ignore=lambda v: False) == (
        "s3://b/other/deep/x", "managed-root")


def test_descendants_are_strictly_below():
    trie = _trie("s3://b/a", "s3://b/a/x", "s3://b/a/x/y", "s3://b/ab", "s3://b/a/z")
    assert sorted(trie.descendants("s3://b/a")) == [
        ("s3://b/a/x", 1), ("s3://b/a/x/y", 2), ("s3://b/a/z", 4)]
    assert sorted(trie.descendants("s3://b/a/x/")) == [("s3://b/a/x/y", 2)]
    assert list(trie.descendants("s3://b/a/x/y")) == []
    assert list(trie.descendants("s3://b/a/q")) == []
    assert len(list(trie.descendants("s3://b"))) == 5


def test_descendants_parent_before_child():
    trie = _trie("s3://b/a/x/y", "s3://b/a/x", "s3://b/a")
    urls = [u for u, _ in trie.items()]
    assert urls.index("s3://b/a") < urls.index("s3://b/a/x") < urls.index("s3://b/a/x/y")


def test_sibling_prefix_names_do_not_overlap():
    trie = _trie("s3://b/a")
    assert trie.first_overlap("s3://b/ab") is None
    assert trie.owner("s3://b/ab/c") is None
    trie.insert("s3://b/ab", 1)
    assert trie.owner("s3://b/ab/c") == ("s3://b/ab", 1)
    assert list(trie.descendants("s3://b/a")) == []


@pytest.mark.parametrize("spelling", ["s3://b/a%2Fb", "s3://b/a%2fb", "s3://b/a%5Cb", "s3://b/a\\b",
                                      "s3://b/a/%2E%2E/c", "s3://b/a/.%2e"])
def test_encoded_separators_and_dot_segments_are_refused(spelling):
    # They would be one key to the trie and another to storage (issue 28): no rule may see them.
    trie = _trie("s3://b/a/b")
    for method in (trie.owner, trie.first_overlap, trie.get, trie.descendants):
        with pytest.raises(InvalidUrl):
            method(spelling)
    with pytest.raises(InvalidUrl):
        trie.insert(spelling, 1)


def test_file_root_and_bare_paths():
    trie = _trie("/data/t")
    assert trie.get("file://localhost/data/t/") == 0
    assert trie.first_overlap("file:///") == ("file:///data/t", 0)
    trie.insert("/", "root")
    assert trie.owner("/elsewhere") == ("file:///", "root")


def test_deep_paths_do_not_recurse():
    deep = "s3://b/" + "/".join(["d"] * 3000)
    trie = _trie(deep)
    assert len(list(trie.descendants("s3://b"))) == 1
    assert trie.first_overlap("s3://b", ignore=lambda v: False) == (deep, 0)
    trie.remove(deep)
    assert _node_count(trie) == 0


@pytest.mark.parametrize("method", ["insert", "remove", "get", "owner", "first_overlap",
                                    "descendants", "__contains__"])
def test_every_method_rejects_invalid_urls(method):
    trie = _trie("s3://b/a")
    args = ("s3://b/..", 1) if method == "insert" else ("s3://b/..",)
    with pytest.raises(InvalidUrl):
        getattr(trie, method)(*args)
    assert len(trie) == 1


# --- model-based property test ----------------------------------------------------------

# A small alphabet so paths collide, nest and share prefixes often.
_names = st.sampled_from(["a", "ab", "b", "%61"])  # %61 is 'a' escaped
_heads = st.sampled_from(["s3://b", "s3a://B", "s3://c", "file://"])


@st.composite
def _paths(draw):
    head = draw(_heads)
    names = draw(st.lists(_names, max_size=4))
    trailing = draw(st.sampled_from(["", "/", "//", "/."]))
    return head + "/" + "/".join(names) + trailing


def _depth(url: str) -> int:
    return len(url_segments(url))


class TrieMatchesModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.trie: UrlTrie[int] = UrlTrie()
        self.model: dict[str, int] = {}
        self.handles: dict[str, object] = {}    # url -> insert_node's handle, for those put so
        self.counter = 0

    @rule(url=_paths(), by_node=st.booleans())
    def insert(self, url, by_node):
        key = normalize_url(url)
        self.counter += 1
        if key in self.model:
            with pytest.raises(KeyError):
                self.trie.insert_node(url, self.counter) if by_node else self.trie.insert(url, self.counter)
        elif by_node:
            handle = self.handles[key] = self.trie.insert_node(url, self.counter, share=url_segments(key)[-1])
            assert self.trie.url_of(handle) == key
            self.model[key] = self.counter
        else:
            assert self.trie.insert(url, self.counter) == key
            self.model[key] = self.counter

    @rule(url=_paths(), by_node=st.booleans())
    def remove(self, url, by_node):
        key = normalize_url(url)
        handle = self.handles.pop(key, None)
        if key in self.model:
            removed = self.trie.remove_node(handle) if by_node and handle is not None else self.trie.remove(url)
            assert removed == self.model.pop(key)
            if handle is not None:
                with pytest.raises(KeyError):       # a handle removed is spent
                    self.trie.remove_node(handle)
        else:
            with pytest.raises(KeyError):
                self.trie.remove(url)

    @invariant()
    def handles_name_their_urls(self):
        for key, handle in self.handles.items():
            assert self.trie.url_of(handle) == key and self.trie.get(key) == self.model[key]

    @rule(url=_paths())
    def get_and_contains(self, url):
        key = normalize_url(url)
        assert self.trie.get(url) == self.model.get(key)
        assert (url in self.trie) == (key in self.model)

    @rule(url=_paths())
    def owner(self, url):
        above = [k for k in self.model if is_within(url, k)]
        expected = max(above, key=_depth) if above else None
        assert self.trie.owner(url) == (None if expected is None else (expected, self.model[expected]))

    @rule(url=_paths(), ignore_odd=st.booleans())
    def first_overlap(self, url, ignore_odd):
        ignore = (lambda v: v % 2 == 1) if ignore_odd else None
        kept = {k: v for k, v in self.model.items() if ignore is None or not ignore(v)}
        above = [k for k in kept if is_within(url, k)]
        below = [k for k in kept if is_within(k, url) and k not in above]
        found = self.trie.first_overlap(url, ignore=ignore)
        if above:
            deepest = max(above, key=_depth)
            assert found == (deepest, kept[deepest])
        elif below:
            assert found is not None and found[0] in below and found[1] == kept[found[0]]
        else:
            assert found is None

    @rule(url=_paths())
    def descendants(self, url):
        key = normalize_url(url)
        expected = {(k, v) for k, v in self.model.items() if is_within(k, key) and k != key}
        got = list(self.trie.descendants(url))
        assert len(got) == len(expected) and set(got) == expected

    @invariant()
    def same_contents(self):
        assert len(self.trie) == len(self.model)
        assert dict(self.trie.items()) == self.model
        order = [k for k, _ in self.trie.items()]          # each parent before its children
        assert all(order.index(a) < order.index(k) for k in order for a in order if a != k and is_within(k, a))

    @invariant()
    def compact_shape(self):
        _assert_compact(self.trie)

    @invariant()
    def no_leaked_nodes(self):
        # Every node is on the path to some entry: as many nodes as distinct key prefixes.
        prefixes = {url_segments(k)[:n] for k in self.model for n in range(1, _depth(k) + 1)}
        assert _node_count(self.trie) == len(prefixes)


TestTrieMatchesModel = TrieMatchesModel.TestCase
TestTrieMatchesModel.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


def test_a_shared_last_segment_is_the_given_string():
    trie = UrlTrie()
    table_id = "".join(["0f8fad5b-d9cb-469f-a165-70867728950e"])
    handle = trie.insert_node(f"s3://b/root/tables/{table_id}", "t", share=table_id)
    assert handle.segment is table_id
    assert trie.url_of(handle) == f"s3://b/root/tables/{table_id}"
    other = trie.insert_node("s3://b/root/tables/x", "u", share="not the last segment")
    assert other.segment == "x"
    assert trie.remove_node(handle) == "t" and trie.owner(f"s3://b/root/tables/{table_id}") is None


def test_one_child_is_inline_and_a_dict_comes_and_goes_with_the_second():
    trie = UrlTrie()
    a = trie.insert_node("s3://b/root/tables/a", "a")
    tables = a.parent
    assert tables.kids is a                             # one child: no dict
    b = trie.insert_node("s3://b/root/tables/b", "b")
    assert isinstance(tables.kids, dict) and set(tables.kids) == {"a", "b"}
    assert trie.remove_node(a) == "a"
    assert tables.kids is b                             # back to one: inline again
    assert trie.url_of(b) == "s3://b/root/tables/b" and trie.owner("s3://b/root/tables/b/f") == (
        "s3://b/root/tables/b", "b")
    _assert_compact(trie)


def test_handles_survive_their_neighbours_coming_and_going():
    trie = UrlTrie()
    root = trie.insert_node("s3://b/root", "root")
    table = trie.insert_node("s3://b/root/tables/t", "t")
    for i in range(5):                                  # siblings and children come and go around both
        sibling = trie.insert_node(f"s3://b/root/tables/s{i}", i)
        below = trie.insert_node("s3://b/root/tables/t/part", "p")
        trie.remove_node(sibling)
        trie.remove_node(below)
    assert trie.url_of(root) == "s3://b/root" and root.value == "root"
    assert trie.url_of(table) == "s3://b/root/tables/t" and table.value == "t"
    assert trie.first_overlap("s3://b/root/tables", ignore=lambda v: v == "root") == ("s3://b/root/tables/t", "t")
    assert trie.remove_node(root) == "root"
    assert trie.first_overlap("s3://b/root/x") is None and trie.first_overlap("s3://b") == ("s3://b/root/tables/t", "t")
    assert trie.remove_node(table) == "t"
    with pytest.raises(KeyError):                       # a spent handle stays spent
        trie.remove_node(table)
    assert len(trie) == 0 and _node_count(trie) == 0


def test_a_value_keeps_its_node_alive_and_nothing_else_does():
    # Removal prunes a whole chain of single children, and the trie counts entries, not nodes.
    trie = UrlTrie()
    deep = trie.insert_node("s3://b/" + "/".join(f"d{i}" for i in range(50)), "deep")
    shallow = trie.insert_node("s3://b/d0/d1", "shallow")
    assert len(trie) == 2 and _node_count(trie) == 51
    trie.remove_node(deep)
    assert len(trie) == 1 and _node_count(trie) == 3 and shallow.kids is None
    _assert_compact(trie)
