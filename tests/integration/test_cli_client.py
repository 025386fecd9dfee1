"""The `shardcat` client subcommands (shardcat/client/) against a real server.

The CLI is synchronous and the test server runs on the test's event loop, so `main()` runs in a
worker thread with its stdout and stderr captured; the entry point runs once as a real process.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from shardcat.entities.urls import normalize_url
from shardcat.client.cli import KINDS, list_all
from shardcat.client.http import Client, resolve_config
from shardcat.cluster.cli import main

REPO = Path(__file__).resolve().parents[2]


def _invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:   # argparse usage errors
            code = e.code
    return code, out.getvalue(), err.getvalue()


async def cli(ws, *argv: str, auth: bool = True) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `shardcat ARGV --server ... --token ...`."""
    flags = ["--server", ws.url, "--token", ws.token] if auth else []
    return await asyncio.to_thread(_invoke, [*argv, *flags])


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


async def test_catalog_schema_table_lifecycle(ws, tmp_path):
    code, out, err = await cli(ws, "catalog", "create", "sales", "--comment", "all of sales",
                               "--property", "team=revenue")
    assert (code, err) == (0, "")
    fields = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert fields["name"] == "sales" and fields["comment"] == "all of sales"
    assert json.loads(fields["properties"]) == {"team": "revenue"}
    assert fields["created_at"].endswith(" UTC")
    assert (await cli(ws, "catalog", "create", "hr"))[0] == 0

    # A list is an aligned table: every value starts under its header.
    code, out, _ = await cli(ws, "catalog", "list")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == ["NAME", "OWNER", "COMMENT"]
    assert [line.split()[0] for line in lines[1:]] == ["hr", "sales"]
    comment_col = lines[0].index("COMMENT")
    assert lines[2][comment_col:] == "all of sales" and lines[2].index("admin") == lines[0].index("OWNER")
    code, out, _ = await cli(ws, "catalog", "list", "--json")
    assert [c["name"] for c in json.loads(out)["catalogs"]] == ["hr", "sales"]
    code, out, _ = await cli(ws, "catalog", "list", "--limit", "1")
    assert rows(out)[1:] == [["hr", "admin"]]

    # get --json is the server's own answer.
    code, out, _ = await cli(ws, "catalog", "get", "sales", "--json")
    assert json.loads(out) == (await ws.call("GET", "/catalogs/sales"))[1]

    assert (await cli(ws, "schema", "create", "sales.orders", "--comment", "orders"))[0] == 0
    code, out, _ = await cli(ws, "schema", "list", "sales")
    assert rows(out) == [["FULL_NAME", "OWNER", "COMMENT"],        # every catalog comes with its default schema
                         ["sales.default", "admin", "Default", "schema", "(created", "with", "the", "catalog)"],
                         ["sales.orders", "admin", "orders"]]

    location = normalize_url(str(tmp_path / "ext" / "lines"))
    code, out, err = await cli(ws, "table", "create", "sales.orders.lines", "--location", location,
                               "--format", "parquet", "--column", "id:long", "--column", "sku:STRING",
                               "--property", "source=erp")
    assert (code, err) == (0, "")
    code, out, err = await cli(ws, "table", "create", "sales.orders.totals", "--column", "amount:DOUBLE")
    assert (code, err) == (0, "")
    status, lines_table = await ws.call("GET", "/tables/sales.orders.lines")
    assert status == 200 and lines_table["table_type"] == "EXTERNAL"
    assert lines_table["data_source_format"] == "PARQUET" and lines_table["storage_location"] == location
    assert [(c["name"], c["type_name"]) for c in lines_table["columns"]] == [("id", "LONG"), ("sku", "STRING")]
    assert lines_table["properties"] == {"source": "erp"}

    code, out, _ = await cli(ws, "table", "list", "sales.orders")
    listed = rows(out)
    assert listed[0] == ["FULL_NAME", "TABLE_TYPE", "DATA_SOURCE_FORMAT", "STORAGE_LOCATION"]
    assert listed[1] == ["sales.orders.lines", "EXTERNAL", "PARQUET", location]
    assert listed[2][:3] == ["sales.orders.totals", "MANAGED", "DELTA"]
    code, out, _ = await cli(ws, "table", "get", "sales.orders.lines")
    fields = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert fields["columns"] == "id bigint, sku string" and fields["full_name"] == "sales.orders.lines"

    code, out, _ = await cli(ws, "table", "delete", "sales.orders.totals")
    assert (code, out.strip()) == (0, "Deleted table 'sales.orders.totals'.")
    assert (await ws.call("GET", "/tables/sales.orders.totals"))[0] == 404

    # A non-empty catalog needs --force; the server's error code and message reach stderr.
    code, out, err = await cli(ws, "catalog", "delete", "sales")
    assert code == 1 and out == ""
    assert err.startswith("shardcat: error: FAILED_PRECONDITION (HTTP 400): Catalog 'sales' is not empty")
    assert (await ws.call("GET", "/tables/sales.orders.lines"))[0] == 200
    assert (await cli(ws, "catalog", "delete", "sales", "--force"))[0] == 0
    code, out, err = await cli(ws, "catalog", "get", "sales")
    assert (code, out) == (1, "")
    assert err.strip() == "shardcat: error: NOT_FOUND (HTTP 404): Catalog 'sales' does not exist."
    assert (await ws.call("GET", "/schemas/sales.orders"))[0] == 404


