"""A map from canonical storage URL to value that answers path-overlap queries fast.

Keys are split with ``url_segments`` (``("s3://bucket", "a", "b")``) into a trie, so
"who owns this path" and "does anything overlap this path" cost time proportional to
the URL's depth, not the number of entries. Not thread-safe; don't mutate the trie
while iterating ``descendants`` or ``items``.

Memory (issue #48, bytes per asset): a shard keeps one node per distinct path prefix of every
storage path it knows, so a node is four slots and nothing else. It keeps no URL string (the URL
is made from the segments up to the root when asked for), no count of the entries below it (the
trie keeps one total; pruning needs only "has children or a value"), and no dict when it has one
child (the child itself is kept inline: most inner nodes of external paths have exactly one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ..entities.urls import normalize_url, url_from_segments, url_segments

__all__ = ["UrlTrie"]

V = TypeVar("V")


_NONE = object()    # a node's value when it holds no entry (None is a value like any other)


class _Node(Generic[V]):
    # `kids` is None (a leaf), one _Node (a single child, kept inline) or a dict segment -> _Node.
    # Every node but the root lies on the path to some entry (emptied branches are pruned).
    __slots__ = ("parent", "segment", "value", "kids")

    def __init__(self, parent: _Node[V] | None = None, segment: str = "") -> None:
        self.parent = parent
        self.segment = segment
        self.value = _NONE       # the entry's value; _NONE = no entry here
        self.kids: _Node[V] | dict[str, _Node[V]] | None = None


def _child(node: _Node[V], segment: str) -> _Node[V] | None:
    kids = node.kids
    if kids is None:
        return None
    if kids.__class__ is _Node:
        return kids if kids.segment == segment else None
    return kids.get(segment)


def _adopt(node: _Node[V], child: _Node[V]) -> None:
    kids = node.kids
    if kids is None:
        node.kids = child
    elif kids.__class__ is _Node:
        node.kids = {kids.segment: kids, child.segment: child}   # the second child: now a dict
    else:
        kids[child.segment] = child


def _disown(node: _Node[V], child: _Node[V]) -> None:
    kids = node.kids
    if kids is child:
        node.kids = None
        return
    del kids[child.segment]
    if len(kids) == 1:
        node.kids = next(iter(kids.values()))   # back to one child: inline again, the dict goes


class UrlTrie(Generic[V]):
    """Canonical storage URL -> value. Every method accepts any URL form (raises ``InvalidUrl``).

    ``insert_node`` returns a handle (the entry's node) that ``url_of`` and ``remove_node`` take:
    whoever remembers where it put a value keeps the handle instead of the URL string. A handle's
    ``value`` is the entry's value, and its ``segment`` the URL's last segment."""

    def __init__(self) -> None:
        self._root: _Node[V] = _Node()
        self._size = 0

    def _path(self, url: str) -> tuple[tuple[str, ...], list[_Node[V]]]:
        """The URL's segments and the existing nodes along them, root first (may stop short)."""
        segments = url_segments(url)
        node = self._root
        nodes = [node]
        for segment in segments:
            kids = node.kids
            if kids is None:
                break
            if kids.__class__ is _Node:
                if kids.segment != segment:
                    break
                node = kids
            else:
                node = kids.get(segment)
                if node is None:
                    break
            nodes.append(node)
        return segments, nodes

    def _node(self, url: str) -> _Node[V] | None:
        segments, nodes = self._path(url)
        return nodes[-1] if len(nodes) == len(segments) + 1 else None

    @staticmethod
    def url_of(node: _Node[V]) -> str:
        """The canonical URL of a node (an `insert_node` handle)."""
        segments = []
        while node.parent is not None:
            segments.append(node.segment)
            node = node.parent
        segments.reverse()
        return url_from_segments(segments)

    def _entry(self, node: _Node[V]) -> tuple[str, V]:
        return self.url_of(node), node.value

    def insert(self, url: str, value: V) -> str:
        """Store ``value`` at ``url``; ``KeyError`` if that exact URL already holds one. Returns the
        canonical url."""
        return self.url_of(self.insert_node(url, value))

    def insert_node(self, url: str, value: V, share: str | None = None) -> _Node[V]:
        """`insert`, returning the entry's node (for `url_of` and `remove_node`). `share`: a string
        equal to the URL's last segment (a table's id ends its managed path) is kept as that segment."""
        segments = url_segments(url)
        node = self._root
        last = len(segments) - 1
        for i, segment in enumerate(segments):
            child = _child(node, segment)
            if child is None:
                if i == last and share is not None and share == segment:
                    segment = share
                child = _Node(node, segment)
                _adopt(node, child)
            node = child
        if node.value is not _NONE:
            # The whole path existed (an entry ends it), so nothing was added above.
            raise KeyError(url_from_segments(segments))
        node.value = value
        self._size += 1
        return node

    def remove(self, url: str) -> V:
        """Remove and return the value at ``url``; ``KeyError`` if there is none."""
        node = self._node(url)
        if node is None or node.value is _NONE:
            raise KeyError(normalize_url(url))
        return self.remove_node(node)

    def remove_node(self, node: _Node[V]) -> V:
        """Remove and return the value of an entry's node (an `insert_node` handle still in the trie)."""
        value = node.value
        if value is _NONE:
            raise KeyError(self.url_of(node))
        node.value = _NONE
        self._size -= 1
        # Up towards the root, the now-empty tail is pruned, so removed paths don't keep memory alive.
        while node.kids is None and node.value is _NONE and node.parent is not None:
            parent = node.parent
            _disown(parent, node)
            node = parent
        return value

    def get(self, url: str) -> V | None:
        """The value stored exactly at ``url``, or None."""
        node = self._node(url)
        return None if node is None or node.value is _NONE else node.value

    def owner(self, url: str) -> tuple[str, V] | None:
        """The entry at ``url`` or at its deepest ancestor, or None."""
        # `_path`'s walk without its list: every path-based read asks this.
        segments = url_segments(url)
        node, hit, depth = self._root, None, 0
        for i, segment in enumerate(segments, 1):
            kids = node.kids
            if kids is None:
                break
            if kids.__class__ is _Node:
                if kids.segment != segment:
                    break
                node = kids
            else:
                node = kids.get(segment)
                if node is None:
                    break
            if node.value is not _NONE:
                hit, depth = node, i
        return None if hit is None else (url_from_segments(segments[:depth]), hit.value)

    def first_overlap(
        self, url: str, ignore: Callable[[V], bool] | None = None,
    ) -> tuple[str, V] | None:
        """An entry at, above or below ``url`` whose value ``ignore`` doesn't reject, or None.

        An entry at or above ``url`` wins (the deepest such); otherwise any one below it.
        """
        def wanted(node: _Node[V]) -> bool:
            return node.value is not _NONE and (ignore is None or not ignore(node.value))

        segments, nodes = self._path(url)
        for depth in range(len(nodes) - 1, 0, -1):
            if wanted(nodes[depth]):
                return url_from_segments(segments[:depth]), nodes[depth].value
        if len(nodes) != len(segments) + 1:
            return None  # url's node doesn't exist, so nothing lies below it
        below = nodes[-1]
        if ignore is None:
            # Pruning leaves no node off the path to an entry, so any child leads down to one.
            while below.kids is not None:
                kids = below.kids
                below = kids if kids.__class__ is _Node else next(iter(kids.values()))
                if below.value is not _NONE:
                    return self._entry(below)
            return None
        for node in self._walk(below):  # `below` itself was checked above; harmless to re-check
            if wanted(node):
                return self._entry(node)
        return None

    def descendants(self, url: str) -> Iterator[tuple[str, V]]:
        """Entries strictly below ``url``, each parent before its children."""
        top = self._node(url)
        if top is None:
            return iter(())
        return (self._entry(n) for n in self._walk(top) if n is not top and n.value is not _NONE)

    def items(self) -> Iterator[tuple[str, V]]:
        """Every ``(canonical url, value)``, each parent before its children."""
        return (self._entry(n) for n in self._walk(self._root) if n.value is not _NONE)

    @staticmethod
    def _walk(top: _Node[V]) -> Iterator[_Node[V]]:
        # An explicit stack: deep paths must not hit the recursion limit.
        stack = [top]
        while stack:
            node = stack.pop()
            yield node
            kids = node.kids
            if kids is not None:
                if kids.__class__ is _Node:
                    stack.append(kids)
                else:
                    stack.extend(reversed(kids.values()))

    def __len__(self) -> int:
        return self._size

    def __contains__(self, url: str) -> bool:
        node = self._node(url)
        return node is not None and node.value is not _NONE

    def __repr__(self) -> str:
        return f"<UrlTrie {len(self)} entries>"
