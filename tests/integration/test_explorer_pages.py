"""The explorer's pages (issue 47) in Debian's chromium, one browser for the module: assets with and
without comments, asset and column tags, a mask and a row filter, a view's SQL, a sample of rows,
history and an audit trail of others' actions; deep links that survive a reload and Back; creating
and editing as the owner and refused as another user; asking for access end to end; a 760 px
window; the icon. SHARDCAT_EXPLORER_SCREENSHOTS=docs/img writes docs/explorer.md's pictures."""

from __future__ import annotations

import asyncio

import aiohttp
import pyarrow as pa
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from shardcat.delta.client import DeltaCatalogClient
from tests.integration.governance_users import grant, unique, user
from tests.integration.test_enforcement_matrix import function
from tests.integration.test_explorer import browser, shots, sign_in, texts, wait  # noqa: F401 -- fixtures


async def ok(caller, method, path, **kw):
    status, body = await caller.call(method, path, **kw)
    assert status == 200, (method, path, body)
    return body


async def world(ws, server):
    """A catalog without a comment (tagged tier=gold), schema sales (with one), orders (Delta, 30
    rows, a comment, a table tag and a column tag), people (a mask on ssn and a row filter), the
    view big_orders; a reader with SELECT on orders, an asker who sees orders but may not read it."""
    c = unique("shop")
    await ok(ws, "POST", "/catalogs", json={"name": c})
    await ok(ws, "POST", "/schemas", json={"name": "s", "catalog_name": c, "comment": "the shop's sales"})
    orders = f"{c}.s.orders"
    async with DeltaCatalogClient(ws.api, ws.token) as delta:
        await delta.create_table(orders, pa.schema([("order_id", pa.int64()), ("customer", pa.string())]))
        await delta.append(orders, pa.table({"order_id": list(range(30)), "customer": [f"c{i}" for i in range(30)]}))
    await ok(ws, "PATCH", f"/tables/{orders}", json={"comment": "one row per order"})
    for entity_type, name, key, value in (("catalogs", c, "tier", "gold"), ("tables", orders, "domain", "sales"),
                                          ("columns", f"{orders}.customer", "pii", "name")):
        await ok(ws, "POST", "/entity-tag-assignments", json={"entity_type": entity_type, "entity_name": name,
                                                              "tag_key": key, "tag_value": value})
    for f in ("redact", "only_eu"):
        await ok(ws, "POST", "/functions", json=function(c, f))
    await ok(ws, "POST", "/tables", json={
        "name": "people", "catalog_name": c, "schema_name": "s", "table_type": "MANAGED", "data_source_format": "DELTA",
        "columns": [{"name": "region", "type_name": "STRING", "type_text": "string", "position": 0},
                    {"name": "ssn", "type_name": "STRING", "type_text": "string", "position": 1,
                     "mask": {"function_name": f"{c}.s.redact"}}],
        "row_filter": {"function_name": f"{c}.s.only_eu", "input_column_names": ["region"]}})
    await ok(ws, "POST", "/tables", json={"name": "big_orders", "catalog_name": c, "schema_name": "s",
                                          "table_type": "VIEW", "columns": [{"name": "order_id", "type_name": "LONG",
                                                                             "type_text": "bigint", "position": 0}],
                                          "view_definition": f"SELECT order_id FROM {orders} WHERE order_id > 10"})
    reader, asker = await user(server, ws), await user(server, ws)
    await grant(ws, "catalog", c, reader.name, "USE CATALOG", "USE SCHEMA")
    await grant(ws, "table", orders, reader.name, "SELECT")
    await grant(ws, "catalog", c, asker.name, "USE CATALOG", "USE SCHEMA", "BROWSE")
    await ok(reader, "GET", f"/tables/{orders}")      # someone else's action for the owner's audit trail
    return c, reader, asker


def open_page(driver, url, address: str, heading: str) -> None:
    driver.get(f"{url}/#/{address}")
    settle(driver, heading)


