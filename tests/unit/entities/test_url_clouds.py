"""Azure and GCS storage URLs (issue 49): the spellings each cloud's URLs are canonicalised from or
refused in, and the parts vending reads from them (`adls_parts`, `gs_bucket_key`).

The general rules (encoded separators, dot segments, control characters) are shared with s3:// and
tested for every scheme in test_url_spellings.py; these are the rules only these clouds have.
"""

from __future__ import annotations

import pytest

from shardcat.entities.urls import InvalidUrl, adls_parts, gs_bucket_key, is_within, normalize_url
from shardcat.cache.url_trie import UrlTrie

ADLS = "abfss://lake@acct.dfs.core.windows.net"


@pytest.mark.parametrize("spelling", [
    "abfss://lake@acct.dfs.core.windows.net/t",
    "abfs://lake@acct.dfs.core.windows.net/t",          # Hadoop's non-TLS spelling: the same files
    "ABFS://Lake@ACCT.DFS.Core.Windows.Net/t/",
    "abfss://lake@acct.dfs.core.windows.net//t/.",
    "abfss://lake@acct.dfs.core.windows.net/x/../t",
    "abfss://lake@acct.dfs.core.windows.net/%74",
])
def test_azure_spellings_of_one_place_meet(spelling):
    assert normalize_url(spelling) == ADLS + "/t"


@pytest.mark.parametrize("url, why", [
    ("wasbs://lake@acct.blob.core.windows.net/t", "Blob endpoint"),
    ("wasb://lake@acct.blob.core.windows.net/t", "Blob endpoint"),
    ("abfss://lake@acct.blob.core.windows.net/t", "Blob endpoint"),
    ("abfss://lake@acct/t", "container@account-host"),
    ("abfss://lake@acct.dfs.core.windows.net.evil.example/t", "container@account-host"),
    ("abfss://lake@acct.dfs.core.windows.net:443/t", "container@account-host"),
    ("abfss://la--ke@acct.dfs.core.windows.net/t", "container@account-host"),   # Azure: no double hyphen
    ("abfss://lake@ac-ct.dfs.core.windows.net/t", "container@account-host"),    # accounts: letters, digits
    ("abfss://lake@acct.dfs.core.windows.net/a%2Fb", "separator"),
    ("abfss://user:pw@acct.dfs.core.windows.net/t", "container@account-host"),
])
def test_azure_spellings_that_are_refused(url, why):
    with pytest.raises(InvalidUrl, match=why):
        normalize_url(url)


def test_sovereign_clouds_are_accounts_of_their_own():
    china = "abfss://lake@acct.dfs.core.chinacloudapi.cn/t"
    assert normalize_url(china) == china
    assert not is_within(china, ADLS)


def test_adls_parts_decode_the_canonical_path():
    assert adls_parts("abfs://Lake@Acct.dfs.core.windows.net/a%20b/c") == (
        "acct", "lake", "acct.dfs.core.windows.net", "a b/c")
    assert adls_parts(ADLS) == ("acct", "lake", "acct.dfs.core.windows.net", "")
    with pytest.raises(InvalidUrl):
        adls_parts("s3://b/a")


def test_gs_bucket_key():
    assert gs_bucket_key("GS://Bkt/a/./b%20c/") == ("bkt", "a/b c")
    with pytest.raises(InvalidUrl):
        gs_bucket_key("abfss://lake@acct.dfs.core.windows.net/a")


def test_a_location_on_abfss_owns_what_abfs_spells():
    # The trie holds canonical URLs: a table spelled abfs:// lies in the abfss:// location.
    trie = UrlTrie()
    trie.insert(normalize_url(ADLS + "/loc"), "location")
    assert trie.owner(normalize_url("abfs://lake@acct.dfs.core.windows.net/loc/t"))[1] == "location"
