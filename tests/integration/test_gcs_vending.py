"""gs:// vending (governance/vending_gcs.py) against fake-gcs-server behind the loopback Google stand-in.

The emulator checks no token; the stand-in's proxy does (gcs_cloud.py): a vended token reaches only
what its Credential Access Boundary allows, as Google's storage would enforce it, and STS records
the boundary it was asked for. Engines through the catalog: test_gcs_engines.py.
"""

from __future__ import annotations

import json
import time

import gcsfs
import pytest
import requests
from google.oauth2.credentials import Credentials as BearerToken

import gcs_cloud
from shardcat.errors import CatalogError
from shardcat.governance import vending_gcs
from shardcat.governance.vending_gcs import access_boundary, boundary_condition, cel_literal

pytestmark = pytest.mark.gcs_emulator

OBJECTS = ("data/t1/part-0.parquet", "data/t1/_delta_log/0.json", "data/t1-old/part-0.parquet",
           "data/t2/part-0.parquet", "data/it's/x", "secret/x")


@pytest.fixture(scope="module")
def google():
    g = gcs_cloud.Google().start()
    account = g.add_account(gcs_cloud.new_service_account("lake-reader", {"lake"}))
    g.create_bucket("lake")
    g.create_bucket("other")
    for name in OBJECTS:
        g.put("lake", name, f"content of {name}".encode())
    g.put("other", "data/t1/x", b"other bucket")
    g.account = account
    yield g
    g.stop()


@pytest.fixture
def google_env(google, monkeypatch):
    monkeypatch.setenv("SHARDCAT_GCP_TOKEN_URI", google.token_url)
    monkeypatch.setenv("SHARDCAT_GCP_STS_ENDPOINT", google.sts_url)
    return google


def key_fields(google, account=None) -> dict:
    account = account or google.account
    return {"email": account.email, "private_key_id": account.key["private_key_id"],
            "private_key": account.key["private_key"], "endpoint_url": google.storage_url}


def fs(google, token: str) -> gcsfs.GCSFileSystem:
    # A Credentials object, not the bare string: gcsfs asks Google's tokeninfo endpoint about a bare one.
    return gcsfs.GCSFileSystem(token=BearerToken(token), endpoint_url=google.storage_url, skip_instance_cache=True)


async def vended(google, url: str, *, write: bool, vendor=None) -> dict:
    return await (vendor or vending_gcs.GcpVendor()).vend("gcp_service_account_key", key_fields(google), url,
                                                          write=write)


# ---- the boundary, pure --------------------------------------------------------------------------


def test_boundary_read_and_write_roles_and_the_prefix_condition():
    read = access_boundary("lake", "data/t1", write=False).to_json()["accessBoundary"]["accessBoundaryRules"]
    write = access_boundary("lake", "data/t1", write=True).to_json()["accessBoundary"]["accessBoundaryRules"]
    assert [r["availablePermissions"] for r in read] == [["inRole:roles/storage.objectViewer"]]
    assert [r["availablePermissions"] for r in write] == [["inRole:roles/storage.objectAdmin"]]
    assert read[0]["availableResource"] == "//storage.googleapis.com/projects/_/buckets/lake"
    assert gcs_cloud.condition_terms(read[0]["availabilityCondition"]["expression"]) == [
        ("name", "projects/_/buckets/lake/objects/data/t1/"), ("list", "data/t1/")]
    # A whole bucket: no condition at all.
    whole = access_boundary("lake", "", write=False).to_json()["accessBoundary"]["accessBoundaryRules"]
    assert "availabilityCondition" not in whole[0] and boundary_condition("lake", "") is None


def test_quotes_and_backslashes_in_a_prefix_stay_inside_the_literal():
    for prefix in ("a'b", "it's/x", "a\\' || true || 'b", "x\\"):
        terms = gcs_cloud.condition_terms(boundary_condition("lake", prefix))
        assert terms == [("name", f"projects/_/buckets/lake/objects/{prefix}/"), ("list", prefix + "/")], prefix
    assert cel_literal("a'b\\c") == "'a\\'b\\\\c'"


# ---- vending against the stand-in ---------------------------------------------------------------


async def test_read_token_reads_the_prefix_only(google_env):
    answer = await vended(google_env, "gs://lake/data/t1", write=False)
    assert set(answer) == {"gcp_oauth_token", "expiration_time", "url", "endpoint_url"}
    assert answer["url"] == "gs://lake/data/t1" and answer["endpoint_url"] == google_env.storage_url
    store = fs(google_env, answer["gcp_oauth_token"]["oauth_token"])
    assert store.cat("lake/data/t1/part-0.parquet") == b"content of data/t1/part-0.parquet"
    assert sorted(store.find("lake/data/t1")) == ["lake/data/t1/_delta_log/0.json", "lake/data/t1/part-0.parquet"]
    for outside in ("lake/data/t1-old/part-0.parquet", "lake/data/t2/part-0.parquet", "lake/secret/x",
                    "other/data/t1/x"):
        with pytest.raises(OSError):
            store.cat(outside)
    with pytest.raises(OSError):
        store.ls("lake/data")                       # listing above the prefix
    with pytest.raises(OSError):
        store.pipe("lake/data/t1/new.parquet", b"x")   # read-only
    assert "lake/data/t1/new.parquet" not in google_env.objects("lake")


