"""The catalog explorer (issue 35) in a real headless browser: Debian's chromium, driven by Selenium
through Debian's chromedriver, against the session's server. The owner signs in, browses to a
table, sees its columns, grants and lineage graph, grants SELECT and sees the change, and finds the
table by search; a user without privileges sees neither the table nor its name. The browser runs
in a thread: the server answers in this test's event loop meanwhile."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.integration.governance_users import grant, unique, user

# Screenshots go to a temporary directory; SHARDCAT_EXPLORER_SCREENSHOTS=docs/img writes docs' pictures.
SCREENSHOTS_ENV = "SHARDCAT_EXPLORER_SCREENSHOTS"
COLUMNS = [{"name": "order_id", "type_name": "LONG", "type_text": "bigint", "position": 0},
           {"name": "amount", "type_name": "DECIMAL", "type_text": "decimal(10,2)", "position": 1, "comment": "in EUR"},
           {"name": "placed_at", "type_name": "TIMESTAMP", "type_text": "timestamp", "position": 2}]


def chromium() -> webdriver.Chrome:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert browser and driver, "Debian's chromium and chromium-driver are needed (apt-get install chromium chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1500",
                 "--disable-gpu", "--no-first-run"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    out = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path_factory.mktemp("screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def browser():
    driver = chromium()
    yield driver
    driver.quit()


def wait(driver, condition, timeout=20):
    try:
        return WebDriverWait(driver, timeout).until(condition)
    except TimeoutException:
        raise AssertionError(f"the page never got there; it shows: {driver.find_element(By.TAG_NAME, 'body').text!r}") from None


def sign_in(driver, url: str, token: str) -> None:
    # Forget an earlier sign-in on a page of the same origin that runs no script (the page itself
    # could still be signing in with the remembered token, and remember it again after the clear).
    driver.get(url + "/explorer/explorer.css")
    driver.execute_script("sessionStorage.clear()")
    driver.get(url + "/")
    wait(driver, ec.visibility_of_element_located((By.ID, "token"))).send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#token-form button").click()
    wait(driver, ec.visibility_of_element_located((By.ID, "tree")))


def open_node(driver, label: str) -> None:
    """Expand the tree node with this label."""
    selector = f"button[aria-label='expand {label}']"
    wait(driver, ec.element_to_be_clickable((By.CSS_SELECTOR, selector))).click()
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, selector).get_attribute("aria-expanded") == "true")


def texts(driver, selector: str) -> list[str]:
    """The shown text of each element matching `selector`, read at one moment (the page may redraw them)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.innerText.replace(/\\s+/g, ' ').trim())",
        selector)


async def world(ws, server, catalog: str):
    """catalog.sales: orders (three columns, properties), its source raw_orders (lineage) and a
    view; a reader with SELECT on orders; another user for the grant made in the page."""
    async def ok(method, path, **kw):
        status, body = await ws.call(method, path, **kw)
        assert status == 200, body
        return body
    await ok("POST", "/catalogs", json={"name": catalog, "comment": "explorer test"})
    await ok("POST", "/schemas", json={"name": "sales", "catalog_name": catalog})
    for name in ("orders", "raw_orders"):
        await ok("POST", "/tables", json={"name": name, "catalog_name": catalog, "schema_name": "sales",
                                          "table_type": "MANAGED", "data_source_format": "DELTA", "columns": COLUMNS,
                                          "properties": {"quality": "gold"}, "comment": "one row per order"})
    await ok("POST", "/tables", json={"name": "big_orders", "catalog_name": catalog, "schema_name": "sales",
                                      "table_type": "VIEW", "columns": COLUMNS[:1],
                                      "view_definition": f"SELECT order_id FROM {catalog}.sales.orders"})
    await ok("POST", "/shardcat/lineage", json={"target": f"{catalog}.sales.orders", "job": "ingest",
                                                "sources": [{"name": f"{catalog}.sales.raw_orders"}]})
    reader = await user(server, ws)
    await grant(ws, "catalog", catalog, reader.name, "USE_CATALOG")
    await grant(ws, "schema", f"{catalog}.sales", reader.name, "USE_SCHEMA")
    await grant(ws, "table", f"{catalog}.sales.orders", reader.name, "SELECT")
    other = await user(server, ws)
    return reader, other


