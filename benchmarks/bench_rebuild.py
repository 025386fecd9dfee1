"""How long a new owner takes to index a metastore's storage paths (the CPU part of a rebuild).

    python -m benchmarks.bench_rebuild [--paths 100000]

In process, no database: `MetastoreState.remember` for N canonical table locations, as
`Shard._rebuild` does after reading them. Prints microseconds per path and the total; run it on
two commits to compare (it only uses what every commit since the rebuild fix has).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from shardcat.shards.shard import MetastoreState
from shardcat.store.rows import StoragePath


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paths", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    root = f"file:///data/storage/{uuid.uuid4()}/tables"
    paths = [StoragePath(str(uuid.uuid4()), "table", f"c.s.t{i}", f"{root}/{uuid.uuid4()}")
             for i in range(args.paths)]
    times = []
    for _ in range(args.runs):
        state = MetastoreState("m")
        started = time.perf_counter()
        for path in paths:
            state.remember(path)
        times.append(time.perf_counter() - started)
    best = min(times)
    print(f"{args.paths:,} paths: best {best:.2f} s, median {statistics.median(times):.2f} s, "
          f"{best / args.paths * 1e6:.1f} µs per path")


if __name__ == "__main__":
    main()
