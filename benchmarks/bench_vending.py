"""Credential vending per cloud: credentials per second, uncached (each a new one) and cached (reused).

    python -m benchmarks.bench_vending [--calls 300] [--no-docs]

In-process, one event loop, calls one after another: the vending step alone (governance/vending.py and
its cloud modules), after authorization, as the temporary-credentials endpoints run it.

- s3://: `vending.AWS.credential`, an STS AssumeRole with the per-prefix session policy, against moto's
  STS on loopback (a real STS adds a network round trip: tens of milliseconds).
- abfss://: `vending_azure.AZURE.vend` with an azure_storage_key: the Azure SDK's SAS generator, local
  HMAC work, once as a directory SAS (ADLS Gen2) and once as a container SAS (flat namespace). A user
  delegation SAS adds one Entra ID token and one user delegation key round trip per new key; not
  measured here (no stand-in for Entra ID).
- gs://: `vending_gcs.GcpVendor.vend` with a gcp_service_account_key (benchmarks/vending_gcs.py): an STS
  token exchange with a Credential Access Boundary per new prefix, the account's source token reused,
  against the loopback stand-in of tests/integration/gcs_cloud.py (Google's STS adds a network round trip).

Uncached: every call names another table's path (a new cache key), so each one signs or calls STS.
Cached: one path asked again and again (the TLRU cache answers). Writes its section of
docs/benchmarks.md and the raw numbers under benchmarks/out/. Other clouds add a function to CLOUDS.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import secrets
import statistics
import time
import uuid

from . import harness as h
from . import vending_gcs

HEADING = "## Credential vending: credentials per second per cloud, uncached and cached"


async def rate(call, urls: list[str]) -> dict:
    """Calls per second over `urls` (one call each), and the median and 90th percentile of one call."""
    times = []
    start = time.perf_counter()
    for url in urls:
        t0 = time.perf_counter()
        await call(url)
        times.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    times.sort()
    # Per second from the median call: on a shared machine one stall of a few ms would halve a mean
    # over microsecond calls. The wall rate (calls / total) is kept in the raw file.
    return {"per_second": 1 / statistics.median(times), "wall_per_second": len(urls) / total,
            "p50_ms": statistics.median(times) * 1000,
            "p90_ms": times[int(len(times) * 0.9) - 1] * 1000, "calls": len(urls)}


async def measure(call, base: str, calls: int) -> dict:
    await call(f"{base}/warm")                                           # imports, first connection
    uncached = await rate(call, [f"{base}/t{i}" for i in range(calls)])
    await call(f"{base}/same")                                           # the one miss: the cached rate is hits only
    cached = await rate(call, [f"{base}/same"] * calls)
    return {"uncached": uncached, "cached": cached}


async def s3(calls: int) -> list[tuple[str, dict]]:
    import boto3
    from moto.server import ThreadedMotoServer
    from shardcat.governance import vending

    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)               # moto's request log
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update({"SHARDCAT_STS_ENDPOINT": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "bench",
                       "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"})
    try:
        iam = boto3.client("iam", endpoint_url=f"http://{host}:{port}", region_name="us-east-1")
        role = iam.create_role(RoleName="bench", AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                                    "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
        vendor = vending.AwsVendor()

        async def call(url):
            return await vendor.credential(role, None, url, write=False)
        result = await measure(call, f"s3://bench-{uuid.uuid4().hex[:6]}/data", calls)
        assert vendor.stats["assume_role"] == calls + 2, vendor.stats     # warm, each uncached, the first cached
        return [("s3:// STS AssumeRole + session policy (moto on loopback)", result)]
    finally:
        server.stop()


async def azure(calls: int) -> list[tuple[str, dict]]:
    from shardcat.governance import vending_azure

    key = base64.b64encode(secrets.token_bytes(64)).decode()
    out = []
    for label, namespace in (("directory SAS, ADLS Gen2", True), ("container SAS, flat namespace", False)):
        vendor = vending_azure.AzureVendor()
        fields = {"account_name": "benchacct", "account_key": key, "hierarchical_namespace": namespace}

        async def call(url, vendor=vendor, fields=fields):
            return await vendor.vend("azure_storage_key", fields, url, write=False)
        result = await measure(call, "abfss://lake@benchacct.dfs.core.windows.net/data", calls)
        assert vendor.stats["signed"] == calls + 2, vendor.stats
        out.append((f"abfss:// azure_storage_key, {label}", result))
    return out


CLOUDS = {"s3": s3, "abfss": azure, "gs": lambda calls: vending_gcs.gcs(calls, measure)}


def report(run: dict) -> str:
    m = run["machine"]
    lines = [HEADING, "",
             f"- **Reproduce:** `python -m benchmarks.bench_vending --calls {run['calls']}`; run on {run['at']}.",
             f"- **Machine:** {h.machine_line(m, None, postgres=False)}.",
             "- **Method:** in-process, one event loop, one call after another: the vending step alone (after "
             "authorization), by each cloud's vendor object as the temporary-credentials endpoints call it. "
             f"*Uncached*: {run['calls']} calls, each for another path (a new cache key: a new STS call or a new "
             f"signature); *cached*: {run['calls']} calls for one path (the TLRU cache's answer). "
             "Per second is 1 / the median call (the wall rate, calls / total time, is in the raw file: a busy machine's "
             "stalls weigh on it). S3's STS is moto's on loopback, so its uncached rate is moto's speed, not AWS's (a real STS call "
             "adds a network round trip). An Azure user delegation SAS (service principal, managed identity) "
             "adds an Entra ID token and a user delegation key round trip per new key: not measured (no stand-in). "
             "GCS's STS is the loopback stand-in of tests/integration/gcs_cloud.py (one token exchange per "
             "uncached call, the service account's source token reused; Google's STS adds a network round trip).",
             "",
             "| cloud and credential | uncached per s | uncached p50 ms | uncached p90 ms | cached per s | cached p50 ms |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, r in run["rows"]:
        u, c = r["uncached"], r["cached"]
        lines.append(f"| {label} | {u['per_second']:,.0f} | {u['p50_ms']:.2f} | {u['p90_ms']:.2f} | "
                     f"{c['per_second']:,.0f} | {c['p50_ms']:.3f} |")
    lines += ["", f"Raw numbers: `{run['raw']}` (not committed)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--clouds", default=",".join(CLOUDS), help="comma-separated: " + ", ".join(CLOUDS))
    parser.add_argument("--no-docs", action="store_true", help="print the section without writing docs")
    args = parser.parse_args()
    rows = []
    for name in args.clouds.split(","):
        rows += asyncio.run(CLOUDS[name](args.calls))
    run = {"machine": h.machine(), "at": h.now_utc(), "calls": args.calls, "rows": rows}
    run["raw"] = str(h.save_raw("bench_vending", run).relative_to(h.ROOT))
    section = report(run)
    print(section)
    if not args.no_docs:
        h.write_section(h.DOCS, HEADING, section)


if __name__ == "__main__":
    main()
