"""The README followed to the end: its code blocks run in order against a fresh `shardcat serve`.

The test starts the server the README starts (`shardcat serve`, here with `--port 0`, on a fresh
database of the session's PostgreSQL) under a fresh home directory, so `~/.shardcat` is a new
data dir; then it runs every ```bash and ```python block in the README's order, with the port
substituted. Only install lines (`pip install ...`, which also holds the serve and test commands)
are left out; any block that fails fails the test, with its output.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INSTALL = re.compile(r"^pip install ")
TEST_COMMAND = 'pip install -e ".[test]" && python -m pytest -q'    # .ci/run runs exactly this line
START_TIMEOUT = 90      # seconds for `shardcat serve` to print its address on a busy machine
BLOCK_TIMEOUT = 120


def readme_blocks() -> list[tuple[str, str]]:
    """(language, code) of every block, in the README's order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(README.read_text())]


def runnable(blocks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The bash and python blocks without their install lines (blocks left empty dropped)."""
    out = []
    for language, code in blocks:
        if language == "bash":
            code = "\n".join(line for line in code.splitlines() if not INSTALL.match(line))
        if language in ("bash", "python") and code.strip():
            out.append((language, code))
    return out


def on_server(pg_url: str, sql: str) -> None:
    """One statement on the session's PostgreSQL (in a thread of its own: asyncio.run must not touch
    the test session's event loop)."""
    import asyncpg

    async def execute() -> None:
        conn = await asyncpg.connect(pg_url, timeout=30)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()
    worker = threading.Thread(target=asyncio.run, args=(execute(),))
    worker.start()
    worker.join(60)


@pytest.fixture(scope="module")
def served(pg_url, tmp_path_factory):
    """(home directory, port, the server's first printed lines) of a `shardcat serve` on a fresh data dir."""
    home = tmp_path_factory.mktemp("readme_home")
    log = home / "serve.log"
    database = f"readme_{uuid.uuid4().hex[:12]}"      # a fresh, empty database on the session's PostgreSQL
    on_server(pg_url, f'CREATE DATABASE "{database}"')
    db_url = urllib.parse.urlsplit(pg_url)._replace(path=f"/{database}").geturl()
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "shardcat", "serve", "--port", "0", "--data-dir",
                                 str(home / ".shardcat"), "--db", db_url, "--log-level", "WARNING"],
                                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
                                env={**os.environ, "HOME": str(home)})
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:        # keeps reading, so the server never blocks on a full pipe
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    printed: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while not any(line.startswith("admin token in ") for line in printed):
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"shardcat serve printed no address in {START_TIMEOUT} s: {log.read_text()[-3000:]}")
            if line is None:
                pytest.fail(f"shardcat serve exited ({proc.wait()}): {log.read_text()[-3000:]}")
            printed.append(line)
        port = int(re.search(r"shardcat listening on http://127\.0\.0\.1:(\d+)/", printed[0]).group(1))
        yield home, port, printed
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        on_server(pg_url, f'DROP DATABASE IF EXISTS "{database}"')


def test_the_readme_keeps_the_commands_it_promises():
    blocks = readme_blocks()
    bash = "\n".join(code for language, code in blocks if language == "bash")
    assert "pip install -e . && shardcat serve" in bash.splitlines()
    assert TEST_COMMAND in bash.splitlines()
    assert any(language == "python" and "asyncio.run(" in code for language, code in blocks)
    assert "pip install unitycatalog-client" in bash.splitlines()    # the SDK snippet's install line


def test_the_server_prints_what_the_readme_shows(served):
    _, port, printed = served
    shown = next(code for language, code in readme_blocks() if language == "text" and "explorer at" in code)
    expected = [line.replace(":8080", f":{port}") for line in shown.splitlines()]
    assert printed[:2] == expected[:2]                 # the API's address, then the explorer's
    assert printed[2].startswith("admin token in ") and printed[2].endswith("/.shardcat/admin-token")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
        assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")


def test_the_readme_blocks_run_in_order(served):
    home, port, _ = served
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDCAT_")}
    env.update(HOME=str(home), PATH=os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", ""))),
               SHARDCAT_URL=f"http://127.0.0.1:{port}")      # the README's commands assume port 8080
    outputs = []
    blocks = runnable(readme_blocks())
    assert [language for language, _ in blocks] == ["bash", "python"]
    for n, (language, code) in enumerate(blocks, 1):
        code = code.replace(":8080", f":{port}")
        argv = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
        done = subprocess.run(argv, env=env, cwd=home, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
        assert done.returncode == 0, f"README block {n} ({language}) failed:\n{code}\n--- out\n{done.stdout}\n" \
                                     f"--- err\n{done.stderr}"
        outputs.append(done.stdout)
    # What the blocks were for: the table the CLI created, listed by the CLI and by the SDK.
    assert re.search(r"^main\.sales\.orders\s+MANAGED\s+DELTA\s", outputs[0], re.M), outputs[0]
    assert outputs[1].strip() == "orders [('id', 'LONG'), ('total', 'DOUBLE')]", outputs[1]
