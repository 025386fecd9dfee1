"""Differential conformance: one scenario of Unity Catalog API calls sent to shardcat and to the
open-source Unity Catalog server 0.6.0 (UC OSS, started from its jars on loopback by
benchmarks/uc_oss.py, on its default embedded H2, authorization off: its default), the answers
compared field by field.

What may differ by design is normalised away before comparing: ids, timestamps, owners and
creators (UC OSS without authorization has none), metastore ids, the storage root each server
was given (each writes under its own temporary directory), and a field sent as `null` against
one left out (docs/api.md: shardcat leaves absent fields out). Errors are compared by HTTP
status only; error codes are compared where both servers name the same one.

Every remaining difference is expected explicitly in EXPECTED below, with the reason in
docs/api.md ("Differences from the open-source server"): each is UC OSS's deviation from
api/all.yaml or a documented choice of shardcat's. The test fails on any new difference, and on
an expected one that went away, so it follows either side's changes.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path

import aiohttp
import pyarrow as pa
import pytest

from shardcat.delta import log as dlog
from shardcat.entities.urls import normalize_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import uc_oss  # noqa: E402

pytestmark = pytest.mark.uc_oss

IGNORED = {"id", "catalog_id", "schema_id", "table_id", "volume_id", "function_id", "model_id", "metastore_id",
           "credential_id", "external_location_id", "created_at", "updated_at", "created_by", "updated_by",
           "owner", "browse_only", "expiration_time", "table-uuid", "etag", "created-time", "updated-time",
           "last-commit-timestamp-ms", "timestamp", "file-name", "file-modification-timestamp",
           "securable_id", "expiration-time-ms", "meta"}
# Fields shardcat answers (the Databricks 2.1 API's) where UC OSS 0.6 has none: expected absent there.
SHARDCAT_ADDS = {"full_name", "read_only", "unity_catalog_iam_arn"}


@pytest.fixture(scope="module")
def uc(tmp_path_factory):
    why = uc_oss.available()
    if why:     # no sources on this machine: nothing to compare against (Maven Central has no server jar)
        pytest.skip(f"UC OSS 0.6.0 cannot be built here: {why}")
    server = uc_oss.start(tmp_path_factory.mktemp("uc-oss"), heap="1g")
    yield server
    server.stop()


class Side:
    """One server: its API base, headers, storage root and the ids the scenario learns on it."""

    def __init__(self, name: str, api: str, headers: dict, root: str, session: aiohttp.ClientSession):
        self.name, self.api, self.headers, self.root, self.session = name, api, headers, root, session
        self.control = api.removesuffix("/api/2.1/unity-catalog") + "/api/1.0/unity-control"
        self.ids: dict[str, str] = {}
        self.echoed: frozenset = frozenset()

    def fill(self, value):
        """`{root}` and `{<id name>}` in strings of `value` replaced by this side's."""
        if isinstance(value, str):
            out = value.replace("{root}", self.root)
            for k, v in self.ids.items():
                out = out.replace("{" + k + "}", v)
            return out
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        return value

    async def call(self, method: str, path: str, body=None, raw: bytes | None = None):
        data = raw if raw is not None else (json.dumps(self.fill(body)).encode() if body is not None else None)
        url = (self.control + path.removeprefix("control:")) if path.startswith("control:") \
            else self.api + self.fill(path)
        async with self.session.request(method, url, data=data,
                                        headers={**self.headers, "Content-Type": "application/json"}) as r:
            text = await r.text()
            try:
                return r.status, json.loads(text) if text else None
            except ValueError:
                return r.status, text


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalise(value, root: str, echoed: frozenset = frozenset()):
    """The answer with what may differ by design taken out (see the module's docstring); `echoed`:
    Delta table properties this server itself required at staging (each side echoes its own)."""
    if isinstance(value, dict):
        return {k: normalise(v, root, echoed) for k, v in value.items()
                if k not in IGNORED and k not in echoed and v not in (None, {}, [])}
    if isinstance(value, list):
        return [normalise(v, root, echoed) for v in value]
    if isinstance(value, str):
        bare = root.removeprefix("file://")
        value = value.replace(root, "<root>").replace("file://" + bare, "<root>").replace(bare, "<root>")
        return UUID.sub("<uuid>", value)
    return value


def error_of(body) -> str | None:
    if isinstance(body, dict):
        if isinstance(body.get("error"), dict):     # the Delta API's (Iceberg-style) errors
            return body["error"].get("type")
        return body.get("error_code")
    return None