def settle(driver, heading: str) -> None:
    """Wait until the page shows `heading` and has loaded every card."""
    wait(driver, lambda d: (texts(d, "#detail h1") or [""])[0].endswith(heading)
         and "loading…" not in texts(d, "#detail")[0])


def card(driver, title: str) -> str:
    found = texts(driver, f"#detail section[data-card='{title}']")
    return found[0] if found else ""


def pages_scenario(driver, shots, url, token, c) -> dict:
    sign_in(driver, url, token)
    seen = {}
    open_page(driver, url, f"table/{c}.s.orders", f"{c}.s.orders")
    wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "table.sample")))
    seen["orders"] = {"page": driver.find_element(By.ID, "detail").text, "columns": texts(driver, "table.columns tbody tr"),
                      "tags": card(driver, "Tags"), "sample_rows": len(driver.find_elements(By.CSS_SELECTOR, "table.sample tbody tr")),
                      "history": texts(driver, "table.history tbody tr"), "audit": texts(driver, "table.audit tbody tr")}
    driver.save_screenshot(str(shots / "explorer-table.png"))
    open_page(driver, url, f"table/{c}.s.people", f"{c}.s.people")
    wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, ".no-sample")))
    seen["people"] = {"columns": texts(driver, "table.columns tbody tr"), "masked": texts(driver, ".badge.mask"),
                      "filter": texts(driver, ".badge.filter"), "sample": card(driver, "Sample data"),
                      "request_forms": len(driver.find_elements(By.CSS_SELECTOR, "form.request-access"))}
    driver.save_screenshot(str(shots / "explorer-masked.png"))
    open_page(driver, url, f"table/{c}.s.big_orders", f"{c}.s.big_orders")
    seen["view"] = {"sql": texts(driver, "pre.sql"), "kind": texts(driver, "#detail .kind")}
    open_page(driver, url, f"catalog/{c}", c)
    wait(driver, lambda d: texts(d, "ul.children[data-list='schemas'] a"))
    seen["catalog"] = {"page": driver.find_element(By.ID, "detail").text, "schemas": texts(driver, "ul.children a"),
                       "tags": card(driver, "Tags")}
    driver.save_screenshot(str(shots / "explorer-catalog.png"))
    open_page(driver, url, f"schema/{c}.s", f"{c}.s")
    wait(driver, lambda d: texts(d, "ul.children[data-list='tables'] a"))
    seen["schema"] = {"comment": texts(driver, "#detail .comment"), "tables": texts(driver, "ul.children[data-list='tables'] a"),
                      "notes": texts(driver, "ul.children[data-list='tables'] .note"),
                      "functions": texts(driver, "ul.children[data-list='functions'] a")}
    return seen


async def test_pages_show_comments_tags_masks_filters_sql_samples_history_and_others_actions(ws, server, browser, shots):
    c, reader, _ = await world(ws, server)
    seen = await asyncio.to_thread(pages_scenario, browser, shots, server.url, ws.token, c)
    orders = seen["orders"]
    assert "one row per order" in orders["page"] and "No comment." not in orders["page"]
    assert "null" not in orders["page"] and "undefined" not in orders["page"]
    assert "domain: sales" in orders["tags"]
    assert any(row.startswith("2 customer") and "pii: name" in row for row in orders["columns"]), orders["columns"]
    assert orders["sample_rows"] == 20
    assert orders["history"] and orders["history"][-1].endswith("created")
    assert any(reader.name in row and "getTable" in row for row in orders["audit"]), orders["audit"]
    assert not any(row.split(" ")[3:4] == ["getTable"] and reader.name not in row for row in orders["audit"])
    people = seen["people"]
    assert people["masked"] == ["MASKED"] and any("ssn" in r and "MASKED" in r for r in people["columns"])
    assert people["filter"] == ["ROW FILTER"]
    assert "row filter or column masks" in people["sample"]
    assert people["request_forms"] == 0          # the owner may read it: nothing to ask for
    assert seen["view"]["sql"] == [f"SELECT order_id FROM {c}.s.orders WHERE order_id > 10"]
    assert seen["view"]["kind"] == ["view"]
    catalog = seen["catalog"]
    assert "No comment." in catalog["page"] and "null" not in catalog["page"] and "undefined" not in catalog["page"]
    assert catalog["schemas"] == ["default", "s"] and "tier: gold" in catalog["tags"]    # default: every catalog's
    assert seen["schema"]["comment"] == ["the shop's sales"]
    assert seen["schema"]["tables"] == ["big_orders", "orders", "people"]
    assert seen["schema"]["notes"][0] == "view" and "one row per order" in seen["schema"]["notes"]
    assert sorted(seen["schema"]["functions"]) == ["only_eu", "redact"]


