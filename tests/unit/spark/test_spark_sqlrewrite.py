"""shardcat.spark's query rewriting (pure sqlglot): catalog names to temporary views with the
original names kept as aliases, CTEs untouched, catalog SQL functions inlined."""

from __future__ import annotations

import pytest

from shardcat.spark.sqlrewrite import column_args, inline, rewrite, to_spark

DOUBLE = {"full_name": "c.s.double", "routine_body": "SQL", "routine_definition": "x * 2",
          "input_params": {"parameters": [{"name": "x", "position": 0}]}}


def test_names_become_views_and_keep_their_aliases():
    out = rewrite("WITH w AS (SELECT id FROM c.s.a) SELECT a.id, b.v FROM c.s.a JOIN `c`.`s`.`b` AS b "
                  "ON a.id = b.id JOIN w ON w.id = a.id JOIN other_temp_view o ON o.id = a.id",
                  {"c.s.a": "v_a", "c.s.b": "v_b"}, {})
    assert "FROM v_a AS a JOIN v_b AS b" in out and "SELECT id FROM v_a AS a" in out
    assert "JOIN w ON" in out and "other_temp_view AS o" in out


def test_view_text_is_qualified_with_the_views_schema():
    out = rewrite("SELECT * FROM a JOIN s2.b USING (id)", {"c.s.a": "v_a", "c.s2.b": "v_b"}, {},
                  catalog="c", schema="s")
    assert "FROM v_a AS a JOIN v_b AS b" in out


def test_catalog_functions_are_inlined_with_their_arguments():
    out = rewrite("SELECT c.s.double(t.n + 1) AS d, upper(t.s) FROM c.s.t AS t", {"c.s.t": "v_t"},
                  {"c.s.double": DOUBLE})
    assert "((t.n + 1) * 2) AS d" in out and "UPPER(t.s)" in out
    with pytest.raises(KeyError):
        rewrite("SELECT c.s.nofunc(1)", {}, {})
    with pytest.raises(ValueError, match="takes 1 argument"):
        inline(DOUBLE, column_args(["a", "b"]))
    with pytest.raises(ValueError, match="not a SQL function"):
        inline({**DOUBLE, "routine_body": "EXTERNAL"}, column_args(["a"]))
    assert to_spark(inline(DOUBLE, column_args(["my col"]))) == "((`my col`) * 2)"
