"""GCS's rows of the vending benchmark (benchmarks/bench_vending.py registers `measure`): gs:// credentials per second.

The vendor is shardcat's own (`governance/vending_gcs.GcpVendor`, what every vending endpoint calls);
Google is the loopback stand-in of tests/integration/gcs_cloud.py, in its own process: its OAuth token
endpoint (an RS256 JWT checked per source token) and STS (one boundary parsed per exchange). So the
uncached rate is shardcat's side plus a loopback round trip and the stand-in's work, not Google's
latency (tens of milliseconds per STS call from a cloud region, by Google's own account, is the
figure to plan with); the CPU column is this process's alone, i.e. shardcat's cost per credential.

Rows:
- cold: a fresh vendor's first credential (a source-token grant, then an exchange);
- uncached: a new prefix each time, the account's source token reused (one STS exchange each),
  one at a time and 16 at once;
- cached: the same prefix again (a TLRU hit).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _timed(label: str, calls, concurrency: int = 1) -> dict:
    """Run the coroutine factories in `calls`, `concurrency` at a time: rate and CPU per call."""
    started, cpu = time.perf_counter(), _cpu()
    pending = list(calls)
    while pending:
        batch, pending = pending[:concurrency], pending[concurrency:]
        if concurrency == 1:
            await batch[0]()
        else:
            await asyncio.gather(*(c() for c in batch))
    wall, used = time.perf_counter() - started, _cpu() - cpu
    n = len(calls)
    return {"case": label, "calls": n, "concurrency": concurrency, "per_second": n / wall,
            "wall_ms_per_call": wall * 1000 / n, "cpu_us_per_call": used * 1e6 / n}


async def _measure(uncached: int, cached: int) -> list[dict]:
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import gcs_cloud
    from shardcat.governance import vending_gcs

    google = gcs_cloud.Google().start()
    try:
        account = google.add_account(gcs_cloud.new_service_account("bench", {"lake"}))
        os.environ["SHARDCAT_GCP_TOKEN_URI"] = google.token_url
        os.environ["SHARDCAT_GCP_STS_ENDPOINT"] = google.sts_url
        fields = gcs_cloud.key_fields(google, account)

        def vend(vendor, url):
            return lambda: vendor.vend("gcp_service_account_key", fields, url, write=False)

        rows = []
        colds = [vend(vending_gcs.GcpVendor(), f"gs://lake/cold/{i}") for i in range(20)]
        rows.append(await _timed("cold (source token + exchange)", colds))
        vendor = vending_gcs.GcpVendor()
        await vend(vendor, "gs://lake/warm")()                     # the source token, once
        rows.append(await _timed("uncached (one STS exchange)",
                                 [vend(vendor, f"gs://lake/seq/{i}") for i in range(uncached)]))
        rows.append(await _timed("uncached (one STS exchange)",
                                 [vend(vendor, f"gs://lake/par/{i}") for i in range(uncached)], concurrency=16))
        rows.append(await _timed("cached", [vend(vendor, "gs://lake/seq/0") for _ in range(cached)]))
        assert vendor.stats["source_tokens"] == 1, vendor.stats
        return rows
    finally:
        google.stop()


def measure(uncached: int = 300, cached: int = 20000) -> list[dict]:
    """GCS's rows: [{case, calls, concurrency, per_second, wall_ms_per_call, cpu_us_per_call}]."""
    return asyncio.run(_measure(uncached, cached))


if __name__ == "__main__":
    for row in measure():
        print(f"{row['case']:<34} x{row['concurrency']:<3} {row['per_second']:>10.0f}/s "
              f"{row['wall_ms_per_call']:>8.3f} ms  {row['cpu_us_per_call']:>8.0f} us CPU")
