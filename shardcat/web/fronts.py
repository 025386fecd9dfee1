"""What both HTTP fronts (router/front.py, serving/front.py) do around their own fast path: hand
what it leaves to the app behind, then count and log every answer, whichever way it came."""

from __future__ import annotations

import time
from typing import Awaitable

from . import http1
from .metrics import operation
from .shard_client import Answer


async def answered(front, request: http1.Request, fast: Awaitable[Answer | None]) -> Answer:
    """`fast`'s answer, or (None) the app's; counted in `front.stats` and `front.requests`, logged."""
    started = time.perf_counter()
    answer = await fast
    if answer is not None:
        front.stats["fast"] += 1
    else:
        front.stats["through_app"] += 1
        answer = await http1.relay(front.client, front.app_address, request)
    seconds = time.perf_counter() - started
    name = request.operation or operation(request.method, request.path)
    front.requests.observe(name, answer.status, seconds)
    if front.request_log.enabled:
        front.request_log.write(request, answer.status, seconds, name, answer.headers, front.authenticator)
    return answer
