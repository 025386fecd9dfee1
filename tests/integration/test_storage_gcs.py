"""Google Cloud Storage through the catalog (issue 49): GCP credentials, gs:// locations, token vending.

fake-gcs-server is the storage, behind the stand-in's proxy (gcs_cloud.py): whatever reads or writes
here does so with a token STS issued for the boundary shardcat asked for, and the proxy enforces it.
Every surface that vends (table, volume and path credentials, the UC Delta API) is asked as an admin,
as a user with a grant and as a user without; the URL spellings reach one decision.
"""

from __future__ import annotations

import json
import time
import uuid

import gcsfs
import pytest
from google.oauth2.credentials import Credentials as BearerToken

from gcs_cloud import gcs, gcs_env, key_fields, new_service_account  # noqa: F401  (fixtures)
from governance_users import grant, user
from shardcat.governance import vending_gcs
from test_vending import ok

pytestmark = pytest.mark.gcs_emulator

COLS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '"long"', "position": 0}]


async def lake(ws, g, *, read_only: bool = False) -> dict:
    """Catalog, schema, the credential, a location over gs://lake/data, tables t and u, volume v."""
    await ok(ws, "POST", "/catalogs", json={"name": "main"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "main"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "gcp", "gcp_service_account_key": key_fields(g)})
    await ok(ws, "POST", "/external-locations", json={"name": "data", "url": "gs://lake/data", "credential_name": "gcp",
                                                      "read_only": read_only})
    await ok(ws, "POST", "/tables", json={
        "name": "u", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": "gs://lake/data/u"})
    await ok(ws, "POST", "/volumes", json={"name": "v", "catalog_name": "main", "schema_name": "s",
                                           "volume_type": "EXTERNAL", "storage_location": "gs://lake/data/v"})
    return await ok(ws, "POST", "/tables", json={
        "name": "t", "catalog_name": "main", "schema_name": "s", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "columns": COLS, "storage_location": "gs://lake/data/t"})


def token_of(answer: dict) -> str:
    return answer["gcp_oauth_token"]["oauth_token"]


def store(answer: dict) -> gcsfs.GCSFileSystem:
    """What an engine builds from a vended answer: a GCS client at the vended endpoint with the token."""
    return gcsfs.GCSFileSystem(token=BearerToken(token_of(answer)), endpoint_url=answer["endpoint_url"],
                               skip_instance_cache=True)


def refused(call) -> bool:
    try:
        call()
    except OSError:
        return True
    return False


def no_token(body) -> bool:
    return "oauth_token" not in json.dumps(body)


async def test_the_credential_keeps_its_key(ws, server, gcs):
    fields = key_fields(gcs)
    made = await ok(ws, "POST", "/credentials", json={"name": "gcp", "gcp_service_account_key": fields})
    assert made["gcp_service_account_key"] == {"email": fields["email"], "private_key_id": fields["private_key_id"],
                                               "endpoint_url": gcs.storage_url}
    shown = [made, await ok(ws, "GET", "/credentials/gcp"), await ok(ws, "GET", "/storage-credentials/gcp"),
             await ok(ws, "GET", "/storage-credentials")]
    assert all("PRIVATE KEY" not in json.dumps(v) and "private_key\"" not in json.dumps(v) for v in shown)
    stored = json.loads(await server.store.pool.fetchval(
        "SELECT info::text FROM assets WHERE metastore_id = $1 AND type = 'credential' AND name = 'gcp'",
        uuid.UUID(ws.metastore_id)))["gcp_service_account_key"]["private_key"]
    assert stored.startswith("sealed:v1:") and "PRIVATE KEY" not in stored
    assert server.store.secrets.open(stored) == fields["private_key"]


@pytest.mark.parametrize("change, word", [
    ({"email": "not-an-email"}, "email"),
    ({"private_key": "ssh-rsa AAAA"}, "private_key"),
    ({"private_key": None}, "private_key"),
    ({"endpoint_url": "ftp://127.0.0.1:1"}, "endpoint_url"),
    ({"endpoint_url": "http://127.0.0.1:1/path?x=1"}, "endpoint_url"),
])
async def test_bad_credentials_are_refused(ws, gcs, change, word):
    body = {k: v for k, v in {**key_fields(gcs), **change}.items() if v is not None}
    status, answer = await ws.call("POST", "/storage-credentials", json={"name": "bad", "gcp_service_account_key": body})
    assert (status, answer["error_code"]) == (400, "INVALID_PARAMETER_VALUE"), answer
    assert word in answer["message"] and "PRIVATE KEY" not in answer["message"], answer
    assert (await ws.call("GET", "/storage-credentials/bad"))[0] == 404


async def test_table_read_token_reads_the_table_only(ws, gcs_env):
    table = await lake(ws, gcs_env)
    answer = await ok(ws, "POST", "/temporary-table-credentials", json={"table_id": table["table_id"], "operation": "READ"})
    assert set(answer) == {"gcp_oauth_token", "expiration_time", "url", "endpoint_url"}
    assert answer["url"] == "gs://lake/data/t" and answer["endpoint_url"] == gcs_env.storage_url
    # Google's expiry of the token, never later; a cached token is handed out only well before it.
    real = gcs_env.token(token_of(answer))["expires_at"]
    assert real - 2 < answer["expiration_time"] / 1000 <= real + 0.01
    assert answer["expiration_time"] / 1000 > time.time() + vending_gcs.SAFETY_MARGIN_SECONDS - 5
    fs = store(answer)
    assert fs.cat("lake/data/t/part-0.parquet") == b"content of data/t/part-0.parquet"
    assert sorted(fs.find("lake/data/t")) == ["lake/data/t/_delta_log/0.json", "lake/data/t/part-0.parquet"]
    for outside in ("lake/data/u/part-0.parquet", "lake/data/t-old/part-0.parquet", "lake/secret/x", "other/data/t/x"):
        assert refused(lambda: fs.cat(outside)), outside
    assert refused(lambda: fs.pipe("lake/data/t/new.parquet", b"x"))
    assert refused(lambda: fs.rm_file("lake/data/t/part-0.parquet"))
    assert "data/t/part-0.parquet" in gcs_env.objects("lake", "data/t/")


async def test_table_read_write_token_writes_inside_only(ws, gcs_env):
    table = await lake(ws, gcs_env)
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    fs = store(answer)
    fs.pipe("lake/data/t/written.parquet", b"new")
    assert fs.cat("lake/data/t/written.parquet") == b"new"
    fs.rm_file("lake/data/t/written.parquet")
    for outside in ("lake/data/u/x", "lake/data/t-old/x", "other/data/t/y"):
        assert refused(lambda: fs.pipe(outside, b"x")), outside
    rules = gcs_env.token(token_of(answer))["rules"]
    assert [r["terms"] for r in rules] == [[["name", "projects/_/buckets/lake/objects/data/t/"], ["list", "data/t/"]]]


async def test_volume_tokens_read_and_write_the_volume(ws, gcs_env):
    await lake(ws, gcs_env)
    volume = await ok(ws, "GET", "/volumes/main.s.v")
    read = await ok(ws, "POST", "/temporary-volume-credentials",
                    json={"volume_id": volume["volume_id"], "operation": "READ_VOLUME"})
    assert read["url"] == "gs://lake/data/v" and store(read).cat("lake/data/v/f.csv") == b"content of data/v/f.csv"
    assert refused(lambda: store(read).pipe("lake/data/v/g.csv", b"x"))
    write = await ok(ws, "POST", "/temporary-volume-credentials",
                     json={"volume_id": volume["volume_id"], "operation": "WRITE_VOLUME"})
    store(write).pipe("lake/data/v/g.csv", b"x")
    assert refused(lambda: store(write).cat("lake/data/t/part-0.parquet"))


async def test_path_tokens_in_the_location(ws, gcs_env):
    await lake(ws, gcs_env)
    answer = await ok(ws, "POST", "/temporary-path-credentials", json={"url": "gs://lake/data/free", "operation": "PATH_READ"})
    assert store(answer).cat("lake/data/free/f.csv") == b"content of data/free/f.csv"
    assert refused(lambda: store(answer).cat("lake/data/t/part-0.parquet"))
    written = await ok(ws, "POST", "/temporary-path-credentials",
                       json={"url": "gs://lake/data/free", "operation": "PATH_READ_WRITE"})
    store(written).pipe("lake/data/free/g.csv", b"g")
    assert refused(lambda: store(written).pipe("lake/data/t/g.csv", b"g"))
    made = await ok(ws, "POST", "/temporary-path-credentials",
                    json={"url": "gs://lake/data/new_table", "operation": "PATH_CREATE_TABLE"})
    store(made).pipe("lake/data/new_table/_delta_log/0.json", b"{}")
    status, body = await ws.call("POST", "/temporary-path-credentials",
                                 json={"url": "gs://lake/data/t/sub", "operation": "PATH_CREATE_TABLE"})
    assert status == 400 and no_token(body), body         # inside table t: no new table there


async def test_grants_decide_who_gets_a_token(ws, server, gcs_env):
    table = await lake(ws, gcs_env)
    exchanges = len(gcs_env.exchanges)
    nobody = await user(server, ws)
    status, body = await nobody.call("POST", "/temporary-table-credentials",
                                     json={"table_id": table["table_id"], "operation": "READ"})
    assert status in (403, 404) and no_token(body), body
    volume = await ok(ws, "GET", "/volumes/main.s.v")
    status, body = await nobody.call("POST", "/temporary-volume-credentials",
                                     json={"volume_id": volume["volume_id"], "operation": "READ_VOLUME"})
    assert status in (403, 404) and no_token(body), body
    status, body = await nobody.call("POST", "/temporary-path-credentials",
                                     json={"url": "gs://lake/data/free", "operation": "PATH_READ"})
    assert status in (400, 403) and no_token(body), body
    status, body = await nobody.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/t/credentials",
                                     params={"operation": "READ"})
    assert status in (403, 404) and no_token(body), body
    assert len(gcs_env.exchanges) == exchanges            # refused before Google was asked anything
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.t", reader.name, "SELECT")
    got = await ok(reader, "POST", "/temporary-table-credentials", json={"table_id": table["table_id"], "operation": "READ"})
    assert store(got).cat("lake/data/t/part-0.parquet")
    status, body = await reader.call("POST", "/temporary-table-credentials",
                                     json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert status == 403 and no_token(body), body
    got = await ok(reader, "POST", "/temporary-path-credentials",
                   json={"url": "gs://lake/data/t/_delta_log", "operation": "PATH_READ"})
    assert store(got).cat("lake/data/t/_delta_log/0.json") and refused(lambda: store(got).cat("lake/data/t/part-0.parquet"))
    for url, wanted in (("gs://lake/data/u", 403), ("gs://lake/data/free", 400)):
        status, body = await reader.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert status == wanted and no_token(body), (url, body)


@pytest.mark.parametrize("spelling", [
    "gs://LAKE/data/t",
    "gs://lake/data/t/",
    "gs://lake/data//x/../t/.",
    "gs://lake/data/%74",
])
async def test_spellings_of_the_table_path_reach_the_same_decision(ws, server, gcs_env, spelling):
    await lake(ws, gcs_env)
    answer = await ok(ws, "POST", "/temporary-path-credentials", json={"url": spelling, "operation": "PATH_READ"})
    assert answer["url"] == "gs://lake/data/t" and store(answer).cat("lake/data/t/part-0.parquet")
    other = await user(server, ws)
    await grant(ws, "catalog", "main", other.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", other.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.u", other.name, "SELECT")
    status, body = await other.call("POST", "/temporary-path-credentials", json={"url": spelling, "operation": "PATH_READ"})
    assert status == 403 and no_token(body), body


@pytest.mark.parametrize("spelling", [
    "gs://lake/data%2Ft",            # an encoded separator
    "gs://lake/data/t%5Cx",          # an encoded backslash
    "gs://lake/data/%2e%2e/secret",  # dot segments only once decoded
    "gs://lake/outside",             # in no external location
    "gs://other/data/t",
    "gs://lake:443/data/t",          # a port in a bucket
    "gcs://lake/data/t",             # not a scheme shardcat knows
])
async def test_spellings_that_are_refused(ws, gcs_env, spelling):
    await lake(ws, gcs_env)
    exchanges = len(gcs_env.exchanges)
    status, body = await ws.call("POST", "/temporary-path-credentials", json={"url": spelling, "operation": "PATH_READ"})
    assert status == 400 and no_token(body), body
    assert len(gcs_env.exchanges) == exchanges


async def test_a_location_on_a_bucket_spelled_in_capitals_is_the_same_bucket(ws, gcs_env):
    await lake(ws, gcs_env)
    status, body = await ws.call("POST", "/external-locations", json={"name": "dup", "url": "gs://LAKE/data/t",
                                                                      "credential_name": "gcp"})
    assert status == 400, body       # it overlaps `data`: one asset per path, whatever the case of the bucket


async def test_a_read_only_location_vends_no_write_token(ws, gcs_env):
    table = await lake(ws, gcs_env, read_only=True)
    status, body = await ws.call("POST", "/temporary-table-credentials",
                                 json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert status == 403 and "read-only" in body["message"] and no_token(body), body


async def test_the_catalogs_own_service_account(ws, gcs_env, monkeypatch, tmp_path):
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(gcs_env.account.key))
    monkeypatch.setenv("SHARDCAT_GCP_SERVICE_ACCOUNT_KEY", str(path))
    made = await ok(ws, "POST", "/storage-credentials", json={"name": "own", "databricks_gcp_service_account": {}})
    assert made["databricks_gcp_service_account"] == {"email": gcs_env.account.email}
    await ok(ws, "POST", "/external-locations", json={"name": "free", "url": "gs://lake/data/free", "credential_name": "own"})
    answer = await ok(ws, "POST", "/temporary-path-credentials", json={"url": "gs://lake/data/free", "operation": "PATH_READ"})
    assert "endpoint_url" not in answer         # the catalog's own account names no emulator
    fs = gcsfs.GCSFileSystem(token=BearerToken(token_of(answer)), endpoint_url=gcs_env.storage_url, skip_instance_cache=True)
    assert fs.cat("lake/data/free/f.csv") == b"content of data/free/f.csv"


async def test_a_key_google_does_not_know_vends_nothing(ws, gcs_env):
    stranger = new_service_account("stranger", {"lake"})
    await ok(ws, "POST", "/storage-credentials", json={"name": "x", "gcp_service_account_key": key_fields(gcs_env, stranger)})
    await ok(ws, "POST", "/external-locations", json={"name": "x", "url": "gs://lake/secret", "credential_name": "x"})
    status, body = await ws.call("POST", "/temporary-path-credentials", json={"url": "gs://lake/secret", "operation": "PATH_READ"})
    assert (status, body["error_code"]) == (400, "FAILED_PRECONDITION") and no_token(body), body


async def test_the_token_expires_with_the_answer(ws, gcs_env):
    table = await lake(ws, gcs_env)
    gcs_env.set_token_seconds(60)          # under the cache's five-minute margin: never cached
    vending_gcs.GCP.cache.clear()          # earlier tests' hour-long tokens for this account
    try:
        answer = await ok(ws, "POST", "/temporary-table-credentials",
                          json={"table_id": table["table_id"], "operation": "READ"})
        real = gcs_env.token(token_of(answer))["expires_at"]
        assert real - 2 < answer["expiration_time"] / 1000 <= real + 0.01     # never later than Google's
        assert store(answer).cat("lake/data/t/part-0.parquet")
        gcs_env.expire(token_of(answer))
        with pytest.raises(Exception):          # gcsfs raises its HttpError for a 401
            store(answer).cat("lake/data/t/part-0.parquet")
        assert gcs_env.refusals[-1].endswith("the access token has expired")
        again = await ok(ws, "POST", "/temporary-table-credentials",
                         json={"table_id": table["table_id"], "operation": "READ"})
        assert token_of(again) != token_of(answer)                 # a token that short-lived is not reused
    finally:
        gcs_env.set_token_seconds(3600)
        vending_gcs.GCP.cache.clear()


async def test_unexpired_tokens_are_reused(ws, gcs_env):
    table = await lake(ws, gcs_env)
    body = {"table_id": table["table_id"], "operation": "READ"}
    first = await ok(ws, "POST", "/temporary-table-credentials", json=body)
    exchanges = len(gcs_env.exchanges)
    assert await ok(ws, "POST", "/temporary-table-credentials", json=body) == first
    assert len(gcs_env.exchanges) == exchanges
    write = await ok(ws, "POST", "/temporary-table-credentials", json={**body, "operation": "READ_WRITE"})
    assert token_of(write) != token_of(first)


async def test_the_delta_api_answers_the_token(ws, gcs_env):
    await lake(ws, gcs_env)
    status, body = await ws.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/t/credentials", params={"operation": "READ"})
    assert status == 200, body
    [credential] = body["storage-credentials"]
    assert credential["prefix"] == "gs://lake/data/t" and credential["operation"] == "READ"
    config = credential["config"]
    assert set(config) == {"gcs.oauth-token", "gcs.service.host"} and config["gcs.service.host"] == gcs_env.storage_url
    fs = gcsfs.GCSFileSystem(token=BearerToken(config["gcs.oauth-token"]), endpoint_url=config["gcs.service.host"],
                             skip_instance_cache=True)
    assert fs.cat("lake/data/t/part-0.parquet") and refused(lambda: fs.pipe("lake/data/t/x", b"x"))
    status, body = await ws.call("GET", "/delta/v1/temporary-path-credentials",
                                 params={"location": "gs://lake/data/free", "operation": "READ"})
    assert status == 200, body
    config = body["storage-credentials"][0]["config"]
    fs = gcsfs.GCSFileSystem(token=BearerToken(config["gcs.oauth-token"]), endpoint_url=config["gcs.service.host"],
                             skip_instance_cache=True)
    assert fs.cat("lake/data/free/f.csv") and refused(lambda: fs.cat("lake/data/t/part-0.parquet"))


# ---- attacks ------------------------------------------------------------------------------------------


async def test_a_path_written_to_break_out_of_the_condition_stays_a_literal(ws, gcs_env):
    """A prefix holding quotes and `||`: the boundary's condition still names exactly that prefix (the
    stand-in parses the CEL literal as Google would), so the token reaches nothing else."""
    await lake(ws, gcs_env)
    url = "gs://lake/data/x%27)%20%7C%7C%20true%20%7C%7C%20(%27y"
    answer = await ok(ws, "POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
    prefix = "data/x') || true || ('y"
    rules = gcs_env.token(token_of(answer))["rules"]
    assert [r["terms"] for r in rules] == [[["name", f"projects/_/buckets/lake/objects/{prefix}/"], ["list", f"{prefix}/"]]]
    assert refused(lambda: store(answer).cat("lake/data/t/part-0.parquet"))
    assert refused(lambda: store(answer).cat("lake/secret/x"))


async def test_the_location_root_is_not_handed_to_a_table_reader(ws, server, gcs_env):
    await lake(ws, gcs_env)
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG")
    await grant(ws, "schema", "main.s", reader.name, "USE SCHEMA")
    await grant(ws, "table", "main.s.t", reader.name, "SELECT")
    exchanges = len(gcs_env.exchanges)
    for url in ("gs://lake/data", "gs://lake", "gs://LAKE/data/", "gs://lake/data/t/.."):
        status, body = await reader.call("POST", "/temporary-path-credentials", json={"url": url, "operation": "PATH_READ"})
        assert status in (400, 403) and no_token(body), (url, body)
    assert len(gcs_env.exchanges) == exchanges


async def test_a_credential_cannot_point_the_catalog_at_another_token_service(ws, gcs_env):
    """A key's own token_uri (Google's key files carry one) is not a credential field: dropped on create,
    and vending calls only the server's configured endpoints."""
    fields = {**key_fields(gcs_env), "token_uri": "http://127.0.0.1:9/token", "universe_domain": "evil.example"}
    made = await ok(ws, "POST", "/storage-credentials", json={"name": "k", "gcp_service_account_key": fields})
    assert "token_uri" not in made["gcp_service_account_key"] and "universe_domain" not in made["gcp_service_account_key"]
    await ok(ws, "POST", "/external-locations", json={"name": "free", "url": "gs://lake/data/free", "credential_name": "k"})
    answer = await ok(ws, "POST", "/temporary-path-credentials", json={"url": "gs://lake/data/free", "operation": "PATH_READ"})
    assert store(answer).cat("lake/data/free/f.csv")


@pytest.mark.parametrize("spelling", ["gs://la..ke/data/t", "gs://-lake/data/t", "gs://lake%2Fdata/t", "gs:///data/t",
                                      "gs://lake/data/t%00", "gs://user@lake/data/t"])
async def test_bucket_spellings_that_are_refused(ws, gcs_env, spelling):
    await lake(ws, gcs_env)
    status, body = await ws.call("POST", "/temporary-path-credentials", json={"url": spelling, "operation": "PATH_READ"})
    assert status == 400 and no_token(body), body
    status, body = await ws.call("POST", "/external-locations", json={"name": "x", "url": spelling, "credential_name": "gcp"})
    assert status == 400, body


async def test_batched_resolve_hands_out_the_same_scoped_tokens(ws, server, gcs_env):
    """POST /resolve attaches the same vending's answers: a reader's READ token for t works, its WRITE item
    is refused, and by path the owning table's token is handed out."""
    await lake(ws, gcs_env)
    reader = await user(server, ws)
    await grant(ws, "catalog", "main", reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", "main.s.t", reader.name, "SELECT")
    out = await ok(reader, "POST", "/resolve", json={"items": [
        {"name": "main.s.t"}, {"name": "main.s.t", "operation": "WRITE"}, {"path": "gs://lake/data/t/part-0.parquet"}]})
    read, write, by_path = out["items"]
    credentials = read["temporary_credentials"]
    assert credentials["url"] == "gs://lake/data/t" and store(credentials).cat("lake/data/t/part-0.parquet")
    assert refused(lambda: store(credentials).cat("lake/data/u/part-0.parquet"))
    assert refused(lambda: store(credentials).pipe("lake/data/t/x", b"x"))
    assert write["authorization"]["allowed"] is False and "temporary_credentials" not in write, write
    assert by_path["temporary_credentials"]["url"] == "gs://lake/data/t"


async def test_a_managed_table_under_a_catalogs_gs_root(ws, gcs_env):
    """Managed storage on gs://: a catalog whose storage root lies in the external location; its managed
    table's token reaches the table's own directory under the root, not the root or a sibling."""
    await lake(ws, gcs_env)
    await ok(ws, "POST", "/catalogs", json={"name": "m", "storage_root": "gs://lake/data/mroot"})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": "m"})
    table = await ok(ws, "POST", "/tables", json={"name": "t", "catalog_name": "m", "schema_name": "s",
                                                  "table_type": "MANAGED", "data_source_format": "DELTA", "columns": COLS})
    location = table["storage_location"]
    assert location.startswith("gs://lake/data/mroot/") and location != "gs://lake/data/mroot"
    answer = await ok(ws, "POST", "/temporary-table-credentials",
                      json={"table_id": table["table_id"], "operation": "READ_WRITE"})
    assert answer["url"] == location
    fs = store(answer)
    fs.pipe(f"{location[len('gs://'):]}/_delta_log/0.json", b"{}")
    assert refused(lambda: fs.pipe("lake/data/mroot/other.json", b"x"))
    assert refused(lambda: fs.cat("lake/data/t/part-0.parquet"))
