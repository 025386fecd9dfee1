"""Lineage: writes reported by name or path, read back upstream, downstream and several hops
away; only by callers who could write the target and read the sources; hidden where the caller
may not look; dropped assets keep their names for admins; bad input is a clear error."""

from __future__ import annotations

from governance_users import grant, user

COLS = [{"name": "id", "type_name": "LONG"}]
LINEAGE = "/shardcat/lineage"


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, body
    return body


async def _world(ws) -> dict:
    """c.s: tables raw, clean, daily (managed Delta), view v over clean, volume landing."""
    await ok(ws, "POST", "/catalogs", json={"name": "c"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "c"})
    out = {}
    for name in ("raw", "clean", "daily"):
        out[name] = await ok(ws, "POST", "/tables", json={"name": name, "catalog_name": "c", "schema_name": "s",
                                                          "table_type": "MANAGED", "data_source_format": "DELTA",
                                                          "columns": COLS})
    await ok(ws, "POST", "/tables", json={"name": "v", "catalog_name": "c", "schema_name": "s", "table_type": "VIEW",
                                          "view_definition": "SELECT id FROM c.s.clean", "columns": COLS})
    out["landing"] = await ok(ws, "POST", "/volumes", json={"catalog_name": "c", "schema_name": "s",
                                                            "name": "landing", "volume_type": "MANAGED"})
    return out


def edges(out: dict) -> list[tuple]:
    return [(e["direction"], e["hops"], e["source"].get("full_name", "hidden"), e["target"].get("full_name", "hidden"))
            for e in out["edges"]]


async def test_reported_writes_read_back_both_ways_and_hops_away(ws):
    w = await _world(ws)
    answer = await ok(ws, "POST", LINEAGE, json={"target": "c.s.clean", "job": "ingest", "sources": [
        {"name": "c.s.raw"}, {"name": "c.s.landing", "securable_type": "VOLUME"}]})
    assert answer["target"]["id"] == w["clean"]["table_id"]
    assert {s["full_name"] for s in answer["sources"]} == {"c.s.raw", "c.s.landing"}
    # By path: the table owning the file; the target itself among the sources adds no edge.
    await ok(ws, "POST", LINEAGE, json={"target": "c.s.daily", "job": "roll-up", "sources": [
        {"path": w["clean"]["storage_location"] + "/part-00000.parquet"}, {"name": "c.s.daily"}]})
    await ok(ws, "POST", LINEAGE, json={"target": "c.s.clean", "job": "backfill", "sources": [{"name": "c.s.raw"}]})

    around = await ok(ws, "GET", LINEAGE, params={"name": "c.s.clean"})
    assert around["securable"]["full_name"] == "c.s.clean"
    assert edges(around) == [("upstream", 1, "c.s.landing", "c.s.clean"), ("upstream", 1, "c.s.raw", "c.s.clean"),
                             ("downstream", 1, "c.s.clean", "c.s.daily")]
    raw_edge = around["edges"][1]
    assert raw_edge["runs"] == 2 and sorted(raw_edge["jobs"]) == ["backfill", "ingest"]
    assert raw_edge["first_at"] <= raw_edge["last_at"]
    assert raw_edge["source"] == {"id": w["raw"]["table_id"], "securable_type": "TABLE", "full_name": "c.s.raw"}
    assert around["edges"][0]["source"]["securable_type"] == "VOLUME"

    two_up = await ok(ws, "GET", LINEAGE, params={"name": "c.s.daily", "direction": "upstream", "depth": "2"})
    assert edges(two_up) == [("upstream", 1, "c.s.clean", "c.s.daily"), ("upstream", 2, "c.s.landing", "c.s.clean"),
                             ("upstream", 2, "c.s.raw", "c.s.clean")]
    down = await ok(ws, "GET", LINEAGE, params={"name": "c.s.landing", "securable_type": "VOLUME",
                                                "direction": "downstream", "depth": "3"})
    assert edges(down) == [("downstream", 1, "c.s.landing", "c.s.clean"), ("downstream", 2, "c.s.clean", "c.s.daily")]
    assert (await ok(ws, "GET", LINEAGE, params={"name": "c.s.raw", "direction": "upstream"}))["edges"] == []

    # A dropped source keeps the name it had, for admins.
    await ok(ws, "DELETE", "/tables/c.s.raw")
    gone = (await ok(ws, "GET", LINEAGE, params={"name": "c.s.clean", "direction": "upstream"}))["edges"]
    assert gone[1]["source"] == {"id": w["raw"]["table_id"], "securable_type": "TABLE", "full_name": "c.s.raw",
                                 "deleted": True}


