"""INSERT INTO ... VALUES writes its record into the source's topic on the real broker."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Message, TopicPartition

from metastore.catalog.exceptions import QueryError, StatementError, TopicError
from metastore.engine.insert_record import InsertValuesError
from metastore.kafka.admin import Admin
from metastore.server.node import Node
from tests.support.kafka import unique


def _records(consumer: Consumer, expected: int, timeout: float = 10) -> list[Message]:
    found: list[Message] = []
    for _ in range(int(timeout * 10)):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            found.append(message)
        if len(found) >= expected and message is None:
            break
    return found


def test_insert_values_writes_key_value_and_rowtime(
        node_factory: Callable[..., Node], consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    topic = unique("iv-json")
    node.execute(f"CREATE STREAM S (ID INT KEY, NAME STRING, AMOUNT DECIMAL(4, 2)) WITH "
                 f"(KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    answered = node.execute("INSERT INTO S (ID, NAME, AMOUNT, ROWTIME) VALUES (7, 'a', 1.5, 1234);"
                            "INSERT INTO S VALUES (8, 'b', NULL);")
    assert answered == []  # ksqlDB answers INSERT VALUES with no entity
    records = _records(consumer_factory(topic), 2)
    assert [r.key() for r in records] == [struct.pack(">i", 7), struct.pack(">i", 8)]
    assert json.loads(records[0].value()) == {"NAME": "a", "AMOUNT": 1.5}
    assert b'"AMOUNT":1.50' in records[0].value()
    assert records[0].timestamp()[1] == 1234
    assert json.loads(records[1].value()) == {"NAME": "b", "AMOUNT": None}


def _java_partition(key: bytes, partitions: int) -> int:
    """Kafka's Java producer's partition of a keyed record: murmur2 of the key (Utils.murmur2)."""
    m, h = 0x5BD1E995, (0x9747B28C ^ len(key)) & 0xFFFFFFFF
    for start in range(0, len(key) - len(key) % 4, 4):
        k = (int.from_bytes(key[start:start + 4], "little") * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[len(key) - len(key) % 4:]
    if tail:
        for shift, byte in reversed(list(enumerate(tail))):
            h ^= byte << (8 * shift)
        h = (h * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    return ((h ^ (h >> 15)) & 0x7FFFFFFF) % partitions


def test_a_keys_records_go_to_the_partition_javas_producers_choose(
        node_factory: Callable[..., Node], consumer_factory: Callable[..., Consumer]) -> None:
    """As ksqlDB's INSERT VALUES and the queries' sinks: a key's records all in one partition."""
    node = node_factory()
    topic = unique("iv-partitions")
    node.execute(f"CREATE STREAM P (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='JSON', PARTITIONS=4);")
    node.execute("".join(f"INSERT INTO P VALUES ({key}, 'v');" for key in range(1, 9)))
    consumer = consumer_factory(topic)
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(4)])
    records = _records(consumer, 8)
    assert len(records) == 8
    assert {r.key(): r.partition() for r in records} == {
        struct.pack(">i", key): partition
        for key, partition in zip(range(1, 9), [0, 3, 3, 3, 2, 3, 3, 2], strict=True)}
    assert all(r.partition() == _java_partition(r.key(), 4) for r in records)


