"""Versioned metadata (docs/versions.md): reads at a past version or time (get, list, resolve,
search) after later writes and drops, governed by today's grants; an asset's history; the
retention window's 400s; undrop and purge."""

from __future__ import annotations

import asyncio
import os

from governance_users import grant, user

from shardcat.catalog.features.versions import purge_round
from shardcat.entities.values import now_ms
from shardcat.serving.app import SERVING

COLS = [{"name": "id", "type_name": "LONG"}]


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, status, body)
    return body


async def version(server, ws) -> int:
    return await server.store.metastore_version(ws.metastore_id)


async def table(ws, name, schema="s", catalog="main", **extra):
    return await ok(ws, "POST", "/tables", json={
        "name": name, "catalog_name": catalog, "schema_name": schema, "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLS, **extra})


async def world(ws):
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await table(ws, "a", comment="first comment")
    await table(ws, "b")


def at(v: int) -> dict:
    return {"as_of_version": str(v)}


async def test_reads_at_a_version_after_later_writes_and_drops(server, ws):
    await world(ws)
    v1 = await version(server, ws)
    await ok(ws, "PATCH", "/tables/main.s.a", json={"comment": "second comment"})
    await ok(ws, "DELETE", "/tables/main.s.b")
    await table(ws, "c")
    await ok(ws, "PATCH", "/tables/main.s.a", json={"new_name": "a2"})
    # today
    assert [t["name"] for t in (await ok(ws, "GET", "/tables", params={"catalog_name": "main",
                                                                         "schema_name": "s"}))["tables"]] == ["a2", "c"]
    # get at v1: the old comment, the dropped table, the old name; nothing created later
    got = await ok(ws, "GET", "/tables/main.s.a", params=at(v1))
    assert got["comment"] == "first comment" and got["full_name"] == "main.s.a"
    assert (await ok(ws, "GET", "/tables/main.s.b", params=at(v1)))["name"] == "b"
    status, body = await ws.call("GET", "/tables/main.s.c", params=at(v1))
    assert status == 404, body
    status, _ = await ws.call("GET", "/tables/main.s.a2", params=at(v1))
    assert status == 404
    # list at v1
    listed = await ok(ws, "GET", "/tables", params={"catalog_name": "main", "schema_name": "s", **at(v1)})
    assert [(t["name"], t.get("comment")) for t in listed["tables"]] == [("a", "first comment"), ("b", None)]
    paged = await ok(ws, "GET", "/tables", params={"catalog_name": "main", "schema_name": "s", "max_results": "1",
                                                   **at(v1)})
    assert [t["name"] for t in paged["tables"]] == ["a"] and paged["next_page_token"]
    # resolve at v1
    res = await ok(ws, "POST", "/resolve", params=at(v1), json={"items": [
        {"securable_type": "TABLE", "name": "main.s.b"}, {"securable_type": "TABLE", "name": "main.s.c"}]})
    assert res["metastore_version"] == v1
    assert "error" not in res["items"][0] and res["items"][0]["table"]["full_name"] == "main.s.b"
    assert res["items"][0]["authorization"]["allowed"] is True
    assert res["items"][1]["error"]["error_code"] == "NOT_FOUND"
    # search at v1: the dropped table and the old comment are found; the later table is not
    found = await ok(ws, "GET", "/shardcat/search", params={"query": "first", **at(v1)})
    assert [r["full_name"] for r in found["results"]] == ["main.s.a"]
    found = await ok(ws, "GET", "/shardcat/search", params={"query": "main", "securable_types": "TABLE", **at(v1)})
    assert sorted(r["full_name"] for r in found["results"]) == ["main.s.a", "main.s.b"]
    assert not (await ok(ws, "GET", "/shardcat/search", params={"query": "first"}))["results"]
    # by time: a timestamp just after v1's write reads v1
    ts = await server.store.pool.fetchval("SELECT at FROM change_log WHERE metastore_id = $1 AND version = $2",
                                          __import__("uuid").UUID(ws.metastore_id), v1)
    got = await ok(ws, "GET", "/tables/main.s.a", params={"as_of_timestamp": str(ts)})
    assert got["comment"] in ("first comment", "second comment")   # later writes in the same ms read the same
    async with ws.session.get(ws.api + "/catalogs/main", params=at(v1), headers=ws.headers) as r:
        assert r.status == 200 and r.headers["X-Shardcat-As-Of-Version"] == str(v1)
    # the present is unchanged by all this
    assert (await ok(ws, "GET", "/tables/main.s.a2"))["comment"] == "second comment"


async def test_versions_outside_the_window_and_bad_parameters_are_400(server, ws):
    await world(ws)
    now = await version(server, ws)
    for params in ({"as_of_version": str(now + 1)}, {"as_of_timestamp": str(now_ms() + 60_000)},
                   {"as_of_version": "x"}, {"as_of_version": "-1"}, {"as_of_version": "1", "as_of_timestamp": "1"},
                   {"as_of_timestamp": "1"}):
        status, body = await ws.call("GET", "/catalogs/main", params=params)
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (params, body)
    status, body = await ws.call("POST", "/catalogs", params=at(1), json={"name": "nope"})
    assert status == 400 and "not answered at a past version" in body["message"]
    # a short window: version 1 ended long enough ago
    assert (await ok(ws, "PATCH", "/shardcat/versions/settings", json={"retention_seconds": 1}))["retention_seconds"] == 1
    assert (await ok(ws, "GET", "/shardcat/versions/settings"))["retention_seconds"] == 1
    await asyncio.sleep(1.2)
    status, body = await ws.call("GET", "/catalogs/main", params=at(1))
    assert status == 400 and "retention window" in body["message"], body
    assert (await ok(ws, "GET", "/catalogs/main", params=at(await version(server, ws))))["name"] == "main"
    status, body = await ws.call("PATCH", "/shardcat/versions/settings", json={"retention_seconds": "1"})
    assert status == 400


async def test_todays_grants_decide_at_any_version(server, ws):
    await world(ws)
    v1 = await version(server, ws)
    reader = await user(server, ws)
    await ok(ws, "DELETE", "/tables/main.s.b")
    # no grants: 404 at any version, as today
    for path in ("/tables/main.s.a", "/tables/main.s.b", "/schemas/main.s", "/catalogs/main"):
        status, _ = await reader.call("GET", path, params=at(v1))
        assert status in (403, 404), path
        status_now, _ = await reader.call("GET", path)
        if path != "/tables/main.s.b":
            assert status == status_now, path
    listed = await ok(reader, "GET", "/catalogs", params=at(v1))
    assert listed["catalogs"] == []
    found = await ok(reader, "GET", "/shardcat/search", params={"query": "main", **at(v1)})
    assert found["results"] == []
    status, body = await reader.call("GET", "/shardcat/history/TABLE/main.s.b")
    assert status == 404, body
    # today's grants on the schema reach the dropped table as it was
    await grant(ws, "catalog", "main", reader.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE_SCHEMA", "SELECT")
    assert (await ok(reader, "GET", "/tables/main.s.b", params=at(v1)))["name"] == "b"
    listed = await ok(reader, "GET", "/tables", params={"catalog_name": "main", "schema_name": "s", **at(v1)})
    assert [t["name"] for t in listed["tables"]] == ["a", "b"]
    found = await ok(reader, "GET", "/shardcat/search", params={"query": "main", "securable_types": "TABLE", **at(v1)})
    assert sorted(r["full_name"] for r in found["results"]) == ["main.s.a", "main.s.b"]
    # revoked today: gone at every version again
    await grant(ws, "schema", "main.s", reader.name, remove=["SELECT"])
    status, _ = await reader.call("GET", "/tables/main.s.b", params=at(v1))
    assert status in (403, 404)
    listed = await ok(reader, "GET", "/tables", params={"catalog_name": "main", "schema_name": "s", **at(v1)})
    assert listed["tables"] == []


async def test_asset_history_names_who_changed_what(server, ws):
    await world(ws)
    editor = await user(server, ws)
    await grant(ws, "catalog", "main", editor.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", editor.name, "USE_SCHEMA")
    await grant(ws, "table", "main.s.a", editor.name, "MANAGE")
    await ok(editor, "PATCH", "/tables/main.s.a", json={"comment": "by the editor"})
    await ok(ws, "DELETE", "/tables/main.s.a")
    await table(ws, "a", comment="again")
    out = await ok(ws, "GET", "/shardcat/history/TABLE/main.s.a")
    states = [(v["asset"].get("comment"), v["changed_by"], v.get("dropped", False)) for v in out["versions"]]
    assert states == [("first comment", "admin", False), ("by the editor", editor.name, True), ("again", "admin", False)]
    assert out["versions"][1]["dropped_by"] == "admin"
    assert out["versions"][0]["replaced_at_version"] == out["versions"][1]["version"]
    assert out["versions"][0]["id"] == out["versions"][1]["id"] != out["versions"][2]["id"]
    status, _ = await ws.call("GET", "/shardcat/history/TABLE/main.s.nothing")
    assert status == 404
    status, _ = await ws.call("GET", "/shardcat/history/BOGUS/main.s.a")
    assert status == 400


async def test_undrop_within_the_window_and_not_past_it(server, ws):
    await world(ws)
    await grant(ws, "table", "main.s.a", "someone", "SELECT")
    await ok(ws, "DELETE", "/schemas/main.s", params={"force": "true"})
    dropped = (await ok(ws, "GET", "/shardcat/dropped"))["dropped"]
    names = {d["full_name"]: d for d in dropped}
    assert set(names) == {"main.s", "main.s.a", "main.s.b"}
    schema_id = names["main.s"]["id"]
    # a name taken meanwhile: 409, nothing restored
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    status, body = await ws.call("POST", f"/shardcat/dropped/{schema_id}/undrop")
    assert status == 409, body
    await ok(ws, "DELETE", "/schemas/main.s")
    out = await ok(ws, "POST", f"/shardcat/dropped/{schema_id}/undrop")
    assert out["restored"] == 3
    listed = await ok(ws, "GET", "/tables", params={"catalog_name": "main", "schema_name": "s"})
    assert [t["name"] for t in listed["tables"]] == ["a", "b"]
    assert listed["tables"][0]["table_id"] == names["main.s.a"]["id"]
    perms = await ok(ws, "GET", "/permissions/table/main.s.a")
    assert perms["privilege_assignments"] == [{"principal": "someone", "privileges": ["SELECT"]}]
    still = {d["id"] for d in (await ok(ws, "GET", "/shardcat/dropped"))["dropped"]}
    assert not still & {schema_id, names["main.s.a"]["id"], names["main.s.b"]["id"]}
    status, _ = await ws.call("POST", f"/shardcat/dropped/{schema_id}/undrop")
    assert status == 404
    # dropped again: listed once, as of its latest drop, and undropped again
    await ok(ws, "DELETE", "/tables/main.s.a")
    again = [d for d in (await ok(ws, "GET", "/shardcat/dropped"))["dropped"] if d["id"] == names["main.s.a"]["id"]]
    assert len(again) == 1 and again[0]["dropped_at_version"] == await version(server, ws)
    await ok(ws, "POST", f"/shardcat/dropped/{names['main.s.a']['id']}/undrop")
    # past the window: refused, and the background purge forgets it
    await ok(ws, "DELETE", "/tables/main.s.b")
    b_id = names["main.s.b"]["id"]
    await ok(ws, "PATCH", "/shardcat/versions/settings", json={"retention_seconds": 1})
    await asyncio.sleep(1.2)
    await ok(ws, "POST", "/schemas", json={"name": "later", "catalog_name": "main"})
    assert b_id not in [d["id"] for d in (await ok(ws, "GET", "/shardcat/dropped"))["dropped"]]
    status, body = await ws.call("POST", f"/shardcat/dropped/{b_id}/undrop")
    assert status == 400 and "retention window" in body["message"], body
    await purge_round(server.runner.app[SERVING].shard)
    status, body = await ws.call("POST", f"/shardcat/dropped/{b_id}/undrop")
    assert status == 404, body


async def test_purge_deletes_history_and_managed_storage(server, ws):
    await world(ws)
    t = (await ok(ws, "GET", "/tables/main.s.a"))
    path = t["storage_location"].removeprefix("file://")
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, "part-0.parquet"), "w").close()
    v1 = await version(server, ws)
    await ok(ws, "DELETE", "/tables/main.s.a")
    assert os.path.exists(path)                     # kept while it can be undropped
    out = await ok(ws, "DELETE", f"/shardcat/dropped/{t['table_id']}")
    assert out["purged"] == 1 and out["storage_deleted"] == [t["storage_location"]]
    assert not os.path.exists(path)
    status, _ = await ws.call("POST", f"/shardcat/dropped/{t['table_id']}/undrop")
    assert status == 404
    status, _ = await ws.call("GET", "/tables/main.s.a", params=at(v1))
    assert status == 404
    # not an admin and not the owner: it is not found
    other = await user(server, ws)
    await ok(ws, "DELETE", "/tables/main.s.b")
    b = [d for d in (await ok(ws, "GET", "/shardcat/dropped"))["dropped"] if d["full_name"] == "main.s.b"][0]
    for method, path in (("POST", f"/shardcat/dropped/{b['id']}/undrop"), ("DELETE", f"/shardcat/dropped/{b['id']}")):
        status, _ = await other.call(method, path)
        assert status == 404
    assert (await ok(other, "GET", "/shardcat/dropped"))["dropped"] == []


# ---- snapshots, restore, clone ------------------------------------------------------------------

def _local(url: str) -> str:
    return url.removeprefix("file://")


def _write(url: str, ids: list[int], mode: str = "append") -> None:
    import pyarrow as pa
    from deltalake import write_deltalake
    write_deltalake(_local(url), pa.table({"id": pa.array(ids, pa.int64())}), mode=mode)


def _read(url: str) -> list[int]:
    """The rows through delta-rs's own scan (DataFusion), which reads a shallow clone's absolute paths."""
    from deltalake import DeltaTable, QueryBuilder
    rows = QueryBuilder().register("t", DeltaTable(_local(url))).execute("SELECT id FROM t").read_all()
    return sorted(rows.to_pydict()["id"]) if hasattr(rows, "to_pydict") else sorted(
        __import__("pyarrow").table(rows)["id"].to_pylist())


def _files(url: str) -> set[str]:
    out = set()
    for root, _, names in os.walk(_local(url)):
        out |= {os.path.join(root, n) for n in names if n.endswith(".parquet")}
    return out


async def test_snapshot_restore_round_trip(server, ws):
    await world(ws)
    await grant(ws, "table", "main.s.b", "someone", "SELECT")
    snap = await ok(ws, "POST", "/shardcat/snapshots", json={"name": "before", "securable_type": "SCHEMA",
                                                              "full_name": "main.s", "comment": "pinned"})
    assert snap["version"] == await version(server, ws) and snap["full_name"] == "main.s"
    status, _ = await ws.call("POST", "/shardcat/snapshots", json={"name": "before", "securable_type": "SCHEMA",
                                                                   "full_name": "main.s"})
    assert status == 409
    await ok(ws, "PATCH", "/tables/main.s.a", json={"comment": "changed"})
    await ok(ws, "DELETE", "/tables/main.s.b")
    await table(ws, "new")
    await ok(ws, "PATCH", "/schemas/main.s", json={"comment": "schema changed"})
    before = await version(server, ws)
    out = await ok(ws, "POST", "/shardcat/snapshots/before/restore")
    assert out["put_back"] == 3 and out["deleted"] == 1 and out["restored_to_version"] == snap["version"]
    assert await version(server, ws) == before + 1          # one write
    listed = await ok(ws, "GET", "/tables", params={"catalog_name": "main", "schema_name": "s"})
    assert [(t["name"], t.get("comment")) for t in listed["tables"]] == [("a", "first comment"), ("b", None)]
    assert "comment" not in await ok(ws, "GET", "/schemas/main.s")
    # the table dropped since comes back with the grants it held when dropped
    assert (await ok(ws, "GET", "/permissions/table/main.s.b"))["privilege_assignments"] == [
        {"principal": "someone", "privileges": ["SELECT"]}]
    # the snapshot outlives the retention window: its version is readable and restorable after purging
    await ok(ws, "PATCH", "/shardcat/versions/settings", json={"retention_seconds": 1})
    await asyncio.sleep(1.2)
    await ok(ws, "PATCH", "/tables/main.s.a", json={"comment": "again"})
    await purge_round(server.runner.app[SERVING].shard)
    pinned = await ok(ws, "GET", "/tables/main.s.a", params=at(snap["version"]))
    assert pinned["comment"] == "first comment"
    status, _ = await ws.call("GET", "/tables/main.s.a", params=at(snap["version"] + 1))
    assert status == 400
    assert [s["name"] for s in (await ok(ws, "GET", "/shardcat/snapshots"))["snapshots"]] == ["before"]
    # someone who may not read the schema sees no snapshot and cannot restore it
    other = await user(server, ws)
    assert (await ok(other, "GET", "/shardcat/snapshots"))["snapshots"] == []
    status, _ = await other.call("POST", "/shardcat/snapshots/before/restore")
    assert status == 404
    await ok(ws, "DELETE", "/shardcat/snapshots/before")
    status, _ = await ws.call("GET", "/shardcat/snapshots/before")
    assert status == 404


async def test_clone_is_its_own_and_shares_the_sources_files(server, ws):
    await world(ws)
    await ok(ws, "POST", "/tables", json={"name": "v", "catalog_name": "main", "schema_name": "s",
                                          "table_type": "VIEW", "view_definition": "SELECT 1", "columns": COLS})
    src = await ok(ws, "GET", "/tables/main.s.a")
    _write(src["storage_location"], [1, 2, 3])
    originals = _files(src["storage_location"])
    await grant(ws, "schema", "main.s", "someone", "SELECT")
    v1 = await version(server, ws)
    await ok(ws, "PATCH", "/tables/main.s.a", json={"comment": "after the clone's version"})
    out = await ok(ws, "POST", "/shardcat/clones", json={"securable_type": "CATALOG", "source": "main",
                                                          "name": "dev", "as_of_version": v1})
    # the catalog, its default schema, s, a, b, v
    assert out["cloned"] == 6 and out["shallow_clones"] == 1 and out["source_version"] == v1, out
    clone = await ok(ws, "GET", "/tables/dev.s.a")
    assert clone["comment"] == "first comment" and clone["table_id"] != src["table_id"]
    assert clone["storage_location"] != src["storage_location"] and clone["table_type"] == "MANAGED"
    assert clone["storage_location"].startswith(ws.storage_root) and clone["table_id"] in clone["storage_location"]
    assert clone["owner"] == "admin"
    assert (await ok(ws, "GET", "/tables/dev.s.v"))["view_definition"] == "SELECT 1"
    assert (await ok(ws, "GET", "/permissions/schema/dev.s"))["privilege_assignments"] == []   # no grants copied
    assert _read(clone["storage_location"]) == [1, 2, 3]
    # the clone's writes do not touch the source
    _write(clone["storage_location"], [4])
    assert _read(clone["storage_location"]) == [1, 2, 3, 4] and _read(src["storage_location"]) == [1, 2, 3]
    assert _files(src["storage_location"]) == originals
    await ok(ws, "PATCH", "/tables/dev.s.a", json={"comment": "the clone's"})
    assert (await ok(ws, "GET", "/tables/main.s.a"))["comment"] == "after the clone's version"
    # the source's vacuum keeps what the clone references, and deletes what nobody does
    _write(src["storage_location"], [9], mode="overwrite")
    _write(src["storage_location"], [10], mode="overwrite")
    out = await ok(ws, "POST", "/shardcat/vacuum", json={"table": "main.s.a", "retention_hours": 0})
    assert len(out["kept_for_clones"]) == len(originals) and len(out["deleted"]) == 1, out
    assert _read(src["storage_location"]) == [10] and _read(clone["storage_location"]) == [1, 2, 3, 4]
    # so does the source's purge once dropped
    await ok(ws, "DELETE", "/tables/main.s.a")
    purged = await ok(ws, "DELETE", f"/shardcat/dropped/{src['table_id']}")
    assert purged["storage_kept_for_clones"] == [src["storage_location"]] and purged["storage_deleted"] == []
    assert _read(clone["storage_location"]) == [1, 2, 3, 4]
    status, _ = await ws.call("POST", "/shardcat/clones", json={"securable_type": "CATALOG", "source": "main",
                                                                "name": "dev"})
    assert status == 409


async def test_clone_takes_only_what_the_caller_may_read(server, ws):
    await world(ws)
    dev = await user(server, ws)
    await ok(ws, "POST", "/catalogs", json={"name": "sandbox"})
    await grant(ws, "catalog", "sandbox", dev.name, "USE_CATALOG", "CREATE_SCHEMA")
    status, _ = await dev.call("POST", "/shardcat/clones", json={"securable_type": "SCHEMA", "source": "main.s",
                                                                 "name": "sandbox.s"})
    assert status == 404                              # may not read the source: as if missing
    await grant(ws, "catalog", "main", dev.name, "USE_CATALOG")
    await grant(ws, "schema", "main.s", dev.name, "USE_SCHEMA")
    await grant(ws, "table", "main.s.a", dev.name, "SELECT")
    out = await ok(dev, "POST", "/shardcat/clones", json={"securable_type": "SCHEMA", "source": "main.s",
                                                          "name": "sandbox.s"})
    assert out["cloned"] == 2 and out["skipped"] == []
    listed = await ok(dev, "GET", "/tables", params={"catalog_name": "sandbox", "schema_name": "s"})
    assert [(t["name"], t["owner"]) for t in listed["tables"]] == [("a", dev.name)]
    status, _ = await dev.call("POST", "/shardcat/clones", json={"securable_type": "SCHEMA", "source": "main.s",
                                                                 "name": "main.copy"})
    assert status in (403, 404)                       # no CREATE SCHEMA in main


async def test_a_clones_managed_storage_is_its_own(server, ws, tmp_path):
    root = (tmp_path / "rooted").as_uri()
    cat = await ok(ws, "POST", "/catalogs", json={"name": "rooted", "storage_root": root})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "rooted"})
    await table(ws, "t", catalog="rooted")
    await ok(ws, "POST", "/volumes", json={"catalog_name": "rooted", "schema_name": "s", "name": "v",
                                           "volume_type": "MANAGED"})
    out = await ok(ws, "POST", "/shardcat/clones", json={"securable_type": "CATALOG", "source": "rooted",
                                                          "name": "rooted_dev"})
    assert out["cloned"] == 5        # the catalog, its default schema, s, t, v
    dev = await ok(ws, "GET", "/catalogs/rooted_dev")
    assert dev["storage_root"] == cat["storage_root"] and dev["storage_location"] != cat["storage_location"]
    for path in ("/tables/rooted_dev.s.t", "/volumes/rooted_dev.s.v"):
        assert (await ok(ws, "GET", path))["storage_location"].startswith(dev["storage_location"] + "/"), path
    # one asset per path: nothing of the clone overlaps the source
    status, _ = await ws.call("POST", "/shardcat/clones", json={"securable_type": "SCHEMA", "source": "rooted.s",
                                                                "name": "rooted_dev.s2", "as_of_version": 0})
    assert status == 404                      # at version 0 there was no such schema


async def test_an_idle_purge_round_writes_nothing(server, ws):
    """Nothing older than the window: the background purge only reads (a refused request's
    before-and-after snapshot of the metastores table, test_bad_input.py, must not see it)."""
    await world(ws)
    await ok(ws, "PATCH", "/tables/main.s.a", json={"comment": "kept: inside the window"})
    row = "SELECT * FROM metastores WHERE id = $1"
    before = dict(await server.store.pool.fetchrow(row, __import__("uuid").UUID(ws.metastore_id)))
    await purge_round(server.runner.app[SERVING].shard)
    assert dict(await server.store.pool.fetchrow(row, __import__("uuid").UUID(ws.metastore_id))) == before
    assert (await ok(ws, "GET", "/tables/main.s.a", params=at(await version(server, ws) - 1)))["comment"] == \
        "first comment"
