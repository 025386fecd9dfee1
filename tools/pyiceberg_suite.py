"""Runs pyiceberg's own integration suite against shardcat: `tests/integration` of apache/iceberg-python at the
installed pyiceberg's tag, with the servers it expects started here in place of its docker-compose, no test body edited.

    python tools/pyiceberg_suite.py [--workdir DIR] [-k EXPR] [--timeout SECONDS] [--files GLOB ...]
                                  [--no-spark] [--no-provision] [--s3-storage]

The tests come from a clone or fetched mirror (tools/iceberg_sources.py: `$ICEBERG_PYTHON_REPO`, else the
mirror), exported with `git archive` into the work directory; nothing of them enters this repository. What
points them at shardcat, beside them and never inside a test:
- the servers at their fixed ports (tools/pyiceberg_servers.py): shardcat's Iceberg REST catalog at
  127.0.0.1:8181 (their `session_catalog` and `rest_catalog` fixtures, and their Spark's `rest` catalog, use
  the warehouse `pyiceberg`, whose `default` namespace is the schema `pyiceberg.default`), moto's S3 at 9000
  for their MinIO, Spark Connect at 15002 with Iceberg's Spark runtime; with `--s3-storage` the catalog's managed
  storage is that S3's bucket `warehouse`, as in their set-up (else shardcat's local storage);
- their own `dev/provision.py`, run once against those, makes the tables their tests expect Spark to have made;
- `PYICEBERG_TEST_CATALOG` (the suite's own switch for "a REST catalog under test", `rest_test_catalog`) names
  shardcat's catalog directly, with the admin's token (no proxy);
- `tests/integration/conftest.py` (written here) leaves out the parameters naming a Hive metastore (9083).
Each test file runs in its own pytest process with its own report, so a run cut short still counts what ran;
the summary groups every failure by its reason (docs/iceberg.md keeps the list). The test dependencies the
suite imports (pytest-lazy-fixtures, pytest-mock, requests-mock, fastavro, thrift, sqlalchemy) are installed
from PyPI when missing.
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
import threading
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from iceberg_sources import export_tests, iceberg_python_repo, pyiceberg_tag  # noqa: E402
import pyiceberg_servers as servers  # noqa: E402

WAREHOUSE = "pyiceberg"
NEEDED = {"pytest_lazy_fixtures": "pytest-lazy-fixtures", "pytest_mock": "pytest-mock",
          "requests_mock": "requests-mock", "fastavro": "fastavro", "thrift": "thrift",
          "sqlalchemy": "sqlalchemy", "pyiceberg_core": "pyiceberg-core>=0.10.1,<0.11.0"}
CONFTEST = '''"""Written by shardcat's tools/pyiceberg_suite.py: leaves out the parameters naming a Hive metastore."""
import os

