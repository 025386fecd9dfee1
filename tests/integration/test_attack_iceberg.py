"""Attacks on the Iceberg REST catalog (issue 42, items 8, 10 and 15), tried as a low-rights user would.

- Moving metadata anywhere (8): every operation that sets where the catalog writes metadata (a view's
  `set-location`, a table commit's `set-location` or `write.metadata.path`, create and stage-create,
  register, the Unity Catalog API's storage_location) is checked as a create at that location is:
  inside storage the caller may write, one asset per path, never relative. Real folders show that no
  file appears where the caller may not write, and nothing outside what it owns changes.
- Existence (10): a table, view or namespace the caller may not see answers exactly as a missing one,
  on every Iceberg endpoint that names it, by several spellings; "not an Iceberg table" is said only
  to who may see the asset.
- Reading any file (15): `register` reads only where the caller may read; outside, every file
  (metadata, text, missing, a directory) gets the same refusal; inside, a bad file is a 400 that
  quotes none of its bytes, and the bytes never reach the server log.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import uuid
from pathlib import Path
from urllib.parse import urlparse

from governance_users import grant, unique, user
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

ICE = "/iceberg/v1"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
DELTA = {"table_type": "MANAGED", "data_source_format": "DELTA", "columns": [
    {"name": "a", "type_name": "INT", "type_text": "int", "type_json": '{"type":"integer"}', "position": 0}]}
MARKER = "TOPSECRET-" + uuid.uuid4().hex        # in every file the attacker should not learn anything of


async def ok(ws, method, path, **kw):
    status, body = await ws.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


def view_body(name: str, **extra) -> dict:
    return {"name": name, "schema": SCHEMA, "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
        "default-namespace": ["s"]}, **extra}


def files_under(*roots: Path) -> dict[str, bytes]:
    """Every file below `roots`, with its bytes (a directory as a marker)."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for d in dirnames:
                out[os.path.join(dirpath, d)] = b"<dir>"
            for f in filenames:
                path = os.path.join(dirpath, f)
                out[path] = Path(path).read_bytes()
    return out


def write_file(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def metadata_file(path: Path, location: str) -> Path:
    """A valid Iceberg metadata file at `path` for a table at `location`, with MARKER in a property."""
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location,
                                  properties={"secret": MARKER})
    return write_file(path, metadata.model_dump_json())


async def governed(ws, tmp_path: Path) -> dict:
    """Catalog `ice`, schema `s`, an external location over tmp_path/ext (file://), and folders outside it."""
    await ok(ws, "POST", "/catalogs", json={"name": "ice"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "ice"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "cred", "aws_iam_role": {"role_arn": "arn:x"}})
    ext = tmp_path / "ext"
    ext.mkdir()
    await ok(ws, "POST", "/external-locations", json={"name": "ext", "url": ext.as_uri(), "credential_name": "cred"})
    outside = tmp_path / "outside"
    write_file(outside / "keep.txt", MARKER)
    return {"ext": ext, "outside": outside}


# ---- 8: a location is checked as a create there is -----------------------------------------------------

P = f"{ICE}/catalogs/ice"


def elsewhere_spellings(outside: Path, ext: Path) -> list[str]:
    """Spellings of folders outside every external location."""
    o = str(outside)
    return [outside.as_uri() + "/v", f"file:{o}/v", f"{o}/v", f"file://localhost{o}/v", f"FILE://{o}/v",
            f"{ext.as_uri()}/../outside/v", f"{outside.as_uri()}/v/", f"file:///{o.lstrip('/')}//v",
            "s3://bucket/elsewhere/v"]


REL = "rel-" + uuid.uuid4().hex          # a folder name that must never appear in the server's working directory
RELATIVE = [REL, f"./{REL}", f"{REL}/../{REL}", f"{REL}/x", "~/x", f"file:{REL}", f"file:./{REL}"]


def nothing_in_the_working_directory() -> bool:
    return not os.path.exists(REL) and not os.path.exists("~")


