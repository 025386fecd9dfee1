"""The `shardcat` entry point imports no server module until `serve`: a client command starts at once.

A structural check (which modules a fresh interpreter has loaded), not a timing; the time itself is
measured by benchmarks/bench_cli_start.py.
"""

import json
import subprocess
import sys

SERVER_MODULES = ("ray", "pyiceberg", "aiohttp", "asyncpg", "uvloop", "pyarrow", "cryptography",
                  "shardcat.cluster.server", "shardcat.serving", "shardcat.catalog", "shardcat.store")


def loaded_after(code: str) -> set[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def server_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == s or m.startswith(s + ".") for s in SERVER_MODULES)}


def test_the_entry_point_and_a_parsed_client_command_import_no_server_module():
    loaded = loaded_after("from shardcat.cluster.cli import build_parser\n"
                          "build_parser().parse_args(['--json', 'catalog', 'list', '--server', 'http://127.0.0.1:1'])")
    assert "shardcat.client.cli" in loaded
    assert server_modules(loaded) == set()


def test_the_check_sees_the_server_when_it_is_imported():
    # The same check on the serve path's own module finds what the client must not load.
    assert {"ray", "aiohttp.web", "shardcat.cluster.server"} <= server_modules(
        loaded_after("import shardcat.cluster.server"))
