"""The broker behaviour the single-writer protocol relies on, proven on real Apache Kafka."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from metastore.kafka.consumer import PartitionReader
from metastore.kafka.settings import KafkaSettings
from tests.support.kafka import unique
from tests.support.waiting import eventually


def drain(consumer: Consumer, idle_seconds: float = 2.0) -> list[bytes]:
    """Every value the consumer delivers until nothing arrives for ``idle_seconds``."""
    values: list[bytes] = []
    deadline = time.monotonic() + idle_seconds
    while time.monotonic() < deadline:
        for message in consumer.consume(100, 0.2):
            if message.error() is None:
                value = message.value()
                assert value is not None
                values.append(value)
                deadline = time.monotonic() + idle_seconds
    return values


def committed_txn(producer: Producer, topic: str, *values: bytes) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value)
    producer.commit_transaction(10)


def test_read_committed_hides_aborted_transactions(
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        consumer_factory: Callable[..., Consumer]) -> None:
    topic = topic_factory()
    producer = producer_factory(transactional_id=unique("txn"))
    producer.init_transactions(10)
    committed_txn(producer, topic, b"committed-1")
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    producer.flush(10)
    producer.abort_transaction(10)
    committed_txn(producer, topic, b"committed-2")

    assert drain(consumer_factory(topic)) == [b"committed-1", b"committed-2"]
    # The aborted record really reached the log: read_uncommitted sees it.
    assert b"aborted" in drain(consumer_factory(topic, isolation="read_uncommitted"))


def test_zombie_records_are_never_visible_after_reinit(
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        consumer_factory: Callable[..., Consumer]) -> None:
    topic = topic_factory()
    transactional_id = unique("txn")
    zombie = producer_factory(transactional_id=transactional_id)
    zombie.init_transactions(10)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)  # the record is in the log, its transaction still open

    successor = producer_factory(transactional_id=transactional_id)
    successor.init_transactions(10)  # aborts the zombie's open transaction
    committed_txn(successor, topic, b"successor")

    assert drain(consumer_factory(topic)) == [b"successor"]
    assert b"zombie" in drain(consumer_factory(topic, isolation="read_uncommitted"))


def test_fenced_producer_cannot_commit(
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        consumer_factory: Callable[..., Consumer]) -> None:
    topic = topic_factory()
    transactional_id = unique("txn")
    first = producer_factory(transactional_id=transactional_id)
    first.init_transactions(10)
    first.begin_transaction()
    first.produce(topic, value=b"from-first")

    second = producer_factory(transactional_id=transactional_id)
    second.init_transactions(10)

    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(10)
    error = raised.value.args[0]
    assert isinstance(error, KafkaError)
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH)
    committed_txn(second, topic, b"from-second")
    assert drain(consumer_factory(topic)) == [b"from-second"]


def test_reader_detects_end_when_log_ends_with_markers(
        topic_factory: Callable[..., str], producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    topic = topic_factory()
    producer = producer_factory(transactional_id=unique("txn"))
    producer.init_transactions(10)
    committed_txn(producer, topic, b"a", b"b")          # offsets 0,1 + commit marker at 2
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")            # offset 3 + abort marker at 4
    producer.flush(10)
    producer.abort_transaction(10)

    reader = PartitionReader(kafka_settings, topic, group_id=unique("reader"))
    try:
        # the coordinator writes the abort marker after abort_transaction returns: until then
        # the read_committed end stops at the open transaction's first record (3)
        ends: list[int] = []

        def past_the_marker() -> bool:
            ends.append(reader.end_offset())
            return ends[-1] == 5

        eventually(past_the_marker, 15, lambda: f"the end stayed at {ends[-1:]}, not 5")
        end = ends[-1]
        assert set(ends) <= {3, 5}, "the end is the open transaction's start, then past its marker"
        seen: list[bytes | None] = []

        def read_to_the_end() -> bool:
            if reader.position >= end:
                return True
            seen.extend(record.value for record in reader.poll(0.2))
            return False

        eventually(read_to_the_end, 15, lambda: f"the end, stuck at {reader.position} < {end}",
                   interval=0)
        assert seen == [b"a", b"b"]
        assert reader.position == end
    finally:
        reader.close()