async def test_a_views_set_location_is_checked_as_creating_it_there_is(ws, server, tmp_path):
    world = await governed(ws, tmp_path)
    ext, outside = world["ext"], world["outside"]
    owner = await user(server, ws)
    await grant(ws, "catalog", "ice", owner.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    created = await ok(owner, "POST", f"{P}/namespaces/s/views", json=view_body("v"))
    other = await ok(ws, "POST", f"{P}/namespaces/s/tables",
                     json={"name": "other", "schema": SCHEMA, "location": (ext / "other").as_uri()})
    uuid_ = created["metadata"]["view-uuid"]

    def move(location):
        return {"requirements": [{"type": "assert-view-uuid", "uuid": uuid_}],
                "updates": [{"action": "set-location", "location": location}]}

    before = files_under(tmp_path)
    targets = [*elsewhere_spellings(outside, ext), *RELATIVE,
               other["metadata"]["location"], other["metadata"]["location"] + "/sub",      # another table's storage
               ws.storage_root + "/x",                                                      # managed storage
               (ext / "mine").as_uri()]                 # inside the location, but no CREATE EXTERNAL TABLE there
    for target in targets:
        status, body = await owner.call("POST", f"{P}/namespaces/s/views/v", json=move(target))
        assert status in (400, 403), (target, status, body)
        assert body["error"]["type"] in ("BadRequestException", "ForbiddenException"), (target, body)
        # Nor as one of several updates, after a harmless one.
        status, body = await owner.call("POST", f"{P}/namespaces/s/views/v", json={
            "updates": [{"action": "set-properties", "updates": {"a": "b"}},
                        {"action": "set-location", "location": target}]})
        assert status in (400, 403), (target, status, body)
    assert nothing_in_the_working_directory()
    assert files_under(tmp_path) == before                    # not one file written, changed or removed
    loaded = await ok(owner, "GET", f"{P}/namespaces/s/views/v")
    assert loaded["metadata-location"] == created["metadata-location"]
    # Creating a view at a relative location is refused too (it always was).
    status, body = await owner.call("POST", f"{P}/namespaces/s/views", json=view_body("w", location=RELATIVE[0]))
    assert status == 400, body

    # With CREATE EXTERNAL TABLE on the location, the view moves there, as a view could be created there.
    await grant(ws, "external_location", "ext", owner.name, "CREATE EXTERNAL TABLE")
    status, body = await owner.call("POST", f"{P}/namespaces/s/views/v", json=move(f"{ext.as_uri()}/a/../mine/"))
    assert status == 200, body
    assert body["metadata"]["location"] == (ext / "mine").as_uri()          # kept in its one canonical spelling
    assert body["metadata-location"].startswith((ext / "mine" / "metadata").as_uri() + "/")
    assert os.path.exists(urlparse(body["metadata-location"]).path)
    # ...and only there: a view cannot be moved beside another table even with the privilege.
    status, body = await owner.call("POST", f"{P}/namespaces/s/views/v", json=move(other["metadata"]["location"]))
    assert status == 400 and "overlaps" in body["error"]["message"], body


def set_properties(**props) -> dict:
    return {"action": "set-properties", "updates": props}


async def test_no_table_operation_writes_metadata_outside_the_tables_own_storage(ws, server, tmp_path):
    """A table's metadata files are written inside its own location only: a commit's `set-location` and
    `write.metadata.path` (pyiceberg's location provider writes there), create, stage-create and its
    commit, multi-table transactions, and the Unity Catalog API's storage_location."""
    world = await governed(ws, tmp_path)
    ext, outside = world["ext"], world["outside"]
    writer = await user(server, ws)
    await grant(ws, "catalog", "ice", writer.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE", "SELECT", "MODIFY")
    await grant(ws, "external_location", "ext", writer.name, "CREATE EXTERNAL TABLE")
    mine = await ok(writer, "POST", f"{P}/namespaces/s/tables",
                    json={"name": "mine", "schema": SCHEMA, "location": (ext / "mine").as_uri()})
    managed = await ok(writer, "POST", f"{P}/namespaces/s/tables", json={"name": "managed", "schema": SCHEMA})
    before = files_under(tmp_path)
    forbidden = [*elsewhere_spellings(outside, ext), *RELATIVE, ws.storage_root + "/x"]     # no table may be there
    targets = [*forbidden, (ext / "elsewhere").as_uri()]        # nor may a table's metadata move there
    for target in targets:
        for name, created in (("mine", mine), ("managed", managed)):
            for updates in ([{"action": "set-location", "location": target}],
                            [set_properties(**{"write.metadata.path": target})],
                            [set_properties(**{"write.metadata.path": target + "/"})]):
                status, body = await writer.call("POST", f"{P}/namespaces/s/tables/{name}", json={
                    "requirements": [{"type": "assert-table-uuid", "uuid": created["metadata"]["table-uuid"]}],
                    "updates": updates})
                assert status == 400 and body["error"]["type"] == "BadRequestException", (name, updates, body)
                status, body = await writer.call("POST", f"{P}/transactions/commit", json={"table-changes": [
                    {"identifier": {"namespace": ["s"], "name": name}, "requirements": [], "updates": updates}]})
                assert status == 400, (name, updates, body)
        status, body = await writer.call("POST", f"{P}/namespaces/s/tables", json={
            "name": "n", "schema": SCHEMA, "properties": {"write.metadata.path": target}})
        assert status == 400, (target, body)
        status, body = await writer.call("POST", f"{P}/namespaces/s/tables", json={
            "name": "n", "schema": SCHEMA, "location": (ext / "n").as_uri(),
            "properties": {"write.metadata.path": target}})
        assert status == 400, (target, body)
    for target in forbidden:
        for extra in ({}, {"stage-create": True}):
            status, body = await writer.call("POST", f"{P}/namespaces/s/tables", json={
                "name": "n", "schema": SCHEMA, "location": target, **extra})
            assert status in (400, 403), (target, body)
        status, body = await writer.call("POST", "/tables", json={
            "name": "n", "catalog_name": "ice", "schema_name": "s", "table_type": "EXTERNAL",
            "data_source_format": "DELTA", "columns": [], "storage_location": target})
        assert status in (400, 403), (target, body)
    # A create transaction's commit: the table's location and its metadata path, as a create's.
    staged = await ok(writer, "POST", f"{P}/namespaces/s/tables", json={"name": "staged", "schema": SCHEMA,
                                                                         "stage-create": True})
    base = [{"action": "assign-uuid", "uuid": staged["metadata"]["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": SCHEMA}, {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}}, {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1}]
    for target in [outside.as_uri(), RELATIVE[0], f"{outside}/t"]:
        for extra in ([{"action": "set-location", "location": target}],
                      [{"action": "set-location", "location": staged["metadata"]["location"]},
                       set_properties(**{"write.metadata.path": target})]):
            status, body = await writer.call("POST", f"{P}/namespaces/s/tables/staged", json={
                "requirements": [{"type": "assert-create"}], "updates": base + extra})
            assert status in (400, 403), (target, extra, body)
    status, body = await writer.call("POST", f"{P}/namespaces/s/tables/staged", json={
        "requirements": [{"type": "assert-create"}],
        "updates": base + [{"action": "set-location", "location": staged["metadata"]["location"]}]})
    assert status == 200, body                  # the same commit, where the table was staged: created
    # The Unity Catalog API moves an external table only into storage the caller may write.
    uc = await ok(writer, "POST", "/tables", json={"name": "uc", "catalog_name": "ice", "schema_name": "s",
                                                   "table_type": "EXTERNAL", "data_source_format": "DELTA",
                                                   "columns": [], "storage_location": (ext / "uc").as_uri()})
    for target in forbidden:
        status, body = await writer.call("PATCH", "/tables/ice.s.uc", json={"storage_location": target})
        assert status in (400, 403), (target, body)
    assert (await ok(writer, "GET", "/tables/ice.s.uc"))["storage_location"] == uc["storage_location"]
    after = files_under(tmp_path)
    assert {k: v for k, v in after.items() if k not in before and "/staged" not in k and
            not k.startswith(str(tmp_path / "storage"))} == {}
    assert {k: after.get(k) for k in before} == before      # nothing written, changed or removed
    assert nothing_in_the_working_directory()
    # The sanctioned spellings still work: a metadata path inside the table's own storage.
    status, body = await writer.call("POST", f"{P}/namespaces/s/tables/mine", json={
        "updates": [set_properties(**{"write.metadata.path": (ext / "mine" / "meta2").as_uri()})]})
    assert status == 200, body
    assert body["metadata-location"].startswith((ext / "mine" / "meta2").as_uri() + "/")


# ---- 15: register reads only where the caller may read ---------------------------------------------------


def register(name: str, location: str) -> dict:
    return {"name": name, "metadata-location": location}


def shown(status: int, body, *names: str) -> tuple[int, object]:
    """The answer with each varying name replaced, whatever its case."""
    text = json.dumps(body)
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(re.escape(name), "<name>", text, flags=re.IGNORECASE)
    return status, json.loads(text)


def bad_files(folder: Path) -> dict[str, str]:
    """Files (and non-files) that are not metadata, each holding MARKER: name -> URL."""
    write_file(folder / "notes.txt", f"password={MARKER}\n")
    write_file(folder / "meta.json", json.dumps({"secret": MARKER, "format-version": 2}))
    write_file(folder / "list.metadata.json", json.dumps([MARKER]))
    write_file(folder / "binary.metadata.json", b"\xff\xfe" + MARKER.encode() + b"\x00\x80")
    write_file(folder / "deep.metadata.json", "[" * 100_000 + f'"{MARKER}"' + "]" * 100_000)
    write_file(folder / "fake.gz.metadata.json", MARKER)                       # named gzip, is not
    write_file(folder / "real.gz.metadata.json", gzip.compress(json.dumps({"x": MARKER}).encode()))
    write_file(folder / "version.metadata.json", json.dumps({"format-version": MARKER}))
    (folder / "dir.metadata.json").mkdir(parents=True, exist_ok=True)
    return {p.name: p.as_uri() for p in sorted(folder.iterdir())}


async def test_register_outside_readable_storage_answers_the_same_for_every_file(ws, server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    world = await governed(ws, tmp_path)
    ext, outside = world["ext"], world["outside"]
    maker = await user(server, ws)
    await grant(ws, "catalog", "ice", maker.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    await grant(ws, "external_location", "ext", maker.name, "CREATE EXTERNAL TABLE", "READ FILES")
    hidden_name = unique("tbl")                 # the admin's table, in a folder named otherwise
    await ok(ws, "POST", f"{P}/namespaces/s/tables",
             json={"name": hidden_name, "schema": SCHEMA, "location": (ext / "hidden").as_uri()})
    files = bad_files(outside / "bad")
    files["valid"] = metadata_file(outside / "t" / "metadata" / "00000-a.metadata.json",
                                   (outside / "t").as_uri()).as_uri()
    files["missing"] = (outside / "nothing" / "00000-a.metadata.json").as_uri()
    files["keep"] = (outside / "keep.txt").as_uri()
    files["folder"] = outside.as_uri()
    hidden = {"file": metadata_file(ext / "hidden" / "metadata" / "00001-b.metadata.json", (ext / "hidden").as_uri()),
              "missing": ext / "hidden" / "metadata" / "09999-c.metadata.json",
              "the table's own": next((ext / "hidden" / "metadata").glob("00000-*"))}
    before = files_under(tmp_path)
    # Outside every external location: one answer, whatever is (or is not) there.
    answers = {}
    for what, url in files.items():
        status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("r", url))
        answers[what] = shown(status, body, url)
    assert len(set(json.dumps(a) for a in answers.values())) == 1, answers
    status, body = next(iter(answers.values()))
    assert status in (400, 403), body
    # Inside another table's storage, which the caller may not even see: one answer, naming nothing.
    answers = {}
    for what, path in hidden.items():
        status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("r", path.as_uri()))
        assert status in (400, 403) and hidden_name not in json.dumps(body), (what, body)
        answers[what] = shown(status, body, path.as_uri())
    assert len(set(json.dumps(a) for a in answers.values())) == 1, answers
    assert files_under(tmp_path) == before
    assert MARKER not in caplog.text
    status, body = await maker.call("GET", f"{P}/namespaces/s/tables")
    assert body["identifiers"] == [], body


async def test_register_in_local_mode_reads_no_file_nothing_owns(ws, server, tmp_path, caplog):
    """No external location (local mode): a path no table owns is no one's to read, so register reads none."""
    caplog.set_level(logging.DEBUG)
    await ok(ws, "POST", "/catalogs", json={"name": "ice"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "ice"})
    maker = await user(server, ws)
    await grant(ws, "catalog", "ice", maker.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    secret = tmp_path / "secret"
    files = bad_files(secret / "bad")
    files["valid"] = metadata_file(secret / "t" / "metadata" / "00000-a.metadata.json",
                                   (secret / "t").as_uri()).as_uri()
    files["missing"] = (secret / "nothing" / "00000-a.metadata.json").as_uri()
    files["etc"] = "file:///etc/passwd"
    files["etc bare"] = "/etc/hostname"
    before = files_under(tmp_path)
    answers = {}
    for what, url in files.items():
        status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("r", url))
        assert MARKER not in json.dumps(body) and "root:" not in json.dumps(body), (what, body)
        answers[what] = shown(status, body, url, "file://" + urlparse(url).path if url.startswith("/") else url)
    assert len(set(json.dumps(a) for a in answers.values())) == 1, answers
    assert next(iter(answers.values()))[0] in (400, 403)
    assert files_under(tmp_path) == before
    assert MARKER not in caplog.text and "root:x" not in caplog.text


async def test_register_inside_readable_storage_a_bad_file_is_a_400_that_quotes_nothing(ws, server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    world = await governed(ws, tmp_path)
    ext = world["ext"]
    maker = await user(server, ws)
    await grant(ws, "catalog", "ice", maker.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE", "SELECT")
    files = bad_files(ext / "bad")
    # Only CREATE EXTERNAL TABLE, not READ FILES: the files are not the caller's to read.
    await grant(ws, "external_location", "ext", maker.name, "CREATE EXTERNAL TABLE")
    answers = set()
    for what, url in [*files.items(), ("missing", (ext / "bad" / "none.metadata.json").as_uri())]:
        status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("r", url))
        assert status == 403 and MARKER not in json.dumps(body), (what, body)
        answers.add(json.dumps(shown(status, body, url)))
    assert len(answers) == 1, answers

    await grant(ws, "external_location", "ext", maker.name, "READ FILES")
    for what, url in files.items():
        status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("r", url))
        assert status == 400 and body["error"]["type"] == "BadRequestException", (what, body)
        assert MARKER not in json.dumps(body), (what, body)
        assert ("is a directory" if what.startswith("dir") else "not an Iceberg table metadata file") \
            in body["error"]["message"], (what, body)
    status, body = await maker.call("POST", f"{P}/namespaces/s/register",
                                    json=register("r", (ext / "bad" / "none.metadata.json").as_uri()))
    assert status == 400 and "does not exist" in body["error"]["message"], body        # inside: it may say so
    # A valid metadata file whose table lies outside where the caller may create one: refused, nothing kept.
    valid_outside = metadata_file(ext / "v" / "metadata" / "00000-a.metadata.json", (tmp_path / "outside").as_uri())
    status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("r", valid_outside.as_uri()))
    assert status == 400 and MARKER not in json.dumps(body), body
    # A metadata file that is not its table's own (it lies outside the table's location): refused.
    foreign = metadata_file(ext / "w" / "00000-a.metadata.json", (ext / "elsewhere").as_uri())
    status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("r", foreign.as_uri()))
    assert status == 400, body
    assert MARKER not in caplog.text
    # The sanctioned case still works.
    good = metadata_file(ext / "good" / "metadata" / "00000-a.metadata.json", (ext / "good").as_uri())
    status, body = await maker.call("POST", f"{P}/namespaces/s/register", json=register("good", good.as_uri()))
    assert status == 200 and body["metadata-location"] == good.as_uri(), body


