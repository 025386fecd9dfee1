"""Work outside a request (maintenance) records into the running audit log of its own store: not into
another app's, and still after a second app over the same store stopped (several apps run in one process
in tests; each has its store)."""

from __future__ import annotations

from types import SimpleNamespace

from shardcat.governance import audit
from shardcat.store.audit import COLUMNS

NAME = COLUMNS.index("securable_name")


def decision(name: str) -> audit.AccessDecision:
    return audit.AccessDecision("maintenanceRun", "TABLE", name, True)


async def test_a_decision_lands_in_its_own_stores_running_log():
    mine, other = SimpleNamespace(), SimpleNamespace()
    first, second, elsewhere = audit.AuditLog(mine), audit.AuditLog(mine), audit.AuditLog(other)
    caller = SimpleNamespace(name="System maintenance", workspace_id=0, metastore_id=None)
    for log in (first, second, elsewhere):
        await log.start()
    try:
        await second.stop(timeout=0.1)           # a second app over the same store comes and goes
        audit.record_all(caller, [decision("c.s.t")], store=mine)
        assert [row[NAME] for row in first.pending] == ["c.s.t"]
        assert not second.pending and not elsewhere.pending
        audit.record_all(caller, [decision("c.s.u")])          # no request, no store: nowhere, no error
        assert len(first.pending) == 1 and not elsewhere.pending
    finally:
        for log in (first, elsewhere):
            log.pending.clear()
            await log.stop(timeout=0.1)
    audit.record_all(caller, [decision("c.s.v")], store=mine)    # every log stopped: a no-op
    assert not first.pending
