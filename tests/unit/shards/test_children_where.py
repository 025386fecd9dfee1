"""Filtered listings (`Shard.children_where`): the page holds the first children the filter keeps,
in name order, and a sparse filter fills it in a few growing batches, not one per page size."""

from __future__ import annotations

import bisect
from types import SimpleNamespace

from shardcat.shards.shard import MAX_LISTING_BATCH, Shard

NAMES = [f"t{i:05d}" for i in range(10_000)]


def listing():
    """A stand-in for the shard whose `children` pages NAMES, recording each batch size asked."""
    asked = []

    async def children(metastore_id, parent_id, namespace, *, after, limit, min_version=0):
        asked.append(limit)
        start = bisect.bisect_right(NAMES, after) if after else 0
        return [SimpleNamespace(name=n) for n in NAMES[start:start + limit]]

    return SimpleNamespace(children=children), asked


async def where(shard, keep, after="", limit=101):
    page = await Shard.children_where(shard, "m", "schema", "table", keep, after=after, limit=limit)
    return [a.name for a in page]


async def test_a_sparse_filter_fills_its_page_in_a_few_growing_batches():
    shard, asked = listing()
    one_in_a_hundred = lambda a: a.name.endswith("00")                  # noqa: E731
    assert await where(shard, one_in_a_hundred) == NAMES[::100]          # 100 kept: the listing ran out
    assert asked == [101, 404, 1616, MAX_LISTING_BATCH, MAX_LISTING_BATCH]

    shard, asked = listing()
    assert await where(shard, one_in_a_hundred, after=NAMES[150], limit=3) == ["t00200", "t00300", "t00400"]
    assert asked == [3, 12, 48, 192]


async def test_without_a_filter_one_batch_is_the_page():
    shard, asked = listing()
    assert await where(shard, None, after=NAMES[9_950]) == NAMES[9_951:]
    assert await where(shard, lambda a: True, limit=5) == NAMES[:5]
    assert asked == [101, 5]
