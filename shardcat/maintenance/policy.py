"""Maintenance policies: what may run on a table and when, set on a catalog, schema or table and
inherited downward (the nearest setting wins, as a grant on a catalog reaches its tables), and the
signals that start a run. Pure: no I/O.

A policy lives in the securable's properties under `shardcat.maintenance.<key>`; `check` refuses a
bad value before it is stored (PUT /shardcat/maintenance/policies), and `effective` ignores (and
names) one that got there by another way.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "shardcat.maintenance."
DEFAULTS = {
    "enabled": False,                    # nothing runs by itself until a policy turns it on
    "small_file_bytes": 8 * 1024 * 1024,
    "compact_min_small_files": 10,       # signal: this many small live files start a compaction
    "checkpoint_log_length": 10,         # signal: this many commits since the last checkpoint start one
    "vacuum_retention_hours": 168.0,
    "snapshot_retention_hours": 120.0,   # Iceberg: snapshots older than this expire
    "orphan_min_age_hours": 72.0,        # Iceberg: files younger than this are never called orphans
    "rewrite_manifests_min_count": 20,   # signal (Iceberg): this many data manifests start a manifest rewrite
    "manifest_target_bytes": 8 * 1024 * 1024,   # Iceberg: a rewritten manifest's size (Iceberg's own default)
    "schedule_seconds": 3600.0,          # every action runs at least this often on an enabled table
}
_LIMITS = {"small_file_bytes": (1, 1 << 40), "compact_min_small_files": (2, 1_000_000),
           "checkpoint_log_length": (1, 1_000_000), "vacuum_retention_hours": (0, 1_000_000),
           "snapshot_retention_hours": (0, 1_000_000), "orphan_min_age_hours": (1, 1_000_000),
           "rewrite_manifests_min_count": (2, 1_000_000), "manifest_target_bytes": (1024, 1 << 34),
           "schedule_seconds": (10, 10_000_000)}
LEVELS = ("catalog", "schema", "table")


class PolicyError(ValueError):
    pass


def parse(key: str, value) -> object:
    """A setting's value from JSON or a property string; PolicyError for anything else."""
    if key not in DEFAULTS:
        raise PolicyError(f"Unknown maintenance policy key '{key:.60}'; known: {', '.join(sorted(DEFAULTS))}.")
    if key == "enabled":
        text = str(value).lower() if isinstance(value, (bool, str)) else None
        if text not in ("true", "false"):
            raise PolicyError("Policy 'enabled' must be true or false.")
        return text == "true"
    kind = int if isinstance(DEFAULTS[key], int) and not isinstance(DEFAULTS[key], bool) else float
    try:
        number = None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = None
    if number is not None and kind is int:
        number = int(number) if number.is_integer() else None      # 2.5 small files is no count
    low, high = _LIMITS[key]
    if number is None or not low <= number <= high:
        raise PolicyError(f"Policy '{key}' must be {'an integer' if kind is int else 'a number'} from {low} to {high}.")
    return number


def check(policy) -> dict[str, str]:
    """A policy body ({key: value or null}) as properties to set (null: remove, inherit again)."""
    if not isinstance(policy, dict) or not policy:
        raise PolicyError("Field 'policy' must be a non-empty object of maintenance settings.")
    return {PREFIX + k: (None if v is None else str(parse(k, v)).lower()) for k, v in policy.items()}


@dataclass
class Effective:
    values: dict            # key -> value in force
    source: dict            # key -> "default" or the securable ("catalog"|"schema"|"table", full name) that set it
    invalid: list           # [(level, key, why)] settings ignored

    def json(self) -> dict:
        return {"policy": self.values, "set_by": self.source,
                "ignored": [{"securable": lv, "key": k, "reason": why} for lv, k, why in self.invalid]}


def effective(chain: list[tuple[str, str, dict | None]]) -> Effective:
    """The policy in force for a table from its chain [(level, full name, properties)], catalog first."""
    values, source, invalid = dict(DEFAULTS), {k: "default" for k in DEFAULTS}, []
    for level, name, properties in chain:
        for prop, raw in (properties or {}).items():
            if not prop.startswith(PREFIX):
                continue
            key = prop[len(PREFIX):]
            try:
                values[key] = parse(key, raw)
            except PolicyError as e:
                invalid.append((f"{level} {name}", key, str(e)))
                continue
            source[key] = f"{level} {name}"
    return Effective(values, source, invalid)


def due(policy: dict, *, small_files: int = 0, log_length: int = 0, manifests: int = 0, last_run_ms: int | None,
        now_ms: int) -> list[str]:
    """Which signals say a table needs work now: `compact` (small-file count), `checkpoint` (Delta log
    length), `rewrite_manifests` (Iceberg data manifests), `schedule` (nothing ran for schedule_seconds).
    Empty when the policy is not enabled."""
    if not policy["enabled"]:
        return []
    out = []
    if small_files >= policy["compact_min_small_files"]:
        out.append("compact")
    if log_length >= policy["checkpoint_log_length"]:
        out.append("checkpoint")
    if manifests >= policy["rewrite_manifests_min_count"]:
        out.append("rewrite_manifests")
    if last_run_ms is None or now_ms - last_run_ms >= policy["schedule_seconds"] * 1000:
        out.append("schedule")
    return out