def deep_link_scenario(driver, url, token, c) -> dict:
    sign_in(driver, url, token)
    open_page(driver, url, f"schema/{c}.s", f"{c}.s")
    wait(driver, ec.element_to_be_clickable((By.CSS_SELECTOR, "ul.children[data-list='tables'] a[href$='.orders']"))).click()
    settle(driver, f"{c}.s.orders")
    seen = {"address": driver.current_url}
    driver.refresh()
    settle(driver, f"{c}.s.orders")
    seen["after_reload"] = driver.find_element(By.CSS_SELECTOR, "#detail h1").text
    driver.back()
    settle(driver, f"{c}.s")
    seen["after_back"] = driver.find_element(By.CSS_SELECTOR, "#detail h1").text
    driver.forward()
    settle(driver, f"{c}.s.orders")
    seen["after_forward"] = driver.find_element(By.CSS_SELECTOR, "#detail h1").text
    return seen


async def test_a_deep_link_survives_reload_and_back(ws, server, browser):
    c, reader, _ = await world(ws, server)
    seen = await asyncio.to_thread(deep_link_scenario, browser, server.url, reader.token, c)
    assert seen["address"].endswith(f"/#/table/{c}.s.orders")
    assert seen["after_reload"] == f"{c}.s.orders"
    assert seen["after_back"] == f"{c}.s"
    assert seen["after_forward"] == f"{c}.s.orders"


def owner_edits_scenario(driver, url, token, name) -> dict:
    sign_in(driver, url, token)
    open_page(driver, url, "", "Catalogs")
    form = driver.find_element(By.CSS_SELECTOR, "form[data-create='catalog']")
    form.find_element(By.NAME, "name").send_keys(name)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    settle(driver, name)
    form = driver.find_element(By.CSS_SELECTOR, "form[data-create='schema']")
    form.find_element(By.NAME, "name").send_keys("fresh")
    form.find_element(By.NAME, "comment").send_keys("made in the page")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    settle(driver, f"{name}.fresh")
    seen = {"schema_page": driver.find_element(By.ID, "detail").text}
    edit = driver.find_element(By.CSS_SELECTOR, "form.edit")
    comment = edit.find_element(By.NAME, "comment")
    comment.clear()
    comment.send_keys("edited here")
    edit.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, lambda d: texts(d, "#detail .comment") == ["edited here"])
    settle(driver, f"{name}.fresh")
    tags = driver.find_element(By.CSS_SELECTOR, "form.tag-form")
    tags.find_element(By.NAME, "tag_key").send_keys("team")
    tags.find_element(By.NAME, "tag_value").send_keys("growth")
    tags.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, lambda d: "team: growth" in card(d, "Tags"))
    return seen


def outsider_edits_scenario(driver, url, token, c) -> dict:
    sign_in(driver, url, token)
    open_page(driver, url, f"catalog/{c}", c)
    seen = {"edit_forms": len(driver.find_elements(By.CSS_SELECTOR, "form.edit, form.tag-form, form.grant"))}
    form = driver.find_element(By.CSS_SELECTOR, "form[data-create='schema']")
    form.find_element(By.NAME, "name").send_keys("intruder")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "form[data-create='schema'] .error"))
    seen["error"] = texts(driver, "form[data-create='schema'] .error")
    return seen


