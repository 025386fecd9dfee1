"""A map from canonical storage URL to value that answers path-overlap queries fast.

Keys are split with ``url_segments`` (``("s3://bucket", "a", "b")``) into a trie, so
"who owns this path" and "does anything overlap this path" cost time proportional to
the URL's depth, not the number of entries. Not thread-safe; don't mutate the trie
while iterating ``descendants`` or ``items``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ..entities.urls import url_from_segments, url_segments

__all__ = ["UrlTrie"]

V = TypeVar("V")


class _Node(Generic[V]):
    __slots__ = ("children", "entry", "count")

    def __init__(self) -> None:
        self.children: dict[str, _Node[V]] | None = None   # made on the first child: most nodes are leaves
        self.entry: tuple[str, V] | None = None  # (canonical url, value); None = no entry here
        self.count = 0  # entries in this node's subtree, itself included


class UrlTrie(Generic[V]):
    """Canonical storage URL -> value. Every method accepts any URL form (raises ``InvalidUrl``)."""

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

    def insert(self, url: str, value: V) -> str:
        """Store ``value`` at ``url``; ``KeyError`` if that exact URL already holds one. Returns the
        canonical url it is kept under (callers that remember it then share the one string)."""
        segments, nodes = self._path(url)
        canonical = url_from_segments(segments)
        if len(nodes) == len(segments) + 1 and nodes[-1].entry is not None:
            raise KeyError(canonical)
        node = self._root
        node.count += 1
        for segment in segments:
            if node.children is None:
                node.children = {}
            node = node.children.setdefault(segment, _Node())
            node.count += 1
        node.entry = (canonical, value)
        return canonical

    def remove(self, url: str) -> V:
        """Remove and return the value at ``url``; ``KeyError`` if there is none."""
        segments, nodes = self._path(url)
        target = nodes[-1]
        if len(nodes) != len(segments) + 1 or target.entry is None:
            raise KeyError(url_from_segments(segments))
        _, value = target.entry
        target.entry = None
        for node in nodes:
            node.count -= 1
        # Prune the now-empty tail so removed paths don't keep memory alive.
        for depth in range(len(segments), 0, -1):
            if nodes[depth].count:
                break
            parent = nodes[depth - 1]
            del parent.children[segments[depth - 1]]
            if not parent.children:
                parent.children = None
        return value

    def get(self, url: str) -> V | None:
        """The value stored exactly at ``url``, or None."""
        node = self._node(url)
        return None if node is None or node.entry is None else node.entry[1]

    def owner(self, url: str) -> tuple[str, V] | None:
        """The entry at ``url`` or at its deepest ancestor, or None."""
        _, nodes = self._path(url)
        for node in reversed(nodes):
            if node.entry is not None:
                return node.entry
        return None

    def first_overlap(
        self, url: str, ignore: Callable[[V], bool] | None = None,
    ) -> tuple[str, V] | None:
        """An entry at, above or below ``url`` whose value ``ignore`` doesn't reject, or None.

        An entry at or above ``url`` wins (the deepest such); otherwise any one below it.
        """
        def wanted(node: _Node[V]) -> bool:
            return node.entry is not None and (ignore is None or not ignore(node.entry[1]))

        segments, nodes = self._path(url)
        for node in reversed(nodes):
            if wanted(node):
                return node.entry
        if len(nodes) != len(segments) + 1:
            return None  # url's node doesn't exist, so nothing lies below it
        below = nodes[-1]
        if ignore is None:
            # Pruning keeps every node's count >= 1, so any child leads down to an entry.
            while below.children:
                below = next(iter(below.children.values()))
                if below.entry is not None:
                    return below.entry
            return None
        for node in self._walk(below):  # `below` itself was checked above; harmless to re-check
            if wanted(node):
                return node.entry
        return None

    def descendants(self, url: str) -> Iterator[tuple[str, V]]:
        """Entries strictly below ``url``, each parent before its children."""
        top = self._node(url)
        if top is None:
            return iter(())
        return (n.entry for n in self._walk(top) if n is not top and n.entry is not None)

    def items(self) -> Iterator[tuple[str, V]]:
        """Every ``(canonical url, value)``, each parent before its children."""
        return (n.entry for n in self._walk(self._root) if n.entry is not None)

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
        return node is not None and node.entry is not None

    def __repr__(self) -> str:
        return f"<UrlTrie {len(self)} entries>"
