"""What every benchmark module shares: paths, bounds, and logging."""

from __future__ import annotations

import signal
from pathlib import Path

from shardcat.web.wire import PREFIX  # noqa: F401  (the benchmarks read it here)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
RAW_DIR = ROOT / "benchmarks" / "out"

REQUEST_TIMEOUT = 10.0      # seconds; bounds every request, so every loop ends
MAX_REQUESTS = 2_000_000    # per window: a second bound, whatever the clock does
START_TIMEOUT = 120.0       # a server must print its listening line by then (Ray start included)
STOP_TIMEOUT = 15.0         # SIGTERM, then SIGKILL of the whole tree
QUIET_CORES = 0.25          # before a row, wait for the rest of the machine to use less than this
NOISY_CORES = 0.35          # a row whose window saw more "other" CPU than this is flagged ⚠


def log(msg: str = "") -> None:
    print(msg, flush=True)


def on_sigterm_raise() -> None:
    """Turn SIGTERM into KeyboardInterrupt so `finally:` blocks clean up."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, handler)
