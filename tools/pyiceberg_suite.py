"""Runs pyiceberg's own integration suite against shardcat: `tests/integration` of apache/iceberg-python at the
installed pyiceberg's tag, with its catalog fixtures pointed at a shardcat this script starts, no test body edited.

    python tools/pyiceberg_suite.py [--workdir DIR] [-k EXPR] [--timeout SECONDS]

The tests come from a clone or fetched mirror (tools/iceberg_sources.py: `$ICEBERG_PYTHON_REPO`, else the
mirror), exported with `git archive` into the work directory; nothing of them enters this repository. What
points them at shardcat, beside them and never inside a test:
- `tests/integration/conftest.py` (written here): `session_catalog`, the suite's REST catalog, is shardcat's
  Iceberg REST catalog with warehouse `pyiceberg` (so its `default` namespace is the schema `pyiceberg.default`)
  and the admin token;
- `PYICEBERG_TEST_CATALOG` (the suite's own switch for "a REST catalog under test", `rest_test_catalog`) names the
  same catalog through pyiceberg's environment configuration.
Fixtures the suite hard-codes to servers that are not here (the `rest_catalog` of test_catalog.py at
localhost:8181, Hive at 9083, Spark Connect at 15002, MinIO at 9000) fail as they would anywhere without them;
the summary groups every failure by its reason (docs/iceberg.md keeps the list). The test dependencies the suite
imports (pytest-lazy-fixtures, pytest-mock, requests-mock, fastavro, thrift, sqlalchemy) are installed from PyPI when missing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from iceberg_sources import export_tests, iceberg_python_repo, pyiceberg_tag  # noqa: E402

WAREHOUSE = "pyiceberg"
NEEDED = {"pytest_lazy_fixtures": "pytest-lazy-fixtures", "pytest_mock": "pytest-mock",
          "requests_mock": "requests-mock", "fastavro": "fastavro", "thrift": "thrift",
          "sqlalchemy": "sqlalchemy"}
CONFTEST = '''"""Written by shardcat's tools/pyiceberg_suite.py: the suite's REST catalog is shardcat's."""
import os

import pytest
from pyiceberg.catalog import Catalog, load_catalog


@pytest.fixture(scope="session")
def session_catalog() -> Catalog:
    return load_catalog(os.environ["PYICEBERG_TEST_CATALOG"])


@pytest.fixture(scope="session")
def spark():
    # the suite's Spark Connect server (localhost:15002) is not here: said at once, not after its retries
    pytest.fail("Spark Connect at localhost:15002 is not here (the suite's Spark-made fixtures)")


