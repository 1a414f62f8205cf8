"""The writer against hostile and unlucky requests, on the real broker: nothing written, nothing
left behind, the lock released, the deadline kept."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from metastore.catalog.exceptions import RequestIdReusedError, TooLargeError, TopicError
from metastore.core.faults import Faults, Flushable
from metastore.core.limits import RequestLimits
from metastore.dev.kafka_cluster import LocalKafkaCluster
from metastore.kafka.admin import Admin
from metastore.kafka.exceptions import KafkaClientError
from metastore.log.exceptions import NotWrittenError
from metastore.log.rewrite import new_topic_id
from metastore.log.writer import WriterOptions
from metastore.server.node import Node, NodeConfig
from tests.broker.test_command_log import committed_values, create_stream, usurp
from tests.support.kafka import unique
from tests.support.waiting import eventually

NodeFactory = Callable[..., Node]


def test_a_request_id_binds_to_its_request(
        node_factory: NodeFactory, consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    node.execute(create_stream("FIRST", unique("first")), request_id="shared-id")
    with pytest.raises(RequestIdReusedError, match="already used for another request"):
        node.execute(create_stream("SECOND", unique("second")), request_id="shared-id")
    assert node.replica.image.source("SECOND") is None
    assert len(committed_values(consumer_factory, node.config.topic)) == 1


def test_a_topic_kafka_refuses_fails_at_once_and_releases_the_lock(
        node_factory: NodeFactory, kafka_admin: Admin) -> None:
    node = node_factory(writer=WriterOptions(request_timeout=20.0))
    existing = unique("collide").replace("-", "_")
    kafka_admin.create(existing, 1)
    colliding = existing.replace("_", ".")  # Kafka refuses names that collide in its metrics
    started = time.monotonic()
    with pytest.raises(TopicError, match=f"Could not create the Kafka topic {colliding}"):
        node.execute(create_stream("COLLIDES", colliding))
    assert time.monotonic() - started < 5
    [entity] = node.execute(create_stream("AFTER", unique("after")))
    assert entity["commandStatus"]["status"] == "SUCCESS"


def refuse_the_transaction(_producer: Flushable) -> None:
    raise KafkaClientError("the broker refuses this transaction", retriable=False)


def test_topics_created_for_a_transaction_that_fails_are_deleted(
        node_factory: NodeFactory, kafka_admin: Admin,
        consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory(faults=Faults(before_commit=refuse_the_transaction))
    topic = unique("orphan")
    with pytest.raises(NotWrittenError, match="refuses this transaction"):
        node.execute(create_stream("ORPHAN", topic))
    assert kafka_admin.describe(topic) is None
    assert committed_values(consumer_factory, node.config.topic) == []


def test_topics_of_attempts_fenced_until_the_deadline_are_deleted(
        node_factory: NodeFactory, kafka_admin: Admin) -> None:
    node = node_factory(writer=WriterOptions(request_timeout=2.0),
                        faults=Faults(before_commit=lambda _producer: usurp(node)))
    topic = unique("fenced")
    with pytest.raises(NotWrittenError, match="NOT written"):
        node.execute(create_stream("FENCED", topic))
    assert kafka_admin.describe(topic) is None


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_the_deadline_covers_the_wait_for_the_write_lock(node_factory: NodeFactory) -> None:
    release = threading.Event()

    def hold(_producer: Flushable) -> None:
        release.wait(30)

    node = node_factory(faults=Faults(before_commit=hold))
    holder = threading.Thread(target=node.execute, args=(create_stream("SLOW", unique("s")),))
    holder.start()
    try:
        time.sleep(0.5)
        started = time.monotonic()
        with pytest.raises(NotWrittenError, match="busy with other writes"):
            node.execute(create_stream("WAITING", unique("w")), timeout=1.0)
        assert time.monotonic() - started < 2.0
    finally:
        release.set()
        holder.join(30)
    assert node.replica.image.source("SLOW") is not None


def test_request_limits_bound_statements_and_responses(node_factory: NodeFactory) -> None:
    node = node_factory(limits=RequestLimits(max_statements=20, max_response_bytes=4000))
    node.execute(" ".join(create_stream(f"S{i}", unique("t")) for i in range(20)))
    with pytest.raises(TooLargeError, match="21 statements; the limit is 20"):
        node.execute("SHOW STREAMS;" * 21)
    with pytest.raises(TooLargeError, match="larger than 4000 bytes"):
        node.execute("SHOW STREAMS;" * 5)
    assert node.execute("SHOW STREAMS;")[0]["@type"] == "streams"


def test_show_topics_hides_internal_topics(node_factory: NodeFactory) -> None:
    node = node_factory()
    topic = unique("visible")
    node.execute(create_stream("VISIBLE", topic))
    [entity] = node.execute("SHOW TOPICS;")
    names = {t["name"] for t in entity["topics"]}
    assert topic in names
    assert not any(name.startswith(("_metastore-", "__")) for name in names)


def test_the_deadline_holds_while_kafka_is_down(tmp_path: Path) -> None:
    """With the only broker gone, a write answers NOT written within its deadline, not after
    every Kafka call's own timeout."""
    broker = LocalKafkaCluster(tmp_path / "outage", brokers=1)
    bootstrap = broker.start(progress=None).bootstrap_servers
    node = Node(NodeConfig(service_id=unique("outage"), bootstrap_servers=bootstrap))
    try:
        node.start()
        assert node.replica.wait_ready(60)
        node.execute(create_stream("BEFORE", unique("before")))
        broker.stop()
        started = time.monotonic()
        with pytest.raises(NotWrittenError, match="NOT written"):
            node.execute(create_stream("DURING", unique("during")), timeout=5.0)
        assert time.monotonic() - started < 7.0
    finally:
        node.stop(checkpoint=False)
        broker.stop()


