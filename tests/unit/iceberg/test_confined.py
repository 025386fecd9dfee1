"""iceberg/confined.py: which paths a table's metadata names lie outside the table, by every spelling."""

from __future__ import annotations

import os

from shardcat.iceberg.confined import outside


def test_paths_outside_the_table_by_any_spelling_are_named():
    root = "s3://bucket/tables/t"
    inside = ["s3://bucket/tables/t/metadata/m.avro", "s3a://bucket/tables/t/metadata/m.avro",
              "s3://BUCKET/tables/t/./metadata/m.avro"]
    elsewhere = ["s3://bucket/tables/t2/metadata/m.avro", "s3://bucket/tables/t/../u/metadata/m.avro",
                 "s3://other/tables/t/metadata/m.avro", "s3://bucket/tables/t", "s3://bucket/tables/t/%2E%2E/u/m",
                 "relative/m.avro", "gs://bucket/tables/t/metadata/m.avro"]
    assert outside(root, inside) == []
    assert outside(root, elsewhere) == elsewhere


def test_a_file_reached_through_a_link_below_the_table_is_outside(tmp_path):
    table, other = tmp_path / "t", tmp_path / "other"
    (table / "metadata").mkdir(parents=True)
    (other / "metadata").mkdir(parents=True)
    (other / "metadata" / "m.avro").write_bytes(b"x")
    (table / "metadata" / "own.avro").write_bytes(b"x")
    os.symlink(other / "metadata", table / "linked")
    os.symlink(other / "metadata" / "m.avro", table / "metadata" / "file-link.avro")
    root = table.as_uri()
    assert outside(root, [f"{root}/metadata/own.avro"]) == []
    assert outside(root, [f"{root}/linked/m.avro", f"{root}/metadata/file-link.avro"]) == \
        [f"{root}/linked/m.avro", f"{root}/metadata/file-link.avro"]
