"""Attacks on the operations that delete storage (issue 42, items 1 and 2): a vacuum that deletes
files its table does not own, and a purge that deletes EXTERNAL storage.

Vacuum (`POST /shardcat/vacuum`, dry run and real) needs MODIFY (or ownership) on the table, and
deletes only files the table's own Delta log added and later removed, past the retention, inside
the table's root: never a file the log does not name, never one it only removes, never one outside
the root however the log spells it (`..`, absolute URLs, percent-encodings, symlinked folders and
files), never anything on a table without a valid `_delta_log`. The attacker holds only CREATE
EXTERNAL TABLE on an external location (or, with none configured, CREATE TABLE) and registers a
Delta table on a folder of other people's files.

Purge (`DELETE /shardcat/dropped/{id}` and the retention window's background purge) deletes only
MANAGED storage the catalog allocated for the asset, whatever API dropped it (Unity Catalog,
Iceberg REST with `purgeRequested=true`, the UC Delta API, a transaction, a schema's cascade); an
EXTERNAL table's or volume's folder and its siblings stay byte for byte, a managed table's storage
still goes, and a table undropped since its drop keeps its storage.

After each attempt every file outside what the caller may delete is compared byte for byte.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa
from deltalake import write_deltalake

from governance_users import grant, user
from shardcat.catalog.features.versions import delete_storage, purge_round
from shardcat.delta import log as dlog
from shardcat.delta.client import DeltaCatalogClient
from shardcat.entities.asset import Asset
from shardcat.serving.app import SERVING

COLS = [{"name": "id", "type_name": "LONG"}]
ICE = "/iceberg/v1/catalogs/main"
ICE_SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
MONTH_AGO = time.time() - 30 * 86400


async def ok(caller, method, path, **kw):
    status, body = await caller.call(method, path, **kw)
    assert status in (200, 204), (method, path, status, body)
    return body


def seed(folder, names: list[str]) -> None:
    """Files of distinct content, a month old (so no retention check is what keeps them)."""
    for name in names:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(f"{name} {os.urandom(8).hex()}".encode())
        os.utime(path, (MONTH_AGO, MONTH_AGO))


def tree(root) -> dict:
    """Everything under `root`: each file's bytes, each link's target, each folder."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir",)
            else:
                with open(path, "rb") as f:
                    out[rel] = ("file", f.read())
    return out


async def world(ws) -> None:
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})


async def external_location(ws, url: str) -> None:
    await ok(ws, "POST", "/storage-credentials", json={"name": "cred", "aws_iam_role": {"role_arn": "arn:x"}})
    await ok(ws, "POST", "/external-locations", json={"name": "shared", "url": url, "credential_name": "cred"})


async def maker(server, ws, *, location: bool):
    """A user who may create tables in main.s (and external ones in location `shared`), nothing more."""
    u = await user(server, ws)
    await grant(ws, "catalog", "main", u.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", u.name, "USE SCHEMA", "CREATE TABLE")
    if location:
        await grant(ws, "external_location", "shared", u.name, "CREATE EXTERNAL TABLE")
    return u


async def external_delta(caller, name: str, folder) -> dict:
    return await ok(caller, "POST", "/tables", json={
        "name": name, "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": folder.as_uri()})


async def vacuum(caller, table: str, **extra):
    return await caller.call("POST", "/shardcat/vacuum", json={"table": table, "retention_hours": 0, **extra})


# ---- vacuum ---------------------------------------------------------------------------------------


async def test_vacuum_refuses_a_folder_without_a_valid_delta_log(server, ws, tmp_path):
    """CREATE EXTERNAL TABLE on a location, a table registered on a folder of other people's files:
    no log, an empty log folder, a log that is not JSON, a log without metadata; every vacuum is a
    400 and every file stays."""
    shared = tmp_path / "shared"
    await world(ws)
    await external_location(ws, shared.as_uri())
    attacker = await maker(server, ws, location=True)
    folders = {name: shared / name for name in ("nolog", "emptylog", "garbage", "nometa")}
    for folder in folders.values():
        seed(folder, ["part-0.parquet", "team/part-1.parquet", "year=2024/part-2.parquet", ".hidden", "_SUCCESS"])
    os.makedirs(folders["emptylog"] / "_delta_log")
    seed(folders["garbage"], ["_delta_log/00000000000000000000.json"])
    (folders["nometa"] / "_delta_log").mkdir()
    (folders["nometa"] / "_delta_log" / "00000000000000000000.json").write_bytes(dlog.encode_actions([
        dlog.commit_info(1, "WRITE"), {"remove": {"path": "part-0.parquet", "deletionTimestamp": 1}}]))
    seed(shared, ["neighbour/x.parquet"])
    before = tree(tmp_path)
    for name, folder in folders.items():
        await external_delta(attacker, name, folder)
        for spelling in (f"main.s.{name}", f"MAIN.S.{name.upper()}"):
            for dry in (True, False):
                status, body = await vacuum(attacker, spelling, dry_run=dry)
                assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), (name, body)
                assert "Delta log" in body["message"], body
    assert tree(tmp_path) == before