def commit_other_over(other: Node, topic: str) -> None:
    """Node ``other`` commits a stream over ``topic``, trying again while the writer's id is
    held by the first node's open transaction (under load that can outlast a request)."""
    refusals: list[str] = []

    def committed_over_it() -> bool:
        try:
            other.execute(f"CREATE STREAM OTHER (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
                          "VALUE_FORMAT='JSON');")
        except NotWrittenError as error:
            refusals.append(str(error))
            return False
        return True

    eventually(committed_over_it, 90, lambda: f"the other node's stream, refused: {refusals}")


def test_a_topic_another_node_committed_a_source_over_is_never_deleted(
        node_factory: NodeFactory, kafka_admin: Admin) -> None:
    """Node A creates a topic and fails before committing; meanwhile node B commits a stream
    over that topic: A's clean-up leaves the topic, which B's stream needs."""
    topic = unique("shared")

    def other_uses_it_then_fail(producer: Flushable) -> None:
        commit_other_over(other, topic)
        refuse_the_transaction(producer)

    node = node_factory(faults=Faults(before_commit=other_uses_it_then_fail))
    other = node_factory(service_id=node.config.service_id, node_id="other")
    with pytest.raises(NotWrittenError):
        node.execute(create_stream("MINE", topic))
    assert node.replica.image.source("OTHER") is not None
    assert node.replica.image.source("MINE") is None
    assert kafka_admin.describe(topic) is not None


def test_a_topic_another_node_commits_over_while_it_is_deleted_is_created_again(
        node_factory: NodeFactory, kafka_admin: Admin) -> None:
    """Node A's request fails and A finds the topic it created unused; before A deletes it, node
    B commits a stream over it: once A has deleted it, A creates it again as it was."""
    topic = unique("raced")
    seen: list[tuple[list[str], str]] = []

    def other_commits_over_it(topics: Collection[str]) -> None:
        seen.append((list(topics), kafka_admin.topic_id(topic)))
        commit_other_over(other, topic)

    node = node_factory(faults=Faults(before_commit=refuse_the_transaction,
                                      before_deleting_unused_topics=other_commits_over_it))
    other = node_factory(service_id=node.config.service_id, node_id="other")
    with pytest.raises(NotWrittenError):
        node.execute(f"CREATE STREAM MINE (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
                     "VALUE_FORMAT='JSON', PARTITIONS=3);")
    [(about_to_delete, first_id)] = seen
    assert about_to_delete == [topic]
    assert node.replica.image.source("OTHER") is not None
    assert node.replica.image.source("MINE") is None
    new_topic_id(kafka_admin, topic, first_id, 10)  # past a broker's metadata that lags the create
    restored = kafka_admin.describe(topic)
    assert restored is not None and restored.partitions == 3
