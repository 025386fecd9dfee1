"""Apache Iceberg's REST Compatibility Kit (RCK) against shardcat's Iceberg REST catalog.

The kit is the Iceberg project's own `CatalogTests` and `ViewCatalogTests` run through its Java
`RESTCatalog` client (`RESTCompatibilityKit{Catalog,View}Tests` of iceberg-open-api, published jars,
jvm/iceberg-rck/pom.xml). One run per module against the session's server, a fresh metastore and
warehouse (catalog); every test passes except the ones in NOT_PASSED, each with its reason (the same
list is in docs/iceberg.md), and those refusals are clean: a 4xx in Iceberg's error model, never a 500.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET

import pytest
from conftest import PREFIX, new_workspace
from jvm import classpath, java

# The kit's tests (its run is their fixture's setup); the refusal test below needs no JVM.
KIT_TEST = [pytest.mark.jvm, pytest.mark.timeout(1200)]

KIT = ("org.apache.iceberg.rest.RESTCompatibilityKitCatalogTests",
       "org.apache.iceberg.rest.RESTCompatibilityKitViewCatalogTests")
WAREHOUSE = "rck"
KIT_TIMEOUT = 900           # seconds; the kit takes about a minute here

# Tests of the kit shardcat does not pass, by reason (docs/iceberg.md lists them too).
NOT_PASSED = {
    ('locations are kept normalized (file:/tmp/x is answered as file:///tmp/x): one asset per path is '
     'checked on the normalized URL'): [
        'completeCreateView()', 'updateViewLocation()', 'testCompleteCreateOrReplaceTransactionCreate()',
        'testCompleteCreateTransaction()', 'testCompleteCreateTransactionV2()',
        'testCompleteCreateTransactionMultipleSchemas()', 'createAndReplaceViewWithLocation()'],
    ('a replace transaction may not move a table to another location (set-location is refused with a 400)'): [
        'testCompleteReplaceTransaction()', 'testCompleteCreateOrReplaceTransactionReplace()'],
    ('metadata files shardcat wrote are kept in memory (they are immutable), so deleting one under a table'
     ' does not fail its next load'): [
        'testLoadTableWithMissingMetadataFile(Path)'],
}


def _not_passed() -> dict[str, str]:
    return {test: reason for reason, tests in NOT_PASSED.items() for test in tests}


def _outcomes(report: str) -> dict[str, tuple[str, str]]:
    """test name -> (passed | failed | skipped, message) from the launcher's JUnit XML report."""
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name")
        assert name not in outcomes, f"two kit tests named {name}"
        outcome, message = "passed", ""
        for tag, said in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
            found = case.find(tag)
            if found is not None:
                outcome, message = said, found.get("message") or (found.text or "")[:300]
        outcomes[name] = outcome, message
    return outcomes


