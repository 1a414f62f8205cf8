"""What the cluster tests of persistent queries ask of a cluster of node processes: where a
query runs (SHOW QUERIES on a node), and a topic read to its end ``read_committed``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from integration.conftest import Cluster
from metastore.kafka.settings import KafkaSettings
from tests.support.waiting import eventually

ClusterFactory = Callable[..., Cluster]


def show_queries(cluster: Cluster, node: str) -> dict[str, dict[str, Any]]:
    response = cluster.ksql(node, "SHOW QUERIES;")
    assert response.status_code == 200, response.text
    return {q["id"]: q for q in response.json()[0]["queries"]}


def wait_owner(cluster: Cluster, ask: str, query_id: str, timeout: float,
               not_owner: str | None = None) -> str:
    seen: dict[str, Any] = {}

    def new_owner() -> str | None:
        nonlocal seen
        seen = show_queries(cluster, ask).get(query_id, {})
        owner = seen.get("ownerNode")
        return str(owner) if seen.get("state") == "RUNNING" and owner and owner != not_owner else None

    return eventually(new_owner, timeout, lambda: f"{query_id} RUNNING on a new owner: {seen}",
                      interval=0.5)


def wait_owned_by(cluster: Cluster, node: str, query_id: str, timeout: float) -> None:
    seen: dict[str, Any] = {}

    def owned() -> bool:
        nonlocal seen
        seen = show_queries(cluster, node).get(query_id, {})
        return seen.get("state") == "RUNNING" and seen.get("ownerNode") == node

    eventually(owned, timeout, lambda: f"{query_id} RUNNING on {node}: {seen}", interval=0.5)


WINDOW_BASE_MS = int(time.time() * 1000) // 3_600_000 * 3_600_000
"""The start of the current hour: every record of the windowed test falls in that one TUMBLING
window. Not an older time: the windowed table's topic deletes records past the window's
retention (compact,delete, as ksqlDB creates it), so records years old would be gone."""


def latest_by_key(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    """A table's topic read to its end, read_committed: the latest value of each key."""
    latest: dict[bytes, bytes | None] = {}
    for message in read_to_end(bootstrap, topic):
        latest[bytes(message.key() or b"")] = message.value()
    return latest


def read_to_end(bootstrap: str, topic: str, timeout: float = 60) -> list[Message]:
    """Every record of ``topic`` up to its end offsets now, read_committed, from assigned
    partitions (no consumer group to join, whatever the load)."""
    consumer = Consumer(KafkaSettings(bootstrap).config(
        group_id=f"check-{uuid.uuid4().hex[:8]}", enable_auto_commit=False,
        isolation_level="read_committed"))
    out: list[Message] = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])

        def read_to_the_ends() -> bool:
            if not pending:
                return True
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    out.append(message)
                    partition, offset = message.partition(), message.offset()
                    if partition is not None and offset is not None and (
                            offset >= ends[partition] - 1):
                        pending.discard(partition)
            for position in consumer.position([TopicPartition(topic, p) for p in pending]):
                if position.offset >= ends[position.partition]:
                    pending.discard(position.partition)
            return False

        eventually(read_to_the_ends, timeout,
                   lambda: f"{topic} read to its ends, partitions {sorted(pending)} not",
                   interval=0)
    finally:
        consumer.close()
    return out
