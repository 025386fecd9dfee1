"""SQL `LIKE` patterns (`%` any text, `_` any one character, no escape character) matched without
backtracking: the work is bounded by the text's length times the pattern's, whatever the pattern.

A pattern is split on `%` into pieces of fixed length (`_` and every other character each match
exactly one character). The first piece must match at the start of the text, the last at its end,
and each piece in between at its leftmost place after the one before it: placing a piece further
right only leaves less text for the pieces after it, so the leftmost place is always a right one
(the classic wildcard matcher). Each place of the text is tried by one piece at most: the work is
at most the text's length times the longest piece. A regular expression of `.*` runs instead
backtracks through every way of splitting the text, time exponential in the number of `%` (issue
42, item 9).

Each piece is a regular expression without repetition or alternatives, so it compares characters
exactly as a whole-pattern expression did, case-insensitive matching included (the same folding).
"""

from __future__ import annotations

import re


def _piece(text: str, flags: int) -> re.Pattern:
    return re.compile("".join("." if c == "_" else re.escape(c) for c in text), flags)


class LikePattern:
    """One compiled pattern: `matches(text)`, and `work(length)`, a bound on what matching costs."""

    __slots__ = ("_whole", "_head", "_middle", "_tail", "_head_len", "_tail_len", "_longest")

    def __init__(self, pattern: str, *, ignore_case: bool = False):
        flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
        pieces = pattern.split("%")
        compiled: dict[str, re.Pattern] = {}     # a piece repeated is compiled once

        def piece(text: str) -> re.Pattern:
            found = compiled.get(text)
            if found is None:
                found = compiled[text] = _piece(text, flags)
            return found

        # No `%`: one piece that must match the whole text.
        self._whole = piece(pattern) if len(pieces) == 1 else None
        head, *middle, tail = pieces if len(pieces) > 1 else ("", "")
        self._head = piece(head) if head else None
        self._tail = piece(tail) if tail else None
        self._middle = [piece(p) for p in middle if p]
        self._head_len, self._tail_len = len(head), len(tail)
        self._longest = max(map(len, middle), default=0)

    def matches(self, text: str) -> bool:
        if self._whole is not None:
            return self._whole.fullmatch(text) is not None
        end = len(text) - self._tail_len           # where the last piece must begin
        if end < self._head_len:
            return False
        if self._head is not None and self._head.match(text) is None:
            return False
        if self._tail is not None and self._tail.match(text, end) is None:     # fixed length: ends at the end
            return False
        at = self._head_len
        for piece in self._middle:
            found = piece.search(text, at, end)
            if found is None:
                return False
            at = found.end()
        return True

    def work(self, length: int) -> int:
        """At most how many character comparisons matching a text of `length` characters makes. The
        first and last pieces are tried at one place each; a middle piece at the places from where
        the one before it ended to where it is found, so the middle pieces together try each place
        of the text at most once (and one more each where they are found)."""
        return (length + len(self._middle)) * self._longest + self._head_len + self._tail_len + 1