async def test_vacuum_without_external_locations(server, ws, tmp_path):
    """No external location configured: any user who may create a table registers one anywhere
    the server can write; its vacuum still deletes nothing there."""
    await world(ws)
    attacker = await maker(server, ws, location=False)
    victim = tmp_path / "someone" / "data"
    seed(victim, ["a.parquet", "b/c.parquet", "d.json"])
    before = tree(tmp_path)
    await external_delta(attacker, "grab", victim)
    for dry in (True, False):
        status, body = await vacuum(attacker, "main.s.grab", dry_run=dry)
        assert status == 400, body
    assert tree(tmp_path) == before


def _remove(path: str, when: int) -> dict:
    return {"remove": {"path": path, "deletionTimestamp": when, "dataChange": True}}


async def test_vacuum_deletes_only_what_its_log_added_then_removed_inside_its_root(server, ws, tmp_path):
    """A table's log (its writer's, the attacker) adds and removes files under every spelling that
    could leave its root; only the one file of its own it removed long ago goes."""
    shared, outside = tmp_path / "shared", tmp_path / "outside"
    await world(ws)
    await external_location(ws, shared.as_uri())
    attacker = await maker(server, ws, location=True)
    root, victim = shared / "t", shared / "victim"
    seed(victim, [f"{c}.parquet" for c in "abcdefghij"])
    seed(outside, ["secret.parquet"])
    seed(root, ["own_removed.parquet", "own_live.parquet", "recent.parquet", "never_added.parquet",
                "unknown.parquet", "sub/unknown.parquet", "%2E%2E/victim/c.parquet"])
    os.symlink(victim, root / "link")
    os.symlink(outside / "secret.parquet", root / "alias.parquet")
    escapes = ["../victim/a.parquet", (victim / "b.parquet").as_uri(), "%2E%2E/victim/c.parquet",
               "sub/../../victim/d.parquet", "link/e.parquet", "alias.parquet",
               f"{root.as_uri()}/%2e%2e/victim/f.parquet", f"{root.as_uri()}/../victim/g.parquet",
               f"file://localhost{victim}/h.parquet", str(victim / "i.parquet"), "..%2Fvictim%2Fj.parquet",
               "_delta_log/00000000000000000000.json", "link", ""]
    mine = ["own_removed.parquet", "own_live.parquet", "recent.parquet"]
    long_ago, now = dlog.now_ms() - 30 * 86400_000, dlog.now_ms()
    v0 = [dlog.commit_info(long_ago, "WRITE"), dlog.protocol(False),
          dlog.metadata("t", pa.schema([("id", pa.int64())]), {})]
    v0 += [dlog.add(p, 10, 1, long_ago) for p in mine + escapes]
    v1 = [dlog.commit_info(long_ago, "DELETE"), _remove("own_removed.parquet", long_ago),
          _remove("never_added.parquet", long_ago), *[_remove(p, long_ago) for p in escapes]]
    v2 = [dlog.commit_info(now, "DELETE"), _remove("recent.parquet", now)]
    storage = dlog.Storage(root.as_uri())
    for version, actions in enumerate((v0, v1, v2)):
        storage.write(dlog.commit_file(version), dlog.encode_actions(actions))
    table = await external_delta(attacker, "t", root)
    before = tree(tmp_path)
    expected = [f"{table['storage_location']}/own_removed.parquet"]
    for spelling in ("main.s.t", "Main.S.T"):
        status, dry = await vacuum(attacker, spelling, dry_run=True, retention_hours=24)
        assert status == 200 and dry["deleted"] == expected and dry["kept_for_clones"] == [], dry
        assert tree(tmp_path) == before
    status, out = await vacuum(attacker, "main.s.t", retention_hours=24)
    assert status == 200 and out["deleted"] == expected, out
    del before[os.path.join("shared", "t", "own_removed.parquet")]
    assert tree(tmp_path) == before
    # again: nothing more, whatever the retention
    status, out = await vacuum(attacker, "main.s.t", retention_hours=0)
    assert status == 200 and out["deleted"] == [f"{table['storage_location']}/recent.parquet"], out
    del before[os.path.join("shared", "t", "recent.parquet")]
    assert tree(tmp_path) == before


