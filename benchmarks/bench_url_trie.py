"""The URL trie (shardcat/cache/url_trie.py) of two commits side by side: bytes per entry, and the
time of the path questions every write and every path-based read asks.

    python -m benchmarks.bench_url_trie --old 6127c1d                 # that commit's trie against this checkout's
    python -m benchmarks.bench_url_trie --old A --new B --entries 100000 --no-docs

Each commit's `url_trie.py` is read with `git show` and loaded beside the other (same process, same
`entities/urls.py` of this checkout), so the two differ in the trie alone. Three shapes of paths:

- **managed**: `<root>/tables/<id>`, all under one directory, the id's string shared as the last
  segment (as a shard's state inserts a managed table);
- **external**: `s3://lake/warehouse/db<k>.db/t<i>` over 100 schema directories;
- **chains**: `s3://lake/<unique>/data/t<i>`: two path segments of its own per entry.

Per shape and commit: the heap bytes per entry (tracemalloc, the trie only: the URL strings are
the caller's), then, in rounds that alternate the commits (each cell the median round), µs per
insert (insert_node), owner (of a file inside an entry), first_overlap of a new sibling (a miss,
the common case of a create), first_overlap with `ignore` (managed roots skipped), and remove_node.
Writes its section of docs/benchmarks.md unless --no-docs.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import random
import shlex
import statistics
import subprocess
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

from . import harness as h

SECTION = "## URL trie, two commits side by side (bench_url_trie)"
TRIE = "shardcat/cache/url_trie.py"
OPS = ("insert", "owner", "overlap (miss)", "overlap (ignore)", "remove")


def load_trie(commit: str | None, label: str):
    """The UrlTrie class of `commit`'s url_trie.py (None: this checkout's file)."""
    source = (h.ROOT / TRIE).read_text() if commit is None else subprocess.run(
        ["git", "show", f"{commit}:{TRIE}"], cwd=h.ROOT, check=True, capture_output=True, text=True).stdout
    name = f"shardcat.cache._bench_url_trie_{label}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "shardcat.cache"      # its relative imports resolve to this checkout's package
    sys.modules[name] = module
    exec(compile(source, f"{commit or 'checkout'}:{TRIE}", "exec"), module.__dict__)
    return module.UrlTrie


def shape(name: str, n: int) -> list[tuple[str, str | None]]:
    """(url, shared last segment or None) of each entry."""
    rnd = random.Random(7)
    ids = [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(n)]
    if name == "managed":
        return [(f"s3://lake/metastore/tables/{i}", i) for i in ids]
    if name == "external":
        return [(f"s3://lake/warehouse/db{k % 100}.db/t{k}", None) for k in range(n)]
    return [(f"s3://lake/{i[:13]}/data/t{k}", None) for k, i in enumerate(ids)]


def bytes_per_entry(trie_class, entries) -> float:
    from shardcat.entities import urls
    urls._parse.cache_clear()       # the parser's cache of recent URLs is no part of a trie
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    trie = trie_class()
    handles = [trie.insert_node(url, None, share=share) for url, share in entries]
    urls._parse.cache_clear()
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base - sys.getsizeof(handles)
    tracemalloc.stop()
    del trie, handles
    return used / len(entries)


BATCH = 4_000   # URLs per timed batch: fewer than the parser's cache holds, so a batch times the trie, not parsing


def _timed(op, items) -> float:
    """Seconds `op` takes over `items`, batch by batch, each batch's URLs parsed (cached) beforehand:
    the parser's work is the same for both commits, and a write parses its URLs before it asks."""
    from shardcat.entities.urls import url_segments
    total = 0.0
    for lo in range(0, len(items), BATCH):
        batch = items[lo:lo + BATCH]
        for item in batch:
            url_segments(item if isinstance(item, str) else item[0])
        t0 = time.perf_counter()
        for item in batch:
            op(item)
        total += time.perf_counter() - t0
    return total


def one_round(trie_class, entries, probes) -> dict[str, float]:
    """µs per operation of each kind, over every entry."""
    out = {}
    trie = trie_class()
    handles = []
    out["insert"] = _timed(lambda e: handles.append(trie.insert_node(e[0], e[0], share=e[1])), entries)
    files, siblings = probes
    out["owner"] = _timed(trie.owner, files)
    out["overlap (miss)"] = _timed(trie.first_overlap, siblings)
    skip = lambda v: v.endswith("0")  # noqa: E731  (a cheap predicate: what `ignore` costs, not its own work)
    out["overlap (ignore)"] = _timed(lambda url: trie.first_overlap(url, ignore=skip), siblings)
    t0 = time.perf_counter()
    for handle in handles:
        trie.remove_node(handle)
    out["remove"] = time.perf_counter() - t0
    assert len(trie) == 0
    return {k: v / len(entries) * 1e6 for k, v in out.items()}


def run(args) -> dict:
    tries = {"old": load_trie(args.old, "old"), "new": load_trie(args.new, "new")}
    results = {}
    for name in ("managed", "external", "chains"):
        entries = shape(name, args.entries)
        files = [f"{url}/part-0.parquet" for url, _ in entries]
        siblings = [f"{url}-new" for url, _ in entries]
        row = {"bytes": {k: bytes_per_entry(c, entries) for k, c in tries.items()}}
        rounds = {k: [] for k in tries}
        for r in range(args.rounds):
            for label in (("old", "new") if r % 2 == 0 else ("new", "old")):   # alternate who goes first
                rounds[label].append(one_round(tries[label], entries, (files, siblings)))
        row["us"] = {label: {op: statistics.median(x[op] for x in rs) for op in OPS} for label, rs in rounds.items()}
        results[name] = row
        h.log(f"{name}: {row}")
    return results


def markdown(args, results, info, date, command) -> str:
    lines = [SECTION, "",
             f"- **Reproduce:** `{command}`; run on {date}.",
             f"- **Machine:** {h.machine_line(info, None, postgres=False)}."
             + (" **Shared with other engineers' runs**: compare the two columns of one run, not runs." if args.shared
                else ""),
             f"- **What:** {args.entries:,} entries per shape, one process, the commits' `{TRIE}` side by side "
             f"(old = `{args.old}`, new = `{args.new or 'this checkout'}`); bytes by tracemalloc (the trie's own: "
             "nodes, dicts, its segment strings); times the median of "
             f"{args.rounds} alternating rounds, µs per operation over every entry, its URL parsed beforehand "
             "(the parser's cache holds it: the same for both).", "",
             "| shape | B/entry old → new | " + " | ".join(f"{op} µs old → new" for op in OPS) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in OPS) + " |"]
    for name, row in results.items():
        us = row["us"]
        lines.append(f"| {name} | {row['bytes']['old']:,.0f} → {row['bytes']['new']:,.0f} | "
                     + " | ".join(f"{us['old'][op]:.2f} → {us['new'][op]:.2f}" for op in OPS) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="a commit whose url_trie.py to compare")
    p.add_argument("--new", default=None, help="a commit (default: this checkout's file)")
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--shared", action="store_true", help="say in the report that the machine was shared")
    p.add_argument("--out", type=Path, default=h.DOCS)
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    args = p.parse_args()
    info, date = h.machine(), h.now_utc()
    command = shlex.join(["python", "-m", "benchmarks.bench_url_trie", *sys.argv[1:]])
    results = run(args)
    h.save_raw("bench_url_trie", {"date": date, "command": command, "machine": info, "results": results})
    section = markdown(args, results, info, date, command)
    print(section)
    if not args.no_docs:
        h.write_section(args.out, SECTION, section)


if __name__ == "__main__":
    main()