# ---- 10: an invisible table, view or namespace answers as a missing one ----------------------------------


async def existence_world(ws) -> dict:
    """Catalog c, schemas s (an Iceberg table, an Iceberg view, a Delta table) and h (an Iceberg table);
    every name unique, so it can be told from the rest of a message."""
    c = unique("cat")
    w = {"c": c, "s": unique("sch"), "h": unique("hid"), "t": unique("ice"), "v": unique("vue"), "d": unique("dlt"),
         "t2": unique("ice")}
    await ok(ws, "POST", "/catalogs", json={"name": c})
    for s in (w["s"], w["h"]):
        await ok(ws, "POST", "/schemas", json={"name": s, "catalog_name": c})
    await ok(ws, "POST", f"{ICE}/catalogs/{c}/namespaces/{w['s']}/tables", json={"name": w["t"], "schema": SCHEMA})
    await ok(ws, "POST", f"{ICE}/catalogs/{c}/namespaces/{w['h']}/tables", json={"name": w["t2"], "schema": SCHEMA})
    await ok(ws, "POST", f"{ICE}/catalogs/{c}/namespaces/{w['s']}/views", json=view_body(w["v"]))
    await ok(ws, "POST", "/tables", json={"name": w["d"], "catalog_name": c, "schema_name": w["s"], **DELTA})
    return w


