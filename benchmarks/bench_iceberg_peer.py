"""Iceberg commits: shardcat's Iceberg REST catalog beside the Iceberg project's own REST catalog server.

    python -m benchmarks.bench_iceberg_peer [--quick] [--seconds S] [--out docs/benchmarks.md]

One run on one machine. The peer is Apache Iceberg's REST catalog servlet and adapter (the server
its REST compatibility kit runs against; iceberg-core 1.11.0 from Maven Central, jvm/iceberg-rck)
over a JdbcCatalog on a sqlite file, on Jetty, started on loopback by jvm/iceberg-rck/IcebergPeerServer.java.
shardcat is `shardcat serve` (one in-process shard) on an embedded PostgreSQL. Both keep table
files on local disk and write each new metadata file themselves.

Each writer owns one table (`s.t<i>`) and sends commits back to back through the REST API
(`POST .../namespaces/s/tables/t<i>`), the requests pyiceberg sends:
- property commit: assert-table-uuid, set-properties (metadata only);
- append commit: assert-ref-snapshot-id on main, add-snapshot + set-snapshot-ref (an append's
  commit; the manifest list it names is not read by either catalog, so the client writes no files).
After a warm-up window, at 1 and 32 writers, for a fixed window each; commits/s, p50 and p99 of the commits answered 200.
Writes its section of docs/benchmarks.md, a picture docs/img/bench_iceberg_peer.png and the raw
numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path

import aiohttp

from . import harness as h

SECTION = "## Iceberg commits: shardcat beside the Iceberg project's REST catalog server"
PICTURE = h.ROOT / "docs" / "img" / "bench_iceberg_peer.png"
PEER_SOURCE = h.ROOT / "jvm" / "iceberg-rck" / "IcebergPeerServer.java"
WRITERS = (1, 32)
KINDS = ("property commit", "append commit")
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _jvm():
    sys.path.insert(0, str(h.ROOT))     # tests/jvm.py: class paths of the Maven projects under jvm/
    from tests import jvm
    return jvm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_peer(tmp: Path) -> tuple[h.Child, str]:
    jvm = _jvm()
    jars = jvm.classpath("iceberg-rck")
    port = _free_port()
    (tmp / "peer").mkdir()
    child, _ = h.spawn([jvm.java(17), "-cp", jars, str(PEER_SOURCE), str(port), str(tmp / "peer" / "warehouse"),
                        str(tmp / "peer" / "catalog.db")], tmp / "peer" / "peer.log",
                       r"iceberg peer listening on", "iceberg-peer")
    return child, f"http://127.0.0.1:{port}/v1"


class Target:
    """One catalog's Iceberg REST base URL (up to /v1/<prefix>) and headers."""

    def __init__(self, name: str, base: str, headers: dict):
        self.name, self.base, self.headers = name, base, headers

    async def post(self, session: aiohttp.ClientSession, path: str, body: dict) -> tuple[int, dict | str]:
        async with session.post(self.base + path, json=body, headers=self.headers) as r:
            text = await r.text()
            return r.status, json.loads(text) if r.status == 200 else text


async def prepare(target: Target, session, tables: int) -> list[dict]:
    """Namespace `s` and tables t0..t<n-1>: each writer's state (uuid, last snapshot, sequence number)."""
    status, body = await target.post(session, "/namespaces", {"namespace": ["s"]})
    if status != 200:
        raise RuntimeError(f"{target.name}: creating the namespace answered {status}: {body}")
    states = []
    for i in range(tables):
        status, body = await target.post(session, "/namespaces/s/tables", {"name": f"t{i}", "schema": SCHEMA})
        if status != 200:
            raise RuntimeError(f"{target.name}: creating a table answered {status}: {body}")
        md = body["metadata"]
        states.append({"uuid": md["table-uuid"], "snapshot": None, "sequence": md.get("last-sequence-number", 0),
                       "location": md["location"], "n": 0})
    return states