async def test_errors_are_readable_and_fail(ws):
    assert (await cli(ws, "catalog", "create", "c"))[0] == 0
    code, _, err = await cli(ws, "catalog", "create", "c")
    assert code == 1 and "ALREADY_EXISTS (HTTP 409): Catalog 'c' already exists." in err
    code, _, err = await cli(ws, "schema", "create", "nope.s")
    assert code == 1 and "NOT_FOUND (HTTP 404): Catalog 'nope' does not exist." in err
    assert (await cli(ws, "schema", "create", "c.s"))[0] == 0
    code, _, err = await cli(ws, "table", "create", "c.s.t", "--type", "VIEW")
    assert code == 1 and "INVALID_PARAMETER_VALUE (HTTP 400): A VIEW needs a view_definition." in err
    code, _, err = await cli(ws, "catalog", "list", "--server", ws.url, "--token", "wrong", auth=False)
    assert code == 1 and "UNAUTHENTICATED (HTTP 401)" in err

    # Mistakes caught before any request: the name's shape, --property syntax, a closed port.
    code, _, err = await cli(ws, "table", "get", "c.t")
    assert code == 1 and "a table is named CATALOG.SCHEMA.TABLE, got 'c.t'" in err
    code, _, err = await cli(ws, "catalog", "create", "d", "--property", "novalue")
    assert code == 1 and "--property must be KEY=VALUE" in err
    assert (await ws.call("GET", "/catalogs/d"))[0] == 404
    code, _, err = await cli(ws, "catalog", "list", "--server", "http://127.0.0.1:9", auth=False)
    assert code == 1 and "cannot reach http://127.0.0.1:9/api/2.1/unity-catalog" in err
    code, _, err = await cli(ws, "catalog", "frobnicate")
    assert code == 2 and "invalid choice" in err


async def test_list_follows_pages(ws):
    for i in range(5):
        assert (await ws.call("POST", "/catalogs", json={"name": f"c{i}"}))[0] == 200
    client = Client(*resolve_config(ws.url, ws.token))
    names = await asyncio.to_thread(list_all, client, KINDS["catalog"], None, None, 2)
    assert [c["name"] for c in names] == ["c0", "c1", "c2", "c3", "c4"]
    limited = await asyncio.to_thread(list_all, client, KINDS["catalog"], None, 3, 2)
    assert [c["name"] for c in limited] == ["c0", "c1", "c2"]


async def test_server_and_token_from_environment_and_token_file(ws, tmp_path, monkeypatch):
    assert (await ws.call("POST", "/catalogs", json={"name": "envcat"}))[0] == 200
    monkeypatch.setenv("SHARDCAT_URL", ws.url)
    monkeypatch.setenv("SHARDCAT_TOKEN", ws.token)
    code, out, _ = await cli(ws, "catalog", "list", auth=False)
    assert code == 0 and rows(out)[1][0] == "envcat"

    # Without a token anywhere else, a server on this machine gets the local admin token file.
    monkeypatch.delenv("SHARDCAT_TOKEN")
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = await cli(ws, "catalog", "list", auth=False)
    assert code == 1 and "UNAUTHENTICATED" in err
    (tmp_path / ".shardcat").mkdir()
    (tmp_path / ".shardcat" / "admin-token").write_text(ws.token + "\n")
    code, out, _ = await cli(ws, "catalog", "list", auth=False)
    assert code == 0 and rows(out)[1][0] == "envcat"
    # ... and never to another host.
    assert resolve_config("http://catalog.example.com:8080", None) == (
        "http://catalog.example.com:8080/api/2.1/unity-catalog", None)
    assert resolve_config(ws.url + "/api/2.1/unity-catalog/", None)[1] == ws.token


