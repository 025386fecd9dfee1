"""Event delivery lag at 500 writes/s: from a write's acknowledgement to its CloudEvent at a webhook.

    python -m benchmarks.bench_events [--rate 500] [--seconds 10] [--tables 50] [--no-docs]

One embedded PostgreSQL, one `shardcat serve` (its in-process shard), one metastore. A webhook
receiver on loopback (aiohttp, in this process) registered through `POST /shardcat/webhooks`;
it checks each event's HMAC signature and notes when it came. Then metastore writes at a fixed
rate, open loop (write i is sent at start + i/rate, whatever the earlier ones are doing; at most
MAX_IN_FLIGHT at once): `PATCH /tables/{name}` of a new comment, cycling over `tables` tables.
Each answer names the version it made (`X-Shardcat-Version`); a write's lag is the time from its
answer reaching the client to the receiver getting the event of that version (same clock; it can
be negative when the event overtakes the answer). After the writes, it waits up to
DRAIN_SECONDS for every acknowledged version and counts the missing, the duplicates and the out of
order. If the machine cannot take `rate`, the achieved rate is the measured ceiling. Writes its
section of docs/benchmarks.md and the raw numbers under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from . import harness as h

HEADING = "## Change events: webhook delivery lag at 500 writes/s"
CATALOG, SCHEMA = "ev", "s"
SECRET = "bench-events-secret-0123456789"
MAX_IN_FLIGHT = 256          # writes outstanding at once; past it the sender waits (and the rate drops)
DRAIN_SECONDS = 60.0         # after the last write, how long the receiver may take to get every event
VERSION_HEADER = "X-Shardcat-Version"
SIGNATURE_HEADER = "X-Shardcat-Signature"


class Receiver:
    """The webhook: notes (version, arrival time) of each event, in arrival order."""

    def __init__(self):
        self.arrivals: list[tuple[int, float]] = []
        self.bad_signatures = 0
        self.got = asyncio.Event()

    async def take(self, request: web.Request) -> web.Response:
        body = await request.read()
        at = time.perf_counter()
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(request.headers.get(SIGNATURE_HEADER, ""), expected):
            self.bad_signatures += 1
        self.arrivals.append((json.loads(body)["data"]["version"], at))
        self.got.set()
        return web.Response(status=204)

    async def start(self) -> tuple[web.AppRunner, str]:
        app = web.Application()
        app.router.add_post("/hook", self.take)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        return runner, f"http://127.0.0.1:{port}/hook"


async def drive(server: h.Server, tables: int, rate: float, seconds: float) -> dict:
    """Writes at `rate` for `seconds`, open loop; returns the acknowledged versions with their times."""
    acks: list[tuple[int, float]] = []
    errors: list[str] = []
    late = 0                                  # writes sent more than 10 ms after their slot
    slots = asyncio.Semaphore(MAX_IN_FLIGHT)
    total = int(rate * seconds)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"},
                                     timeout=aiohttp.ClientTimeout(total=h.REQUEST_TIMEOUT),
                                     connector=aiohttp.TCPConnector(limit=MAX_IN_FLIGHT)) as session:
        async def write(i: int) -> None:
            try:
                url = f"{server.api}/tables/{CATALOG}.{SCHEMA}.{h.table_name(i % tables)}"
                async with session.patch(url, json={"comment": f"write {i}"}) as r:
                    await r.read()
                    at = time.perf_counter()
                    if r.status != 200:
                        errors.append(f"HTTP {r.status}")
                    else:
                        acks.append((int(r.headers[VERSION_HEADER]), at))
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                errors.append(type(e).__name__)
            finally:
                slots.release()

        tasks = []
        start = time.perf_counter()
        for i in range(total):
            await slots.acquire()
            slot = start + i / rate
            wait = slot - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            elif wait < -0.010:
                late += 1
            tasks.append(asyncio.get_running_loop().create_task(write(i)))
        await asyncio.gather(*tasks)
        sent_s = time.perf_counter() - start
    return {"sent": total, "acks": acks, "errors": errors, "late": late, "sent_s": sent_s}


async def run(args, tmp: Path, pg: h.Postgres) -> dict:
    db = await pg.database("bench_events")
    server = h.start_shardcat(tmp / "serve", db, "--webhook-allow-host", "127.0.0.1")    # the receiver is on loopback
    receiver = Receiver()
    runner, hook_url = await receiver.start()
    try:
        await h.seed_tables(server.api, server.token, CATALOG, SCHEMA, args.tables)
        status, body = await h.call("POST", f"{server.api}/shardcat/webhooks", server.token,
                                    json={"url": hook_url, "secret": SECRET})
        if status != 200:
            raise RuntimeError(f"registering the webhook: HTTP {status}: {body[:300]!r}")
        registered_at = json.loads(body)["from_version"]
        await asyncio.wait_for(receiver.got.wait(), 30)      # the registration's own event: delivery runs
        h.log(f"== webhook registered at version {registered_at}; {args.rate:g} writes/s for {args.seconds:g} s")
        drove = await drive(server, args.tables, args.rate, args.seconds)
        acks = drove["acks"]
        last = max((v for v, _ in acks), default=registered_at)
        deadline = time.perf_counter() + DRAIN_SECONDS
        while time.perf_counter() < deadline and not any(v >= last for v, _ in receiver.arrivals[-50:]):
            receiver.got.clear()
            try:
                await asyncio.wait_for(receiver.got.wait(), 0.5)
            except asyncio.TimeoutError:
                pass
        await asyncio.sleep(0.5)        # stragglers (duplicates) after the last
    finally:
        await runner.cleanup()
        h.stop(server.child)

    first_arrival: dict[int, float] = {}
    for version, at in receiver.arrivals:
        first_arrival.setdefault(version, at)
    lags = sorted((first_arrival[v] - at) * 1000 for v, at in acks if v in first_arrival)
    acked_versions = {v for v, _ in acks}
    missing = sorted(acked_versions - first_arrival.keys())
    # every version from the registration's own (the one after `from_version`) to the last write's must come
    gaps = sorted(set(range(registered_at + 1, last + 1)) - first_arrival.keys())
    order = [v for v, _ in receiver.arrivals]
    out_of_order = sum(1 for a, b in zip(order, order[1:]) if b < a)
    achieved = len(acks) / drove["sent_s"] if drove["sent_s"] else 0.0
    h.log(f"== {len(acks):,} writes acknowledged in {drove['sent_s']:.1f} s ({achieved:.0f}/s), "
          f"{len(first_arrival):,} versions received, {len(missing)} missing")
    return {"rate": args.rate, "seconds": args.seconds, "tables": args.tables, "sent": drove["sent"],
            "acknowledged": len(acks), "errors": len(drove["errors"]), "error_samples": drove["errors"][:5],
            "late": drove["late"], "sent_s": drove["sent_s"], "achieved_rate": achieved,
            "versions_acknowledged": len(acked_versions), "events_received": len(receiver.arrivals),
            "versions_received": len(first_arrival), "duplicates": len(receiver.arrivals) - len(first_arrival),
            "missing": len(missing), "missing_sample": missing[:10], "gaps": len(gaps),
            "out_of_order": out_of_order, "bad_signatures": receiver.bad_signatures,
            "lag_ms": {"min": lags[0] if lags else None, "p50": h.percentile(lags, 50),
                       "p99": h.percentile(lags, 99), "max": lags[-1] if lags else None,
                       "mean": statistics.fmean(lags) if lags else None},
            "postgres_version": pg.version}


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


def markdown(run: dict) -> str:
    lag = run["lag_ms"]
    ceiling = run["achieved_rate"] < 0.95 * run["rate"]
    lines = [HEADING, "",
             f"- **Reproduce:** `{run['command']}`; run on {run['date']}.",
             f"- **Machine:** {h.machine_line(run['machine'], run['postgres_version'])}.",
             f"- **Method:** one metastore, one webhook on loopback (an aiohttp receiver in the load process, "
             "checking each HMAC signature) registered through `POST /shardcat/webhooks`; then "
             f"`PATCH /tables/{{name}}` of a comment, cycling over {run['tables']} tables, sent open loop at "
             f"{run['rate']:g} writes/s for {run['seconds']:g} s (at most {MAX_IN_FLIGHT} in flight). A write's lag: "
             "from its answer reaching the client to the receiver getting the event of the version the answer "
             "names (`X-Shardcat-Version`), one clock; negative when the event overtakes the answer. Then up to "
             f"{DRAIN_SECONDS:.0f} s for every acknowledged version to arrive.",
             "",
             "| writes/s asked | writes/s acknowledged | writes | lag p50 ms | lag p99 ms | lag max ms | "
             "versions received | missing | duplicates | out of order | bad signatures |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
             f"| {run['rate']:g} | {run['achieved_rate']:.0f} | {run['acknowledged']:,} | {_ms(lag['p50'])} | "
             f"{_ms(lag['p99'])} | {_ms(lag['max'])} | {run['versions_received']:,} | {run['missing']} | "
             f"{run['duplicates']} | {run['out_of_order']} | {run['bad_signatures']} |",
             "",
             f"Lag min {_ms(lag['min'])} ms, mean {_ms(lag['mean'])} ms; {run['errors']} writes failed; "
             f"{run['late']} writes left more than 10 ms after their slot; {run['gaps']} versions between the "
             "registration and the last write never arrived."]
    if ceiling:
        lines += ["", f"**This machine did not take {run['rate']:g} writes/s:** {run['achieved_rate']:.0f} "
                  "writes/s acknowledged is the measured ceiling here (server, PostgreSQL, load and receiver "
                  "on the same cores)."]
    lines += ["", f"Raw numbers: `benchmarks/out/{run['raw_file']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_events", description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=500.0, help="writes per second asked")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tables", type=int, default=50, help="tables the writes cycle over")
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args(argv)
    if args.rate <= 0 or not 0 < args.seconds <= 300 or args.tables < 1:
        parser.error("need rate > 0, 0 < seconds <= 300, tables >= 1")
    info = {"date": h.now_utc(), "command": shlex.join(["python", "-m", "benchmarks.bench_events",
                                                        *(sys.argv[1:] if argv is None else argv)]),
            "machine": h.machine()}

    async def body(tmp: Path, pg: h.Postgres) -> dict:
        return await run(args, tmp, pg)

    result = h.run_with_postgres("bench_events", body)
    if result is None:
        return 1
    h.publish("bench_events", {**info, **result}, markdown, h.DOCS, HEADING, to_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
