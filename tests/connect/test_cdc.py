"""The change-data-capture walkthrough end to end on real parts: a PostgreSQL server, Debezium's
connector on a Kafka Connect worker, the broker, and a node's Spark. Rows inserted, updated and
deleted in PostgreSQL reach the table over the change topic, and the CTAS counting them per
country follows, as pull queries see it."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from metastore.dev.cdc import CHANGES, FIRST_COUNTS, Walkthrough
from metastore.dev.connect_worker import ConnectState
from metastore.dev.postgres import PostgresState
from tests.support.kafka import unique
from tests.support.servers import ServerProcess


def test_the_cdc_walkthrough_follows_inserts_updates_and_deletes(
        connect_worker: ConnectState, postgres: PostgresState,
        server_factory: Callable[..., ServerProcess]) -> None:
    """A node of its own (Spark and Connect, as `metastore dev up --connect` makes them), so
    that the Connect tests stay one unit of the schedule apart from the shared Spark node's."""
    node = server_factory("--connect-url", connect_worker.url, spark=True)
    walkthrough = Walkthrough(postgres, node.url, node.url, prefix=unique("cdc"),
                              say=lambda _: None, timeout=420)  # the node's Spark starts too
    try:
        walkthrough.run()
    finally:
        httpx.post(f"{node.url}/ksql", timeout=60, json={
            "ksql": f"DROP CONNECTOR IF EXISTS {walkthrough.variables['connector']};"})
    assert walkthrough.counts_seen == [FIRST_COUNTS, *(counts for _, _, counts in CHANGES)]
    [described] = httpx.post(f"{node.url}/ksql", timeout=60, json={
        "ksql": f"DESCRIBE {walkthrough.variables['table']};"}).json()
    assert described["sourceDescription"]["topic"] == f"{walkthrough.prefix}.public.customers"