async def test_entry_point_runs_as_a_process(ws):
    script = _shardcat_script()
    env = {**os.environ, "SHARDCAT_URL": ws.url, "SHARDCAT_TOKEN": ws.token,
           "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}

    async def run(*argv):
        proc = await asyncio.create_subprocess_exec(script, *argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode, out.decode(), err.decode()

    code, out, err = await run("catalog", "create", "proc", "--json")
    assert (code, err) == (0, "") and json.loads(out)["name"] == "proc"
    assert (await ws.call("GET", "/catalogs/proc"))[0] == 200
    code, out, err = await run("catalog", "get", "missing")
    assert code == 1 and "NOT_FOUND" in err


async def test_global_options_before_or_after_the_subcommand(ws):
    assert (await cli(ws, "catalog", "create", "order"))[0] == 0
    assert (await cli(ws, "schema", "create", "order.s"))[0] == 0
    after = await asyncio.to_thread(_invoke, ["catalog", "list", "--server", ws.url, "--token", ws.token, "--json"])
    before = await asyncio.to_thread(_invoke, ["--server", ws.url, "--token", ws.token, "--json", "catalog", "list"])
    mixed = await asyncio.to_thread(_invoke, ["--server", ws.url, "schema", "list", "order", "--json",
                                              "--token", ws.token])
    assert after == before and after[0] == 0
    assert [c["name"] for c in json.loads(before[1])["catalogs"]] == ["order"]
    assert mixed[0] == 0 and [s["full_name"] for s in json.loads(mixed[1])["schemas"]] == ["order.default", "order.s"]
    # Given in both places, the one after the subcommand wins (it is the closer one).
    code, _, err = await asyncio.to_thread(_invoke, ["--token", ws.token, "catalog", "list", "--server", ws.url,
                                                     "--token", "wrong"])
    assert code == 1 and "HTTP 401" in err


async def test_a_missing_or_wrong_token_says_how_to_pass_one(ws, tmp_path, monkeypatch):
    monkeypatch.delenv("SHARDCAT_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))        # no ~/.shardcat/admin-token to fall back on
    for token in ([], ["--token", "wrong"]):
        code, out, err = await asyncio.to_thread(_invoke, ["catalog", "list", "--server", ws.url, *token])
        assert (code, out) == (1, "") and "UNAUTHENTICATED (HTTP 401)" in err
        assert all(way in err for way in ("--token", "$SHARDCAT_TOKEN", "admin-token")), err


def _shardcat_script() -> str:
    script = Path(sys.executable).parent / "shardcat"
    script = str(script) if script.exists() else shutil.which("shardcat")
    assert script, "the `shardcat` console script is not installed: pip install -e '.[test]'"
    return script


async def test_a_closed_pipe_ends_quietly(ws):
    """`shardcat table list ... | head -1`: the reader is gone before the list is printed."""
    assert (await cli(ws, "catalog", "create", "piped"))[0] == 0
    assert (await cli(ws, "schema", "create", "piped.s"))[0] == 0
    for i in range(3):
        assert (await cli(ws, "table", "create", f"piped.s.t{i}", "--column", "id:LONG"))[0] == 0
    env = {**os.environ, "SHARDCAT_URL": ws.url, "SHARDCAT_TOKEN": ws.token}
    for argv in (["table", "list", "piped.s"], ["--help"]):
        proc = subprocess.Popen([_shardcat_script(), *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()    # no reader left: the first print meets a closed pipe
        _, err = await asyncio.to_thread(proc.communicate, timeout=60)
        assert proc.returncode in (0, 141) and err.decode() == "", (proc.returncode, err.decode())
    # The shell's own form of it (in a thread: the server answers on this test's event loop).
    shell = await asyncio.to_thread(subprocess.run, ["bash", "-c", f"'{_shardcat_script()}' table list piped.s | head -1"],
                                    env=env, capture_output=True, text=True, timeout=60)
    assert (shell.returncode, shell.stderr) == (0, "") and shell.stdout.split() == ["FULL_NAME", "TABLE_TYPE",
                                                                                    "DATA_SOURCE_FORMAT",
                                                                                    "STORAGE_LOCATION"]


async def test_volumes_and_models(ws, tmp_path):
    assert (await cli(ws, "catalog", "create", "ml"))[0] == 0
    assert (await cli(ws, "schema", "create", "ml.prod"))[0] == 0

    location = normalize_url(str(tmp_path / "ext" / "raw"))
    code, out, err = await cli(ws, "volume", "create", "ml.prod.raw", "--location", location, "--comment", "landing")
    assert (code, err) == (0, "")
    code, out, err = await cli(ws, "volume", "create", "ml.prod.scratch")
    assert (code, err) == (0, "")
    status, raw = await ws.call("GET", "/volumes/ml.prod.raw")
    assert status == 200 and raw["volume_type"] == "EXTERNAL" and raw["storage_location"] == location
    assert raw["comment"] == "landing"
    code, out, _ = await cli(ws, "volume", "list", "ml.prod")
    listed = rows(out)
    assert listed[0] == ["FULL_NAME", "VOLUME_TYPE", "STORAGE_LOCATION"]
    assert listed[1] == ["ml.prod.raw", "EXTERNAL", location]
    assert listed[2][:2] == ["ml.prod.scratch", "MANAGED"]
    code, out, _ = await cli(ws, "volume", "get", "ml.prod.scratch", "--json")
    assert json.loads(out) == (await ws.call("GET", "/volumes/ml.prod.scratch"))[1]
    assert (await cli(ws, "volume", "delete", "ml.prod.raw"))[0] == 0
    assert (await ws.call("GET", "/volumes/ml.prod.raw"))[0] == 404

    code, out, err = await cli(ws, "model", "create", "ml.prod.ranker", "--comment", "ranks things")
    assert (code, err) == (0, "")
    code, out, _ = await cli(ws, "model", "list", "ml.prod")
    assert rows(out) == [["FULL_NAME", "OWNER", "COMMENT"], ["ml.prod.ranker", "admin", "ranks", "things"]]
    code, out, _ = await cli(ws, "model", "get", "ml.prod.ranker", "--json")
    assert json.loads(out) == (await ws.call("GET", "/models/ml.prod.ranker"))[1]
    code, _, err = await cli(ws, "model", "get", "ml.prod.nope")
    assert code == 1 and "NOT_FOUND (HTTP 404)" in err
    assert (await cli(ws, "model", "delete", "ml.prod.ranker"))[0] == 0
    assert (await ws.call("GET", "/models/ml.prod.ranker"))[0] == 404


async def test_search_and_lineage(ws):
    for argv in (("catalog", "create", "c"), ("schema", "create", "c.s"),
                 ("table", "create", "c.s.orders", "--comment", "paid orders", "--column", "id:LONG"),
                 ("table", "create", "c.s.daily_orders", "--column", "id:LONG"),
                 ("table", "create", "c.s.people", "--column", "id:LONG")):
        assert (await cli(ws, *argv))[0] == 0
    status, out = await ws.call("POST", "/shardcat/lineage", json={"target": "c.s.daily_orders", "job": "roll-up",
                                                                   "sources": [{"name": "c.s.orders"}]})
    assert status == 200, out

    code, out, err = await cli(ws, "search", "orders")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["FULL_NAME", "SECURABLE_TYPE", "MATCH", "COMMENT"]
    assert [line.split()[0] for line in lines[1:]] == ["c.s.orders", "c.s.daily_orders"]
    assert "paid orders" in lines[1]
    code, out, _ = await cli(ws, "search", "orders", "paid", "--type", "table", "--json")
    assert [r["full_name"] for r in json.loads(out)["results"]] == ["c.s.orders"]
    code, out, _ = await cli(ws, "search", "o", "--limit", "1")
    assert code == 0 and len(out.splitlines()) == 2

    code, out, err = await cli(ws, "lineage", "c.s.daily_orders")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["DIRECTION", "HOPS", "SOURCE", "TARGET", "RUNS", "LAST_AT", "JOBS"]
    assert row.split()[:5] == ["upstream", "1", "c.s.orders", "c.s.daily_orders", "1"] and row.endswith("roll-up")
    code, out, _ = await cli(ws, "lineage", "c.s.orders", "--direction", "downstream", "--json")
    assert [e["target"]["full_name"] for e in json.loads(out)["edges"]] == ["c.s.daily_orders"]
    code, _, err = await cli(ws, "lineage", "c.s.nope")
    assert code == 1 and "NOT_FOUND" in err and "c.s.nope" in err
    code, _, err = await cli(ws, "search", "x", "--type", "NOPE")
    assert code == 1 and "INVALID_PARAMETER_VALUE" in err
