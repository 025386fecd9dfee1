"""OpenLineage datasets named as the naming spec and Spark's integration name them: by the catalog service's
own URL (`scheme://host:port`, name `catalog.schema.table`), and by storage path with a `symlinks` facet
naming the table; events built with `openlineage-python`'s classes. Attacks: a table the reporter cannot see,
named by URL or symlink, records nothing and answers as a missing one; a symlink never moves a path onto
another table; another service's URL names nothing here."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from urllib.parse import urlsplit

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import symlinks_dataset as sl
from openlineage.client.serde import Serde

from governance_users import grant, unique, user
from test_enforcement_matrix import ok
from test_openlineage import COLUMNS, _client


def spark_dataset(kind, path: str, table: str, catalog_url: str):
    """A table read or written by path, as Spark's OpenLineage integration names it: the path, and a
    symlink to the table's name in its catalog."""
    facet = sl.SymlinksDatasetFacet(identifiers=[sl.Identifier(namespace=catalog_url, name=table, type="TABLE")])
    return kind(namespace="file", name=path, facets={"symlinks": facet})


def event(inputs, outputs) -> RunEvent:
    return RunEvent(eventType=RunState.COMPLETE, eventTime=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    run=Run(runId=str(uuid.uuid4())), job=Job(namespace="spark", name="etl.write_net"),
                    producer="https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/spark",
                    inputs=inputs, outputs=outputs)


async def post(caller, e: RunEvent) -> dict:
    """The intake's answer to an event (the client's emit discards it)."""
    return await ok(caller, "POST", "/openlineage/api/v1/lineage", json=Serde.to_dict(e))


async def upstreams(ws, table: str) -> list[str]:
    status, body = await ws.call("GET", "/shardcat/lineage", params={"name": table})
    assert status == 200, body
    return sorted(e["source"].get("full_name") for e in body["edges"] if e["target"].get("full_name") == table)


async def world(ws, tmp_path) -> str:
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    for t in ("orders", "secret"):
        await ok(ws, "POST", "/tables", json={
            "name": t, "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "DELTA",
            "columns": COLUMNS, "storage_location": f"file://{tmp_path}/{c}/{t}"})
    for t in ("net", "report"):
        await ok(ws, "POST", "/tables", json={"name": t, "catalog_name": c, "schema_name": "s", "table_type": "MANAGED",
                                              "data_source_format": "DELTA", "columns": COLUMNS})
    return c


async def test_datasets_by_the_catalogs_url_and_by_path_with_symlinks(ws, tmp_path):
    c = await world(ws, tmp_path)
    here = f"{urlsplit(ws.url).scheme}://{urlsplit(ws.url).netloc}"
    inputs = [spark_dataset(InputDataset, f"{tmp_path}/{c}/orders", f"{c}.s.orders", here),
              InputDataset(namespace="http://127.0.0.1:1", name=f"{c}.s.secret")]     # another service's table
    outputs = [OutputDataset(namespace=here, name=f"{c}.s.net")]
    await asyncio.to_thread(_client(ws, ws.token).emit, event(inputs, outputs))
    assert await upstreams(ws, f"{c}.s.net") == [f"{c}.s.orders"]
    answer = await post(ws, event(inputs, outputs))
    assert answer["lineage"] == [{"target": f"{c}.s.net", "sources": [f"{c}.s.orders"]}]
    assert answer["unmapped"] == [{"namespace": "http://127.0.0.1:1", "name": f"{c}.s.secret"}]
    # The default port spelled out is the same origin; a path under the URL is not the catalog's naming.
    port = urlsplit(ws.url).port
    spelled = await post(ws, event([InputDataset(namespace=f"HTTP://127.0.0.1:{port}/", name=f"{c}.s.orders")],
                                   [OutputDataset(namespace=f"{here}/api", name=f"{c}.s.report")]))
    assert spelled["lineage"] == [] and [u["name"] for u in spelled["unmapped"]] == [f"{c}.s.report"]


async def test_a_symlink_names_a_dataset_with_no_path_of_its_own(ws, tmp_path):
    c = await world(ws, tmp_path)
    here = ws.url
    hive = InputDataset(namespace="hive://metastore:9083", name="s.orders", facets={"symlinks": sl.SymlinksDatasetFacet(
        identifiers=[sl.Identifier(namespace=here, name=f"{c}.s.orders", type="TABLE")])})
    answer = await post(ws, event([hive], [OutputDataset(namespace=here, name=f"{c}.s.net")]))
    assert answer["lineage"] == [{"target": f"{c}.s.net", "sources": [f"{c}.s.orders"]}]


async def test_attacks_on_names_and_symlinks(ws, server, tmp_path):
    c = await world(ws, tmp_path)
    here = ws.url
    engine = await user(server, ws)
    await grant(ws, "catalog", c, engine.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", f"{c}.s.orders", engine.name, "SELECT")
    await grant(ws, "table", f"{c}.s.net", engine.name, "SELECT", "MODIFY")       # not secret, not report
    reads_orders = [InputDataset(namespace=here, name=f"{c}.s.orders")]

    # A hidden table named by the catalog's URL answers exactly as a missing one, and records nothing.
    hidden = await post(engine, event(reads_orders, [OutputDataset(namespace=here, name=f"{c}.s.report")]))
    missing = await post(engine, event(reads_orders, [OutputDataset(namespace=here, name=f"{c}.s.nothing")]))
    assert hidden["lineage"] == missing["lineage"] == [] and len(hidden["unmapped"]) == len(missing["unmapped"]) == 1
    assert await upstreams(ws, f"{c}.s.report") == []

    # The hidden table's path with a symlink to a table the engine may write: not mapped to that table.
    moved = spark_dataset(OutputDataset, f"{tmp_path}/{c}/secret", f"{c}.s.net", here)
    answer = await post(engine, event(reads_orders, [moved]))
    assert answer["lineage"] == [] and answer["unmapped"] == [{"namespace": "file", "name": f"{tmp_path}/{c}/secret"}]
    # A path nothing owns, with that symlink: not mapped either.
    nowhere = spark_dataset(OutputDataset, f"{tmp_path}/elsewhere/net", f"{c}.s.net", here)
    assert (await post(engine, event(reads_orders, [nowhere])))["lineage"] == []
    # A symlink to a hidden table from a dataset without a path: unmapped, as by name.
    linked = OutputDataset(namespace="hive://metastore:9083", name="s.report", facets={
        "symlinks": sl.SymlinksDatasetFacet(identifiers=[sl.Identifier(namespace=here, name=f"{c}.s.report",
                                                                       type="TABLE")])})
    assert (await post(engine, event(reads_orders, [linked])))["lineage"] == []
    assert await upstreams(ws, f"{c}.s.net") == [] and await upstreams(ws, f"{c}.s.report") == []
    # Its own table by path, with the symlink: recorded.
    mine = spark_dataset(OutputDataset, (await ok(ws, "GET", f"/tables/{c}.s.net"))["storage_location"]
                         .removeprefix("file://"), f"{c}.s.net", here)
    assert (await post(engine, event(reads_orders, [mine])))["lineage"] == [
        {"target": f"{c}.s.net", "sources": [f"{c}.s.orders"]}]