def differences(a, b, path: str = "") -> dict[str, tuple]:
    """{field path: (shardcat's, UC OSS's)} of two normalised answers."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = {}
        for k in sorted(set(a) | set(b)):
            out.update(differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}" if path else k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = {}
        for i, (x, y) in enumerate(zip(a, b)):
            out.update(differences(x, y, f"{path}[{i}]"))
        return out
    return {} if a == b else {path or "<body>": (a, b)}


COLUMNS = [
    {"name": "id", "type_name": "LONG", "type_text": "bigint", "position": 0, "nullable": False,
     "type_json": json.dumps({"name": "id", "type": "long", "nullable": False, "metadata": {}})},
    {"name": "note", "type_name": "STRING", "type_text": "string", "position": 1, "nullable": True,
     "comment": "free text", "type_json": json.dumps({"name": "note", "type": "string", "nullable": True,
                                                      "metadata": {}})},
]
FUNCTION = {"function_info": {
    "name": "add_one", "catalog_name": "c", "schema_name": "s", "input_params": {"parameters": [
        {"name": "x", "type_text": "int", "type_json": json.dumps({"name": "x", "type": "integer",
                                                                   "nullable": True, "metadata": {}}),
         "type_name": "INT", "position": 0}]},
    "data_type": "INT", "full_data_type": "int", "return_params": None, "routine_body": "SQL",
    "routine_definition": "x + 1", "parameter_style": "S", "is_deterministic": True, "sql_data_access": "NO_SQL",
    "is_null_call": False, "security_type": "DEFINER", "specific_name": "add_one", "comment": "adds one"}}
DELTA = "/delta/v1/catalogs/c/schemas/s"

# (step, method, path, body): bodies and paths may name {root} and ids learnt by earlier steps.
SCENARIO = [
    ("create catalog", "POST", "/catalogs", {"name": "c", "comment": "first", "properties": {"team": "a"},
                                             "storage_root": "{root}/managed"}),
    ("get catalog", "GET", "/catalogs/c", None),
    ("list catalogs", "GET", "/catalogs", None),
    ("update catalog", "PATCH", "/catalogs/c", {"comment": "second", "properties": {"team": "b"}}),
    ("create schema", "POST", "/schemas", {"name": "s", "catalog_name": "c", "comment": "sales"}),
    ("get schema", "GET", "/schemas/c.s", None),
    ("list schemas", "GET", "/schemas?catalog_name=c", None),
    ("update schema", "PATCH", "/schemas/c.s", {"comment": "sales, renamed", "properties": {"k": "v"}}),
    ("create external table", "POST", "/tables", {
        "name": "t", "catalog_name": "c", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "DELTA", "columns": COLUMNS, "storage_location": "{root}/tables/t",
        "comment": "a table", "properties": {"p": "1"}}),
    ("get table", "GET", "/tables/c.s.t", None),
    ("list tables", "GET", "/tables?catalog_name=c&schema_name=s", None),
    ("create external volume", "POST", "/volumes", {
        "name": "v", "catalog_name": "c", "schema_name": "s", "volume_type": "EXTERNAL",
        "storage_location": "{root}/volumes/v", "comment": "files"}),
    ("get volume", "GET", "/volumes/c.s.v", None),
    ("list volumes", "GET", "/volumes?catalog_name=c&schema_name=s", None),
    ("update volume", "PATCH", "/volumes/c.s.v", {"comment": "more files"}),
    ("create function", "POST", "/functions", FUNCTION),
    ("get function", "GET", "/functions/c.s.add_one", None),
    ("list functions", "GET", "/functions?catalog_name=c&schema_name=s", None),
    ("create model", "POST", "/models", {"name": "m", "catalog_name": "c", "schema_name": "s", "comment": "ml"}),
    ("get model", "GET", "/models/c.s.m", None),
    ("list models", "GET", "/models?catalog_name=c&schema_name=s", None),
    ("update model", "PATCH", "/models/c.s.m", {"comment": "ml, better"}),
    ("create model version", "POST", "/models/versions", {
        "model_name": "m", "catalog_name": "c", "schema_name": "s", "source": "{root}/runs/1",
        "run_id": "run-1", "comment": "v1"}),
    ("get model version", "GET", "/models/c.s.m/versions/1", None),
    ("list model versions", "GET", "/models/c.s.m/versions", None),
    ("update model version", "PATCH", "/models/c.s.m/versions/1", {"comment": "v1, checked"}),
    ("finalize model version", "PATCH", "/models/c.s.m/versions/1/finalize", {"full_name": "c.s.m", "version": 1}),
    ("temporary table credentials", "POST", "/temporary-table-credentials",
     {"table_id": "{table}", "operation": "READ"}),
    ("temporary path credentials", "POST", "/temporary-path-credentials",
     {"url": "{root}/tables/t", "operation": "PATH_READ"}),
    ("create credential", "POST", "/credentials", {
        "name": "cred", "purpose": "STORAGE", "comment": "role",
        "aws_iam_role": {"role_arn": "arn:aws:iam::123456789012:role/uc-test"}}),
    ("get credential", "GET", "/credentials/cred", None),
    ("list credentials", "GET", "/credentials", None),
    ("create external location", "POST", "/external-locations", {
        "name": "loc", "url": "s3://uc-diff-bucket/data", "credential_name": "cred", "comment": "bucket"}),
    ("get external location", "GET", "/external-locations/loc", None),
    ("list external locations", "GET", "/external-locations", None),
    ("update external location", "PATCH", "/external-locations/loc", {"comment": "the bucket"}),
    ("create user", "POST", "control:/scim2/Users", {
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "displayName": "Someone",
        "emails": [{"value": "someone@example.com", "primary": True}]}),
    ("get permissions", "GET", "/permissions/catalog/c", None),
    ("grant", "PATCH", "/permissions/catalog/c", {"changes": [{"principal": "someone@example.com",
                                                                "add": ["USE CATALOG"]}]}),
    ("get permissions after grant", "GET", "/permissions/catalog/c", None),
    ("temporary path credentials, governed", "POST", "/temporary-path-credentials",
     {"url": "{root}/tables/t", "operation": "PATH_READ"}),
    ("metastore summary", "GET", "/metastore_summary", None),
    ("delta config", "GET", "/delta/v1/config?catalog=c&protocol-versions=1.0", None),
    ("delta load plain table", "GET", f"{DELTA}/tables/t", None),
    ("delta staging table", "POST", f"{DELTA}/staging-tables", {"name": "dt"}),
    # (the scenario writes the staging table's version 0 into its location here: see write_version_zero)
    ("delta create table", "POST", f"{DELTA}/tables", "DELTA_CREATE"),
    ("delta load table", "GET", f"{DELTA}/tables/dt", None),
    ("delta commit", "POST", f"{DELTA}/tables/dt", "DELTA_COMMIT"),
    ("delta load after commit", "GET", f"{DELTA}/tables/dt", None),
    # bad input
    ("missing catalog", "GET", "/catalogs/nope", None),
    ("duplicate catalog", "POST", "/catalogs", {"name": "c"}),
    ("catalog without name", "POST", "/catalogs", {"comment": "no name"}),
    ("name with a period", "POST", "/catalogs", {"name": "a.b"}),
    ("schema in missing catalog", "POST", "/schemas", {"name": "s", "catalog_name": "nope"}),
    ("malformed body", "POST", "/catalogs", b"{not json"),
    ("missing table", "GET", "/tables/c.s.nope", None),
    ("delta missing table", "GET", f"{DELTA}/tables/nope", None),
    ("delete non-empty schema", "DELETE", "/schemas/c.s", None),
    # deletes
    ("delete model version", "DELETE", "/models/c.s.m/versions/1", None),
    ("delete model", "DELETE", "/models/c.s.m", None),
    ("delete function", "DELETE", "/functions/c.s.add_one", None),
    ("delete volume", "DELETE", "/volumes/c.s.v", None),
    ("delete table", "DELETE", "/tables/c.s.t", None),
    ("deleted table is gone", "GET", "/tables/c.s.t", None),
    ("delete external location", "DELETE", "/external-locations/loc", None),
    ("delete credential", "DELETE", "/credentials/cred", None),
    ("delete catalog with force", "DELETE", "/catalogs/c?force=true", None),
    ("deleted catalog is gone", "GET", "/catalogs/c", None),
]

ANY = object()      # in EXPECTED: any value (one that differs from run to run)
GRANTED = [{"principal": "someone@example.com", "privileges": ["USE CATALOG"]}]
DELETED = {"<body>": ({}, "200 OK")}          # UC OSS: text/plain "200 OK", not all.yaml's JSON {}
SCIM_EXTENSION = "urn:ietf:params:scim:schemas:extension:shardcat:2.0:Principal"
STAGING_DIFFERENCES = {      # what each server requires of a new catalog-managed table, and suggests
    "required-properties.delta.checkpoint.writeStatsAsJson": ("<absent>", "true"),
    "required-properties.delta.checkpoint.writeStatsAsStruct": ("<absent>", "true"),
    "required-properties.delta.checkpointPolicy": ("<absent>", "v2"),
    "required-properties.delta.enableDeletionVectors": ("<absent>", "true"),
    "required-protocol.reader-features": (["catalogManaged", "vacuumProtocolCheck"],
                                          ["catalogManaged", "v2Checkpoint", "vacuumProtocolCheck", "deletionVectors"]),
    "required-protocol.writer-features": (["catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"],
                                          ["catalogManaged", "v2Checkpoint", "vacuumProtocolCheck", "deletionVectors",
                                           "inCommitTimestamp"]),
    "suggested-properties.delta.checkpointPolicy": ("v2", "<absent>"),
    "suggested-properties.delta.columnMapping.mode": ("<absent>", "name"),
    "suggested-properties.delta.enableDeletionVectors": ("true", "<absent>"),
    "suggested-properties.delta.enableRowTracking": ("<absent>", "true"),
    "suggested-properties.delta.randomizeFilePrefixes": ("<absent>", "true"),
    "suggested-protocol.reader-features": (["deletionVectors", "v2Checkpoint"], ["columnMapping"]),
    "suggested-protocol.writer-features": (["deletionVectors", "v2Checkpoint"],
                                           ["columnMapping", "domainMetadata", "rowTracking"]),
}

# Differences each side is expected to keep: {step: {field: (shardcat's, UC OSS's)}}; "status" is
# the HTTP status, "error" the error code. The reasons: docs/api.md, "Differences from the
# open-source server".
EXPECTED: dict[str, dict[str, tuple]] = {
    "create user": {"photos": ("<absent>", [{"value": ""}]),
                    "schemas": (["urn:ietf:params:scim:schemas:core:2.0:User", SCIM_EXTENSION],
                                ["urn:ietf:params:scim:schemas:core:2.0:User"]),
                    SCIM_EXTENSION: ({"trustedEngine": False, "accountAdmin": False}, "<absent>")},
    # UC OSS with authorization off (its default) accepts a grant and keeps nothing
    "grant": {"privilege_assignments": (GRANTED, "<absent>")},
    "get permissions after grant": {"privilege_assignments": (GRANTED, "<absent>")},
    # shardcat: once a metastore has an external location, no credentials outside one
    "temporary path credentials, governed": {"status": (400, 200)},
    # shardcat answers the 2.1 API's summary; UC OSS only all.yaml's metastore_id
    "metastore summary": {"cloud": ("local", "<absent>"), "global_metastore_id": ("local:local:<uuid>", "<absent>"),
                          "name": (ANY, "<absent>"), "region": ("local", "<absent>"),
                          "storage_root": (ANY, "<absent>")},
    # UC OSS's Delta API drops a column's comment from the Delta schema's field metadata
    "delta load plain table": {"metadata.columns.fields[1].metadata": ({"comment": "free text"}, "<absent>")},
    "delta staging table": STAGING_DIFFERENCES,
    # shardcat makes every new catalog's schema `default`, as Databricks does; UC OSS makes none
    "list schemas": {"schemas": (ANY, ANY)},
    # error codes: UC OSS names the securable (CATALOG_NOT_FOUND) and answers 400 for a taken name
    "missing catalog": {"error": ("NOT_FOUND", "CATALOG_NOT_FOUND")},
    "duplicate catalog": {"status": (409, 400), "error": ("ALREADY_EXISTS", "CATALOG_ALREADY_EXISTS")},
    "catalog without name": {"error": ("INVALID_PARAMETER_VALUE", "INVALID_ARGUMENT")},
    "name with a period": {"error": ("INVALID_PARAMETER_VALUE", "INVALID_ARGUMENT")},
    "schema in missing catalog": {"error": ("NOT_FOUND", "CATALOG_NOT_FOUND")},
    "malformed body": {"error": ("MALFORMED_REQUEST", "INVALID_ARGUMENT")},
    "missing table": {"error": ("NOT_FOUND", "TABLE_NOT_FOUND")},
    "delete model version": DELETED, "delete model": DELETED, "delete function": DELETED, "delete volume": DELETED,
    "delete table": DELETED,
    "deleted table is gone": {"error": ("NOT_FOUND", "TABLE_NOT_FOUND")},
    "delete external location": DELETED, "delete credential": DELETED, "delete catalog with force": DELETED,
    "deleted catalog is gone": {"error": ("NOT_FOUND", "CATALOG_NOT_FOUND")},
}


def as_expected(found: dict, expected: dict) -> bool:
    """`found` is `expected`, where ANY stands for any value present."""
    if set(found) != set(expected):
        return False
    for step, fields in expected.items():
        if set(found[step]) != set(fields):
            return False
        for field, pair in fields.items():
            if any(want is not ANY and want != got for want, got in zip(pair, found[step][field])):
                return False
    return True


def learn(side: Side, step: str, body) -> None:
    """Remember the ids later steps name."""
    if not isinstance(body, dict):
        return
    if step == "create external table":
        side.ids["table"] = body.get("table_id", "")
    if step == "delta staging table":
        side.ids["staging"] = body.get("table-id", "")
        side.ids["staging_location"] = body.get("location", "")
        side.staging = body
        features = body.get("required-protocol", {})
        side.echoed = frozenset({*body.get("required-properties", {}),
                                 *(f"delta.feature.{f}" for f in features.get("reader-features", []) +
                                   features.get("writer-features", []))})
    if step == "delta create table":
        side.ids["delta_table"] = (body.get("metadata") or {}).get("table-uuid", "")


def delta_create_body(side: Side) -> dict:
    """Write version 0 at the staging location (as a Delta client does), then the create request."""
    staging = side.staging
    props = {k: v for k, v in staging["required-properties"].items() if v is not None}
    protocol = staging["required-protocol"]
    ict = 1_700_000_000_000
    dlog.Storage(staging["location"]).write(dlog.commit_file(0), dlog.encode_actions([
        dlog.commit_info(ict, "CREATE TABLE"),
        {"protocol": {"minReaderVersion": protocol["min-reader-version"],
                      "minWriterVersion": protocol["min-writer-version"],
                      "readerFeatures": protocol["reader-features"], "writerFeatures": protocol["writer-features"]}},
        dlog.metadata(staging["table-id"], pa.schema([("id", pa.int64())]), props)]))
    return {"name": "dt", "location": staging["location"], "table-type": "MANAGED",
            "columns": {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                      "metadata": {}}]},
            "protocol": protocol, "properties": props, "last-commit-timestamp-ms": ict}


def delta_commit_body(side: Side) -> dict:
    return {"requirements": [{"type": "assert-table-uuid", "uuid": side.ids["delta_table"]}],
            "updates": [{"action": "add-commit", "commit": {
                "version": 1, "timestamp": 1_700_000_000_001, "file-name": f"{1:020d}.{uuid.uuid4()}.json",
                "file-size": 11, "file-modification-timestamp": 1_700_000_000_001}}]}


async def run_step(side: Side, step: str, method: str, path: str, body):
    if body == "DELTA_CREATE":
        body = delta_create_body(side)
    elif body == "DELTA_COMMIT":
        body = delta_commit_body(side)
    if isinstance(body, bytes):
        status, answer = await side.call(method, path, raw=body)
    else:
        status, answer = await side.call(method, path, body)
    learn(side, step, answer)
    return status, answer


async def test_one_scenario_on_both_servers(ws, uc, http, tmp_path):
    shard = Side("shardcat", ws.api, ws.headers, normalize_url(str(tmp_path / "shardcat")).rstrip("/"), http)
    oss = Side("UC OSS", uc.api, {}, normalize_url(str(tmp_path / "uc-oss")).rstrip("/"), http)
    found: dict[str, dict[str, tuple]] = {}
    added: set[str] = set()
    transcript = []
    for step, method, path, body in SCENARIO:
        (s_status, s_body), (u_status, u_body) = [await run_step(side, step, method, path, body)
                                                  for side in (shard, oss)]
        transcript.append(f"{step}: shardcat {s_status} {str(s_body)[:300]}\n   UC OSS {u_status} {str(u_body)[:300]}")
        diff = {}
        if s_status != u_status:
            diff["status"] = (s_status, u_status)
        if s_status == u_status and s_status < 300:
            echo = step.startswith("delta") and step != "delta staging table"
            for field, pair in differences(normalise(s_body, shard.root, shard.echoed if echo else frozenset()),
                                           normalise(u_body, oss.root, oss.echoed if echo else frozenset())).items():
                if pair[1] == "<absent>" and field.rsplit(".", 1)[-1] in SHARDCAT_ADDS:
                    added.add(field.rsplit(".", 1)[-1])
                else:
                    diff[field] = pair
        elif s_status >= 400 and u_status >= 400 and error_of(s_body) != error_of(u_body):
            diff["error"] = (error_of(s_body), error_of(u_body))
        if diff:
            found[step] = diff
    report = "\n".join(f"{step!r}: {d!r}," for step, d in found.items())
    print("\n".join(transcript))
    assert as_expected(found, EXPECTED), "differences between shardcat and UC OSS:\n" + report
    assert added == SHARDCAT_ADDS
