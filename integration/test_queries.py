"""Persistent queries on a cluster of node processes: the owner dies mid-stream, another node
takes the query over from its checkpoint, and the sink has every input record."""

from __future__ import annotations

import json
import signal
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer

from integration.conftest import Cluster
from metastore.kafka.settings import KafkaSettings

ClusterFactory = Callable[..., Cluster]


def show_queries(cluster: Cluster, node: str) -> dict[str, dict[str, Any]]:
    response = cluster.ksql(node, "SHOW QUERIES;")
    assert response.status_code == 200, response.text
    return {q["id"]: q for q in response.json()[0]["queries"]}


def wait_owner(cluster: Cluster, ask: str, query_id: str, timeout: float,
               not_owner: str | None = None) -> str:
    deadline = time.monotonic() + timeout
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = show_queries(cluster, ask).get(query_id, {})
        owner = seen.get("ownerNode")
        if seen.get("state") == "RUNNING" and owner and owner != not_owner:
            return str(owner)
        time.sleep(0.5)
    raise AssertionError(f"{query_id} not RUNNING on a new owner: {seen}")


def sink_records(bootstrap: str, topic: str, seconds: float = 600) -> list[tuple[int, str]]:
    """(ID, source coordinates) of the committed records in ``topic``: all of them, or those
    read within ``seconds``."""
    consumer = Consumer(KafkaSettings(bootstrap).config(
        group_id=f"check-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest",
        enable_auto_commit=False, isolation_level="read_committed"))
    consumer.subscribe([topic])
    out: list[tuple[int, str]] = []
    idle, deadline = 0, time.monotonic() + seconds
    try:
        while idle < 6 and time.monotonic() < deadline:
            batch = consumer.consume(500, 0.5)
            idle = 0 if batch else idle + 1
            for message in batch:
                if message.error() is None:
                    headers = dict(message.headers() or [])
                    out.append((json.loads(message.value())["ID"],
                                headers["metastore.source"].decode()))
    finally:
        consumer.close()
    return out


def test_killing_the_owner_mid_stream_moves_the_query_without_a_gap(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory()
    cluster.up(2, "--spark-master", "local[1]", "--query-session-timeout-ms", "6000")
    source, sink = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    created = cluster.ksql("node-1", f"""
        CREATE STREAM EVENTS (K INT KEY, ID INT, KEEP BOOLEAN)
            WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON', PARTITIONS=2);
        CREATE STREAM KEPT WITH (KAFKA_TOPIC='{sink}', PARTITIONS=1) AS
            SELECT K, ID FROM EVENTS WHERE KEEP EMIT CHANGES;""")
    assert created.status_code == 200, created.text
    query_id = created.json()[1]["commandStatus"]["queryId"]
    owner = wait_owner(cluster, "node-1", query_id, 180)

    total, sent = 900, threading.Event()

    def produce() -> None:
        producer = Producer(KafkaSettings(cluster.bootstrap).config(linger_ms=5))
        for i in range(total):
            producer.produce(source, key=struct.pack(">i", i % 7),
                             value=json.dumps({"ID": i, "KEEP": i % 3 != 0}))
            producer.poll(0)
            time.sleep(0.03)
        producer.flush(30)
        sent.set()

    writer = threading.Thread(target=produce)
    writer.start()
    before, deadline = 0, time.monotonic() + 20
    while before == 0 and time.monotonic() < deadline:  # until the owner is writing output
        time.sleep(2)
        before = len(sink_records(cluster.bootstrap, sink, seconds=3))
    assert before > 0, "the query moves data before its owner dies"
    assert not sent.is_set(), "the owner dies mid-stream"
    assert cluster.nodes.stop_node(owner, signal.SIGKILL)
    survivor = "node-2" if owner == "node-1" else "node-1"
    new_owner = wait_owner(cluster, survivor, query_id, 120, not_owner=owner)
    assert new_owner == survivor
    writer.join(120)
    assert sent.is_set()

    expected = {i for i in range(total) if i % 3 != 0}
    deadline = time.monotonic() + 120
    records: list[tuple[int, str]] = []
    while time.monotonic() < deadline:
        records = sink_records(cluster.bootstrap, sink)
        if {i for i, _ in records} >= expected:
            break
        time.sleep(2)
    ids = Counter(i for i, _ in records)
    assert set(ids) == expected, f"missing after takeover: {sorted(expected - set(ids))[:20]}"
    # at-least-once: a batch cut short by the kill is written again, never a different record
    by_source: dict[str, set[int]] = {}
    for i, coordinates in records:
        by_source.setdefault(coordinates, set()).add(i)
    assert all(len(v) == 1 for v in by_source.values())
    assert len(by_source) == len(expected), "deduplicated by source offset: exactly the input"
    duplicates = sum(ids.values()) - len(ids)
    print(f"\n{len(records)} output records for {len(expected)} inputs, {duplicates} duplicates "
          f"(re-written by the new owner), {before} written before the kill")
    status = show_queries(cluster, survivor)[query_id]
    assert status["state"] == "RUNNING" and status["ownerNode"] == survivor
