"""A page of a cached child listing: read again from the members' states vs kept from the last read.

In-process and deterministic: one `MetastoreCache` holding a schema of N tables (N up to the
largest listing a shard caches whole, `shards/shard.py: MAX_CACHED_LISTING`), read in pages of
100 the way listTables asks for them (`MetastoreCache.children`, then `page_after`).

- *read again*: a write to one of the schema's tables came first, so the listing is rebuilt
  from every member's state at the snapshot and sorted, as every page was before listings were kept;
- *kept*: the listing read at the cache's version is reused until a member or the membership
  changes (writes elsewhere in the metastore do not count), so a page costs a bisect;
- *kept, near the bound*: the same with the cache at 90% of its `max_bytes`, where a page also
  moves every member of the listing to the young end of the LRU order (`NEAR_FULL`).

    python -m benchmarks.bench_listing            # ~1 min, writes its section of docs/benchmarks.md
    python -m benchmarks.bench_listing --no-docs  # print only
"""

from __future__ import annotations

import argparse
from pathlib import Path

from shardcat.cache.metastore_cache import MetastoreCache, page_after
from shardcat.entities.asset import Asset
from shardcat.shards.shard import MAX_CACHED_LISTING

from .harness import machine, now_utc, timed, write_section

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADING = "## Listing pages: a cached listing read again vs kept"
SIZES = (1_000, 5_000, MAX_CACHED_LISTING)
PAGE = 100
SCHEMA = "schema-id"


def table(i: int, version: int) -> Asset:
    name = f"t{i:06d}"
    return Asset(id=f"table-{i:06d}", metastore_id="m", type="table", namespace="table", parent_id=SCHEMA,
                 name=name, full_name=f"main.sales.{name}", storage_path=None,
                 info={"comment": f"table {i}", "table_type": "MANAGED"}, written_at=version)


def page(cache: MetastoreCache, after: str) -> list[Asset]:
    return page_after(cache.children(SCHEMA, "table", cache.version), after, PAGE)


def run(size: int, repeat: int) -> dict:
    cache = MetastoreCache(10, max_bytes=1 << 40)
    tables = [table(i, 7) for i in range(size)]
    cache.fill_children(SCHEMA, "table", tables, 10)
    middle = tables[size // 2].name

    def write():
        # a comment changed on one table: the next page reads the listing again
        cache.apply_write(cache.version + 1, [table(size // 3, cache.version + 1)], [])

    def after_a_write():
        write()
        return page(cache, middle)

    def kept():
        return page(cache, middle)

    assert after_a_write() == kept() and len(kept()) == PAGE
    out = {"size": size, "read_again": timed(after_a_write, repeat), "kept": timed(kept, repeat),
           "write_only": timed(write, repeat)}
    cache.max_bytes = int(cache.stats()["bytes"] / 0.9)      # near the bound, nothing to evict yet
    out["kept_near_bound"] = timed(kept, repeat)
    assert cache.stats()["evictions"] == 0 and len(kept()) == PAGE
    return out


def report(rows: list[dict], repeat: int) -> str:
    m = machine()
    lines = [HEADING, "",
             f"- **Reproduce:** `python -m benchmarks.bench_listing` (about 1 min); run on {now_utc()}.",
             f"- **Machine:** {m['cores']} cores, {m['cpu_model']}; Python {m['python']}; commit {m['commit']}; "
             f"a busy thread ran {m['running_share']:.0%} of a 2 s window at the start (`harness.running_share`).",
             "- **What:** one `MetastoreCache` with a schema of N tables; a page of 100 from the middle, as "
             "listTables asks for it (`MetastoreCache.children`, then `page_after`). *Read again*: a write to one "
             "of the schema's tables comes first (its time, measured alone, is subtracted), so the listing is "
             "rebuilt from every member's state and sorted: what every page cost before listings were kept. "
             "*Kept*: no write to the schema since the last read. *Near the bound*: kept, with the cache at 90% "
             "of its memory bound, where a page also moves every member of the listing to the young end of the "
             "LRU order (a listing answers only while all its members are cached; `NEAR_FULL`). "
             f"In-process, no HTTP, no database; median (best) of {repeat} runs.",
             "",
             "| tables in the schema | a page, read again ms | a page, kept ms | speed-up | "
             "a page, kept, near the bound ms |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        again = (r["read_again"][0] - r["write_only"][0], r["read_again"][1] - r["write_only"][1])
        lines.append(f"| {r['size']:,} | {again[0]:.3f} ({again[1]:.3f}) | {r['kept'][0]:.3f} ({r['kept'][1]:.3f}) | "
                     f"{again[0] / r['kept'][0]:.0f}x | {r['kept_near_bound'][0]:.3f} ({r['kept_near_bound'][1]:.3f}) |")
    lines += ["", "Paging through a whole listing of N tables costs N/100 pages: before listings were kept, "
              "that grew with the square of N. Far from its memory bound a kept page costs about the same at "
              "any N; near the bound it also refreshes every member, which grows with N."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args()
    rows = []
    for size in SIZES:
        rows.append(run(size, args.repeat))
        print(f"{size:,} tables done", flush=True)
    section = report(rows, args.repeat)
    print(section)
    if not args.no_docs:
        write_section(DOCS, HEADING, section)


if __name__ == "__main__":
    main()
