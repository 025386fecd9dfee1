"""A first end-to-end pass: create a catalog, schema and table and read them back over HTTP."""


async def test_create_and_read_back(ws):
    assert (await ws.call("POST", "/catalogs", json={"name": "c"}))[0] == 200
    assert (await ws.call("POST", "/schemas", json={"name": "s", "catalog_name": "c"}))[0] == 200
    status, table = await ws.call("POST", "/tables", json={
        "name": "t", "catalog_name": "c", "schema_name": "s", "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": [{"name": "id", "type_name": "LONG"}]})
    assert status == 200, table
    assert table["storage_location"] == f"{ws.storage_root}/tables/{table['table_id']}"
    status, got = await ws.call("GET", "/tables/c.s.t")
    assert status == 200 and got == table