def owner_scenario(driver, shots, url, token, catalog, reader, other) -> dict:
    sign_in(driver, url, token)
    open_node(driver, catalog)
    open_node(driver, "sales")
    open_node(driver, "Tables and views")
    wait(driver, ec.element_to_be_clickable((By.LINK_TEXT, "orders"))).click()
    wait(driver, ec.visibility_of_element_located((By.CSS_SELECTOR, "table.columns")))
    seen = {"columns": [row.split(" ")[1] for row in texts(driver, "table.columns tbody tr")],
            "heading": driver.find_element(By.CSS_SELECTOR, "#detail h1").text}
    wait(driver, ec.visibility_of_element_located((By.CSS_SELECTOR, "table.grants")))
    seen["grants"] = texts(driver, "table.grants tbody tr")
    wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "svg.lineage")))
    seen["lineage"] = [g.get_attribute("data-name") for g in driver.find_elements(By.CSS_SELECTOR, "svg.lineage g.node")]
    seen["view_note"] = texts(driver, "nav .note")
    driver.save_screenshot(str(shots / "explorer-table.png"))

    # grant SELECT to another user in the page; the grants list shows it
    form = driver.find_element(By.CSS_SELECTOR, "form.grant")
    form.find_element(By.NAME, "principal").send_keys(other.name)
    Select(form.find_element(By.NAME, "privilege")).select_by_value("SELECT")
    form.find_element(By.CSS_SELECTOR, ".grant-button").click()
    wait(driver, lambda d: any(other.name in t for t in texts(d, "table.grants tbody tr")))
    seen["grants_after"] = texts(driver, "table.grants tbody tr")

    # search finds it
    box = driver.find_element(By.ID, "search")
    box.send_keys("raw_orders\n")
    wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "ul.results a.result")))
    seen["search"] = texts(driver, "ul.results a.result")
    driver.save_screenshot(str(shots / "explorer-search.png"))
    return seen


async def test_owner_browses_to_a_table_and_grants(ws, server, browser, shots):
    catalog = unique("shop")
    reader, other = await world(ws, server, catalog)
    seen = await asyncio.to_thread(owner_scenario, browser, shots, server.url, ws.token, catalog, reader, other)
    assert seen["heading"] == f"{catalog}.sales.orders"
    assert seen["columns"] == ["order_id", "amount", "placed_at"]
    assert f"{reader.name} SELECT" in seen["grants"]
    assert not any(other.name in g for g in seen["grants"])
    assert f"{other.name} SELECT" in seen["grants_after"]
    assert set(seen["lineage"]) == {f"{catalog}.sales.orders", f"{catalog}.sales.raw_orders"}
    assert "view" in seen["view_note"]          # the view is marked as one in the tree
    assert seen["search"] == [f"{catalog}.sales.raw_orders"]
    # and the grant made in the page is a real one
    status, body = await ws.call("GET", f"/permissions/table/{catalog}.sales.orders")
    assert {"principal": other.name, "privileges": ["SELECT"]} in body["privilege_assignments"]


def outsider_scenario(driver, shots, url, token, catalog) -> dict:
    sign_in(driver, url, token)
    wait(driver, lambda d: not texts(d, "nav li.muted") or texts(d, "nav li.muted") != ["loading…"])
    seen = {"tree": driver.find_element(By.ID, "tree").text}
    box = driver.find_element(By.ID, "search")
    box.send_keys("orders\n")
    wait(driver, lambda d: "loading…" not in d.find_element(By.ID, "detail").text
         and d.find_element(By.CSS_SELECTOR, "#detail h1").text.startswith("Search"))
    seen["search"] = driver.find_element(By.ID, "detail").text
    seen["page"] = driver.find_element(By.TAG_NAME, "body").text
    driver.save_screenshot(str(shots / "explorer-no-access.png"))
    return seen


async def test_a_user_without_privileges_sees_neither_the_table_nor_its_name(ws, server, browser, shots):
    catalog = unique("shop")
    await world(ws, server, catalog)
    outsider = await user(server, ws)
    seen = await asyncio.to_thread(outsider_scenario, browser, shots, server.url, outsider.token, catalog)
    assert "none" in seen["tree"]
    for name in (catalog, "orders", "raw_orders", "sales"):
        assert name not in seen["tree"]
        assert f"{catalog}.sales.{name}" not in seen["page"]
    assert catalog not in seen["page"]
    assert "Search: orders" in seen["search"]


def test_the_explorer_is_static_and_same_origin():
    """Nothing is fetched from elsewhere at run time: the page names no other origin."""
    root = Path(__file__).resolve().parents[2] / "shardcat" / "web" / "explorer"
    for path in root.iterdir():
        text = path.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, path
