"""Attacks on time travel and clones (issue #42 items 3, 4, 14 and 18a): reading an old state, or
cloning one, must never get around today's governance.

- Time travel: a table filtered, masked or tagged (ABAC) since version N, read as of N (by version
  and by time) through every reader at a version (resolve by name and by path, getTable, listTables,
  search, a view's dependencies), is governed as it is today: an untrusted engine is refused its
  data, a trusted engine gets today's filter and masks; tags are today's; credentials are for the
  storage the asset has today (none for one dropped since, whose folder may be someone else's now).
- Clones (of a schema and of a catalog, now and as of a version): BROWSE is not enough, a table is
  cloned only with SELECT on it; a governed table only by who administers it (who could lift its
  governance anyway), and it keeps today's filter, masks and tags; an ABAC policy that would not
  follow the clone refuses that table; a clone never names what the caller may not see, and never
  references a file outside its source's storage (a Delta log naming `../x` or an absolute path
  elsewhere is a clean skip, not a 500).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from governance_users import grant, unique, user

from test_enforcement_matrix import function, ok
from test_versions import _write

COLUMNS = [{"name": "region", "type_name": "STRING", "position": 0},
           {"name": "email", "type_name": "STRING", "position": 1},
           {"name": "ssn", "type_name": "STRING", "position": 2}]


async def _version(server, ws) -> int:
    return await server.store.metastore_version(ws.metastore_id)


async def _timestamp(server, ws, version: int) -> int:
    return await server.store.pool.fetchval("SELECT at FROM change_log WHERE metastore_id = $1 AND version = $2",
                                            uuid.UUID(ws.metastore_id), version)


async def _catalog(ws, name: str | None = None) -> str:
    c = name or unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    for f in ("only_eu", "redact"):
        await ok(ws, "POST", "/functions", json=function(c, f))
    return c


async def _table(ws, c: str, name: str, **extra) -> dict:
    return await ok(ws, "POST", "/tables", json={"name": name, "catalog_name": c, "schema_name": "s",
                                                 "table_type": "MANAGED", "data_source_format": "DELTA",
                                                 "columns": COLUMNS, **extra})


def _row_filter(c: str) -> dict:
    return {"function_name": f"{c}.s.only_eu", "input_column_names": ["region"]}


def _mask(c: str) -> dict:
    return {"function_name": f"{c}.s.redact", "using_column_names": ["region"]}


def _masked_columns(c: str) -> list[dict]:
    return [{**col, "mask": _mask(c)} if col["name"] == "ssn" else col for col in COLUMNS]


async def _tag(ws, entity_type: str, name: str, key: str, value: str | None = None) -> None:
    body = {"entity_type": entity_type, "entity_name": name, "tag_key": key}
    if value is not None:
        body["tag_value"] = value
    await ok(ws, "POST", "/entity-tag-assignments", json=body)


async def _abac_filter(ws, c: str) -> None:
    """A row filter on every table of catalog c tagged `restricted`, for everyone."""
    await ok(ws, "POST", "/policies", json={
        "name": "restricted_rows", "on_securable_type": "CATALOG", "on_securable_fullname": c,
        "policy_type": "POLICY_TYPE_ROW_FILTER", "for_securable_type": "TABLE", "to_principals": ["account users"],
        "when_condition": "hasTag('restricted')", "row_filter": {"function_name": f"{c}.s.only_eu"}})


# ---- item 3: time travel is governed by today's rules ----------------------------------------------------------


async def test_a_read_at_a_version_applies_todays_filters_masks_tags_and_abac(server, ws):
    c = await _catalog(ws)
    await _abac_filter(ws, c)                   # applies to nothing yet: no table is tagged
    people = await _table(ws, c, "people")
    tagged = await _table(ws, c, "tagged")
    await ok(ws, "POST", "/tables", json={"name": "v", "catalog_name": c, "schema_name": "s", "table_type": "VIEW",
                                          "columns": COLUMNS, "view_definition": f"SELECT * FROM {c}.s.people"})
    engine = await user(server, ws, trusted=True)
    untrusted = await user(server, ws)
    for u in (engine, untrusted):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA", "SELECT", "MODIFY")
    v0 = await _version(server, ws)
    ts0 = await _timestamp(server, ws, v0)
    # governed since v0: a row filter and a mask by the owner, a tag that an ABAC policy matches
    await ok(ws, "PATCH", f"/tables/{c}.s.people", json={"row_filter": _row_filter(c), "columns": _masked_columns(c)})
    await _tag(ws, "tables", f"{c}.s.tagged", "restricted")
    await _tag(ws, "columns", f"{c}.s.people.email", "pii", "email")

    for when in ({"as_of_version": str(v0)}, {"as_of_timestamp": str(ts0)}):
        names = {f"{c}.s.people": people["storage_location"], f"{c}.s.tagged": tagged["storage_location"]}
        for name, location in names.items():
            for item in ({"name": name}, {"path": location}, {"path": location + "/part-0.parquet"}):
                for operation in ("READ", "WRITE"):
                    asked = {"items": [{**item, "operation": operation}]}
                    # untrusted: refused the data, no credentials, no table details
                    got = (await ok(untrusted, "POST", "/resolve", params=when, json=asked))["items"][0]
                    assert got["authorization"]["allowed"] is False, (when, item, got)
                    assert "row filter" in got["authorization"]["reason"]
                    assert "temporary_credentials" not in got and "table" not in got, got
                    # trusted: today's filter in the answer
                    got = (await ok(engine, "POST", "/resolve", params=when, json=asked))["items"][0]
                    assert got["authorization"]["allowed"] is True, got
                    assert got["table"]["row_filter"]["function_name"] == f"{c}.s.only_eu", (when, item, got)
            # getTable and listTables at the version: the trusted engine gets today's filter
            seen = await ok(engine, "GET", f"/tables/{name}", params=when)
            assert seen["row_filter"]["function_name"] == f"{c}.s.only_eu", (when, name, seen)
            listed = await ok(engine, "GET", "/tables", params={"catalog_name": c, "schema_name": "s", **when})
            by_name = {t["full_name"]: t for t in listed["tables"]}
            assert by_name[name]["row_filter"]["function_name"] == f"{c}.s.only_eu", (when, name)
        # the mask and the tags are today's too
        seen = await ok(engine, "GET", f"/tables/{c}.s.people", params=when)
        assert [col.get("mask") for col in seen["columns"]] == [None, None, _mask(c)], seen["columns"]
        assert seen["columns"][1]["tags"] == {"pii": "email"}
        assert "restricted" in (await ok(untrusted, "GET", f"/tables/{c}.s.tagged", params=when))["tags"]
        assert (await ok(engine, "GET", f"/tables/{c}.s.tagged", params=when))["effective_policies"] == \
            ["restricted_rows"]
        found = await ok(ws, "GET", "/shardcat/search", params={"query": "tagged", "securable_types": "TABLE", **when})
        assert [r.get("tags") for r in found["results"] if r["full_name"] == f"{c}.s.tagged"] == \
            [(await ok(ws, "GET", f"/tables/{c}.s.tagged"))["tags"]]
        # a view's dependency at the version: the filtered table is refused to the untrusted engine
        got = (await ok(untrusted, "POST", "/resolve", params=when, json={"items": [{"name": f"{c}.s.v"}]}))["items"][0]
        dep = {d["name"]: d for d in got["dependencies"]}[f"{c}.s.people"]
        assert dep["authorization"]["allowed"] is False and "temporary_credentials" not in dep, dep
        got = (await ok(engine, "POST", "/resolve", params=when, json={"items": [{"name": f"{c}.s.v"}]}))["items"][0]
        dep = {d["name"]: d for d in got["dependencies"]}[f"{c}.s.people"]
        assert dep["table"]["row_filter"]["function_name"] == f"{c}.s.only_eu", dep
    # the present is as it always was
    got = (await ok(untrusted, "POST", "/resolve", json={"items": [{"name": f"{c}.s.tagged"}]}))["items"][0]
    assert got["authorization"]["allowed"] is False


async def test_a_governance_lifted_since_is_lifted_at_every_version(server, ws):
    """Today's governance both ways: a filter removed since does not come back at an old version."""
    c = await _catalog(ws)
    await _table(ws, c, "people", row_filter=_row_filter(c))
    untrusted = await user(server, ws)
    await grant(ws, "catalog", c, untrusted.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    v0 = await _version(server, ws)
    await ok(ws, "PATCH", f"/tables/{c}.s.people", json={"row_filter": {}})
    got = (await ok(untrusted, "POST", "/resolve", params={"as_of_version": str(v0)},
                    json={"items": [{"name": f"{c}.s.people"}]}))["items"][0]
    assert got["authorization"]["allowed"] is True and "temporary_credentials" in got, got


async def test_credentials_at_a_version_are_for_todays_storage_only(server, ws, tmp_path):
    """A table dropped since has no storage today: its old owner gets no credential for the folder,
    which another table (of someone else) now owns."""
    c = await _catalog(ws)
    folder = (tmp_path / "shared").as_uri()
    mallory = await user(server, ws)
    await grant(ws, "catalog", c, mallory.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    await ok(mallory, "POST", "/tables", json={
        "name": "mine", "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "DELTA",
        "columns": COLUMNS, "storage_location": folder})
    v0 = await _version(server, ws)
    await ok(mallory, "DELETE", f"/tables/{c}.s.mine")
    await ok(ws, "POST", "/tables", json={
        "name": "payroll", "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLUMNS, "storage_location": folder})
    for operation in ("READ", "WRITE"):
        for item in ({"name": f"{c}.s.mine"}, {"path": folder}):
            got = (await ok(mallory, "POST", "/resolve", params={"as_of_version": str(v0)},
                            json={"items": [{**item, "operation": operation}]}))["items"][0]
            assert "temporary_credentials" not in got, (item, got)
    # the credentials endpoints are not answered at a version at all
    status, _ = await mallory.call("POST", "/temporary-path-credentials", params={"as_of_version": str(v0)},
                                   json={"url": folder, "operation": "PATH_READ"})
    assert status in (400, 403, 404)


# ---- item 4: clones keep governance ------------------------------------------------------------------------------


def _clone_logs(root: str) -> list[dict]:
    """Every add action of every Delta log under a storage root."""
    adds = []
    for folder, _, names in os.walk(root.removeprefix("file://")):
        if folder.endswith("_delta_log"):
            for n in names:
                if n.endswith(".json"):
                    for line in Path(folder, n).read_text().splitlines():
                        if line.strip() and "add" in json.loads(line):
                            adds.append(json.loads(line)["add"])
    return adds


async def _governed_schema(server, ws) -> tuple[str, dict]:
    """Catalog c, schema s: `filtered` (row filter), `masked` (a column mask), `tagged` (an ABAC row
    filter by tag), `plain`; each with data."""
    c = await _catalog(ws)
    await _abac_filter(ws, c)
    made = {"filtered": await _table(ws, c, "filtered", row_filter=_row_filter(c)),
            "masked": await _table(ws, c, "masked", columns=_masked_columns(c)),
            "tagged": await _table(ws, c, "tagged"),
            "plain": await _table(ws, c, "plain")}
    await _tag(ws, "tables", f"{c}.s.tagged", "restricted")
    for t in made.values():
        _write(t["storage_location"], [1, 2, 3])
    return c, made


async def test_browse_is_not_enough_to_clone(server, ws):
    c, made = await _governed_schema(server, ws)
    await ok(ws, "POST", "/catalogs", json={"name": "sandbox"})
    browser = await user(server, ws)
    await grant(ws, "catalog", c, browser.name, "USE CATALOG")
    await grant(ws, "schema", f"{c}.s", browser.name, "USE SCHEMA", "BROWSE")
    await grant(ws, "catalog", "sandbox", browser.name, "USE CATALOG", "CREATE SCHEMA")
    await grant(ws, "metastore", ws.metastore_id, browser.name, "CREATE CATALOG")
    v = await _version(server, ws)
    for i, body in enumerate(({"securable_type": "SCHEMA", "source": f"{c}.s", "name": "sandbox.s1"},
                              {"securable_type": "SCHEMA", "source": f"{c}.s", "name": "sandbox.s2",
                               "as_of_version": v},
                              {"securable_type": "CATALOG", "source": c, "name": unique("copy")})):
        out = await ok(browser, "POST", "/shardcat/clones", json=body)
        assert out["shallow_clones"] == 0, out
        skipped = {s["full_name"]: s["reason"] for s in out["skipped"]}
        for name in made:
            assert "SELECT" in skipped[f"{c}.s.{name}"], out
        target = body["name"] if body["securable_type"] == "SCHEMA" else body["name"] + ".s"
        catalog, schema = target.split(".")
        listed = await ok(browser, "GET", "/tables", params={"catalog_name": catalog, "schema_name": schema})
        assert listed["tables"] == [], (body, listed)
    # no shallow clone's log on disk: the sources' own logs name their files relatively, a clone's by URL
    assert [a["path"] for a in _clone_logs(ws.storage_root) if "://" in a["path"]] == []


async def test_a_governed_table_is_cloned_only_by_who_administers_it_and_keeps_todays_governance(server, ws):
    c, made = await _governed_schema(server, ws)
    late = await _table(ws, c, "late")
    _write(late["storage_location"], [7])
    v0 = await _version(server, ws)
    ts0 = await _timestamp(server, ws, v0)
    snapshot = (await ok(ws, "POST", "/shardcat/snapshots", json={
        "name": unique("before"), "securable_type": "SCHEMA", "full_name": f"{c}.s"}))["name"]
    await ok(ws, "PATCH", f"/tables/{c}.s.late", json={"row_filter": _row_filter(c)})      # added after v0
    await ok(ws, "POST", "/catalogs", json={"name": "sandbox"})
    reader = await user(server, ws)       # SELECT, nothing to administer
    steward = await user(server, ws)      # SELECT and MANAGE
    engine = await user(server, ws, trusted=True)
    await grant(ws, "catalog", c, reader.name, "USE CATALOG", "USE SCHEMA", "SELECT", "CREATE SCHEMA")
    await grant(ws, "catalog", c, steward.name, "USE CATALOG", "USE SCHEMA", "SELECT", "MANAGE", "CREATE SCHEMA")
    await grant(ws, "catalog", c, engine.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    for u in (reader, steward):
        await grant(ws, "catalog", "sandbox", u.name, "USE CATALOG", "CREATE SCHEMA")
    governed = {"filtered", "masked", "tagged", "late"}

    # the reader: only the plain table is cloned, now and as of v0 (when `late` was not filtered yet)
    for n, when in enumerate(({}, {"as_of_version": v0}, {"as_of_timestamp": ts0}, {"snapshot": snapshot})):
        for target in (f"sandbox.r{n}", f"{c}.r{n}"):
            out = await ok(reader, "POST", "/shardcat/clones", json={
                "securable_type": "SCHEMA", "source": f"{c}.s", "name": target, **when})
            skipped = {s["full_name"].split(".")[-1] for s in out["skipped"]}
            assert skipped == governed and out["shallow_clones"] == 1, out
            listed = await ok(reader, "GET", "/tables", params={"catalog_name": target.split(".")[0],
                                                                "schema_name": target.split(".")[1]})
            assert [t["name"] for t in listed["tables"]] == ["plain"]

    # the steward, into the source's own catalog (the catalog's ABAC policy follows): every table,
    # each with today's governance, even as of v0
    out = await ok(steward, "POST", "/shardcat/clones", json={
        "securable_type": "SCHEMA", "source": f"{c}.s", "name": f"{c}.copy", "as_of_version": v0})
    assert out["skipped"] == [] and out["shallow_clones"] == 5, out
    seen = await ok(engine, "GET", f"/tables/{c}.copy.late")
    assert seen["row_filter"]["function_name"] == f"{c}.s.only_eu", seen
    assert (await ok(engine, "GET", f"/tables/{c}.copy.filtered"))["row_filter"] == _row_filter(c)
    assert (await ok(engine, "GET", f"/tables/{c}.copy.masked"))["columns"][2]["mask"] == _mask(c)
    tagged = await ok(engine, "GET", f"/tables/{c}.copy.tagged")
    assert tagged["effective_policies"] == ["restricted_rows"] and "restricted" in tagged["tags"]
    untrusted = await user(server, ws)
    await grant(ws, "catalog", c, untrusted.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    for name in governed:
        got = (await ok(untrusted, "POST", "/resolve", json={"items": [{"name": f"{c}.copy.{name}"}]}))["items"][0]
        assert got["authorization"]["allowed"] is False and "temporary_credentials" not in got, (name, got)

    # into another catalog the ABAC policy would not follow: that table is refused, the rest cloned
    out = await ok(steward, "POST", "/shardcat/clones", json={
        "securable_type": "SCHEMA", "source": f"{c}.s", "name": "sandbox.copy"})
    assert [(s["full_name"], "ABAC" in s["reason"]) for s in out["skipped"]] == [(f"{c}.s.tagged", True)], out
    assert out["shallow_clones"] == 4
    status, _ = await ws.call("GET", "/tables/sandbox.copy.tagged")
    assert status == 404


# ---- item 14: a clone names nothing the caller may not see --------------------------------------------------------


async def test_a_clones_skipped_list_names_only_what_the_caller_sees(server, ws, tmp_path):
    c = await _catalog(ws)
    plain = await _table(ws, c, "plain")
    _write(plain["storage_location"], [1])
    await ok(ws, "POST", "/models", json={"name": "secret_model", "catalog_name": c, "schema_name": "s"})
    await ok(ws, "POST", "/volumes", json={"name": "secret_volume", "catalog_name": c, "schema_name": "s",
                                           "volume_type": "EXTERNAL", "storage_location": (tmp_path / "v").as_uri()})
    await ok(ws, "POST", "/tables", json={
        "name": "secret_parquet", "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLUMNS, "storage_location": (tmp_path / "pq").as_uri()})
    await ok(ws, "POST", "/catalogs", json={"name": "sandbox"})
    dev = await user(server, ws)
    await grant(ws, "catalog", c, dev.name, "USE CATALOG")
    await grant(ws, "schema", f"{c}.s", dev.name, "USE SCHEMA")
    await grant(ws, "table", f"{c}.s.plain", dev.name, "SELECT")
    await grant(ws, "catalog", "sandbox", dev.name, "USE CATALOG", "CREATE SCHEMA")
    await grant(ws, "metastore", ws.metastore_id, dev.name, "CREATE CATALOG")
    bodies = [{"securable_type": "SCHEMA", "source": f"{c}.s", "name": "sandbox.a"},
              {"securable_type": "SCHEMA", "source": f"{c}.s", "name": "sandbox.b",
               "as_of_version": await _version(server, ws)},
              {"securable_type": "CATALOG", "source": c, "name": unique("copy")}]
    for body in bodies:
        out = await ok(dev, "POST", "/shardcat/clones", json=body)
        assert out["skipped"] == [] and out["shallow_clones"] == 1, out
    # once dev may see the parquet table (BROWSE), it may be named, with why it was left out
    await grant(ws, "table", f"{c}.s.secret_parquet", dev.name, "BROWSE")
    out = await ok(dev, "POST", "/shardcat/clones", json={"securable_type": "SCHEMA", "source": f"{c}.s",
                                                           "name": "sandbox.c"})
    assert [s["full_name"] for s in out["skipped"]] == [f"{c}.s.secret_parquet"], out


# ---- item 18a: a Delta log naming files outside its table ---------------------------------------------------------


def _raw_log(folder: Path, paths: list[str]) -> None:
    """A Delta log at `folder` whose one commit adds `paths`, as written (a hostile writer's)."""
    log = folder / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {},
                             "createdTime": 0}}]
    actions += [{"add": {"path": p, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}
                for p in paths]
    (log / "00000000000000000000.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


async def test_a_log_naming_files_outside_its_table_is_not_cloned(server, ws, tmp_path):
    c = await _catalog(ws)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "data.parquet").write_bytes(b"PAR1 secret rows")
    (tmp_path / "outside.parquet").write_bytes(b"PAR1 outside")
    logs = {"dotdot": ["ok.parquet", "../outside.parquet"],
            "deep_dotdot": ["a/../../outside.parquet"],
            "absolute": [(secret / "data.parquet").as_uri()],
            "absolute_plain": [str(secret / "data.parquet")],
            "good": ["part-0.parquet"]}
    for name, paths in logs.items():
        folder = tmp_path / "tables" / name
        _raw_log(folder, paths)
        await ok(ws, "POST", "/tables", json={
            "name": name, "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL",
            "data_source_format": "DELTA", "columns": COLUMNS, "storage_location": folder.as_uri()})
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for body in ({"securable_type": "CATALOG", "source": c, "name": unique("copy")},
                 {"securable_type": "SCHEMA", "source": f"{c}.s", "name": f"{c}.copy"}):
        status, out = await ws.call("POST", "/shardcat/clones", json=body)
        assert status == 200, out
        skipped = {s["full_name"].split(".")[-1]: s["reason"] for s in out["skipped"]}
        assert set(skipped) == {"dotdot", "deep_dotdot", "absolute", "absolute_plain"}, out
        assert all("outside" in why for why in skipped.values()), skipped
        assert out["shallow_clones"] == 1
    # a clone of a clone references its source's source: inside what the clone clones, so it is cloned
    out = await ok(ws, "POST", "/shardcat/clones", json={"securable_type": "SCHEMA", "source": f"{c}.copy",
                                                          "name": f"{c}.copy_of_copy"})
    assert out["shallow_clones"] == 1 and out["skipped"] == [], out
    good = (tmp_path / "tables" / "good").as_uri()
    adds = _clone_logs(ws.storage_root)
    assert len(adds) == 3 and all(add["path"] == good + "/part-0.parquet" for add in adds), adds
    assert {p: p.read_bytes() for p in before} == before


async def _source_and_clone_log(ws):
    """A Delta table c.s.t with one data file and a shallow clone of its schema, c.dev: (c, the
    source table, the clone's _delta_log folder, which its owner may write)."""
    c = await _catalog(ws)
    source = await _table(ws, c, "t")
    _write(source["storage_location"], [1])
    await ok(ws, "POST", "/shardcat/clones", json={"securable_type": "SCHEMA", "source": f"{c}.s", "name": f"{c}.dev"})
    clone = await ok(ws, "GET", f"/tables/{c}.dev.t")
    return c, source, Path(clone["storage_location"].removeprefix("file://"), "_delta_log")


async def test_a_clones_hostile_log_does_not_break_its_sources_vacuum(server, ws):
    """A clone's owner may write its clone's log; a path there that no join can resolve (`../x`)
    leaves the source's vacuum, which reads what clones reference, a clean answer, not a 500."""
    c, source, log = await _source_and_clone_log(ws)
    hostile = {"add": {"path": "../../x.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0,
                       "dataChange": True}}
    (log / "00000000000000000001.json").write_text(json.dumps(hostile) + "\n")
    status, out = await ws.call("POST", "/shardcat/vacuum", json={"table": f"{c}.s.t", "retention_hours": 0})
    assert status == 200, out
    assert out["deleted"] == [], out


async def test_a_clones_unreadable_log_stops_its_sources_vacuum_cleanly(server, ws):
    """A clone whose log cannot be read (its owner wrote garbage there) leaves the source's files
    unknown to be kept: the source's vacuum deletes nothing and says why (400, not a 500)."""
    c, source, log = await _source_and_clone_log(ws)
    files = {p: p.read_bytes() for p in Path(source["storage_location"].removeprefix("file://")).rglob("*") if p.is_file()}
    for garbage in ("{not json\n", '{"add": 7}\n', '["add"]\n'):
        (log / "00000000000000000001.json").write_text(garbage)
        for dry_run in (True, False):
            status, out = await ws.call("POST", "/shardcat/vacuum", json={"table": f"{c}.s.t", "retention_hours": 0,
                                                                          "dry_run": dry_run})
            assert status == 400 and out["error_code"] == "FAILED_PRECONDITION", out
            assert "clone" in out["message"], out
    assert {p: p.read_bytes() for p in files} == files
