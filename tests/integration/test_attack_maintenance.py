"""Attacks on table maintenance (issue 51), tried as users with fewer rights would.

- Policies: set only by who may change the securable (owner, MANAGE, an admin), by the policy API or by
  any other way a securable's properties change (a writer's Iceberg commit, a Delta commit's metadata, the
  Unity Catalog API), in every spelling of the name; a table's owner cannot set its catalog's or schema's.
- Runs: MODIFY (or an admin) by name in every spelling; never on the system catalog's tables.
- Foreign tables: the foreign system owns their files, so maintenance never runs on them, by hand or by a
  policy their catalog's owner sets (the runs would write and delete in the foreign system's storage).
"""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest

from governance_users import grant, user
from shardcat.catalog.features import maintenance as feature
from shardcat.delta.client import DeltaCatalogClient
from shardcat.entities.values import now_ms
from test_attack_federation import Upstream, federating, upstream  # noqa: F401
from tests.conftest import new_workspace

SCHEMA = pa.schema([("id", pa.int64())])
ICE_SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture(autouse=True)
def no_background_ticks(monkeypatch):
    monkeypatch.setattr(feature, "TICK_SECONDS", 1e6)


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


async def set_policy(who, kind: str, name: str, policy: dict):
    return await who.call("PUT", "/shardcat/maintenance/policies",
                          json={"securable_type": kind, "full_name": name, "policy": policy})


async def policy(ws, table: str) -> dict:
    return await ok(ws, "GET", "/shardcat/maintenance/policies", params={"table": table})


async def test_a_policy_is_set_only_by_who_may_change_the_securable_by_any_api(ws, server):
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    writer = await user(server, ws)
    await grant(ws, "catalog", "main", writer.name, "USE CATALOG", "USE SCHEMA", "SELECT", "MODIFY", "CREATE TABLE")
    await ok(ws, "POST", "/iceberg/v1/catalogs/main/namespaces/s/tables", json={"name": "ice", "schema": ICE_SCHEMA})
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        await client.create_table("main.s.delta", SCHEMA)
    # The writer owns a table of its own in the catalog: it still may not set the catalog's or schema's policy.
    await ok(writer, "POST", "/iceberg/v1/catalogs/main/namespaces/s/tables", json={"name": "own", "schema": ICE_SCHEMA})
    assert (await set_policy(writer, "TABLE", "main.s.own", {"enabled": True}))[0] == 200
    for kind, name in (("CATALOG", "main"), ("CATALOG", "MAIN"), ("SCHEMA", "main.s"), ("SCHEMA", "Main.S"),
                       ("TABLE", "main.s.ice"), ("TABLE", "MAIN.S.ICE"), ("TABLE", "main.s.delta")):
        status, body = await set_policy(writer, kind, name, {"enabled": True, "vacuum_retention_hours": 0})
        assert status == 403, (kind, name, body)
    # Nor through a writer's commit (an Iceberg set-properties, a transaction, the UC Delta API's set-properties)
    # or the UC API: each is refused, or changes the table's own metadata and not the catalog's policy.
    evil = {"shardcat.maintenance.enabled": "true", "shardcat.maintenance.snapshot_retention_hours": "0",
            "shardcat.maintenance.vacuum_retention_hours": "0", "shardcat.maintenance.schedule_seconds": "10"}
    change = [{"action": "set-properties", "updates": evil}]
    status, body = await writer.call("POST", "/iceberg/v1/catalogs/main/namespaces/s/tables/ice",
                                     json={"requirements": [], "updates": change})
    assert status in (200, 400, 403), body
    status, body = await writer.call("POST", "/iceberg/v1/catalogs/main/transactions/commit", json={"table-changes": [
        {"identifier": {"namespace": ["s"], "name": "ice"}, "requirements": [], "updates": change}]})
    assert status in (204, 400, 403), body
    for name in ("ice", "delta", "ICE"):
        status, body = await writer.call("PATCH", f"/tables/main.s.{name}", json={"properties": evil})
        assert status in (400, 403), body
    delta_id = (await ok(ws, "GET", "/tables/main.s.delta"))["table_id"]
    status, body = await writer.call("POST", "/delta/v1/catalogs/main/schemas/s/tables/delta", json={
        "requirements": [{"type": "assert-table-uuid", "uuid": delta_id}], "updates": change})
    assert status in (200, 400, 403), body
    for name in ("main.s.ice", "main.s.delta"):
        found = await policy(ws, name)
        assert found["policy"]["enabled"] is False and found["set_by"]["enabled"] == "default", (name, found)
    # The owner may remove them again, and an admin's catalog policy reaches tables it does not own.
    assert (await set_policy(ws, "CATALOG", "main", {"enabled": True}))[0] == 200
    assert (await policy(ws, "main.s.own"))["policy"]["enabled"] is True


