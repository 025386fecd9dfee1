"""A request's session: what the layers below the HTTP apps know of the request they are answering.

One `Session` per request, entered once (`with session:`) by whatever answers it: the shard app's
outermost middleware (governance/audit.py, which every app runs first) or a front answering the
request itself (serving/front.py). The rest of the request's work finds it with `current()`:
the apps' later middlewares fill in the caller once it is known, the shard reads `read_at` and
the caller's name and sets `written_version`, governance's audit finds its row in the making.
Outside a request (background work, a test calling a service) there is none: reads are of the
present, writes name no writer, and nobody reads the version a write made. While a session is
entered its request is in flight: background work waits for it (warm_pace.py).
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass, field

from ..auth import Caller
from ..store.history import PastRead
from .warm_pace import IN_FLIGHT


@dataclass(slots=True, eq=False)
class Session:
    """One request's session (entered as a context manager; see the module's docstring)."""

    # Who asks, reading at least the metastore version its client saw acknowledged (the
    # min-version header, already in `caller.min_version`). Its name is the writer the change
    # log keeps for the history (`writer`). None until the app has authenticated the request.
    caller: Caller | None = None
    # Set: the shard's reads answer as of this past version, from the history, and governance
    # decides with today's grants over the assets as they were (catalog/features/versions.py sets it for
    # `?as_of_version`, snapshots and an asset's history). None: the present.
    read_at: PastRead | None = None
    # The metastore version this request's latest write made (set by `Shard.write`): its answer
    # reports that one, not the shard's version after the write's whole group commit.
    written_version: int | None = None
    # The audit row in the making (governance/audit.py): the log, request id and route, and the
    # securable a handler names; None where no audit log records the request.
    audit: dict | None = None
    # The request's own privilege index while the metastore's whole one loads aside (governance/index.py).
    privileges: object = None
    # The task answering the request (a group's write bodies run in their committer's, which may
    # find a session it does not answer: `current()` is inherited by the tasks a request starts).
    task: object = field(default=None, init=False, repr=False)
    _token: contextvars.Token | None = field(default=None, init=False, repr=False)

    @property
    def writer(self) -> str | None:
        """Who writes: the caller's name, for the change log (an asset's history)."""
        return self.caller.name if self.caller is not None else None

    def __enter__(self) -> Session:
        self._token = _CURRENT.set(self)
        try:
            self.task = asyncio.current_task()
        except RuntimeError:        # entered outside an event loop (a test)
            self.task = None
        IN_FLIGHT.count += 1        # background work gives way meanwhile (warm_pace.py)
        return self

    def __exit__(self, *exc) -> None:
        IN_FLIGHT.count -= 1
        _CURRENT.reset(self._token)


_CURRENT: contextvars.ContextVar[Session | None] = contextvars.ContextVar("shardcat_session", default=None)


def current() -> Session | None:
    """The session of the request being answered; None outside one."""
    return _CURRENT.get()


def past_read() -> PastRead | None:
    """The past version the current request reads at (`Session.read_at`); None: the present."""
    session = _CURRENT.get()
    return session.read_at if session is not None else None


class reading_at:
    """Within it, the current request's reads answer as of `past` (and after it as before). Enters
    a session of its own where there is none (a service called outside a request)."""

    __slots__ = ("past", "session", "before", "own")

    def __init__(self, past: PastRead):
        self.past = past

    def __enter__(self) -> PastRead:
        session = _CURRENT.get()
        self.own = session is None
        self.session = Session().__enter__() if session is None else session
        self.before, self.session.read_at = self.session.read_at, self.past
        return self.past

    def __exit__(self, *exc) -> None:
        self.session.read_at = self.before
        if self.own:
            self.session.__exit__()
