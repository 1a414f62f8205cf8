"""Exactly-once persistent queries (``processing.guarantee``), on the real broker and Spark.

The sink's protocol through the JVM class a query calls (``TransactionalSink``): each
micro-batch's records in one Kafka transaction with the micro-batch's id; a micro-batch Spark
runs again (after a crash, on this node or another) is skipped; a producer that starts fences a
zombie of the query, aborts what it left open (records, and a mark it sent but did not commit),
and the zombie cannot commit late. Then a node's query asked for ``exactly_once_v2`` writes its
sink in transactions, with its micro-batches marked, where an at-least-once query does not, and
a query downstream reads that sink to its end.
"""

from __future__ import annotations

import json
import re
import struct
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from metastore.kafka.consumer import EndOffsets
from metastore.kafka.settings import KafkaSettings
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_spark_jobs import read_all
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

CHECKPOINT = "6f1c2d0e-checkpoint"
"""The id of the query's Spark checkpoint its marks name."""
ROWS = "key BINARY, value STRING, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"


def _sink(spark: Any) -> Any:
    return spark.sparkContext._jvm.io.metastore.kafka.TransactionalSink


def _rows(spark: Any, *values: str) -> Any:
    """Rows as a plan's sink SQL gives them: a binary key, a string value (JSON's), headers."""
    return spark.createDataFrame([(v.encode(), v, [("h", b"1")]) for v in values], ROWS)._jdf