def test_delimited_and_kafka_values(node_factory: Callable[..., Node],
                                    consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    delimited, kafka = unique("iv-delimited"), unique("iv-kafka")
    node.execute(f"CREATE STREAM D (K STRING KEY, A INT, B STRING, C BOOLEAN) WITH "
                 f"(KAFKA_TOPIC='{delimited}', VALUE_FORMAT='DELIMITED', PARTITIONS=1);"
                 f"CREATE TABLE T (K BIGINT PRIMARY KEY, V DOUBLE) WITH "
                 f"(KAFKA_TOPIC='{kafka}', VALUE_FORMAT='KAFKA', PARTITIONS=1);")
    node.execute("INSERT INTO D VALUES ('k1', 1, 'x,y', true);"
                 "INSERT INTO T (K, V) VALUES (5, 2);")
    (row,) = _records(consumer_factory(delimited), 1)
    assert (row.key(), row.value()) == (b"k1", b'1,"x,y",true')
    (kv,) = _records(consumer_factory(kafka), 1)
    assert (kv.key(), kv.value()) == (struct.pack(">q", 5), struct.pack(">d", 2.0))


def test_a_value_of_the_wrong_type_writes_nothing(
        node_factory: Callable[..., Node], consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    topic = unique("iv-bad")
    node.execute(f"CREATE STREAM B (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='JSON', PARTITIONS=1);")
    with pytest.raises(QueryError, match=r"Failed to insert values into 'B'\. Expected type "
                                         r"INTEGER for field `V` but got STRING\(x\)"):
        node.execute("INSERT INTO B (ID, V) VALUES (1, 'x');")
    assert _records(consumer_factory(topic), 1, timeout=2) == []


def test_a_request_with_a_failing_statement_writes_no_record(
        node_factory: Callable[..., Node], consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    topic, other = unique("iv-atomic"), unique("iv-atomic-created")
    node.execute(f"CREATE STREAM B (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='JSON', PARTITIONS=1);")
    with pytest.raises(QueryError, match="Expected type INTEGER for field `V`"):
        node.execute("INSERT INTO B (ID, V) VALUES (1, 2); INSERT INTO B (ID, V) VALUES (1, 'x');")
    with pytest.raises(StatementError):
        node.execute("INSERT INTO B (ID, V) VALUES (1, 2); DESCRIBE NOSUCH;")
    with pytest.raises(QueryError, match="Expected type INTEGER for field `V`"):
        node.execute(f"CREATE STREAM C (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{other}', "
                     "VALUE_FORMAT='JSON', PARTITIONS=1); INSERT INTO B (ID, V) VALUES (1, 2);"
                     "INSERT INTO C (ID, V) VALUES (1, 'x');")
    assert _records(consumer_factory(topic), 1, timeout=2) == []
    assert "C" not in node.replica.image.sources


def test_schema_registry_formats_are_refused(node_factory: Callable[..., Node],
                                            consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    topic = unique("iv-avro")
    node.execute(f"CREATE STREAM A (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='AVRO', PARTITIONS=1);")
    with pytest.raises(InsertValuesError, match="AVRO format needs a Schema Registry"):
        node.execute("INSERT INTO A (ID, V) VALUES (1, 2);")
    assert _records(consumer_factory(topic), 1, timeout=2) == []


def test_a_read_only_topic_is_refused(node_factory: Callable[..., Node],
                                      kafka_admin: Admin,
                                      consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    topic = unique("_confluent-iv")
    kafka_admin.create(topic, 1)
    node.execute(f"CREATE STREAM R (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
                 "VALUE_FORMAT='JSON');")
    with pytest.raises(TopicError, match=f"Cannot insert values into read-only topic: {topic}"):
        node.execute("INSERT INTO R (ID, V) VALUES (1, 2);")
    assert _records(consumer_factory(topic), 1, timeout=2) == []


def test_create_then_insert_in_one_request(node_factory: Callable[..., Node],
                                           consumer_factory: Callable[..., Consumer]) -> None:
    node = node_factory()
    topic = unique("iv-mixed")
    answered = node.execute(f"CREATE STREAM M (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
                            "VALUE_FORMAT='JSON', PARTITIONS=1);"
                            "INSERT INTO M (ID, V) VALUES (1, 2);"
                            "CREATE STREAM M2 AS SELECT * FROM M;")
    assert [e["commandId"] for e in answered] == ["stream/M/create", "stream/M2/create"]
    (record,) = _records(consumer_factory(topic), 1)
    assert json.loads(record.value()) == {"V": 2}
    with pytest.raises(StatementError):
        node.execute("INSERT INTO M (ID, V) VALUES (1, 2, 3);")
