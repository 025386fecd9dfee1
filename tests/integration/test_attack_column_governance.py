"""Attack (#42.5): a writer strips column governance by replacing a table's columns.

A holder of MODIFY (no APPLY TAG, no ASSIGN on a governed tag, not the owner) sends the table's
columns without the ones that carry a governed tag, an ungoverned tag or a column mask, through
every writer that can change columns: a Delta commit's metadata (`/delta/preview/commits`), the UC
Delta API's `set-columns` / `set-partition-columns` (with a commit, and without), an Iceberg
commit (`add-schema` + `set-current-schema`, on the table's endpoint and in `/transactions/commit`,
a replace-style schema of fresh field ids), and `PATCH /tables`. Before the fix the tags (and with
them the ABAC mask every other reader gets) and the masks went with the columns. Now a column that
stays keeps its tags and mask (by name; by field id for Iceberg, so a renamed column keeps them);
removing a column that carries them needs what the tag and mask APIs need (APPLY TAG; ASSIGN on a
governed tag's policy; ownership or MANAGE for a mask), else 403 and nothing is written.
"""

from __future__ import annotations

import uuid

from governance_users import grant, unique, user

from test_enforcement_matrix import function, ok

GOVERNED, FREE = "pii", "note"             # a governed tag (an ABAC mask follows it) and an ungoverned one
NAMES = ("id", "ssn", "email", "notes")    # ssn: pii (governed); email: its own mask; notes: note (ungoverned)
TYPES = {"id": "LONG", "ssn": "STRING", "email": "STRING", "notes": "STRING", "extra": "STRING"}
DELTA = "/delta/v1"
COMMITS = "/delta/preview/commits"
FEATURE = "delta.feature.catalogManaged"


class World:
    """A catalog c.s, a governed tag with an ABAC mask on it, and users of different rights."""

    def __init__(self, c, owner, writer, tagger, reader):
        self.c, self.owner, self.writer, self.tagger, self.reader = c, owner, writer, tagger, reader
        self.abac_mask = {"function_name": f"{c}.s.redact", "using_column_names": []}
        self.own_mask = {"function_name": f"{c}.s.redact", "using_column_names": []}


