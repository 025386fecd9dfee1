"""A Delta table's history as the catalog itself reads it (for UniForm's Iceberg metadata): the latest
version, each version's actions, the table's state at a version, every data file checked to lie
inside the table.

A version's actions come from the catalog's ratified, unpublished commit when it holds one (inline
content, or the staged file it names), else from the published `_delta_log/<v>.json`; a state starts
at the newest classic checkpoint at or below the version. The log is written by whoever may MODIFY
the table, so it is not trusted: a data file outside the table's location (`../x`, an absolute URL
elsewhere, a shallow clone's source) or a deletion vector makes the version unconvertible
(`Unconvertible`), never a path handed to a reader. Blocking file I/O: run in a thread.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

from ..entities.urls import InvalidUrl, is_within, join_url, normalize_url
from . import log as dlog


class Unconvertible(ValueError):
    """A Delta version the catalog cannot describe as Iceberg metadata; the message says why."""


def latest_published(storage: dlog.Storage) -> int | None:
    """The newest version in `_delta_log` (a JSON commit or a classic checkpoint), None without a log."""
    commits, checkpoints = storage.list_log()
    return max(commits | checkpoints, default=None)


def actions_at(storage: dlog.Storage, version: int, unpublished: dict[int, dict]) -> list[dict]:
    """A version's actions: the catalog's commit row (its inline `content`, else the staged `file_name`) wins
    over a published file."""
    commit = unpublished.get(version)
    try:
        if commit is not None and commit.get("content") is not None:
            return dlog.decode_actions(commit["content"])
        if commit is not None:
            name = str(commit["file_name"])
            if "/" in name or "\\" in name or name.startswith("."):
                raise Unconvertible(f"version {version}: staged commit name '{name:.100}' is not a file name")
            return dlog.decode_actions(storage.read(f"{dlog.STAGED_DIR}/{name}"))
        return dlog.decode_actions(storage.read(dlog.commit_file(version)))
    except (FileNotFoundError, OSError) as e:
        raise Unconvertible(f"version {version} of the Delta log cannot be read ({type(e).__name__})") from None
    except (ValueError, UnicodeDecodeError) as e:
        if isinstance(e, Unconvertible):
            raise
        raise Unconvertible(f"version {version} of the Delta log is not JSON lines") from None


def state_at(storage: dlog.Storage, version: int, unpublished: dict[int, dict]) -> dlog.TableState:
    """The table's protocol, metadata and live files at `version`."""
    _, checkpoints = storage.list_log()
    base = max((v for v in checkpoints if v <= version and v not in unpublished), default=None)
    state = dlog.TableState()
    if base is not None:
        try:
            state = dlog.read_checkpoint(storage, base)
        except (OSError, KeyError, TypeError, ValueError) as e:
            raise Unconvertible(f"the checkpoint of version {base} cannot be read ({type(e).__name__})") from None
    for v in range(state.version + 1, version + 1):
        state.apply(v, actions_at(storage, v, unpublished))
    if state.metadata is None:
        raise Unconvertible(f"the Delta log has no metadata at version {version}")
    return state


def file_url(location: str, path: str) -> str:
    """The absolute URL of a log's data file `path`, which must lie inside the table at `location`.
    A relative path is percent-encoded as Delta writes it (RFC 2396): decoded, then joined segment by
    segment (no empty, '.' or '..' segment: join_url refuses them)."""
    try:
        if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path:
            raise InvalidUrl(path, "neither relative nor a URL")
        url = normalize_url(path) if "://" in path else \
            join_url(normalize_url(location), *[unquote(p) for p in path.split("/")])
    except InvalidUrl:
        url = None
    if url is None or not is_within(url, normalize_url(location)):
        raise Unconvertible(f"its Delta log names a data file outside the table ('{str(path):.200}')")
    return url


def check_actions(location: str, actions: list[dict]) -> None:
    """Every added or removed file inside the table, and no deletion vectors (Iceberg metadata
    made here has no position deletes)."""
    for a in actions:
        for kind in ("add", "remove"):
            if kind in a:
                file_url(location, a[kind].get("path"))
                if a[kind].get("deletionVector"):
                    raise Unconvertible("its Delta log uses deletion vectors (disable them, as UniForm requires, "
                                        "and purge them)")


def stats(add: dict) -> dict:
    """An add action's statistics (numRecords, minValues, maxValues, nullCount), {} when absent."""
    raw = add.get("stats")
    if not raw:
        return {}
    try:
        out = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def commit_timestamp(actions: list[dict]) -> int | None:
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None) or {}
    when = info.get("inCommitTimestamp") or info.get("timestamp")
    return when if isinstance(when, int) else None
