"""The suite's Kafka: one real broker for the whole run, and factories of topics, clients and
in-process nodes around it.

The broker is Apache Kafka started by the project's launcher, or the cluster named by
KAFKA_BOOTSTRAP_SERVERS (under xdist the root conftest starts one and names it so, for every
worker). If it cannot start, every test that needs it errors: nothing is skipped.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from metastore.dev.kafka_cluster import LocalKafkaCluster
from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.server.node import Node, NodeConfig


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    cluster = LocalKafkaCluster(Path(tmp_path_factory.mktemp("kafka")), brokers=1)
    state = cluster.start()
    try:
        yield state.bootstrap_servers
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_settings(kafka_bootstrap: str) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=kafka_bootstrap)


@pytest.fixture(scope="session")
def kafka_admin(kafka_settings: KafkaSettings) -> Admin:
    return Admin(kafka_settings)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def topic_factory(kafka_admin: Admin) -> Callable[..., str]:
    """Creates a uniquely named topic: ``topic_factory(partitions=1, config=None, prefix=...)``.
    Its records are kept whatever their time (``retention.ms`` -1 unless ``config`` says): tests
    write records of fixed, long past times, which the broker's time retention would delete."""

    def create(partitions: int = 1, config: dict[str, str] | None = None,
               prefix: str = "test") -> str:
        name = unique(prefix)
        kafka_admin.create(name, partitions=partitions,
                           config={"retention.ms": "-1", **(config or {})})
        return name

    return create


@pytest.fixture
def producer_factory(kafka_settings: KafkaSettings) -> Iterator[Callable[..., Producer]]:
    """Raw confluent_kafka producers; ``producer_factory(transactional_id=None, **config)``."""
    created: list[Producer] = []

    def create(transactional_id: str | None = None, **config: object) -> Producer:
        overrides: dict[str, object] = {"linger_ms": 0, **config}
        if transactional_id is not None:
            overrides["transactional_id"] = transactional_id
        producer = Producer(kafka_settings.config(**overrides))
        created.append(producer)
        return producer

    yield create
    for producer in created:
        with contextlib.suppress(KafkaException):  # a fenced producer raises on flush
            producer.flush(1)


@pytest.fixture
def consumer_factory(kafka_settings: KafkaSettings) -> Iterator[Callable[..., Consumer]]:
    """Raw consumers assigned to partition 0 of a topic from the start; read_committed by default."""
    created: list[Consumer] = []

    def create(topic: str, isolation: str = "read_committed", **config: object) -> Consumer:
        consumer = Consumer(kafka_settings.config(
            group_id=unique("test-group"), enable_auto_commit=False,
            auto_offset_reset="earliest", isolation_level=isolation, **config))
        consumer.assign([TopicPartition(topic, 0, 0)])
        created.append(consumer)
        return consumer

    yield create
    for consumer in created:
        consumer.close()


@pytest.fixture
def node_factory(kafka_bootstrap: str) -> Iterator[Callable[..., Node]]:
    """Started nodes on the real broker: ``node_factory(service_id=None, node_id=..., **config)``."""
    created: list[Node] = []

    def create(service_id: str | None = None, node_id: str = "node-1", ready: bool = True,
               **config: Any) -> Node:
        node = Node(NodeConfig(service_id=service_id or unique("svc"),
                               bootstrap_servers=kafka_bootstrap, node_id=node_id, **config))
        node.start()
        created.append(node)
        if ready:
            assert node.replica.wait_ready(60), f"{node_id} did not become READY"
        return node

    yield create
    for node in created:
        node.stop()
