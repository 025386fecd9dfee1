"""The discovery benchmarks' pure parts: the lineage graph they build and the webhook receiver's checks."""

import hashlib
import hmac
import json

from aiohttp.test_utils import TestClient, TestServer
from aiohttp import web

from benchmarks.bench_events import SECRET, SIGNATURE_HEADER, Receiver
from benchmarks.bench_lineage_graph import graph


def test_the_lineage_graph_has_layers_times_width_times_fan_in_distinct_edges_from_the_layer_before():
    layers, width, fan_in = 4, 7, 3
    reports = graph(layers, width, fan_in)
    edges = {(s, t) for t, sources in reports for s in sources}
    assert len(reports) == (layers - 1) * width and len(edges) == (layers - 1) * width * fan_in
    assert all(s // width == t // width - 1 for s, t in edges)
    assert graph(layers, width, fan_in) == reports          # seeded: every run builds the same graph


async def test_the_receiver_notes_versions_in_arrival_order_and_counts_bad_signatures():
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.take)
    async with TestClient(TestServer(app)) as client:
        for version, secret in ((5, SECRET), (6, "not the secret at all")):
            body = json.dumps({"data": {"version": version}}).encode()
            signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            assert (await client.post("/hook", data=body, headers={SIGNATURE_HEADER: signature})).status == 204
    assert [v for v, _ in receiver.arrivals] == [5, 6] and receiver.bad_signatures == 1
