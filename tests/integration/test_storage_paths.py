"""Issue 28, storage paths, against every endpoint that takes a storage URL or a path.

1. Spellings the trie and the storage side would read differently (encoded separators,
   encoded dot segments, backslashes, control characters) are refused with 400 everywhere.
2. `GET /files` never lists or touches anything outside the named external location, whatever
   the spelling, and never follows a symbolic link below the location's directory.
3. By path as by name: listing inside a table or volume needs the privileges on that table or
   volume, READ FILES on the location around it is not enough.

A lake on local disk: external location `lake` over <tmp>/lake holding external table `a_t`
(admin's) and external volume `v`, and a directory `outside` next to the lake. `bob` holds
READ FILES, WRITE FILES, CREATE EXTERNAL TABLE / VOLUME on the location and may create tables
and volumes in main.s, but has no privilege on `a_t` or `v`.
"""

from __future__ import annotations

import os

import pytest

from shardcat.entities.urls import join_url, normalize_url

from governance_users import grant, user

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}',
         "position": 0, "nullable": True}]

# Ways to spell "the table's _delta_log" that the old trie read as one segment beside the table.
INTO_TABLE = ["a_t%2F_delta_log", "a_t%2f_delta_log", "a_t%5C_delta_log", "a_t\\_delta_log",
              "x%2F..%2Fa_t", "a_t%2F%2E%2E%2Fa_t"]
# Ways to climb out of the location (`outside` is the lake's sibling; enough '..' reach '/').
CLIMB = "%2F".join([".."] * 24)
OUT_OF_LOCATION = ["..%2Foutside", "..%2foutside", "sub%2F..%2F..%2Foutside", "%2E%2E%2Foutside",
                   "%2e%2e%2F%2e%2e%2F..%2Foutside", f"{CLIMB}%2Fetc", f"{CLIMB.lower()}%2Fetc",
                   "..%5C..%5Coutside", "%2E%2E/outside", ".%2E/outside", "a/%2e%2e/%2E%2E/outside"]
CONTROL = ["a%00b", "a%0Ab", "a\x00b", "a\nb", "a%C2%85"]
REFUSED = INTO_TABLE + OUT_OF_LOCATION + CONTROL


async def ok(client, method, path, **kw):
    status, body = await client.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


def refused(status, body) -> bool:
    # (A NUL in a JSON body is refused before the URL is read, with its own message.)
    return status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE" and \
        ("invalid storage url" in body["message"].lower() or "NUL character" in body["message"])


