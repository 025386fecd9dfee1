"""A Python that can run Locust, for the load runs (loadtest/__main__.py, loadtest/cluster_mix.py).

This interpreter if Locust is importable here; otherwise a virtualenv of Locust's own under
loadtest/out/, made on first use. It sees this environment's packages (the locustfile imports
shardcat and loadtest), but keeps Locust's dependencies apart: Locust wants a newer `requests`
than the delta-sharing connector of the test extra allows, so the two cannot share one
environment without breaking one of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent / "out" / "locust-venv"
REQUIREMENT = "locust>=2.20"


def _has_locust(python: str) -> bool:
    # In a child: importing Locust patches the importing process's sockets and threads (gevent).
    return subprocess.run([python, "-c", "import locust"], capture_output=True).returncode == 0


def locust_python() -> str:
    """The path of a Python with Locust importable, making loadtest/out/locust-venv if need be."""
    if _has_locust(sys.executable):
        return sys.executable
    python = str(VENV / "bin" / "python")
    if not Path(python).exists():
        print(f"Locust is not installed here; making {VENV} for it (once)", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(VENV)], check=True)
    if not _has_locust(python):
        subprocess.run([python, "-m", "pip", "install", "-q", REQUIREMENT], check=True)
    return python


def locust_version(python: str) -> str | None:
    """Locust's version under that Python, for the run's record."""
    try:
        return subprocess.run([python, "-c", "import locust; print(locust.__version__)"], capture_output=True,
                              text=True, timeout=60).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