SPELLINGS = ("warehouse", "upper case", "no warehouse", "no warehouse, upper")


def spellings(w: dict, schema: str) -> dict[str, tuple[str, str, list[str]]]:
    """(base, namespace in a path, namespace as a list) per way of naming schema `schema` of catalog c."""
    c = w["c"]
    return {"warehouse": (f"{ICE}/catalogs/{c}", schema, [schema]),
            "upper case": (f"/iceberg-rest/v1/catalogs/{c.upper()}", schema.upper(), [schema.upper()]),
            "no warehouse": (ICE, f"{c}\x1f{schema}", [c, schema]),
            "no warehouse, upper": (ICE, f"{c.upper()}\x1f{schema.upper()}", [c.upper(), schema.upper()])}


def set_props(x: str = "y") -> dict:
    return {"requirements": [], "updates": [{"action": "set-properties", "updates": {"x": x}}]}


# (operation, method, path suffix or full path, body); `{b}` base, `{n}` namespace, `{x}` the varying name,
# `{l}` the namespace as a JSON list.
TABLE_CASES = [
    ("loadTable", "GET", "{b}/namespaces/{n}/tables/{x}", None),
    ("tableExists", "HEAD", "{b}/namespaces/{n}/tables/{x}", None),
    ("loadCredentials", "GET", "{b}/namespaces/{n}/tables/{x}/credentials", None),
    ("reportMetrics", "POST", "{b}/namespaces/{n}/tables/{x}/metrics", {"report-type": "scan-report"}),
    ("updateTable", "POST", "{b}/namespaces/{n}/tables/{x}", set_props()),
    ("updateTable create", "POST", "{b}/namespaces/{n}/tables/{x}",
     {"requirements": [{"type": "assert-create"}], "updates": []}),
    ("dropTable", "DELETE", "{b}/namespaces/{n}/tables/{x}", None),
    ("dropTable purge", "DELETE", "{b}/namespaces/{n}/tables/{x}?purgeRequested=true", None),
    ("renameTable", "POST", "{b}/tables/rename",
     {"source": {"namespace": "{l}", "name": "{x}"}, "destination": {"namespace": "{l}", "name": "renamed"}}),
    ("commitTransaction", "POST", "{b}/transactions/commit",
     {"table-changes": [{"identifier": {"namespace": "{l}", "name": "{x}"}, **set_props()}]}),
    ("loadView", "GET", "{b}/namespaces/{n}/views/{x}", None),
    ("viewExists", "HEAD", "{b}/namespaces/{n}/views/{x}", None),
    ("replaceView", "POST", "{b}/namespaces/{n}/views/{x}", set_props()),
    ("dropView", "DELETE", "{b}/namespaces/{n}/views/{x}", None),
    ("renameView", "POST", "{b}/views/rename",
     {"source": {"namespace": "{l}", "name": "{x}"}, "destination": {"namespace": "{l}", "name": "renamed"}}),
]

