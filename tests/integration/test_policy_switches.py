"""Which tables the maintenance and monitor loops look at (shards/followers.py Ticking): only those a
policy switch on them, their schema or their catalog covers, read once from the store and kept current
from the writes after; a metastore with no policy gives a tick nothing to read."""

from __future__ import annotations

import pytest

from shardcat.catalog.features import maintenance, monitors
from test_maintenance import service as maintenance_of, set_policy, tables


@pytest.fixture(autouse=True)
def no_background_ticks(monkeypatch):
    """The tests ask for the switched tables themselves: the shard's own loops stay asleep."""
    monkeypatch.setattr(maintenance, "TICK_SECONDS", 1e6)
    monkeypatch.setattr(monitors, "CHECK_SECONDS", 1e6)


def monitors_of(server) -> monitors.Monitors:
    keeper = maintenance_of(server)
    [found] = [m for m in monitors._SERVICES.values() if m.shard is keeper.shard]
    return found


async def names(ticking, ws) -> set[str]:
    return {t.full_name for t in await ticking.switched_tables(ws.metastore_id)}


async def test_only_tables_a_switch_covers_are_looked_at(ws, server):
    await tables(ws, "t1", "t2", appends=1)
    assert (await ws.call("POST", "/schemas", json={"name": "other", "catalog_name": "main"}))[0] == 200
    keeper = maintenance_of(server)
    assert await names(keeper, ws) == set()                       # loaded once: nothing holds the switch
    assert (await set_policy(ws, "TABLE", "main.s.t2", {"enabled": True}))[0] == 200
    assert await names(keeper, ws) == {"main.s.t2"}               # a later write, followed
    assert (await set_policy(ws, "SCHEMA", "main.s", {"enabled": False}))[0] == 200
    assert await names(keeper, ws) == {"main.s.t1", "main.s.t2"}  # the schema's tables (the setting decides later)
    assert (await set_policy(ws, "TABLE", "main.s.t2", {"enabled": None}))[0] == 200
    assert (await set_policy(ws, "SCHEMA", "main.s", {"enabled": None}))[0] == 200
    assert await names(keeper, ws) == set()                       # switches removed
    assert (await set_policy(ws, "CATALOG", "main", {"enabled": True}))[0] == 200
    assert await names(keeper, ws) == {"main.s.t1", "main.s.t2"}  # every schema's tables under the catalog


async def test_a_switch_set_before_the_first_tick_is_found_and_monitors_keep_their_own(ws, server):
    await tables(ws, "t", appends=1)
    assert (await set_policy(ws, "SCHEMA", "main.s", {"enabled": True}))[0] == 200
    keeper, watcher = maintenance_of(server), monitors_of(server)
    keeper.holders.pop(ws.metastore_id, None)                     # as a new owner: read from the store
    assert await names(keeper, ws) == {"main.s.t"}
    assert await names(watcher, ws) == set()                      # the monitors' switch is another key
    status, _ = await ws.call("PATCH", "/tables/main.s.t", json={"properties": {monitors.PREFIX + "enabled": "true"}})
    assert status == 200
    assert await names(watcher, ws) == {"main.s.t"}
    assert maintenance.rules.PREFIX + "enabled" == keeper.switch
