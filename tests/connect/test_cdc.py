"""The change-data-capture walkthrough end to end on real parts: a PostgreSQL server, Debezium's
connector on a Kafka Connect worker, the broker, and a node's Spark. Rows inserted, updated and
deleted in PostgreSQL reach the table over the change topic, and the CTAS counting them per
country follows, as pull queries see it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import expect

from metastore.dev.cdc import CHANGES, FIRST_COUNTS, Walkthrough
from metastore.dev.connect_worker import ConnectState
from metastore.dev.postgres import PostgresState
from tests.support.browser import screenshot
from tests.support.kafka import unique
from tests.support.servers import ServerProcess


def test_the_cdc_walkthrough_follows_inserts_updates_and_deletes(
        connect_worker: ConnectState, postgres: PostgresState,
        server_factory: Callable[..., ServerProcess], browser: Any) -> None:
    """A node of its own (Spark and Connect, as `metastore dev up --connect` makes them), so
    that the Connect tests stay one unit of the schedule apart from the shared Spark node's."""
    node = server_factory("--connect-url", connect_worker.url, spark=True)
    walkthrough = Walkthrough(postgres, node.url, node.url, prefix=unique("cdc"),
                              say=lambda _: None, timeout=420)  # the node's Spark starts too
    try:
        walkthrough.run()
        _the_console_draws_the_connector(browser, node.url, walkthrough)
    finally:
        httpx.post(f"{node.url}/ksql", timeout=60, json={
            "ksql": f"DROP CONNECTOR IF EXISTS {walkthrough.variables['connector']};"})
    assert walkthrough.counts_seen == [FIRST_COUNTS, *(counts for _, _, counts in CHANGES)]
    [described] = httpx.post(f"{node.url}/ksql", timeout=60, json={
        "ksql": f"DESCRIBE {walkthrough.variables['table']};"}).json()
    assert described["sourceDescription"]["topic"] == f"{walkthrough.prefix}.public.customers"


def _the_console_draws_the_connector(browser: Any, url: str, walkthrough: Walkthrough) -> None:
    """The lineage graph shows Debezium's connector feeding the change topic, which feeds the
    table."""
    connector = walkthrough.variables["connector"]
    topic = f"{walkthrough.prefix}.public.customers"
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.set_default_timeout(60_000)
        page.goto(f"{url}/console/#lineage")
        box = page.locator(f'#graph g[data-id="connector:{connector}"]')
        expect(box).to_have_count(1)
        assert box.bounding_box()["x"] < page.locator(
            f'#graph g[data-id="topic:{topic}"]').bounding_box()["x"], "the connector feeds it"
        box.click()
        expect(page.get_by_test_id("details")).to_contain_text(topic)
        screenshot(page, "connector")
    finally:
        page.close()