NAMESPACE_CASES = [
    ("loadNamespace", "GET", "{b}/namespaces/{x}", None),
    ("namespaceExists", "HEAD", "{b}/namespaces/{x}", None),
    ("listTables", "GET", "{b}/namespaces/{x}/tables", None),
    ("listViews", "GET", "{b}/namespaces/{x}/views", None),
    ("dropNamespace", "DELETE", "{b}/namespaces/{x}", None),
    ("updateProperties", "POST", "{b}/namespaces/{x}/properties", {"updates": {"a": "b"}}),
    ("createTable", "POST", "{b}/namespaces/{x}/tables", {"name": "n", "schema": SCHEMA}),
    ("stageCreate", "POST", "{b}/namespaces/{x}/tables", {"name": "n", "schema": SCHEMA, "stage-create": True}),
    ("registerTable", "POST", "{b}/namespaces/{x}/register", register("n", "file:///nowhere/m.metadata.json")),
    ("createView", "POST", "{b}/namespaces/{x}/views", view_body("n")),
    ("loadTable in it", "GET", "{b}/namespaces/{x}/tables/{t2}", None),
    ("tableExists in it", "HEAD", "{b}/namespaces/{x}/tables/{t2}", None),
    ("dropTable in it", "DELETE", "{b}/namespaces/{x}/tables/{t2}", None),
    ("loadView in it", "GET", "{b}/namespaces/{x}/views/{t2}", None),
    ("rename into it", "POST", "{b}/tables/rename",
     {"source": {"namespace": "{sl}", "name": "{t}"}, "destination": {"namespace": "{xl}", "name": "renamed"}}),
]


