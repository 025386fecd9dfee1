"""The privilege model as data: names, old names, what applies where, a rule for every operation."""

from __future__ import annotations

import pytest

from shardcat.errors import CatalogError
from shardcat.governance import privileges as P


@pytest.mark.parametrize("given, kind, stored", [
    ("USAGE", "catalog", "USE CATALOG"), ("usage", "schema", "USE SCHEMA"), ("CREATE", "metastore", "CREATE CATALOG"),
    ("CREATE", "catalog", "CREATE SCHEMA"), ("CREATE", "schema", "CREATE TABLE"),
    ("use_catalog", "catalog", "USE CATALOG"),
    ("ALL_PRIVILEGES", "table", "ALL PRIVILEGES"), ("read  volume", "schema", "READ VOLUME"),
    ("READ_FILES", "external_location", "READ FILES"),
])
def test_privilege_names(given, kind, stored):
    assert P.privilege_name(given, kind) == stored


@pytest.mark.parametrize("given, kind", [("USAGE", "table"), ("SELECT", "metastore"), ("USE CATALOG", "schema"),
                                         ("EXECUTE", "table"), ("MODIFY", "volume"), ("", "catalog"), (3, "catalog")])
def test_privileges_that_do_not_apply(given, kind):
    with pytest.raises(CatalogError) as e:
        P.privilege_name(given, kind)
    assert e.value.code == "INVALID_PARAMETER_VALUE"


def test_every_type_has_a_rule_for_every_operation_it_serves():
    for kind in P.APPLICABLE:
        for op in ("read", "update", "owner", "delete", "grant"):
            rule = P.rule(kind, op)
            assert rule.any_of and rule.target == "self"
        if kind != "metastore":
            assert P.rule(kind, "create").any_of[0] == P.OWNER
    for kind in ("table", "volume", "registered_model", "external_location", "function"):
        assert P.rule(kind, "read_data").any_of and P.rule(kind, "write_data").any_of
    # Administration never gives data access by itself (only a model version's files are the model admins').
    assert all(P.ADMINISTER not in P.rule(k, "read_data").any_of for k in ("table", "volume", "external_location"))


def test_securable_type_spellings():
    assert P.securable_type("EXTERNAL-LOCATION") == "external_location"
    assert P.securable_type("storage-credential") == "credential"
    assert P.securable_type("view") == "table"
    with pytest.raises(CatalogError):
        P.securable_type("notebook")


def test_connections_take_their_own_privileges():
    """Federation (docs/federation.md): USE CONNECTION and CREATE FOREIGN CATALOG on a connection,
    CREATE CONNECTION on the metastore; seeing a connection needs a privilege on it (not above it)."""
    assert P.privilege_name("use_connection", "connection") == "USE CONNECTION"
    assert P.privilege_name("create foreign catalog", "connection") == "CREATE FOREIGN CATALOG"
    assert P.privilege_name("CREATE_CONNECTION", "metastore") == "CREATE CONNECTION"
    for wrong, kind in (("USE CONNECTION", "catalog"), ("CREATE FOREIGN CATALOG", "metastore"), ("SELECT", "connection")):
        with pytest.raises(CatalogError):
            P.privilege_name(wrong, kind)
    assert P.securable_type("CONNECTION") == "connection"
    assert P.rule("connection", "create") == P.Rule((P.OWNER, "CREATE CONNECTION"), target="metastore")
    assert P.ANY not in P.rule("connection", "read").any_of
    assert P.rule("connection", "read_data").any_of == (P.OWNER, "USE CONNECTION")
    assert P.rule("connection", "write_data").any_of == (P.OWNER, "CREATE FOREIGN CATALOG")
    assert set(P.expand([P.ALL_PRIVILEGES], "connection")) == {"USE CONNECTION", "CREATE FOREIGN CATALOG"}
