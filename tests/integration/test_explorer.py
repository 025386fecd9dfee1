"""The catalog explorer (issue 35) in a real headless browser: Debian's chromium, driven by Selenium
through Debian's chromedriver, against the session's server. The owner signs in, browses to a
table, sees its columns, grants and lineage graph, grants SELECT and sees the change, and finds the
table by search; a user without privileges sees neither the table nor its name; a user signs in
through an identity provider's login page (a small provider on loopback). The browser runs
in a thread: the server answers in this test's event loop meanwhile."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import secrets
import shutil
import time
from pathlib import Path

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from shardcat.cluster.server import ServeConfig, start
from shardcat.governance.oidc import OidcConfig
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


def reader_scenario(driver, url, token, catalog) -> dict:
    sign_in(driver, url, token)
    open_node(driver, catalog)
    open_node(driver, "sales")
    open_node(driver, "Tables and views")
    wait(driver, ec.element_to_be_clickable((By.LINK_TEXT, "orders"))).click()
    wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "svg.lineage")))
    wait(driver, lambda d: "loading…" not in d.find_element(By.ID, "detail").text)
    return {"tables": texts(driver, "nav a.table, nav a.view"),
            "lineage": [g.get_attribute("data-name") for g in driver.find_elements(By.CSS_SELECTOR, "svg.lineage g.node")],
            "grant_forms": len(driver.find_elements(By.CSS_SELECTOR, "form.grant")),
            "page": driver.find_element(By.TAG_NAME, "body").text}


async def test_a_reader_sees_what_it_may_and_the_rest_as_hidden(ws, server, browser):
    catalog = unique("shop")
    reader, _ = await world(ws, server, catalog)
    seen = await asyncio.to_thread(reader_scenario, browser, server.url, reader.token, catalog)
    assert seen["tables"] == ["orders"]                  # raw_orders and the view: no privilege on them
    assert sorted(seen["lineage"]) == sorted([f"{catalog}.sales.orders", "hidden"])
    assert "raw_orders" not in seen["page"]
    assert seen["grant_forms"] == 0                      # not the owner: no grant form
    assert "Only metastore and account admins may read the audit trail." in seen["page"]


def paging_scenario(driver, url, token, catalog) -> tuple[int, int]:
    sign_in(driver, url, token)
    open_node(driver, catalog)
    open_node(driver, "big")
    open_node(driver, "Tables and views")
    wait(driver, ec.element_to_be_clickable((By.CSS_SELECTOR, "nav button.more")))
    first = len(driver.find_elements(By.CSS_SELECTOR, "nav a.table"))
    driver.find_element(By.CSS_SELECTOR, "nav button.more").click()
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "nav a.table")) > first)
    return first, len(driver.find_elements(By.CSS_SELECTOR, "nav a.table"))


async def test_lists_come_a_page_at_a_time(ws, server, browser):
    catalog = unique("wide")
    for path, body in (("/catalogs", {"name": catalog}), ("/schemas", {"name": "big", "catalog_name": catalog})):
        status, answer = await ws.call("POST", path, json=body)
        assert status == 200, answer
    for i in range(60):
        status, answer = await ws.call("POST", "/tables", json={
            "name": f"t{i:03}", "catalog_name": catalog, "schema_name": "big", "table_type": "MANAGED",
            "data_source_format": "DELTA", "columns": COLUMNS[:1]})
        assert status == 200, answer
    first, after_more = await asyncio.to_thread(paging_scenario, browser, server.url, ws.token, catalog)
    assert (first, after_more) == (50, 60)


def test_the_explorer_is_static_and_same_origin():
    """Nothing is fetched from elsewhere at run time: the page names no other origin."""
    root = Path(__file__).resolve().parents[2] / "shardcat" / "web" / "explorer"
    for path in root.iterdir():
        if path.suffix not in (".html", ".js", ".css"):
            continue            # the icon
        text = path.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, path


# ---- signing in through the identity provider's login page (authorization code with PKCE) ----

CLIENT_ID = "shardcat-explorer"


class LoginProvider:
    """A small identity provider on loopback: discovery, a login that approves at once as
    `login_email` (the user has "typed their password"), the token endpoint checking the PKCE
    verifier, and the JWKS of a key made here."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.codes: dict[str, dict] = {}
        self.login_email = None
        self.issuer = None
        self.verified = []          # the PKCE checks made: (challenge, verifier matched)

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/.well-known/openid-configuration", self.discovery)
        app.router.add_get("/authorize", self.authorize)
        app.router.add_post("/token", self.token)
        app.router.add_route("OPTIONS", "/token", self.preflight)
        app.router.add_get("/jwks", self.jwks)

    async def discovery(self, request):
        return web.json_response({"issuer": self.issuer, "authorization_endpoint": self.issuer + "/authorize",
                                  "token_endpoint": self.issuer + "/token", "jwks_uri": self.issuer + "/jwks"})

    async def authorize(self, request):
        q = request.query
        assert q["client_id"] == CLIENT_ID and q["response_type"] == "code" and q["code_challenge_method"] == "S256"
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"challenge": q["code_challenge"], "redirect_uri": q["redirect_uri"]}
        raise web.HTTPFound(f"{q['redirect_uri']}?code={code}&state={q['state']}")

    async def preflight(self, request):
        return web.Response(headers=self._cors(request))

    def _cors(self, request):
        return {"Access-Control-Allow-Origin": request.headers.get("Origin", "*"),
                "Access-Control-Allow-Headers": "content-type", "Access-Control-Allow-Methods": "POST"}

    async def token(self, request):
        form = await request.post()
        started = self.codes.pop(form["code"], None)
        digest = hashlib.sha256(form["code_verifier"].encode()).digest()
        matched = started is not None and base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == started["challenge"]
        self.verified.append(matched)
        if not matched or form["redirect_uri"] != started["redirect_uri"]:
            return web.json_response({"error": "invalid_grant"}, status=400, headers=self._cors(request))
        now = int(time.time())
        id_token = jwt.encode({"iss": self.issuer, "aud": CLIENT_ID, "sub": "u-1", "email": self.login_email,
                               "email_verified": True, "iat": now, "exp": now + 300}, self.key, algorithm="RS256", headers={"kid": "login"})
        return web.json_response({"id_token": id_token, "token_type": "Bearer", "expires_in": 300},
                                 headers=self._cors(request))

    async def jwks(self, request):
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return web.json_response({"keys": [{**jwk, "kid": "login", "use": "sig", "alg": "RS256"}]})