# Their fixtures' failing set-up (no Hive metastore at localhost:9083 here) leaves pytest unable to set up the
# next parameter of the same test (rest_test_catalog, shardcat): left out, and counted.
ELSEWHERE = {"hive_catalog", "session_catalog_hive"}


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        ids = item.name.partition("[")[2].rstrip("]").split("-")
        (drop if ELSEWHERE & set(ids) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        with open(os.environ["PYICEBERG_SUITE_ELSEWHERE"], "a") as out:
            out.write(" ".join(item.nodeid for item in drop) + " ")
'''
# A failure's reason, by what its message says: (pattern, reason), first match wins.
REASONS = [
    (r"CompleteMultipartUpload", "moto's CompleteMultipartUpload answer (before the harness corrected it)"),
    (r"\('s3://", "the suite's warehouse on S3: file paths must start with s3:// (see --s3-storage), some with "
                 "s3://warehouse/<namespace>/<table>, the reference catalog's layout"),
    (r"Path cannot start with a separator",
     "reads the table's files with an S3 filesystem of its own (the table is on local storage; see --s3-storage)"),
    (r"_namespace_separator",
     "the reference REST fixture's own configuration: namespace separator '.', nested namespaces"),
    (r"DID NOT RAISE CommitFailedException|found matching the filter for snapshots set\(\)",
     "pyiceberg 0.12.0 retries a commit the catalog refused (409); the tests at the rc1 tag expect the refusal"),
    (r"'testBranch'",
     "the order of refs in a metadata file Java's reference catalog writes (JSON object keys have none)"),
    (r"sc://localhost:15002|failed to connect to all addresses", "Spark Connect at localhost:15002 not reached"),
    (r"Table does not exist: default\.", "a table the suite's provisioning makes with Spark before it runs"),
    (r"(schema|table) name '[^']*' contains? an invalid character",
     "a name with a space or a dot (a Unity Catalog name has neither)"),
    (r"pyiceberg_core needs to be installed", "the optional pyiceberg-core package"),
    (r"Failed to download extension", "a DuckDB extension download (no network but package registries)"),
    (r"write\.parquet\.compression-codec", "the Java reference catalog's default table properties"),
    (r"Timeout \(>", "the per-test timeout on a loaded machine"),
    (r"9083|thrift|HIVE_SUPPORT", "a Hive metastore at localhost:9083"),
    (r"ray_dataset\.to_pandas",
     "Ray's pandas conversion of a decimal in a map differs from pyiceberg's (the installed Ray, shardcat's)"),
    (r"gs://|gcs|GCS", "Google Cloud Storage"), (r"abfs|adls|[Aa]zure", "Azure storage"),
    (r"[Ff]ormat version 3|v3|format-version.*3", "format version 3"),
]


def ensure_dependencies() -> None:
    missing = [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def start_shardcat(data_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """`shardcat serve` on a free port with its own embedded PostgreSQL: (process, API base URL, admin token)."""
    # the suite's MinIO is on loopback: listed, or the catalog would not call it (docs/storage.md)
    process = subprocess.Popen([sys.executable, "-m", "shardcat", "serve", "--port", "0", "--data-dir", str(data_dir),
                                "--s3-compatible-endpoint", f"127.0.0.1:{servers.S3_PORT}"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        found = re.search(r"listening on (http://\S+/api/2\.1/unity-catalog)", line)
        if found:
            # the rest of its output to a file, read as it comes (a full pipe would stop the server)
            log = (data_dir.parent / "shardcat.log").open("w")
            threading.Thread(target=lambda: [log.write(rest) for rest in process.stdout], daemon=True).start()
            return process, found.group(1), (data_dir / "admin-token").read_text().strip()
    raise RuntimeError("shardcat serve stopped before it listened")


def make_warehouse(api: str, token: str, on_s3: bool) -> None:
    """The catalog `pyiceberg` and its schema `default` (the suite's own namespace). On S3, its managed storage is
    the suite's bucket, `s3://warehouse/pyiceberg`, through an external location over the bucket with an
    `s3_compatible` credential holding the suite's MinIO keys (shardcat vends them with the endpoint)."""
    def post(path: str, body: dict) -> dict:
        answer = requests.post(f"{api}{path}", json=body, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        return answer.json()
    catalog = {"name": WAREHOUSE}
    if on_s3:
        keys = servers.S3_KEYS
        post("/storage-credentials", {"name": "minio", "s3_compatible": {
            "endpoint_url": f"http://127.0.0.1:{servers.S3_PORT}", "access_key_id": keys["aws_access_key_id"],
            "secret_access_key": keys["aws_secret_access_key"]}})
        post("/external-locations", {"name": "warehouse", "url": "s3://warehouse", "credential_name": "minio"})
        catalog["storage_root"] = f"s3://warehouse/{WAREHOUSE}"
    post("/catalogs", catalog)
    requests.post(f"{api}/schemas", json={"name": "default", "catalog_name": WAREHOUSE},   # a new catalog may
                  headers={"Authorization": f"Bearer {token}"})                           # already have it


def summarize(reports: list[Path]) -> tuple[Counter, dict[str, list[str]]]:
    outcomes, failed = Counter(), defaultdict(list)
    for report in reports:
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


def provision(suite: Path, env: dict, log: Path) -> None:
    """Their dev/provision.py makes the Spark-made tables in catalog `rest`, then the same in `hive`, which is
    not here: it stops there, with the tables of `rest` made."""
    with log.open("w") as out:
        done = subprocess.run([sys.executable, "dev/provision.py"], cwd=suite, env=env, stdout=out,
                              stderr=subprocess.STDOUT, timeout=1800)
    said = [line for line in log.read_text().splitlines() if re.match(r"\S*(Exception|Error)\b", line)]
    print(f"dev/provision.py exited {done.returncode} (its log: {log}){': ' + said[0] if said else ''}", flush=True)


def test_files(suite: Path, patterns: list[str]) -> list[Path]:
    tests = suite / "tests" / "integration"
    return sorted({f for pattern in patterns for f in tests.glob(pattern) if f.name.startswith("test_")})


def run_suite(args, suite: Path, env: dict, reports: Path) -> None:
    # Only the plugins the suite uses: others installed for shardcat's own tests (anyio, asyncio) warn as they
    # load, which the suite's settings make errors.
    env = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    plugins = [f"-p{p}" for p in ("pytest_lazy_fixtures.plugin", "pytest_mock", "pytest_timeout",
                                   "requests_mock.contrib._pytest_plugin")]
    reports.mkdir(exist_ok=True)
    for path in test_files(suite, args.files):
        name = str(path.relative_to(suite))
        command = [sys.executable, "-m", "pytest", name, "-m", "integration", "-q", *plugins, "-p", "no:cacheprovider",
                   f"--junitxml={reports / (name.replace('/', '.') + '.xml')}", "-o", f"timeout={args.timeout}", "-rN"]
        if args.k:
            command += ["-k", args.k]
        print(f"== {name}", flush=True)
        subprocess.run(command, cwd=suite, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("-k", default=None, help="pytest's -k, to run some tests only")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per test")
    parser.add_argument("--files", nargs="+", default=["test_*.py", "test_writes/test_*.py"],
                        help="test files to run, as globs under tests/integration")
    parser.add_argument("--no-spark", action="store_true", help="start no Spark Connect server (nor provision)")
    parser.add_argument("--no-provision", action="store_true",
                        help="skip dev/provision.py (for test files that make their own tables)")
    parser.add_argument("--s3-storage", action="store_true",
                        help="the catalog's managed storage on the S3 at 9000 (as the suite's own set-up has it)")
    args = parser.parse_args()
    repo = iceberg_python_repo()
    version = importlib.metadata.version("pyiceberg")
    tag = pyiceberg_tag(version, repo) if repo else None
    if tag is None:
        sys.exit(f"iceberg-python's tests for pyiceberg {version} are not here: set $ICEBERG_PYTHON_REPO to a clone.")
    servers.require_free(servers.REST_PORT, servers.S3_PORT, servers.SPARK_CONNECT_PORT)
    ensure_dependencies()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pyiceberg-suite-"))
    suite = export_tests(repo, tag, work / "suite")
    (suite / "tests" / "integration" / "conftest.py").write_text(CONFTEST)
    process, api, token = start_shardcat(work / "shardcat")
    started = []
    try:
        started.append(servers.S3Server().start())
        make_warehouse(api, token, args.s3_storage)
        started.append(servers.RestForward(f"{api}/iceberg", token, WAREHOUSE).start())
        rest_uri, s3_endpoint = f"http://127.0.0.1:{servers.REST_PORT}", f"http://127.0.0.1:{servers.S3_PORT}"
        env = {**os.environ, "PYICEBERG_TEST_CATALOG": "shardcat", "PYICEBERG_CATALOG__SHARDCAT__TYPE": "rest",
               "PYICEBERG_CATALOG__SHARDCAT__URI": f"{api}/iceberg", "PYICEBERG_CATALOG__SHARDCAT__TOKEN": token,
               "PYICEBERG_CATALOG__SHARDCAT__WAREHOUSE": WAREHOUSE,
               "PYICEBERG_SUITE_ELSEWHERE": str(work / "elsewhere.txt")}
        print(f"pyiceberg {version} ({tag}), shardcat at {api} (and {rest_uri}), S3 at {s3_endpoint}, in {work}",
              flush=True)
        if not args.no_spark:
            log = work / "spark-connect.log"
            started.append(servers.start_spark_connect(rest_uri, s3_endpoint, log))
            print(f"Spark Connect at sc://127.0.0.1:{servers.SPARK_CONNECT_PORT} (its log: {log})", flush=True)
            if not args.no_provision:
                provision(suite, env, work / "provision.log")
        run_suite(args, suite, env, work / "reports")
    finally:
        for server in reversed(started):
            servers.stop(server) if isinstance(server, subprocess.Popen) else server.stop()
        process.terminate()
        process.wait(30)
    outcomes, failed = summarize(sorted((work / "reports").glob("*.xml")))
    elsewhere = (work / "elsewhere.txt").read_text().split() if (work / "elsewhere.txt").exists() else []
    print(f"{outcomes['passed']} passed, {outcomes['failed']} failed, {outcomes['skipped']} skipped; "
          f"{len(elsewhere)} left out: parametrized with a Hive catalog")
    for reason, names in sorted(failed.items(), key=lambda kv: -len(kv[1])):
        print(f"\n{len(names)} failed: {reason}")
        for name in sorted(names):
            print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
