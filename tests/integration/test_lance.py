"""Lance tables through the Lance Unity namespace (`lance-namespace-impls`) and pylance, against shardcat.

The Lance Unity namespace spec (seeds/001_*.txt) maps a namespace [catalog, schema] to a Unity
schema and a Lance table to an EXTERNAL table with data_source_format TEXT and the property
table_type=lance. Here the real client declares tables, pylance writes and reads the datasets at
the locations the catalog returns, and the client's errors for missing and duplicate objects are
the spec's (NamespaceNotFound 1, NamespaceAlreadyExists 2, TableNotFound 4, TableAlreadyExists 5,
InvalidInput 13).

The client is synchronous (urllib3) and the test server runs on the test's event loop, so every
client call runs in a worker thread.
"""

from __future__ import annotations

import asyncio

import lance
import lance_namespace
import lance_namespace_impls  # noqa: F401  (registers the "unity" implementation)
import pyarrow as pa
import pytest
from lance_namespace import (
    CreateNamespaceRequest,
    DeclareTableRequest,
    DeregisterTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DropNamespaceRequest,
    ListNamespacesRequest,
    ListTablesRequest,
)
from lance_namespace_impls import (
    InternalException,
    InvalidInputException,
    NamespaceAlreadyExistsException,
    NamespaceNotFoundException,
    TableAlreadyExistsException,
    TableNotFoundException,
)

from shardcat.entities.urls import normalize_url

run = asyncio.to_thread


def connect(ws, root) -> lance_namespace.LanceNamespace:
    return lance_namespace.connect("unity", {
        "unity.endpoint": ws.url, "unity.auth_token": ws.token, "unity.root": str(root)})


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "label": [f"item-{i}" for i in range(start, start + n)],
                     "vector": pa.array([[float(i), float(-i)] for i in range(start, start + n)],
                                        pa.list_(pa.float32(), 2))})