@pytest.fixture(scope="module")
async def login_provider():
    provider = LoginProvider()
    app = web.Application()
    provider.routes(app)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    provider.issuer = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield provider
    await runner.cleanup()


@pytest.fixture(scope="module")
async def login_server(pg_url, tmp_path_factory, login_provider):
    running = await start(ServeConfig(port=0, data_dir=tmp_path_factory.mktemp("explorer-oidc"), db=pg_url,
                                      oidc=OidcConfig((login_provider.issuer,), CLIENT_ID, client_id=CLIENT_ID)))
    yield running
    await running.stop()


def provider_login_scenario(driver, url) -> str:
    driver.get(url + "/explorer/explorer.css")
    driver.execute_script("sessionStorage.clear()")
    driver.get(url + "/")
    wait(driver, ec.element_to_be_clickable((By.ID, "idp-login"))).click()
    wait(driver, ec.visibility_of_element_located((By.ID, "tree")))
    return driver.find_element(By.ID, "who").text


async def test_sign_in_through_the_providers_login_page(login_server, login_provider, browser):
    name = unique("carol")
    principal = await login_server.store.create_principal(name, "user")
    await login_server.store.principals.update(principal.id, {"emails": [{"value": f"{name}@example.com"}]})
    login_provider.login_email = f"{name}@example.com"
    who = await asyncio.to_thread(provider_login_scenario, browser, login_server.url)
    assert who == f"signed in as {name}"
    assert login_provider.verified == [True]        # the code was traded with the matching PKCE verifier
