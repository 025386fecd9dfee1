"""How background work of a shard (a cold owner's path-index build, state.py `build_paths`) gives
way to the requests the process is answering: it runs in short slices and waits while requests are
in flight, with a floor so that it still finishes under constant load.

A request is in flight from the moment its session is entered until it is left (session.py: one per
request, whatever answers it); the count is the process's, as the event loop the work shares is.
Why (issue #48): a request awaits many times (a createTable a few dozen: its reads, its write, its
group commit), and each await that finds a build chunk on the loop waits for it to end. With the
build yielding every 250 paths a chunk held the loop ~5-10 ms and a cold owner of 1,000,000 tables
answered createTable at p50 324 ms while it built (5.9 ms once built).
"""

from __future__ import annotations

import asyncio
import time

# Background work between two yields (seconds): what one request's await may find on the loop.
SLICE = 0.001
# While requests are in flight the work waits for them, polling this often (seconds)...
POLL = 0.001
# ...but at most this long before it takes one more slice anyway: under constant load it still gets
# SLICE / (SLICE + FLOOR_WAIT) of the loop (~9%) and finishes.
FLOOR_WAIT = 0.010


class _InFlight:
    """The process's requests in flight (session.py counts them in and out)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


IN_FLIGHT = _InFlight()


class Pace:
    """One piece of background work's pace: `due()` is cheap and says when its slice is over;
    then `await give_way()` (the event loop runs what is ready, and waits out the requests in flight
    up to FLOOR_WAIT)."""

    __slots__ = ("slice", "poll", "floor_wait", "_until", "waited")

    def __init__(self, slice: float = SLICE, poll: float = POLL, floor_wait: float = FLOOR_WAIT) -> None:
        self.slice, self.poll, self.floor_wait = slice, poll, floor_wait
        self._until = time.perf_counter() + slice
        self.waited = 0.0       # seconds spent giving way (the build's time under load, minus its own)

    def due(self) -> bool:
        return time.perf_counter() >= self._until

    async def give_way(self) -> None:
        start = time.perf_counter()
        await asyncio.sleep(0)              # whatever is ready runs before the next slice
        deadline = start + self.floor_wait
        while IN_FLIGHT.count and time.perf_counter() < deadline:
            await asyncio.sleep(self.poll)  # a timer, not the ready queue: the loop answers I/O meanwhile
        now = time.perf_counter()
        self.waited += now - start
        self._until = now + self.slice