def fill(template, values: dict):
    """`template` with {key} replaced in strings; a string that is exactly a list key becomes the list."""
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if isinstance(template, str):
        if isinstance(values.get(template[1:-1]), list) and template == "{" + template[1:-1] + "}":
            return values[template[1:-1]]
        for k, v in values.items():
            if isinstance(v, str):
                template = template.replace("{" + k + "}", v)
        return template
    return template


async def answers_differ(caller, cases, existing: str, missing: str, values) -> list:
    """Every (case, spelling) where the existing name and the missing one are answered differently;
    `values(spelling, x)` fills a case's template."""
    wrong = []
    for operation, method, path, body in cases:
        for spelling in SPELLINGS:
            got = []
            for x in (existing, missing):
                v = values(spelling, x)
                status, answer = await caller.call(method, fill(path, v), json=fill(body, v))
                assert status < 500, (operation, spelling, status, answer)
                got.append(shown(status, answer, x))
            if got[0] != got[1]:
                wrong.append((operation, spelling, got))
    return wrong


async def test_an_invisible_table_or_view_answers_as_a_missing_one(ws, server):
    w = await existence_world(ws)
    stranger = await user(server, ws)                        # no grant at all
    neighbour = await user(server, ws)                       # sees the catalog and schema s, nothing in it
    await grant(ws, "catalog", w["c"], neighbour.name, "USE CATALOG")
    await grant(ws, "schema", f"{w['c']}.{w['s']}", neighbour.name, "USE SCHEMA")
    maker = await user(server, ws)                           # may create tables in s, sees none of the others
    await grant(ws, "catalog", w["c"], maker.name, "USE CATALOG")
    await grant(ws, "schema", f"{w['c']}.{w['s']}", maker.name, "USE SCHEMA", "CREATE TABLE")

    def values(spelling, x):
        b, n, l = spellings(w, w["s"])[spelling]
        return {"b": b, "n": n, "l": l, "x": x.upper() if "upper" in spelling else x}

    wrong = []
    for who, caller in (("stranger", stranger), ("neighbour", neighbour), ("maker", maker)):
        for kind in ("t", "v", "d"):                    # an Iceberg table, an Iceberg view, a Delta table
            missing = unique(w[kind].split("_")[0])
            for found in await answers_differ(caller, TABLE_CASES, w[kind], missing, values):
                wrong.append((who, kind, *found))
    assert wrong == [], "\n".join(map(str, wrong))
    # The world is intact, and the admin still tells them apart.
    base = f"{ICE}/catalogs/{w['c']}/namespaces/{w['s']}"
    await ok(ws, "GET", f"{base}/tables/{w['t']}")
    await ok(ws, "GET", f"{base}/views/{w['v']}")
    status, body = await ws.call("GET", f"{base}/tables/{w['d']}")
    assert status == 404 and "not an Iceberg table" in body["error"]["message"], body
    # Who may see a Delta table is told it is not an Iceberg table; a BROWSE holder is refused, not told "missing".
    await grant(ws, "table", f"{w['c']}.{w['s']}.{w['d']}", neighbour.name, "SELECT")
    status, body = await neighbour.call("GET", f"{base}/tables/{w['d']}")
    assert status == 404 and "not an Iceberg table" in body["error"]["message"], body
    await grant(ws, "table", f"{w['c']}.{w['s']}.{w['t']}", neighbour.name, "BROWSE")
    status, body = await neighbour.call("GET", f"{base}/tables/{w['t']}")
    assert status == 403 and body["error"]["type"] == "ForbiddenException", body


