"""The load workload's shape (loadtest/workload.py): the mix, metastore sizes, temporal locality."""

import random
from collections import Counter

from loadtest.workload import MIX, WRITES, Chooser, Metastore, metastore_sizes, read_request


def test_mix_is_98_percent_reads():
    assert abs(sum(MIX.values()) - 100.0) < 1e-9
    assert abs(sum(MIX[op] for op in WRITES) - 2.0) < 1e-9


def test_sizes_are_heavy_tailed():
    sizes = metastore_sizes(200, max_tables=100_000)
    assert sizes.count(100_000) == 2
    median = sorted(sizes)[100]
    assert 15 <= median <= 60
    assert sum(1 for s in sizes if s <= 100) > 140


def test_tables_are_reaccessed_soon():
    ms = Metastore("m", "t", 100_000)
    chooser = Chooser([ms], random.Random(3))
    picks = [chooser.table(ms) for _ in range(5000)]
    last: dict[int, int] = {}
    soon = 0
    for i, t in enumerate(picks):
        if t in last and i - last[t] <= 100:
            soon += 1
        last[t] = i
    assert soon / len(picks) > 0.7           # most accesses revisit a table touched recently
    assert len(set(picks)) > 300             # yet the whole metastore is reached


def test_ops_follow_the_mix_and_requests_are_well_formed():
    ms = Metastore("m", "t", 2500)
    chooser = Chooser([ms], random.Random(1))
    ops = Counter(chooser.op() for _ in range(20_000))
    assert abs(ops["getTable"] / 20_000 - MIX["getTable"] / 100) < 0.02
    for op in ("getTable", "resolve", "getSchema", "listTables", "getCatalog", "listSchemas"):
        req = read_request(op, ms, chooser)
        assert req.path.startswith("/api/2.1/unity-catalog/") and not req.is_write
