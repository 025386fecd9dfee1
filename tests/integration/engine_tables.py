"""Tables the engine tests read, written through shardcat by other engines (no paths handed over by hand):
a plain Delta table written by delta-rs at the location shardcat allocated, and catalog-managed tables
written by shardcat's Delta client."""

from __future__ import annotations

import deltalake
import pyarrow as pa

from shardcat.delta.client import DeltaCatalogClient

ORDERS = pa.schema([("id", pa.int64()), ("item", pa.string())])


async def engine_tables(ws) -> dict:
    """main.s.plain (delta-rs: ids 10, 20); main.s.orders (catalog-managed, the Delta protocol's
    catalogManaged feature: ids 1, 2 published at version 1, id 3 ratified at version 2 and not
    published); main.s.interop (catalog-managed by the catalog, but without the protocol feature:
    ids 1, 2 then 3, published, versions 1 and 2)."""
    assert (await ws.call("POST", "/catalogs", json={"name": "main"}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "main"}))[0] == 200
    status, plain = await ws.call("POST", "/tables", json={
        "name": "plain", "catalog_name": "main", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200, plain
    deltalake.write_deltalake(plain["storage_location"], pa.table({"id": [10, 20]}), mode="overwrite")
    async with DeltaCatalogClient(ws.api, ws.token) as client:
        interop = await client.create_table("main.s.interop", ORDERS, catalog_managed_protocol=False)
        await client.append(interop, pa.table({"id": [1, 2], "item": ["a", "b"]}))
        await client.append(interop, pa.table({"id": [3], "item": ["c"]}))
        orders = await client.create_table("main.s.orders", ORDERS)
        await client.append(orders, pa.table({"id": [1, 2], "item": ["a", "b"]}))
        client.publish_after_commit = False
        await client.append(orders, pa.table({"id": [3], "item": ["c"]}))
    status, loaded = await ws.call("GET", "/delta/v1/catalogs/main/schemas/s/tables/orders")
    assert status == 200 and loaded["latest-table-version"] == 2 and [c["version"] for c in loaded["commits"]] == [2]
    return {"orders": orders, "plain": plain, "interop": interop}


async def catalog_version(ws, name: str) -> tuple[int, str]:
    """(latest ratified version, location) of a catalog-managed table, from the UC Delta API."""
    status, loaded = await ws.call("GET", f"/delta/v1/catalogs/main/schemas/s/tables/{name}")
    assert status == 200, loaded
    return loaded["latest-table-version"], loaded["metadata"]["location"]
