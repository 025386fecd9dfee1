"""OpenLineage from the `openlineage-python` client's HTTP transport, unchanged: a job reading two
tables by storage path and writing one by name, with column lineage; read back through the
lineage-tracking API and the graph, with a hidden node for a table the caller may not see."""

from __future__ import annotations

import asyncio
import datetime
import uuid

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import column_lineage_dataset as cl
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

from governance_users import grant, unique, user

from test_enforcement_matrix import ok

COLUMNS = [{"name": "id", "type_name": "LONG", "position": 0}, {"name": "amount", "type_name": "DOUBLE", "position": 1}]


def _client(ws, token: str, *, slash: bool = True) -> OpenLineageClient:
    url = f"{ws.api}/openlineage" + ("/" if slash else "")
    return OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, auth=ApiKeyTokenProvider({"apiKey": token}))))


def _event(state, inputs, outputs, job="nightly") -> RunEvent:
    return RunEvent(eventType=state, eventTime=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    run=Run(runId=str(uuid.uuid4())), job=Job(namespace="etl", name=job), producer="tests",
                    inputs=inputs, outputs=outputs)


async def _world(ws, tmp_path) -> str:
    c = unique("c")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c})
    for t in ("orders", "refunds"):
        await ok(ws, "POST", "/tables", json={
            "name": t, "catalog_name": c, "schema_name": "s", "table_type": "EXTERNAL", "data_source_format": "PARQUET",
            "columns": COLUMNS, "storage_location": f"file://{tmp_path}/{c}/{t}"})
    for t in ("net", "report"):
        await ok(ws, "POST", "/tables", json={"name": t, "catalog_name": c, "schema_name": "s",
                                              "table_type": "MANAGED", "data_source_format": "DELTA",
                                              "columns": COLUMNS})
    return c


async def test_openlineage_events_with_column_lineage_and_the_graph_with_a_hidden_node(server, ws, tmp_path):
    c = await _world(ws, tmp_path)
    engine = await user(server, ws)
    await grant(ws, "catalog", c, engine.name, "USE CATALOG", "USE SCHEMA")
    for t in ("orders", "refunds"):
        await grant(ws, "table", f"{c}.s.{t}", engine.name, "SELECT")
    await grant(ws, "table", f"{c}.s.net", engine.name, "SELECT", "MODIFY")      # not report
    client = _client(ws, engine.token)
    net_columns = cl.ColumnLineageDatasetFacet(fields={
        "amount": cl.Fields(inputFields=[
            cl.InputField(namespace="file", name=f"{tmp_path}/{c}/orders", field="amount"),
            cl.InputField(namespace="file", name=f"{tmp_path}/{c}/refunds/part-0.parquet", field="amount")]),
        "id": cl.Fields(inputFields=[cl.InputField(namespace="file", name=f"{tmp_path}/{c}/orders", field="id")])})
    inputs = [InputDataset(namespace="file", name=f"{tmp_path}/{c}/orders"),
              InputDataset(namespace="file", name=f"{tmp_path}/{c}/refunds/part-0.parquet"),   # a file inside it
              InputDataset(namespace="postgres://elsewhere:5432", name="crm.public.customers")]  # not the catalog's
    outputs = [OutputDataset(namespace="shardcat", name=f"{c}.s.net", facets={"columnLineage": net_columns})]
    await asyncio.to_thread(client.emit, _event(RunState.START, inputs, outputs))
    status, body = await ws.call("GET", "/shardcat/lineage", params={"name": f"{c}.s.net"})
    assert body["edges"] == []                     # START records nothing
    await asyncio.to_thread(client.emit, _event(RunState.COMPLETE, inputs, outputs))

    # The admin writes report from net (by name too, the client without the trailing slash).
    admin = _client(ws, ws.token, slash=False)
    await asyncio.to_thread(admin.emit, _event(RunState.COMPLETE, [InputDataset(namespace="shardcat",
                                                                                name=f"{c}.s.net")],
                                                [OutputDataset(namespace="shardcat", name=f"{c}.s.report")],
                                                job="weekly"))

    status, lineage = await _tracking(ws, engine, "table-lineage", table_name=f"{c}.s.net")
    assert status == 200, lineage
    assert sorted(u["tableInfo"]["name"] for u in lineage["upstreams"]) == ["orders", "refunds"]
    # the engine may not see report: a hidden node, never named
    assert lineage["downstreams"] == [{"hidden": True}]
    status, cols = await _tracking(ws, engine, "column-lineage", table_name=f"{c}.s.net", column_name="amount")
    assert sorted((u["table_name"], u["name"]) for u in cols["upstream_cols"]) == [("orders", "amount"),
                                                                                   ("refunds", "amount")]
    status, cols = await _tracking(ws, ws, "column-lineage", table_name=f"{c}.s.orders", column_name="id")
    assert [(d["table_name"], d["name"]) for d in cols["downstream_cols"]] == [("net", "id")]

    # The graph to a depth: upstream from report, two hops, as the admin and as the engine.
    graph = await ok(ws, "GET", "/shardcat/lineage", params={"name": f"{c}.s.report", "direction": "upstream",
                                                             "depth": "2"})
    hops = sorted((e["hops"], e["source"]["full_name"]) for e in graph["edges"])
    assert hops == [(1, f"{c}.s.net"), (2, f"{c}.s.orders"), (2, f"{c}.s.refunds")]
    assert graph["edges"][0]["jobs"] in (["weekly"], ["nightly"])
    graph = await ok(engine, "GET", "/shardcat/lineage", params={"name": f"{c}.s.net", "direction": "downstream"})
    assert [e["target"] for e in graph["edges"]] == [{"hidden": True}]