async def test_a_run_needs_modify_by_every_spelling(ws, server):
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        await ok(ws, "POST", "/catalogs", json={"name": "main"})
        await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
        await client.create_table("main.s.t", SCHEMA)
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG", "USE SCHEMA", "SELECT", "APPLY TAG")
    stranger = await user(server, ws)
    for name in ("main.s.t", "MAIN.S.T", "main.S.t", " main.s.t", "main.s.t ", "main..s.t", "main.s.`t`"):
        for who, allowed in ((reader, (400, 403, 404)), (stranger, (400, 404))):
            status, body = await who.call("POST", "/shardcat/maintenance/runs", json={"table": name,
                                                                                     "actions": ["vacuum"]})
            assert status in allowed and "runs" not in body, (name, body)
    await ws.call("POST", "/shardcat/system-tables")
    for name in ("system.access.audit", "SYSTEM.ACCESS.AUDIT", "system.maintenance.runs"):
        status, body = await ws.call("POST", "/shardcat/maintenance/runs", json={"table": name})
        assert status in (403, 404) and "runs" not in body, (name, body)
        status, body = await set_policy(ws, "TABLE", name, {"enabled": True})
        assert status in (400, 403), (name, body)
    status, body = await set_policy(ws, "CATALOG", "system", {"enabled": True})
    assert status in (400, 403), body


async def test_maintenance_never_runs_on_a_foreign_table(federating, http, upstream, tmp_path):
    fws = await new_workspace(federating, http, tmp_path / "federating")
    owner = await user(federating, fws)
    await grant(fws, "metastore", fws.metastore_id, owner.name, "CREATE CONNECTION", "CREATE CATALOG")
    # The foreign system's Delta table, with files its log removed long ago (what a vacuum would delete).
    folder = tmp_path / "foreign_t"
    from deltalake import write_deltalake
    for i in range(3):
        write_deltalake(str(folder), pa.table({"id": [i]}), mode="overwrite")
    before = sorted(p.name for p in folder.iterdir())
    upstream.tables = {"t": {"storage_location": folder.as_uri()}}
    await ok(owner, "POST", "/connections", json={"name": "c", "connection_type": "UNITY_CATALOG",
                                                  "options": {"url": upstream.url}})
    await ok(owner, "POST", "/catalogs", json={"name": "f", "connection_name": "c", "options": {"catalog": "up"}})
    table = await ok(owner, "GET", "/tables/f.s.t")
    assert table["storage_location"] == folder.as_uri()
    # Its owner sets an aggressive policy on the foreign catalog (allowed: it owns the catalog) ...
    status, body = await set_policy(owner, "CATALOG", "f", {"enabled": True, "vacuum_retention_hours": 0,
                                                            "schedule_seconds": 10})
    assert status in (200, 400), body
    # ... but no run starts, by hand (owner or admin) or by the schedule.
    for who in (owner, fws):
        status, body = await who.call("POST", "/shardcat/maintenance/runs", json={"table": "f.s.t"})
        assert status in (400, 403) and "runs" not in body, body
    [service] = [m for m in feature._SERVICES.values() if m.api_url == federating.url]
    runs = await service.tick(fws.metastore_id, now=now_ms() + 10 ** 9)
    assert [r for r in runs if r["table_name"] == "f.s.t"] == [], runs
    await asyncio.sleep(0)
    assert sorted(p.name for p in folder.iterdir()) == before


async def test_orphan_removal_deletes_nothing_reached_through_a_symbolic_link(ws, server, tmp_path):
    """A writer of a file:// Iceberg table can put anything in its folder, a symbolic link too: the orphan
    job (what the run endpoint and the schedule start as a Ray task) must not delete another table's files
    through a link, whether the link is a folder or a file, nor the link's target."""
    import os
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField
    from shardcat.entities.urls import local_path
    from shardcat.maintenance import iceberg_jobs
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    ice = await asyncio.to_thread(load_catalog, "s", type="rest", uri=f"{ws.api}/iceberg", warehouse="main",
                                  token=ws.token)
    await asyncio.to_thread(ice.create_namespace, "s")
    tables = {}
    for name in ("mine", "victim"):
        t = await asyncio.to_thread(ice.create_table, f"s.{name}", Schema(NestedField(1, "id", LongType(), required=False)))
        await asyncio.to_thread(t.append, pa.table({"id": pa.array([1], pa.int64())}))
        tables[name] = await asyncio.to_thread(ice.load_table, f"s.{name}")
    mine, victim = (local_path(tables[n].location()) for n in ("mine", "victim"))
    old = now_ms() / 1000 - 30 * 24 * 3600
    victim_files = [os.path.join(d, f) for d, _, fs in os.walk(victim) for f in fs]
    for path in victim_files:
        os.utime(path, (old, old))
    os.symlink(os.path.join(victim, "data"), os.path.join(mine, "data", "linked_dir"))
    os.symlink(os.path.join(victim, "metadata"), os.path.join(mine, "metadata", "linked_meta"))
    os.symlink(victim_files[0], os.path.join(mine, "data", "linked_file.parquet"))
    stray = os.path.join(mine, "data", "stray.parquet")          # a real orphan of its own: deleted
    with open(stray, "wb") as f:
        f.write(b"x")
    os.utime(stray, (old, old))
    result = await asyncio.to_thread(iceberg_jobs.remove_orphan_files, api_url=ws.api, token=ws.token,
                                     warehouse="main", identifier="s.mine", older_than_ms=now_ms() - 3600_000)
    assert all(os.path.exists(p) for p in victim_files), result
    assert not os.path.exists(stray) and result["deleted"] >= 1, result
    assert (await asyncio.to_thread(lambda: ice.load_table("s.victim").scan().to_arrow().num_rows)) == 1