async def test_the_owner_creates_and_edits_and_another_user_is_refused(ws, server, browser):
    c, reader, _ = await world(ws, server)
    name = unique("made")
    await asyncio.to_thread(owner_edits_scenario, browser, server.url, ws.token, name)
    schema = await ok(ws, "GET", f"/schemas/{name}.fresh")
    assert schema["comment"] == "edited here" and schema["tags"] == {"team": "growth"}
    seen = await asyncio.to_thread(outsider_edits_scenario, browser, server.url, reader.token, c)
    assert seen["edit_forms"] == 0
    assert seen["error"] and seen["error"][0].startswith("PERMISSION_DENIED")
    status, _ = await ws.call("GET", f"/schemas/{c}.intruder")
    assert status == 404


def ask_scenario(driver, shots, url, token, c) -> dict:
    sign_in(driver, url, token)
    open_page(driver, url, f"table/{c}.s.orders", f"{c}.s.orders")
    seen = {"sample": card(driver, "Sample data")}
    form = driver.find_element(By.CSS_SELECTOR, "form.request-access")
    form.find_element(By.NAME, "reason").send_keys("quarterly report")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, lambda d: "Requested SELECT" in (texts(d, "form.request-access") or [""])[0])
    return seen


def approve_scenario(driver, shots, url, token) -> dict:
    sign_in(driver, url, token)
    open_page(driver, url, "requests", "Access requests")
    seen = {"to_decide": texts(driver, "table.to-decide tbody tr")}
    driver.save_screenshot(str(shots / "explorer-requests.png"))
    driver.find_element(By.CSS_SELECTOR, "table.to-decide .approve-button").click()
    wait(driver, lambda d: any("APPROVED" in r for r in texts(d, "table.to-decide tbody tr")))
    seen["after"] = texts(driver, "table.to-decide tbody tr")
    return seen


def sample_scenario(driver, url, token, c) -> dict:
    sign_in(driver, url, token)
    open_page(driver, url, f"table/{c}.s.orders", f"{c}.s.orders")
    wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "table.sample")))
    return {"rows": len(driver.find_elements(By.CSS_SELECTOR, "table.sample tbody tr"))}


async def test_asking_for_access_end_to_end(ws, server, browser, shots):
    c, _, asker = await world(ws, server)
    seen = await asyncio.to_thread(ask_scenario, browser, shots, server.url, asker.token, c)
    assert "may not" in seen["sample"] and "SELECT" in seen["sample"]
    seen = await asyncio.to_thread(approve_scenario, browser, shots, server.url, ws.token)
    mine = [r for r in seen["to_decide"] if asker.name in r]
    assert len(mine) == 1 and "quarterly report" in mine[0] and "PENDING" in mine[0]
    assert any(asker.name in r and "APPROVED" in r for r in seen["after"])
    perms = await ok(ws, "GET", f"/permissions/table/{c}.s.orders")
    assert {"principal": asker.name, "privileges": ["SELECT"]} in perms["privilege_assignments"]
    seen = await asyncio.to_thread(sample_scenario, browser, server.url, asker.token, c)
    assert seen["rows"] == 20


def narrow_scenario(driver, shots, url, token, c) -> dict:
    sign_in(driver, url, token)
    size = driver.get_window_size()
    driver.set_window_size(760, 1100)
    try:
        open_page(driver, url, f"table/{c}.s.orders", f"{c}.s.orders")
        wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "table.sample")))
        widths = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth, "
                                       "Math.max(...[...document.querySelectorAll('time')].map(t => t.getClientRects().length))]")
        driver.save_screenshot(str(shots / "explorer-narrow.png"))
    finally:
        driver.set_window_size(size["width"], size["height"])
    return {"scroll_width": widths[0], "inner_width": widths[1], "time_lines": widths[2]}


async def test_a_narrow_window_has_no_overflow_and_dates_stay_whole(ws, server, browser, shots):
    c, _, _ = await world(ws, server)
    seen = await asyncio.to_thread(narrow_scenario, browser, shots, server.url, ws.token, c)
    assert seen["scroll_width"] <= seen["inner_width"], seen
    assert seen["time_lines"] == 1          # a date is never broken across lines


