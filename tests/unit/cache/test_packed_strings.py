"""PackedStrings against a plain list: random sets (longer, shorter, equal, non-ASCII), clears and
copies; every slot reads back what was set last, and the buffer stays under twice the live bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shardcat.cache import packed_strings
from shardcat.cache.packed_strings import PackedStrings

ops = st.lists(st.one_of(
    st.tuples(st.just("set"), st.integers(0, 40), st.text(max_size=30)),
    st.tuples(st.just("clear"), st.integers(0, 40)),
    st.tuples(st.just("copy")),
), max_size=120)


@settings(max_examples=120, deadline=None)
@given(ops)
def test_packed_strings_match_a_list(steps):
    compact_from, packed_strings._COMPACT_FROM = packed_strings._COMPACT_FROM, 8    # compact often
    try:
        check_against_a_list(steps)
    finally:
        packed_strings._COMPACT_FROM = compact_from


def check_against_a_list(steps):
    packed, model = PackedStrings(), []
    for op in steps:
        if op[0] == "set":
            packed.set(op[1], op[2])
            model.extend([""] * (op[1] + 1 - len(model)))
            model[op[1]] = op[2]
        elif op[0] == "clear":
            packed.clear(op[1])
            if op[1] < len(model):
                model[op[1]] = ""
        else:
            copy = packed.copy()
            packed.set(0, "changed after the copy")
            assert [copy.get(i) for i in range(len(copy))] == model     # the copy is independent
            model.extend([""] * (1 - len(model)))
            model[0] = "changed after the copy"
    assert len(packed) == len(model)
    assert [packed.get(i) for i in range(len(packed))] == model


def test_compaction_keeps_the_buffer_under_twice_the_live_bytes(monkeypatch):
    monkeypatch.setattr(packed_strings, "_COMPACT_FROM", 64)
    packed = PackedStrings()
    for i in range(100):
        packed.set(i % 10, f"name-{i:04d}" * (1 + i % 3))      # grows, shrinks, moves to the end
        live = sum(len(packed.get(j).encode()) for j in range(len(packed)))
        assert len(packed._bytes) <= max(2 * live, live + 64) + 30
    assert [packed.get(j) for j in range(10)] == [f"name-{i:04d}" * (1 + i % 3) for i in range(90, 100)]


def test_long_strings_and_large_offsets_widen_the_arrays():
    packed = PackedStrings()
    long = "é" * 40_000                   # 80,000 bytes: past a 16-bit length
    packed.set(3, "short")
    packed.set(1, long)
    assert packed.get(1) == long and packed.get(3) == "short" and packed.get(0) == ""
    assert packed._len.itemsize >= 4
