"""Which PostgreSQL servers a catalog uses: `--db` values and database files read as {name: URL},
and which of them a new metastore gets as its home (`home_order`, pure).

The first server holds the account directory (docs/cluster.md "Home databases"); every server,
the first too, is a home for metastores. A value is `NAME=URL` or a bare URL, named `db<i>` by
its position; a file holds one value a line (`#` starts a comment).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")


class DatabaseConfigError(ValueError):
    """A database list that cannot be used: a bad name, a name given twice, nothing at all."""


def parse_databases(values: list[str]) -> dict[str, str]:
    """`NAME=URL` or `URL` values, in order, as {name: URL}; the first is the directory's server."""
    out: dict[str, str] = {}
    for i, value in enumerate(values):
        value = value.strip()
        name, sep, url = value.partition("=")
        name = name.strip()
        if sep and NAME.fullmatch(name):
            name, url = name, url.strip()
        elif sep and ":" not in name and "/" not in name:
            raise DatabaseConfigError(f"database name '{name:.40}' must be lower case letters, digits, - or _, "
                                      "starting with a letter")
        else:
            name, url = f"db{i}", value
        if not url:
            raise DatabaseConfigError(f"database '{name}' has no URL")
        if name in out:
            raise DatabaseConfigError(f"database name '{name}' given twice")
        out[name] = url
    return out


def read_database_file(path: Path) -> list[str]:
    """A database file's values: one `NAME=URL` or URL a line, blank lines and `#` comments left out."""
    lines = (line.split("#", 1)[0].strip() for line in Path(path).read_text().splitlines())
    values = [line for line in lines if line]
    if not values:
        raise DatabaseConfigError(f"{path} names no database")
    return values


def as_databases(spec: str | dict[str, str]) -> dict[str, str]:
    """A URL (one server, `db0`) or a {name: URL} as {name: URL}."""
    if isinstance(spec, str):
        return {"db0": spec}
    if not spec:
        raise DatabaseConfigError("no database given")
    return dict(spec)


def home_loads(databases: Iterable[str], homes: Mapping[str, str],
               load: Mapping[str, float] | None = None) -> dict[str, tuple[float, int]]:
    """Per database: (its load, how many metastores it is the home of). `homes`: metastore id ->
    its home; `load`: metastore id -> its measured load (the router's decayed request count, a
    write weighing WRITE_COST: router/routing.py). A database's load is the sum of its metastores'
    loads plus one for each, so with nothing measured it is their count."""
    out = {name: (0.0, 0) for name in databases}
    for metastore_id, home in homes.items():
        if home in out:
            total, count = out[home]
            out[home] = (total + (load or {}).get(metastore_id, 0.0) + 1.0, count + 1)
    return out


def home_order(databases: Iterable[str], homes: Mapping[str, str],
               load: Mapping[str, float] | None = None) -> list[str]:
    """The databases in the order a new metastore tries them as its home: the least loaded first
    (`home_loads`), ties to the one that is the home of fewer metastores, then to the first listed."""
    loads = home_loads(databases, homes, load)
    return sorted(loads, key=lambda name: loads[name])       # (load, count); sorted() keeps the listed order
