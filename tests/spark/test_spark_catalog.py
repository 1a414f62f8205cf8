"""Every node's Spark catalog, with real Kafka and a real Spark per node process."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from tests.support.kafka import unique
from tests.support.servers import ServerProcess, gauge
from tests.support.waiting import eventually

ServerFactory = Callable[..., ServerProcess]


def ksql(server: ServerProcess, text: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=120)
    assert response.status_code == 200, response.text
    return list(response.json())


def query(server: ServerProcess, text: str) -> tuple[str, list[list[Any]]]:
    """A pull query's schema and rows; asked again after a 408: a node's first Spark jobs,
    on a machine running the whole suite, can outlast the 30 s a pull query may take."""
    for _ in range(3):
        response = httpx.post(f"{server.url}/query", json={"ksql": text}, timeout=120)
        if response.status_code != 408:
            break
    assert response.status_code == 200, response.text
    header, *rows = response.json()
    return header["header"]["schema"], sorted(row["row"]["columns"] for row in rows)


def metastore_status(server: ServerProcess) -> dict[str, Any]:
    return dict(httpx.get(f"{server.url}/v1/metastore", timeout=30).json())


def wait_in_sync(server: ServerProcess, timeout: float = 120) -> dict[str, Any]:
    return eventually(
        lambda: (status := metastore_status(server))["sparkInSync"] and status, timeout,
        lambda: f"Spark in sync, now {metastore_status(server)}\n{server.output()[-3000:]}",
        interval=0.3)


def key(value: int) -> bytes:
    return struct.pack(">i", value)


def test_streams_and_tables_are_queryable_and_follow_the_catalog(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer]) -> None:
    node = spark_node
    clicks, users, raw = unique("clicks"), unique("users"), unique("raw")
    ksql(node, f"""
        CREATE STREAM CLICKS (ID INT KEY, URL STRING, N INT)
            WITH (KAFKA_TOPIC='{clicks}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE SOURCE TABLE USERS (ID INT PRIMARY KEY, NAME STRING)
            WITH (KAFKA_TOPIC='{users}', VALUE_FORMAT='JSON', PARTITIONS=1);
        CREATE STREAM RAW (ID INT KEY, A STRING, B DOUBLE)
            WITH (KAFKA_TOPIC='{raw}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);
    """)
    plain = producer_factory()
    plain.produce(clicks, key=key(1), value=json.dumps({"URL": "/a", "N": 1}))
    plain.produce(clicks, key=key(-2), value=json.dumps({"url": "/b", "n": 2}))
    plain.produce(users, key=key(1), value=json.dumps({"NAME": "alice"}))
    plain.produce(users, key=key(1), value=json.dumps({"NAME": "alicia"}))
    plain.produce(users, key=key(2), value=json.dumps({"NAME": "bob"}))
    plain.produce(users, key=key(2), value=None)
    plain.produce(raw, key=key(7), value=b"x,1.5")
    plain.flush(10)
    aborted = producer_factory(transactional_id=unique("aborting"))
    aborted.init_transactions(10)
    aborted.begin_transaction()
    aborted.produce(clicks, key=key(9), value=json.dumps({"URL": "/aborted", "N": 9}))
    aborted.flush(10)
    aborted.abort_transaction(10)
    wait_in_sync(node)

    schema, rows = query(node, "SELECT * FROM CLICKS;")
    assert schema == "`ID` INTEGER, `URL` STRING, `N` INTEGER"
    assert rows == [[-2, "/b", 2], [1, "/a", 1]], "aborted records never show up"
    assert query(node, "SELECT * FROM USERS;")[1] == [[1, "alicia"]], "latest per key, no tombstone"
    assert query(node, "SELECT * FROM RAW;")[1] == [[7, "x", 1.5]]
    assert query(node, "SELECT URL, N * 2 AS TWICE FROM CLICKS WHERE N > 1;")[1] == [["/b", 4]]
    joined = httpx.post(f"{node.url}/query", json={
        "ksql": "SELECT C.ID, NAME FROM CLICKS C JOIN USERS U ON C.ID = U.ID;"}, timeout=60)
    assert joined.status_code == 400  # as in ksqlDB, whose pull queries read one source
    assert "Pull queries don't support JOIN clauses" in joined.json()["message"]
    cli = subprocess.run([sys.executable, "-m", "cli.main", "query", "SELECT * FROM USERS;",
                          "--server", node.url], capture_output=True, text=True, timeout=120,
                         check=False)
    assert cli.returncode == 0 and "alicia" in cli.stdout and "1 row(s)" in cli.stdout

    ksql(node, f"DROP STREAM RAW; CREATE STREAM RAW (ID INT KEY, A STRING) WITH "
               f"(KAFKA_TOPIC='{raw}', VALUE_FORMAT='DELIMITED');")
    plain.produce(raw, key=key(8), value=b"y")
    plain.flush(10)
    wait_in_sync(node)
    schema, rows = query(node, "SELECT * FROM RAW;")
    assert schema == "`ID` INTEGER, `A` STRING"
    assert rows == [[8, "y"]], "the record of three fields has one too many for the new columns"
    ksql(node, "DROP STREAM RAW;")
    wait_in_sync(node)
    failed = httpx.post(f"{node.url}/query", json={"ksql": "SELECT * FROM RAW;"}, timeout=60)
    assert failed.status_code == 400 and "RAW does not exist" in failed.json()["message"]
    with httpx.stream("POST", f"{node.url}/query", timeout=120,
                      json={"ksql": "SELECT * FROM CLICKS EMIT CHANGES;"}) as push:
        assert push.status_code == 200  # a push query streams (tests/queries/test_push_queries)
        header = next(line for line in push.iter_lines() if line.strip())
        assert json.loads(header.lstrip("[").rstrip(","))["header"]["queryId"].startswith(
            "transient_CLICKS_")


def test_restart_after_200_statements_reconciles_in_one_pass(server_factory: ServerFactory) -> None:
    writer = server_factory(node_id="writer")
    topic = unique("many")
    ksql(writer, f"CREATE STREAM BASE (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='JSON', PARTITIONS=1);")
    for batch in range(0, 199, 50):
        statements = "".join(
            f"CREATE STREAM S{i} (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
            "VALUE_FORMAT='JSON');" for i in range(batch, min(batch + 50, 199)))
        ksql(writer, statements)
    node = server_factory(service_id=writer.service_id, node_id="restarted", spark=True)
    status = wait_in_sync(node)
    assert status["appliedOffset"] >= 199
    assert gauge(node, "metastore_spark_reconcile_passes_total") == 1
    calls = gauge(node, "metastore_spark_catalog_calls_total")
    # the database, one read, the templates (created, read and dropped: 8), the tables and
    # the views (a call each), one read back: nothing per command replayed, nor per object
    assert calls == 1 + 1 + 8 + 2 + 1, calls


def test_a_restart_whose_catalog_matches_makes_no_spark_catalog_calls_and_a_new_node_agrees(
        server_factory: ServerFactory, producer_factory: Callable[..., Producer],
        tmp_path: Path) -> None:
    """A node restarted over its persistent catalog calls Spark's catalog for nothing, then
    for what it applies live; a node that joins later and replays the whole log has the same
    Spark catalog fingerprint, whichever node wrote which statement."""
    directory = tmp_path / "kept-node"
    node = server_factory(spark=True, persistent=True, data_dir=directory)
    topic = unique("kept")
    ksql(node, f"CREATE STREAM KEPT (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
               "VALUE_FORMAT='JSON', PARTITIONS=1);"  # a table's view beside a stream's
               f"CREATE TABLE KEPT_TABLE (ID INT PRIMARY KEY, V STRING) WITH (KAFKA_TOPIC="
               f"'{topic}', VALUE_FORMAT='JSON');")
    plain = producer_factory()
    plain.produce(topic, key=key(1), value=json.dumps({"V": "kept"}).encode())
    plain.flush(10)
    before = wait_in_sync(node)
    assert before["sparkCatalogCalls"] > 0
    node.stop()

    restarted = server_factory(spark=True, persistent=True, data_dir=directory,
                               service_id=node.service_id)
    after = wait_in_sync(restarted)
    assert after["sparkCatalogCalls"] == 0, after
    assert after["sparkCatalogFingerprint"] == before["sparkCatalogFingerprint"]
    assert after["startup"]["resumedFrom"] is not None

    def kept_rows() -> list[list[Any]] | None:
        try:
            return query(restarted, "SELECT * FROM KEPT;")[1]
        except AssertionError as refused:  # the new JVM's first Spark job may pass the
            if "40800" in str(refused):  # 30 s pull limit on a loaded machine
                return None
            raise

    rows = eventually(kept_rows, 150, "KEPT's rows from Spark", interval=0)
    assert rows == [[1, "kept"]]  # the objects are really in Spark's catalog

    joined = server_factory(service_id=node.service_id, node_id="joined", spark=True)
    ksql(joined, f"CREATE STREAM LATER (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='DELIMITED');")
    eventually(lambda: metastore_status(restarted)["sparkCatalogCalls"] != 0, 60,
               "the Spark catalog calls for LATER")
    # the templates (8), the table and the view, one read back
    assert wait_in_sync(restarted)["sparkCatalogCalls"] == 8 + 2 + 1

    def same_image() -> tuple[dict[str, Any], dict[str, Any]] | None:
        one, two = wait_in_sync(restarted), wait_in_sync(joined)
        return (one, two) if one["imageFingerprint"] == two["imageFingerprint"] else None

    one, two = eventually(same_image, 60, "both nodes to apply the same image", interval=0)
    assert one["sparkCatalogFingerprint"] == two["sparkCatalogFingerprint"] is not None