@pytest.fixture(scope="module")
async def kit(server, http, tmp_path_factory):
    """Run the kit once against a fresh metastore of the session's server: (outcomes, workspace)."""
    work = tmp_path_factory.mktemp("rck")
    ws = await new_workspace(server, http, work)
    status, body = await ws.call("POST", "/catalogs", json={"name": WAREHOUSE})
    assert status == 200, body
    jars = await asyncio.to_thread(classpath, "iceberg-rck")
    reports = work / "reports"
    # Catalog properties come from system properties: where, which warehouse, whose token, and the
    # kit's switches for what a Unity catalog is (a table needs its schema created first).
    command = [java(17), "-cp", jars,
               f"-Duri={server.url}{PREFIX}/iceberg", f"-Dwarehouse={WAREHOUSE}", f"-Dtoken={ws.token}",
               "-Drck.local=false", "-Drck.requires-namespace-create=true",
               "org.junit.platform.console.ConsoleLauncher", "execute", "--disable-banner", "--details=summary",
               "--config", "rck.local=false", f"--reports-dir={reports}",
               *(f"--select-class={name}" for name in KIT)]
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.STDOUT, cwd=work)
    try:
        output, _ = await asyncio.wait_for(process.communicate(), KIT_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    (work / "kit.log").write_bytes(output)
    report = reports / "TEST-junit-jupiter.xml"
    assert report.exists(), output.decode(errors="replace")[-3000:]
    return _outcomes(str(report)), ws


@KIT_TEST[0]
@KIT_TEST[1]
async def test_every_kit_test_passes_but_the_listed_ones(kit):
    outcomes, _ = kit
    assert len(outcomes) >= 150, f"the kit ran only {len(outcomes)} tests"
    expected = _not_passed()
    failed = {name: message for name, (outcome, message) in outcomes.items() if outcome == "failed"}
    unexpected = {name: message[:300] for name, message in failed.items() if name not in expected}
    assert not unexpected, unexpected
    # A listed test that now passes (or vanished) means the list and docs/iceberg.md are stale.
    assert set(expected) <= set(failed), sorted(set(expected) - set(failed))
    # No failure anywhere is a server error.
    assert not [m for m in failed.values() if "Server error" in m or "INTERNAL_ERROR" in m], failed


@KIT_TEST[0]
@KIT_TEST[1]
async def test_the_kit_skips_only_what_a_unity_catalog_is_not(kit):
    """The kit's own assumptions skip a few tests: nested or empty namespaces, names with dots or
    slashes (a Unity name has neither), and one its authors disabled for remote servers."""
    outcomes, _ = kit
    skipped = {name for name, (outcome, _) in outcomes.items() if outcome == "skipped"}
    assert skipped <= {
        "createAndDropEmptyNamespace()", "testListNestedNamespaces()", "testDropNamespaceWithNestedNamespace()",
        "listNamespacesWithEmptyNamespace()", "namespacePropertiesOnEmptyNamespace()",
        "listViewsInEmptyNamespace()", "listTablesInEmptyNamespace()", "testNamespaceWithDot()",
        "testTableNameWithDot()", "testNamespaceWithSlash()", "testTableNameWithSlash()",
        "createTableInUniqueLocation()"}, skipped


def _error_model(status: int, body: dict, kind: str) -> None:
    assert 400 <= status < 500, (status, body)
    error = body["error"]
    assert error["type"] == kind and error["code"] == status and error["message"], body


async def test_the_refusals_behind_the_list_are_clean_4xx(ws):
    """The refusals behind NOT_PASSED, asked directly: a 4xx in Iceberg's ErrorModel, never a 500."""
    status, body = await ws.call("POST", "/catalogs", json={"name": WAREHOUSE})
    assert status == 200, body
    base = f"/iceberg/v1/catalogs/{WAREHOUSE}"
    status, body = await ws.call("POST", f"{base}/namespaces", json={"namespace": ["refusals"]})
    assert status == 200, body
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    # Format version 3, on create and as an upgrade, is served now (was refused); 4 is refused.
    status, body = await ws.call("POST", f"{base}/namespaces/refusals/tables",
                                 json={"name": "v3", "schema": schema, "properties": {"format-version": "3"}})
    assert status == 200 and body["metadata"]["format-version"] == 3, body
    status, body = await ws.call("POST", f"{base}/namespaces/refusals/tables", json={"name": "v2", "schema": schema})
    assert status == 200, body
    status, body = await ws.call("POST", f"{base}/namespaces/refusals/tables/v2",
                                 json={"updates": [{"action": "upgrade-format-version", "format-version": 4}]})
    _error_model(status, body, "BadRequestException")
    # register-view is served (and listed); a live managed view's metadata file overlaps managed storage (a
    # dropped one's is re-adopted by who may undrop it: test_iceberg_register_view.py).
    status, body = await ws.call("GET", "/iceberg/v1/config", params={"warehouse": WAREHOUSE})
    assert status == 200 and "POST /v1/{prefix}/namespaces/{namespace}/register-view" in body["endpoints"], body
    view = {"name": "v", "schema": schema, "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {}, "default-namespace": ["refusals"],
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}]}}
    status, body = await ws.call("POST", f"{base}/namespaces/refusals/views", json=view)
    assert status == 200, body
    status, body = await ws.call("POST", f"{base}/namespaces/refusals/register-view",
                                 json={"name": "again", "metadata-location": body["metadata-location"]})
    _error_model(status, body, "BadRequestException")
    assert "overlaps" in body["error"]["message"], body
    # A route shardcat does not serve under an Iceberg base answers in Iceberg's error model too.
    status, body = await ws.call("POST", f"{base}/namespaces/refusals/no-such-route", json={})
    _error_model(status, body, "NotFoundException")
    # A rename across namespaces of one catalog is served now (was refused); into another catalog it is the spec's 406.
    status, body = await ws.call("POST", f"{base}/namespaces", json={"namespace": ["other"]})
    assert status == 200, body
    status, body = await ws.call("POST", f"{base}/tables/rename", json={
        "source": {"namespace": ["refusals"], "name": "v2"}, "destination": {"namespace": ["other"], "name": "v2"}})
    assert status == 204, body
    # A namespace deeper than a schema.
    status, body = await ws.call("POST", f"{base}/namespaces", json={"namespace": ["refusals", "deeper"]})
    _error_model(status, body, "BadRequestException")
