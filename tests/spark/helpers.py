"""Helpers the Spark tests share: calling the blocking library from async tests, and API calls."""

from __future__ import annotations

import asyncio


def run(fn, *args, **kwargs):
    """Call the (blocking) Spark library from an async test: the server shares the test's loop."""
    return asyncio.to_thread(fn, *args, **kwargs)


async def ok(ws, method, path, body=None):
    status, out = await ws.call(method, path, json=body)
    assert status == 200, (path, out)
    return out
