"""The `like` matcher (entities/like.py) without a server: it answers exactly as the backtracking
regular expression it replaced (hypothesis over small alphabets with case folding, `_`, `%`,
newlines and regex metacharacters, case-sensitive and not), and patterns that made that expression
run for hours (issue 42, item 9) match in well under a second, with a work bound that grows with
the pattern's length, not exponentially in its `%`."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings, strategies as st

from shardcat.catalog.protocols.delta_sharing.predicates import partition_filter
from shardcat.entities.like import LikePattern


def reference(pattern: str, ignore_case: bool) -> re.Pattern:
    """The implementation before: one regular expression, `%` as `.*`, `_` as `.`."""
    parts = ["." if c == "_" else ".*" if c == "%" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.DOTALL | (re.IGNORECASE if ignore_case else 0))


# Letters that fold into one another (K and the Kelvin sign, s and the long s, i and dotless i),
# a newline, and characters regular expressions treat specially.
TEXT = st.text(alphabet="aAbBkKKsSſiIı\n.*[\\", max_size=8)
PATTERN = st.text(alphabet="aAbBkKKsSſiIı\n.*[\\%%%__", max_size=7)


@settings(max_examples=3000)
@given(PATTERN, TEXT, st.booleans())
def test_answers_as_the_regular_expression_did(pattern, text, ignore_case):
    expected = reference(pattern, ignore_case).fullmatch(text) is not None
    assert LikePattern(pattern, ignore_case=ignore_case).matches(text) is expected


@settings(max_examples=500)
@given(st.lists(st.sampled_from(["a", "b", "_", "%", "ab", "%a%"]), max_size=6), st.text(alphabet="ab", max_size=14))
def test_pieces_of_repeated_letters_as_the_regular_expression_did(pieces, text):
    pattern = "".join(pieces)
    assert LikePattern(pattern).matches(text) is (reference(pattern, False).fullmatch(text) is not None)


def test_examples():
    assert LikePattern("o%s", ignore_case=True).matches("ORDERS")
    assert not LikePattern("o%s").matches("ORDERS")
    assert LikePattern("_rders").matches("orders") and not LikePattern("_rders").matches("rders")
    assert LikePattern("%").matches("") and LikePattern("%%").matches("x\ny")
    assert LikePattern("").matches("") and not LikePattern("").matches("x")
    assert LikePattern("a%a").matches("aa") and not LikePattern("a%a").matches("a")
    assert LikePattern("%ab%ab%").matches("xabab") and not LikePattern("%ab%ab%").matches("xaba")
    assert LikePattern("s3://lake/%", ignore_case=True).matches("S3://LAKE/t")
    assert LikePattern("x.y").matches("x.y") and not LikePattern("x.y").matches("xzy")   # no regex inside


def test_patterns_that_backtracked_for_hours_are_linear():
    # "%a" * 30 + "%b" over 60 a's: the old expression tries C(60, 30) ways (it took 7.6 s at 6 %a);
    # here every piece is found at once and the last piece fails at its one place.
    text = "a" * 60
    for k in (6, 12, 30, 1000):
        pattern = LikePattern("%a" * k + "%b")
        started = time.perf_counter()
        assert not pattern.matches(text)
        assert not pattern.matches(text * 100)
        assert LikePattern("%a" * k + "%").matches("a" * k)
        assert time.perf_counter() - started < 0.5, k
        assert pattern.work(len(text)) <= len(text) + k + 3
    # the middle pieces searched one after another: a failure at the end costs one pass
    pattern = LikePattern("%a" * 1000 + "b%")
    started = time.perf_counter()
    assert not pattern.matches("a" * 100_000)
    assert time.perf_counter() - started < 0.5


def test_work_grows_with_the_text_times_the_longest_piece():
    assert LikePattern("abc").work(10**6) <= 4         # no %: compared at one place
    assert LikePattern("ab%cd").work(10**6) <= 5       # first and last piece at one place each
    assert LikePattern("%abc%").work(100) == (100 + 1) * 3 + 1
    assert LikePattern("%a" * 1000 + "%").work(100) == 100 + 1000 + 1
    assert LikePattern("%" + "_" * 1000 + "x%").work(10**6) >= 10**9


def test_shared_partitions_match_like_without_backtracking():
    # A share's partition filter with LIKE (catalog/protocols/delta_sharing/predicates.py): case-sensitive, linear.
    # (10 %a over 30 a's took the old expression 2.3 s; 40 over 80, days)
    for k, n in ((10, 30), (40, 80)):
        test = partition_filter([{"values": [{"name": "p", "op": "LIKE", "value": "%a" * k + "%b"}]}], {}, ["p"])
        started = time.perf_counter()
        assert not test({"p": "a" * n})
        assert test({"p": "a" * k + "b"})
        assert time.perf_counter() - started < 0.5, k
    upper = partition_filter([{"values": [{"name": "p", "op": "LIKE", "value": "A_%"}]}], {}, ["p"])
    assert upper({"p": "AB"}) and not upper({"p": "ab"}) and not upper({"p": "A"})
