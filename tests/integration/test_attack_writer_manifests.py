"""Attacks by a table's writer through the metadata it controls, on the operations that read that metadata
with the catalog's own rights (docs/security.md, "The newest surfaces").

- Server-side scan planning (POST .../plan) reads a snapshot's manifest list and then every manifest it
  names. A commit's manifest list must lie inside the table, but the manifests inside it are the writer's
  choice: a manifest list written in the writer's own table that names another table's manifests had the
  plan answer that table's data files and column bounds (its values) to whoever may read the writer's table.
"""

from __future__ import annotations

import asyncio
import json

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from governance_users import grant, user

P = "/iceberg/v1/catalogs/ice"
SCHEMA = Schema(NestedField(1, "secret", LongType(), required=False))


def rest(ws, token: str):
    return load_catalog("c", type="rest", uri=f"{ws.api}/iceberg", warehouse="ice", token=token)


async def victim_and_attacker(ws, server):
    """ice.s.events (the admin's: secret values 4242 and 777) and `attacker`, who may create tables in ice.s
    and holds nothing on events."""
    assert (await ws.call("POST", "/catalogs", json={"name": "ice"}))[0] == 200

    def make():
        admin = rest(ws, ws.token)
        admin.create_namespace("s")
        events = admin.create_table("s.events", SCHEMA)
        events.append(pa.table({"secret": pa.array([4242], pa.int64())}))
        events.append(pa.table({"secret": pa.array([777], pa.int64())}))
        return admin.load_table("s.events")

    victim = await asyncio.to_thread(make)
    attacker = await user(server, ws)
    await grant(ws, "catalog", "ice", attacker.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    return victim, attacker


def crafted_snapshot(mine, manifests) -> None:
    """Commit to `mine` a snapshot whose manifest list (in mine's own metadata/) names `manifests`."""
    from pyiceberg.manifest import write_manifest_list
    from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate
    snapshot_id, sequence = mine.metadata.new_snapshot_id(), mine.metadata.next_sequence_number()
    path = f"{mine.location()}/metadata/snap-{snapshot_id}-crafted.avro"
    with write_manifest_list(format_version=2, output_file=mine.io.new_output(path), snapshot_id=snapshot_id,
                             parent_snapshot_id=None, sequence_number=sequence, avro_compression="gzip") as writer:
        writer.add_manifests(manifests)
    snapshot = Snapshot(snapshot_id=snapshot_id, sequence_number=sequence, manifest_list=path,
                        summary=Summary(Operation.APPEND), schema_id=mine.metadata.current_schema_id)
    mine.catalog.commit_table(mine, (), (AddSnapshotUpdate(snapshot=snapshot), SetSnapshotRefUpdate(
        ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id)))


async def test_planning_reads_no_manifest_outside_the_table(ws, server):
    victim, attacker = await victim_and_attacker(ws, server)
    theirs = victim.current_snapshot().manifests(victim.io)
    victim_files = {t.file.file_path for t in await asyncio.to_thread(lambda: list(victim.scan().plan_files()))}

    def steal():
        mine = rest(ws, attacker.token).create_table("s.mine", SCHEMA)
        crafted_snapshot(mine, theirs)        # its manifest list lies in its own table: the commit is taken

    await asyncio.to_thread(steal)
    status, answer = await attacker.call("POST", f"{P}/namespaces/s/tables/mine/plan", json={})
    said = json.dumps(answer)
    assert not any(f in said for f in victim_files), answer            # none of the victim's files ...
    assert "4242" not in said and "777" not in said, answer             # ... nor its values (the bounds)
    assert not any(m.manifest_path in said for m in theirs), answer    # nor where its manifests are
    assert status == 400 and "outside" in answer["error"]["message"], (status, answer)


def tampered(mine, victim) -> None:
    """The writer overwrites its table's current metadata file in storage (its credentials reach its whole
    prefix; on file:// it writes the disk): the file now says the table lies at the victim's location, with
    no snapshot of its own. The catalog's cache of metadata files (512, least recently used) is emptied as
    512 other metadata reads would empty it."""
    from shardcat.entities.urls import local_path
    from shardcat.iceberg import metadata as md
    forged = mine.metadata.model_copy(update={"location": victim.location()})
    with open(local_path(mine.metadata_location), "w") as f:
        f.write(forged.model_dump_json())
    md._READ.clear()


async def test_a_metadata_file_rewritten_in_storage_cannot_move_its_table(ws, server):
    """Planning, the Iceberg REST load and the maintenance jobs read the table's metadata file; its location
    must be the table's own, whatever the file in storage says: else the orphan job (run by the schedule
    with the catalog's rights) lists and deletes the victim's files, and planning reads its manifests."""
    import os
    from shardcat.entities.urls import local_path
    from shardcat.entities.values import now_ms
    from shardcat.maintenance import iceberg_jobs
    victim, attacker = await victim_and_attacker(ws, server)
    root = local_path(victim.location())
    victim_files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    old = now_ms() / 1000 - 30 * 24 * 3600          # a table written a month ago
    for path in victim_files:
        os.utime(path, (old, old))

    def forge():
        mine = rest(ws, attacker.token).create_table("s.mine", SCHEMA)
        mine.append(pa.table({"secret": pa.array([1], pa.int64())}))
        tampered(rest(ws, attacker.token).load_table("s.mine"), victim)

    await asyncio.to_thread(forge)
    try:                                    # the job loads the table through the catalog: refused
        result = await asyncio.to_thread(iceberg_jobs.remove_orphan_files, api_url=ws.api, token=ws.token,
                                         warehouse="ice", identifier="s.mine", older_than_ms=now_ms() - 3600_000)
    except Exception as e:                  # noqa: BLE001 -- refused: what is wanted
        result = e
    assert [p for p in victim_files if not os.path.exists(p)] == [], result      # all 9 were deleted
    assert isinstance(result, Exception), result
    status, answer = await attacker.call("POST", f"{P}/namespaces/s/tables/mine/plan", json={})
    assert "4242" not in json.dumps(answer) and status >= 400, (status, answer)
    status, loaded = await attacker.call("GET", f"{P}/namespaces/s/tables/mine")
    assert status >= 400 and root not in json.dumps(loaded), (status, loaded)
    assert (await asyncio.to_thread(lambda: rest(ws, ws.token).load_table("s.events").scan().to_arrow().num_rows)) == 2


async def test_a_uniform_tables_iceberg_metadata_rewritten_in_storage_steers_no_conversion(ws, server):
    """A Delta writer of a UniForm table overwrites the Iceberg metadata the catalog converted last (it lies
    in the table's own metadata/, which the writer reaches) to say the table lies at another's location: the
    next conversion, which writes with the catalog's rights, must write nothing there."""
    import os
    import deltalake
    from shardcat.entities.urls import local_path
    from shardcat.iceberg import metadata as md
    columns = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}',
                "position": 0}]
    for path, body in (("/catalogs", {"name": "main"}), ("/schemas", {"name": "s", "catalog_name": "main"})):
        assert (await ws.call("POST", path, json=body))[0] == 200
    attacker = await user(server, ws)
    await grant(ws, "catalog", "main", attacker.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    made = {}
    for who, name in ((ws, "victim"), (attacker, "mine")):
        status, made[name] = await who.call("POST", "/tables", json={
            "name": name, "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": columns,
            "properties": {"delta.universalFormat.enabledFormats": "iceberg"}})
        assert status == 200, made[name]
        deltalake.write_deltalake(made[name]["storage_location"], pa.table({"id": pa.array([1], pa.int64())}))
    victim_root = local_path(made["victim"]["storage_location"])
    before = sorted(os.path.join(d, f) for d, _, fs in os.walk(victim_root) for f in fs)
    status, loaded = await attacker.call("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/mine")
    assert status == 200, loaded
    forged = loaded["metadata"] | {"location": made["victim"]["storage_location"]}
    with open(local_path(loaded["metadata-location"]), "w") as f:
        json.dump(forged, f)
    md._READ.clear()                       # as 512 other metadata reads would
    deltalake.write_deltalake(made["mine"]["storage_location"], pa.table({"id": pa.array([2], pa.int64())}),
                              mode="append")
    status, again = await attacker.call("GET", "/iceberg/v1/catalogs/main/namespaces/s/tables/mine")
    after = sorted(os.path.join(d, f) for d, _, fs in os.walk(victim_root) for f in fs)
    assert after == before
    # The table's own Iceberg metadata is made again from its Delta log, where it lies.
    assert status == 200 and again["metadata"]["location"] == made["mine"]["storage_location"], again
    assert again["metadata-location"].startswith(made["mine"]["storage_location"] + "/metadata/"), again