async def test_write_token_writes_and_deletes_inside_only(google_env):
    answer = await vended(google_env, "gs://lake/data/t1", write=True)
    store = fs(google_env, answer["gcp_oauth_token"]["oauth_token"])
    store.pipe("lake/data/t1/_delta_log/1.json", b"{}")
    store.pipe("lake/data/t1/big.bin", b"x" * (9 << 20))       # over gcsfs's block: a resumable upload
    assert {"data/t1/_delta_log/1.json", "data/t1/big.bin"} <= set(google_env.objects("lake", "data/t1/"))
    store.rm_file("lake/data/t1/big.bin")
    assert "data/t1/big.bin" not in google_env.objects("lake")
    for outside in ("lake/data/t1-old/x", "lake/data/t2/x", "lake/x", "other/data/t1/y"):
        with pytest.raises(OSError):
            store.pipe(outside, b"x")
    with pytest.raises(OSError):
        store.rm_file("lake/data/t2/part-0.parquet")
    assert "data/t2/part-0.parquet" in google_env.objects("lake")


async def test_sts_was_asked_for_exactly_the_boundary(google_env):
    answer = await vended(google_env, "gs://lake/data/t1", write=True)
    known = google_env.token(answer["gcp_oauth_token"]["oauth_token"])
    assert known["account"] == google_env.account.email
    assert known["rules"] == [{"bucket": "lake", "terms": [["name", "projects/_/buckets/lake/objects/data/t1/"],
                                                           ["list", "data/t1/"]],
                               "permissions": sorted(gcs_cloud.ROLE_PERMISSIONS["inRole:roles/storage.objectAdmin"])}]
    asked = google_env.exchanges[-1]
    assert asked["subject_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert google_env.token(asked["subject_token"])["rules"] is None       # exchanged from the account's own token


async def test_an_encoded_name_and_a_quote_are_scoped_exactly(google_env):
    # The canonical URL's %27 is the object name's quote: the boundary names the decoded prefix.
    answer = await vended(google_env, "gs://lake/data/it%27s", write=False)
    store = fs(google_env, answer["gcp_oauth_token"]["oauth_token"])
    assert store.cat("lake/data/it's/x") == b"content of data/it's/x"
    with pytest.raises(OSError):
        store.cat("lake/data/t1/part-0.parquet")


async def test_answers_are_cached_and_one_source_token_serves_many_prefixes(google_env):
    vendor = vending_gcs.GcpVendor()
    first = await vended(google_env, "gs://lake/data/t1", write=False, vendor=vendor)
    again = await vended(google_env, "gs://lake/data/t1", write=False, vendor=vendor)
    assert again == first
    other = await vended(google_env, "gs://lake/data/t2", write=False, vendor=vendor)
    rw = await vended(google_env, "gs://lake/data/t1", write=True, vendor=vendor)
    assert len({first["gcp_oauth_token"]["oauth_token"], other["gcp_oauth_token"]["oauth_token"],
                rw["gcp_oauth_token"]["oauth_token"]}) == 3
    assert vendor.stats["source_tokens"] == 1 and vendor.stats["exchanges"] == 3


async def test_the_token_expires_with_its_source(google_env):
    google_env.set_token_seconds(60)
    try:
        answer = await vended(google_env, "gs://lake/data/t1", write=False)
        token = answer["gcp_oauth_token"]["oauth_token"]
        known = google_env.token(token)
        source = google_env.token(google_env.exchanges[-1]["subject_token"])
        assert known["expires_at"] == source["expires_at"]                  # it dies with its source
        assert known["expires_at"] - 2 < answer["expiration_time"] / 1000 <= known["expires_at"] + 0.01
        store = fs(google_env, token)
        assert store.cat("lake/data/t1/part-0.parquet")
        google_env.expire(token)
        r = requests.get(f"{google_env.storage_url}/lake/data/t1/part-0.parquet",
                         headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert r.status_code == 401
        # A token this short-lived is never cached: the next answer is a fresh, live one.
        fresh = await vended(google_env, "gs://lake/data/t1", write=False)
        assert fresh["gcp_oauth_token"]["oauth_token"] != token
    finally:
        google_env.set_token_seconds(3600)


# ---- refusals: Google's, and shardcat's own ----------------------------------------------------------


async def test_a_key_google_does_not_know_is_refused(google_env):
    stranger = gcs_cloud.new_service_account("stranger", {"lake"})      # never registered with Google
    with pytest.raises(CatalogError) as e:
        await vending_gcs.GcpVendor().vend("gcp_service_account_key", key_fields(google_env, stranger),
                                           "gs://lake/data/t1", write=False)
    assert e.value.code == "FAILED_PRECONDITION" and "OAuth" in str(e.value)


async def test_a_bucket_the_account_may_not_use_stays_closed(google_env):
    # The boundary can only narrow: the token for other/ is issued, but IAM keeps the account out.
    answer = await vended(google_env, "gs://other/data/t1", write=False)
    store = fs(google_env, answer["gcp_oauth_token"]["oauth_token"])
    with pytest.raises(OSError):
        store.cat("other/data/t1/x")


async def test_unreachable_sts_is_temporarily_unavailable(google_env, monkeypatch):
    monkeypatch.setenv("SHARDCAT_GCP_STS_ENDPOINT", "http://127.0.0.1:9/v1/token")
    with pytest.raises(CatalogError) as e:
        await vended(google_env, "gs://lake/data/t1", write=False)
    assert e.value.code == "TEMPORARILY_UNAVAILABLE"


async def test_the_keys_own_token_uri_is_never_called(google_env):
    # Only the server's configured endpoints are called: a token_uri inside the fields is not read.
    fields = {**key_fields(google_env), "token_uri": "http://127.0.0.1:9/token"}
    answer = await vending_gcs.GcpVendor().vend("gcp_service_account_key", fields, "gs://lake/data/t1", write=False)
    assert answer["gcp_oauth_token"]["oauth_token"]


async def test_a_bad_private_key_is_a_clear_error(google_env):
    fields = {**key_fields(google_env), "private_key": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"}
    with pytest.raises(CatalogError) as e:
        await vending_gcs.GcpVendor().vend("gcp_service_account_key", fields, "gs://lake/data/t1", write=False)
    assert e.value.code == "FAILED_PRECONDITION"


async def test_databricks_gcp_service_account_uses_the_catalogs_own_key(google_env, monkeypatch, tmp_path):
    path = tmp_path / "catalog-sa.json"
    path.write_text(json.dumps(google_env.account.key))
    with pytest.raises(CatalogError) as e:
        await vending_gcs.GcpVendor().vend("databricks_gcp_service_account", {}, "gs://lake/data/t1", write=False)
    assert e.value.code == "FAILED_PRECONDITION" and "SHARDCAT_GCP_SERVICE_ACCOUNT_KEY" in str(e.value)
    monkeypatch.setenv("SHARDCAT_GCP_SERVICE_ACCOUNT_KEY", str(path))
    answer = await vending_gcs.GcpVendor().vend("databricks_gcp_service_account", {"email": google_env.account.email},
                                                "gs://lake/data/t1", write=False)
    assert google_env.token(answer["gcp_oauth_token"]["oauth_token"])["account"] == google_env.account.email
    with pytest.raises(CatalogError):
        await vending_gcs.GcpVendor().vend("databricks_gcp_service_account", {"email": "someone@else.iam.gserviceaccount.com"},
                                           "gs://lake/data/t1", write=False)


def test_credential_fields_are_checked():
    ok = vending_gcs.check_fields("gcp_service_account_key", {
        "email": "a@p.iam.gserviceaccount.com", "private_key_id": "k",
        "private_key": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n",
        "endpoint_url": "HTTP://127.0.0.1:4443/"})
    assert ok["endpoint_url"] == "http://127.0.0.1:4443"
    for bad in ({"email": "not an email"}, {"private_key": "ssh-rsa AAAA"},
                {"endpoint_url": "http://127.0.0.1:4443/path"}, {"endpoint_url": "ftp://x"},
                {"endpoint_url": "http://user@host"}):
        fields = {"email": "a@p.iam.gserviceaccount.com", "private_key_id": "k",
                  "private_key": "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n", **bad}
        with pytest.raises(CatalogError) as e:
            vending_gcs.check_fields("gcp_service_account_key", fields)
        assert e.value.code == "INVALID_PARAMETER_VALUE"


# ---- V4 signed URLs (Delta Sharing) ---------------------------------------------------------------


def test_signed_url_reads_its_one_object(google_env):
    url = vending_gcs.signed_url("gcp_service_account_key", key_fields(google_env), "gs://lake/data/t1/part-0.parquet", 60)
    assert url.startswith(google_env.storage_url + "/lake/data/t1/part-0.parquet?") and "X-Goog-Signature=" in url
    assert requests.get(url, timeout=10).content == b"content of data/t1/part-0.parquet"
    # The signature covers the path: another object with the same query is refused.
    assert requests.get(url.replace("t1/part-0", "t2/part-0"), timeout=10).status_code == 403
    assert requests.put(url, data=b"x", timeout=10).status_code == 403           # signed for GET only
    expired = vending_gcs.signed_url("gcp_service_account_key", key_fields(google_env),
                                     "gs://lake/data/t1/part-0.parquet", 1)
    time.sleep(2.2)
    assert requests.get(expired, timeout=10).status_code == 403