async def test_vacuum_needs_modify(server, ws, tmp_path):
    """SELECT is not enough (403), no privilege at all reads as missing (404); MODIFY vacuums."""
    await world(ws)
    t = await ok(ws, "POST", "/tables", json={"name": "data", "catalog_name": "main", "schema_name": "s",
                                              "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": COLS})
    location = t["storage_location"]
    for ids in ([1], [2]):
        write_deltalake(location.removeprefix("file://"), pa.table({"id": pa.array(ids, pa.int64())}),
                        mode="overwrite")
    stranger, reader, writer = [await user(server, ws) for _ in range(3)]
    for u, privilege in ((reader, "SELECT"), (writer, "MODIFY")):
        await grant(ws, "catalog", "main", u.name, "USE CATALOG")
        await grant(ws, "schema", "main.s", u.name, "USE SCHEMA")
        await grant(ws, "table", "main.s.data", u.name, privilege)
    before = tree(tmp_path)
    for u, code in ((stranger, 404), (reader, 403)):
        for dry in (True, False):
            status, body = await vacuum(u, "main.s.data", dry_run=dry)
            assert status == code, body
    assert tree(tmp_path) == before
    for hours in ("-1", "1e308", "1" + "0" * 400, "NaN", "Infinity", "true", "null", '"1"'):
        status, body = await writer.call("POST", "/shardcat/vacuum", headers={"Content-Type": "application/json"},
                                         data=f'{{"table": "main.s.data", "retention_hours": {hours}}}')
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (hours, body)
    assert tree(tmp_path) == before
    status, out = await vacuum(writer, "main.s.data")
    assert status == 200 and len(out["deleted"]) == 1 and out["deleted"][0].startswith(location), out
    assert not os.path.exists(out["deleted"][0].removeprefix("file://"))


async def test_a_catalog_managed_table_is_vacuumed_only_once_published(server, ws, tmp_path):
    """A ratified commit not in the _delta_log yet could add a removed file back: until it is
    published, a vacuum is refused (400 FAILED_PRECONDITION) and deletes nothing."""
    await world(ws)
    async with DeltaCatalogClient(ws.api, ws.token, publish_after_commit=False) as delta:
        await delta.create_table("main.s.cm", pa.schema([("id", pa.int64())]))
        await delta.append("main.s.cm", pa.table({"id": pa.array([1], pa.int64())}))
        await delta.overwrite("main.s.cm", pa.table({"id": pa.array([2], pa.int64())}))
        before = tree(tmp_path)
        for dry in (True, False):
            status, body = await vacuum(ws, "main.s.cm", dry_run=dry)
            assert status == 400 and body.get("error_code") == "FAILED_PRECONDITION" and "publish" in body["message"], body
        assert tree(tmp_path) == before
        await delta.publish("main.s.cm")
        status, out = await vacuum(ws, "main.s.cm")
        assert status == 200 and len(out["deleted"]) == 1, out
        assert (await delta.read("main.s.cm"))["id"].to_pylist() == [2]


async def test_a_clones_vacuum_never_deletes_its_sources_files(server, ws, tmp_path):
    """A shallow clone's log adds the source's files by absolute URL; the clone overwritten, its
    log removes them: they are outside the clone's root and stay."""
    await world(ws)
    t = await ok(ws, "POST", "/tables", json={"name": "src", "catalog_name": "main", "schema_name": "s",
                                              "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": COLS})
    write_deltalake(t["storage_location"].removeprefix("file://"), pa.table({"id": pa.array([1], pa.int64())}))
    await ok(ws, "POST", "/shardcat/clones", json={"securable_type": "CATALOG", "source": "main", "name": "dev"})
    clone = await ok(ws, "GET", "/tables/dev.s.src")
    write_deltalake(clone["storage_location"].removeprefix("file://"),
                    pa.table({"id": pa.array([2], pa.int64())}), mode="overwrite")
    source_files = tree(t["storage_location"].removeprefix("file://"))
    status, out = await vacuum(ws, "dev.s.src")
    assert status == 200 and out["deleted"] == [], out
    assert tree(t["storage_location"].removeprefix("file://")) == source_files


