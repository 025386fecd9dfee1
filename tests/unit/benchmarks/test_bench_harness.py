"""The benchmark harness's pure parts: percentiles, section rewriting, the bare server's body sizes,
replayed answers and front answers, the running share, CPU of process trees."""

import subprocess
import sys
import time

import psutil
import pytest
from aiohttp.test_utils import TestClient, TestServer

from benchmarks.bare_server import PREFIX, json_body, make_front_answer, make_replay_app
from benchmarks import harness
from benchmarks.harness import percentile, write_section
from benchmarks.machine import tree_cpu, tree_cpu_total


def test_nearest_rank_percentiles():
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([], 50) is None


def test_write_section_replaces_only_its_own_section(tmp_path):
    doc = tmp_path / "b.md"
    doc.write_text("# B\n\nintro\n\n## One\n\nold one\n\n### sub\n\nold sub\n\n## Notes\n\nby hand\n")
    write_section(doc, "## One", "## One\n\nnew one\n")
    text = doc.read_text()
    assert "new one" in text and "old one" not in text and "old sub" not in text
    assert text.index("intro") < text.index("new one") < text.index("by hand")
    write_section(doc, "## Two", "## Two\n\ntwo\n")
    assert doc.read_text().rstrip().endswith("two") and "by hand" in doc.read_text()


def test_bare_bodies_have_the_exact_size():
    for size in (12, 100, 2506, 250753):
        assert len(json_body(size)) == size


async def test_replay_answers_with_the_recorded_bytes(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "resolve.json").write_bytes(b'{"items": []}')
    (tmp_path / "tables" / "c.s.t1.json").write_bytes(b'{"name": "t1"}')
    async with TestClient(TestServer(make_replay_app(tmp_path))) as client:
        assert await (await client.post(f"{PREFIX}/resolve", data=b'{"items": [{"name": "c.s.t1"}]}')).read() \
            == b'{"items": []}'
        assert await (await client.get(f"{PREFIX}/tables/c.s.t1")).read() == b'{"name": "t1"}'
        assert (await client.get(f"{PREFIX}/tables/c.s.t2")).status == 404


async def test_the_bare_front_answers_the_constant_bodies_by_route():
    from shardcat.web.http1 import Request
    answer = make_front_answer(100, 2000, 300)

    def request(method, path):
        return Request(method, path, {}, b"", True)
    assert len((await answer(request("GET", f"{PREFIX}/tables/c.s.t"))).body) == 100
    assert len((await answer(request("GET", f"{PREFIX}/tables?catalog_name=c"))).body) == 2000
    assert len((await answer(request("POST", f"{PREFIX}/resolve"))).body) == 300
    assert (await answer(request("GET", f"{PREFIX}/schemas"))).status == 404


def test_running_share_counts_the_gaps_a_busy_thread_did_not_run(monkeypatch):
    """A clock read every 1 ms, with one 0.5 s and one 0.25 s gap, over 1.25 s: it ran 40%."""
    reads = [i / 1000 for i in range(251)]                       # 0 .. 0.25 s in 1 ms steps
    reads += [0.75 + i / 1000 for i in range(251)]               # held 0.5 s, then to 1.0 s
    reads += [1.25]                                              # held 0.25 s
    clock = iter(reads)
    monkeypatch.setattr(harness.time, "perf_counter", lambda: next(clock))
    assert harness.running_share(1.25) == 0.4


async def test_closed_loop_counts_answers_and_errors_from_a_real_server():
    from aiohttp import web
    from benchmarks.harness import Request, closed_loop
    from yarl import URL

    async def table(request):
        assert request.headers["Authorization"] == "Bearer t"
        return web.json_response({"name": request.match_info["name"]})

    app = web.Application()
    app.router.add_get("/tables/{name}", table)
    async with TestServer(app, host="127.0.0.1") as server:
        base = str(server.make_url(""))
        found = [Request("GET", URL(f"{base}/tables/t{i}")) for i in range(3)]
        counters = {"ok": 0, "errors": 0}
        latencies, samples, wall = await closed_loop(found, {"Authorization": "Bearer t"}, 4, 0.3, counters, 1)
        assert counters["ok"] > 0 and counters["errors"] == 0 and len(latencies) == counters["ok"] and not samples
        assert wall >= 0.3
        counters = {"ok": 0, "errors": 0}
        _, samples, _ = await closed_loop([Request("GET", URL(f"{base}/nothing"))], {}, 2, 0.1, counters, 1)
        assert counters["ok"] == 0 and counters["errors"] > 0 and samples[0].startswith("HTTP 404")
    counters = {"ok": 0, "errors": 0}      # the server is gone: refused connections are errors, not a hang
    _, samples, _ = await closed_loop(found, {}, 2, 0.1, counters, 1)
    assert counters["ok"] == 0 and counters["errors"] > 0 and "ShardUnreachable" in samples[0]


def test_wrk_script_carries_every_request_as_lua_strings():
    reqs = harness.requests("http://127.0.0.1:9", ["/resolve"], "POST", [b'{"a": "\\\\"}', "é\n1".encode()])
    script = harness.wrk_script(reqs, {"Authorization": 'Bearer "t"'}, seed=3)
    # Decimal escapes are three digits: "\341" would read the next digit as part of the byte.
    assert '{"POST", "/resolve", {["Authorization"] = "Bearer \\034t\\034"}, "{\\034a\\034: \\034\\092\\092\\034}"}' \
        in script
    assert '"\\195\\169\\0101"' in script
    assert "math.randomseed(3)" in script


def test_wrk_sends_a_window_to_one_server_only():
    reqs = harness.requests("http://127.0.0.1:9", ["/a"]) + harness.requests("http://127.0.0.1:10", ["/b"])
    with pytest.raises(ValueError):
        harness.wrk_script(reqs, {}, seed=1)


def test_tree_cpu_counts_descendants_that_ended_in_between():
    """A process tree's CPU across a child that used CPU and ended between two readings: the live
    sum loses the child (bench_writes' PostgreSQL column came out negative so: backends and
    autovacuum workers come and go), the total with reaped children keeps it and never drops."""
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "sys.stdin.readline()\n"
                               "subprocess.run([sys.executable, '-c', 'x = sum(i * i for i in range(3_000_000))'])\n"
                               "print('done', flush=True)\n"
                               "sys.stdin.readline()\n"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        live_before, total_before = sum(tree_cpu([parent.pid]).values()), tree_cpu_total([parent.pid])
        parent.stdin.write("go\n")
        parent.stdin.flush()
        assert parent.stdout.readline().strip() == "done"      # the child ran and was reaped
        assert psutil.Process(parent.pid).children() == []
        live_after, total_after = sum(tree_cpu([parent.pid]).values()), tree_cpu_total([parent.pid])
        child = psutil.Process(parent.pid).cpu_times()
        assert child.children_user + child.children_system > 0.05
        # CPU times come in clock ticks (0.01 s): 0.22 - 0.05 is a hair below 0.14 + 0.03 in floats.
        assert total_after - total_before >= child.children_user + child.children_system - 0.005
        assert live_after - live_before < total_after - total_before - 0.05    # the live sum lost it
    finally:
        parent.stdin.write("end\n")
        parent.stdin.flush()
        parent.wait(10)