async def test_lance_namespace_and_table_lifecycle(ws, tmp_path):
    # Lance tables are EXTERNAL: their root lies outside the metastore's managed storage.
    root = tmp_path / "lance"
    ns = connect(ws, root)
    assert (await ws.call("POST", "/catalogs", json={"name": "lakehouse"}))[0] == 200

    # Namespaces: [catalog, schema] is a Unity schema; its properties are the schema's.
    created = await run(ns.create_namespace, CreateNamespaceRequest(
        id=["lakehouse", "vectors"], properties={"team": "ml"}))
    assert created.properties == {"team": "ml"}
    status, schema = await ws.call("GET", "/schemas/lakehouse.vectors")
    assert status == 200 and schema["properties"] == {"team": "ml"}
    described = await run(ns.describe_namespace, DescribeNamespaceRequest(id=["lakehouse", "vectors"]))
    assert described.properties == {"team": "ml"}
    assert (await run(ns.list_namespaces, ListNamespacesRequest(id=["lakehouse"]))).namespaces == ["default", "vectors"]
    assert "lakehouse" in (await run(ns.list_namespaces, ListNamespacesRequest(id=[]))).namespaces

    # Create: pylance declares the table through the namespace, then writes at the declared location.
    table_id = ["lakehouse", "vectors", "items"]
    first = rows(0, 100)
    written = await run(lance.write_dataset, first, namespace_client=ns, table_id=table_id, mode="create")
    assert written.count_rows() == 100
    status, info = await ws.call("GET", "/tables/lakehouse.vectors.items")
    assert status == 200
    assert info["table_type"] == "EXTERNAL" and info["data_source_format"] == "TEXT"
    assert info["properties"]["table_type"] == "lance"
    assert info["storage_location"] == normalize_url(str(root / "lakehouse" / "vectors" / "items"))

    # Append through the namespace (pylance describes the table to find it), then read back
    # both by name and through the location the catalog returns.
    await run(lance.write_dataset, rows(100, 50), namespace_client=ns, table_id=table_id, mode="append")
    desc = await run(ns.describe_table, DescribeTableRequest(id=table_id, check_declared=True))
    assert desc.location == info["storage_location"] and desc.properties["table_type"] == "lance"
    assert desc.is_only_declared is False
    by_name = await run(lance.dataset, namespace_client=ns, table_id=table_id)
    by_location = await run(lance.dataset, desc.location)
    expected = pa.concat_tables([first, rows(100, 50)])
    for ds in (by_name, by_location):
        assert ds.to_table().sort_by("id").equals(expected)

    # A declared table with no data yet is listed only when declared tables are asked for.
    declared = await run(ns.declare_table, DeclareTableRequest(
        id=["lakehouse", "vectors", "pending"], properties={"source": "cli"}))
    assert declared.location == str(root / "lakehouse" / "vectors" / "pending")
    desc_pending = await run(ns.describe_table, DescribeTableRequest(
        id=["lakehouse", "vectors", "pending"], check_declared=True))
    assert desc_pending.is_only_declared is True and desc_pending.properties["source"] == "cli"

    # Non-Lance tables in the same schema are not the namespace's: listed by the catalog, not by Lance.
    status, _ = await ws.call("POST", "/tables", json={
        "name": "events", "catalog_name": "lakehouse", "schema_name": "vectors", "table_type": "EXTERNAL",
        "data_source_format": "PARQUET", "storage_location": normalize_url(str(tmp_path / "parquet" / "events")),
        "columns": [{"name": "ts", "type_name": "LONG", "position": 0}]})
    assert status == 200
    status, listed = await ws.call("GET", "/tables", params={"catalog_name": "lakehouse", "schema_name": "vectors"})
    assert sorted(t["name"] for t in listed["tables"]) == ["events", "items", "pending"]
    lance_tables = await run(ns.list_tables, ListTablesRequest(id=["lakehouse", "vectors"]))
    assert lance_tables.tables == ["items", "pending"]
    written_only = await run(ns.list_tables, ListTablesRequest(id=["lakehouse", "vectors"], include_declared=False))
    assert written_only.tables == ["items"]
    with pytest.raises(InvalidInputException, match="not a Lance table"):   # spec: InvalidInput (13)
        await run(ns.describe_table, DescribeTableRequest(id=["lakehouse", "vectors", "events"]))
    with pytest.raises(InvalidInputException, match="not a Lance table"):
        await run(ns.deregister_table, DeregisterTableRequest(id=["lakehouse", "vectors", "events"]))
    assert (await ws.call("GET", "/tables/lakehouse.vectors.events"))[0] == 200

    # Drop with RESTRICT is refused while the schema holds tables, and nothing is dropped.
    # (The spec asks for NamespaceNotEmpty (3); lance-namespace-impls 0.4.2 reports the server's
    # FAILED_PRECONDITION as InternalException (18), carrying the server's message.)
    with pytest.raises(InternalException, match="FAILED_PRECONDITION.*not empty"):
        await run(ns.drop_namespace, DropNamespaceRequest(id=["lakehouse", "vectors"], behavior="Restrict"))
    assert (await ws.call("GET", "/schemas/lakehouse.vectors"))[0] == 200
    assert (await ws.call("GET", "/tables/lakehouse.vectors.items"))[0] == 200

    # Deregister removes the registration and keeps the data.
    gone = await run(ns.deregister_table, DeregisterTableRequest(id=table_id))
    assert gone.location == info["storage_location"]
    assert (await ws.call("GET", "/tables/lakehouse.vectors.items"))[0] == 404
    assert (await run(lance.dataset, gone.location)).count_rows() == 150
    assert (await run(ns.list_tables, ListTablesRequest(id=["lakehouse", "vectors"]))).tables == ["pending"]

    await run(ns.deregister_table, DeregisterTableRequest(id=["lakehouse", "vectors", "pending"]))
    assert (await ws.call("DELETE", "/tables/lakehouse.vectors.events"))[0] == 200
    await run(ns.drop_namespace, DropNamespaceRequest(id=["lakehouse", "vectors"], behavior="Restrict"))
    with pytest.raises(NamespaceNotFoundException):
        await run(ns.describe_namespace, DescribeNamespaceRequest(id=["lakehouse", "vectors"]))
    assert (await ws.call("GET", "/schemas/lakehouse.vectors"))[0] == 404


