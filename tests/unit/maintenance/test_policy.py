"""Maintenance policy rules (shardcat/maintenance/policy.py): values parsed or refused, the nearest
setting wins, bad stored values ignored and named, and the signals that start a run."""

import pytest

from shardcat.maintenance import policy as rules


def test_values_are_parsed_or_refused():
    assert rules.check({"enabled": True, "compact_min_small_files": "12", "vacuum_retention_hours": 0.5}) == {
        "shardcat.maintenance.enabled": "true", "shardcat.maintenance.compact_min_small_files": "12",
        "shardcat.maintenance.vacuum_retention_hours": "0.5"}
    assert rules.check({"enabled": None}) == {"shardcat.maintenance.enabled": None}     # removes the setting
    for bad in ({"enabled": "yes"}, {"enabled": 1}, {"compact_min_small_files": 1}, {"compact_min_small_files": 2.5},
                {"schedule_seconds": 5}, {"vacuum_retention_hours": True}, {"x": 1}, {}, [], "enabled"):
        with pytest.raises(rules.PolicyError):
            rules.check(bad)


def test_the_nearest_setting_wins_and_bad_stored_values_are_ignored():
    p = rules.PREFIX
    chain = [("catalog", "c", {p + "enabled": "true", p + "compact_min_small_files": "30", "other": "x"}),
             ("schema", "c.s", {p + "compact_min_small_files": "5", p + "schedule_seconds": "soon"}),
             ("table", "c.s.t", {p + "enabled": "false"})]
    found = rules.effective(chain)
    assert found.values["enabled"] is False and found.source["enabled"] == "table c.s.t"
    assert found.values["compact_min_small_files"] == 5 and found.source["compact_min_small_files"] == "schema c.s"
    assert found.values["schedule_seconds"] == rules.DEFAULTS["schedule_seconds"]
    assert found.source["schedule_seconds"] == "default"
    assert [(lv, key) for lv, key, _ in found.invalid] == [("schema c.s", "schedule_seconds")]
    assert rules.effective([]).values == rules.DEFAULTS


def test_signals_and_the_schedule():
    on = {**rules.DEFAULTS, "enabled": True, "compact_min_small_files": 4, "checkpoint_log_length": 3,
          "schedule_seconds": 60}
    assert rules.due(on, small_files=4, log_length=3, last_run_ms=0, now_ms=1000) == ["compact", "checkpoint"]
    assert rules.due(on, small_files=3, log_length=2, last_run_ms=0, now_ms=1000) == []
    assert rules.due(on, small_files=0, log_length=0, last_run_ms=0, now_ms=60_000) == ["schedule"]
    assert rules.due(on, small_files=0, log_length=0, last_run_ms=None, now_ms=1) == ["schedule"]
    assert rules.due({**on, "enabled": False}, small_files=99, log_length=99, last_run_ms=None, now_ms=1) == []


def test_the_manifest_count_signal():
    on = {**rules.DEFAULTS, "enabled": True, "rewrite_manifests_min_count": 5, "schedule_seconds": 60}
    assert rules.due(on, manifests=5, last_run_ms=0, now_ms=1000) == ["rewrite_manifests"]
    assert rules.due(on, manifests=4, last_run_ms=0, now_ms=1000) == []
    assert rules.due({**on, "enabled": False}, manifests=99, last_run_ms=0, now_ms=1000) == []
    assert rules.check({"rewrite_manifests_min_count": 8, "manifest_target_bytes": 65536}) == {
        "shardcat.maintenance.rewrite_manifests_min_count": "8", "shardcat.maintenance.manifest_target_bytes": "65536"}
    for bad in ({"rewrite_manifests_min_count": 1}, {"rewrite_manifests_min_count": 3.5},
                {"manifest_target_bytes": 10}, {"manifest_target_bytes": "big"}, {"manifest_target_bytes": False}):
        with pytest.raises(rules.PolicyError):
            rules.check(bad)