async def test_only_who_could_read_the_sources_and_write_the_target(ws, server):
    await _world(ws)
    engineer = await user(server, ws)
    await grant(ws, "catalog", "c", engineer.name, "USE CATALOG", "USE SCHEMA")
    report = {"target": "c.s.clean", "sources": [{"name": "c.s.raw"}]}
    status, body = await engineer.call("POST", LINEAGE, json=report)   # tables it may not see: as if missing
    assert (status, body) == (404, {"error_code": "NOT_FOUND", "message": "Table 'c.s.clean' does not exist."})
    await grant(ws, "table", "c.s.clean", engineer.name, "SELECT")
    status, body = await engineer.call("POST", LINEAGE, json=report)
    assert status == 403 and body["error_code"] == "PERMISSION_DENIED" and "c.s.clean" in body["message"]
    await grant(ws, "table", "c.s.clean", engineer.name, "MODIFY")
    status, body = await engineer.call("POST", LINEAGE, json=report)
    assert (status, body) == (404, {"error_code": "NOT_FOUND", "message": "Table 'c.s.raw' does not exist."})
    await grant(ws, "table", "c.s.raw", engineer.name, "BROWSE")
    status, body = await engineer.call("POST", LINEAGE, json=report)
    assert status == 403 and "c.s.raw" in body["message"]
    await grant(ws, "table", "c.s.raw", engineer.name, "SELECT")
    await ok(engineer, "POST", LINEAGE, json=report)
    await ok(ws, "POST", LINEAGE, json={"target": "c.s.daily", "sources": [{"name": "c.s.clean"}]})

    analyst = await user(server, ws)
    await grant(ws, "catalog", "c", analyst.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "c.s.clean", analyst.name, "SELECT")
    seen = await ok(analyst, "GET", LINEAGE, params={"name": "c.s.clean"})
    assert edges(seen) == [("upstream", 1, "hidden", "c.s.clean"), ("downstream", 1, "c.s.clean", "hidden")]
    assert seen["edges"][0]["source"] == {"hidden": True}
    status, body = await analyst.call("GET", LINEAGE, params={"name": "c.s.raw"})
    assert (status, body["error_code"]) == (404, "NOT_FOUND"), body     # raw is invisible to the analyst


async def test_bad_input_is_a_clear_error(ws):
    w = await _world(ws)
    for body, status, culprit in (
            ({"sources": [{"name": "c.s.raw"}]}, 400, "target"),
            ({"target": "c.s.clean", "sources": []}, 400, "sources"),
            ({"target": "c.s.clean", "sources": [{"name": "c.s.raw", "path": "/x"}]}, 400, "sources[0]"),
            ({"target": "c.s.clean", "sources": [{"name": "c.s.raw", "securable_type": "MODEL"}]}, 400,
             "TABLE or VOLUME"),
            ({"target": "c.s.clean", "sources": [{"name": "raw"}]}, 400, "raw"),
            ({"target": "c.s.clean", "sources": [{"name": "c.s.raw"}], "job": 7}, 400, "job"),
            ({"target": "c.s.v", "sources": [{"name": "c.s.raw"}]}, 400, "view"),
            ({"target": "c.s.nope", "sources": [{"name": "c.s.raw"}]}, 404, "c.s.nope"),
            ({"target": "c.s.clean", "sources": [{"name": "c.s.gone"}]}, 404, "c.s.gone"),
            ({"target": "c.s.clean", "sources": [{"path": "file:///nowhere/at/all"}]}, 404, "file:///nowhere/at/all"),
            ({"target": "c.s.clean", "sources": [{"path": w["clean"]["storage_location"].rsplit("/", 1)[0]}]}, 404,
             "No table or volume")):
        got, answer = await ws.call("POST", LINEAGE, json=body)
        assert got == status and culprit in answer["message"], (body, answer)
    for params, status, culprit in (({}, 400, "name"), ({"name": "c.s.clean", "depth": "0"}, 400, "depth"),
                                    ({"name": "c.s.clean", "depth": "11"}, 400, "depth"),
                                    ({"name": "c.s.clean", "depth": "9" * 5000}, 400, "depth"),   # was a 500
                                    ({"name": "c.s.clean", "direction": "sideways"}, 400, "direction"),
                                    ({"name": "c.s.clean", "securable_type": "SCHEMA"}, 400, "TABLE or VOLUME"),
                                    ({"name": "c.s.nope"}, 404, "c.s.nope")):
        got, answer = await ws.call("GET", LINEAGE, params=params)
        assert got == status and culprit in answer["message"], (params, answer)
