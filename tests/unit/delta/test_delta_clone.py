"""Shallow clones of Delta tables (shardcat/delta/clone.py): the clone's log references the
source's files by absolute URL, a clone as of a time takes the source as it was then, and a
vacuum (delta/vacuum.py) deletes only files the table's log removed and no clone references."""

from __future__ import annotations

import os
import time

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from shardcat.delta import clone, vacuum
from shardcat.delta import log as dlog


def _rows(path) -> list[int]:
    out = QueryBuilder().register("t", DeltaTable(str(path))).execute("SELECT id FROM t").read_all()
    return sorted(pa.table(out)["id"].to_pylist())


def _write(path, ids, mode="append"):
    write_deltalake(str(path), pa.table({"id": pa.array(ids, pa.int64())}), mode=mode)


def test_a_shallow_clone_shares_files_and_writes_its_own(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _write(src, [1, 2])
    _write(src, [3])
    out = clone.shallow_clone(src.as_uri(), dst.as_uri(), "new-id", source_name="main.s.t")
    assert out == {"version": 1, "files": 2}
    assert _rows(dst) == [1, 2, 3]
    actions = dlog.decode_actions((dst / "_delta_log" / f"{0:020d}.json").read_bytes())
    assert actions[0]["commitInfo"]["operation"] == "CLONE"
    assert actions[0]["commitInfo"]["operationParameters"]["isShallow"] is True
    assert next(a for a in actions if "metaData" in a)["metaData"]["id"] == "new-id"
    adds = [a["add"]["path"] for a in actions if "add" in a]
    assert all(p.startswith(src.as_uri()) for p in adds)
    assert clone.referenced(dst.as_uri()) == set(adds)
    before = set(os.listdir(src))
    _write(dst, [4])
    assert _rows(dst) == [1, 2, 3, 4] and _rows(src) == [1, 2, 3] and set(os.listdir(src)) == before


def test_a_clone_as_of_a_time_takes_the_source_then(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _write(src, [1])
    time.sleep(0.02)
    then = dlog.now_ms()
    time.sleep(0.02)
    _write(src, [2])
    assert clone.shallow_clone(src.as_uri(), dst.as_uri(), "x", until_ms=then)["version"] == 0
    assert _rows(dst) == [1]
    assert clone.shallow_clone(src.as_uri(), (tmp_path / "none").as_uri(), "y") is not None
    assert clone.shallow_clone((tmp_path / "empty").as_uri(), (tmp_path / "e2").as_uri(), "z") is None


def test_vacuum_keeps_what_the_table_or_a_clone_references(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _write(src, [1])
    clone.shallow_clone(src.as_uri(), dst.as_uri(), "c")
    _write(src, [2], mode="overwrite")       # the first file: the clone's only
    _write(src, [3], mode="overwrite")       # the second: nobody's
    keep = clone.referenced(dst.as_uri())
    dry = vacuum.vacuum(src.as_uri(), keep, older_than_ms=dlog.now_ms() + 1000, dry_run=True)
    assert len(dry["deleted"]) == 1 and dry["kept_for_clones"] == sorted(keep)
    out = vacuum.vacuum(src.as_uri(), keep, older_than_ms=dlog.now_ms() + 1000)
    assert out == dry
    assert _rows(src) == [3] and _rows(dst) == [1]
    # without the clone's references its file would go; younger files stay whatever
    assert vacuum.vacuum(src.as_uri(), set(), older_than_ms=0)["deleted"] == []
    assert vacuum.vacuum(src.as_uri(), set(), older_than_ms=dlog.now_ms() + 1000)["deleted"] == sorted(keep)
