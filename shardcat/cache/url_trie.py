"""A map from canonical storage URL to value that answers path-overlap queries fast.

Keys are split with ``url_segments`` (``("s3://bucket", "a", "b")``) into a trie, so
"who owns this path" and "does anything overlap this path" cost time proportional to
the URL's depth, not the number of entries. Not thread-safe; don't mutate the trie
while iterating ``descendants`` or ``items``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ..entities.urls import normalize_url, url_from_segments, url_segments

__all__ = ["UrlTrie"]

V = TypeVar("V")


_NONE = object()    # a node's value when it holds no entry (None is a value like any other)


class _Node(Generic[V]):
    # No URL is kept: a node knows its segment and its parent, and an entry's URL is made from them
    # when asked for (a shard keeps a node per storage path: issue #48, bytes per asset).
    __slots__ = ("children", "value", "count", "parent", "segment")

    def __init__(self, parent: _Node[V] | None = None, segment: str = "") -> None:
        self.children: dict[str, _Node[V]] | None = None   # made on the first child: most nodes are leaves
        self.value = _NONE       # the entry's value; _NONE = no entry here
        self.count = 0  # entries in this node's subtree, itself included
        self.parent = parent
        self.segment = segment


class UrlTrie(Generic[V]):
    """Canonical storage URL -> value. Every method accepts any URL form (raises ``InvalidUrl``).

    ``insert_node`` returns a handle (the entry's node) that ``url_of`` and ``remove_node`` take:
    whoever remembers where it put a value keeps the handle instead of the URL string."""

    def __init__(self) -> None:
        self._root: _Node[V] = _Node()

    def _path(self, url: str) -> tuple[tuple[str, ...], list[_Node[V]]]:
        """The URL's segments and the existing nodes along them, root first (may stop short)."""
        segments = url_segments(url)
        nodes = [self._root]
        for segment in segments:
            children = nodes[-1].children
            child = children.get(segment) if children else None
            if child is None:
                break
            nodes.append(child)
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
        segments, nodes = self._path(url)
        if len(nodes) == len(segments) + 1 and nodes[-1].value is not _NONE:
            raise KeyError(url_from_segments(segments))
        node = self._root
        node.count += 1
        last = len(segments) - 1
        for i, segment in enumerate(segments):
            if node.children is None:
                node.children = {}
            child = node.children.get(segment)
            if child is None:
                if i == last and share is not None and share == segment:
                    segment = share
                child = node.children[segment] = _Node(node, segment)
            node = child
            node.count += 1
        node.value = value
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
        # Up to the root: each loses the entry; the now-empty tail is pruned, so removed paths don't
        # keep memory alive.
        while node is not None:
            node.count -= 1
            parent = node.parent
            if not node.count and parent is not None:
                del parent.children[node.segment]
                if not parent.children:
                    parent.children = None
            node = parent
        return value

    def get(self, url: str) -> V | None:
        """The value stored exactly at ``url``, or None."""
        node = self._node(url)
        return None if node is None or node.value is _NONE else node.value

    def owner(self, url: str) -> tuple[str, V] | None:
        """The entry at ``url`` or at its deepest ancestor, or None."""
        segments, nodes = self._path(url)
        for depth in range(len(nodes) - 1, -1, -1):
            if nodes[depth].value is not _NONE:
                return url_from_segments(segments[:depth]), nodes[depth].value
        return None

    def first_overlap(
        self, url: str, ignore: Callable[[V], bool] | None = None,
    ) -> tuple[str, V] | None:
        """An entry at, above or below ``url`` whose value ``ignore`` doesn't reject, or None.

        An entry at or above ``url`` wins (the deepest such); otherwise any one below it.
        """
        def wanted(node: _Node[V]) -> bool:
            return node.value is not _NONE and (ignore is None or not ignore(node.value))

        segments, nodes = self._path(url)
        for depth in range(len(nodes) - 1, -1, -1):
            if wanted(nodes[depth]):
                return url_from_segments(segments[:depth]), nodes[depth].value
        if len(nodes) != len(segments) + 1:
            return None  # url's node doesn't exist, so nothing lies below it
        below = nodes[-1]
        if ignore is None:
            # Pruning keeps every node's count >= 1, so any child leads down to an entry.
            while below.children:
                below = next(iter(below.children.values()))
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
            if node.children:
                stack.extend(reversed(node.children.values()))

    def __len__(self) -> int:
        return self._root.count

    def __contains__(self, url: str) -> bool:
        node = self._node(url)
        return node is not None and node.value is not _NONE

    def __repr__(self) -> str:
        return f"<UrlTrie {len(self)} entries>"