async def test_an_invisible_namespace_answers_as_a_missing_one(ws, server):
    w = await existence_world(ws)
    stranger = await user(server, ws)
    user_of_s = await user(server, ws)                        # sees the catalog and schema s (a table there), not h
    await grant(ws, "catalog", w["c"], user_of_s.name, "USE CATALOG")
    await grant(ws, "schema", f"{w['c']}.{w['s']}", user_of_s.name, "USE SCHEMA", "CREATE TABLE", "SELECT")

    def values(spelling, x):
        b, n, l = spellings(w, x.upper() if "upper" in spelling else x)[spelling]
        _, _, sl = spellings(w, w["s"])[spelling]
        return {"b": b, "x": n, "xl": l, "sl": sl, "t": w["t"], "t2": w["t2"]}

    wrong = []
    for who, caller in (("stranger", stranger), ("user of s", user_of_s)):
        for found in await answers_differ(caller, NAMESPACE_CASES, w["h"], unique("hid"), values):
            wrong.append((who, *found))
    assert wrong == [], "\n".join(map(str, wrong))
    await ok(ws, "GET", f"{ICE}/catalogs/{w['c']}/namespaces/{w['h']}/tables/{w['t2']}")
    await ok(ws, "GET", f"{ICE}/catalogs/{w['c']}/namespaces/{w['s']}/tables/{w['t']}")


