"""GCS's rows of the vending benchmark (benchmarks/bench_vending.py registers `gcs`): gs:// credentials per second.

The vendor is shardcat's own (`governance/vending_gcs.GcpVendor`, what every vending endpoint calls);
Google is the loopback stand-in of tests/integration/gcs_cloud.py, in its own process: its OAuth token
endpoint (an RS256 JWT checked per source token) and STS (one boundary parsed per exchange). So the
uncached rate is shardcat's side plus a loopback round trip and the stand-in's work, not Google's
latency (tens of milliseconds per STS call from a cloud region, by Google's own account, is the
figure to plan with); the CPU column is this process's alone, i.e. shardcat's cost per credential.

Rows: uncached, a new prefix each time with the account's source token reused (one STS exchange each);
cached, the same prefix again (a TLRU hit). `cold` (run by itself: `python -m benchmarks.vending_gcs`)
times a fresh vendor's first credential: a JWT-bearer grant for the source token, then an exchange.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def gcs(calls: int, measure) -> list[tuple[str, dict]]:
    """bench_vending.py's rows for gs://: `measure(call, base, calls)` is its uncached/cached timing."""
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import gcs_cloud
    from shardcat.governance import vending_gcs

    google = gcs_cloud.Google().start()
    try:
        account = google.add_account(gcs_cloud.new_service_account("bench", {"lake"}))
        os.environ["SHARDCAT_GCP_TOKEN_URI"] = google.token_url
        os.environ["SHARDCAT_GCP_STS_ENDPOINT"] = google.sts_url
        fields = gcs_cloud.key_fields(google, account)
        vendor = vending_gcs.GcpVendor()

        async def call(url):
            return await vendor.vend("gcp_service_account_key", fields, url, write=False)
        result = await measure(call, "gs://lake/data", calls)
        # One source token for the run; an exchange per uncached call (plus the warm-up and the first cached).
        assert vendor.stats["source_tokens"] == 1 and vendor.stats["exchanges"] == calls + 2, vendor.stats
        return [("gs:// gcp_service_account_key, STS exchange with an access boundary (loopback stand-in)", result)]
    finally:
        google.stop()


async def cold(runs: int = 10) -> dict:
    """A fresh vendor's first credential (a JWT-bearer grant for the source token, then an exchange): ms each."""
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import gcs_cloud
    from shardcat.governance import vending_gcs

    google = gcs_cloud.Google().start()
    try:
        account = google.add_account(gcs_cloud.new_service_account("bench", {"lake"}))
        os.environ["SHARDCAT_GCP_TOKEN_URI"] = google.token_url
        os.environ["SHARDCAT_GCP_STS_ENDPOINT"] = google.sts_url
        fields = gcs_cloud.key_fields(google, account)
        times, cpu = [], _cpu()
        for i in range(runs):
            started = time.perf_counter()
            await vending_gcs.GcpVendor().vend("gcp_service_account_key", fields, f"gs://lake/cold/{i}", write=False)
            times.append((time.perf_counter() - started) * 1000)
        return {"runs": runs, "ms": sorted(times), "cpu_ms_per_run": (_cpu() - cpu) * 1000 / runs}
    finally:
        google.stop()


if __name__ == "__main__":        # the uncached and cached rows are bench_vending.py's
    print("cold", json.dumps(asyncio.run(cold())))