async def _world(server, ws) -> World:
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    await ok(ws, "POST", "/functions", json=function(c, "redact"))
    # Only admins may assign or remove the governed tag (no assign_principals).
    await ok(ws, "POST", "/tag-policies", json={"tag_key": GOVERNED, "values": [{"name": "yes"}]})
    readers = unique("readers")
    await ok(ws, "POST", "/policies", json={
        "name": "mask_pii", "on_securable_type": "CATALOG", "on_securable_fullname": c,
        "policy_type": "POLICY_TYPE_COLUMN_MASK", "for_securable_type": "TABLE", "to_principals": [readers],
        "match_columns": [{"condition": f"hasTag('{GOVERNED}')", "alias": "col"}],
        "column_mask": {"function_name": f"{c}.s.redact", "on_column": "col"}})
    owner = await user(server, ws, trusted=True)       # creates the tables; no ASSIGN on the governed tag
    writer = await user(server, ws, trusted=True)      # MODIFY only
    tagger = await user(server, ws, trusted=True)      # MODIFY and APPLY TAG
    reader = await user(server, ws, trusted=True, groups=[readers])      # the one the ABAC mask is for
    await grant(ws, "catalog", c, owner.name, "USE CATALOG", "USE SCHEMA", "CREATE TABLE")
    for u in (writer, tagger, reader):
        await grant(ws, "catalog", c, u.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    for u in (writer, tagger):
        await grant(ws, "catalog", c, u.name, "MODIFY")
    await grant(ws, "catalog", c, tagger.name, "APPLY TAG")
    return World(c, owner, writer, tagger, reader)


async def _govern(ws, w: World, name: str) -> None:
    """The admin tags ssn (governed) and notes (ungoverned) and masks email."""
    full = f"{w.c}.s.{name}"
    for column, key, value in (("ssn", GOVERNED, "yes"), ("notes", FREE, "free")):
        await ok(ws, "POST", "/entity-tag-assignments", json={"entity_type": "columns", "entity_name":
                                                              f"{full}.{column}", "tag_key": key, "tag_value": value})
    columns = (await ok(ws, "GET", f"/tables/{full}"))["columns"]      # as stored: no policy's mask in it
    masked = [{**col, "mask": w.own_mask} if col["name"] == "email" else col for col in columns]
    await ok(ws, "PATCH", f"/tables/{full}", json={"columns": [{k: v for k, v in col.items() if k != "tags"}
                                                              for col in masked]})
    await _assert_governed(w, name)


async def _assert_governed(w: World, name: str, *, ssn: str = "ssn", gone: tuple = ()) -> None:
    """What another reader (a trusted engine the ABAC mask is for) sees: each governed column that
    is still there keeps its tag and mask, and the ABAC mask still applies to the governed column."""
    table = await ok(w.reader, "GET", f"/tables/{w.c}.s.{name}")
    cols = {col["name"].lower(): col for col in table["columns"]}
    if "ssn" not in gone:
        assert cols[ssn]["tags"] == {GOVERNED: "yes"}, cols
        assert cols[ssn]["mask"] == w.abac_mask and table["effective_policies"] == ["mask_pii"], table
    if "email" not in gone:
        assert cols["email"]["mask"] == w.own_mask, cols
    if "notes" not in gone:
        assert cols["notes"]["tags"] == {FREE: "free"}, cols
    for role in gone:
        assert (ssn if role == "ssn" else role) not in cols, cols


async def _removed_in_turn(w: World, name: str, ws, attempt, written, ssn: str = "ssn") -> None:
    """Those with the rights remove them, each in turn: APPLY TAG an ungoverned tag's column, the
    owner a masked column, an admin (ASSIGN on the governed tag) the governed column. `attempt(who,
    names)` makes the request leaving `names`; `written()` is told of each success."""
    left, gone = ["id", ssn, "email", "notes", "extra"], ()
    for who, role in ((w.tagger, "notes"), (w.owner, "email"), (ws, "ssn")):
        left = [n for n in left if n != (ssn if role == "ssn" else role)]
        status, body = await attempt(who, left)()
        assert status == 200, body
        written()
        gone += (role,)
        await _assert_governed(w, name, ssn=ssn, gone=gone)
    columns = (await ok(w.reader, "GET", f"/tables/{w.c}.s.{name}"))["columns"]
    assert [c["name"] for c in columns] == ["id", "extra"] and not any("mask" in c or "tags" in c for c in columns)


async def _version(server, ws) -> int:
    return (await server.store.get_metastore(ws.metastore_id)).version


SAYS = {"notes": "tag 'note'", "ssn": "tag 'pii'", "email": "has a mask"}    # why removing the column is refused


async def _refused(server, ws, w: World, name: str, attempt, says: str, **governed) -> None:
    """`attempt()` is refused 403 PERMISSION_DENIED saying why, writes nothing, and the governance stands."""
    before = await _version(server, ws)
    status, body = await attempt()
    assert status == 403 and says in str(body), body
    assert "PERMISSION_DENIED" in str(body) or "ForbiddenException" in str(body) or \
        "PermissionDeniedException" in str(body), body
    assert await _version(server, ws) == before
    await _assert_governed(w, name, **governed)


# ---- Delta: /delta/preview/commits and the UC Delta API ----------------------------------------


def _uc_columns(names) -> list[dict]:
    return [{"name": n, "type_name": TYPES[n.lower()], "position": i} for i, n in enumerate(names)]


async def _delta_table(ws, w: World, name: str) -> dict:
    """A catalog-managed Delta table the owner creates (staging table, then the table there)."""
    staging = await ok(w.owner, "POST", "/staging-tables", json={"name": name, "catalog_name": w.c,
                                                                 "schema_name": "s"})
    table = await ok(w.owner, "POST", "/tables", json={
        "name": name, "catalog_name": w.c, "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": _uc_columns(NAMES), "storage_location": staging["staging_location"],
        "properties": {FEATURE: "supported", "io.unitycatalog.tableId": staging["id"]}})
    await _govern(ws, w, name)
    return table


def _info(version: int) -> dict:
    return {"version": version, "timestamp": 1_700_000_000_000 + version,
            "file_name": f"{version:020d}.{uuid.uuid4()}.json", "file_size": 100 + version,
            "file_modification_timestamp": 1_700_000_000_000 + version}


async def test_a_delta_commits_schema_cannot_strip_tags_or_masks(server, ws):
    w = await _world(server, ws)
    table = await _delta_table(ws, w, "t")
    ref = {"table_id": table["table_id"], "table_uri": table["storage_location"]}
    version = [1]

    def written():
        version[0] += 1

    def commit(who, names):
        return lambda: who.call("POST", COMMITS, json={**ref, "commit_info": _info(version[0]), "metadata": {
            "schema": {"columns": _uc_columns(names)}}})

    for who, dropped in ((w.writer, "notes"), (w.writer, "ssn"), (w.writer, "email"), (w.writer, "SSN"),
                         (w.tagger, "ssn"), (w.tagger, "email"), (w.owner, "ssn")):
        await _refused(server, ws, w, "t", commit(who, [n for n in NAMES if n != dropped.lower()]),
                       SAYS[dropped.lower()])

    # Columns that stay keep their governance: renamed by case, reordered, one added.
    status, body = await commit(w.writer, ["notes", "SSN", "email", "id", "extra"])()
    assert status == 200, body
    written()
    await _assert_governed(w, "t")
    await _removed_in_turn(w, "t", ws, commit, written)


async def test_the_delta_apis_set_columns_cannot_strip_tags_or_masks(server, ws):
    w = await _world(server, ws)
    table = await _delta_table(ws, w, "t")
    path = f"{DELTA}/catalogs/{w.c}/schemas/s/tables/t"
    version = [1]

    def written():
        version[0] += 1

    def fields(names):
        return {"type": "struct", "fields": [{"name": n, "type": "long" if n.lower() == "id" else "string",
                                              "nullable": True, "metadata": {}} for n in names]}

    def update(who, names=None, *, with_commit=True, partition=None):
        def attempt():     # the version to propose: the one after the last written when sent
            commit = {k.replace("_", "-"): v for k, v in _info(version[0]).items()}
            updates = [{"action": "add-commit", "commit": commit}] if with_commit else []
            if names is not None:
                updates.append({"action": "set-columns", "columns": fields(names)})
            if partition is not None:
                updates.append({"action": "set-partition-columns", "partition-columns": partition})
            return who.call("POST", path, json={
                "requirements": [{"type": "assert-table-uuid", "uuid": table["table_id"]}], "updates": updates})
        return attempt

    for who, dropped in ((w.writer, "notes"), (w.writer, "ssn"), (w.writer, "email"),
                         (w.tagger, "ssn"), (w.tagger, "email"), (w.owner, "ssn")):
        await _refused(server, ws, w, "t", update(who, [n for n in NAMES if n != dropped]), SAYS[dropped])
    # Without a commit set-columns is a metadata change (the owner's): a governed tag is still the admins'.
    await _refused(server, ws, w, "t", update(w.owner, ["id", "email", "notes"], with_commit=False), SAYS["ssn"])

    # Columns that stay keep their governance, through set-columns and set-partition-columns alike.
    for step in (update(w.writer, ["id", "SSN", "email", "notes", "extra"]), update(w.writer, partition=["id"])):
        status, body = await step()
        assert status == 200, body
        written()
        await _assert_governed(w, "t")
    await _removed_in_turn(w, "t", ws, update, written)


# ---- Iceberg: commits, transactions, replace --------------------------------------------------


def _schema(schema_id: int, fields: list[tuple[int, str]]) -> dict:
    return {"type": "struct", "schema-id": schema_id, "fields": [
        {"id": i, "name": n, "type": "long" if n.lower() == "id" else "string", "required": False} for i, n in fields]}


async def test_an_iceberg_commit_or_transaction_cannot_strip_tags_or_masks(server, ws):
    w = await _world(server, ws)
    p = f"/iceberg/v1/catalogs/{w.c}"
    created = await ok(w.owner, "POST", f"{p}/namespaces/s/tables", json={
        "name": "t", "schema": _schema(0, [(1, "id"), (2, "ssn"), (3, "email"), (4, "notes")])})
    await _govern(ws, w, "t")
    uuid_ = created["metadata"]["table-uuid"]

    async def next_schema_id() -> int:
        loaded = await ok(w.owner, "GET", f"{p}/namespaces/s/tables/t")
        return max(s["schema-id"] for s in loaded["metadata"]["schemas"]) + 1

    def change(fields):
        async def updates():
            return [{"action": "add-schema", "schema": _schema(await next_schema_id(), fields)},
                    {"action": "set-current-schema", "schema-id": -1}]
        return updates

    def commit(who, fields, *, transaction=False):
        async def attempt():
            body = {"requirements": [{"type": "assert-table-uuid", "uuid": uuid_}], "updates": await change(fields)()}
            if transaction:
                body["identifier"] = {"namespace": ["s"], "name": "t"}
                status, answer = await who.call("POST", f"{p}/transactions/commit", json={"table-changes": [body]})
                return (200 if status == 204 else status), answer
            return await who.call("POST", f"{p}/namespaces/s/tables/t", json=body)
        return attempt

    everything = [(1, "id"), (2, "ssn"), (3, "email"), (4, "notes")]
    for transaction in (False, True):
        for who, dropped in ((w.writer, 4), (w.writer, 2), (w.writer, 3), (w.tagger, 2), (w.tagger, 3),
                             (w.owner, 2)):
            kept = [f for f in everything if f[0] != dropped]
            await _refused(server, ws, w, "t", commit(who, kept, transaction=transaction),
                           SAYS[dict(everything)[dropped]])

    # A replace-style schema (fresh field ids, the same names) keeps every column's governance.
    status, body = await commit(w.writer, [(11, "id"), (12, "ssn"), (13, "email"), (14, "notes")])()
    assert status == 200, body
    await _assert_governed(w, "t")
    # A rename keeps the field id, and so the tags and mask: the ABAC mask follows the column.
    status, body = await commit(w.writer, [(11, "id"), (12, "ssn_renamed"), (13, "email"), (14, "notes"),
                                           (15, "extra")], transaction=True)()
    assert status == 200, body
    await _assert_governed(w, "t", ssn="ssn_renamed")
    # Only those with the rights remove them.
    ids = {"id": 11, "ssn_renamed": 12, "email": 13, "notes": 14, "extra": 15}
    await _removed_in_turn(w, "t", ws, lambda who, left: commit(who, [(ids[n], n) for n in left]), lambda: None,
                           ssn="ssn_renamed")


async def test_replacing_an_iceberg_view_keeps_its_columns_tags(server, ws):
    """A view's owner replaces its version with one of a schema without the governed column."""
    w = await _world(server, ws)
    p = f"/iceberg/v1/catalogs/{w.c}"

    def version(version_id: int, schema_id: int, sql: str) -> dict:
        return {"version-id": version_id, "schema-id": schema_id, "timestamp-ms": version_id, "summary": {},
                "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}], "default-namespace": ["s"]}

    created = await ok(w.owner, "POST", f"{p}/namespaces/s/views", json={
        "name": "v", "schema": _schema(0, [(1, "id"), (2, "ssn")]), "view-version": version(1, 0, "SELECT 1")})
    await ok(ws, "POST", "/entity-tag-assignments", json={"entity_type": "columns", "entity_name": f"{w.c}.s.v.ssn",
                                                          "tag_key": GOVERNED, "tag_value": "yes"})

    def replace(who, version_id: int, fields):
        return lambda: who.call("POST", f"{p}/namespaces/s/views/v", json={
            "requirements": [{"type": "assert-view-uuid", "uuid": created["metadata"]["view-uuid"]}],
            "updates": [{"action": "add-schema", "schema": _schema(version_id, fields)},
                        {"action": "add-view-version", "view-version": version(version_id, -1, f"SELECT {version_id}")},
                        {"action": "set-current-view-version", "view-version-id": -1}]})

    async def ssn_tags() -> dict | None:
        columns = (await ok(ws, "GET", f"/tables/{w.c}.s.v"))["columns"]
        return next((c.get("tags") for c in columns if c["name"] == "ssn"), "gone")

    before = await _version(server, ws)
    status, body = await replace(w.owner, 2, [(1, "id")])()
    assert status == 403 and SAYS["ssn"] in str(body), body
    assert await _version(server, ws) == before and await ssn_tags() == {GOVERNED: "yes"}
    status, body = await replace(w.owner, 2, [(1, "id"), (2, "ssn"), (3, "extra")])()
    assert status == 200, body
    assert await ssn_tags() == {GOVERNED: "yes"}
    status, body = await replace(ws, 3, [(1, "id")])()
    assert status == 200, body
    assert await ssn_tags() == "gone"


# ---- Unity Catalog: PATCH /tables -----------------------------------------------------------


async def test_update_table_columns_need_the_tag_and_mask_rights(server, ws):
    w = await _world(server, ws)
    await ok(w.owner, "POST", "/tables", json={"name": "t", "catalog_name": w.c, "schema_name": "s",
                                               "table_type": "MANAGED", "data_source_format": "DELTA",
                                               "columns": _uc_columns(NAMES)})
    await _govern(ws, w, "t")

    def patch(who, names, masks=True):
        columns = [{**col, "mask": w.own_mask} if col["name"] == "email" and masks else col
                   for col in _uc_columns(names)]
        return lambda: who.call("PATCH", f"/tables/{w.c}.s.t", json={"columns": columns})

    for who in (w.writer, w.tagger):        # updateTable is the owner's
        await _refused(server, ws, w, "t", patch(who, NAMES), "may not update table")
    # The owner holds no ASSIGN on the governed tag: the column that carries it stays.
    await _refused(server, ws, w, "t", patch(w.owner, ["id", "email", "notes"]), SAYS["ssn"])
    # Columns that stay keep their tags; the owner may drop a mask and an ungoverned tag.
    status, body = await patch(w.owner, ["ID", "ssn", "email", "notes"])()
    assert status == 200, body
    await _assert_governed(w, "t")
    status, body = await patch(w.owner, ["id", "ssn", "email"], masks=False)()
    assert status == 200, body
    table = await ok(w.reader, "GET", f"/tables/{w.c}.s.t")
    cols = {c["name"]: c for c in table["columns"]}
    assert "mask" not in cols["email"] and "notes" not in cols and cols["ssn"]["mask"] == w.abac_mask
    status, body = await patch(ws, ["id", "email"], masks=False)()
    assert status == 200, body


async def test_a_snapshot_restore_brings_back_metadata_not_yesterdays_governance(server, ws):
    """The schema's owner (no ASSIGN on the governed tag) restores a snapshot taken before the
    columns were governed: the columns that stay keep today's tags and masks; a restore that would
    remove a column carrying a governed tag is refused, and an admin's goes through."""
    w = await _world(server, ws)
    await ok(ws, "PATCH", f"/schemas/{w.c}.s", json={"owner": w.owner.name})
    await ok(w.owner, "POST", "/tables", json={"name": "t", "catalog_name": w.c, "schema_name": "s",
                                               "table_type": "MANAGED", "data_source_format": "DELTA",
                                               "columns": _uc_columns(NAMES), "comment": "before"})
    snapshot = {"securable_type": "SCHEMA", "full_name": f"{w.c}.s"}
    await ok(w.owner, "POST", "/shardcat/snapshots", json={"name": "ungoverned", **snapshot})
    await _govern(ws, w, "t")
    await ok(ws, "PATCH", f"/tables/{w.c}.s.t", json={"comment": "after"})
    assert (await ok(w.owner, "POST", "/shardcat/snapshots/ungoverned/restore"))["put_back"] >= 1
    assert (await ok(w.reader, "GET", f"/tables/{w.c}.s.t"))["comment"] == "before"
    await _assert_governed(w, "t")

    # a governed column added after the snapshot: restoring would drop it with its tag
    await ok(w.owner, "POST", "/shardcat/snapshots", json={"name": "three", **snapshot})
    columns = (await ok(ws, "GET", f"/tables/{w.c}.s.t"))["columns"]
    added = [{**{k: v for k, v in col.items() if k != "tags"}, **({"mask": w.own_mask} if col["name"] == "email" else {})}
             for col in columns] + \
        [{"name": "ssn2", "type_name": "STRING", "position": len(columns)}]
    await ok(ws, "PATCH", f"/tables/{w.c}.s.t", json={"columns": added})
    await ok(ws, "POST", "/entity-tag-assignments", json={"entity_type": "columns", "entity_name":
                                                          f"{w.c}.s.t.ssn2", "tag_key": GOVERNED, "tag_value": "yes"})
    await _refused(server, ws, w, "t", lambda: w.owner.call("POST", "/shardcat/snapshots/three/restore"),
                   "tag 'pii'")
    assert "ssn2" in {c["name"] for c in (await ok(w.reader, "GET", f"/tables/{w.c}.s.t"))["columns"]}
    await ok(ws, "POST", "/shardcat/snapshots/three/restore")
    assert "ssn2" not in {c["name"] for c in (await ok(w.reader, "GET", f"/tables/{w.c}.s.t"))["columns"]}
    await _assert_governed(w, "t")