# ---- 11: register-view, and a view's write.metadata.path --------------------------------------------------


async def test_register_view_reads_only_where_register_reads_and_a_views_metadata_stays_inside_it(ws, server, tmp_path,
                                                                                                caplog):
    caplog.set_level(logging.DEBUG)
    world = await governed(ws, tmp_path)
    ext, outside = world["ext"], world["outside"]
    # write.metadata.path inside the view's location is where its metadata goes, spelled as given.
    custom = f"file:{ext}/v1/custom"
    body = await ok(ws, "POST", f"{P}/namespaces/s/views", json=view_body(
        "v1", location=(ext / "v1").as_uri(), properties={"write.metadata.path": custom}))
    first = body["metadata-location"]
    assert first.startswith(f"{custom}/00000-"), body
    assert body["metadata"]["schemas"][0]["schema-id"] == 0
    # Outside it (another folder of the external location), refused before anything is written there.
    status, body = await ws.call("POST", f"{P}/namespaces/s/views", json=view_body(
        "v9", location=(ext / "v9").as_uri(), properties={"write.metadata.path": (ext / "elsewhere").as_uri()}))
    assert status == 400 and "inside its location" in body["error"]["message"], body
    assert not (ext / "elsewhere").exists()
    # A dropped view comes back by register-view from its metadata file (inside the external location).
    status, _ = await ws.call("DELETE", f"{P}/namespaces/s/views/v1")
    assert status == 204
    body = await ok(ws, "POST", f"{P}/namespaces/s/register-view", json=register("V2", first))
    assert urlparse(body["metadata-location"]).path == urlparse(first).path, body        # kept normalized
    assert body["metadata"]["location"] == (ext / "v1").as_uri(), body
    loaded = await ok(ws, "GET", f"{P}/namespaces/s/views/v2")
    assert loaded["metadata"]["view-uuid"] == body["metadata"]["view-uuid"]
    # A taken name, in the reference catalog's words.
    await ok(ws, "POST", f"{P}/namespaces/s/tables", json={"name": "t", "schema": SCHEMA})
    for name, said in (("V2", "View already exists: s.V2"), ("t", "Table with same name already exists: s.t")):
        status, body = await ws.call("POST", f"{P}/namespaces/s/register-view", json=register(name, first))
        assert status == 409 and body["error"]["message"] == said, body
    # Outside every external location: one answer, whatever is (or is not) there, nothing of it quoted.
    view_file = outside / "v" / "metadata" / "00000-a.metadata.json"
    write_file(view_file, Path(urlparse(first).path).read_bytes().replace(b'"spark"', f'"{MARKER}"'.encode()))
    answers = set()
    for url in (view_file.as_uri(), (outside / "v" / "metadata" / "missing.metadata.json").as_uri(),
                (outside / "keep.txt").as_uri()):
        status, body = await ws.call("POST", f"{P}/namespaces/s/register-view", json=register("x", url))
        answers.add((status, body["error"]["type"], body["error"]["message"].replace(url, "<url>")))
    assert len(answers) == 1 and next(iter(answers))[0] == 400, answers
    # Inside it, a file that is not view metadata is a 400 that quotes none of it.
    bad = write_file(ext / "bad" / "00000-a.metadata.json", json.dumps({"secret": MARKER}))
    status, body = await ws.call("POST", f"{P}/namespaces/s/register-view", json=register("x", bad.as_uri()))
    assert status == 400 and "not an Iceberg view metadata file" in body["error"]["message"], body
    assert MARKER not in json.dumps(body) and MARKER not in caplog.text
