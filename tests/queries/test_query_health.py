"""A persistent query that fails, on the suite's Spark node, goes to ERROR with ksqlDB's
QueryError in EXPLAIN and its failure in ``/metrics``, and starts again after its backoff once
the cause is gone, every record written:

- its checkpoint's commit log cannot be written (a disk that refuses writes): its next
  micro-batch fails after writing its records, an UNKNOWN error (no cause the user can fix in a
  statement), which the processing log also has, as ksqlDB's KAFKA_STREAMS_THREAD_ERROR;
- its sink topic takes records of at most 200 bytes and the query's are larger: a USER error
  (RecordTooLargeException), where a producer left to its own batches would split them into
  the same batch forever and the query would hang;
- its sink topic is deleted: a SYSTEM error, as the node's operator classified it, and a
  PRODUCTION_ERROR in the processing log, until the topic is back."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from metastore.kafka.admin import Admin
from metastore.kafka.settings import KafkaSettings
from metastore.runtime.processing_log_settings import ProcessingLogSettings
from tests.queries.test_query_nodes import ksql, queries
from tests.queries.test_query_statistics import numbered_stream, send_numbered
from tests.queries.test_skipped_records import earliest, values_to_end
from tests.queries.test_spark_jobs import read_all
from tests.support.kafka import unique
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually


def test_a_failing_query_is_error_with_its_cause_and_starts_again_after_its_backoff(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_settings: KafkaSettings) -> None:
    source, sink, producer, query_id = _copying(spark_node, "HEALTH", producer_factory,
                                                kafka_settings)
    [commits] = (spark_node.log.parent / "data").glob(f"query-checkpoints/**/{query_id}/commits")
    aside = commits.with_name("commits.held")
    commits.rename(aside)
    commits.write_text("a disk that refuses writes\n")
    try:
        send_numbered(producer, source, range(3, 6))
        seen = until_state(spark_node, query_id, "ERROR")
        [explained] = ksql(spark_node, f"EXPLAIN {query_id};")
        errors = explained["queryDescription"]["queryErrors"]
        assert seen["errorMessage"] in [e["errorMessage"] for e in errors], errors
        assert {e["type"] for e in errors} == {"UNKNOWN"}, errors
        assert all(isinstance(e["timestamp"], int) for e in errors)
        metrics = httpx.get(f"{spark_node.url}/metrics", timeout=10).text
        assert f'metastore_query_up{{query_id="{query_id}"}} 0.0' in metrics
        [logged, *_] = eventually(lambda: _failures_logged(kafka_settings, spark_node, query_id),
                                  60, "the failure in the processing log", interval=1)
        assert logged["level"] == "ERROR" and logged["message"]["type"] == 4
        thread_error = logged["message"]["kafkaStreamsThreadError"]
        assert thread_error["errorMessage"] == "Unhandled exception caught in streams thread"
        assert seen["errorMessage"] in [cause for entry in _failures_logged(
            kafka_settings, spark_node, query_id) or [] for cause in
            entry["message"]["kafkaStreamsThreadError"]["cause"]]
    finally:
        _give_back(commits, aside)
    until_state(spark_node, query_id, "RUNNING", timeout=120)
    send_numbered(producer, source, range(6, 9))
    written: set[int] = set()

    def every_record() -> bool:  # those of the failed micro-batch twice: at least once
        written.update(json.loads(v or b"")["V"] for _, v, _ in read_all(kafka_settings, sink, 9))
        return written == set(range(9))

    eventually(every_record, 60, lambda: f"every record written: {sorted(written)}", interval=1)


def test_records_too_large_for_the_sink_are_a_user_error_until_the_topic_takes_them(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        topic_factory: Callable[..., str], kafka_bootstrap: str,
        kafka_settings: KafkaSettings) -> None:
    name = unique("LARGE").upper().replace("-", "_")
    sink = topic_factory(partitions=1, config={"max.message.bytes": "200"})
    ksql(spark_node, f"CREATE STREAM {name} (ID INT KEY, PAD STRING) WITH (KAFKA_TOPIC="
                     f"'{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    producer = producer_factory()
    for i in range(3):
        producer.produce(name.lower(), key=struct.pack(">i", i),
                         value=json.dumps({"PAD": "x" * 500}))
    assert producer.flush(30) == 0
    [created] = earliest(spark_node, f"CREATE STREAM {name}_OUT WITH (KAFKA_TOPIC='{sink}') AS "
                                     f"SELECT ID, PAD FROM {name};")
    query_id = created["commandStatus"]["queryId"]
    seen = until_state(spark_node, query_id, "ERROR", timeout=120)
    assert "RecordTooLarge" in (seen["errorMessage"] or ""), seen
    [explained] = ksql(spark_node, f"EXPLAIN {query_id};")
    errors = explained["queryDescription"]["queryErrors"]
    assert errors[-1]["type"] == "USER", errors
    [logged, *_] = eventually(
        lambda: entries_of(kafka_settings, spark_node, f"processing.{query_id}"), 60,
        "the production error in the processing log", interval=1)
    assert logged["message"]["type"] == 3 and logged["message"]["productionError"]["errorMessage"]

    _set_topic_config(kafka_bootstrap, sink, "max.message.bytes", "1048588")
    until_state(spark_node, query_id, "RUNNING", timeout=120)
    assert len(read_all(kafka_settings, sink, 3)) == 3


def test_a_query_whose_sink_is_deleted_is_a_system_error_until_the_topic_is_back(
        spark_node: ServerProcess, producer_factory: Callable[..., Producer],
        kafka_admin: Admin, kafka_settings: KafkaSettings) -> None:
    """The suite's Spark node classifies a sink its producer cannot deliver to as SYSTEM
    (its ``ksql.error.classifier.regex.sink``; ksqlDB's own classifiers leave a missing sink
    UNKNOWN), and its sink producers give up on a record after 20 s
    (``ksql.streams.producer.delivery.timeout.ms``; Kafka's default is 120 s)."""
    source, sink, producer, query_id = _copying(spark_node, "SINKLESS", producer_factory,
                                                kafka_settings)
    assert kafka_admin.delete_until_gone(sink, 30)
    send_numbered(producer, source, range(3, 6))
    seen = until_state(spark_node, query_id, "ERROR", timeout=120)
    [explained] = ksql(spark_node, f"EXPLAIN {query_id};")
    errors = explained["queryDescription"]["queryErrors"]
    assert errors[-1]["type"] == "SYSTEM", errors
    assert re.search("not present in metadata|Expiring [0-9]+ record", seen["errorMessage"]), seen
    logged = eventually(lambda: entries_of(kafka_settings, spark_node, f"processing.{query_id}"),
                        60, "the production error in the processing log", interval=1)
    assert logged[0]["message"]["type"] == 3
    assert sink in logged[0]["message"]["productionError"]["errorMessage"]

    kafka_admin.create(sink, partitions=1)
    until_state(spark_node, query_id, "RUNNING", timeout=120)
    written = {json.loads(v or b"")["V"] for _, v, _ in read_all(kafka_settings, sink, 3)}
    assert written == {3, 4, 5}, "the records sent while the sink was gone, once it is back"


def _copying(server: ServerProcess, prefix: str, producer_factory: Callable[..., Producer],
             kafka_settings: KafkaSettings) -> tuple[str, str, Producer, str]:
    """A numbered stream's source topic, the sink of a CSAS copying it, a producer and the
    CSAS's query id, once its first three records are in the sink."""
    name, source = numbered_stream(server, prefix)
    sink = f"{source}-out"
    producer = producer_factory()
    send_numbered(producer, source, range(3))
    [created] = earliest(server, f"CREATE STREAM {name}_OUT WITH (KAFKA_TOPIC='{sink}') AS "
                                 f"SELECT ID, V FROM {name};")
    assert len(read_all(kafka_settings, sink, 3)) == 3
    return source, sink, producer, str(created["commandStatus"]["queryId"])


def _set_topic_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def entries_of(settings: KafkaSettings, server: ServerProcess, logger_name: str
               ) -> list[dict[str, Any]] | None:
    entries = [json.loads(value) for value in
               values_to_end(settings, ProcessingLogSettings().topic(server.service_id))]
    return [e for e in entries if e["logger"] == logger_name] or None


def _failures_logged(settings: KafkaSettings, server: ServerProcess, query_id: str
                     ) -> list[dict[str, Any]] | None:
    """The processing log's entries of ``query_id``'s failures (ksqlDB's
    KAFKA_STREAMS_THREAD_ERROR), once there is one."""
    entries = [json.loads(value) for value in
               values_to_end(settings, ProcessingLogSettings().topic(server.service_id))]
    found = [e for e in entries
             if e["logger"] == f"processing.{query_id}.ksql.logger.thread.exception.uncaught"]
    return found or None


def until_state(server: ServerProcess, query_id: str, state: str,
                timeout: float = 60) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.update(queries(server)[query_id])
        return seen["state"] == state

    eventually(reached, timeout, lambda: f"{query_id} to be {state}: {seen}", interval=0.5)
    return seen


def _give_back(commits: Path, aside: Path) -> None:
    commits.unlink()
    aside.replace(commits)