def commit_body(kind: str, state: dict) -> dict:
    state["n"] += 1
    if kind == "property commit":
        return {"requirements": [{"type": "assert-table-uuid", "uuid": state["uuid"]}],
                "updates": [{"action": "set-properties", "updates": {"counter": str(state["n"])}}]}
    snapshot = (os.getpid() << 32) + state["n"] * 1000 + 7
    manifest_list = f"{state['location']}/metadata/snap-{snapshot}.avro"
    return {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": state["snapshot"]}],
            "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": snapshot, "sequence-number": state["sequence"] + 1,
                    "timestamp-ms": int(time.time() * 1000), "manifest-list": manifest_list, "schema-id": 0,
                    "summary": {"operation": "append", "added-data-files": "1", "added-records": "10"},
                    # Iceberg's Java parser takes no null parent: the first snapshot has none.
                    **({"parent-snapshot-id": state["snapshot"]} if state["snapshot"] else {})}},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot}]}


async def window(target: Target, session, states: list[dict], kind: str, writers: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    deadline = time.perf_counter() + seconds

    async def writer(state: dict) -> None:
        path = f"/namespaces/s/tables/{state['table']}"
        while time.perf_counter() < deadline and len(latencies) < h.MAX_REQUESTS:
            body = commit_body(kind, state)
            t0 = time.perf_counter()
            status, answer = await target.post(session, path, body)
            if status == 200:
                latencies.append(time.perf_counter() - t0)
                if kind == "append commit":
                    state["snapshot"] = body["updates"][0]["snapshot"]["snapshot-id"]
                    state["sequence"] += 1
            else:
                errors.append(f"{status}: {str(answer)[:200]}")
                await asyncio.sleep(0.01)

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(writer(s) for s in states[:writers])), seconds + 120)
    wall = time.perf_counter() - started
    ms = sorted(x * 1000 for x in latencies)
    return {"target": target.name, "operation": kind, "writers": writers, "commits": len(ms),
            "errors": len(errors), "error_samples": errors[:3], "per_s": len(ms) / wall,
            "p50_ms": h.percentile(ms, 50), "p99_ms": h.percentile(ms, 99)}


async def measure(target: Target, seconds: float) -> list[dict]:
    rows = []
    connector = aiohttp.TCPConnector(limit=max(WRITERS))
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        states = await prepare(target, session, max(WRITERS))
        for i, state in enumerate(states):
            state["table"] = f"t{i}"
        # A warm-up window, not kept: the JVM's JIT (and shardcat's caches) start cold.
        await window(target, session, states, KINDS[0], max(WRITERS), seconds / 3)
        for kind in KINDS:
            for writers in WRITERS:
                h.log(f"  {target.name}: {kind}, {writers} writers, {seconds:.0f} s")
                rows.append(await window(target, session, states, kind, writers, seconds))
                h.log(f"    {rows[-1]['per_s']:.0f} commits/s, p50 {rows[-1]['p50_ms']} ms, "
                      f"p99 {rows[-1]['p99_ms']} ms, {rows[-1]['errors']} errors")
    return rows


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_iceberg_peer")
    h.log("== the Iceberg project's REST catalog server (JDBC on sqlite), from jvm/iceberg-rck")
    peer, peer_base = start_peer(tmp)
    rows = await measure(Target("Iceberg REST server (JdbcCatalog, sqlite)", peer_base, {}), args.seconds)
    h.stop(peer)
    h.log("== shardcat serve (one in-process shard)")
    server = h.start_shardcat(tmp / "shardcat", db)
    status, _ = await h.call("POST", f"{server.api}/catalogs", server.token, json={"name": "bench"})
    if status != 200:
        raise RuntimeError(f"creating the catalog answered {status}")
    rows += await measure(Target("shardcat", f"{server.api}/iceberg/v1/catalogs/bench",
                                 {"Authorization": f"Bearer {server.token}"}), args.seconds)
    if server.child.proc.poll() is not None:
        raise RuntimeError(f"shardcat exited during the run (code {server.child.proc.returncode})")
    return {"rows": rows, "postgres_version": getattr(pg, "version", None)}