# The parameters naming catalogs hard-coded to servers that are not here: left out (and counted), since their
# fixtures' failing set-up leaves pytest unable to set up the next parameter (rest_test_catalog, shardcat).
ELSEWHERE = {"hive_catalog", "session_catalog_hive", "rest_catalog"}


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        ids = item.name.partition("[")[2].rstrip("]").split("-")
        (drop if ELSEWHERE & set(ids) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        with open(os.environ["PYICEBERG_SUITE_ELSEWHERE"], "w") as out:
            out.write(" ".join(item.nodeid for item in drop))
'''
# A failure's reason, by what its message says: (pattern, reason), first match wins.
REASONS = [
    (r"15002|spark|SparkConnect|pyspark", "Spark Connect at localhost:15002 (the suite's Spark-made fixtures)"),
    (r"Table does not exist: default\.", "a table the suite's provisioning makes with Spark before it runs"),
    (r"(schema|table) name '[^']*' contains? an invalid character",
     "a name with a space or a dot (a Unity Catalog name has neither)"),
    (r"pyiceberg_core needs to be installed", "the optional pyiceberg-core package"),
    (r"Failed to download extension", "a DuckDB extension download (no network but package registries)"),
    (r"write\.parquet\.compression-codec", "the Java reference catalog's default table properties"),
    (r"Timeout \(>", "the per-test timeout on a loaded machine"),
    (r"9083|thrift|[Hh]ive", "a Hive metastore at localhost:9083"),
    (r"8181", "the rest_catalog fixture hard-coded to localhost:8181 (the same bodies run as rest_test_catalog)"),
    (r"9000|s3://|S3|minio|boto|AWS", "S3 (MinIO at localhost:9000)"),
    (r"gs://|gcs|GCS", "Google Cloud Storage"), (r"abfs|adls|[Aa]zure", "Azure storage"),
    (r"[Ff]ormat version 3|v3|format-version.*3", "format version 3"),
]


def ensure_dependencies() -> None:
    missing = [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def start_shardcat(data_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """`shardcat serve` on a free port with its own embedded PostgreSQL: (process, API base URL, admin token)."""
    process = subprocess.Popen([sys.executable, "-m", "shardcat", "serve", "--port", "0", "--data-dir", str(data_dir)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        found = re.search(r"listening on (http://\S+/api/2\.1/unity-catalog)", line)
        if found:
            return process, found.group(1), (data_dir / "admin-token").read_text().strip()
    raise RuntimeError("shardcat serve stopped before it listened")


def summarize(report: Path) -> tuple[Counter, dict[str, list[str]]]:
    outcomes, failed = Counter(), defaultdict(list)
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        problem = next((case.find(t) for t in ("failure", "error") if case.find(t) is not None), None)
        if problem is not None:
            outcomes["failed"] += 1
            said = f"{problem.get('message') or ''} {(problem.text or '')[-4000:]}"
            reason = next((r for pattern, r in REASONS if re.search(pattern, said)), "other (read the report)")
            failed[reason].append(name)
        elif case.find("skipped") is not None:
            outcomes["skipped"] += 1
        else:
            outcomes["passed"] += 1
    return outcomes, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("-k", default=None, help="pytest's -k, to run some tests only")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    args = parser.parse_args()
    repo = iceberg_python_repo()
    version = importlib.metadata.version("pyiceberg")
    tag = pyiceberg_tag(version, repo) if repo else None
    if tag is None:
        sys.exit(f"iceberg-python's tests for pyiceberg {version} are not here: set $ICEBERG_PYTHON_REPO to a clone.")
    ensure_dependencies()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pyiceberg-suite-"))
    export_tests(repo, tag, work / "suite")
    (work / "suite" / "tests" / "integration" / "conftest.py").write_text(CONFTEST)
    process, api, token = start_shardcat(work / "shardcat")
    try:
        answer = requests.post(f"{api}/catalogs", json={"name": WAREHOUSE}, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        for schema in ("default",):       # the suite's own namespace (new catalogs may already have it)
            requests.post(f"{api}/schemas", json={"name": schema, "catalog_name": WAREHOUSE},
                          headers={"Authorization": f"Bearer {token}"})
        env = {**os.environ, "PYICEBERG_TEST_CATALOG": "shardcat", "PYICEBERG_CATALOG__SHARDCAT__TYPE": "rest",
               "PYICEBERG_CATALOG__SHARDCAT__URI": f"{api}/iceberg", "PYICEBERG_CATALOG__SHARDCAT__TOKEN": token,
               "PYICEBERG_CATALOG__SHARDCAT__WAREHOUSE": WAREHOUSE}
        report = work / "report.xml"
        env["PYICEBERG_SUITE_ELSEWHERE"] = str(work / "elsewhere.txt")
        # Only the plugins the suite uses: others installed for shardcat's own tests (anyio, asyncio) warn as they
        # load, which the suite's settings make errors.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugins = [f"-p{p}" for p in ("pytest_lazy_fixtures.plugin", "pytest_mock", "pytest_timeout",
                                       "requests_mock.contrib._pytest_plugin")]
        command = [sys.executable, "-m", "pytest", "tests/integration", "-m", "integration", "-q", *plugins,
                   "-p", "no:cacheprovider", "--continue-on-collection-errors", f"--junitxml={report}", "-o", f"timeout={args.timeout}", "-rN"]
        if args.k:
            command += ["-k", args.k]
        print(f"pyiceberg {version} ({tag}), shardcat at {api}, in {work}", flush=True)
        subprocess.run(command, cwd=work / "suite", env=env)
    finally:
        process.terminate()
        process.wait(30)
    outcomes, failed = summarize(report)
    elsewhere = (work / "elsewhere.txt").read_text().split() if (work / "elsewhere.txt").exists() else []
    print(f"{outcomes['passed']} passed, {outcomes['failed']} failed, {outcomes['skipped']} skipped; "
          f"{len(elsewhere)} left out: parametrized with a Hive catalog or the rest_catalog at localhost:8181")
    for reason, names in sorted(failed.items(), key=lambda kv: -len(kv[1])):
        print(f"\n{len(names)} failed: {reason}")
        for name in sorted(names):
            print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
