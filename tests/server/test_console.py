"""The web console in a real headless browser (Debian's Chromium, driven by Playwright): three
nodes seen to agree, a stream and a CSAS created from the editor and the lineage graph grown by
them, an error shown at its line, the command log's history, and a push query's rows arriving
after an INSERT VALUES until Stop; behind the API's own authentication. Each view's screenshot
is saved for docs/console.md."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.queries.test_query_nodes import ksql
from tests.support.browser import screenshot
from tests.support.kafka import unique
from tests.support.servers import ServerProcess, gauge, wait_until_serving
from tests.support.waiting import eventually

TIMEOUT_MS = 60_000


def test_three_nodes_agree_and_the_editor_grows_the_lineage(
        server_factory: Callable[..., ServerProcess], browser: Any, tmp_path: Path) -> None:
    """Three node processes of its own (without Spark): the cluster view needs a service of
    several nodes, with basic auth, and a catalog no other test writes to."""
    users = tmp_path / "users"
    users.write_text("admin:secret\n")
    service = unique("console")
    nodes = [server_factory("--auth-file", str(users), service_id=service,
                            node_id=f"node-{number}", wait=False) for number in (1, 2, 3)]
    for node in nodes:
        wait_until_serving(node)
    assert httpx.get(f"{nodes[0].url}/console/", timeout=10).status_code == 401
    login = ("admin", "secret")
    assert httpx.get(f"{nodes[0].url}/console/console.py", auth=login,
                     timeout=10).status_code == 404, "only the shipped assets are served"
    assert httpx.get(f"{nodes[0].url}/v1/metastore/log", timeout=10).status_code == 401
    for forged in ({"Origin": "http://elsewhere.example"}, {"Sec-Fetch-Site": "cross-site"}):
        refused = httpx.post(f"{nodes[0].url}/ksql", auth=login, headers=forged, timeout=10,
                             json={"ksql": "CREATE TYPE FORGED AS INT;"})
        assert (refused.status_code, refused.json()["error_code"]) == (403, 40300), \
            "a page of another site cannot post as the console's user"
    socket_url = nodes[0].url.replace("http://", "ws://") + "/ws/query?request=%7B%7D"
    credentials = {"Authorization": "Basic " + base64.b64encode(b"admin:secret").decode()}
    with pytest.raises(InvalidStatus, match="403"):  # nor read a query's rows as that user
        connect(socket_url, origin="http://elsewhere.example", additional_headers=credentials,
                open_timeout=10).close()
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  http_credentials={"username": "admin", "password": "secret"})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{nodes[0].url}/console/")
    expect(page.get_by_test_id("node-name")).to_contain_text(f"node-1 of service {service}")
    expect(page.get_by_test_id("agreement")).to_contain_text("3 of 3 nodes agree")
    expect(page.locator("#nodes tr")).to_have_count(3)

    page.click("nav button[data-view=lineage]")
    expect(page.locator("#graph g.box")).to_have_count(0)
    page.click("nav button[data-view=editor]")
    run(page, f"CREATE STREAM CLICKS (ID INT KEY, URL STRING) WITH (KAFKA_TOPIC='{service}-clicks',"
              " PARTITIONS=1, VALUE_FORMAT='JSON');\nCREATE STREAM LONG_CLICKS AS SELECT * FROM "
              "CLICKS WHERE LEN(URL) > 10;")
    expect(page.get_by_test_id("results")).to_contain_text("Created query with ID")
    expect(page.get_by_test_id("error")).to_have_text("")

    page.click("nav button[data-view=lineage]")
    expect(page.locator("#graph g.box")).to_have_count(5)  # 2 topics, 2 streams, 1 query
    expect(page.locator("#graph path.edge")).to_have_count(4)
    sink_topic = page.locator('#graph g[data-id="topic:LONG_CLICKS"]')
    assert sink_topic.bounding_box()["x"] > page.locator(  # laid out left to right
        '#graph g[data-id="query:CSAS_LONG_CLICKS_1"]').bounding_box()["x"]
    page.locator('#graph g[data-id="source:CLICKS"]').click()
    expect(page.get_by_test_id("details")).to_contain_text("URL")
    expect(page.get_by_test_id("details")).to_contain_text(f"Topic {service}-clicks")
    screenshot(page, "lineage")

    page.click("nav button[data-view=editor]")
    run(page, "SET 'ksql.streams.num.stream.threads' = '1';\nSHOW STREAMS;\n\nCREATE STREAM "
              "BROKEN (ID INT KEY) WITH (KAFKA_TOPIC='b' VALUE_FORMAT='JSON');")
    expect(page.get_by_test_id("error")).to_contain_text("Line 4, column 57 (40001)")
    expect(page.locator("#highlight .line").nth(3)).to_have_class("line error-line")
    run(page, "DEFINE t = 'b';\nSHOW STREAMS;\nCREATE STREAM BROKEN (ID INT KEY) WITH "
              "(KAFKA_TOPIC='${t}' VALUE_FORMAT='JSON');")  # substituted: placed per statement
    expect(page.get_by_test_id("error")).to_contain_text("Line 3, column")
    screenshot(page, "editor")

    last = httpx.get(f"{nodes[1].url}/v1/metastore/log?limit=1", auth=login, timeout=30).json()
    assert [(r["submitter"], r["statement"][:25]) for r in last["records"]] == [
        ("admin", "CREATE STREAM LONG_CLICKS")], "the history of any node, the last record"
    for bad in ("0", "1001", "x"):
        refused = httpx.get(f"{nodes[1].url}/v1/metastore/log?limit={bad}", auth=login, timeout=30)
        assert (refused.status_code, refused.json()["error_code"]) == (400, 40000)
    page.click("nav button[data-view=history]")
    expect(page.locator("#timeline li").first).to_contain_text("CREATE STREAM LONG_CLICKS")
    expect(page.locator("#timeline li").first).to_contain_text("admin")
    screenshot(page, "history")
    page.click("nav button[data-view=cluster]")
    expect(page.get_by_test_id("agreement")).to_contain_text("3 of 3 nodes agree: offset 2")
    expect(page.locator('#nodes tr[data-node="node-1"]')).to_contain_text("writer")
    screenshot(page, "cluster")
    context.close()


def test_a_push_query_streams_rows_into_the_editor_until_stopped(
        spark_node: ServerProcess, browser: Any) -> None:
    stream = unique("PUSHED").upper().replace("-", "_")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{spark_node.url}/console/#editor")
    run(page, f"CREATE STREAM {stream} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{stream}', "
              "PARTITIONS=1, VALUE_FORMAT='JSON');")
    expect(page.get_by_test_id("results")).to_contain_text("Stream created")
    run(page, f"SET 'auto.offset.reset' = 'earliest';\nSELECT ID, V FROM {stream} EMIT CHANGES;")
    expect(page.get_by_test_id("session")).to_contain_text("SET auto.offset.reset=earliest")
    expect(page.locator("table.rows thead th")).to_have_count(2)
    expect(page.get_by_test_id("stop")).to_be_enabled()
    ksql(spark_node, f"INSERT INTO {stream} (ID, V) VALUES (7, 'arrived');")
    expect(page.locator("table.rows tbody tr")).to_have_count(1)
    expect(page.locator("table.rows tbody")).to_contain_text("arrived")
    screenshot(page, "push")
    page.get_by_test_id("stop").click()
    expect(page.get_by_test_id("results")).to_contain_text("Stopped after 1 row(s)")
    expect(page.get_by_test_id("stop")).to_be_disabled()
    eventually(lambda: gauge(spark_node, "metastore_push_queries") == 0, 30,
               "Stop to close the push query on the node", interval=0.5)
    page.close()


def run(page: Any, statements: str) -> None:
    page.get_by_test_id("statements").fill(statements)
    page.get_by_test_id("run").click()