async def test_lance_errors_for_missing_and_duplicate_objects(ws, tmp_path):
    ns = connect(ws, tmp_path / "lance")
    assert (await ws.call("POST", "/catalogs", json={"name": "lakehouse"}))[0] == 200
    await run(ns.create_namespace, CreateNamespaceRequest(id=["lakehouse", "s"]))

    # NamespaceAlreadyExists (2): the server's 409 ALREADY_EXISTS.
    with pytest.raises(NamespaceAlreadyExistsException):
        await run(ns.create_namespace, CreateNamespaceRequest(id=["lakehouse", "s"]))
    # NamespaceNotFound (1): a missing schema, and a schema of a missing catalog.
    with pytest.raises(NamespaceNotFoundException):
        await run(ns.describe_namespace, DescribeNamespaceRequest(id=["lakehouse", "nope"]))
    with pytest.raises(NamespaceNotFoundException):
        await run(ns.list_namespaces, ListNamespacesRequest(id=["no_such_catalog"]))
    # Declaring into a missing schema: the server answers 404 NOT_FOUND; the spec asks for
    # NamespaceNotFound (1), lance-namespace-impls 0.4.2 maps only 409 and reports InternalException.
    with pytest.raises(InternalException, match="404.*Schema 'lakehouse.nope' does not exist"):
        await run(ns.declare_table, DeclareTableRequest(id=["lakehouse", "nope", "t"]))
    # Likewise ListTables of a missing schema (spec: NamespaceNotFound); dropping one succeeds silently.
    with pytest.raises(InternalException, match="404.*Schema 'lakehouse.nope' does not exist"):
        await run(ns.list_tables, ListTablesRequest(id=["lakehouse", "nope"]))
    await run(ns.drop_namespace, DropNamespaceRequest(id=["lakehouse", "nope"]))

    # TableAlreadyExists (5), also through pylance's create mode.
    await run(ns.declare_table, DeclareTableRequest(id=["lakehouse", "s", "t"]))
    with pytest.raises(TableAlreadyExistsException):
        await run(ns.declare_table, DeclareTableRequest(id=["lakehouse", "s", "t"]))
    with pytest.raises(TableAlreadyExistsException):
        await run(lance.write_dataset, rows(0, 3), namespace_client=ns, table_id=["lakehouse", "s", "t"],
                  mode="create")
    # TableNotFound (4): describe, deregister, and pylance's append/read by name.
    with pytest.raises(TableNotFoundException):
        await run(ns.describe_table, DescribeTableRequest(id=["lakehouse", "s", "missing"]))
    with pytest.raises(TableNotFoundException):
        await run(ns.deregister_table, DeregisterTableRequest(id=["lakehouse", "s", "missing"]))
    with pytest.raises(TableNotFoundException):
        await run(lance.write_dataset, rows(0, 3), namespace_client=ns, table_id=["lakehouse", "s", "missing"],
                  mode="append")

    # One asset per path: a Lance table (EXTERNAL) may not be declared inside managed storage.
    inside = connect(ws, ws.storage_root.removeprefix("file://"))
    with pytest.raises(InternalException, match="INVALID_PARAMETER_VALUE.*overlaps the storage of metastore"):
        await run(inside.declare_table, DeclareTableRequest(id=["lakehouse", "s", "inside"]))

    # Identifiers of the wrong depth are the client's InvalidInput (13) before any request.
    with pytest.raises(InvalidInputException):
        await run(ns.create_namespace, CreateNamespaceRequest(id=["lakehouse"]))
    with pytest.raises(InvalidInputException):
        await run(ns.describe_table, DescribeTableRequest(id=["lakehouse", "s"]))

    # CASCADE: the spec maps it to DELETE /schemas/{name}?force=true. lance-namespace-impls 0.4.2
    # refuses it client-side (InvalidInput); the server's side of the mapping works.
    with pytest.raises(InvalidInputException, match="Cascade"):
        await run(ns.drop_namespace, DropNamespaceRequest(id=["lakehouse", "s"], behavior="Cascade"))
    assert (await ws.call("GET", "/tables/lakehouse.s.t"))[0] == 200
    status, _ = await ws.call("DELETE", "/schemas/lakehouse.s", params={"force": "true"})
    assert status == 200
    assert (await ws.call("GET", "/tables/lakehouse.s.t"))[0] == 404
    with pytest.raises(NamespaceNotFoundException):
        await run(ns.describe_namespace, DescribeNamespaceRequest(id=["lakehouse", "s"]))
