"""Spark reads by path go to what the catalog checked (shardcat/spark/paths.py, issue 28)."""

from __future__ import annotations

import pytest

from shardcat.spark.catalog import CatalogError
from shardcat.spark.paths import engine_path, volume_file_url


@pytest.mark.parametrize("path, expected", [
    ("file:///lake/free/f.csv", "file:///lake/free/f.csv"),
    ("/lake/./free//f.csv", "file:///lake/free/f.csv"),
    ("/lake/x/../free", "file:///lake/free"),           # the catalog resolved '..': so does the read
    ("file:///lake/a%20b", "file:///lake/a b"),          # decoded once, as the catalog decoded it
    ("file:///lake/100%25", "file:///lake/100%"),
    ("s3a://Bucket/data/t1/", "s3a://bucket/data/t1"),   # Hadoop's scheme is kept
    ("s3://b/data", "s3://b/data"),
])
def test_engine_path_is_the_checked_form(path, expected):
    assert engine_path(path) == expected


@pytest.mark.parametrize("path", ["file:///lake/*", "/lake/t?", "/lake/{a_t,free}", "/lake/[ab]_t",
                                  "/lake/%2A", "/lake/a_t%2F_delta_log", "/lake/..%2Fetc", "/lake/a\\b"])
def test_engine_path_refuses_globs_and_ambiguous_spellings(path):
    with pytest.raises(CatalogError) as caught:
        engine_path(path)
    assert caught.value.code == "INVALID_PARAMETER_VALUE"


def test_volume_paths_stay_inside_the_volume():
    vol = "file:///lake/v"
    assert volume_file_url(vol, "/orders/2024") == "file:///lake/v/orders/2024"
    assert volume_file_url(vol, None) == vol
    assert volume_file_url(vol, "/a b/%2F") == "file:///lake/v/a%20b/%252F"    # literal names
    assert engine_path(volume_file_url(vol, "/a b/%2F")) == "file:///lake/v/a b/%2F"
    for tail in ("/../other", "/x/../../other", "/./x", "/a\\b", "/a\nb"):
        with pytest.raises(CatalogError):
            volume_file_url(vol, tail)
