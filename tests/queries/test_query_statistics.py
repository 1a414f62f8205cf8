"""What a persistent query did, reported where ksqlDB's users look for it, on the suite's Spark
node: after a known number of records, DESCRIBE EXTENDED's ``statistics`` (as ksqlDB prints
them) and ``clusterStatistics`` of the source, the records written and ``queryOffsetSummaries``
of the sink (each source partition read to its end), SHOW QUERIES' records read and lag,
``/metrics``' series labelled by query id (a table aggregation's records written too, which
Spark's batch writer does not count), ``/clusterStatus``' placement of each query and its
state's lag, and ``metastore status``' queries table."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
from confluent_kafka import Producer

from metastore.engine.source_statistics import STATISTICS_NOTICE
from metastore.kafka.admin import Admin
from metastore.kafka.consumer import EndOffsets
from metastore.kafka.settings import KafkaSettings
from metastore.runtime.statistics import RATE_WINDOW_MS
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_skipped_records import earliest
from tests.queries.test_spark_jobs import read_all
from tests.server.test_cli import cli
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

RECORDS = 20


def test_a_querys_figures_reach_describe_show_queries_metrics_and_status(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    name, source = numbered_stream(spark_node, "STATS", partitions=2)
    sink = f"{source}-out"
    send_numbered(producer_factory(), source, range(RECORDS))
    [created] = earliest(spark_node, f"CREATE STREAM {name}_OUT WITH (KAFKA_TOPIC='{sink}') AS "
                                     f"SELECT ID, V FROM {name};")
    query_id = created["commandStatus"]["queryId"]
    assert len(read_all(kafka_settings, sink, RECORDS)) == RECORDS

    listed: dict[str, Any] = {}

    def read_everything() -> bool:
        listed.update(queries(spark_node)[query_id])
        return listed["recordsRead"] == RECORDS and listed["lag"] == 0

    eventually(read_everything, 60, lambda: f"SHOW QUERIES to say {RECORDS} read: {listed}",
               interval=1)
    owner = listed["ownerNode"]

    [described] = ksql(spark_node, f"DESCRIBE {name} EXTENDED;")
    description = described["sourceDescription"]
    assert description["statistics"].startswith(STATISTICS_NOTICE), description["statistics"]
    assert f"consumer-total-messages:{RECORDS:>10} " in description["statistics"]
    rate = round(RECORDS * 1000 / RATE_WINDOW_MS, 2)  # all 20 in the window, if it holds them
    shown = re.search(r"consumer-messages-per-sec: *([0-9.]+) ", description["statistics"])
    assert shown is not None and 0 < float(shown.group(1)) <= rate, description["statistics"]
    assert "    last-message: 20" in description["statistics"], "an ISO-8601 UTC time"
    host_port = urlsplit(spark_node.url).netloc  # as ksqlDB names hosts
    assert {"name": "consumer-total-messages", "host": host_port, "value": float(RECORDS)} in [
        {k: v for k, v in stat.items() if k != "timestamp"}
        for stat in description["clusterStatistics"]]
    assert description["errorStats"] == "" and description["clusterErrorStats"] == []

    [written] = ksql(spark_node, f"DESCRIBE {name}_OUT EXTENDED;")
    assert f"  total-messages:{RECORDS:>10} " in written["sourceDescription"]["statistics"], (
        "Spark's Kafka sink counts what the query wrote")
    [summary] = written["sourceDescription"]["queryOffsetSummaries"]
    assert summary["groupId"] == query_id
    [topic] = summary["topicSummaries"]
    assert topic["kafkaTopic"] == source
    assert [p["partition"] for p in topic["offsets"]] == [0, 1]
    assert all(p["consumerOffset"] == p["logEndOffset"] for p in topic["offsets"])
    assert sum(p["logEndOffset"] - p["logStartOffset"] for p in topic["offsets"]) == RECORDS

    metrics = httpx.get(f"{spark_node.url}/metrics", timeout=10).text
    label = f'{{query_id="{query_id}"}}'
    assert f"metastore_query_records_in_total{label} {float(RECORDS)}" in metrics
    exported = re.search(rf"metastore_query_records_in_per_second{re.escape(label)} ([0-9.]+)",
                         metrics)
    assert exported is not None and 0 < float(exported.group(1)) <= rate, metrics
    assert f"metastore_query_records_out_total{label} {float(RECORDS)}" in metrics
    sent = re.search(rf"metastore_query_records_out_per_second{re.escape(label)} ([0-9.]+)",
                     metrics)
    assert sent is not None and 0 < float(sent.group(1)) <= rate, metrics
    assert f"metastore_query_lag{label} 0.0" in metrics
    assert f"metastore_query_up{label} 1.0" in metrics
    assert f"metastore_query_batch_duration_seconds{label} " in metrics

    [counting] = earliest(spark_node, f"CREATE TABLE {name}_N AS SELECT ID, COUNT(*) AS N "
                                      f"FROM {name} GROUP BY ID;")
    counter = counting["commandStatus"]["queryId"]
    host: dict[str, Any] = {}

    def counted_everything() -> bool:
        cluster = httpx.get(f"{spark_node.url}/clusterStatus", timeout=10).json()
        host.update(next(h for h in cluster["clusterStatus"].values()
                         if h["nodeId"] == owner))
        lags = host["hostStoreLags"]["stateStoreLags"].get(f"{counter}#state")
        return lags is not None and sum(
            p["endOffsetPosition"] for p in lags["lagByPartition"].values()) == RECORDS and all(
                p["offsetLag"] == 0 for p in lags["lagByPartition"].values())

    eventually(counted_everything, 60, lambda: f"the count's store lag in /clusterStatus: {host}",
               interval=1)
    placed = host["activeStandbyPerQuery"]
    assert placed[counter]["activeStores"] == ["state"], "an aggregation keeps state"
    assert placed[query_id]["activeStores"] == [], "a projection keeps none"
    assert placed[query_id]["activePartitions"] == [{"topic": source, "partition": 0},
                                                    {"topic": source, "partition": 1}]

    _a_table_aggregation_counts_what_it_writes(spark_node, kafka_settings, f"{name}_N")

    status = cli("status", "--server", spark_node.url)
    assert status.returncode == 0, status.stderr
    [row] = [line for line in status.stdout.splitlines() if query_id in line]
    assert "RUNNING" in row and f" {RECORDS} " in row, status.stdout


def _a_table_aggregation_counts_what_it_writes(server: ServerProcess, settings: KafkaSettings,
                                              table: str) -> None:
    """An aggregation of a table writes each micro-batch from its batch stage with Spark's
    Kafka batch writer, which counts nothing: the node counts what it hands that writer."""
    [created] = earliest(server, f"CREATE TABLE {table}_BY_N AS SELECT N, COUNT(*) AS C FROM "
                                 f"{table} GROUP BY N;")
    query_id = created["commandStatus"]["queryId"]
    [described] = ksql(server, f"DESCRIBE {table}_BY_N;")
    sink = described["sourceDescription"]["topic"]

    def written_and_counted() -> tuple[int, int] | None:
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        found = re.search(rf'metastore_query_records_out_total{{query_id="{query_id}"}} '
                          r"([0-9.]+)", metrics)
        counted, written = (int(float(found.group(1))) if found else -1), _records_in(
            settings, sink)
        return (counted, written) if counted == written > 0 else None

    eventually(written_and_counted, 60, f"{query_id} to count the records it wrote",
               interval=1)


def _records_in(settings: KafkaSettings, topic: str) -> int:
    """The records a topic written without transactions holds, over its partitions."""
    info = Admin(settings).describe(topic)
    assert info is not None, topic
    offsets = EndOffsets(settings, group_id=unique("count"), committed=False)
    try:
        marks = offsets.watermarks((topic, p) for p in range(info.partitions))
    finally:
        offsets.close()
    return sum(high - low for low, high in marks.values())


def numbered_stream(server: ServerProcess, prefix: str, partitions: int = 1) -> tuple[str, str]:
    """A new stream ``(ID INT KEY, V INT)`` over a JSON topic of its own: its name and topic."""
    name = unique(prefix).upper().replace("-", "_")
    ksql(server, f"CREATE STREAM {name} (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                 f"VALUE_FORMAT='JSON', PARTITIONS={partitions});")
    return name, name.lower()


def send_numbered(producer: Producer, topic: str, numbers: range) -> None:
    """A record of each number: its ID key and its V value."""
    for i in numbers:
        producer.produce(topic, key=struct.pack(">i", i), value=json.dumps({"V": i}))
    assert producer.flush(30) == 0

