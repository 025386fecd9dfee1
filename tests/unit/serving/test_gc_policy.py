"""The serving processes' collector policy: a full collection's survivors are frozen, and every
UNFREEZE_EVERY-th full collection walks the whole heap again."""

import gc

from shardcat.serving import gc_policy


def test_survivors_of_a_full_collection_are_frozen_and_unfrozen_in_turn():
    gc.unfreeze()
    before, thresholds = list(gc.callbacks), gc.get_threshold()
    try:
        gc_policy.freeze_survivors_of_full_collections()
        gc_policy.freeze_survivors_of_full_collections()
        assert gc.callbacks.count(gc_policy._POLICY) == 1       # installed once
        assert gc.get_threshold() == (gc_policy.YOUNG_THRESHOLD, *thresholds[1:])
        kept = [[i] for i in range(1000)]           # tracked objects that survive
        gc_policy._POLICY.full_collections = 0
        gc.collect(0)
        assert gc.get_freeze_count() == 0           # a young collection freezes nothing
        gc.collect()
        assert gc.get_freeze_count() >= len(kept)
        gc_policy._POLICY.full_collections = gc_policy.UNFREEZE_EVERY - 1
        gc.collect()
        assert gc.get_freeze_count() == 0           # the whole heap is the collector's again
        assert gc_policy._POLICY.full_collections == gc_policy.UNFREEZE_EVERY
    finally:
        gc.callbacks[:] = before
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def test_collections_are_timed_by_generation():
    before, thresholds = list(gc.callbacks), gc.get_threshold()
    try:
        gc_policy.freeze_survivors_of_full_collections()
        assert gc_policy.installed()
        pauses = gc_policy.PAUSES
        kept = [[i] for i in range(200_000)]        # a full collection that walks them takes a while
        young, full, spent = pauses.collections[0], pauses.collections[2], pauses.seconds[2]
        gc.collect(0)
        gc.collect()
        assert pauses.collections[0] == young + 1 and pauses.collections[2] == full + 1
        assert pauses.seconds[2] > spent
        assert 0 < pauses.longest[2] <= pauses.seconds[2] and len(kept) == 200_000
    finally:
        gc.callbacks[:] = before
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    assert not gc_policy.installed()
