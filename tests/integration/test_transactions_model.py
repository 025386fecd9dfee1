"""Concurrent multi-asset transactions through a real server against a serial model (hypothesis).

Each example makes a few tables holding a value (their comment) and runs a batch of clients at
once: each transaction reads some tables (GET, remembering the version each answer reflects),
then sends one transaction that declares those reads (`read_versions`) and writes new values
computed from what it read to some of them; plain PATCHes of one table race with them. Then:

- versions: every committed write has its own metastore version;
- serializable (no lost update, no write skew): replaying the committed ones one at a time in
  version order on a model, each transaction's reads are exactly the model's values at that point,
  and the server's final values are the model's;
- a refused transaction (409) names an asset it read that a committed write changed after the
  version it read it at;
- per asset, not per metastore: a transaction whose tables no other client of the batch wrote
  commits, however many writes raced it.
"""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.conftest import new_workspace

TX = "/shardcat/transactions"
VERSION = "X-Shardcat-Version"
TABLES = 4
_examples = itertools.count()

client = st.one_of(
    st.tuples(st.just("tx"), st.sets(st.integers(0, TABLES - 1), max_size=3),
              st.sets(st.integers(0, TABLES - 1), min_size=1, max_size=2)),
    st.tuples(st.just("patch"), st.just(frozenset()), st.sets(st.integers(0, TABLES - 1), min_size=1, max_size=1)),
)


@pytest.fixture(scope="module")
async def ws_model(server, http, tmp_path_factory):
    """One workspace for every example (each makes tables of its own), with catalog m and schema s."""
    ws = await new_workspace(server, http, tmp_path_factory.mktemp("tx-model"))
    for path, body in (("/catalogs", {"name": "m"}), ("/schemas", {"name": "s", "catalog_name": "m"})):
        status, out, _ = await _call(ws, "POST", path, body)
        assert status == 200, out
    return ws


async def _call(ws, method: str, path: str, json=None):
    async with ws.session.request(method, ws.api + path, json=json, headers=ws.headers) as r:
        return r.status, await r.json(content_type=None), int(r.headers.get(VERSION, -1))


async def _make_tables(ws, prefix: str) -> list[str]:
    names = [f"{prefix}_{i}" for i in range(TABLES)]
    status, body, _ = await _call(ws, "POST", TX, {"operations": [
        {"op": "create", "type": "table", "body": {
            "name": n, "catalog_name": "m", "schema_name": "s", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": [], "comment": "0"}} for n in names]})
    assert status == 200, body
    return [f"m.s.{n}" for n in names]


async def _run_client(ws, names: list[str], k: int, spec, ready: asyncio.Event, start: asyncio.Event) -> dict:
    kind, reads, writes = spec
    out = {"k": kind, "writes": {}, "read": {}, "read_at": {}}
    if kind == "patch":
        (w,) = writes
        value = f"p{k}"
        ready.set()
        await start.wait()
        status, body, version = await _call(ws, "PATCH", f"/tables/{names[w]}", {"comment": value})
        assert status == 200, body
        out.update(status=status, version=version, writes={names[w]: value})
        return out
    looked = sorted(set(reads) | set(writes))           # it reads what it writes: read-modify-write
    for i in looked:
        status, body, version = await _call(ws, "GET", f"/tables/{names[i]}")
        assert status == 200, body
        out["read"][names[i]] = body["comment"]
        out["read_at"][names[i]] = version
    seen = "+".join(out["read"][names[i]] for i in looked)
    out["writes"] = {names[w]: f"t{k}({seen})" for w in sorted(writes)}
    ready.set()
    await start.wait()          # every client has read: now they all commit at once
    status, body, version = await _call(ws, "POST", TX, {
        "read_versions": out["read_at"],
        "operations": [{"op": "update", "type": "table", "name": n, "body": {"comment": v}}
                       for n, v in out["writes"].items()]})
    out.update(status=status, body=body, version=body.get("version") if status == 200 else None)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=st.lists(client, min_size=2, max_size=6))
async def test_concurrent_transactions_are_serializable_per_asset(ws_model, batch):
    ws = ws_model
    names = await _make_tables(ws, f"e{next(_examples)}")
    start, ready = asyncio.Event(), [asyncio.Event() for _ in batch]
    tasks = [asyncio.create_task(_run_client(ws, names, k, spec, ready[k], start)) for k, spec in enumerate(batch)]
    await asyncio.gather(*[r.wait() for r in ready])    # every client has read
    start.set()                                           # then everything is sent at once
    results = await asyncio.gather(*tasks)

    committed = [r for r in results if r["status"] == 200]
    refused = [r for r in results if r["status"] != 200]
    for r in refused:
        assert r["status"] == 409 and r["body"]["error_code"] == "RESOURCE_CONFLICT", r
    event(f"{len(refused)} of {len(results)} refused")
    versions = [r["version"] for r in committed]
    assert len(set(versions)) == len(versions), versions

    # the serial model: the committed writes one at a time, in version order
    model = {n: "0" for n in names}
    written_at = {n: [] for n in names}       # the versions that wrote each table
    for r in sorted(committed, key=lambda r: r["version"]):
        for n, value in r["read"].items():
            assert model[n] == value, (f"transaction read {n} = {value!r} but at its version "
                                       f"{r['version']} it was {model[n]!r}", results)
        for n, value in r["writes"].items():
            model[n] = value
            written_at[n].append(r["version"])
    for n in names:
        status, body, _ = await _call(ws, "GET", f"/tables/{n}")
        assert body["comment"] == model[n], (n, body["comment"], model[n], results)

    # a refusal names an asset it read that a committed write changed after it was read
    for r in refused:
        match = re.search(r"Conflict on (?:[a-z_]+ )?'([^']+)'", r["body"]["message"])
        assert match, r["body"]
        named = match.group(1)
        assert named in r["read_at"], r
        assert any(v > r["read_at"][named] for v in written_at[named]), (r, written_at)

    # per asset: a transaction that no other client wrote to commits
    for k, r in enumerate(results):
        if r["k"] != "tx":
            continue
        others = set().union(*[set(o["writes"]) for j, o in enumerate(results) if j != k])
        if not (set(r["read"]) & others):
            assert r["status"] == 200, (r, results)

