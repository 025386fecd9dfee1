"""The privilege index of two commits side by side: bytes per securable and the authorization a read runs.

    python -m benchmarks.bench_privilege_index --old de58cd5^            # this checkout against that commit
    python -m benchmarks.bench_privilege_index --old A --new B --tables 100000

Each commit's index (cache/privilege_index.py, governance/authorize.py), in a process of its own with
that commit's shardcat on PYTHONPATH, builds one metastore: a catalog, a schema of `--tables` tables
(UUID ids, 30-character full names, one owner), 1% of them granted SELECT to a group of the caller's,
USE CATALOG / USE SCHEMA to that group. Measured, for a caller who is no admin (an admin's decision
skips the index):

- bytes per securable: tracemalloc over the build: numbers, parents, types, owners, names, grants and the
  id map's entries, not the id strings themselves (made before, as a load gets them from its rows; bench_scale
  counts them: ~85 B more each);
- build: the untraced build of the whole index, seconds (best of `--repeat`);
- getTable's check: `Authz.decide("table", "read", t)` on one visible table, µs per call;
- listTables' check: `Authz.filter` of a 100-table page of the schema, µs per page;
- `find` of a securable id, ns per call (every listed item's lookup).

The commits' processes alternate (`--passes` each) and each cell is the median over them: on a shared
machine, compare the two columns of one run, never runs of different times. Times are CPU time
(`time.process_time`), which sharing moves less than wall time.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
import uuid
from contextlib import ExitStack
from pathlib import Path

PAGE = 100


def drive(tables: int, repeat: int) -> dict:
    """In the commit's own process: build the index, then time each question (best of `repeat` rounds)."""
    from shardcat.auth import Caller
    from shardcat.cache.privilege_index import PrivilegeIndex
    from shardcat.entities.asset import Asset
    from shardcat.governance.authorize import Authz

    ms = str(uuid.UUID(int=1))
    ids = [str(uuid.UUID(int=(i + 2) * 2654435761)) for i in range(tables + 2)]
    names = ["main", "main.sales", *(f"main.sales.table_{i:013d}" for i in range(tables))]

    def build() -> PrivilegeIndex:
        ix = PrivilegeIndex(ms, "admin")
        ix.put(ids[0], ms, "catalog", "admin", names[0])
        ix.put(ids[1], ids[0], "schema", "admin", names[1])
        rows = ((sid, ids[1], "table", "owner", name) for sid, name in zip(ids[2:], names[2:]))
        if hasattr(ix, "put_many"):       # what a load calls (governance/index.py), where the commit has it
            ix.put_many(rows)
        else:
            for row in rows:
                ix.put(*row)
        for sid in ids[2::100]:
            ix.set_grants(sid, {"analysts": {"SELECT"}})
        ix.set_grants(ids[0], {"analysts": {"USE CATALOG", "USE SCHEMA"}})
        return ix

    build_s = []
    for _ in range(repeat):          # untraced: tracemalloc slows allocations, and not both sides alike
        t0 = time.process_time()
        ix = build()
        build_s.append(time.process_time() - t0)
        del ix
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    ix = build()
    gc.collect()
    per = (tracemalloc.get_traced_memory()[0] - before) / tables
    tracemalloc.stop()
    build_s = min(build_s)

    def asset(i: int) -> Asset:
        return Asset(ids[i], ms, "table", "table", ids[1], names[i].rsplit(".", 1)[-1], names[i], None,
                     {"owner": "owner"})

    schema = Asset(ids[1], ms, "schema", "schema", ids[0], "sales", names[1], None, {"owner": "admin"})
    authz = Authz(Caller("alice", 1, False, 1, ms, groups=frozenset({"analysts", "emea"})), ix)
    visible = asset(2 + 100 * (tables // 200))
    page = [asset(2 + (tables // 2 + i)) for i in range(PAGE)]
    assert authz.decide("table", "read", visible).allowed
    assert len(authz.filter("table", schema, page)) == 1

    def best(fn, calls: int) -> float:
        out = []
        for _ in range(repeat):
            t0 = time.process_time()
            for _ in range(calls):
                fn()
            out.append((time.process_time() - t0) / calls)
        return min(out)

    probe = ids[tables // 3]
    return {"bytes_per_securable": per, "build_s": build_s,
            "decide_us": best(lambda: authz.decide("table", "read", visible), 2000) * 1e6,
            "filter_page_us": best(lambda: authz.filter("table", schema, page), 200) * 1e6,
            "find_ns": best(lambda: ix.find(probe), 20000) * 1e9}


def run_tree(tree: Path, tables: int, repeat: int) -> dict:
    """This file run as a script in a process of its own, with `tree`'s shardcat first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, __file__, "--drive", str(tables), str(repeat)], cwd=tree, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


FIELDS = (("bytes_per_securable", "bytes per securable", "{:,.0f}"), ("build_s", "build s", "{:.2f}"),
          ("decide_us", "getTable's check (decide) µs", "{:.2f}"),
          ("filter_page_us", f"listTables' check (filter of {PAGE}) µs", "{:.1f}"), ("find_ns", "find ns", "{:.0f}"))


def main(argv: list[str] | None = None) -> int:
    from .bench_front_cpu import checkout
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="a commit, or a directory holding a checkout")
    parser.add_argument("--new", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--tables", type=int, default=100_000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        trees = {"old": checkout(args.old, stack), "new": checkout(args.new, stack)}
        runs: dict[str, list[dict]] = {"old": [], "new": []}
        for _ in range(args.passes):
            for side in ("old", "new"):
                runs[side].append(run_tree(trees[side][0], args.tables, args.repeat))
    print(f"{args.tables:,} tables; median of {args.passes} alternating passes (best of {args.repeat} rounds each)")
    print(f"| measure | old {trees['old'][1]} | new {trees['new'][1]} |\n| --- | ---: | ---: |")
    for key, label, form in FIELDS:
        old, new = (statistics.median(r[key] for r in runs[side]) for side in ("old", "new"))
        print(f"| {label} | {form.format(old)} | {form.format(new)} |")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--drive"]:
        print(json.dumps(drive(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        sys.exit(main())