@pytest.fixture
async def lake(ws, server, tmp_path):
    root = tmp_path / "lake"
    (root / "a_t" / "_delta_log").mkdir(parents=True)
    (root / "a_t" / "_delta_log" / "0.json").write_text("{}")
    (root / "a_t" / "part-0.parquet").write_bytes(b"rows")
    (root / "v").mkdir()
    (root / "v" / "notes.txt").write_text("volume file")
    (root / "free").mkdir()
    (root / "free" / "f.csv").write_text("1,2")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("not yours")
    base = normalize_url(str(root))
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "c", "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"}})
    await ok(ws, "POST", "/external-locations", json={"name": "lake", "url": base, "credential_name": "c"})
    table = await ok(ws, "POST", "/tables", json={
        "name": "a_t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLS, "storage_location": join_url(base, "a_t")})
    volume = await ok(ws, "POST", "/volumes", json={
        "catalog_name": "main", "schema_name": "s", "name": "v", "volume_type": "EXTERNAL",
        "storage_location": join_url(base, "v")})
    bob = await user(server, ws)
    await grant(ws, "external_location", "lake", bob.name, "READ FILES", "WRITE FILES",
                "CREATE EXTERNAL TABLE", "CREATE EXTERNAL VOLUME")
    await grant(ws, "catalog", "main", bob.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE", "CREATE VOLUME")
    return {"root": root, "base": base, "table": table, "volume": volume, "bob": bob, "tmp": tmp_path}


def _spelled(lake, tail: str) -> list[str]:
    """The same tail after the location, written as file://, file://localhost and a bare path."""
    path = str(lake["root"])
    return [f"file://{path}/{tail}", f"file://localhost{path}/{tail}", f"{path}/{tail}"]


# ---- 1. one canonical form, refused spellings, every endpoint -------------------------------


async def test_files_refuses_every_ambiguous_spelling(lake, ws):
    for client in (lake["bob"], ws):
        for tail in REFUSED:
            for url in _spelled(lake, tail):
                status, body = await client.call("GET", "/files", params={"url": url})
                assert refused(status, body), (url, status, body)
                assert "not yours" not in str(body) and "_delta_log" not in str(body.get("files", ""))


async def test_path_credentials_refuse_every_ambiguous_spelling(lake):
    bob = lake["bob"]
    for tail in REFUSED:
        for url in _spelled(lake, tail):
            for operation in ("PATH_READ", "PATH_READ_WRITE", "PATH_CREATE_TABLE"):
                status, body = await bob.call("POST", "/temporary-path-credentials",
                                              json={"url": url, "operation": operation})
                assert refused(status, body), (url, operation, status, body)


async def test_external_tables_and_volumes_cannot_be_registered_by_an_ambiguous_spelling(lake, ws):
    bob = lake["bob"]
    for i, tail in enumerate(INTO_TABLE + CONTROL):
        url = _spelled(lake, tail)[i % 3]
        status, body = await bob.call("POST", "/tables", json={
            "name": f"mine{i}", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
            "data_source_format": "DELTA", "columns": COLS, "storage_location": url})
        assert refused(status, body), (url, status, body)
        status, body = await bob.call("POST", "/volumes", json={
            "catalog_name": "main", "schema_name": "s", "name": f"mine{i}", "volume_type": "EXTERNAL",
            "storage_location": url})
        assert refused(status, body), (url, status, body)
    names = [t["name"] for t in (await ok(ws, "GET", "/tables", params={"catalog_name": "main",
                                                                         "schema_name": "s"}))["tables"]]
    assert names == ["a_t"]     # nothing half written


async def test_locations_roots_and_resolve_refuse_ambiguous_spellings(lake, ws):
    for i, tail in enumerate(["new%2Fplace", "new%5Cplace", "new\\place", "x/%2E%2E/new", "a%00"]):
        url = f"{lake['tmp']}/elsewhere/{tail}"
        status, body = await ws.call("POST", "/external-locations",
                                     json={"name": f"l{i}", "url": url, "credential_name": "c"})
        assert refused(status, body), (url, body)
        status, body = await ws.call("PATCH", "/external-locations/lake", json={"url": url})
        assert refused(status, body), (url, body)
        status, body = await ws.call("POST", "/catalogs", json={"name": f"rooted{i}", "storage_root": url})
        assert refused(status, body), (url, body)
        status, body = await ws.call("POST", "/schemas", json={"name": f"rooted{i}", "catalog_name": "main",
                                                               "storage_root": url})
        assert refused(status, body), (url, body)
    # Batched resolve answers a bad path as that item's error, and names no asset for it.
    paths = [url for tail in INTO_TABLE for url in _spelled(lake, tail)]
    out = await ok(lake["bob"], "POST", "/resolve", json={"items": [{"path": p} for p in paths]})
    for path, item in zip(paths, out["items"]):
        assert item["error"]["error_code"] == "INVALID_PARAMETER_VALUE", (path, item)
        assert "a_t" not in str({k: v for k, v in item.items() if k not in ("error", "path")}), item


# ---- 2. GET /files stays inside the location ------------------------------------------------


async def test_files_never_lists_outside_the_location(lake):
    bob = lake["bob"]
    for tail in OUT_OF_LOCATION:
        for url in _spelled(lake, tail):
            status, body = await bob.call("GET", "/files", params={"url": url})
            assert status == 400, (url, status, body)
            assert "secret.txt" not in str(body) and "passwd" not in str(body), (url, body)
    # Spelled so that it resolves (raw '..'): then it is plainly outside the location.
    status, body = await bob.call("GET", "/files", params={"url": f"{lake['root']}/../outside"})
    assert status == 400 and "not inside any external location" in body["message"]


async def test_files_does_not_follow_symbolic_links_out_of_the_location(lake):
    bob, root = lake["bob"], lake["root"]
    os.symlink(lake["tmp"] / "outside", root / "free" / "out")       # to a sibling of the lake
    os.symlink("/etc", root / "free" / "etc")                          # to the system
    os.symlink(root / "a_t", root / "free" / "alias")                 # to a table bob may not read
    os.symlink(lake["tmp"] / "outside" / "secret.txt", root / "free" / "secret")
    for name in ("out", "etc", "alias", "secret", "out/secret.txt", "alias/_delta_log", "etc/passwd"):
        url = join_url(lake["base"], "free", *name.split("/"))
        status, body = await bob.call("GET", "/files", params={"url": url})
        assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), (name, body)
        assert "symbolic link" in body["message"]
        assert "not yours" not in str(body) and "_delta_log" not in str(body.get("files", ""))
    # The links are listed as what they are, not as what they point at.
    listed = (await ok(bob, "GET", "/files", params={"url": join_url(lake["base"], "free")}))["files"]
    by_name = {f["name"]: f for f in listed}
    assert sorted(by_name) == ["alias", "etc", "f.csv", "out", "secret"]
    assert not by_name["etc"]["is_dir"] and not by_name["out"]["is_dir"]
    assert by_name["secret"]["size"] == len(str(lake["tmp"] / "outside" / "secret.txt"))  # the link's own size


# ---- 3. by path as by name: the owning asset decides ----------------------------------------


def _into(lake, *names) -> list[str]:
    """Spellings of a URL at or below the lake's `names`, all with the same canonical form."""
    path = str(lake["root"]) + "/" + "/".join(names)
    return [normalize_url(path), f"file://{path}/", f"file://localhost{path}", path + "//",
            f"{lake['root']}/./{'/'.join(names)}", f"{lake['root']}/free/../{'/'.join(names)}"]


async def test_files_inside_a_table_need_select_on_it(lake, ws):
    bob = lake["bob"]
    for names in (("a_t",), ("a_t", "_delta_log"), ("a_t", "_delta_log", "0.json"), ("a_t", "part-0.parquet")):
        for url in _into(lake, *names):
            status, body = await bob.call("GET", "/files", params={"url": url})
            assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
            # Bob may not see the table (USE SCHEMA alone shows no table): it stays unnamed (security.md).
            assert "main.s.a_t" not in body["message"] and "may not see" in body["message"], body
            # Temporary path credentials decide the same.
            status, body = await bob.call("POST", "/temporary-path-credentials",
                                          json={"url": url, "operation": "PATH_READ"})
            assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
    # The location itself and paths no asset owns stay READ FILES's.
    assert [f["name"] for f in (await ok(bob, "GET", "/files", params={"url": lake["base"]}))["files"]] == \
        ["a_t", "free", "v"]
    assert [f["name"] for f in (await ok(bob, "GET", "/files",
                                         params={"url": join_url(lake["base"], "free")}))["files"]] == ["f.csv"]
    # SELECT on the table (with USE CATALOG / USE SCHEMA, held already) opens it, as by name.
    await grant(ws, "table", "main.s.a_t", bob.name, "SELECT")
    for url in _into(lake, "a_t"):
        assert [f["name"] for f in (await ok(bob, "GET", "/files", params={"url": url}))["files"]] == \
            ["_delta_log", "part-0.parquet"]
    # Without USE SCHEMA the table is out of reach by name, so by path too.
    await grant(ws, "catalog", "main", bob.name, remove=["USE SCHEMA"])
    status, body = await bob.call("GET", "/files", params={"url": join_url(lake["base"], "a_t")})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body


async def test_files_inside_a_volume_need_read_volume(lake, ws):
    bob = lake["bob"]
    for url in _into(lake, "v") + _into(lake, "v", "notes.txt"):
        status, body = await bob.call("GET", "/files", params={"url": url})
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
        assert "main.s.v" not in body["message"] and "may not see" in body["message"], body
    await grant(ws, "volume", "main.s.v", bob.name, "READ VOLUME")
    listed = await ok(bob, "GET", "/files", params={"url": join_url(lake["base"], "v")})
    assert [f["name"] for f in listed["files"]] == ["notes.txt"]


async def test_files_in_managed_storage_inside_a_location_are_reached_by_name_only(lake, ws):
    rooted = await ok(ws, "POST", "/catalogs", json={"name": "rooted",
                                                     "storage_root": join_url(lake["base"], "managed")})
    await grant(ws, "catalog", "rooted", lake["bob"].name, "USE CATALOG", "USE SCHEMA", "SELECT")
    managed = rooted["storage_location"]        # <root>/__unitystorage/catalogs/<id>
    for url in (managed, join_url(managed, "tables"), join_url(managed, "tables", "x")):
        status, body = await lake["bob"].call("GET", "/files", params={"url": url})
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
        assert "managed storage" in body["message"]


async def test_path_credentials_above_tables_and_volumes_need_their_privileges(lake, ws):
    bob = lake["bob"]
    for url in _spelled(lake, "") + [f"{lake['root']}/free/.."]:
        status, body = await bob.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), (url, body)
    await grant(ws, "table", "main.s.a_t", bob.name, "SELECT")
    status, body = await bob.call("POST", "/temporary-path-credentials",
                                  json={"url": lake["base"], "operation": "PATH_READ"})
    assert (status, body["error_code"]) == (403, "PERMISSION_DENIED"), body
    assert "main.s.v" not in body["message"] and "may not see" in body["message"], body
    await grant(ws, "volume", "main.s.v", bob.name, "READ VOLUME")
    answer = await ok(bob, "POST", "/temporary-path-credentials", json={"url": lake["base"], "operation": "PATH_READ"})
    assert answer["url"] == lake["base"]
    # Listing the location needs no more than READ FILES: one level of names, no table's files.
    await grant(ws, "table", "main.s.a_t", bob.name, remove=["SELECT"])
    assert (await bob.call("GET", "/files", params={"url": lake["base"]}))[0] == 200