def plot(run: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(KINDS), figsize=(10, 4))
    targets = list(dict.fromkeys(r["target"] for r in run["rows"]))
    width = 0.8 / len(targets)
    for ax, kind in zip(axes, KINDS):
        for j, target in enumerate(targets):
            rs = [r for r in run["rows"] if r["target"] == target and r["operation"] == kind]
            ax.bar([i + j * width for i in range(len(rs))], [r["per_s"] for r in rs], width, label=target)
        ax.set_xticks([i + width * (len(targets) - 1) / 2 for i in range(len(WRITERS))],
                      [f"{w} writer{'s' if w > 1 else ''}" for w in WRITERS])
        ax.set_title(kind)
        ax.set_ylabel("commits/s")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Iceberg REST commits, one run" + (" — QUICK RUN, noise" if run["quick"] else ""))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(run: dict) -> str:
    lines = [
        SECTION, "", *h.quick_banner(run["quick"]),
        f"- **Reproduce:** `{run['command']}` (about {run['wall_minutes']:.1f} min; Maven fetches jvm/iceberg-rck's "
        f"jars on first use); run on {run['date']}.",
        f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
        "- **Peer:** Apache Iceberg 1.11.0's REST catalog servlet and adapter (the server its compatibility kit "
        "runs against) over a JdbcCatalog on a sqlite file, Jetty 12 on loopback, Java 17 "
        "(`jvm/iceberg-rck/IcebergPeerServer.java`); no authentication. shardcat: `shardcat serve` (one in-process "
        "shard) as its own process, embedded PostgreSQL, bearer token, every commit authorized (MODIFY).",
        f"- **Load:** each writer owns a table and sends commits back to back for {run['seconds']:.0f} s through "
        "the REST API (one aiohttp client process): a property commit (assert-table-uuid, set-properties) and an "
        "append's commit (assert-ref-snapshot-id, add-snapshot, set-snapshot-ref; the manifest list it names is "
        "not read by either catalog, so no data files are written). Both catalogs write each new metadata file "
        "to local disk.",
        "- **Caveat:** one run on a machine shared with other work; client, servers and PostgreSQL share its cores.",
        "",
        "| catalog | commit | writers | commits | commits/s | p50 ms | p99 ms | errors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in run["rows"]:
        lines.append(f"| {r['target']} | {r['operation']} | {r['writers']} | {r['commits']} | {r['per_s']:.0f} "
                     f"| {h.fmt_ms(r['p50_ms'])} | {h.fmt_ms(r['p99_ms'])} | {r['errors']} |")
    lines += ["", f"![Iceberg commits/s, shardcat and the Iceberg REST server]({PICTURE.relative_to(h.ROOT / 'docs')})",
              "", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed).", ""]
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_iceberg_peer", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="3 s windows: a smoke run")
    p.add_argument("--seconds", type=float, help="window per row (default 15)")
    p.add_argument("--out", type=Path, default=h.DOCS, help="markdown file whose section to rewrite")
    p.add_argument("--no-docs", action="store_true", help="print the section, do not write it")
    args = p.parse_args(argv)
    args.seconds = args.seconds or (3 if args.quick else 15)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started, date, info = time.perf_counter(), h.now_utc(), h.machine()
    h.log(f"bench_iceberg_peer: {info['cores']} cores, {info['cpu_model']}, {info['ram_gib']} GiB RAM")
    outcome = h.run_with_postgres("shardcat-bench-", lambda tmp, pg: run(args, tmp, pg))
    if outcome is None:
        return 130
    run_info = {"date": date, "command": shlex.join(["python", "-m", "benchmarks.bench_iceberg_peer", *argv]),
                "machine": info, "seconds": args.seconds, "quick": args.quick,
                "wall_minutes": (time.perf_counter() - started) / 60, **outcome}
    if not args.no_docs:
        plot(run_info, PICTURE)
    h.publish("bench_iceberg_peer", run_info, markdown, args.out, SECTION, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