async def _tracking(ws, who, what: str, **params):
    async with ws.session.get(f"{ws.url}/api/2.0/lineage-tracking/{what}", params=params,
                              headers={"Authorization": f"Bearer {who.token}"}) as r:
        return r.status, await r.json(content_type=None)


async def test_openlineage_refuses_outputs_the_caller_may_not_write(server, ws, tmp_path):
    c = await _world(ws, tmp_path)
    reader = await user(server, ws)
    await grant(ws, "catalog", c, reader.name, "USE CATALOG", "USE SCHEMA", "SELECT")
    event = {"eventType": "COMPLETE", "eventTime": "2026-01-01T00:00:00Z", "producer": "tests",
             "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "etl", "name": "x"},
             "inputs": [{"namespace": "shardcat", "name": f"{c}.s.orders"}],
             "outputs": [{"namespace": "shardcat", "name": f"{c}.s.net"}]}
    status, body = await reader.call("POST", "/openlineage/api/v1/lineage", json=event)
    assert status == 403 and body["error_code"] == "PERMISSION_DENIED"
    status, body = await reader.call("POST", "/openlineage/api/v1/lineage", json={**event, "inputs": "x"})
    assert status == 400
    for facets in ({"columnLineage": "x"}, {"columnLineage": {"fields": {"id": {"inputFields": "x"}}}},
                   {"columnLineage": {"fields": {"id": {"inputFields": [3]}}}}, "x"):
        bad = {**event, "outputs": [{"namespace": "shardcat", "name": f"{c}.s.net", "facets": facets}]}
        status, body = await ws.call("POST", "/openlineage/api/v1/lineage", json=bad)
        assert status == 400 and body["error_code"] == "INVALID_PARAMETER_VALUE", (facets, body)
    graph = await ok(ws, "GET", "/shardcat/lineage", params={"name": f"{c}.s.net"})
    assert graph["edges"] == []


async def test_dropping_a_table_reports_what_was_written_from_it(server, ws, tmp_path):
    c = await _world(ws, tmp_path)
    admin = _client(ws, ws.token)
    for target in ("net", "report"):
        await asyncio.to_thread(admin.emit, _event(RunState.COMPLETE, [InputDataset(namespace="shardcat",
                                                                                    name=f"{c}.s.orders")],
                                                    [OutputDataset(namespace="shardcat", name=f"{c}.s.{target}")]))
    status, body = await ws.call("DELETE", f"/tables/{c}.s.orders")
    assert status == 200, body
    assert body["dependents"] == [{"full_name": f"{c}.s.net", "securable_type": "TABLE"},
                                  {"full_name": f"{c}.s.report", "securable_type": "TABLE"}]
    status, body = await ws.call("DELETE", f"/tables/{c}.s.refunds")
    assert (status, body) == (200, {})