def _values(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[bytes]:
    """Every record of ``topic`` a consumer with ``isolation`` sees now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("check"),
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    found: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                error = message.error()
                if error is None:
                    found.append(message.value() or b"")
                elif error.code() == error._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
    finally:
        consumer.close()
    return sorted(found)


@pytest.fixture
def sink_topic(topic_factory: Callable[..., str]) -> str:
    return topic_factory(partitions=2)


def test_a_micro_batch_is_written_once_with_its_id(spark: Any, kafka_bootstrap: str,
                                                   sink_topic: str) -> None:
    sink, config, query = _sink(spark), {"bootstrap.servers": kafka_bootstrap}, unique("eos")
    assert sink.write(_rows(spark, "a", "b"), config, sink_topic, query, CHECKPOINT, 0) == 2
    assert sink.write(_rows(spark, "a", "b"), config, sink_topic, query, CHECKPOINT, 0) == -1, (
        "Spark runs a micro-batch again after a crash: it is written already")
    sink.close(query)  # another node takes the query over: its producer reads the mark
    assert sink.write(_rows(spark, "a", "b"), config, sink_topic, query, CHECKPOINT, 0) == -1
    assert sink.write(_rows(spark, "c"), config, sink_topic, query, CHECKPOINT, 1) == 1
    assert sink.write(_rows(spark), config, sink_topic, query, CHECKPOINT, 2) == 0, "empty"
    assert sink.committed(config, sink_topic, query, CHECKPOINT) == 3
    assert _values(kafka_bootstrap, sink_topic) == [b"a", b"b", b"c"]
    sink.close(query)  # the query's checkpoint starts over: its micro-batch ids from 0 again
    assert sink.committed(config, sink_topic, query, "another checkpoint") == 0
    assert sink.write(_rows(spark, "d"), config, sink_topic, query, "another checkpoint", 0) == 1
    assert _values(kafka_bootstrap, sink_topic) == [b"a", b"b", b"c", b"d"]
    sink.close(query)


def test_a_zombie_is_fenced_and_what_it_left_open_is_aborted(spark: Any, kafka_bootstrap: str,
                                                             sink_topic: str) -> None:
    sink, config, query = _sink(spark), {"bootstrap.servers": kafka_bootstrap}, unique("eos")
    zombie = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": query})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(sink_topic, key=b"z", value=b"zombie", partition=1)
    zombie.flush(30)
    group = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": query})
    zombie.send_offsets_to_transaction([TopicPartition(sink_topic, 0, 6, CHECKPOINT)],  # 0 to 5
                                       group.consumer_group_metadata(), 30)
    group.close()
    assert sink.write(_rows(spark, "a"), config, sink_topic, query, CHECKPOINT, 0) == 1, (
        "the mark the zombie sent was never committed: micro-batch 0 is written")
    with pytest.raises(KafkaException, match=r"(?i)fenced|epoch"):
        zombie.commit_transaction(30)  # late: a newer producer of the query started
    assert _values(kafka_bootstrap, sink_topic) == [b"a"]
    assert b"zombie" in _values(kafka_bootstrap, sink_topic, "read_uncommitted"), (
        "the zombie's record is in the log, aborted")
    assert sink.committed(config, sink_topic, query, CHECKPOINT) == 1
    sink.close(query)


def _end_offset(bootstrap: str, topic: str) -> int:
    """The end offset of ``topic``'s partition 0: its records and transaction markers."""
    ends = EndOffsets(KafkaSettings(bootstrap), unique("ends"), committed=False)
    try:
        return ends.end_offset(topic)
    finally:
        ends.close()


def _marks(bootstrap: str, group: str, topic: str) -> int | None:
    """The micro-batch mark the exactly-once query of ``group`` committed, or None."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]).values()
    [mark] = future.result(10).topic_partitions
    return mark.offset if mark.offset >= 0 else None


def test_a_query_asked_for_exactly_once_writes_its_sink_in_transactions(
        spark_node: ServerProcess, kafka_bootstrap: str, kafka_settings: KafkaSettings,
        producer_factory: Callable[..., Producer]) -> None:
    source, once, twice = unique("src"), unique("once"), unique("least")
    ksql(spark_node, f"CREATE STREAM EOS_SRC (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{source}', "
                     "VALUE_FORMAT='JSON', PARTITIONS=1);")
    response = _ksql_with(spark_node, f"CREATE STREAM EOS_ONCE WITH (KAFKA_TOPIC='{once}', "
                                      "PARTITIONS=1) AS SELECT ID, V FROM EOS_SRC;",
                          {"processing.guarantee": "exactly_once_v2"})
    query_id = response[0]["commandStatus"]["queryId"]
    ksql(spark_node, f"CREATE STREAM EOS_LEAST WITH (KAFKA_TOPIC='{twice}', PARTITIONS=1) AS "
                     "SELECT ID, V FROM EOS_SRC;")
    producer = producer_factory()
    for i in range(10):
        producer.produce(source, key=struct.pack(">i", i), value=json.dumps({"V": i}))
    producer.flush(10)
    for topic in (once, twice):
        assert sorted(json.loads(v or b"")["V"] for _, v, _ in read_all(
            kafka_settings, topic, 10)) == list(range(10)), [
                (q["id"], q.get("state")) for q in queries(spark_node).values()]
    for sink, guarantee in (("EOS_ONCE", "exactly_once_v2"), ("EOS_LEAST", "at_least_once")):
        [described] = ksql(spark_node, f"DESCRIBE {sink} EXTENDED;")
        [writer] = described["sourceDescription"]["writeQueries"]
        assert writer["processingGuarantee"] == guarantee, writer
    service = spark_node.service_id
    eventually(lambda: _marks(kafka_bootstrap, f"{service}-query-{query_id}", once), 30,
               "the exactly-once query's micro-batches to be marked")
    assert _end_offset(kafka_bootstrap, once) > 10, "commit markers follow the records"
    assert _end_offset(kafka_bootstrap, twice) == 10, "no transactions: no markers"
    eventually(lambda: _written(spark_node, "EOS_ONCE") == 10, 60,
               lambda: f"DESCRIBE EXTENDED to count the exactly-once writer's 10 records: "
                       f"{_written(spark_node, 'EOS_ONCE')}", interval=1)
    label = f'{{query_id="{query_id}"}}'
    assert f"metastore_query_records_out_total{label} 10.0" in httpx.get(
        f"{spark_node.url}/metrics", timeout=10).text
    downstream = unique("after")
    [created] = ksql(spark_node, f"CREATE STREAM EOS_AFTER WITH (KAFKA_TOPIC='{downstream}', "
                                 "PARTITIONS=1) AS SELECT ID, V * 2 AS W FROM EOS_ONCE;")
    assert sorted(json.loads(v or b"")["W"] for _, v, _ in read_all(
        kafka_settings, downstream, 10)) == [2 * i for i in range(10)], (
            "a query reads what an exactly-once query wrote, past its commit markers")
    after = created["commandStatus"]["queryId"]
    eventually(lambda: queries(spark_node)[after].get("lag") == 0, 60,
               "the downstream query's lag to reach 0: the markers are no records to wait for")


def _written(server: ServerProcess, sink: str) -> int | None:
    """The records DESCRIBE EXTENDED says the queries writing ``sink`` wrote, or None."""
    [described] = ksql(server, f"DESCRIBE {sink} EXTENDED;")
    statistics = described["sourceDescription"]["statistics"]
    found = re.search(r" total-messages: *(\d+) ", statistics)
    return int(found.group(1)) if found else None


def _ksql_with(server: ServerProcess, text: str, properties: dict[str, str]) -> Any:
    response = httpx.post(f"{server.url}/ksql", json={"ksql": text,
                                                     "streamsProperties": properties},
                          timeout=120)
    assert response.status_code == 200, response.text
    return response.json()
