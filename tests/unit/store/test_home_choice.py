"""Which home database a new metastore gets (store/databases.py `home_order`): the least loaded by
the metastores' measured load, one each for being there at all, so by count when nothing is
measured; ties to the home of fewer metastores, then to the first listed."""

from __future__ import annotations

from shardcat.store.databases import home_loads, home_order

DBS = ["db0", "db1", "db2"]


def test_nothing_measured_is_by_count_and_ties_go_to_the_first_listed():
    homes = {"a": "db0", "b": "db0", "c": "db1"}
    assert home_order(DBS, homes) == ["db2", "db1", "db0"]
    assert home_order(DBS, homes, {}) == ["db2", "db1", "db0"]
    assert home_order(DBS, {}) == DBS                           # all empty: in the order listed
    assert home_order(["db1", "db0"], {}) == ["db1", "db0"]
    assert home_loads(DBS, homes) == {"db0": (2.0, 2), "db1": (1.0, 1), "db2": (0.0, 0)}


def test_a_database_with_fewer_but_busier_metastores_comes_after_one_with_more_idle_ones():
    homes = {"hot": "db0", "c1": "db1", "c2": "db1", "c3": "db1"}
    load = {"hot": 40.0, "c1": 0.5, "c2": 0.0}
    assert home_order(["db0", "db1"], homes, load) == ["db1", "db0"]
    assert home_loads(["db0", "db1"], homes, load) == {"db0": (41.0, 1), "db1": (3.5, 3)}
    # By count alone it would have been the other way round.
    assert home_order(["db0", "db1"], homes) == ["db0", "db1"]


def test_equal_loads_go_to_the_home_of_fewer_metastores():
    homes = {"a": "db0", "b": "db0", "c": "db1"}
    load = {"a": 1.0, "b": 1.0, "c": 3.0}                       # 2 + 2 and 3 + 1: both 4.0
    assert home_order(["db0", "db1"], homes, load) == ["db1", "db0"]


def test_metastores_of_databases_not_listed_and_loads_of_unknown_metastores_count_nowhere():
    homes = {"a": "gone", "b": "db1"}
    load = {"a": 100.0, "z": 100.0, "b": 2.0}
    assert home_loads(["db0", "db1"], homes, load) == {"db0": (0.0, 0), "db1": (3.0, 1)}
    assert home_order(["db0", "db1"], homes, load) == ["db0", "db1"]
