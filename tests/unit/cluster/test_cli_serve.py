"""`shardcat serve` flags become the server's configuration."""

import os
import re
from pathlib import Path

from shardcat.cluster.cli import build_parser, serve_config

ROOT = Path(__file__).resolve().parents[3]


def config(*argv):
    return serve_config(build_parser().parse_args(["serve", *argv]))


def test_defaults_serve_locally_with_the_cache_on():
    c = config()
    assert (c.host, c.port, c.db, c.shards, c.ray_address) == ("127.0.0.1", 8080, None, 0, None)
    assert c.cache.enabled and c.cache.max_bytes == 256 << 20


def test_cache_and_cluster_flags():
    c = config("--no-cache", "--cache-mb", "64", "--shards", "3", "--ray-address", "auto", "--db", "postgresql://x/y")
    assert not c.cache.enabled and c.cache.max_bytes == 64 << 20
    assert config().cache.path_index_max == 250_000
    assert config("--path-index-max", "1000").cache.path_index_max == 1000
    assert config().cache.privileges_aside_above == 100_000
    both = config("--path-index-max", "7", "--privileges-aside-above", "9").cache
    assert (both.path_index_max, both.privileges_aside_above) == (7, 9)
    assert (c.shards, c.ray_address, c.db) == (3, "auto", "postgresql://x/y")


def test_the_event_loop_is_uvloop_unless_asked_for_asyncio():
    assert config().event_loop == "uvloop"
    assert config("--event-loop", "asyncio").event_loop == "asyncio"      # the shard actors' too


def test_webhooks_reach_only_public_addresses_unless_hosts_are_allowed_by_name():
    assert config().webhook_allow_hosts == ()
    c = config("--webhook-allow-host", "localhost", "--webhook-allow-host", "hooks.internal")
    assert c.webhook_allow_hosts == ("localhost", "hooks.internal")       # they reach the shards (ray_cluster.py)


def test_the_ray_config_readme_command_parses():
    readme = (ROOT / "ray-config" / "README.md").read_text()
    command = re.search(r'"(shardcat serve [^"]+)"', readme).group(1)
    c = config(*command.split()[2:])
    assert c.ray_address == "auto" and c.shards == 4 and c.host == "0.0.0.0"


def test_several_databases_by_flag_or_file(tmp_path):
    """`--db` repeated or `--db-file`: the servers in order, named or by position (docs/cluster.md)."""
    from shardcat.store.databases import parse_databases

    c = config("--db", "postgresql://a/x", "--db", "east=postgresql://b/y?sslmode=require")
    assert parse_databases(c.db) == {"db0": "postgresql://a/x", "east": "postgresql://b/y?sslmode=require"}
    listed = tmp_path / "dbs"
    listed.write_text("# the directory's first\nmain = postgresql://a/x\n\npostgresql://b/y  # db1\n")
    assert parse_databases(config("--db-file", str(listed)).db) == {"main": "postgresql://a/x",
                                                                   "db1": "postgresql://b/y"}


def test_bad_database_lists_stop_the_start(tmp_path):
    import pytest

    for argv in (["--db", "Bad Name=postgresql://a/x"], ["--db", "a=postgresql://a/x", "--db", "a=postgresql://b/y"],
                 ["--db", "a="], ["--db-file", str(tmp_path / "missing")],
                 ["--db", "postgresql://a/x", "--db-file", str(tmp_path / "dbs")]):
        with pytest.raises(SystemExit):
            config(*argv)


def test_store_endpoint_options_add_to_their_variables(monkeypatch):
    """--s3-compatible-endpoint and --azure-storage-endpoint add to the variables shards and Ray workers read,
    keeping what the operator set there."""
    from shardcat.cluster.cli import export_endpoint_lists
    from shardcat.web.store_endpoints import vetted

    monkeypatch.setenv("SHARDCAT_S3_COMPATIBLE_ENDPOINTS", "minio.lan:9000")
    monkeypatch.delenv("SHARDCAT_AZURE_STORAGE_ENDPOINTS", raising=False)
    export_endpoint_lists(build_parser().parse_args([
        "serve", "--s3-compatible-endpoint", "127.0.0.1:9100", "--s3-compatible-endpoint", "[::1]",
        "--azure-storage-endpoint", "http://127.0.0.1:10000/devstoreaccount1"]))
    assert os.environ["SHARDCAT_S3_COMPATIBLE_ENDPOINTS"] == "minio.lan:9000,127.0.0.1:9100,[::1]"
    assert os.environ["SHARDCAT_AZURE_STORAGE_ENDPOINTS"] == "http://127.0.0.1:10000/devstoreaccount1"
    assert vetted("http://127.0.0.1:9100") is None and vetted("http://[::1]:1234") is None
