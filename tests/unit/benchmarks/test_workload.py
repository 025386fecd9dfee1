"""The load workload's shape (loadtest/workload.py): the mix, metastore sizes, temporal locality,
and well-formed requests for every op (permission checks, grants, Delta commits among them)."""

import json
import random
import re
from collections import Counter

from loadtest.workload import DELTA_KEEP_UNPUBLISHED, MIX, PRINCIPALS, WRITES, Chooser, Metastore, commit_request, \
    get_commits_request, grant_request, grant_target, metastore_sizes, read_request


def test_mix_is_98_percent_reads():
    assert abs(sum(MIX.values()) - 100.0) < 1e-9
    assert abs(sum(MIX[op] for op in WRITES) - 2.0) < 1e-9
    assert WRITES <= set(MIX)
    # permission checks are reads; grants and Delta commits are writes
    assert {"getPermissions", "authorize"} <= set(MIX) - WRITES
    assert {"updatePermissions", "deltaCommit"} <= WRITES


def test_sizes_are_heavy_tailed():
    sizes = metastore_sizes(200, max_tables=100_000)
    assert sizes.count(100_000) == 2
    median = sorted(sizes)[100]
    assert 15 <= median <= 60
    assert sum(1 for s in sizes if s <= 100) > 140


def test_tables_are_reaccessed_soon():
    ms = Metastore("m", "t", 100_000)
    chooser = Chooser([ms], random.Random(3))
    picks = [chooser.table(ms) for _ in range(5000)]
    last: dict[int, int] = {}
    soon = 0
    for i, t in enumerate(picks):
        if t in last and i - last[t] <= 100:
            soon += 1
        last[t] = i
    assert soon / len(picks) > 0.7           # most accesses revisit a table touched recently
    assert len(set(picks)) > 300             # yet the whole metastore is reached


def test_ops_follow_the_mix_and_requests_are_well_formed():
    ms = Metastore("m", "t", 2500)
    chooser = Chooser([ms], random.Random(1))
    ops = Counter(chooser.op() for _ in range(20_000))
    assert abs(ops["getTable"] / 20_000 - MIX["getTable"] / 100) < 0.02
    assert set(ops) == set(MIX)                           # every op is drawn, the rare writes too
    for op in set(MIX) - WRITES:
        req = read_request(op, ms, chooser)
        assert req.path.startswith("/api/2.1/unity-catalog/") and not req.is_write


def test_permission_requests():
    ms = Metastore("m", "t", 2500)
    chooser = Chooser([ms], random.Random(2))
    req = read_request("getPermissions", ms, chooser)
    assert req.method == "GET" and req.path == f"/api/2.1/unity-catalog/permissions/table/{req.table}"
    req = read_request("authorize", ms, chooser)
    assert req.method == "POST" and req.path.endswith("/shardcat/authorize")
    assert req.json["principal"] in PRINCIPALS and 1 <= len(req.json["items"]) <= 8
    assert all(i["securable_type"] == "table" and i["privilege"] == "SELECT" and i["full_name"].startswith("main.s")
               for i in req.json["items"])
    full, principal, grant = grant_target(ms, chooser)
    req = grant_request(full, principal, grant)
    assert req.is_write and req.method == "PATCH" and req.path.endswith(f"/permissions/table/{full}")
    assert req.json == {"changes": [{"principal": principal, "add" if grant else "remove": ["SELECT"]}]}
    both = {grant_target(ms, chooser)[2] for _ in range(50)}
    assert both == {True, False}                          # grants and revokes


def test_delta_commit_requests():
    ms = Metastore("m", "t", 10, "0b5c0e2e-0000-4000-8000-000000000001", "file:///x/tables/t")
    first = commit_request(ms, 1, "c0")
    info = first.json["commit_info"]
    assert first.is_write and first.method == "POST" and first.path.endswith("/delta/preview/commits")
    assert first.json["table_id"] == ms.delta_table_id and first.json["table_uri"] == ms.delta_table_uri
    assert re.fullmatch(r"0{19}1\.[0-9a-f-]{36}\.json", info["file_name"])
    assert info["file_size"] == len(info["inline_content"].encode())
    assert "commitInfo" in json.loads(info["inline_content"])
    assert "latest_backfilled_version" not in first.json   # nothing to report yet
    later = commit_request(ms, 40, "c0")
    # older versions are reported published, so the unpublished window stays under the server's limit (50)
    assert later.json["latest_backfilled_version"] == 40 - DELTA_KEEP_UNPUBLISHED < 40
    assert later.json["commit_info"]["file_name"] != commit_request(ms, 40, "c0").json["commit_info"]["file_name"]
    get = get_commits_request(ms, 3)
    assert get.method == "GET" and get.params == {"table_id": ms.delta_table_id, "table_uri": ms.delta_table_uri,
                                                  "start_version": "3"}
