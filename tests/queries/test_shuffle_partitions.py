"""A persistent query's shuffles and state have as many partitions as its sources have (Kafka
Streams' task per source partition), not the session's default: on the suite's Spark node, a
count over a topic of three partitions starts its checkpoint with three, and counts right."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable

from confluent_kafka import Producer

from metastore.kafka.settings import KafkaSettings
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_spark_jobs import read_all
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually


def test_a_querys_state_has_its_sources_partitions(
        spark_node: ServerProcess, topic_factory: Callable[..., str],
        producer_factory: Callable[..., Producer], kafka_settings: KafkaSettings) -> None:
    source, sink = topic_factory(partitions=3), topic_factory(partitions=3)
    name = unique("SHUFFLED").upper().replace("-", "_")
    ksql(spark_node, f"CREATE STREAM {name}_S (ID INT KEY, V STRING) WITH (KAFKA_TOPIC="
                     f"'{source}', VALUE_FORMAT='JSON');"
                     f"CREATE TABLE {name}_C WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, "
                     f"COUNT(*) AS N FROM {name}_S GROUP BY ID;")
    [query_id] = [q for q in queries(spark_node) if q.startswith(f"CTAS_{name}_C")]
    producer = producer_factory()
    for i in range(9):
        producer.produce(source, key=struct.pack(">i", i % 3), partition=i % 3,
                         value=json.dumps({"V": str(i)}))
    producer.flush(10)
    counts: dict[int, int] = {}

    def counted() -> bool:
        for key, value, _ in read_all(kafka_settings, sink, 3, timeout=5):
            counts[struct.unpack(">i", key or b"")[0]] = json.loads(value or b"{}")["N"]
        return counts == {0: 3, 1: 3, 2: 3}

    eventually(counted, 90, lambda: f"every count to be 3: {counts}")
    [first] = (spark_node.log.parent / "data").glob(f"query-checkpoints/**/{query_id}/offsets/0")
    metadata = json.loads(first.read_text().splitlines()[1])
    assert metadata["conf"]["spark.sql.shuffle.partitions"] == "3"