# ---- purge ----------------------------------------------------------------------------------------


async def dropped_id(caller, full_name: str) -> str:
    dropped = (await ok(caller, "GET", "/shardcat/dropped"))["dropped"]
    return next(d["id"] for d in dropped if d["full_name"] == full_name)


async def window_purge(server, ws) -> None:
    """The background purge with a window of 0 s: everything dropped so far is past it."""
    await ok(ws, "PATCH", "/shardcat/versions/settings", json={"retention_seconds": 0})
    await purge_round(server.runner.app[SERVING].shard)


async def test_purge_never_deletes_external_storage(server, ws, tmp_path):
    """External tables and volumes in a shared folder, dropped by every API that drops (Iceberg with
    purgeRequested=true, the UC and UC Delta APIs, a transaction, a schema's cascade), purged
    explicitly or by the window: the folder and its siblings stay byte for byte."""
    shared = tmp_path / "shared"
    await world(ws)
    await ok(ws, "POST", "/schemas", json={"name": "s2", "catalog_name": "main"})
    await external_location(ws, shared.as_uri())
    owner = await maker(server, ws, location=True)
    seed(shared, ["sibling.parquet", "team/x.parquet", "team/y/z.parquet"])
    for name in ("ice", "ice_window"):
        await ok(owner, "POST", f"{ICE}/namespaces/s/tables",
                 json={"name": name, "schema": ICE_SCHEMA, "location": (shared / name).as_uri()})
        seed(shared / name, ["data/part-0.parquet"])
    for name in ("uc", "delta_api", "tx"):
        seed(shared / name, ["part-0.parquet", "_delta_log/00000000000000000000.json"])
        await external_delta(owner, name, shared / name)
    seed(shared / "vol", ["file.csv"])
    seed(shared / "s2t", ["part-0.parquet"])
    await ok(ws, "POST", "/volumes", json={"name": "vol", "catalog_name": "main", "schema_name": "s",
                                           "volume_type": "EXTERNAL", "storage_location": (shared / "vol").as_uri()})
    await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": "main", "schema_name": "s2",
                                          "table_type": "EXTERNAL", "data_source_format": "DELTA", "columns": COLS,
                                          "storage_location": (shared / "s2t").as_uri()})
    before = tree(tmp_path)
    await ok(owner, "DELETE", f"{ICE}/namespaces/s/tables/ice", params={"purgeRequested": "true"})
    await ok(owner, "DELETE", "/tables/main.s.uc")
    await ok(owner, "DELETE", "/delta/v1/catalogs/main/schemas/s/tables/delta_api")
    await ok(owner, "POST", "/shardcat/transactions",
             json={"operations": [{"op": "delete", "type": "table", "name": "main.s.tx"}]})
    await ok(ws, "DELETE", "/volumes/main.s.vol")
    await ok(ws, "DELETE", "/schemas/main.s2", params={"force": "true"})
    for caller, name in ((owner, "main.s.ice"), (owner, "main.s.uc"), (owner, "main.s.delta_api"),
                         (owner, "main.s.tx"), (ws, "main.s.vol"), (ws, "main.s2")):
        out = await ok(caller, "DELETE", f"/shardcat/dropped/{await dropped_id(caller, name)}")
        assert out["purged"] >= 1 and out["storage_deleted"] == [], (name, out)
        assert tree(tmp_path) == before, name
    await ok(owner, "DELETE", f"{ICE}/namespaces/s/tables/ice_window", params={"purgeRequested": "true"})
    await window_purge(server, ws)
    assert tree(tmp_path) == before


