"""Where Apache Iceberg's own sources are on this machine, for the checks that need them but may not copy
them into the repository: the REST catalog spec (apache/iceberg's open-api/rest-catalog-open-api.yaml, for
tests/integration/test_fuzz_iceberg_spec.py) and pyiceberg's integration suite (apache/iceberg-python's
tests/ at the installed pyiceberg's tag, for tools/pyiceberg_suite.py).

No package registry ships either (pyiceberg's sdist has no tests), so they come from a git clone or a fetched
mirror: `$ICEBERG_REST_SPEC` (the yaml file) and `$ICEBERG_PYTHON_REPO` (a git directory of iceberg-python),
else the mirrors under `$ICEBERG_MIRRORS` (default /work/.mirror: `apache+iceberg/repo`,
`apache+iceberg-python/repo`, bare git directories). Read with git, never from the network.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MIRRORS = Path(os.environ.get("ICEBERG_MIRRORS", "/work/.mirror"))


def _git(repo: Path, *args: str) -> str | None:
    done = subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _git_dir(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def iceberg_rest_spec() -> str | None:
    """The newest Iceberg REST catalog spec's text, or None where there is none."""
    given = os.environ.get("ICEBERG_REST_SPEC")
    if given:
        return Path(given).read_text()
    repo = MIRRORS / "apache+iceberg" / "repo"
    return _git(repo, "show", "HEAD:open-api/rest-catalog-open-api.yaml") if repo.exists() else None


def iceberg_python_repo() -> Path | None:
    given = os.environ.get("ICEBERG_PYTHON_REPO")
    repo = _git_dir(Path(given)) if given else MIRRORS / "apache+iceberg-python" / "repo"
    return repo if repo.exists() else None


def pyiceberg_tag(version: str, repo: Path) -> str | None:
    """The tag of pyiceberg `version` in `repo`: its release tag, else its last release candidate (a release is
    its last candidate's commit; a mirror may lack the final tag)."""
    tags = (_git(repo, "tag", "--list", f"pyiceberg-{version}*") or "").split()
    if f"pyiceberg-{version}" in tags:
        return f"pyiceberg-{version}"
    candidates = sorted((t for t in tags if t.startswith(f"pyiceberg-{version}rc")), key=lambda t: int(t.rsplit("rc", 1)[1]))
    return candidates[-1] if candidates else None


def export_tests(repo: Path, tag: str, into: Path) -> Path:
    """iceberg-python's tests/ (with its pyproject.toml, for the pytest settings, and dev/provision.py, the script
    that makes its Spark-made tables) at `tag`, written under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", tag, "tests", "pyproject.toml",
                              "dev/provision.py"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into