def column_lineage_scenario(driver, url, token, c) -> dict:
    sign_in(driver, url, token)
    seen = {}
    for table in ("customers", "orders"):
        open_page(driver, url, f"table/{c}.s.{table}", f"{c}.s.{table}")
        seen[f"{table}_before"] = len(driver.find_elements(By.CSS_SELECTOR, "ul.column-lineage li[data-column]"))
        driver.find_element(By.CSS_SELECTOR, "details.column-lineage summary").click()
        wait(driver, lambda d: len(texts(d, "ul.column-lineage > li[data-column]")) == 2
             and "loading…" not in card(d, "Column lineage"))
        seen[table] = {li.get_attribute("data-column"): {
            "text": li.text, "links": [(a.text, a.get_attribute("href"))
                                       for a in li.find_elements(By.CSS_SELECTOR, "a.column-table")]}
            for li in driver.find_elements(By.CSS_SELECTOR, "ul.column-lineage > li[data-column]")}
    link = driver.find_element(By.CSS_SELECTOR, "li[data-column='customer'] a.column-table")
    link.click()
    settle(driver, f"{c}.s.customers")
    seen["followed"] = driver.current_url
    return seen


async def test_column_lineage_on_the_table_page_upstream_and_downstream_linked(ws, server, browser):
    c, _, _ = await world(ws, server)
    orders, customers = f"{c}.s.orders", f"{c}.s.customers"      # customers.region from orders.customer; ssn from nothing
    await ok(ws, "POST", "/tables", json={"name": "customers", "catalog_name": c, "schema_name": "s", "table_type": "MANAGED",
                                          "data_source_format": "DELTA", "columns": [
                                              {"name": "region", "type_name": "STRING", "type_text": "string", "position": 0},
                                              {"name": "ssn", "type_name": "STRING", "type_text": "string", "position": 1}]})
    event = {"eventType": "COMPLETE", "eventTime": "2026-11-28T22:00:00Z", "producer": "tests",
             "run": {"runId": "0193b1d0-0000-7000-8000-000000000047"}, "job": {"namespace": "etl", "name": "customers"},
             "inputs": [{"namespace": "shardcat", "name": orders}],
             "outputs": [{"namespace": "shardcat", "name": customers, "facets": {"columnLineage": {"fields": {
                 "region": {"inputFields": [{"namespace": "shardcat", "name": orders, "field": "customer"}]}}}}}]}
    body = await ok(ws, "POST", "/openlineage/api/v1/lineage", json=event)
    assert body["column_edges"] == 1, body
    seen = await asyncio.to_thread(column_lineage_scenario, browser, server.url, ws.token, c)
    assert seen["customers_before"] == 0 and seen["orders_before"] == 0      # nothing asked before the card opens
    region, ssn = seen["customers"]["region"], seen["customers"]["ssn"]
    assert f"← {orders}.customer" in region["text"] and "→" not in region["text"]
    assert [(t, h.split("/#/", 1)[1]) for t, h in region["links"]] == [(orders, f"table/{orders}")]
    assert ssn["links"] == [] and "←" not in ssn["text"] and "→" not in ssn["text"]
    assert "no column lineage recorded" in ssn["text"]
    customer, order_id = seen["orders"]["customer"], seen["orders"]["order_id"]
    assert f"→ {customers}.region" in customer["text"] and "←" not in customer["text"]
    assert [(t, h.split("/#/", 1)[1]) for t, h in customer["links"]] == [(customers, f"table/{customers}")]
    assert order_id["links"] == [] and "no column lineage recorded" in order_id["text"]
    assert seen["followed"].endswith(f"/#/table/{customers}")


async def test_the_icon_needs_no_token(server):
    async with aiohttp.ClientSession() as session, session.get(server.url + "/favicon.ico") as r:
        assert r.status == 200 and r.headers["Content-Type"] == "image/png"
        assert (await r.read()).startswith(b"\x89PNG")