async def test_purge_still_deletes_managed_storage(server, ws, tmp_path):
    """The fix is not a disabled purge: a managed Iceberg table dropped with purgeRequested, a managed
    UC table, purged explicitly or by the window, lose their own storage and nothing else."""
    await world(ws)
    owner = await maker(server, ws, location=False)
    for name in ("m_ice", "m_window", "keep"):
        await ok(owner, "POST", f"{ICE}/namespaces/s/tables", json={"name": name, "schema": ICE_SCHEMA})
    uc = await ok(owner, "POST", "/tables", json={"name": "m_uc", "catalog_name": "main", "schema_name": "s",
                                                  "table_type": "MANAGED", "data_source_format": "DELTA",
                                                  "columns": COLS})
    locations = {name: (await ok(ws, "GET", f"/tables/main.s.{name}"))["storage_location"]
                 for name in ("m_ice", "m_window", "keep")}
    locations["m_uc"] = uc["storage_location"]
    for url in locations.values():
        seed(url.removeprefix("file://"), ["data/part-0.parquet"])
    root = ws.storage_root.removeprefix("file://")
    seed(root, ["unrelated.parquet"])
    before = tree(tmp_path)

    def gone(*names) -> dict:
        rels = {os.path.relpath(locations[n].removeprefix("file://"), tmp_path) for n in names}
        return {k: v for k, v in before.items() if not any(k == r or k.startswith(r + os.sep) for r in rels)}

    await ok(owner, "DELETE", f"{ICE}/namespaces/s/tables/m_ice", params={"purgeRequested": "true"})
    await ok(owner, "DELETE", "/tables/main.s.m_uc")
    for name in ("m_ice", "m_uc"):
        out = await ok(owner, "DELETE", f"/shardcat/dropped/{await dropped_id(owner, f'main.s.{name}')}")
        assert out["storage_deleted"] == [locations[name]], out
    assert tree(tmp_path) == gone("m_ice", "m_uc")
    await ok(owner, "DELETE", f"{ICE}/namespaces/s/tables/m_window", params={"purgeRequested": "true"})
    await window_purge(server, ws)
    assert tree(tmp_path) == gone("m_ice", "m_uc", "m_window")


async def test_an_undropped_table_keeps_its_storage_through_the_window(server, ws, tmp_path):
    """Dropped with purgeRequested, then undropped: the dropped state's purge leaves the live table's
    storage alone."""
    await world(ws)
    await ok(ws, "POST", f"{ICE}/namespaces/s/tables", json={"name": "back", "schema": ICE_SCHEMA})
    location = (await ok(ws, "GET", "/tables/main.s.back"))["storage_location"]
    seed(location.removeprefix("file://"), ["data/part-0.parquet"])
    before = tree(tmp_path)
    await ok(ws, "DELETE", f"{ICE}/namespaces/s/tables/back", params={"purgeRequested": "true"})
    await ok(ws, "POST", f"/shardcat/dropped/{await dropped_id(ws, 'main.s.back')}/undrop")
    await window_purge(server, ws)
    assert tree(tmp_path) == before
    await ok(ws, "GET", f"{ICE}/namespaces/s/tables/back")


async def test_a_row_claiming_managed_storage_elsewhere_is_not_deleted(server, ws, tmp_path):
    """The last guard: MANAGED is not enough, the storage must be what the catalog allocates for that
    asset (`.../tables/<its id>`, `.../volumes/<its id>`)."""
    shared = tmp_path / "shared"
    seed(shared, ["a.parquet", "tables/b.parquet"])
    before = tree(tmp_path)
    rows = [Asset(id=f"00000000-0000-0000-0000-00000000000{i}", metastore_id=ws.metastore_id, type="table",
                  namespace="table", parent_id=ws.metastore_id, name="t", full_name="c.s.t",
                  storage_path=url, info={"table_type": "MANAGED", "purge_requested": True})
            for i, url in enumerate((shared.as_uri(), (shared / "tables").as_uri(),
                                     (shared / "tables" / "00000000-0000-0000-0000-00000000000b").as_uri()))]
    rows.append(Asset(id="00000000-0000-0000-0000-00000000000c", metastore_id=ws.metastore_id, type="volume",
                      namespace="volume", parent_id=ws.metastore_id, name="v", full_name="c.s.v",
                      storage_path=(shared / "tables" / "00000000-0000-0000-0000-00000000000c").as_uri(),
                      info={"volume_type": "MANAGED"}))
    assert await delete_storage(server.store, rows, managed=True) == ([], [])
    assert tree(tmp_path) == before
