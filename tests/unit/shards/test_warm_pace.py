"""Background work's pace (shards/warm_pace.py): a request's session counts it in flight, the work
waits while requests are in flight and takes its turn when they end, and under requests that never
end it still goes on (the floor)."""

from __future__ import annotations

import asyncio

import pytest

from shardcat.shards.session import Session, reading_at
from shardcat.shards.warm_pace import IN_FLIGHT, Pace


def test_a_session_is_in_flight_from_enter_to_exit_even_when_it_fails():
    before = IN_FLIGHT.count
    with Session():
        assert IN_FLIGHT.count == before + 1
        with Session():
            assert IN_FLIGHT.count == before + 2
    assert IN_FLIGHT.count == before
    with pytest.raises(RuntimeError):
        with Session():
            raise RuntimeError("refused")
    assert IN_FLIGHT.count == before


def test_reading_at_outside_a_request_counts_its_own_session_once():
    before = IN_FLIGHT.count
    with reading_at(object()):
        assert IN_FLIGHT.count == before + 1
    assert IN_FLIGHT.count == before
    with Session():
        with reading_at(object()):          # inside a request: that request's session, no second one
            assert IN_FLIGHT.count == before + 1
    assert IN_FLIGHT.count == before


def test_a_slice_is_due_only_once_it_is_spent():
    pace = Pace(slice=3600.0)
    assert not pace.due()
    assert Pace(slice=0.0).due()


async def test_the_work_waits_for_the_requests_in_flight_and_goes_on_once_they_end():
    events = []

    async def request():
        with Session():
            for _ in range(5):
                await asyncio.sleep(0)      # the request's awaits: the work must not cut in
                events.append("request")
        events.append("request done")

    async def work():
        pace = Pace(slice=0.0, poll=0.0005, floor_wait=3600.0)
        await asyncio.sleep(0)              # the request has entered its session
        await pace.give_way()
        events.append("work")

    await asyncio.wait_for(asyncio.gather(request(), work()), 30)
    assert events == ["request"] * 5 + ["request done", "work"]


async def test_under_requests_that_never_end_the_work_still_gets_its_turns():
    pace = Pace(slice=0.0, poll=0.0005, floor_wait=0.002)
    with Session():                         # in flight throughout
        for _ in range(20):
            await asyncio.wait_for(pace.give_way(), 30)
    assert pace.waited > 0
