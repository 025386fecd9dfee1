"""How a serving process's cyclic garbage collector treats the objects that stay (the shard's cache)
and those that do not (a request's), and how long its collections hold the process (`PAUSES`,
shown by /metrics: a pause stalls every request the process is answering).

A shard keeps tens of thousands of cached assets alive for as long as it owns their metastore, and
CPython's full collection walks every tracked object each time the heap has grown by a quarter.
Under a stream of writes that made one pause of ~100-200 ms every few seconds, the p99 of every
write and read behind it: `python -m benchmarks.bench_writes --writers 32 --paths shard`, createTable
p99 191 ms with the collector as it comes, 25 ms with it off (docs/benchmarks.md, issue 33).

Here each full collection's survivors are moved to the permanent generation (`gc.freeze`), so the
next full collection walks only what came after: the pause grows with the new objects, not with the
cache. What a full collection would still have found among the frozen (a reference cycle that
became garbage later) is found every `UNFREEZE_EVERY` full collections, when everything is walked
once more, so nothing cyclic is kept for ever.
"""

from __future__ import annotations

import gc
import time

UNFREEZE_EVERY = 20      # full collections between two that walk the whole heap
# A young collection every this many new tracked objects (CPython's default: 700). A shard's request
# lives across several awaits, so at 700 most of its objects were walked, some promoted, before it
# ended; at 20,000 most are gone by then. `python -m benchmarks.bench_writes --writers 32 --paths shard
# --rounds 1 --no-docs`, two runs each way: createTable 3,139 / 3,247 -> 3,420 / 3,418 per second
# (docs/benchmarks.md, issue 33).
YOUNG_THRESHOLD = 20_000


class _FreezeSurvivors:
    def __init__(self):
        self.full_collections = 0

    def __call__(self, phase: str, info: dict) -> None:
        if phase != "stop" or info["generation"] != 2:
            return
        self.full_collections += 1
        if self.full_collections % UNFREEZE_EVERY == 0:
            gc.unfreeze()       # the next full collection walks the whole heap again
        else:
            gc.freeze()


class PauseTimes:
    """Each generation's collections since install: how many, their seconds in all, the longest."""

    def __init__(self):
        self.collections = {generation: 0 for generation in range(3)}
        self.seconds = {generation: 0.0 for generation in range(3)}
        self.longest = {generation: 0.0 for generation in range(3)}
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took, generation = time.perf_counter() - self._started, info["generation"]
        self.collections[generation] += 1
        self.seconds[generation] += took
        if took > self.longest[generation]:
            self.longest[generation] = took


_POLICY = _FreezeSurvivors()
PAUSES = PauseTimes()


def freeze_survivors_of_full_collections() -> None:
    """Install the policy in this process (once; calling again does nothing), with its young
    threshold, and time every collection from then on (`PAUSES`)."""
    if _POLICY not in gc.callbacks:
        gc.callbacks.extend((PAUSES, _POLICY))
        gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def installed() -> bool:
    """Whether this process runs the policy (and so times its collections)."""
    return _POLICY in gc.callbacks