@pytest.mark.parametrize("spelling", ["relative", "absolute", "link"])
async def test_compaction_packs_no_file_from_outside_its_table(ws, server, tmp_path, spelling):
    """A writer of a catalog-managed Delta table commits add actions naming another's file (`../`, an
    absolute URL, a symbolic link in its folder): the compaction, which reads with the catalog's own
    identity, must not copy that file's rows into the writer's table (its readers would read them)."""
    import os
    import pyarrow.parquet as pq
    from shardcat.delta import log as dlog
    from shardcat.delta.client import Transaction
    from shardcat.entities.urls import local_path
    from shardcat.maintenance import delta_jobs
    secret = tmp_path / "victim" / "part-0.parquet"
    secret.parent.mkdir()
    pq.write_table(pa.table({"id": pa.array([424242], pa.int64())}), secret)
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    writer = await user(server, ws)
    await grant(ws, "catalog", "main", writer.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE", "SELECT", "MODIFY")
    async with DeltaCatalogClient(ws.api, writer.token) as client:
        table = await client.create_table("main.s.mine", SCHEMA)
        for i in range(2):
            await client.append(table, pa.table({"id": [i]}))
        root = local_path(table.location)
        if spelling == "relative":
            path = os.path.relpath(secret, root)
        elif spelling == "absolute":
            path = secret.as_uri()
        else:
            os.symlink(secret, os.path.join(root, "linked.parquet"))
            path = "linked.parquet"
        snap = await client.snapshot(table)
        added = dlog.add(path, secret.stat().st_size, 1, now_ms())
        try:
            await client.commit(Transaction(snap.table, snap.version, "WRITE", [added]), snap)
        except Exception:       # noqa: BLE001 -- refused at commit: nothing for the compaction to read
            return
    result = await asyncio.to_thread(
        lambda: delta_jobs.compact(api_url=ws.api, token=ws.token, full_name="main.s.mine", location=table.location,
                                   catalog_managed=True, small_file_bytes=1 << 30))
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        snap = await client.snapshot("main.s.mine")
        packed = [f for f in snap.state.files if f not in (path,)]
        rows = []
        for f in packed:
            full = os.path.join(root, f)
            if os.path.exists(full) and not os.path.islink(full):
                rows += pq.read_table(full).column("id").to_pylist()
    assert 424242 not in rows, (result, rows)
    assert pq.read_table(secret).column("id").to_pylist() == [424242]


async def test_iceberg_compaction_packs_no_file_from_outside_its_table(ws, server, tmp_path):
    """A writer of a file:// Iceberg table adds another's Parquet file to it by path (pyiceberg's add_files):
    the compaction, which reads with the catalog's own file-system rights there, leaves the table alone."""
    import pyarrow.parquet as pq
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField
    from shardcat.maintenance import iceberg_jobs
    secret = tmp_path / "victim" / "part-0.parquet"
    secret.parent.mkdir()
    pq.write_table(pa.table({"id": pa.array([424242], pa.int64())}), secret)
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    writer = await user(server, ws)
    await grant(ws, "catalog", "main", writer.name, "USE CATALOG", "USE SCHEMA", "CREATE SCHEMA", "CREATE TABLE",
                "SELECT", "MODIFY")
    ice = await asyncio.to_thread(load_catalog, "w", type="rest", uri=f"{ws.api}/iceberg", warehouse="main",
                                  token=writer.token)
    await asyncio.to_thread(ice.create_namespace, "s")
    table = await asyncio.to_thread(ice.create_table, "s.mine", Schema(NestedField(1, "id", LongType(), required=False)))
    for i in range(2):
        await asyncio.to_thread(table.append, pa.table({"id": pa.array([i], pa.int64())}))
    try:
        await asyncio.to_thread(table.add_files, [secret.as_uri()])
    except Exception:       # noqa: BLE001 -- refused when added: nothing for the compaction to read
        return
    try:
        await asyncio.to_thread(iceberg_jobs.compact, api_url=ws.api, token=ws.token, warehouse="main",
                                identifier="s.mine")
    except Exception:       # noqa: BLE001 -- a refused run is fine: what matters is what the table holds
        pass
    reloaded = await asyncio.to_thread(ice.load_table, "s.mine")
    paths = await asyncio.to_thread(lambda: reloaded.inspect.files().column("file_path").to_pylist())
    inside = [p for p in paths if p.startswith(reloaded.location())]
    rows = [v for p in inside for v in pq.read_table(p.removeprefix("file://")).column("id").to_pylist()]
    assert 424242 not in rows, (paths, rows)
